// Shape inference: Keras' compute_output_shape for the layers of the config language.
#include "spec/shapes.h"

#include <fmt/format.h>

#include "core/sizes.h"
#include "core/error.h"
#include "spec/layers.h"

namespace rnntrain {

[[noreturn]] static void shape_error(const LayerSpec& l, const std::string& what) {
  throw ConfigError(fmt::format("{}: layer '{}' ({}): {}", l.loc.str(), l.name, layer_kind_name(l.kind), what));
}

// A parameter count computed with checked arithmetic (nullopt: it overflowed), or ConfigError
// naming the layer: sizes come from configs and imported files.
static int64_t params_or_fail(const LayerSpec& l, std::optional<int64_t> n) {
  if (!n || *n < 0)
    shape_error(l, "its parameter count does not fit in 64 bits; use fewer units or features (each is at most 2^24)");
  return *n;
}

// a * b + c, checked.
static std::optional<int64_t> mul_add(int64_t a, int64_t b, int64_t c) {
  const std::optional<int64_t> ab = checked_mul(a, b);
  return ab ? checked_add(*ab, c) : std::nullopt;
}

int64_t recurrent_params(const LayerSpec& l, int64_t input) {
  const int64_t g = cell_traits(l.kind).gates, u = l.units, bias = bias_rows(l);
  // g * u * (input + u) + bias * g * u
  const std::optional<int64_t> gu = checked_mul(g, u), iu = checked_add(input, u);
  const std::optional<int64_t> b = gu ? checked_mul(bias, *gu) : std::nullopt;
  return params_or_fail(l, gu && iu && b ? mul_add(*gu, *iu, *b) : std::nullopt);
}

static Shape with_batch(const Shape& s) {
  Shape b{-1};
  b.insert(b.end(), s.begin(), s.end());
  return b;
}

// The steps a window of `size` (dilated by `dilation`) leaves of `steps` (-1: unknown until the data
// comes), ConfigError where the sequence is shorter than a valid window.
static int64_t steps_out(const LayerSpec& l, int64_t steps, int64_t size, int64_t dilation) {
  if (!checked_mul(size - 1, dilation) || (size - 1) * dilation >= kMaxDim)
    shape_error(l, "its window spans more than 2^24 steps; use a smaller size or dilation_rate");
  const Window w = window_1d(steps, size, l.strides, dilation, l.padding);
  if (steps >= 0 && w.out < 1)
    shape_error(l, fmt::format("its window spans {} steps, more than the {} the input has; use padding: same, a "
                               "smaller window or longer sequences", (size - 1) * dilation + 1, steps));
  return w.out;
}

static void need_sequence(const LayerSpec& l, const Shape& in, const std::string& prev) {
  if (in.size() != 2)
    shape_error(l, fmt::format("expects a sequence input (batch, timesteps, features) but gets {} from '{}'. "
                               "If '{}' is recurrent, set return_sequences: true on it.",
                               shape_str(with_batch(in)), prev, prev));
}

std::vector<LayerShape> infer_shapes(const ModelSpec& model) {
  std::vector<LayerShape> out;
  if (model.layers.empty() || model.layers[0].kind != LayerKind::Input)
    throw ConfigError("model.layers: the first layer must be {type: Input, shape: [...]}");
  LayerShape cur;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerSpec& l = model.layers[i];
    const std::string prev = i ? model.layers[i - 1].name : "";
    LayerShape s;
    s.in = cur.out;
    s.mask_in = cur.mask_out;
    s.mask_out = cur.mask_out;
    switch (l.kind) {
      case LayerKind::Input:
        if (i != 0) shape_error(l, "Input must be the first layer");
        if (l.shape.empty() || l.shape.size() > 2) shape_error(l, "shape must be [timesteps] for token ids or [timesteps, features]");
        if (l.shape.size() == 2 && l.shape[1] < 1)
          shape_error(l, fmt::format("shape {} has no features; every step needs at least one",
                                     shape_str(with_batch(l.shape))));
        s.out = l.shape;
        s.mask_out = false;
        break;
      case LayerKind::Embedding:
        if (s.in.size() != 1)
          shape_error(l, fmt::format("expects token ids of shape (batch, timesteps) but gets {}; give the Input layer shape: [timesteps]", shape_str(with_batch(s.in))));
        s.out = {s.in[0], l.output_dim};
        s.mask_out = l.mask_zero;
        s.params = params_or_fail(l, checked_mul(l.input_dim, l.output_dim));
        s.weights = 1;
        break;
      case LayerKind::Masking:
        need_sequence(l, s.in, prev);
        s.out = s.in;
        s.mask_out = true;
        break;
      default:  // the recurrent cells (spec/cells.h)
        need_sequence(l, s.in, prev);
        s.out = l.return_sequences ? Shape{s.in[0], l.units} : Shape{l.units};
        s.mask_out = l.return_sequences && s.mask_in;
        s.params = recurrent_params(l, s.in[1]);
        s.weights = l.use_bias ? 3 : 2;
        break;
      case LayerKind::Bidirectional: {
        // The parser and the Keras reader check wrappers with their own words; this is the one check
        // every model passes (the backends and the parameters rely on it).
        if (!l.inner || !is_recurrent(l.inner->kind)) shape_error(l, "must wrap " + cell_names(true) + " layer");
        need_sequence(l, s.in, prev);
        const LayerSpec& r = *l.inner;
        const int64_t u = params_or_fail(l, checked_mul(l.merge_mode == MergeMode::Concat ? 2 : 1, r.units));
        s.out = r.return_sequences ? Shape{s.in[0], u} : Shape{u};
        s.mask_out = r.return_sequences && s.mask_in;
        s.params = params_or_fail(l, checked_mul(2, recurrent_params(r, s.in[1])));
        s.weights = 2 * (r.use_bias ? 3 : 2);
        break;
      }
      case LayerKind::Dropout:
      case LayerKind::Activation:
        s.out = s.in;
        break;
      case LayerKind::SpatialDropout1D:
      case LayerKind::LayerNormalization:
        if (l.kind == LayerKind::SpatialDropout1D) need_sequence(l, s.in, prev);
        s.out = s.in;
        if (l.kind == LayerKind::LayerNormalization) {
          const int64_t n = (l.scale ? 1 : 0) + (l.center ? 1 : 0);
          s.params = params_or_fail(l, checked_mul(n, s.in.back()));
          s.weights = static_cast<size_t>(n);
        }
        break;
      case LayerKind::Conv1D: {
        need_sequence(l, s.in, prev);
        s.out = {steps_out(l, s.in[0], l.kernel_size, l.dilation_rate), l.filters};
        const std::optional<int64_t> kc = checked_mul(l.kernel_size, s.in[1]);
        s.params = params_or_fail(l, kc ? mul_add(*kc, l.filters, l.use_bias ? l.filters : 0) : std::nullopt);
        s.weights = l.use_bias ? 2 : 1;
        break;
      }
      case LayerKind::MaxPooling1D:
      case LayerKind::AveragePooling1D:
        need_sequence(l, s.in, prev);
        s.out = {steps_out(l, s.in[0], l.pool_size, 1), s.in[1]};
        break;
      case LayerKind::GlobalAveragePooling1D:
      case LayerKind::GlobalMaxPooling1D:
        need_sequence(l, s.in, prev);
        s.out = l.keepdims ? Shape{1, s.in[1]} : Shape{s.in[1]};
        break;
      case LayerKind::Flatten:
        if (s.in.size() == 2 && s.in[0] < 0)
          shape_error(l, fmt::format("needs a fixed number of timesteps to flatten {}; give the Input layer a "
                                     "shape like [100, {}]", shape_str(with_batch(s.in)), s.in[1]));
        s.out = {s.in.size() == 2 ? s.in[0] * s.in[1] : s.in[0]};
        if (s.out[0] > kMaxDim)
          shape_error(l, fmt::format("flattens {} into {} features, more than {}", shape_str(with_batch(s.in)),
                                     s.out[0], kMaxDim));
        break;
      case LayerKind::Dense:
        s.out = s.in;
        s.out.back() = l.units;
        s.params = params_or_fail(l, mul_add(s.in.back(), l.units, l.use_bias ? l.units : 0));
        s.weights = l.use_bias ? 2 : 1;
        break;
      case LayerKind::TimeDistributed: {
        if (!l.inner || (l.inner->kind != LayerKind::Dense && l.inner->kind != LayerKind::Dropout))
          shape_error(l, "must wrap a Dense or a Dropout layer");
        need_sequence(l, s.in, prev);
        const LayerSpec& d = *l.inner;
        if (d.kind == LayerKind::Dropout) {
          s.out = s.in;
          break;
        }
        s.out = {s.in[0], d.units};
        s.params = params_or_fail(l, mul_add(s.in[1], d.units, d.use_bias ? d.units : 0));
        s.weights = d.use_bias ? 2 : 1;
        break;
      }
    }
    if (ends_mask(l.kind)) s.mask_out = false;
    out.push_back(s);
    cur = s;
  }
  return out;
}

