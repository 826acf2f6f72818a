// Tests of what the data layer writes and keeps: DataMeta's JSON (data_meta.json), Dataset rows
// (gather, slice), and write_predictions in each format.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "data/dataset.h"
#include "io/h5.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace rnntrain;

namespace {


void expect_values(const Tensor& t, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(t.data.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(t.data[i], want[i]) << what << ": first difference at " << i;
}

}  // namespace

TEST(DataMetaTest, JsonRoundTripAndErrors) {
  DataMeta m;
  m.vocab = {"", "\n", "\"", "\xC3\xA9"};
  m.shift = {0.1, -2.5};
  m.scale = {1.0 / 3.0, 4.0};
  m.target_shift = {7.0};
  m.target_scale = {1e-9};
  DataMeta back = DataMeta::from_json(m.to_json(), "meta.json");
  EXPECT_EQ(back.vocab, m.vocab);
  EXPECT_EQ(back.shift, m.shift);  // exact: doubles are written with round-trip precision
  EXPECT_EQ(back.scale, m.scale);
  EXPECT_EQ(back.target_shift, m.target_shift);
  EXPECT_EQ(back.target_scale, m.target_scale);
  EXPECT_TRUE(DataMeta::from_json("{}", "m.json").empty());
  std::string msg = error_of([] { DataMeta::from_json("{\"vocab\": 3}", "runs/r/data_meta.json"); });
  EXPECT_HAS(msg, "runs/r/data_meta.json");
  EXPECT_HAS(error_of([] { DataMeta::from_json("{oops", "m.json"); }), "m.json");
}

TEST(DataMetaTest, DamagedFilesGiveMessagesNotLibraryText) {
  struct Case {
    std::string json, want;
  };
  const std::vector<Case> cases = {
      {"{oops", "the JSON does not parse"},
      {"", "the JSON does not parse"},
      {"[1, 2]", "must be a JSON object, not array"},
      {"{\"vocab\": 3}", "key 'vocab' has the wrong type"},
      {"{\"shift\": [\"a\"], \"scale\": [1]}", "key 'shift' has the wrong type"},
      {"{\"shift\": [0, 1], \"scale\": [1]}", "must have the same length"},
      {"{\"shift\": [0], \"scale\": [0]}", "column 0 has shift 0 and scale 0"},
      {"{\"target_shift\": [1e400], \"target_scale\": [1]}", "the JSON does not parse"},
      {"{\"target_shift\": [1], \"target_scale\": [-2]}", "target_scale -2"},
  };
  for (const Case& c : cases) {
    std::string msg;
    try {
      DataMeta::from_json(c.json, "runs/r/data_meta.json");
      ADD_FAILURE() << "accepted: " << c.json;
    } catch (const DataError& e) {
      msg = e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a DataError for " << c.json << ": " << e.what();
    }
    EXPECT_HAS(msg, "runs/r/data_meta.json");
    EXPECT_HAS(msg, c.want);
    EXPECT_HAS(msg, "re-run training");
    EXPECT_EQ(msg.find("[json.exception"), std::string::npos) << "library prefix in: " << msg;
  }
}

TEST(DatasetRowsTest, GatherAndSliceCopyRowsOfEveryArray) {
  Dataset d;
  d.x = Tensor({4, 2});
  d.y = Tensor({4});
  for (int i = 0; i < 8; ++i) d.x[i] = static_cast<float>(i);
  for (int i = 0; i < 4; ++i) d.y[i] = static_cast<float>(10 * i);
  d.lengths = {1, 2, 1, 2};
  d.source = "mem";
  Batch b = d.gather({3, 0});
  EXPECT_EQ(b.x.shape, (Shape{2, 2}));
  expect_values(b.x, {6, 7, 0, 1}, "gather x");
  expect_values(b.y, {30, 0}, "gather y");
  EXPECT_EQ(b.lengths, (std::vector<int32_t>{2, 1}));
  Dataset s = d.slice(1, 3);
  EXPECT_EQ(s.size(), 2);
  expect_values(s.x, {2, 3, 4, 5}, "slice x");
  EXPECT_EQ(s.lengths, (std::vector<int32_t>{2, 1}));
  EXPECT_THROW(d.gather({4}), RuntimeError);
  EXPECT_THROW(d.slice(2, 5), RuntimeError);
}

TEST(PredictionsTest, WritesNpyH5AndCsv) {
  const fs::path dir = fs::temp_directory_path() / ("rnntrain_data_output_" + std::to_string(getpid()));
  auto path = [&](const std::string& name) { return (dir / name).string(); };
  Tensor p({2, 3});
  for (int i = 0; i < 6; ++i) p[i] = 0.5f * i - 1.0f;
  write_predictions(path("out/p.npy"), p);
  write_predictions(path("out/p.h5"), p);
  write_predictions(path("out/p.csv"), p);
  // .npy: the documented header, then float32 little-endian data.
  std::ifstream in(path("out/p.npy"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_HAS(bytes, "'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(bytes.size() % 64, 24u) << "header padded to 64 bytes, then 24 data bytes";
  float first;
  std::memcpy(&first, bytes.data() + bytes.size() - 24, 4);
  EXPECT_EQ(first, -1.0f);
  h5::File f = h5::File::open(path("out/p.h5"));
  expect_values(f.root().read("predictions"), p.data, "h5");
  std::ifstream csv(path("out/p.csv"));
  std::string text((std::istreambuf_iterator<char>(csv)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "p0,p1,p2\n-1,-0.5,0\n0.5,1,1.5\n");
  EXPECT_FALSE(fs::exists(path("out/p.csv.tmp")));
  EXPECT_THROW(write_predictions(path("out/p.txt"), p), UsageError);
  fs::remove_all(dir);
}
