// Learning-rate schedules as Keras 3 computes them: ExponentialDecay, CosineDecay with a linear
// warmup from 0 to the base rate, PolynomialDecay, InverseTimeDecay, PiecewiseConstantDecay,
// CosineDecayRestarts, a per-epoch step decay, and ReduceLROnPlateau. Not the optimizer.
#include "train/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "train/callbacks.h"  // monitor_is_max

namespace rnntrain {

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw ConfigError("train.schedule: " + what);
}

}  // namespace

Schedule::Schedule(const ScheduleSpec& spec, double base_lr, const std::vector<MetricSpec>& metrics)
    : spec_(spec), base_lr_(base_lr), maximise_(monitor_is_max(spec.monitor, spec.mode, metrics)) {
  switch (spec_.kind) {
    case ScheduleKind::Constant: break;
    case ScheduleKind::PiecewiseConstant:
      require(!spec_.boundaries.empty() && spec_.values.size() == spec_.boundaries.size() + 1 &&
                  std::is_sorted(spec_.boundaries.begin(), spec_.boundaries.end()),
              "piecewise_constant needs increasing boundaries and one value more than boundaries");
      break;
    case ScheduleKind::Exponential:
    case ScheduleKind::Cosine:
    case ScheduleKind::Polynomial:
    case ScheduleKind::InverseTime:
    case ScheduleKind::CosineRestarts:
      require(spec_.decay_steps > 0, fmt::format("decay_steps must be a positive number of optimizer steps (found "
                                                 "{}); set train.schedule.decay_steps",
                                                 spec_.decay_steps));
      require(spec_.warmup_steps >= 0, fmt::format("warmup_steps must be >= 0 (found {})", spec_.warmup_steps));
      break;
    case ScheduleKind::Step:
      require(spec_.step_size > 0, fmt::format("step_size must be a positive number of epochs (found {})",
                                               spec_.step_size));
      break;
    case ScheduleKind::ReduceOnPlateau:
      require(spec_.factor < 1.0, fmt::format("factor must be below 1 for reduce_on_plateau (found {}), as in "
                                              "Keras' ReduceLROnPlateau",
                                              spec_.factor));
      break;
  }
}

double Schedule::lr(int64_t step) const {
  const double s = static_cast<double>(step);
  switch (spec_.kind) {
    case ScheduleKind::Exponential: {
      double p = s / static_cast<double>(spec_.decay_steps);
      if (spec_.staircase) p = std::floor(p);
      return base_lr_ * std::pow(spec_.decay_rate, p);
    }
    case ScheduleKind::Cosine: {
      // Keras CosineDecay(initial_learning_rate=0, warmup_target=base_lr): linear warmup, then a
      // cosine from base_lr to alpha*base_lr over decay_steps, constant after.
      const double warm = static_cast<double>(spec_.warmup_steps), decay = static_cast<double>(spec_.decay_steps);
      const double x = std::min(s, warm + decay);
      if (x < warm) return base_lr_ * x / warm;
      const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * (x - warm) / decay));
      return base_lr_ * ((1.0 - spec_.alpha) * cosine + spec_.alpha);
    }
    case ScheduleKind::Polynomial: {
      double decay = static_cast<double>(spec_.decay_steps), x = s;
      if (spec_.cycle) decay *= s == 0 ? 1.0 : std::ceil(s / decay);
      else x = std::min(s, decay);
      return (base_lr_ - spec_.end_learning_rate) * std::pow(1.0 - x / decay, spec_.power) + spec_.end_learning_rate;
    }
    case ScheduleKind::InverseTime: {
      double p = s / static_cast<double>(spec_.decay_steps);
      if (spec_.staircase) p = std::floor(p);
      return base_lr_ / (1.0 + spec_.decay_rate * p);
    }
    case ScheduleKind::PiecewiseConstant: {
      size_t i = 0;  // the first boundary at or past the step
      while (i < spec_.boundaries.size() && s > static_cast<double>(spec_.boundaries[i])) ++i;
      return spec_.values[i];
    }
    case ScheduleKind::CosineRestarts: {  // Keras' CosineDecayRestarts
      double fraction = s / static_cast<double>(spec_.decay_steps), restart;
      if (spec_.t_mul == 1.0) {
        restart = std::floor(fraction);
        fraction -= restart;
      } else {
        restart = std::floor(std::log(1.0 - fraction * (1.0 - spec_.t_mul)) / std::log(spec_.t_mul));
        const double before = (1.0 - std::pow(spec_.t_mul, restart)) / (1.0 - spec_.t_mul);
        fraction = (fraction - before) / std::pow(spec_.t_mul, restart);
      }
      const double cosine = 0.5 * std::pow(spec_.m_mul, restart) * (1.0 + std::cos(std::numbers::pi * fraction));
      return base_lr_ * ((1.0 - spec_.alpha) * cosine + spec_.alpha);
    }
    case ScheduleKind::Constant:
    case ScheduleKind::Step:
    case ScheduleKind::ReduceOnPlateau: return base_lr_ * factor_;
  }
  return base_lr_;
}

