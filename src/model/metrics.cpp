// Keras metrics over an epoch. Running means: accuracy (binary, categorical, sparse; "accuracy"
// resolved by the loss), the top-k accuracies, mae, mse and perplexity; each batch counts by its
// unmasked positions, so result() is the mean over every position of the epoch. Confusion
// histograms (spec/confusion.h): Precision, Recall, AUC, F1Score and FBetaScore, with Keras'
// formulas for the result. Not the loss (model/loss.cpp).
#include "model/metrics.h"

#include <cmath>
#include <algorithm>
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
  void add(const double* sums, double count) override { total_ += sums[0], count_ += count; }
  std::vector<double> state() const override { return {total_, count_}; }
  void merge(const double* state) override { total_ += state[0], count_ += state[1]; }
  // Every mean metric here averages values >= 0 (hits, errors, crossentropies).
  bool state_ok(const double* state) const override { return state[0] >= 0.0 && state[1] >= 0.0; }

 protected:
  double total_ = 0.0, count_ = 0.0;
};

int64_t argmax(const float* p, int64_t k) {  // first index of the maximum, as numpy
  int64_t best = 0;
  for (int64_t j = 1; j < k; ++j)
    if (p[j] > p[best]) best = j;
  return best;
}

// Keras' in_top_k (JAX): the label's prediction ranks 1 + (predictions above it); NaN ranks last.
bool in_top_k(const float* p, int64_t k, int64_t label, int64_t top) {
  const float at = std::isnan(p[label]) ? -INFINITY : p[label];
  int64_t above = 0;
  for (int64_t j = 0; j < k; ++j) above += p[j] > at;
  return above < top;
}

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

// The metric whose rule an accuracy follows, for messages.
const char* accuracy_name(AccuracyRule rule) {
  for (const MetricInfo& m : kMetricInfos)
    if (m.family == MetricFamily::Accuracy && m.accuracy == rule) return m.name;
  return "accuracy";
}

// Keras compile()'s shape rule, for "accuracy" with a regression loss: one output unit -> binary;
// targets with one axis fewer (or a trailing 1 against K > 1) -> sparse; else categorical.
AccuracyRule accuracy_by_shapes(const Tensor& pred, const Tensor& target) {
  if (pred.dim(-1) == 1) return AccuracyRule::Binary;
  if (target.rank() < pred.rank() || (target.rank() > 0 && target.dim(-1) == 1)) return AccuracyRule::Sparse;
  return AccuracyRule::Categorical;
}

class Accuracy : public MeanMetric {
 public:
  // rule: ByLoss decides by the shapes at each update. threshold: binary only.
  Accuracy(std::string name, AccuracyRule rule, double threshold, int64_t top_k = 1)
      : rule_(rule), threshold_(threshold), top_k_(top_k) {
    name_ = std::move(name);
  }

