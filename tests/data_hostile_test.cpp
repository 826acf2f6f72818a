// Hostile data files (issue 10): devices, endless or huge lines, unclosed quotes, duplicate
// columns, links out of an HDF5 file. Each must give one clear DataError naming the file, quickly,
// with at most a short echo of what the file holds.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/dataset.h"
#include "io/h5.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace rnntrain;

namespace {

class DataHostile : public ScratchTest {
 protected:
  DataHostile() : ScratchTest("data_hostile") {}
  // A csv source of `file` with features a, b and target b.
  static DataSource csv(const std::string& file) {
    DataSource src;
    src.format = DataFormat::Csv;
    src.path = file;
    src.window = 2;
    src.features = {"a", "b"};
    src.target_columns = {"b"};
    return src;
  }
  Dataset load(const DataSource& src) const {
    DataMeta meta;
    return load_source(src, dir_.string(), meta);
  }
};

TEST_F(DataHostile, ADeviceIsRefusedAtOnce) {
  // data.train: {path: /dev/zero, format: csv, window: 5} read forever.
  const auto t0 = std::chrono::steady_clock::now();
  const std::string msg = error_of([&] { load(csv("/dev/zero")); });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  EXPECT_HAS(msg, "/dev/zero: is not a regular file (a device, pipe or socket)");
  DataSource npy;
  npy.format = DataFormat::Npy;
  npy.inputs = "/dev/zero";
  EXPECT_HAS(error_of([&] { load(npy); }), "/dev/zero: is not a regular file");
}

TEST_F(DataHostile, ABadCellIsEchoedShort) {
  write("big.csv", "a,b\n1,2\n3," + std::string(5 << 20, 'x') + "\n5,6\n7,8\n");
  const std::string msg = error_of([&] { load(csv("big.csv")); });
  EXPECT_HAS(msg, path("big.csv") + ":3: column 'b' holds 'xxxx");
  EXPECT_HAS(msg, "x...', which is not a number");
  EXPECT_LT(msg.size(), 400u) << "the 5 MB cell is echoed whole";
}

TEST_F(DataHostile, AnEndlessLineIsRefused) {
  write("long.csv", "a,b\n" + std::string((16 << 20) + 10, '1'));
  const std::string msg = error_of([&] { load(csv("long.csv")); });
  EXPECT_HAS(msg, path("long.csv") + ":2: the line is longer than 16 MiB");
}

TEST_F(DataHostile, AnUnclosedQuoteIsAnError) {
  write("q.csv", "a,b\n1,2\n\"3,4\n5,6\n7,8\n");
  const std::string msg = error_of([&] { load(csv("q.csv")); });
  EXPECT_HAS(msg, path("q.csv") + ":3: a quoted field is not closed on this line");
}

TEST_F(DataHostile, DuplicateColumnNamesAreAnError) {
  write("dup.csv", "a,b,a\n1,2,3\n3,4,5\n5,6,7\n7,8,9\n");
  const std::string msg = error_of([&] { load(csv("dup.csv")); });
  EXPECT_HAS(msg, path("dup.csv") + ":1: column 'a' appears twice in the header (fields 1 and 3)");
}

TEST_F(DataHostile, AnHdf5ExternalLinkIsNamedAsALink) {
  {
    h5::File other = h5::File::create(path("other.h5"));
    other.root().write("x", Tensor({2, 3, 1}, 1.0f));
    other.close();
    hid_t f = H5Fcreate(path("links.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Lcreate_external(path("other.h5").c_str(), "/x", f, "x", H5P_DEFAULT, H5P_DEFAULT), 0);
    ASSERT_GE(H5Lcreate_soft("/gone", f, "y", H5P_DEFAULT, H5P_DEFAULT), 0);
    H5Fclose(f);
  }
  DataSource src;
  src.format = DataFormat::Hdf5;
  src.path = "links.h5";
  std::string msg = error_of([&] { load(src); });
  EXPECT_HAS(msg, "'/x' is an external link to " + path("other.h5") + ":/x; rnntrain reads only data stored inside the file");
  src.inputs = "y";
  msg = error_of([&] { load(src); });
  EXPECT_HAS(msg, path("links.h5") + ": '/y' is a soft link to '/gone', which does not exist in the file");
  EXPECT_HAS(msg, "`inputs`");
}

}  // namespace
