// Keras-like progress bar (terminal) or periodic lines (pipes and files).
#include "train/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace rnntrain {

std::string format_metric(double v) {
  if (v != 0.0 && (std::fabs(v) < 1e-3 || std::fabs(v) >= 1e5)) return fmt::format("{:.4e}", v);
  return fmt::format("{:.4f}", v);
}

Progress::Progress(int64_t epoch, int64_t epochs, int64_t steps, bool enabled)
    : epoch_(epoch), epochs_(epochs), steps_(steps), enabled_(enabled), tty_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()), last_print_(start_) {
  if (enabled_ && tty_) std::fprintf(stderr, "Epoch %lld/%lld\n", (long long)epoch_ + 1, (long long)epochs_);
}

void Progress::update(int64_t step, int64_t samples, const std::vector<std::pair<std::string, double>>& values) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double since = std::chrono::duration<double>(now - last_print_).count();
  const bool last = step == steps_;
  if (tty_ ? (since < 0.1 && !last) : (since < 10.0 || last)) return;
  last_print_ = now;
  std::string vals;
  for (const auto& [k, v] : values) vals += tty_ ? fmt::format(" - {}: {}", k, format_metric(v)) : fmt::format(" {}={}", k, format_metric(v));
  const double rate = elapsed > 0 ? samples / elapsed : 0.0;
  if (tty_) {
    const int width = 30, done = static_cast<int>(width * step / std::max<int64_t>(steps_, 1));
    std::string bar(done, '=');
    if (done < width) bar += '>' + std::string(width - done - 1, '.');
    const double eta = step ? elapsed / step * (steps_ - step) : 0.0;
    std::fprintf(stderr, "\r%lld/%lld [%s] - ETA: %.0fs%s - %.0f samples/s\033[K", (long long)step,
                 (long long)steps_, bar.c_str(), eta, vals.c_str(), rate);
  } else {
    std::fprintf(stderr, "epoch=%lld/%lld step=%lld/%lld%s samples_per_s=%.0f\n", (long long)epoch_ + 1,
                 (long long)epochs_, (long long)step, (long long)steps_, vals.c_str(), rate);
  }
  std::fflush(stderr);
}

double Progress::finish() {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (enabled_ && tty_) std::fprintf(stderr, "\n");
  return s;
}

}  // namespace rnntrain
