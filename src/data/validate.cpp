// check_dataset: what a loaded dataset must satisfy before training on a model. Each failure is
// one DataError naming the source, the array and the first offending sample, and saying what to
// change. It reads values; it does not repair or convert them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/dataset.h"
#include "data/loaders.h"

namespace rnntrain {

void check_counts(const Dataset& d) {
  // A 0-d array (a scalar) has no samples to count or slice: refused by name.
  auto scalar = [&](const Tensor& t, const char* what, const std::string& name) {
    if (!t.empty() && t.rank() == 0)
      throw DataError(fmt::format("{}: {} ({}) is a single number (a 0-d array), not one row per sample. Give an "
                                  "array whose first axis is the samples.", d.source, what, name));
  };
  scalar(d.x, "inputs", d.x_name);
  scalar(d.y, "targets", d.y_name);
  scalar(d.w, "sample weights", d.w_name);
  if (d.x.rank() == 0) return;  // no inputs: check_dataset says what is wrong
  const int64_t N = d.x.dim(0);
  if (!d.y.empty() && d.y.rank() > 0 && d.y.dim(0) != N)
    throw DataError(fmt::format("{}: targets ({}) have {} samples but inputs ({}) have {}. Both must have one row "
                                "per sample.", d.source, d.y_name, d.y.dim(0), d.x_name, N));
  if (!d.w.empty() && d.w.rank() > 0 && d.w.dim(0) != N)
    throw DataError(fmt::format("{}: sample weights ({}) have {} samples but inputs ({}) have {}. Give one weight per "
                                "sample (or one per sample and timestep).", d.source, d.w_name, d.w.dim(0), d.x_name, N));
  if (!d.lengths.empty() && static_cast<int64_t>(d.lengths.size()) != N)
    throw DataError(fmt::format("{}: {} sequence lengths for {} samples. Give one length per sample.", d.source,
                                d.lengths.size(), N));
}

namespace {

// "sample 3" or "sample 3, position (4, 0)" for flat index i of a [N, ...] tensor.
std::string where(const Tensor& t, int64_t i) {
  const int64_t row = t.shape.empty() || t.shape[0] == 0 ? 1 : t.numel() / t.shape[0];
  const int64_t n = i / row;
  int64_t rest = i % row;
  if (t.rank() <= 1) return fmt::format("sample {}", n);
  std::vector<int64_t> idx(static_cast<size_t>(t.rank() - 1));
  for (int k = t.rank() - 1; k >= 1; --k) {
    idx[static_cast<size_t>(k - 1)] = rest % t.shape[k];
    rest /= t.shape[k];
  }
  std::string pos;
  for (int64_t v : idx) pos += (pos.empty() ? "" : ", ") + std::to_string(v);
  return fmt::format("sample {}, position ({})", n, pos);
}

Shape batched(const Shape& s) {
  Shape b{-1};
  b.insert(b.end(), s.begin(), s.end());
  return b;
}

void check_finite(const Dataset& d, const Tensor& t, const std::string& name) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t[i]))
      throw DataError(fmt::format("{}: {} ({}) hold {} at {}. Fill or drop missing values before training.", d.source,
                                  name == "x" ? "inputs" : "targets", name == "x" ? d.x_name : d.y_name,
                                  std::isnan(t[i]) ? "NaN" : "Inf", where(t, i)));
}

