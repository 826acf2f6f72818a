// xoshiro256** seeded through splitmix64 (Blackman and Vigna's reference algorithms).
#include "core/rng.h"

#include <cmath>

namespace rnntrain {

static uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void Rng::reseed(uint64_t seed) {
  for (auto& w : s_) w = splitmix64(seed);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

uint64_t Rng::below(uint64_t n) {
  // Lemire's rejection-free-in-practice bounded draw, with rejection for exact uniformity.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do r = next_u64();
  while (r >= limit);
  return r % n;
}

Rng Rng::split() {
  Rng child;
  uint64_t seed = next_u64();
  child.reseed(seed);
  return child;
}

}  // namespace rnntrain
