#include "backend/cpu/profile.h"

#include <fmt/format.h>

#include <cstdlib>

#include "core/log.h"

namespace rnntrain::cpu {

namespace {
Profile* current = nullptr;  // the profile in a step: one engine steps at a time, from one thread
}  // namespace

void Profile::mark_current(std::string_view phase) {
  if (current) current->mark(phase);
}

bool Profile::active() { return current != nullptr; }

void Profile::note_current(std::string_view line, double ms) {
  if (!current) return;
  auto it = current->notes_.find(line);
  if (it == current->notes_.end()) it = current->notes_.emplace(std::string(line), 0.0).first;
  it->second += ms;
}

Profile::Profile() {
  const char* v = std::getenv("RNNTRAIN_PROFILE");
  on_ = v && *v && std::string(v) != "0";
}

void Profile::start_step() {
  if (!on_) return;
  at_ = step0_ = Clock::now();
  in_step_ = true;
  current = this;
}

void Profile::mark(std::string_view phase) {
  if (!in_step_) return;
  const Clock::time_point now = Clock::now();
  auto it = ms_.find(phase);
  if (it == ms_.end()) {
    it = ms_.emplace(std::string(phase), 0.0).first;
    order_.emplace_back(phase);
  }
  it->second += std::chrono::duration<double, std::milli>(now - at_).count();
  at_ = now;
}

void Profile::end_step() {
  if (!in_step_) return;
  in_step_ = false;
  if (current == this) current = nullptr;
  step_ms_ += std::chrono::duration<double, std::milli>(Clock::now() - step0_).count();
  ++steps_;
}

Profile::~Profile() {
  if (current == this) current = nullptr;
  if (!on_ || steps_ == 0) return;
  const double n = static_cast<double>(steps_);
  std::string table = fmt::format("profile: {} training steps on the CPU, {:.3f} ms/step; wall time per step by phase:",
                                  steps_, step_ms_ / n);
  for (const std::string& p : order_)
    table += fmt::format("\n  {:<40} {:9.3f} ms {:5.1f}%", p, ms_[p] / n, 100.0 * ms_[p] / step_ms_);
  if (!notes_.empty()) table += "\n  inside the own engine's loop phases, per step:";
  for (const auto& [line, ms] : notes_) table += fmt::format("\n    {:<38} {:9.3f} ms", line, ms / n);
  log_info("{}", table);
}

}  // namespace rnntrain::cpu