std::string Schedule::on_epoch_end(int64_t epoch, const std::map<std::string, double>& logs) {
  if (spec_.kind == ScheduleKind::Step) {
    // The next epoch (epoch + 1) runs at lr * gamma^floor((epoch + 1) / step_size).
    const double old_lr = base_lr_ * factor_;
    factor_ = std::pow(spec_.gamma, static_cast<double>((epoch + 1) / spec_.step_size));
    const double new_lr = base_lr_ * factor_;
    if (new_lr == old_lr) return "";
    return fmt::format("epoch={} schedule=step lr={:g} -> {:g} (gamma={:g} every {} epochs)", epoch + 1, old_lr,
                       new_lr, spec_.gamma, spec_.step_size);
  }
  if (spec_.kind != ScheduleKind::ReduceOnPlateau) return "";

  // Keras ReduceLROnPlateau.on_epoch_end.
  const auto it = logs.find(spec_.monitor);
  if (it == logs.end()) {
    if (!warned_) {
      std::string keys;
      for (const auto& [k, v] : logs) keys += (keys.empty() ? "" : ", ") + k;
      log_warn("reduce_on_plateau: the monitored value '{}' is not in the epoch logs (available: {}); the learning "
               "rate is left as it is. Set train.schedule.monitor to one of those (val_* needs validation data)",
               spec_.monitor, keys);
      warned_ = true;
    }
    return "";
  }
  const double current = it->second;
  const double min_delta = std::abs(spec_.min_delta);
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    wait_ = 0;
  }
  // Mode "auto" follows the monitored metric, the one rule EarlyStopping and the best checkpoint use
  // too. (Keras' ReduceLROnPlateau keeps the Keras 2 rule, up only for names holding "acc", so it
  // would minimise an AUC; rnntrain does not.)
  const bool improved = !has_best_ || (maximise_ ? current - min_delta > best_ : current + min_delta < best_);
  if (improved) {
    best_ = current;
    has_best_ = true;
    wait_ = 0;
    return "";
  }
  if (cooldown_left_ > 0) return "";
  if (++wait_ < spec_.patience) return "";
  // Keras compares the float32 learning rate with float32(min_lr): no reduction at the floor.
  const double old_lr = base_lr_ * factor_;
  if (!(static_cast<float>(old_lr) > static_cast<float>(spec_.min_lr))) return "";
  const double new_lr = std::max(old_lr * spec_.factor, spec_.min_lr);
  factor_ = new_lr / base_lr_;
  cooldown_left_ = spec_.cooldown;
  wait_ = 0;
  return fmt::format("epoch={} schedule=reduce_on_plateau {}={:.6g} best={:.6g} lr={:g} -> {:g} (no improvement "
                     "for {} epochs)",
                     epoch + 1, spec_.monitor, current, best_, old_lr, new_lr, spec_.patience);
}

std::vector<double> Schedule::state() const {
  return {factor_, best_, has_best_ ? 1.0 : 0.0, static_cast<double>(wait_), static_cast<double>(cooldown_left_),
          warned_ ? 1.0 : 0.0};
}

void Schedule::set_state(const std::vector<double>& s) {
  if (s.size() != 6)
    throw DataError(fmt::format("learning-rate schedule state has {} numbers, expected 6; the checkpoint was written "
                                "by another version of rnntrain or is damaged: start the run afresh instead of resuming",
                                s.size()));
  factor_ = s[0];
  best_ = s[1];
  has_best_ = s[2] != 0.0;
  wait_ = static_cast<int64_t>(s[3]);
  cooldown_left_ = static_cast<int64_t>(s[4]);
  warned_ = s[5] != 0.0;
}

}  // namespace rnntrain
