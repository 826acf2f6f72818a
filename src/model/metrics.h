// Keras metrics as running means over an epoch: update() per batch, result() at the end. Entries
// are weighted by the mask as the loss is. "accuracy" is resolved by the loss, as Keras does.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "spec/config.h"

namespace rnntrain {

// What update() adds for a batch, in a form a device engine computes next to the predictions (the
// CUDA backend): one value per unmasked position, summed, and the count of those positions.
struct MetricForm {
  enum class Kind { Loss, Accuracy };
  Kind kind = Kind::Loss;
  LossSpec loss;           // Loss: the per-position values of this loss (mae, mse, perplexity's crossentropy)
  int accuracy = 0;        // Accuracy: 0 binary, 1 categorical, 2 sparse
  double threshold = 0.5;  // binary
  bool operator==(const MetricForm&) const = default;
};

class Metric {
 public:
  virtual ~Metric() = default;
  virtual void update(const Tensor& pred, const Tensor& target, const Tensor* mask) = 0;
  // The form of update() for predictions of shape `pred` against `target`, after the checks update()
  // makes (a DataError for targets that do not fit); add() then takes the batch's sums.
  virtual MetricForm form(const Shape& pred, const Tensor& target) const = 0;
  virtual void add(double total, double count) = 0;
  virtual double result() const = 0;
  virtual void reset() = 0;
  // The running sums behind result(): reset() then add() of them restores the metric exactly.
  virtual std::pair<double, double> totals() const = 0;
  const std::string& name() const { return name_; }

 protected:
  std::string name_;
};

// Resolves MetricKind::Accuracy by the loss (binary, categorical or sparse) and, for losses
// with from_logits, makes accuracy and perplexity read logits correctly.
std::unique_ptr<Metric> make_metric(const MetricSpec& spec, const LossSpec& loss);

}  // namespace rnntrain
