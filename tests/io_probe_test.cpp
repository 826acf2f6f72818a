// Files that crash or hang libhdf5 itself (found by fuzz_h5_checkpoint, kept in tests/fuzz/findings)
// are refused with a DataError: the structure probe walks them in a child process first, for a while.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>

#include "core/error.h"
#include "io/checkpoint.h"
#include "model/params.h"
#include "spec/parse.h"

using namespace rnntrain;
namespace fs = std::filesystem;

namespace {

TEST(Probe, FilesThatCrashHdf5AreRefusedNotFatal) {
  setenv("RNNTRAIN_H5_PROBE_SECONDS", "3", 1);  // the timeout-* files loop libhdf5 until the probe gives up
  const Config cfg = load_config(std::string(RNNTRAIN_SOURCE_DIR) + "/configs/quickstart.yaml");
  const fs::path dir = fs::path(RNNTRAIN_SOURCE_DIR) / "tests/fuzz/findings/fuzz_h5_checkpoint";
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++files;
    Rng rng(0);
    Params params = init_params(cfg.model, rng);
    try {
      load_weights(e.path().string(), cfg.model, params);
      ADD_FAILURE() << e.path() << " loaded";
    } catch (const DataError& err) {
      const std::string msg = err.what();
      EXPECT_EQ(msg.rfind(e.path().string(), 0), 0u) << "names the file: " << msg;
      if (e.path().filename().string().rfind("segv", 0) == 0)
        EXPECT_NE(msg.find("crashed the HDF5 library"), std::string::npos) << msg;
      if (e.path().filename().string().rfind("timeout", 0) == 0)
        EXPECT_NE(msg.find("did not finish in 3 s"), std::string::npos) << msg;
    }
  }
  EXPECT_GE(files, 6);
}

}  // namespace
