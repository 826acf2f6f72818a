// Learning-rate schedules: per optimizer step (constant, exponential, cosine with warmup,
// polynomial, inverse_time, piecewise_constant, cosine_restarts) or per epoch (step,
// reduce_on_plateau). State is a vector of numbers, saved in checkpoints for resume.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "spec/config.h"

namespace rnntrain {

class Schedule {
 public:
  // Throws ConfigError for settings Keras rejects (decay_steps <= 0, factor >= 1, ...). metrics: the
  // run's, which decide reduce_on_plateau's mode "auto" (monitor_is_max).
  Schedule(const ScheduleSpec& spec, double base_lr, const std::vector<MetricSpec>& metrics = {});
  // The learning rate for optimizer step `step` (0-based) in the current epoch state.
  double lr(int64_t step) const;
  // Called after each epoch with that epoch's logs ("loss", "val_loss", ...); epoch is 0-based.
  // Returns a message when the learning rate changed (for the log), or "".
  std::string on_epoch_end(int64_t epoch, const std::map<std::string, double>& logs);
  // [factor, best, has_best, wait, cooldown_left, warned]; set_state throws DataError on another size.
  std::vector<double> state() const;
  void set_state(const std::vector<double>& s);

 private:
  ScheduleSpec spec_;
  double base_lr_;
  bool maximise_;  // reduce_on_plateau: the monitor improves upwards
  double factor_ = 1.0;  // multiplier set by the per-epoch schedules
  double best_ = 0.0;
  bool has_best_ = false;
  int64_t wait_ = 0, cooldown_left_ = 0;
  bool warned_ = false;  // reduce_on_plateau: the monitor was missing from the logs once already
};

}  // namespace rnntrain
