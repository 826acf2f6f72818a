// The synthetic tasks of data/synthetic.h. Each draws from one Rng seeded with src.seed, so the same
// config gives the same data on every machine and backend; seed 0 (the default) draws a warning,
// since splits that all leave it out would be identical.
#include "data/synthetic.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "data/loaders.h"

namespace rnntrain {

namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;

// Adding problem (Hochreiter & Schmidhuber 1997): x [N, T, 2], channel 0 uniform [0, 1), channel 1
// marks one step in the first half and one in the second; y [N, 1] = sum of the two marked values.
Dataset adding(int64_t N, int64_t T, Rng& rng) {
  Dataset d;
  d.x = Tensor({N, T, 2});
  d.y = Tensor({N, 1});
  for (int64_t n = 0; n < N; ++n) {
    float* x = d.x.ptr() + n * T * 2;
    for (int64_t t = 0; t < T; ++t) x[t * 2] = static_cast<float>(rng.uniform());
    const int64_t half = T / 2;
    const int64_t a = static_cast<int64_t>(rng.below(static_cast<uint64_t>(half)));
    const int64_t b = half + static_cast<int64_t>(rng.below(static_cast<uint64_t>(T - half)));
    x[a * 2 + 1] = 1.0f;
    x[b * 2 + 1] = 1.0f;
    d.y[n] = x[a * 2] + x[b * 2];
  }
  return d;
}

// Noisy sine: x [N, T, 1] = sin(2 pi t / p + phase) + N(0, 0.1^2), period p uniform in [8, 32) steps;
// y [N, 1] = the noiseless next value, at t = T.
Dataset sine(int64_t N, int64_t T, Rng& rng) {
  Dataset d;
  d.x = Tensor({N, T, 1});
  d.y = Tensor({N, 1});
  for (int64_t n = 0; n < N; ++n) {
    const double period = rng.uniform(8.0, 32.0), phase = rng.uniform(0.0, kTwoPi);
    for (int64_t t = 0; t < T; ++t)
      d.x[n * T + t] = static_cast<float>(std::sin(kTwoPi * t / period + phase) + 0.1 * rng.normal());
    d.y[n] = static_cast<float>(std::sin(kTwoPi * T / period + phase));
  }
  return d;
}

// Parity: x [N, T, 1] random bits; y [N, 1] = their sum mod 2 (binary classification).
Dataset parity(int64_t N, int64_t T, Rng& rng) {
  Dataset d;
  d.x = Tensor({N, T, 1});
  d.y = Tensor({N, 1});
  for (int64_t n = 0; n < N; ++n) {
    int64_t ones = 0;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t bit = static_cast<int64_t>(rng.below(2));
      d.x[n * T + t] = static_cast<float>(bit);
      ones += bit;
    }
    d.y[n] = static_cast<float>(ones % 2);
  }
  return d;
}

// Variable-length token sequences: x [N, T] ids in 1..K right-padded with 0, lengths [N] uniform in
// [ceil(T/2), T]; y [N] from `label` applied to the valid tokens.
template <typename Label>
Dataset tokens(int64_t N, int64_t T, Rng& rng, Label label) {
  Dataset d;
  d.x = Tensor({N, T});
  d.y = Tensor({N});
  d.lengths.resize(static_cast<size_t>(N));
  const int64_t lo = (T + 1) / 2;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t len = lo + static_cast<int64_t>(rng.below(static_cast<uint64_t>(T - lo + 1)));
    for (int64_t t = 0; t < len; ++t)
      d.x[n * T + t] = static_cast<float>(1 + rng.below(static_cast<uint64_t>(kSyntheticTokens)));
    d.lengths[n] = static_cast<int32_t>(len);
    d.y[n] = static_cast<float>(label(d.x.ptr() + n * T, len));
  }
  return d;
}

// copy: the class is the first token (id - 1): it must be carried across the whole sequence.
int64_t first_token(const float* x, int64_t) { return static_cast<int64_t>(x[0]) - 1; }

