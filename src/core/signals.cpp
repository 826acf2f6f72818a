// StopOnSignals: the handler only stores the signal and writes one line with write(2); both are
// async-signal-safe, as is _exit for the second signal.
#include "core/signals.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

namespace rnntrain {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
std::atomic<int> g_signal{0};
struct sigaction g_old[3];

void say(const char* msg) { [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, msg, std::strlen(msg)); }

void on_signal(int sig) {
  if (g_signal.exchange(sig) != 0) {
    say("\nrnntrain: second signal: exiting now; the files already written are complete\n");
    ::_exit(128 + sig);
  }
  say("\nrnntrain: stopping after the current step to save the run (send the signal again to exit at once)\n");
}

}  // namespace

StopOnSignals::StopOnSignals() {
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads and writes in progress carry on; the trainer polls stop_signal()
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &g_old[i]);
}

StopOnSignals::~StopOnSignals() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_old[i], nullptr);
}

int stop_signal() { return g_signal.load(); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}

}  // namespace rnntrain
