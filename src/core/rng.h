// The one seeded random number generator (xoshiro256**): initialisers, shuffling and dropout all draw
// from instances of it, so every backend starts from identical numbers. Its state is four words,
// saved in checkpoints so a resumed run draws exactly what an uninterrupted one would.
#pragma once
#include <array>
#include <cstdint>

namespace rnntrain {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);
  uint64_t next_u64();
  double uniform();                    // [0, 1), 53 bits
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double normal();                     // standard normal (Box-Muller, no cached second value)
  uint64_t below(uint64_t n);          // uniform integer in [0, n)
  Rng split();                         // an independent stream derived from this one

  using State = std::array<uint64_t, 4>;
  State state() const { return s_; }
  void set_state(const State& s) { s_ = s; }

 private:
  State s_{};
};

}  // namespace rnntrain
