// Hostile config files: truncated, binary, deeply nested, huge numbers, and the inputs that make
// yaml-cpp loop or recurse. Each must end in a ConfigError (exit code 2), never a crash or a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include "core/error.h"
#include "spec/parse.h"

namespace rnntrain {
namespace {

const char* kGood = R"(model:
  init_from: runs/a/best.h5
  layers:
    - {type: Input, shape: [null, 4]}
    - {type: Masking, mask_value: 0.0}
    - type: Bidirectional
      merge_mode: concat
      layer: {type: LSTM, units: 8, return_sequences: true, kernel_initializer: {type: random_uniform, minval: -0.1, maxval: 0.1}}
    - {type: TimeDistributed, layer: {type: Dense, units: 3, activation: softmax}}
data:
  train: {path: "data/train.h5", inputs: x, targets: y}
  validation_split: 0.25
train:
  epochs: 3
  optimizer: {type: adam, learning_rate: 1e-3, clipnorm: 1.0}
  loss: {type: sparse_categorical_crossentropy, from_logits: false}
  metrics: [accuracy]
  early_stopping: {monitor: val_accuracy, patience: 2}
device: cpu
output: {dir: 'runs/x'}
)";

enum class Outcome { Parsed, ConfigErr, OtherError };

// Parses on a worker thread; a parse that takes more than 10 s is a hang: report it and exit,
// since a stuck thread cannot be stopped.
Outcome parse_with_watchdog(const std::string& text, const std::string& what, std::string* message = nullptr,
                            const std::vector<std::string>& overrides = {}) {
  auto job = std::async(std::launch::async, [&]() -> std::pair<Outcome, std::string> {
    try {
      parse_config(text, "bad.yaml", overrides);
      return {Outcome::Parsed, ""};
    } catch (const ConfigError& e) {
      return {Outcome::ConfigErr, e.what()};
    } catch (const std::exception& e) {
      return {Outcome::OtherError, e.what()};
    }
  });
  if (job.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    std::fprintf(stderr, "HANG: parse_config did not return within 10 s for %s (first bytes: %.60s)\n", what.c_str(),
                 text.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }
  auto [outcome, msg] = job.get();
  if (outcome == Outcome::OtherError) ADD_FAILURE() << what << ": not a ConfigError: " << msg;
  if (message) *message = msg;
  return outcome;
}

void expect_config_error(const std::string& text, const std::string& what, const std::string& says = "") {
  std::string msg;
  const Outcome o = parse_with_watchdog(text, what, &msg);
  EXPECT_EQ(o, Outcome::ConfigErr) << what << " was accepted";
  if (!says.empty()) {
    EXPECT_NE(msg.find(says), std::string::npos) << what << ": \"" << says << "\" not in: " << msg;
  }
}

TEST(Robust, TheGoodConfigParses) {  // the baseline the other tests cut up
  EXPECT_EQ(parse_with_watchdog(kGood, "the good config"), Outcome::Parsed);
}

TEST(Robust, EveryTruncationIsParsedOrRejected) {
  const std::string good = kGood;
  int rejected = 0;
  for (size_t n = 0; n < good.size(); ++n)
    if (parse_with_watchdog(good.substr(0, n), "the first " + std::to_string(n) + " bytes") == Outcome::ConfigErr) ++rejected;
  EXPECT_GT(rejected, static_cast<int>(good.size()) / 2) << "most truncations of a config cannot be valid";
}

TEST(Robust, BinaryInputIsRejected) {
  uint64_t state = 88172645463325252ull;  // xorshift: fixed pseudo-random bytes
  for (int file = 0; file < 20; ++file) {
    std::string bytes(4096, '\0');
    for (char& c : bytes) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      c = static_cast<char>(state & 0xff);
    }
    expect_config_error(bytes, "random bytes #" + std::to_string(file));
  }
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    expect_config_error(one, "the single byte " + std::to_string(b));
    expect_config_error(std::string(kGood).insert(40, one + one + one), "kGood with byte " + std::to_string(b) + " inserted");
  }
  static constexpr char kNul[] = "model:\0\0\0layers: []\n";
  expect_config_error(std::string(kNul, sizeof kNul - 1), "NUL bytes");
}

TEST(Robust, DeepNestingIsRejectedBeforeYamlCppRecurses) {
  expect_config_error(std::string(10000, '['), "10000 levels of [", "deeper than");
  std::string maps;
  for (int i = 0; i < 10000; ++i) maps += "{a: ";
  expect_config_error(maps, "10000 levels of {a:", "deeper than");
  std::string seqs = "model:\n";
  for (int i = 0; i < 10000; ++i) seqs += "- ";
  expect_config_error(seqs + "x\n", "10000 levels of '- '", "deeper than");
  std::string indent = "model:\n";
  for (int i = 1; i < 1000; ++i) indent += std::string(i, ' ') + "a:\n";
  expect_config_error(indent, "1000 levels of indentation", "deeper than");
  expect_config_error("model: &a [*a, *a]\n", "a self-referencing alias");
  expect_config_error(std::string(kGood) + "# " + std::string(5u << 20, 'x') + "\n", "a 5 MB file", "bytes");
}

TEST(Robust, HugeNumbersAreRejected) {
  const std::string head = "model:\n  layers:\n    - {type: Input, shape: [null, 4]}\n";
  for (const char* units : {"1e400", "-1e400", "99999999999999999999", "9223372036854775807", "1e15", ".inf", ".nan", "nan"})
    expect_config_error(head + "    - {type: Dense, units: " + units + "}\n", std::string("units: ") + units, "units");
  const std::string dense = head + "    - {type: Dense, units: 2}\n";
  for (const char* lr : {"1e400", "1e-400", ".inf", "-.inf", ".nan", "1e999999999999"})
    expect_config_error(dense + "train: {optimizer: {type: adam, learning_rate: " + lr + "}}\n", std::string("learning_rate: ") + lr,
                        "learning_rate");
  expect_config_error(dense + "train: {seed: 18446744073709551616}\n", "seed 2^64", "train.seed");
  expect_config_error(dense + "train: {epochs: 9223372036854775808}\n", "epochs 2^63", "train.epochs");
  expect_config_error(head + "    - {type: Embedding, input_dim: 4294967296, output_dim: 4294967296}\n", "a 2^64-parameter embedding",
                      "no larger than");
  expect_config_error(dense + "data: {validation_split: 0." + std::string(100000, '9') + "}\n", "a 100000-digit number",
                      "validation_split");
}

TEST(Robust, InputsThatMakeYamlCppLoopAreRejected) {
  // yaml-cpp 0.7 and 0.8 return empty documents forever for a stray ',' at the top level.
  for (const char* text : {",", ", a", "  ,", "&a ,", "!x ,", "model: {}\n---\n,", "[:", "{:", "- !+(.,.)"})
    expect_config_error(text, std::string("the text \"") + text + "\"");
  std::string msg;
  parse_with_watchdog(kGood, "an override with a stray comma", &msg, {"train.epochs=,"});
  EXPECT_NE(msg.find("override 'train.epochs=,'"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rnntrain
