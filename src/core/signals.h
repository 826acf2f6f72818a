// Graceful stop on SIGINT, SIGTERM and SIGHUP while a StopOnSignals is alive: the first signal only
// records itself (stop_signal() turns non-zero) so that the trainer can finish its step and save; a
// second one exits at once with 128 + signal, which leaves every file valid because files are
// written to a temporary name and renamed. Not a general signal library: just this.
#pragma once

namespace rnntrain {

class StopOnSignals {
 public:
  StopOnSignals();   // installs the handlers and clears any earlier signal
  ~StopOnSignals();  // restores the handlers that were there before
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;
};

// The first signal received under a StopOnSignals (SIGINT, SIGTERM or SIGHUP), or 0.
int stop_signal();
// "SIGINT", "SIGTERM", "SIGHUP", or "a signal" for any other.
const char* signal_name(int sig);

}  // namespace rnntrain
