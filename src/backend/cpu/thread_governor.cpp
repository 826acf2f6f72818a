// See thread_governor.h.
#include "backend/cpu/thread_governor.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "backend/cpu/onednn_stack.h"
#include "core/log.h"

namespace rnntrain::cpu {

namespace {

constexpr double kWindow = 0.5;        // seconds of steps per measurement
constexpr int kWindowSteps = 3;        // and at least this many steps
constexpr double kFaster = 0.9;        // another count is kept when its time per work is below this share
constexpr double kFirstPause = 5.0;    // seconds of steps before trying again, doubled while nothing changes
constexpr double kLongestPause = 600.0;

}  // namespace

int ThreadGovernor::cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int ThreadGovernor::free_cores() {
  const int all = cores();
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return all;
  char line[256];
  int running = -1;
  while (std::fgets(line, sizeof(line), f))
    if (std::strncmp(line, "procs_running ", 14) == 0) running = std::atoi(line + 14);
  std::fclose(f);
  if (running < 1) return all;
  return std::clamp(all - (running - 1), 1, all);  // less this thread, which is running
}

ThreadGovernor::ThreadGovernor(int max, int start) : max_(std::max(1, max)), n_(0) {
  start = std::clamp(start, 1, max_);
  if (start < max_)
    log_info("train.threads 0: {} of {} cores are running other work; starting on {} thread{}", max_ - start, max_,
             start, start == 1 ? "" : "s");
  apply(start);
  kept_ = start;
  // Trying fewer threads costs little; trying all of them beside another run costs a collapsed step,
  // so a start on fewer than all waits the first pause.
  pause_ = start < max_ ? kFirstPause : 0.0;
}

int ThreadGovernor::update(double seconds, double work) {
  if (max_ == 1 || !(seconds >= 0.0) || !(work > 0.0)) return n_;
  window_s_ += seconds, window_work_ += work, ++window_steps_;
  since_ += seconds;
  // A try that is already twice as slow ends at once: one collapsed step is enough to know.
  const bool lost = trying_ && window_s_ / window_work_ > 2 * kept_rate_;
  if (!lost && (window_s_ < kWindow || window_steps_ < kWindowSteps)) return n_;
  const double rate = window_s_ / window_work_;
  window_s_ = window_work_ = 0.0, window_steps_ = 0;
  if (trying_) {  // compare the other count with the one kept
    trying_ = false;
    since_ = 0.0;
    if (rate < kFaster * kept_rate_) {
      log_info("train.threads 0: {} thread{} ran the steps {:.1f}x faster than {} on this machine now; using {}", n_,
               n_ == 1 ? "" : "s", kept_rate_ / rate, kept_, n_);
      kept_ = n_, kept_rate_ = rate;
      pause_ = kFirstPause;
      return n_;
    }
    pause_ = std::min(std::max(2 * pause_, kFirstPause), kLongestPause);
    apply(kept_);
    return n_;
  }
  kept_rate_ = rate;
  if (since_ >= pause_) {  // try the other count for one window
    trying_ = true;
    apply(kept_ == 1 ? max_ : 1);
  }
  return n_;
}

void ThreadGovernor::apply(int n) {
  n_ = n;
  set_onednn_threads(n);
}

}  // namespace rnntrain::cpu
