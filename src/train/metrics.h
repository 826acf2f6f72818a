// Keras metrics as running means over an epoch: update() per batch, result() at the end. Entries
// are weighted by the mask as the loss is. "accuracy" is resolved by the loss, as Keras does.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "spec/config.h"

namespace rnntrain {

class Metric {
 public:
  virtual ~Metric() = default;
  virtual void update(const Tensor& pred, const Tensor& target, const Tensor* mask) = 0;
  virtual double result() const = 0;
  virtual void reset() = 0;
  const std::string& name() const { return name_; }

 protected:
  std::string name_;
};

// Resolves MetricKind::Accuracy by the loss (binary, categorical or sparse) and, for losses
// with from_logits, makes accuracy and perplexity read logits correctly.
std::unique_ptr<Metric> make_metric(const MetricSpec& spec, const LossSpec& loss);

}  // namespace rnntrain
