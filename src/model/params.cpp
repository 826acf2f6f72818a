// Per-layer parameters in Keras layout and order, created and initialised on the host (init_params),
// plus the flat views the optimizer uses. The initialisers themselves are in init.cpp.
#include "model/params.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>
#include <utility>

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

namespace {

// A weight's regularizer and constraint from its layer (the wrapped one for wrappers), by its name
// without forward/ or backward/; null for a weight that takes none.
std::pair<const Regularizer*, const Constraint*> weight_settings(const LayerSpec& owner, const std::string& param) {
  const LayerSpec& l = owner.inner ? *owner.inner : owner;
  const std::string_view name = std::string_view(param).substr(param.rfind('/') + 1);
  if (name == "kernel") return {&l.kernel_regularizer, &l.kernel_constraint};
  if (name == "recurrent_kernel") return {&l.recurrent_regularizer, &l.recurrent_constraint};
  if (name == "bias") return {&l.bias_regularizer, &l.bias_constraint};
  if (name == "embeddings") return {&l.embeddings_regularizer, &l.embeddings_constraint};
  if (name == "gamma") return {&l.gamma_regularizer, &l.gamma_constraint};
  if (name == "beta") return {&l.beta_regularizer, &l.beta_constraint};
  return {nullptr, nullptr};
}

}  // namespace

std::vector<Regularizer> weight_regularizers(const ModelSpec& model, const Params& params) {
  std::vector<Regularizer> out;
  for (size_t i = 0; i < params.layers.size(); ++i)
    for (const Param& p : params.layers[i].params) {
      const Regularizer* r = weight_settings(model.layers.at(i), p.name).first;
      out.push_back(r ? *r : Regularizer{});
    }
  return out;
}

std::vector<Constraint> weight_constraints(const ModelSpec& model, const Params& params) {
  std::vector<Constraint> out;
  std::vector<int32_t> groups;
  for (size_t i = 0; i < params.layers.size(); ++i)
    for (const Param& p : params.layers[i].params) {
      const Constraint* c = weight_settings(model.layers.at(i), p.name).second;
      out.push_back(c ? *c : Constraint{});
      if (out.back().active())  // checks the axes
        constraint_groups(out.back(), p.value.shape, groups, fmt::format("layer '{}': {}", model.layers[i].name, p.name));
    }
  return out;
}

int64_t constraint_groups(const Constraint& c, const Shape& shape, std::vector<int32_t>& group, const std::string& what) {
  const int rank = static_cast<int>(shape.size());
  std::vector<bool> reduce(static_cast<size_t>(std::max(rank, 1)), false);
  for (int a : c.axis) {
    const int k = a < 0 ? a + rank : a;
    if (k < 0 || k >= rank)
      throw ConfigError(fmt::format("{}: the constraint's axis {} is outside the weight's {} dimension(s) {}; use an "
                                    "axis from {} to {}", what, a, rank, shape_str(shape), -rank, rank - 1));
    reduce[static_cast<size_t>(k)] = true;
  }
  // Element e's group: its index over the axes not reduced (row-major), so each group is one norm.
  int64_t n = 1, groups = 1;
  for (int64_t d : shape) n *= d;
  group.assign(static_cast<size_t>(n), 0);
  int64_t stride = 1;  // of the kept axes seen so far, from the last one
  for (int a = rank - 1; a >= 0; --a) {
    if (reduce[static_cast<size_t>(a)]) continue;
    int64_t inner = 1;  // elements per step along axis a
    for (int b = a + 1; b < rank; ++b) inner *= shape[b];
    for (int64_t e = 0; e < n; ++e) group[static_cast<size_t>(e)] += static_cast<int32_t>((e / inner) % shape[a] * stride);
    stride *= shape[a];
  }
  groups = stride;
  return groups;
}

ConstraintRule constraint_rule(const Constraint& c) {
  return {static_cast<int>(c.kind), static_cast<float>(c.min_value), static_cast<float>(c.max_value),
          static_cast<float>(c.rate)};
}

void apply_constraints(const std::vector<Constraint>& cs, const std::vector<Param*>& params) {
  std::vector<int32_t> group;
  std::vector<double> sums;
  for (size_t i = 0; i < cs.size() && i < params.size(); ++i) {
    if (!cs[i].active()) continue;
    Tensor& w = params[i]->value;
    sums.assign(static_cast<size_t>(constraint_groups(cs[i], w.shape, group, params[i]->name)), 0.0);
    for (int64_t k = 0; k < w.numel(); ++k) sums[group[k]] += static_cast<double>(w[k]) * w[k];
    const ConstraintRule rule = constraint_rule(cs[i]);
    for (int64_t k = 0; k < w.numel(); ++k) w[k] = rule(w[k], std::sqrt(static_cast<float>(sums[group[k]])));
  }
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
      case LayerKind::Dropout:
      case LayerKind::SpatialDropout1D:
      case LayerKind::MaxPooling1D:
      case LayerKind::AveragePooling1D:
      case LayerKind::GlobalAveragePooling1D:
      case LayerKind::GlobalMaxPooling1D:
      case LayerKind::Flatten:
      case LayerKind::Activation: break;
      case LayerKind::Conv1D:  // kernel [kernel_size, in, filters], bias [filters]
        need_positive(l, "filters", l.filters);
        add_param(lp, l, "kernel", {l.kernel_size, in.back(), l.filters}, l.kernel_initializer, rng);
        if (l.use_bias) add_param(lp, l, "bias", {l.filters}, l.bias_initializer, rng);
        break;
      case LayerKind::LayerNormalization:  // gamma, beta [features], as Keras creates them
        if (l.scale) add_param(lp, l, "gamma", {in.back()}, l.gamma_initializer, rng);
        if (l.center) add_param(lp, l, "beta", {in.back()}, l.beta_initializer, rng);
        break;
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
        if (l.inner->kind == LayerKind::Dense) add_dense(lp, l, *l.inner, in.back(), rng);
        break;
    }
    params.layers.push_back(std::move(lp));
  }
  return params;
}

std::vector<std::string> keras_variable_paths(const ModelSpec& model, const Params& params) {
  std::vector<std::string> out;
  for (size_t i = 0; i < params.layers.size() && i < model.layers.size(); ++i) {
    const LayerSpec& l = model.layers[i];
    for (const Param& p : params.layers[i].params) {
      std::string w = p.name;
      if (is_recurrent(l.kind)) {
        w = fmt::format("{}/{}", cell_traits(l.kind).keras_cell, w);
      } else if (l.kind == LayerKind::Bidirectional) {
        const size_t slash = w.find('/');
        w = fmt::format("{}_{}/{}/{}", w.substr(0, slash), l.inner->name, cell_traits(l.inner->kind).keras_cell,
                        w.substr(slash + 1));
      } else if (l.kind == LayerKind::TimeDistributed) {
        w = l.inner->name + "/" + w;
      }
      out.push_back("sequential/" + l.name + "/" + w);
    }
  }
  return out;
}

}  // namespace rnntrain
