// The memory estimate and its check (memory.h). Sizes are doubles: a config can ask for more than
// int64 bytes, and the answer is still "it does not fit".
#include "train/memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "core/sizes.h"
#include "core/error.h"
#include "spec/shapes.h"
#include "backend/engine.h"

namespace rnntrain {

MemoryNeed estimate_memory(const Config& cfg, int64_t timesteps, bool training) {
  const std::vector<LayerShape> shapes = infer_shapes(cfg.model);
  const double B = static_cast<double>(cfg.train.batch_size), T = static_cast<double>(std::max<int64_t>(timesteps, 1));
  MemoryNeed m;
  for (size_t i = 1; i < shapes.size(); ++i) {
    m.params += static_cast<double>(shapes[i].params);
    const Shape& out = shapes[i].out;
    double floats = B * (out.empty() ? 1.0 : static_cast<double>(std::max<int64_t>(out.back(), 1)));
    if (out.size() == 2) floats *= T;  // [T, F]: a sequence
    const LayerSpec& l = cfg.model.layers[i];
    const LayerSpec& cell = l.kind == LayerKind::Bidirectional && l.inner ? *l.inner : l;
    if (training && is_recurrent(cell.kind)) {  // the tape: every step's gates, h and c
      const double dirs = l.kind == LayerKind::Bidirectional ? 2.0 : 1.0;
      floats += B * T * dirs * static_cast<double>(cell_traits(cell.kind).gates + 2) * static_cast<double>(cell.units);
    }
    m.activations += 4.0 * floats * (training ? 2.0 : 1.0);  // and their gradients
  }
  m.weights = 8.0 * m.params;  // float32 values and gradients
  if (training) m.slots = 4.0 * m.params * optimizer_slot_kinds(cfg.train.optimizer).buffers();
  return m;
}

void check_memory(const Config& cfg, int64_t timesteps, bool training) {
  const MemoryNeed m = estimate_memory(cfg, timesteps, training);
  const bool gpu = trains_on_gpu(cfg);
  const double limit = static_cast<double>(gpu ? gpu_free_bytes() : host_available_bytes());
  const double need = m.total();
  if (limit < 0 || need <= limit) return;
  throw RuntimeError(fmt::format(
      "{}: the model needs at least {} of {} memory to {} ({:.3g} parameters: {} for their values and gradients, {} "
      "for the optimizer's slots, {} for a batch of {} x {} steps), and {} {} available. Lower the layers' units, "
      "train.batch_size or the sequence length{}",
      cfg.path, bytes_str(need), gpu ? "GPU" : "host", training ? "train" : "run", m.params, bytes_str(m.weights),
      bytes_str(m.slots), bytes_str(m.activations), cfg.train.batch_size, std::max<int64_t>(timesteps, 1), bytes_str(limit),
      gpu ? "are free on the GPU" : "are", gpu ? ", or use device: cpu" : ""));
}

}  // namespace rnntrain
