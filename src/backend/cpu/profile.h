// RNNTRAIN_PROFILE=1 on the CPU: the wall time per training step of each phase (zeroing the
// gradients, every layer's forward and backward, the loss, the optimizer), printed when the engine
// closes, with each phase's share of the step. The own engine's recurrent layers split their time
// into parts, summed over the layers: "own: pack W, buffers" (the tape, the input kernel packed), "own:
// forward loop" (each slice's input projection, its steps, its outputs), "own: pack W^T, buffers",
// "own: backward loop" (the steps, dU, each slice's dx), "own: dW, db"; the layer's own line is then
// what is left of it. The CPU runs a step's work synchronously, so a phase is the time from the
// previous mark to its own; measuring costs a clock read per phase. Below the phases, what the own
// engine's loop regions lose to their threads (inside the loop phases, not phases of their own): the
// last thread's start after the region's, and the slowest thread's work beyond the fastest's (a
// region ends with its slowest thread; on the GPU machine's 16 vCPUs the same work took 1.2-2.1x
// longer on one thread than another, bench/PROFILE_CPU.md).
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace rnntrain::cpu {

class Profile {
 public:
  Profile();
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  bool on() const { return on_; }
  void start_step();                     // a training step begins
  void mark(std::string_view phase);  // the phase that ends now (ignored outside a training step)
  void end_step();
  // A mark on the profile whose step is running, from code that has no handle on it (the recurrent
  // layers' parts: packing, the loop, the weight GEMMs); nothing when none is.
  static void mark_current(std::string_view phase);
  // Whether a profiled step is running; a time (ms) for one of the lines below the phases.
  static bool active();
  static void note_current(std::string_view line, double ms);

 private:
  using Clock = std::chrono::steady_clock;
  bool on_ = false, in_step_ = false;
  Clock::time_point at_{}, step0_{};
  std::map<std::string, double, std::less<>> ms_;
  std::vector<std::string> order_;  // phases in the order first seen
  std::map<std::string, double, std::less<>> notes_;  // the lines below the phases, ms summed
  double step_ms_ = 0;
  int64_t steps_ = 0;
};

}  // namespace rnntrain::cpu
