// A machine that is busy with another training: two runs at once on the same cores must not collapse
// (oneDNN's OpenMP teams spinning against each other made each step 5x slower on 2 cores, 50x with a
// longer spin). The bound is generous: this catches a collapse, it does not time anything. Runs alone
// (RUN_SERIAL): another test's load would be a third run.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "cli_util.h"

namespace rnntrain::test {
namespace {

constexpr const char* kConfig = R"(model:
  layers:
    - {type: Input, shape: [50, 2]}
    - {type: LSTM, units: 128, return_sequences: true}
    - {type: LSTM, units: 128}
    - {type: Dense, units: 1}
data:
  train: {format: synthetic, task: adding, samples: 2560, timesteps: 50, seed: 1}
train:
  epochs: 1
  batch_size: 32
  loss: mse
device: cpu
)";

double seconds_of(const std::string& command, const std::filesystem::path& tmp) {
  const auto start = std::chrono::steady_clock::now();
  const CmdResult r = run_command(command, tmp);
  EXPECT_EQ(r.code, 0) << command << "\n" << r.err;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(BusyMachine, TwoTrainingsAtOnceTakeAboutTwiceOneAtMost) {
  const auto tmp = scratch("busy");
  write_file(tmp / "m.yaml", kConfig);
  const std::string bin = RNNTRAIN_BINARY;
  const auto train = [&](const std::string& dir, const std::string& extra) {
    return bin + " train " + (tmp / "m.yaml").string() + " -q output.dir=" + (tmp / dir).string() + " " + extra +
           " >/dev/null";
  };
  const std::string threads = std::getenv("BUSY_THREADS") ? std::getenv("BUSY_THREADS") : "";  // default: 0
  const double alone = seconds_of(train("alone", threads), tmp);
  const double pair = seconds_of("(" + train("a", threads) + " & " + train("b", threads) + "; wait)", tmp);
  std::printf("busy machine: one run %.2f s, two at once %.2f s (%.2fx)\n", alone, pair, pair / alone);
  // Two runs share the cores: 2x one run is the fair share; a collapse is 5x and more.
  EXPECT_LT(pair, 3.0 * alone + 1.0);
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace rnntrain::test