void check_inputs(const Dataset& d, const ModelSpec& model) {
  const Shape& in = model.layers[0].shape;  // [T] token ids or [T, F] features
  const bool tokens = in.size() == 1;
  const std::string what = fmt::format("{}: inputs ({}) have shape {}", d.source, d.x_name, shape_str(d.x.shape));
  if (d.x.rank() != static_cast<int>(in.size()) + 1)
    throw DataError(fmt::format(
        "{}, but the model's Input layer expects {} (samples first). {}", what, shape_str(batched(in)),
        tokens ? "Token ids are a 2-D array (samples, timesteps) of integers."
               : "Features are a 3-D array (samples, timesteps, features); a univariate series needs a last axis "
                 "of size 1 (numpy: x[..., None])."));
  static const char* axis[] = {"timesteps", "features"};
  for (size_t k = 0; k < in.size(); ++k)
    if (in[k] >= 0 && d.x.dim(static_cast<int>(k) + 1) != in[k])
      throw DataError(fmt::format("{}, but the model's Input layer expects {}: {} {} vs {}. Change the Input shape "
                                  "(use None for a variable number of timesteps) or the data.", what,
                                  shape_str(batched(in)), axis[k], d.x.dim(static_cast<int>(k) + 1), in[k]));
  if (d.x.dim(0) == 0) throw DataError(fmt::format("{}: the inputs hold no samples.", d.source));
  check_finite(d, d.x, "x");

  if (model.layers.size() > 1 && model.layers[1].kind == LayerKind::Embedding) {
    const LayerSpec& e = model.layers[1];
    float hi = 0.0f;
    for (float v : d.x.data) hi = std::max(hi, v);
    for (int64_t i = 0; i < d.x.numel(); ++i) {
      const float v = d.x[i];
      if (v != std::floor(v) || v < 0.0f || v >= static_cast<float>(e.input_dim))
        throw DataError(fmt::format(
            "{}: token id {} at {} in inputs ({}) is {} for layer '{}' (Embedding, input_dim {}). Token ids are "
            "integers in [0, input_dim){}.", d.source, v, where(d.x, i), d.x_name,
            v != std::floor(v) ? "not an integer" : "out of range", e.name, e.input_dim,
            v >= static_cast<float>(e.input_dim) ? fmt::format(": set input_dim to at least {}", hi + 1) : ""));
    }
  }

  if (!d.lengths.empty()) {
    const int64_t T = d.x.dim(1);
    for (size_t n = 0; n < d.lengths.size(); ++n)
      if (d.lengths[n] < 1 || d.lengths[n] > T)
        throw DataError(fmt::format("{}: sequence length {} of sample {} is outside [1, {}] (the inputs have {} "
                                    "timesteps). Lengths count the valid steps at the start of each sequence.",
                                    d.source, d.lengths[n], n, T, T));
  }
}

