// Keras' History, EarlyStopping and ModelCheckpoint(save_best_only) logic, without I/O: the
// trainer asks them what to do after each epoch. Their state() vectors go into checkpoints.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/params.h"
#include "spec/config.h"

namespace rnntrain {

using Logs = std::map<std::string, double>;  // "loss", "val_loss", "accuracy", "learning_rate", ...

struct History {
  std::vector<Logs> epochs;
  std::string to_json() const;  // {"epoch": [...], "loss": [...], ...} like Keras' History.history
  static History from_json(const std::string& text);
  std::string to_csv() const;   // Keras CSVLogger: "epoch" then the sorted keys
};

// True when `monitor` improves upwards. Mode "auto" decides as Keras 3's callbacks: a name ending in
// "loss" goes down, a metric (by its column name, "val_" or not) goes its way (accuracies, AUC,
// precision, recall, f-scores, R2 up; errors and perplexity down). A name that is neither (not
// logged) falls back to the Keras 2 rule: up when it holds "acc".
bool monitor_is_max(const std::string& monitor, MonitorMode mode, const std::vector<MetricSpec>& metrics);

class EarlyStopping {
 public:
  EarlyStopping(const EarlyStoppingSpec& spec, const std::vector<MetricSpec>& metrics);
  // Returns true when training should stop. At the end of training, best_weights() (kept when
  // restore_best_weights is set) is what to restore, whether or not training stopped early.
  bool on_epoch_end(int64_t epoch, const Logs& logs, const Params& params);
  bool stopped() const { return stopped_; }
  int64_t wait() const { return wait_; }
  const std::optional<std::vector<Tensor>>& best_weights() const { return best_weights_; }
  int64_t best_epoch() const { return best_epoch_; }
  std::vector<double> state() const;
  void set_state(const std::vector<double>& s);
  void set_best_weights(std::vector<Tensor> w) { best_weights_ = std::move(w); }
  const EarlyStoppingSpec& spec() const { return spec_; }
  bool maximises() const { return max_; }

 private:
  bool improved(double current, double reference) const;
  EarlyStoppingSpec spec_;
  bool max_;
  double best_;
  int64_t wait_ = 0, best_epoch_ = 0;
  bool stopped_ = false, warned_ = false;
  std::optional<std::vector<Tensor>> best_weights_;
};

// Decides when best.h5 is rewritten: the monitored value strictly improves.
class BestTracker {
 public:
  BestTracker(std::string monitor, MonitorMode mode, const std::vector<MetricSpec>& metrics);
  bool on_epoch_end(const Logs& logs);  // true: write best now
  const std::string& monitor() const { return monitor_; }
  bool maximises() const { return max_; }
  std::vector<double> state() const { return {best_, has_ ? 1.0 : 0.0}; }
  void set_state(const std::vector<double>& s);

 private:
  std::string monitor_;
  bool max_;
  double best_ = 0.0;
  bool has_ = false;
};

std::vector<Tensor> copy_weights(const Params& params);
void set_weights(Params& params, const std::vector<Tensor>& w);

}  // namespace rnntrain
