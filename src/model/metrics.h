// Keras metrics over an epoch: update() per batch, result() at the end. Entries are weighted by the
// mask as the loss is (sample weights do not count: Keras weighs only its weighted_metrics).
// "accuracy" is resolved by the loss, as Keras does.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "spec/confusion.h"
#include "spec/config.h"

namespace rnntrain {

// What update() adds for a batch, in a form a device engine computes next to the predictions (the
// CUDA backend). Loss and Accuracy: one value per unmasked position, summed (count: the positions);
// Confusion: the histograms of spec/confusion.h; Moments: per output unit j of the `classes`, the
// sums of the target t, of t^2 and of (t - prediction)^2 over the unmasked positions, as
// [sum t (classes), sum t^2 (classes), sum (t - p)^2 (classes)] (R2Score).
struct MetricForm {
  enum class Kind { Loss, Accuracy, Confusion, Moments };
  Kind kind = Kind::Loss;
  LossSpec loss;           // Loss: the per-position values of this loss (mae, mse, perplexity's crossentropy)
  AccuracyRule accuracy = AccuracyRule::Binary;  // Accuracy: its rule, resolved (never ByLoss)
  double threshold = 0.5;  // binary
  int64_t top_k = 1;       // top-k
  ConfusionRule confusion;
  int64_t classes = 1;  // Confusion: histograms (the units when per class); Moments: the units
  // The sums the form adds up: 1, the positives' and negatives' histograms, or the moments.
  int64_t width() const {
    return kind == Kind::Confusion ? 2 * classes * confusion.bins() : kind == Kind::Moments ? 3 * classes : 1;
  }
  bool operator==(const MetricForm&) const = default;
};

class Metric {
 public:
  virtual ~Metric() = default;
  virtual void update(const Tensor& pred, const Tensor& target, const Tensor* mask) = 0;
  // The form of update() for predictions of shape `pred` against `target`, after the checks update()
  // makes (a DataError for targets that do not fit); add() then takes the batch's sums.
  virtual MetricForm form(const Shape& pred, const Tensor& target) const = 0;
  // A batch's form().width() sums, and its positions.
  virtual void add(const double* sums, double count) = 0;
  virtual double result() const = 0;
  virtual void reset() = 0;
  // The running sums behind result() (state_size() of them): reset() then merge() of them restores
  // the metric exactly; merge() of another's adds them up (data-parallel ranks).
  virtual std::vector<double> state() const = 0;
  virtual void merge(const double* state) = 0;
  // Whether state_size() finite values can be this metric's state: its counts and sums of squares
  // are not negative (a resume state read from a file is checked so).
  virtual bool state_ok(const double* state) const = 0;
  size_t state_size() const { return state().size(); }
  const std::string& name() const { return name_; }

 protected:
  std::string name_;
};

// Resolves "accuracy" (AccuracyRule::ByLoss) by the loss (binary, categorical or sparse) and, for losses
// with from_logits, makes accuracy and perplexity read logits correctly. `out`: the model's output
// shape without the batch axis. ConfigError for a metric the loss or the output cannot have.
std::unique_ptr<Metric> make_metric(const MetricSpec& spec, const LossSpec& loss, const Shape& out);

}  // namespace rnntrain
