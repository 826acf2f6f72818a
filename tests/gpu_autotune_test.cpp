// plan.autotune on the GPU: the choice is a measured candidate (never auto), is written to the cache
// file, and is read back from it without measuring again (for training, and apart for inference); an
// unreadable cache file is left untouched.
// And `rnntrain bench` lists the GPU candidates with their status and device memory. Skips without a GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpu_helpers.h"
#include "train/autotune.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;
namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Autotune, ChoosesAMeasuredPlanCachesItAndReusesIt) {
  SKIP_WITHOUT_GPU();
  const fs::path dir = fs::temp_directory_path() / ("rnntrain_autotune_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  Config cfg = config_of("[10, 16]",
                         "[{type: LSTM, units: 32, return_sequences: true}, {type: LSTM, units: 32}, {type: Dense, units: 2}]",
                         "autotune");
  cfg.device = Device::Cuda;
  cfg.train.batch_size = 8;
  cfg.plan.autotune = true;
  cfg.plan.precision = Precision::Auto;
  cfg.plan.algo = RnnAlgo::Auto;
  cfg.plan.cache = (dir / "sub" / "autotune.json").string();
  const Params init = random_params(cfg.model, 1, 0.2);

  const Config a = resolve_plan(cfg, init, 10);
  EXPECT_NE(a.plan.precision, Precision::Auto);
  EXPECT_NE(a.plan.algo, RnnAlgo::Auto);
  ASSERT_TRUE(fs::exists(cfg.plan.cache)) << "the choice is cached";
  const std::string first = read(cfg.plan.cache);
  const auto j = nlohmann::json::parse(first);
  ASSERT_EQ(j.size(), 1u) << first;
  const auto& e = j.begin().value();
  const PlanChoice chosen{a.plan.fuse, a.plan.precision, a.plan.algo};
  EXPECT_EQ(e["choice"], chosen.name()) << first;
  EXPECT_GE(e["measured"].size(), 4u) << "at least fp32, tf32, fp16 and bf16 were measured: " << first;
  EXPECT_EQ(e["batch_size"], 8);
  EXPECT_EQ(e["timesteps"], 10);

  const Config b = resolve_plan(cfg, init, 10);  // from the cache: same choice, file unchanged
  EXPECT_EQ(b.plan.precision, a.plan.precision);
  EXPECT_EQ(b.plan.algo, a.plan.algo);
  EXPECT_EQ(b.plan.fuse, a.plan.fuse);
  EXPECT_EQ(read(cfg.plan.cache), first);

  // eval and predict: a choice of their own, timed on evaluation steps, cached beside training's.
  const Config inf = resolve_plan(cfg, init, 10, Workload::Inference);
  EXPECT_NE(inf.plan.precision, Precision::Auto);
  EXPECT_NE(inf.plan.algo, RnnAlgo::Auto);
  {
    const auto both = nlohmann::json::parse(read(cfg.plan.cache));
    ASSERT_EQ(both.size(), 2u) << both.dump(2);
    int inference = 0;
    for (auto it = both.begin(); it != both.end(); ++it)
      if (it.value()["workload"] == "inference") {
        ++inference;
        EXPECT_EQ(it.value()["choice"], (PlanChoice{inf.plan.fuse, inf.plan.precision, inf.plan.algo}.name()));
        EXPECT_GE(it.value()["measured"].size(), 4u);
      }
    EXPECT_EQ(inference, 1) << both.dump(2);
    const std::string with_both = read(cfg.plan.cache);
    EXPECT_EQ(resolve_plan(cfg, init, 10, Workload::Inference).plan.precision, inf.plan.precision);
    EXPECT_EQ(read(cfg.plan.cache), with_both) << "the inference choice is read back, not measured again";
    std::ofstream(cfg.plan.cache) << first;  // the rest of the test starts from the training entry alone
  }

  Config fixed = cfg;  // a named precision restricts the candidates to it (another cache entry)
  fixed.plan.precision = Precision::Bf16;
  EXPECT_EQ(resolve_plan(fixed, init, 10).plan.precision, Precision::Bf16);
  EXPECT_EQ(nlohmann::json::parse(read(cfg.plan.cache)).size(), 2u);

  // An entry of the wrong shape is measured again and replaced.
  nlohmann::json odd = nlohmann::json::parse(read(cfg.plan.cache));
  for (auto it = odd.begin(); it != odd.end(); ++it) *it = "x";
  std::ofstream(cfg.plan.cache) << odd.dump();
  EXPECT_NE(resolve_plan(cfg, init, 10).plan.precision, Precision::Auto);
  const nlohmann::json after = nlohmann::json::parse(read(cfg.plan.cache));
  int objects = 0;
  for (auto it = after.begin(); it != after.end(); ++it) objects += it->is_object() ? 1 : 0;
  EXPECT_EQ(objects, 1) << "this model's entry replaced, the other left as it was:\n" << after.dump(2);

  std::ofstream(cfg.plan.cache) << "{not json";
  const Config c = resolve_plan(cfg, init, 10);
  EXPECT_NE(c.plan.precision, Precision::Auto);
  EXPECT_EQ(read(cfg.plan.cache), "{not json") << "an unreadable cache is never overwritten";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rnntrain
