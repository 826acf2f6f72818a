// Keras' Progbar (verbose=1) on a terminal, periodic lines on pipes and files.
#include "train/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "core/log.h"

namespace rnntrain {

std::string format_metric(double v) {
  if (v != 0.0 && std::fabs(v) <= 1e-3) return fmt::format("{:.4e}", v);
  return fmt::format("{:.4f}", v);
}

Progress::Progress(int64_t epoch, int64_t epochs, int64_t steps, bool enabled, int tty)
    : epoch_(epoch), epochs_(epochs), steps_(steps), enabled_(enabled),
      tty_(tty < 0 ? isatty(STDERR_FILENO) == 1 : tty == 1), start_(std::chrono::steady_clock::now()),
      last_print_(start_) {
  if (on_tty()) std::fprintf(stderr, "Epoch %lld/%lld\n", (long long)epoch_ + 1, (long long)epochs_);
}

double Progress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

// Keras' line: the step count in bold, the bar in green (done) and grey, the time left (or taken,
// at the end) in bold, the time per step without the first step (which builds buffers and graphs).
std::string Progress::line(int64_t step, const Shown& values, bool final) const {
  const auto now = std::chrono::steady_clock::now();
  const int digits = static_cast<int>(std::to_string(steps_).size());
  double per_step = 0.0;
  if (step > first_step_ + 1 && first_step_ >= 0)
    per_step = std::chrono::duration<double>(now - after_first_).count() / static_cast<double>(step - first_step_ - 1);
  else if (step > 0)
    per_step = seconds() / static_cast<double>(step);
  constexpr int kWidth = 20;
  const int done = steps_ > 0 ? static_cast<int>(kWidth * std::min(step, steps_) / steps_) : 0;
  std::string bar;
  for (int i = 0; i < kWidth; ++i) bar += "━";
  const size_t split = static_cast<size_t>(done) * std::string("━").size();
  std::string out = fmt::format("\x1b[1m{:>{}}/{}\x1b[0m ", step, digits, steps_);
  if (done > 0) out += "\x1b[32m" + bar.substr(0, split) + "\x1b[0m";
  out += "\x1b[37m" + bar.substr(split) + "\x1b[0m";
  double t = final ? seconds() : per_step * static_cast<double>(steps_ - step);
  std::string when;
  if (!final && t > 3600) when = fmt::format("{}:{:02}:{:02}", int64_t(t) / 3600, int64_t(t) % 3600 / 60, int64_t(t) % 60);
  else if (!final && t > 60) when = fmt::format("{}:{:02}", int64_t(t) / 60, int64_t(t) % 60);
  else when = fmt::format("{:.0f}s", final ? t : std::floor(t));
  out += fmt::format(" \x1b[1m{}\x1b[0m", when);
  if (per_step >= 1 || per_step == 0) out += fmt::format(" {:.0f}s/step", per_step);
  else if (per_step >= 1e-3) out += fmt::format(" {:.0f}ms/step", per_step * 1e3);
  else out += fmt::format(" {:.0f}us/step", per_step * 1e6);
  for (const auto& [k, v] : values) out += fmt::format(" - {}: {}", k, format_metric(v));
  return out;
}

void Progress::update(int64_t step, int64_t samples, const Shown& values) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (first_step_ < 0) first_step_ = step, after_first_ = now;
  const double since = std::chrono::duration<double>(now - last_print_).count();
  if (tty_) {
    if (since < 0.05 && step != steps_) return;
    last_print_ = now;
    std::fprintf(stderr, "\r%s\x1b[K", line(step, values, false).c_str());
  } else {
    if (since < 10.0 || step == steps_) return;
    last_print_ = now;
    std::string vals;
    for (const auto& [k, v] : values) vals += fmt::format(" {}={}", k, format_metric(v));
    const double elapsed = seconds();
    log_info("epoch={}/{} step={}/{}{} samples_per_s={:.0f}", epoch_ + 1, epochs_, step, steps_, vals,
             elapsed > 0 ? static_cast<double>(samples) / elapsed : 0.0);
    return;
  }
  std::fflush(stderr);
}

void Progress::finish(int64_t step, const Shown& values) {
  if (!on_tty()) return;
  std::fprintf(stderr, "\r%s\x1b[K\n", line(step, values, true).c_str());
  std::fflush(stderr);
}

}  // namespace rnntrain
