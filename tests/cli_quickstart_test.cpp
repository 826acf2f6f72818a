// The quickstart reaches the metric the README states: on the adding problem, the best checkpoint's
// validation MSE is below 0.01 and its MAE below 0.05 (predicting the mean gives 0.167 and 0.33).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"

using namespace rnntrain::test;

TEST(Quickstart, ReachesTheStatedMetric) {
  auto tmp = scratch("quickstart");
  const std::string run = (tmp / "run").string();
  CmdResult t = run_rnntrain("train configs/quickstart.yaml -q output.dir=" + run, tmp);
  ASSERT_EQ(t.code, 0) << t.err;
  CmdResult e = run_rnntrain("eval configs/quickstart.yaml --weights " + run + "/best.h5 --json", tmp);
  ASSERT_EQ(e.code, 0) << e.err;
  auto j = nlohmann::json::parse(e.out);
  EXPECT_EQ(j["samples"], 500);
  EXPECT_LT(j["loss"].get<double>(), 0.01) << e.out << "\n" << slurp(run + "/history.csv");
  EXPECT_LT(j["metrics"]["mae"].get<double>(), 0.05) << e.out;
  std::filesystem::remove_all(tmp);
}