void check_targets(const Dataset& d, const std::vector<LayerShape>& shapes, const LossSpec& loss) {
  const int64_t N = d.x.dim(0);
  if (d.y.empty() || d.y.rank() == 0)
    throw DataError(fmt::format("{}: no targets. Name the array that holds them with `targets` (default 'y'), or "
                                "use `rnntrain predict` for inputs without targets.", d.source));
  check_finite(d, d.y, "y");

  Shape out = shapes.back().out;  // [K] or [T, K]; None time steps take the data's
  for (size_t k = 0; k < out.size(); ++k)
    if (out[k] < 0 && d.x.rank() > 1) out[k] = d.x.dim(1);
  const Shape ys(d.y.shape.begin() + 1, d.y.shape.end());
  Shape labels(out.begin(), out.end() - 1), labels1 = labels;
  labels1.push_back(1);
  const int64_t K = out.back();
  const Targets targets = loss_info(loss.kind).targets;
  const bool sparse = targets == Targets::Labels;
  const bool ok = sparse ? (ys == labels || ys == labels1) : (ys == out || (K == 1 && ys == labels));
  if (!ok) {
    std::string hint;
    if (sparse && ys == out)
      hint = " The targets look one-hot: use loss categorical_crossentropy, or store integer labels.";
    else if (!sparse && ys == labels)
      hint = " The targets look like integer labels: use loss sparse_categorical_crossentropy, or one-hot encode "
             "them.";
    else if (out.size() == 2 && ys.size() < (sparse ? labels.size() : out.size()))
      hint = " The model returns a sequence but the targets have one value per sample: set return_sequences: false "
             "on the last recurrent layer.";
    else if (out.size() == 1 && ys.size() > (sparse ? labels.size() : out.size()))
      hint = " The targets have one value per timestep but the model returns one per sample: set "
             "return_sequences: true on the last recurrent layer.";
    else
      hint = fmt::format(" Make the last layer's units match the targets' last axis ({}).", ys.empty() ? 1 : ys.back());
    throw DataError(fmt::format("{}: targets ({}) have shape {}, but the model's output is {} and loss {} expects "
                                "targets of shape {}.{}", d.source, d.y_name, shape_str(d.y.shape),
                                shape_str(batched(out)), loss_name(loss.kind),
                                shape_str(batched(sparse ? labels : out)), hint));
  }

  const std::string what = fmt::format("{}: targets ({})", d.source, d.y_name);
  if (sparse) {
    for (int64_t i = 0; i < d.y.numel(); ++i) {
      const float v = d.y[i];
      if (v != std::floor(v) || v < 0.0f || v >= static_cast<float>(K))
        throw DataError(fmt::format("{}: label {} at {} is {}: {} needs integer labels in [0, {}) "
                                    "for the last layer's {} units. Relabel the classes 0..K-1 or give the last "
                                    "layer more units.", what, v, where(d.y, i),
                                    v != std::floor(v) ? "not an integer" : "out of range", loss_name(loss.kind), K,
                                    K));
    }
  } else if (targets == Targets::Distributions) {
    for (int64_t r = 0; r < d.y.numel() / K; ++r) {
      double sum = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const float v = d.y[r * K + k];
        if (v < 0.0f || v > 1.0f)
          throw DataError(fmt::format("{}: value {} at {} is outside [0, 1]: {} needs one-hot (or "
                                      "probability) rows.", what, v, where(d.y, r * K + k), loss_name(loss.kind)));
        sum += v;
      }
      if (std::fabs(sum - 1.0) > 1e-3) {
        const int64_t per_sample = d.y.numel() / K / N;  // 1, or T for sequence targets
        const std::string row = per_sample == 1 ? fmt::format("sample {}", r)
                                                : fmt::format("sample {}, step {}", r / per_sample, r % per_sample);
        throw DataError(fmt::format("{}: the row of {} sums to {:.6g}: {} needs one-hot (or probability) rows "
                                    "that sum to 1.", what, row, sum, loss_name(loss.kind)));
      }
    }
  } else if (targets == Targets::Probabilities) {
    for (int64_t i = 0; i < d.y.numel(); ++i)
      if (d.y[i] < 0.0f || d.y[i] > 1.0f)
        throw DataError(fmt::format("{}: value {} at {} is outside [0, 1]: {} needs 0/1 labels or probabilities.",
                                    what, d.y[i], where(d.y, i), loss_name(loss.kind)));
  }
}

// Sample weights: [N], or [N, T] against an output per timestep; finite and not negative.
void check_weights(const Dataset& d, const std::vector<LayerShape>& shapes) {
  if (d.w.empty()) return;
  const Shape& out = shapes.back().out;
  const int64_t T = out.size() == 2 ? (out[0] >= 0 ? out[0] : d.x.dim(1)) : -1;
  const bool ok = d.w.rank() == 1 || (d.w.rank() == 2 && T >= 0 && d.w.dim(1) == T) || (d.w.rank() == 2 && d.w.dim(1) == 1);
  if (!ok)
    throw DataError(fmt::format("{}: sample weights ({}) have shape {}, but the model's output is {}: give one weight "
                                "per sample, shape {}{}.", d.source, d.w_name, shape_str(d.w.shape), shape_str(batched(out)),
                                shape_str({d.w.dim(0)}),
                                T >= 0 ? fmt::format(", or one per sample and timestep, shape {}", shape_str({d.w.dim(0), T})) : ""));
  for (int64_t i = 0; i < d.w.numel(); ++i)
    if (!std::isfinite(d.w[i]) || d.w[i] < 0.0f)
      throw DataError(fmt::format("{}: sample weight {} at {} in {} is not a finite number >= 0; weights scale each "
                                  "sample's loss.", d.source, d.w[i], where(d.w, i), d.w_name));
}

}  // namespace

void check_dataset(const Dataset& d, const ModelSpec& model, const std::vector<LayerShape>& shapes,
                   const LossSpec& loss, bool need_targets) {
  if (model.layers.empty() || shapes.size() != model.layers.size())
    throw RuntimeError(fmt::format("check_dataset({}): the model has {} layers but {} shapes", d.source,
                                   model.layers.size(), shapes.size()));
  check_counts(d);
  check_inputs(d, model);
  if (need_targets) check_targets(d, shapes, loss);
  if (need_targets) check_weights(d, shapes);
}

}  // namespace rnntrain
