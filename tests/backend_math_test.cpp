// The element-wise activations over arrays (apply_act: 16 lanes with AVX-512 where the CPU has it,
// the auto-vectorised loop elsewhere and for the tail) give bit for bit what the scalar sigmoid and
// tanh give, for every kind of input: both sides of tanh's series/quotient switch at |x| = 0.1,
// the exp clamps at -87 and 88, zeros, subnormals, infinities and NaN. So a run's numbers do not
// depend on the CPU it ran on.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_math.h"
#include "core/rng.h"

namespace rnntrain::cpu {
namespace {

std::vector<float> inputs() {
  std::vector<float> v;
  for (int i = -20000; i <= 20000; ++i) v.push_back(static_cast<float>(i) * 0.005f);  // -100 .. 100
  for (float x : {0.1f, -0.1f, 0.09999999f, 0.10000001f, 87.0f, -87.0f, 88.0f, -88.0f, 87.5f, -87.5f, 1e-30f,
                  -1e-30f, 1e-45f, 0.0f, -0.0f, 3.0e38f, -3.0e38f})
    v.push_back(x);
  v.push_back(std::numeric_limits<float>::infinity());
  v.push_back(-std::numeric_limits<float>::infinity());
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  Rng rng(3);
  for (int i = 0; i < 10000; ++i) v.push_back(static_cast<float>(rng.uniform(-12.0, 12.0)));
  v.push_back(0.5f);  // an odd length: the last few go through the tail loop
  return v;
}

void expect_same_bits(Activation act, float (*scalar)(float), const char* name) {
  std::vector<float> x = inputs();
  const std::vector<float> in = x;
  apply_act(act, x.data(), static_cast<int64_t>(x.size()));
  int64_t bad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const float want = scalar(in[i]);
    const bool same = std::isnan(want) ? std::isnan(x[i]) : std::bit_cast<uint32_t>(x[i]) == std::bit_cast<uint32_t>(want);
    if (!same && bad++ < 5)
      ADD_FAILURE() << name << "(" << in[i] << "): array " << x[i] << ", scalar " << want << " (element " << i << ")";
  }
  EXPECT_EQ(bad, 0) << name << ": elements that differ from the scalar function";
}

TEST(Activations, ArraysGiveTheScalarFunctionsBitForBit) {
  expect_same_bits(Activation::Sigmoid, sigmoid_f, "sigmoid");
  expect_same_bits(Activation::Tanh, tanh_f, "tanh");
}

}  // namespace
}  // namespace rnntrain::cpu
