// The backend registry: make_engine picks the CPU or the CUDA engine (backend/cuda/cuda_engine.cpp)
// for cfg.device, and describe_execution says how that device runs a model. The one file outside
// backend/cuda that knows CUDA exists (RNNTRAIN_WITH_CUDA is defined for it when the CUDA backend is
// built).
#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "spec/shapes.h"
#include "backend/engine.h"
#include "backend/cpu/onednn_stack.h"
#include "plan/gpu_plan.h"

#ifdef RNNTRAIN_WITH_CUDA
#include "backend/cuda/cuda_engine.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/session.h"
#include "backend/cuda/wavefront.h"
#endif

namespace rnntrain {


std::string gpu_unavailable_reason() {
#ifdef RNNTRAIN_WITH_CUDA
  return cuda::unavailable_reason();
#else
  return "this rnntrain was built without the CUDA backend (configure with -DRNNTRAIN_CUDA=ON where nvcc and cuDNN "
         "are installed)";
#endif
}

std::string gpu_description() {
#ifdef RNNTRAIN_WITH_CUDA
  if (cuda::unavailable_reason().empty()) return cuda::device_description();
#endif
  return "";
}

double device_peak_mib() {
#ifdef RNNTRAIN_WITH_CUDA
  return static_cast<double>(cuda::device_bytes_peak()) / (1024.0 * 1024.0);
#else
  return -1.0;
#endif
}

void reset_device_peak() {
#ifdef RNNTRAIN_WITH_CUDA
  cuda::reset_device_bytes_peak();
#endif
}

int64_t gpu_free_bytes() {
#ifdef RNNTRAIN_WITH_CUDA
  if (cuda::unavailable_reason().empty()) return cuda::free_device_bytes();
#endif
  return -1;
}

int64_t gpu_graph_steps() {
#ifdef RNNTRAIN_WITH_CUDA
  return cuda::graph_steps();
#else
  return 0;
#endif
}

int64_t gpu_graph_captures() {
#ifdef RNNTRAIN_WITH_CUDA
  return cuda::graph_captures();
#else
  return 0;
#endif
}

int64_t gpu_wavefront_passes() {
#ifdef RNNTRAIN_WITH_CUDA
  return cuda::wavefront_passes();
#else
  return 0;
#endif
}

int64_t gpu_wavefront2_passes() {
#ifdef RNNTRAIN_WITH_CUDA
  return cuda::wavefront2_passes();
#else
  return 0;
#endif
}

int64_t gpu_wavefront2_backward_passes() {
#ifdef RNNTRAIN_WITH_CUDA
  return cuda::wavefront2_backward_passes();
#else
  return 0;
#endif
}

bool trains_on_gpu(const Config& cfg) {
#ifdef RNNTRAIN_WITH_CUDA
  return cfg.device != Device::Cpu && gpu_unavailable_reason().empty();
#else
  (void)cfg;
  return false;
#endif
}

std::unique_ptr<Engine> make_engine(const Config& cfg, Params params, Rng& dropout_rng, Comm* ranks) {
  if (cfg.device == Device::Cpu) return make_cpu_engine(cfg, std::move(params), dropout_rng, ranks);
  const std::string why = gpu_unavailable_reason();
  if (!why.empty()) {
    if (cfg.device == Device::Cuda)
      throw UsageError(fmt::format("device: cuda was requested but {}; use device: cpu or auto", why));
    log_debug("device auto: using the CPU ({})", why);
    return make_cpu_engine(cfg, std::move(params), dropout_rng, ranks);
  }
#ifdef RNNTRAIN_WITH_CUDA
  return cuda::make_cuda_engine(cfg, std::move(params), dropout_rng, ranks);
#else
  return make_cpu_engine(cfg, std::move(params), dropout_rng, ranks);
#endif
}

std::string describe_execution(const Config& cfg, const ResolvedModel& model) {
#ifdef RNNTRAIN_WITH_CUDA
  if (trains_on_gpu(cfg)) {
    const bool autotuned = cfg.plan.precision == Precision::Auto || cfg.plan.algo == RnnAlgo::Auto;
    const Precision p = cfg.plan.precision == Precision::Auto ? Precision::Bf16 : cfg.plan.precision;
    const RnnAlgo a = cfg.plan.algo == RnnAlgo::Auto ? RnnAlgo::Wavefront : cfg.plan.algo;
    const std::string head = autotuned ? "plan.precision or plan.algo is auto: autotune measures cuDNN's algorithms "
                                         "and the wavefront kernels on the first batch; where bf16 and the "
                                         "wavefront kernels are chosen:\n"
                                       : "";
    // The CUDA engine plans with its own stack rule: with the wavefront kernels, GRUs with reset_after:
    // false may form stacks that cuDNN's rule leaves as generic layers.
    const ResolvedModel gm = resolve_model(cfg.model, cfg.plan.fuse, gpu_stack_rule(p, a, cuda::own_kernel_check()));
    const std::string own = same_stages(gm.plan, model.plan)
                                ? ""
                                : "On the GPU, with the wavefront kernels running GRUs with reset_after: false:\n" +
                                      describe_plan(gm);
    return head + own + describe_gpu_plan(gm, plan_gpu(gm, p, a, cuda::own_kernel_check()), p, a);
  }
#endif
  return cpu::describe_cpu_plan(cfg.model, model.plan, cfg.plan.cpu, cfg.plan.precision == Precision::Bf16);
}

}  // namespace rnntrain
