// Keras metrics as running means over an epoch: accuracy (binary, categorical, sparse; "accuracy"
// resolved by the loss), mae, mse and perplexity. Each batch counts by its unmasked positions, so
// result() is the mean over every position of the epoch. Not the loss (model/loss.cpp).
#include "model/metrics.h"

#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "model/loss.h"
#include "model/targets.h"

namespace rnntrain {

namespace {

// Running mean: total of per-position values over unmasked positions, and their count.
class MeanMetric : public Metric {
 public:
  double result() const override { return count_ > 0 ? total_ / count_ : 0.0; }
  void reset() override { total_ = count_ = 0.0; }
  void add(double total, double count) override { total_ += total, count_ += count; }
  std::pair<double, double> totals() const override { return {total_, count_}; }

 protected:
  double total_ = 0.0, count_ = 0.0;
};

int64_t argmax(const float* p, int64_t k) {  // first index of the maximum, as numpy
  int64_t best = 0;
  for (int64_t j = 1; j < k; ++j)
    if (p[j] > p[best]) best = j;
  return best;
}

enum class AccKind { Binary, Categorical, Sparse };  // MetricForm::accuracy's codes

// A metric whose per-position values are a loss's, after the loss's target checks.
MetricForm loss_form(const LossSpec& spec, const Shape& shape, const Tensor& target) {
  Tensor pred;
  pred.shape = shape;
  const char* who = loss_name(spec.kind);
  if (loss_info(spec.kind).targets == Targets::Labels) check_sparse_targets(who, pred, target, nullptr);
  else check_dense_targets(who, pred, target, nullptr);
  MetricForm f;
  f.loss = spec;
  return f;
}

// Keras compile()'s shape rule, for "accuracy" with a regression loss: one output unit -> binary;
// targets with one axis fewer (or a trailing 1 against K > 1) -> sparse; else categorical.
AccKind accuracy_by_shapes(const Tensor& pred, const Tensor& target) {
  if (pred.dim(-1) == 1) return AccKind::Binary;
  if (target.rank() < pred.rank() || (target.rank() > 0 && target.dim(-1) == 1)) return AccKind::Sparse;
  return AccKind::Categorical;
}

class Accuracy : public MeanMetric {
 public:
  // fixed: the kind, or nullopt to decide by shapes at each update. threshold: binary only.
  Accuracy(std::string name, std::optional<AccKind> fixed, double threshold)
      : fixed_(fixed), threshold_(threshold) {
    name_ = std::move(name);
  }

  void update(const Tensor& pred, const Tensor& target, const Tensor* mask) override {
    const AccKind kind = checked_kind(pred, target, mask);
    const TargetView v{shape_numel(pred.shape) / pred.dim(-1), pred.dim(-1)};
    // pred: [N, K]; target: [N, K] or labels [N]; one value per position in [0, 1].
    for (int64_t i = 0; i < v.n; ++i) {
      if (mask_weight(mask, i) == 0.0) continue;
      const float* p = pred.ptr() + i * v.k;
      double hit = 0.0;
      if (kind == AccKind::Binary) {
        const float* t = target.ptr() + i * v.k;
        int64_t same = 0;
        for (int64_t j = 0; j < v.k; ++j) same += t[j] == (p[j] > threshold_ ? 1.0f : 0.0f);
        hit = static_cast<double>(same) / static_cast<double>(v.k);
      } else if (kind == AccKind::Categorical) {
        hit = argmax(target.ptr() + i * v.k, v.k) == argmax(p, v.k) ? 1.0 : 0.0;
      } else {
        hit = target[i] == static_cast<float>(argmax(p, v.k)) ? 1.0 : 0.0;
      }
      total_ += hit;
      count_ += 1.0;
    }
  }

  MetricForm form(const Shape& shape, const Tensor& target) const override {
    Tensor pred;
    pred.shape = shape;
    MetricForm f;
    f.kind = MetricForm::Kind::Accuracy;
    f.accuracy = static_cast<int>(checked_kind(pred, target, nullptr));
    f.threshold = threshold_;
    return f;
  }

 private:
  AccKind checked_kind(const Tensor& pred, const Tensor& target, const Tensor* mask) const {
    const AccKind kind = fixed_ ? *fixed_ : accuracy_by_shapes(pred, target);
    const char* who = kind == AccKind::Binary        ? "binary_accuracy"
                      : kind == AccKind::Categorical ? "categorical_accuracy"
                                                     : "sparse_categorical_accuracy";
    if (kind == AccKind::Sparse) check_sparse_targets(who, pred, target, mask);
    else check_dense_targets(who, pred, target, mask);
    return kind;
  }

