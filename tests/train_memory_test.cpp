// The memory estimate: what it counts for a known model, and that a model that cannot fit is
// refused with the need and the limit named, before anything is allocated.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/sizes.h"
#include "core/error.h"
#include "spec/parse.h"
#include "train/memory.h"

using namespace rnntrain;

namespace {

Config config(int64_t units, const std::string& optimizer) {
  return parse_config(fmt::format(R"(model:
  layers:
    - {{type: Input, shape: [30, 2]}}
    - {{type: LSTM, units: {}}}
    - {{type: Dense, units: 1}}
train: {{batch_size: 32, optimizer: {}}}
device: cpu
)", units, optimizer), "mem.yaml");
}

TEST(Memory, CountsParametersGradientsSlotsAndActivations) {
  const Config cfg = config(32, "{type: adam, amsgrad: true}");
  const double P = 4 * 32 * (2 + 32 + 1) + 32 + 1;  // LSTM kernel, recurrent kernel and bias; Dense
  const MemoryNeed train = estimate_memory(cfg, 30, true);
  EXPECT_EQ(train.params, P);
  EXPECT_EQ(train.weights, 8 * P);
  EXPECT_EQ(train.slots, 3 * 4 * P) << "amsgrad keeps three slots";
  // LSTM: its output [B, 32] plus the tape of 30 steps of 4 gates, h and c; Dense: [B, 1]; all with gradients.
  EXPECT_EQ(train.activations, 2 * 4 * (32.0 * 32 + 32.0 * 30 * 6 * 32 + 32.0 * 1));
  const MemoryNeed infer = estimate_memory(cfg, 30, false);
  EXPECT_EQ(infer.slots, 0);
  EXPECT_EQ(infer.activations, 4 * (32.0 * 32 + 32.0));
  EXPECT_EQ(estimate_memory(config(32, "{type: sgd}"), 30, true).slots, 0) << "plain SGD keeps no slot";
}

TEST(Memory, AModelThatCannotFitIsRefusedNamingNeedAndLimit) {
  ASSERT_GT(host_available_bytes(), 0) << "/proc/meminfo has MemAvailable on Linux";
  EXPECT_NO_THROW(check_memory(config(32, "{type: adam}"), 30, true));
  try {
    check_memory(config(10000000, "{type: adam}"), 30, true);  // 4e14 parameters
    FAIL() << "expected a RuntimeError";
  } catch (const RuntimeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("mem.yaml"), std::string::npos) << msg;
    EXPECT_NE(msg.find("4e+14 parameters"), std::string::npos) << msg;
    EXPECT_NE(msg.find(" are available"), std::string::npos) << msg;
    EXPECT_NE(msg.find("units"), std::string::npos) << msg;
  }
}

}  // namespace
