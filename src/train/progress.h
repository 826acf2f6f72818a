// Progress output on stderr, as Keras' Progbar: on a terminal the line
// `12/94 ━━━━━━━━━━━━━━━━━━━━ 1s 15ms/step - loss: 0.6931 - mae: 0.4012` rewritten in place (the
// time left while the epoch runs, the time taken at its end, where the validation values join it);
// without a terminal a grep-able heartbeat line every 10 s (the epoch's own line is the trainer's log
// line). Not a logger for anything but the epoch loop.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rnntrain {

using Shown = std::vector<std::pair<std::string, double>>;

class Progress {
 public:
  // tty: stderr is a terminal (the default asks isatty).
  Progress(int64_t epoch, int64_t epochs, int64_t steps, bool enabled, int tty = -1);
  // After each batch: the running values to show (loss first).
  void update(int64_t step, int64_t samples, const Shown& values);
  // The seconds the epoch's steps took (up to now).
  double seconds() const;
  // Ends the epoch's line with these values (training and validation) on a terminal.
  void finish(int64_t step, const Shown& values);
  // Whether lines go to a terminal (then the trainer's epoch line goes to train.log only).
  bool on_tty() const { return enabled_ && tty_; }

 private:
  std::string line(int64_t step, const Shown& values, bool final) const;
  int64_t epoch_, epochs_, steps_;
  bool enabled_, tty_;
  std::chrono::steady_clock::time_point start_, last_print_, after_first_{};
  int64_t first_step_ = -1;  // the step after which after_first_ was taken (Keras leaves the first out)
};

// Keras' number format on its progress line: 4 decimals, or 4 significant digits in exponent form
// for |v| <= 1e-3 (0 as 0.0000).
std::string format_metric(double v);

}  // namespace rnntrain