  void update(const Tensor& pred, const Tensor& target, const Tensor* mask) override {
    const AccuracyRule kind = checked_kind(pred, target, mask);
    const TargetView v{shape_numel(pred.shape) / pred.dim(-1), pred.dim(-1)};
    // pred: [N, K]; target: [N, K] or labels [N]; one value per position in [0, 1].
    for (int64_t i = 0; i < v.n; ++i) {
      if (mask_weight(mask, i) == 0.0) continue;
      const float* p = pred.ptr() + i * v.k;
      double hit = 0.0;
      if (kind == AccuracyRule::Binary) {
        const float* t = target.ptr() + i * v.k;
        int64_t same = 0;
        for (int64_t j = 0; j < v.k; ++j) same += t[j] == (p[j] > threshold_ ? 1.0f : 0.0f);
        hit = static_cast<double>(same) / static_cast<double>(v.k);
      } else if (kind == AccuracyRule::Categorical) {
        hit = argmax(target.ptr() + i * v.k, v.k) == argmax(p, v.k) ? 1.0 : 0.0;
      } else if (kind == AccuracyRule::TopK) {
        hit = in_top_k(p, v.k, argmax(target.ptr() + i * v.k, v.k), top_k_) ? 1.0 : 0.0;
      } else if (kind == AccuracyRule::SparseTopK) {
        hit = in_top_k(p, v.k, static_cast<int64_t>(target[i]), top_k_) ? 1.0 : 0.0;
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
    f.accuracy = checked_kind(pred, target, nullptr);
    f.threshold = threshold_;
    f.top_k = top_k_;
    return f;
  }

 private:
  AccuracyRule checked_kind(const Tensor& pred, const Tensor& target, const Tensor* mask) const {
    const AccuracyRule kind = rule_ == AccuracyRule::ByLoss ? accuracy_by_shapes(pred, target) : rule_;
    const char* who = accuracy_name(kind);
    if (kind == AccuracyRule::Sparse || kind == AccuracyRule::SparseTopK) {
      const TargetView v = check_sparse_targets(who, pred, target, mask);
      for (int64_t i = 0; kind == AccuracyRule::SparseTopK && i < v.n; ++i)  // its labels index the predictions
        if (mask_weight(mask, i) != 0.0) checked_label(who, pred, target, i, v.k);
    } else {
      check_dense_targets(who, pred, target, mask);
    }
    return kind;
  }

  AccuracyRule rule_;
  double threshold_;
  int64_t top_k_;
};

// Dense targets of the predictions' shape, whose last axis is the model's `units`.
TargetView check_units(const std::string& name, const Tensor& pred, const Tensor& target, const Tensor* mask,
                       int64_t units) {
  const TargetView v = check_dense_targets(name.c_str(), pred, target, mask);
  if (v.k != units)
    throw DataError(fmt::format("metric '{}': the predictions have {} units, the model {}", name, v.k, units));
  return v;
}

// mae, mse, msle and logcosh: the per-position mean over the last axis, as the losses of the same
// name; root_mean_squared_error: the square root of the mse's mean (Keras' RootMeanSquaredError).
class ErrorMean : public MeanMetric {
 public:
  ErrorMean(std::string name, LossKind kind, bool root = false) : root_(root) {
    name_ = std::move(name);
    spec_.kind = kind;
  }
  double result() const override {
    const double mean = MeanMetric::result();
    return root_ ? std::sqrt(mean) : mean;
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
  bool root_;
};

// Keras' R2Score over [batch, units] outputs: per unit the sums of the target, its square and the
// squared residual (MetricForm::Moments), then 1 - residual / (sum t^2 - (sum t)^2 / n) per unit
// (0 where that is inf), averaged uniformly or weighted by the variance, adjusted for
// num_regressors (n: every value, as Keras' num_samples counts them) when it is below n - 1.
class R2Score : public Metric {
 public:
  R2Score(std::string name, const MetricSpec& spec, int64_t units)
      : spec_(spec), units_(units), sums_(static_cast<size_t>(3 * units + 1), 0.0) {
    name_ = std::move(name);
  }
  void update(const Tensor& pred, const Tensor& target, const Tensor* mask) override {
    const TargetView v = checked(pred, target, mask);
    double* s = sums_.data();
    for (int64_t i = 0; i < v.n; ++i) {
      if (mask_weight(mask, i) == 0.0) continue;
      for (int64_t j = 0; j < v.k; ++j) {
        const double t = target[i * v.k + j], e = t - pred[i * v.k + j];
        s[j] += t, s[units_ + j] += t * t, s[2 * units_ + j] += e * e;
      }
      s[3 * units_] += 1.0;
    }
  }
  MetricForm form(const Shape& shape, const Tensor& target) const override {
    Tensor pred;
    pred.shape = shape;
    checked(pred, target, nullptr);
    MetricForm f;
    f.kind = MetricForm::Kind::Moments;
    f.classes = units_;
    return f;
  }
  void add(const double* sums, double count) override {
    for (int64_t i = 0; i < 3 * units_; ++i) sums_[i] += sums[i];
    sums_[3 * units_] += count;
  }
  void merge(const double* state) override {
    for (size_t i = 0; i < sums_.size(); ++i) sums_[i] += state[i];
  }
  std::vector<double> state() const override { return sums_; }
  bool state_ok(const double* state) const override {  // sums of t^2 and of residuals^2, and the count
    for (int64_t i = units_; i < 3 * units_ + 1; ++i)
      if (state[i] < 0.0) return false;
    return true;
  }
  void reset() override { std::fill(sums_.begin(), sums_.end(), 0.0); }
  double result() const override {
    const double* s = sums_.data();
    const double n = s[3 * units_];
    double uniform = 0.0, weighted = 0.0, weights = 0.0;
    for (int64_t j = 0; j < units_; ++j) {
      const double total = s[units_ + j] - s[j] * (s[j] / n);
      double raw = 1.0 - s[2 * units_ + j] / total;
      if (std::isinf(raw)) raw = 0.0;
      uniform += raw, weighted += total * raw, weights += total;
    }
    double r2 = spec_.aggregation == R2Aggregation::Uniform ? uniform / static_cast<double>(units_) : weighted / weights;
    const double values = n * static_cast<double>(units_), p = static_cast<double>(spec_.num_regressors);
    if (p > 0 && p < values - 1) r2 = 1.0 - (1.0 - r2) * (values - 1.0) / (values - p - 1.0);
    return r2;
  }

 private:
  TargetView checked(const Tensor& pred, const Tensor& target, const Tensor* mask) const {
    return check_units(name_, pred, target, mask, units_);
  }
  MetricSpec spec_;
  int64_t units_;
  std::vector<double> sums_;  // the form's 3 x units sums, then the positions
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

double divide_no_nan(double a, double b) { return b == 0.0 ? 0.0 : a / b; }

// Precision, Recall, AUC, F1Score and FBetaScore over the histograms of spec/confusion.h, with
// Keras' formulas for the result.
class Confusion : public Metric {
 public:
  Confusion(std::string name, const MetricSpec& spec, const ConfusionRule& rule, int64_t units)
      : spec_(spec), rule_(rule), units_(units), classes_(rule.per_class ? units : 1),
        hist_(static_cast<size_t>(2 * classes_ * rule.bins())) {
    name_ = std::move(name);
  }

  void update(const Tensor& pred, const Tensor& target, const Tensor* mask) override {
    const TargetView v = checked(pred, target, mask);
    double* pos = hist_.data();
    double* neg = pos + hist_.size() / 2;
    for (int64_t i = 0; i < v.n; ++i)
      if (mask_weight(mask, i) != 0.0)
        confusion_row(rule_, pred.ptr() + i * v.k, target.ptr() + i * v.k, v.k, [&](int64_t at, double p, double n) {
          pos[at] += p;
          neg[at] += n;
        });
  }
  MetricForm form(const Shape& shape, const Tensor& target) const override {
    Tensor pred;
    pred.shape = shape;
    checked(pred, target, nullptr);
    MetricForm f;
    f.kind = MetricForm::Kind::Confusion;
    f.confusion = rule_;
    f.classes = classes_;
    return f;
  }
  void add(const double* sums, double) override { merge(sums); }
  void merge(const double* state) override {
    for (size_t i = 0; i < hist_.size(); ++i) hist_[i] += state[i];
  }
  std::vector<double> state() const override { return hist_; }
  bool state_ok(const double* state) const override {  // counts
    return std::all_of(state, state + hist_.size(), [](double v) { return v >= 0.0; });
  }
  void reset() override { std::fill(hist_.begin(), hist_.end(), 0.0); }

  double result() const override {
    const int64_t bins = rule_.bins();
    const double* pos = hist_.data();
    const double* neg = pos + hist_.size() / 2;
    switch (spec_.kind) {
      case MetricKind::Precision: return divide_no_nan(pos[1], pos[1] + neg[1]);
      case MetricKind::Recall: return divide_no_nan(pos[1], pos[1] + pos[0]);
      case MetricKind::AUC: {
        double sum = 0.0;
        for (int64_t c = 0; c < classes_; ++c) sum += auc(pos + c * bins, neg + c * bins);
        return sum / static_cast<double>(classes_);
      }
      default: return f_score(pos, neg);
    }
  }

 private:
  TargetView checked(const Tensor& pred, const Tensor& target, const Tensor* mask) const {
    return check_units(name_, pred, target, mask, units_);
  }

  // One histogram's AUC (Keras' AUC.result and interpolate_pr_auc).
  double auc(const double* pos, const double* neg) const {
    const int64_t T = spec_.num_thresholds;
    std::vector<double> tp(T), fp(T), fn(T), tn(T);
    double above_p = 0.0, above_n = 0.0, all_p = 0.0, all_n = 0.0;
    for (int64_t c = 0; c <= T; ++c) all_p += pos[c], all_n += neg[c];
    for (int64_t i = T - 1; i >= 0; --i) {  // threshold i: the bins above it
      above_p += pos[i + 1], above_n += neg[i + 1];
      tp[i] = above_p, fp[i] = above_n, fn[i] = all_p - above_p, tn[i] = all_n - above_n;
    }
    double area = 0.0;
    if (spec_.curve == AucCurve::PR && spec_.summation == AucSummation::Interpolation) {
      for (int64_t i = 0; i + 1 < T; ++i) {
        const double p0 = tp[i] + fp[i], p1 = tp[i + 1] + fp[i + 1];
        const double dtp = tp[i] - tp[i + 1];
        const double slope = divide_no_nan(dtp, std::max(p0 - p1, 0.0));
        const double intercept = tp[i + 1] - slope * p1;
        const double ratio = p0 > 0 && p1 > 0 ? divide_no_nan(p0, std::max(p1, 0.0)) : 1.0;
        area += divide_no_nan(slope * (dtp + intercept * std::log(ratio)), std::max(tp[i + 1] + fn[i + 1], 0.0));
      }
      return area;
    }
    std::vector<double> x(T), y(T);
    for (int64_t i = 0; i < T; ++i) {
      const double recall = divide_no_nan(tp[i], tp[i] + fn[i]);
      if (spec_.curve == AucCurve::ROC) x[i] = divide_no_nan(fp[i], fp[i] + tn[i]), y[i] = recall;
      else x[i] = recall, y[i] = divide_no_nan(tp[i], tp[i] + fp[i]);
    }
    for (int64_t i = 0; i + 1 < T; ++i) {
      const double h = spec_.summation == AucSummation::Interpolation ? (y[i] + y[i + 1]) / 2.0
                        : spec_.summation == AucSummation::Minoring    ? std::min(y[i], y[i + 1])
                                                                       : std::max(y[i], y[i + 1]);
      area += (x[i] - x[i + 1]) * h;
    }
    return area;
  }

  // Keras' FBetaScore.result over per-class counts (micro: summed over the classes first).
  double f_score(const double* pos, const double* neg) const {
    constexpr double eps = 1e-7;  // Keras' backend.epsilon()
    const double b2 = spec_.beta * spec_.beta;
    struct Counts {
      double tp = 0, fp = 0, fn = 0, weight = 0;
    };
    std::vector<Counts> per(static_cast<size_t>(classes_));
    for (int64_t c = 0; c < classes_; ++c)
      per[c] = {pos[2 * c + 1], neg[2 * c + 1], pos[2 * c], pos[2 * c] + pos[2 * c + 1]};
    if (spec_.average == FAverage::Micro) {
      Counts all;
      for (const Counts& c : per) all.tp += c.tp, all.fp += c.fp, all.fn += c.fn, all.weight += c.weight;
      per = {all};
    }
    double total_weight = 0.0, sum = 0.0, weighted = 0.0;
    for (const Counts& c : per) total_weight += c.weight;
    for (const Counts& c : per) {
      const double precision = c.tp / (c.tp + c.fp + eps), recall = c.tp / (c.tp + c.fn + eps);
      const double f = precision * recall / (b2 * precision + recall + eps) * (1.0 + b2);
      sum += f;
      weighted += f * c.weight / (total_weight + eps);
    }
    return spec_.average == FAverage::Weighted ? weighted : sum / static_cast<double>(per.size());
  }

  MetricSpec spec_;
  ConfusionRule rule_;
  int64_t units_, classes_;
  std::vector<double> hist_;  // the positives' histograms, then the negatives'
};

}  // namespace

// The histograms' rule of a confusion metric; ConfigError where the loss or the output shape do not fit.
ConfusionRule confusion_rule(const MetricSpec& spec, const std::string& name, const LossSpec& loss, const Shape& out) {
  const int64_t units = out.empty() ? 1 : out.back();
  if (loss_info(loss.kind).targets == Targets::Labels)
    throw ConfigError(fmt::format("metric '{}' compares every output unit with a target of the same shape, but "
                                  "train.loss {} takes class labels; use categorical_crossentropy with one-hot "
                                  "targets, or sparse_top_k_categorical_accuracy",
                                  name, loss_name(loss.kind)));
  ConfusionRule r;
  switch (spec.kind) {
    case MetricKind::Precision:
    case MetricKind::Recall:
      r.threshold = static_cast<float>(spec.threshold.value_or(0.5));
      r.class_id = spec.class_id;
      break;
    case MetricKind::AUC:
      if (spec.multi_label && out.size() != 1)
        throw ConfigError(fmt::format("metric '{}': Keras' AUC with multi_label takes one prediction per sample "
                                      "([batch, labels]), but the model's output is {} per sample; drop multi_label "
                                      "(one curve over every unmasked value)",
                                      name, shape_str(out)));
      r.mode = ConfusionRule::Even;
      r.num_thresholds = spec.num_thresholds;
      r.sigmoid = spec.from_logits;
      r.per_class = spec.multi_label;
      break;
    default:  // the f-scores
      if (out.size() != 1)
        throw ConfigError(fmt::format("metric '{}': Keras' {} takes one prediction per sample ([batch, classes]), but "
                                      "the model's output is {} per sample; use precision and recall (with class_id), or "
                                      "return_sequences: false in the last recurrent layer",
                                      name, spec.kind == MetricKind::F1Score ? "F1Score" : "FBetaScore", shape_str(out)));
      r.mode = spec.threshold ? ConfusionRule::Threshold : ConfusionRule::RowMax;
      r.threshold = static_cast<float>(spec.threshold.value_or(0.5));
      r.per_class = r.soft = true;
  }
  if (r.class_id >= units)
    throw ConfigError(fmt::format("metric '{}': class_id {} is not a unit of the output (it has {}); use 0..{}", name,
                                  r.class_id, units, units - 1));
  if ((r.per_class ? units : 1) * r.bins() > (int64_t{1} << 21))
    throw ConfigError(fmt::format("metric '{}': {} units x {} thresholds are too many histograms (at most 2^21 bins); "
                                  "lower num_thresholds or drop multi_label",
                                  name, units, r.bins() - 1));
  return r;
}

std::unique_ptr<Metric> make_metric(const MetricSpec& spec, const LossSpec& loss, const Shape& out) {
  const MetricInfo& info = metric_info(spec.kind);
  std::string name = spec.name.empty() ? info.name : spec.name;
  switch (info.family) {
    case MetricFamily::Accuracy: {
      AccuracyRule rule = info.accuracy;
      if (rule == AccuracyRule::ByLoss) {
        switch (loss_info(loss.kind).accuracy) {
          case AccuracyOf::None: break;
          case AccuracyOf::Binary: rule = AccuracyRule::Binary; break;
          case AccuracyOf::Categorical: rule = AccuracyRule::Categorical; break;
          case AccuracyOf::Sparse: rule = AccuracyRule::Sparse; break;
        }
      }
      // Binary accuracy thresholds probabilities at 0.5, logits at 0 (the same decision).
      const bool top_k = rule == AccuracyRule::TopK || rule == AccuracyRule::SparseTopK;
      return std::make_unique<Accuracy>(name, rule, loss.from_logits ? 0.0 : 0.5, top_k ? spec.k : 1);
    }
    case MetricFamily::ErrorMean: return std::make_unique<ErrorMean>(name, info.error, info.root);
    case MetricFamily::R2:
      if (out.size() != 1)
        throw ConfigError(fmt::format("metric '{}': Keras' R2Score takes one prediction per sample ([batch, units]), "
                                      "but the model's output is {} per sample; use mse or mae, or return_sequences: "
                                      "false in the last recurrent layer",
                                      name, shape_str(out)));
      if (over_classes(loss_info(loss.kind)))
        throw ConfigError(fmt::format("metric '{}' compares predicted values with targets, but train.loss {} takes "
                                      "classes; use it with a regression loss (mse, mae, huber, ...)",
                                      name, loss_name(loss.kind)));
      return std::make_unique<R2Score>(name, spec, out.back());
    case MetricFamily::Confusion:
      return std::make_unique<Confusion>(name, spec, confusion_rule(spec, name, loss, out), out.empty() ? 1 : out.back());
    case MetricFamily::Perplexity:
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
