// Every example config in configs/ loads, plans and trains one short epoch.
#include <gtest/gtest.h>

#include "cli_util.h"

using namespace rnntrain::test;

TEST(Configs, EveryExampleTrainsOneShortEpoch) {
  auto tmp = scratch("configs");
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(RNNTRAIN_SOURCE_DIR) + "/configs")) {
    if (e.path().extension() != ".yaml") continue;
    ++n;
    const std::string name = e.path().stem().string();
    CmdResult p = run_rnntrain("plan " + e.path().string(), tmp);
    EXPECT_EQ(p.code, 0) << name << ": " << p.err;
    CmdResult r = run_rnntrain("train " + e.path().string() + " train.epochs=1 train.steps_per_epoch=2 output.dir=" +
                         (tmp / name).string(), tmp);
    EXPECT_EQ(r.code, 0) << name << ": " << r.err;
    EXPECT_TRUE(std::filesystem::exists(tmp / name / "last.h5")) << name;
  }
  EXPECT_GE(n, 4) << "configs/ should hold at least four examples";
  std::filesystem::remove_all(tmp);
}