  std::optional<AccKind> fixed_;
  double threshold_;
};

// mae and mse: the per-position mean over the last axis, as the losses of the same name.
class ErrorMean : public MeanMetric {
 public:
  ErrorMean(std::string name, LossKind kind) {
    name_ = std::move(name);
    spec_.kind = kind;
  }
  void update(const Tensor& pred, const Tensor& target, const Tensor* mask) override {
    const LossValue l = compute_loss(spec_, pred, target, mask, nullptr);
    total_ += l.sum;
    count_ += l.count;
  }
  MetricForm form(const Shape& shape, const Tensor& target) const override {
    return loss_form(spec_, shape, target);
  }

 private:
  LossSpec spec_;
};

// exp(mean token crossentropy), from logits or probabilities as the loss reads its outputs; the
// crossentropy is against the raw targets (no label smoothing).
class Perplexity : public MeanMetric {
 public:
  Perplexity(std::string name, const LossSpec& loss) : spec_(loss) {
    name_ = std::move(name);
    spec_.label_smoothing = 0.0;
  }
  void update(const Tensor& pred, const Tensor& target, const Tensor* mask) override {
    const LossValue l = compute_loss(spec_, pred, target, mask, nullptr);
    total_ += l.sum;
    count_ += l.count;
  }
  double result() const override { return count_ > 0 ? std::exp(total_ / count_) : 0.0; }
  MetricForm form(const Shape& shape, const Tensor& target) const override {
    return loss_form(spec_, shape, target);
  }

 private:
  LossSpec spec_;
};

const char* default_name(MetricKind k) {
  switch (k) {
    case MetricKind::Accuracy: return "accuracy";
    case MetricKind::BinaryAccuracy: return "binary_accuracy";
    case MetricKind::CategoricalAccuracy: return "categorical_accuracy";
    case MetricKind::SparseCategoricalAccuracy: return "sparse_categorical_accuracy";
    case MetricKind::MAE: return "mae";
    case MetricKind::MSE: return "mse";
    case MetricKind::Perplexity: return "perplexity";
  }
  return "?";
}

}  // namespace

std::unique_ptr<Metric> make_metric(const MetricSpec& spec, const LossSpec& loss) {
  std::string name = spec.name.empty() ? default_name(spec.kind) : spec.name;
  // Binary accuracy thresholds probabilities at 0.5, logits at 0 (the same decision).
  const double threshold = loss.from_logits ? 0.0 : 0.5;
  switch (spec.kind) {
    case MetricKind::Accuracy: {
      std::optional<AccKind> kind;
      switch (loss_info(loss.kind).accuracy) {
        case AccuracyOf::None: break;
        case AccuracyOf::Binary: kind = AccKind::Binary; break;
        case AccuracyOf::Categorical: kind = AccKind::Categorical; break;
        case AccuracyOf::Sparse: kind = AccKind::Sparse; break;
      }
      return std::make_unique<Accuracy>(name, kind, threshold);
    }
    case MetricKind::BinaryAccuracy: return std::make_unique<Accuracy>(name, AccKind::Binary, threshold);
    case MetricKind::CategoricalAccuracy: return std::make_unique<Accuracy>(name, AccKind::Categorical, threshold);
    case MetricKind::SparseCategoricalAccuracy: return std::make_unique<Accuracy>(name, AccKind::Sparse, threshold);
    case MetricKind::MAE: return std::make_unique<ErrorMean>(name, LossKind::MAE);
    case MetricKind::MSE: return std::make_unique<ErrorMean>(name, LossKind::MSE);
    case MetricKind::Perplexity:
      if (!over_classes(loss_info(loss.kind)))
        throw ConfigError(fmt::format("metric '{}' needs a class distribution per step, but the loss is {}; use it "
                                      "with train.loss categorical_crossentropy or sparse_categorical_crossentropy, "
                                      "or remove it from train.metrics",
                                      name, loss_name(loss.kind)));
      return std::make_unique<Perplexity>(name, loss);
  }
  throw ConfigError(fmt::format("metric '{}': unknown kind", name));
}

}  // namespace rnntrain
