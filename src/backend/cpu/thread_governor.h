// How many OpenMP threads oneDNN's recurrent stacks run on under train.threads: 0, on a machine other
// work may share. oneDNN's OpenMP teams spin at every step's barriers; where they share the cores with
// another busy process they collapse (blog_small on 2 cores, two runs at once: 85-110 ms a step each
// against 21 alone, and 1380 with a longer spin), while on one thread each both run near full speed.
// Waiting for a core does not tell the two apart (two runs share the cores either way), so the
// governor measures what it decides: the training steps' time per unit of work (batch rows x steps)
// on all cores and on one, and keeps the faster.
// - It starts on the cores no other task is running on then.
// - It tries the other count (one, or all) for half a second of steps and keeps it if it was at least
//   10% faster: first after half a second of steps when it started on all cores, else after 5 s; then
//   again after 5 s, 10 s, 20 s, ... of steps (up to 10 minutes) while the count it has stays the
//   faster, from 5 s after a change. A try twice as slow as the count kept ends after its first step
//   (beside another run, one collapsed step costs up to about a second).
// oneDNN's thread count changes no number (measured: charlm and sunspots weights bit-equal on 1 and 2
// threads), so a run's numbers do not depend on the load. BLAS's count would (one float ulp in the
// weight gradients' GEMMs), and its threads sleep as soon as they are idle (blas_env.h), so it stays.
#pragma once

namespace rnntrain::cpu {

class ThreadGovernor {
 public:
  // max: the cores this process may run on; start: the count to begin with (set here).
  ThreadGovernor(int max, int start);
  // For this machine now: all the cores it may run on, starting on those free.
  static ThreadGovernor for_this_machine() { return ThreadGovernor(cores(), free_cores()); }

  // After each training step: its seconds and its work (batch rows x timesteps). Sets and returns the
  // thread count for the next step.
  int update(double seconds, double work);
  int threads() const { return n_; }

  // Cores this process may run on, and of them those no other task is running on now.
  static int cores();
  static int free_cores();

 private:
  void apply(int n);

  int max_, n_;
  int kept_;                 // the count the last comparison kept
  double kept_rate_ = 0.0;   // its seconds per unit of work
  bool trying_ = false;      // this window runs the other count
  double pause_ = 0.0;       // seconds of steps until the next try
  double since_ = 0.0;       // seconds of steps since the last comparison
  double window_s_ = 0.0, window_work_ = 0.0;
  int window_steps_ = 0;
};

}  // namespace rnntrain::cpu
