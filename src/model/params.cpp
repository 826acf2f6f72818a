// Per-layer parameters in Keras layout and order, created and initialised on the host (init_params),
// plus the flat views the optimizer uses. The initialisers themselves are in init.cpp.
#include "model/params.h"

#include <cmath>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "core/error.h"
#include "spec/shapes.h"

namespace rnntrain {

std::vector<Param*> Params::all() {
  std::vector<Param*> out;
  for (LayerParams& l : layers)
    for (Param& p : l.params) out.push_back(&p);
  return out;
}

int64_t Params::count() const {
  int64_t n = 0;
  for (const LayerParams& l : layers)
    for (const Param& p : l.params) n += p.value.numel();
  return n;
}

// Whether any value is inf or NaN (all exponent bits set), as an integer loop the compiler vectorizes.
static bool has_nonfinite(const std::vector<float>& v) {
  uint32_t bad = 0;
  for (float x : v) {
    uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    bad |= (~b & 0x7f800000u) == 0;
  }
  return bad != 0;
}

std::string Params::first_nonfinite() const {
  for (const LayerParams& l : layers)
    for (const Param& p : l.params)
      if (has_nonfinite(p.value.data)) return l.layer + "/" + p.name;
  return "";
}

void Params::zero_grad() {
  for (LayerParams& l : layers)
    for (Param& p : l.params) p.grad.zero();
}

namespace {

[[noreturn]] void layer_error(const LayerSpec& l, const std::string& what) {
  throw ConfigError(fmt::format("{}: layer '{}' ({}): {}", l.loc.str(), l.name, layer_kind_name(l.kind), what));
}

void need_positive(const LayerSpec& l, const char* key, int64_t v) {
  if (v <= 0) layer_error(l, fmt::format("{} must be a positive integer, got {}", key, v));
}

// Creates a parameter of `shape` and fills it, naming the layer and weight if the initialiser fails.
void add_param(LayerParams& out, const LayerSpec& l, const std::string& name, Shape shape,
               const Initializer& init, Rng& rng) {
  Param p;
  p.name = name;
  p.value = Tensor(shape);
  p.grad = Tensor(shape);
  try {
    fill_init(p.value, init, rng);
  } catch (const ConfigError& e) {
    layer_error(l, fmt::format("weight '{}': {}", name, e.what()));
  }
  out.params.push_back(std::move(p));
}

// kernel [I, G*H], recurrent_kernel [H, G*H], bias [G*H] (two rows: [2, G*H]), under `prefix`.
void add_recurrent(LayerParams& out, const LayerSpec& owner, const LayerSpec& r, int64_t input,
                   const std::string& prefix, Rng& rng) {
  need_positive(owner, "units", r.units);
  if (input <= 0) layer_error(owner, fmt::format("needs a known number of input features, got {}", input));
  const CellTraits& cell = cell_traits(r.kind);
  const int64_t h = r.units, gh = cell.gates * h;
  add_param(out, owner, prefix + "kernel", {input, gh}, r.kernel_initializer, rng);
  add_param(out, owner, prefix + "recurrent_kernel", {h, gh}, r.recurrent_initializer, rng);
  const int rows = bias_rows(r);
  if (rows == 2) {
    add_param(out, owner, prefix + "bias", {2, gh}, r.bias_initializer, rng);
  } else if (rows == 1 && cell.forget_gate >= 0 && r.unit_forget_bias) {
    // Keras: concat(bias_init((f*H,)), ones((H,)), bias_init((rest*H,))), each part with its own fans.
    add_param(out, owner, prefix + "bias", {gh}, Initializer{InitKind::Zeros}, rng);
    const int64_t f = cell.forget_gate;
    Tensor first({f * h}), rest({gh - (f + 1) * h});
    try {
      if (f > 0) fill_init(first, r.bias_initializer, rng);
      fill_init(rest, r.bias_initializer, rng);
    } catch (const ConfigError& e) {
      layer_error(owner, fmt::format("weight '{}bias': {}", prefix, e.what()));
    }
    float* b = out.params.back().value.ptr();
    for (int64_t j = 0; j < f * h; ++j) b[j] = first[j];
    for (int64_t j = 0; j < h; ++j) b[f * h + j] = 1.0f;
    for (int64_t j = 0; j < rest.numel(); ++j) b[(f + 1) * h + j] = rest[j];
  } else if (rows == 1) {
    add_param(out, owner, prefix + "bias", {gh}, r.bias_initializer, rng);
  }
}

void add_dense(LayerParams& out, const LayerSpec& owner, const LayerSpec& d, int64_t input, Rng& rng) {
  need_positive(owner, "units", d.units);
  if (input <= 0) layer_error(owner, fmt::format("needs a known number of input features, got {}", input));
  add_param(out, owner, "kernel", {input, d.units}, d.kernel_initializer, rng);
  if (d.use_bias) add_param(out, owner, "bias", {d.units}, d.bias_initializer, rng);
}

}  // namespace

std::vector<Regularizer> weight_regularizers(const ModelSpec& model, const Params& params) {
  std::vector<Regularizer> out;
  for (size_t i = 0; i < params.layers.size(); ++i) {
    const LayerSpec& owner = model.layers.at(i);
    const LayerSpec& l = owner.inner ? *owner.inner : owner;
    for (const Param& p : params.layers[i].params) {
      const std::string_view name = std::string_view(p.name).substr(p.name.rfind('/') + 1);  // no forward/ backward/
      out.push_back(name == "kernel"             ? l.kernel_regularizer
                    : name == "recurrent_kernel" ? l.recurrent_regularizer
                    : name == "bias"             ? l.bias_regularizer
                    : name == "embeddings"       ? l.embeddings_regularizer
                                                 : Regularizer{});
    }
  }
  return out;
}

double weight_penalty(const std::vector<Regularizer>& regs, const std::vector<Param*>& params, bool add_grads) {
  double sum = 0.0;
  for (size_t i = 0; i < regs.size() && i < params.size(); ++i) {
    if (!regs[i].active()) continue;
    const float l1 = static_cast<float>(regs[i].l1), l2 = static_cast<float>(regs[i].l2);
    Param& p = *params[i];
    for (int64_t k = 0; k < p.value.numel(); ++k) {
      const float w = p.value[k];
      sum += regs[i].l1 * std::fabs(w) + regs[i].l2 * static_cast<double>(w) * w;
      if (add_grads) p.grad[k] += l1 * static_cast<float>((w > 0.0f) - (w < 0.0f)) + l2 * (2.0f * w);
    }
  }
  return sum;
}

void refuse_activity_regularizers(const ModelSpec& model, const std::string& who) {
  for (const LayerSpec& l : model.layers)
    if (activity_regularizer_of(l).active())
      throw UsageError(fmt::format("{}: layer '{}' has an activity_regularizer, which data-parallel training does not "
                                   "support yet (Keras divides the penalty by the whole batch, and each rank sees a "
                                   "share of it); train it in one process, or remove the activity_regularizer",
                                   who, l.name));
}

void check_params_fit(const Params& params, const std::vector<LayerShape>& shapes) {
  if (params.layers.size() != shapes.size())
    throw RuntimeError(fmt::format("the parameters hold {} layers but the model has {}; they were not made for this "
                                   "model (check the weights file or init_from)",
                                   params.layers.size(), shapes.size()));
  for (size_t i = 0; i < shapes.size(); ++i)
    if (params.layers[i].params.size() != shapes[i].weights)
      throw RuntimeError(fmt::format("the parameters of layer {} ('{}') are {} tensors, the model's layer has {}; they "
                                     "were not made for this model (check the weights file or init_from)",
                                     i, params.layers[i].layer, params.layers[i].params.size(), shapes[i].weights));
}

Params init_params(const ModelSpec& model, Rng& rng) {
  const std::vector<LayerShape> shapes = infer_shapes(model);
  Params params;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerSpec& l = model.layers[i];
    const Shape& in = shapes[i].in;
    LayerParams lp;
    lp.layer = l.name;
    switch (l.kind) {
      case LayerKind::Input:
      case LayerKind::Masking:
      case LayerKind::Dropout: break;
      case LayerKind::Embedding:
        need_positive(l, "input_dim", l.input_dim);
        need_positive(l, "output_dim", l.output_dim);
        add_param(lp, l, "embeddings", {l.input_dim, l.output_dim}, l.embeddings_initializer, rng);
        break;
      default:  // the recurrent cells (spec/cells.h)
        add_recurrent(lp, l, l, in.back(), "", rng);
        break;
      case LayerKind::Bidirectional:
        add_recurrent(lp, l, *l.inner, in.back(), "forward/", rng);
        add_recurrent(lp, l, *l.inner, in.back(), "backward/", rng);
        break;
      case LayerKind::Dense: add_dense(lp, l, l, in.back(), rng); break;
      case LayerKind::TimeDistributed:
        add_dense(lp, l, *l.inner, in.back(), rng);
        break;
    }
    params.layers.push_back(std::move(lp));
  }
  return params;
}

}  // namespace rnntrain