std::vector<std::string> dropped_masks(const ModelSpec& model, const std::vector<LayerShape>& shapes) {
  std::vector<std::string> out;
  for (size_t i = 0; i < model.layers.size() && i < shapes.size(); ++i) {
    const LayerSpec& l = model.layers[i];
    const LayerTraits* t = find_layer(l.kind);
    if (shapes[i].mask_in && t && t->mask == MaskRule::Drop)
      out.push_back(fmt::format("layer '{}' ({}) drops the mask that reaches it, as Keras does: the layers after it "
                                "see the padded steps too", l.name, layer_kind_name(l.kind)));
  }
  return out;
}

void check_input_batch(const LayerSpec& in, const Tensor& x) {
  const bool tokens = in.shape.size() == 1;
  const int want_rank = tokens ? 2 : 3;
  if (x.rank() != want_rank)
    throw DataError(fmt::format("the input batch has shape {} but Input layer '{}' ({}) declares shape {}; {}",
                                shape_str(x.shape), in.name, in.loc.str(), shape_str(in.shape),
                                tokens ? "token ids must be (batch, timesteps)"
                                       : "features must be (batch, timesteps, features)"));
  if (!tokens && in.shape[1] > 0 && x.dim(2) != in.shape[1])
    throw DataError(fmt::format("the input has {} features per step but Input layer '{}' ({}) declares {}; fix the "
                                "data or the Input shape",
                                x.dim(2), in.name, in.loc.str(), in.shape[1]));
}

}  // namespace rnntrain