// classify: the class is the most frequent token (id - 1), the smallest id on ties.
int64_t most_frequent(const float* x, int64_t len) {
  std::vector<int64_t> count(static_cast<size_t>(kSyntheticTokens) + 1, 0);
  for (int64_t t = 0; t < len; ++t) ++count[static_cast<size_t>(x[t])];
  int64_t best = 1;
  for (int64_t k = 2; k <= kSyntheticTokens; ++k)
    if (count[k] > count[best]) best = k;
  return best - 1;
}

struct Task {
  const char* name;
  int64_t default_steps, min_steps;
  int64_t features;  // F of x [N, T, F]; 1 for token ids [N, T]
  Dataset (*make)(int64_t N, int64_t T, Rng& rng);
};

const Task kTasks[] = {
    {"adding", 50, 2, 2, adding},
    {"sine", 50, 1, 1, sine},
    {"parity", 16, 1, 1, parity},
    {"copy", 20, 1, 1, [](int64_t N, int64_t T, Rng& rng) { return tokens(N, T, rng, first_token); }},
    {"classify", 20, 1, 1, [](int64_t N, int64_t T, Rng& rng) { return tokens(N, T, rng, most_frequent); }},
};

}  // namespace

std::vector<std::string> synthetic_tasks() {
  std::vector<std::string> out;
  for (const Task& t : kTasks) out.emplace_back(t.name);
  return out;
}

Dataset make_synthetic(const DataSource& src) {
  const Task* task = nullptr;
  for (const Task& t : kTasks)
    if (src.task == t.name) task = &t;
  if (!task) {
    std::string names;
    for (const auto& n : synthetic_tasks()) names += (names.empty() ? "" : ", ") + n;
    throw ConfigError(fmt::format("{}: unknown synthetic task '{}'. Choose one of: {} (see data/README.md).",
                                  src.loc.str(), src.task, names));
  }
  const int64_t N = src.samples > 0 ? src.samples : 1000;
  const int64_t T = src.timesteps > 0 ? src.timesteps : task->default_steps;
  if (src.samples < 0 || src.timesteps < 0 || T < task->min_steps)
    throw ConfigError(fmt::format("{}: synthetic task '{}' needs samples >= 0 and timesteps >= {} (0 = default); got "
                                  "samples {}, timesteps {}.", src.loc.str(), task->name, task->min_steps,
                                  src.samples, src.timesteps));
  // x is the largest array: refuse sizes this machine cannot hold before generating anything.
  const std::optional<int64_t> n = checked_numel({N, T, task->features});
  const uint64_t limit = memory_limit_bytes();
  if (!n || static_cast<uint64_t>(*n) > limit / sizeof(float))
    throw ConfigError(fmt::format("{}: synthetic task '{}' with samples {} and timesteps {} needs {} for its inputs, "
                                  "more than this machine's memory ({}). Use fewer samples or timesteps.",
                                  src.loc.str(), task->name, N, T,
                                  n ? bytes_str(static_cast<double>(*n) * sizeof(float)) : "more than 2^63 values",
                                  bytes_str(static_cast<double>(limit))));
  Rng rng(src.seed);
  Dataset d = task->make(N, T, rng);
  d.source = fmt::format("synthetic:{}(seed={})", task->name, src.seed);
  // The default seed is the same for every split: a validation or test source that does not set its
  // own generates the first samples of the training one. load_source cannot tell the splits apart,
  // so it says so whenever the seed is 0.
  if (src.seed == 0)
    log_warn("{}{}: seed is 0 (the default), so any other source with task '{}' and no seed of its own generates "
             "the same samples; a validation or test split would repeat the training data. Set `seed:` to a "
             "different value on each split (train, validation, test).", d.source, config_at(src), task->name);
  d.x_name = "inputs";
  d.y_name = "targets";
  return d;
}

}  // namespace rnntrain
