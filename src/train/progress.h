// Progress output on stderr: a Keras-style bar rewritten in place on a terminal, or plain periodic
// grep-able lines when stderr is a file or a pipe. Not a logger for anything but the epoch loop.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rnntrain {

class Progress {
 public:
  Progress(int64_t epoch, int64_t epochs, int64_t steps, bool enabled);
  // After each batch: the running values to show (loss first).
  void update(int64_t step, int64_t samples, const std::vector<std::pair<std::string, double>>& values);
  // Ends the epoch's line; returns the elapsed seconds.
  double finish();

 private:
  int64_t epoch_, epochs_, steps_;
  bool enabled_, tty_;
  std::chrono::steady_clock::time_point start_, last_print_;
};

std::string format_metric(double v);

}  // namespace rnntrain
