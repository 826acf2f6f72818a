// What data.validation_split relies on from load_source: the counts of inputs, targets and lengths
// are checked when a source is loaded (before the trainer slices rows off it), and CSV scaling is
// fitted only on the windows that stay for training (holdout_fraction).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/dataset.h"
#include "data/npy.h"
#include "io/h5.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace rnntrain;

namespace {

class SplitTest : public ScratchTest {
 protected:
  SplitTest() : ScratchTest("data_split") {}
  // The DataError message of load_source, or a test failure when it loads (or throws anything else).
  std::string load_error(const DataSource& src) const {
    DataMeta meta;
    try {
      Dataset d = load_source(src, dir_.string(), meta);
      ADD_FAILURE() << "loaded x " << shape_str(d.x.shape) << ", y " << shape_str(d.y.shape) << ", "
                    << d.lengths.size() << " lengths without an error";
    } catch (const DataError& e) {
      return e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a DataError: " << e.what();
    }
    return "";
  }
};


Tensor filled(Shape shape, float value) { return Tensor(std::move(shape), value); }

}  // namespace

// ---- counts ------------------------------------------------------------------------------------

TEST_F(SplitTest, TargetsWithMoreRowsThanInputsAreRefusedAtLoad) {
  // 200 target rows for 100 inputs: sliced by validation_split, rows would pair up wrongly.
  write("x.npy", npy_bytes(filled({100, 4, 1}, 0.5f)));
  write("y.npy", npy_bytes(filled({200, 1}, 1.0f)));
  DataSource src;
  src.format = DataFormat::Npy;
  src.inputs = "x.npy";
  src.targets = "y.npy";
  const std::string msg = load_error(src);
  EXPECT_HAS(msg, path("x.npy"));
  EXPECT_HAS(msg, "have 200 samples but inputs (array) have 100. Both must have one row per sample.");
}

TEST_F(SplitTest, LengthsForFewerSamplesAreRefusedAtLoad) {
  // 50 lengths for 100 samples: slicing the last rows used to fail with vector::_M_range_check.
  {
    h5::File f = h5::File::create(path("d.h5"));
    f.root().write("x", filled({100, 4, 1}, 0.5f));
    f.root().write("y", filled({100, 1}, 1.0f));
    f.root().write("len", filled({50}, 2.0f));
  }
  DataSource src;
  src.format = DataFormat::Hdf5;
  src.path = "d.h5";
  src.lengths = "len";
  const std::string msg = load_error(src);
  EXPECT_HAS(msg, path("d.h5"));
  EXPECT_HAS(msg, "50 sequence lengths for 100 samples. Give one length per sample.");
}

TEST_F(SplitTest, MatchingCountsLoadAndSliceCleanly) {
  write("x.npy", npy_bytes(filled({10, 4, 1}, 0.5f)));
  write("y.npy", npy_bytes(filled({10, 1}, 1.0f)));
  DataSource src;
  src.format = DataFormat::Npy;
  src.inputs = "x.npy";
  src.targets = "y.npy";
  DataMeta meta;
  Dataset d = load_source(src, dir_.string(), meta);
  Dataset val = d.slice(8, 10);
  EXPECT_EQ(val.x.shape, (Shape{2, 4, 1}));
  EXPECT_EQ(val.y.shape, (Shape{2, 1}));
}

// ---- CSV scaling with a hold-out ---------------------------------------------------------------

TEST_F(SplitTest, CsvScalingIsFittedOnTheWindowsKeptForTraining) {
  // Rows a = 1..8 then two outliers (100, 200) in the part validation_split will hold out.
  write("s.csv", "a\n1\n2\n3\n4\n5\n6\n7\n8\n100\n200\n");
  DataSource src;
  src.format = DataFormat::Csv;
  src.path = "s.csv";
  src.features = {"a"};
  src.target_columns = {"a"};
  src.window = 2;
  src.scaling = Scaling::MinMax;
  // 10 rows, window 2 + horizon 1: 8 windows. Holding out 0.25 keeps floor(8 * 0.75) = 6 windows,
  // starting at rows 0..5, so rows 0..7 (a = 1..8) are what training sees.
  DataMeta meta;
  Dataset d = load_source(src, dir_.string(), meta, 0.25);
  ASSERT_EQ(d.x.shape, (Shape{8, 2, 1})) << "the hold-out changes the fit, not the windows";
  ASSERT_EQ(meta.shift.size(), 1u);
  EXPECT_EQ(meta.shift[0], 1.0) << "min of the training rows";
  EXPECT_EQ(meta.scale[0], 7.0) << "max - min of the training rows (8 - 1), not of the held-out 200";
  EXPECT_EQ(meta.target_shift[0], 1.0);
  EXPECT_EQ(meta.target_scale[0], 7.0);
  EXPECT_FLOAT_EQ(d.x[0], 0.0f);
  EXPECT_FLOAT_EQ(d.y[7], (200.0f - 1.0f) / 7.0f) << "held-out windows are scaled with the training fit";

  // Without a hold-out (the default) every row is used, as before.
  DataMeta all;
  load_source(src, dir_.string(), all);
  EXPECT_EQ(all.shift[0], 1.0);
  EXPECT_EQ(all.scale[0], 199.0);

  // A later source reuses the fit whatever fraction is passed.
  DataMeta reused = meta;
  load_source(src, dir_.string(), reused, 0.5);
  EXPECT_EQ(reused.scale, meta.scale);

  EXPECT_THROW(load_source(src, dir_.string(), all, 1.0), ConfigError) << "nothing would be left to fit on";
}
