// Tests that the datasets committed in data/ load with the sizes data/README.md documents.
#include <gtest/gtest.h>

#include <string>

#include "data/dataset.h"
#include "io/h5.h"

using namespace rnntrain;

TEST(RealDataTest, SunspotsMonthlyCsvLoadsWithTheDocumentedSize) {
  DataSource src;
  src.format = DataFormat::Csv;
  src.path = "data/sunspots_monthly.csv";
  src.features = {"sunspots"};
  src.target_columns = {"sunspots"};
  src.window = 24;
  src.scaling = Scaling::MinMax;
  DataMeta meta;
  Dataset d = load_source(src, RNNTRAIN_SOURCE_DIR, meta);
  // 3126 months (1749-01 .. 2009-06): 3126 - 24 - 1 + 1 windows.
  EXPECT_EQ(d.x.shape, (Shape{3102, 24, 1}));
  EXPECT_EQ(d.y.shape, (Shape{3102, 1}));
  EXPECT_DOUBLE_EQ(meta.shift[0], 0.0);     // the smallest monthly mean
  EXPECT_DOUBLE_EQ(meta.scale[0], 253.8);  // the largest (1957-10)
  // The first window is January 1749 (58.0) ..., its target January 1751 (70.0).
  EXPECT_FLOAT_EQ(d.x[0], static_cast<float>(58.0 / 253.8));
  EXPECT_FLOAT_EQ(d.y[0], static_cast<float>(70.0 / 253.8));
}

TEST(RealDataTest, BotchanTextLoadsWithTheDocumentedSize) {
  DataSource src;
  src.format = DataFormat::Text;
  src.path = "data/botchan.txt";
  src.seq_len = 100;
  DataMeta meta;
  Dataset d = load_source(src, RNNTRAIN_SOURCE_DIR, meta);
  // 255141 characters, 78 distinct (+ padding id 0).
  EXPECT_EQ(meta.vocab.size(), 79u);
  EXPECT_EQ(d.x.shape, (Shape{2551, 100}));
  EXPECT_EQ(d.y.shape, (Shape{2551, 100}));
  for (int64_t i = 0; i + 1 < d.x.numel(); ++i)
    if (i % 100 != 99) {
      ASSERT_EQ(d.y[i], d.x[i + 1]) << "targets are the inputs shifted by one, at " << i;
    }
  EXPECT_EQ(meta.vocab[static_cast<size_t>(d.x[0])], "B");  // "BOTCHAN (MASTER DARLING)"
}

TEST(RealDataTest, ClassifyH5WrittenByH5pyLoadsWithLengths) {
  DataSource src;
  src.format = DataFormat::Hdf5;
  src.path = "data/classify.h5";
  src.lengths = "lengths";
  DataMeta meta;
  Dataset d = load_source(src, RNNTRAIN_SOURCE_DIR, meta);
  ASSERT_EQ(d.x.shape, (Shape{600, 40, 1}));
  ASSERT_EQ(d.y.shape, Shape{600});
  ASSERT_EQ(d.lengths.size(), 600u);
  for (int64_t n = 0; n < 600; ++n) {
    const int64_t len = d.lengths[n];
    ASSERT_TRUE(len >= 10 && len <= 40) << "length " << len << " of sample " << n;
    ASSERT_TRUE(d.y[n] == 0 || d.y[n] == 1 || d.y[n] == 2) << "label " << d.y[n] << " of sample " << n;
    for (int64_t t = len; t < 40; ++t) ASSERT_EQ(d.x[n * 40 + t], 0.0f) << "padding, sample " << n << " step " << t;
  }
  // h5py wrote the description as a variable-length UTF-8 string.
  h5::File f = h5::File::open(std::string(RNNTRAIN_SOURCE_DIR) + "/data/classify.h5");
  EXPECT_NE(f.root().attr_string("description").find("waveforms"), std::string::npos);
}
