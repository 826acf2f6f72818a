// Tests of load_source for each format on small files written here (HDF5, .npy of every dtype,
// .npz stored and deflated, CSV windows and scaling checked by hand, text vocabulary and shifted
// targets), their error messages, DataMeta's JSON, Dataset rows, and write_predictions.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <typeinfo>

#include "core/error.h"
#include "data/dataset.h"
#include "data/npy.h"
#include "io/h5.h"
#include "io/zip.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace rnntrain;

namespace {

class LoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rnntrain_data_load_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  Dataset load(const DataSource& src) const {
    DataMeta meta;
    return load_source(src, dir_.string(), meta);
  }
  fs::path dir_;
};


// A .npy file written by hand: header dict, padding to 64 bytes, raw little-endian data.
std::string npy(const std::string& descr, const std::string& shape, const std::string& data, int version = 1,
                bool fortran = false) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                       ", 'shape': " + shape + ", }";
  const size_t prefix = version == 1 ? 10 : 12;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(version);
  out += '\0';
  const uint32_t n = static_cast<uint32_t>(header.size());
  for (size_t k = 0; k < (version == 1 ? 2u : 4u); ++k) out += static_cast<char>((n >> (8 * k)) & 0xff);
  return out + header + data;
}

template <typename T>
std::string raw(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

void expect_values(const Tensor& t, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(t.data.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(t.data[i], want[i]) << what << ": first difference at " << i;
}

}  // namespace

// ---- hdf5 --------------------------------------------------------------------------------------

TEST_F(LoadTest, Hdf5ReadsInputsTargetsAndLengthsOfAnyNumericType) {
  {
    h5::File f = h5::File::create(path("d.h5"));
    h5::Group r = f.root();
    Tensor x({3, 2, 1});
    for (int i = 0; i < 6; ++i) x[i] = 0.5f * i;
    r.write("x", x);
    r.write_int64("labels", {2, 0, 1});
    r.write_double("len", {2, 1, 2}, {3});
    r.write_double("sw", {0.5, 2, 1}, {3});
  }
  DataSource src;
  src.format = DataFormat::Hdf5;
  src.path = "d.h5";  // relative to base_dir
  src.targets = "labels";
  src.lengths = "len";
  src.sample_weight = "sw";
  Dataset d = load(src);
  expect_values(d.w, {0.5f, 2, 1}, "sample weights");
  src.sample_weight = "weights";
  EXPECT_HAS(error_of([&] { load(src); }), "no dataset 'weights' for `sample_weight`");
  src.sample_weight = "";
  d = load(src);
  EXPECT_EQ(d.source, path("d.h5"));
  EXPECT_EQ(d.x.shape, (Shape{3, 2, 1}));
  expect_values(d.x, {0, 0.5f, 1, 1.5f, 2, 2.5f}, "x");
  expect_values(d.y, {2, 0, 1}, "y from int64");
  EXPECT_EQ(d.lengths, (std::vector<int32_t>{2, 1, 2}));
  // The default targets name "y" may be absent: predict-only data.
  src.targets = "y";
  src.lengths = "";
  EXPECT_TRUE(load(src).y.empty());
}

TEST_F(LoadTest, Hdf5ErrorsNameTheFileTheDatasetAndWhatIsThere) {
  {
    h5::File f = h5::File::create(path("d.h5"));
    f.root().write("inputs", Tensor({2, 3}));
    f.root().write_double("len", {1.5, 2}, {2});
  }
  DataSource src;
  src.format = DataFormat::Hdf5;
  src.path = "d.h5";
  src.loc = {"configs/run.yaml", 12, 5};
  std::string msg = error_of([&] { load(src); });
  EXPECT_HAS(msg, path("d.h5"));
  EXPECT_HAS(msg, "no dataset 'x'");
  EXPECT_HAS(msg, "inputs, len");
  EXPECT_HAS(msg, "configs/run.yaml:12:5");
  src.inputs = "inputs";
  src.targets = "labels";
  msg = error_of([&] { load(src); });
  EXPECT_HAS(msg, "no dataset 'labels' for `targets`");
  src.targets = "";
  src.lengths = "len";
  msg = error_of([&] { load(src); });
  EXPECT_HAS(msg, "not an integer");
  src.path = "missing.h5";
  msg = error_of([&] { load(src); });
  EXPECT_HAS(msg, path("missing.h5"));
  EXPECT_HAS(msg, "no such file");
  src.path = "";
  error_of<ConfigError>([&] { load(src); });
}

// ---- npy ---------------------------------------------------------------------------------------

TEST_F(LoadTest, NpyParsesEveryNumericDtype) {
  struct Case {
    std::string descr, data;
    std::vector<float> want;
  };
  const std::vector<Case> cases = {
      {"<f4", raw<float>({1.5f, -2.25f, 3e-8f, 1e30f}), {1.5f, -2.25f, 3e-8f, 1e30f}},
      {"<f8", raw<double>({1.5, -2.25, 0.1, 1e30}), {1.5f, -2.25f, 0.1f, 1e30f}},
      {"<f2", raw<uint16_t>({0x3E00, 0xC000, 0x0001, 0x7BFF}), {1.5f, -2.0f, std::ldexp(1.0f, -24), 65504.0f}},
      {"|i1", raw<int8_t>({-128, -1, 0, 127}), {-128, -1, 0, 127}},
      {"<i2", raw<int16_t>({-32768, -1, 7, 32767}), {-32768, -1, 7, 32767}},
      {"<i4", raw<int32_t>({-5, 0, 16777216, 3}), {-5, 0, 16777216, 3}},
      {"<i8", raw<int64_t>({-5, 0, 1LL << 40, 3}), {-5, 0, 1099511627776.0f, 3}},
      {"|u1", raw<uint8_t>({0, 1, 200, 255}), {0, 1, 200, 255}},
      {"<u2", raw<uint16_t>({0, 1, 65535, 9}), {0, 1, 65535, 9}},
      {"<u4", raw<uint32_t>({0, 1, 4000000000u, 9}), {0, 1, 4e9f, 9}},
      {"<u8", raw<uint64_t>({0, 1, 5, 9}), {0, 1, 5, 9}},
      {"|b1", raw<uint8_t>({0, 1, 1, 0}), {0, 1, 1, 0}},
  };
  for (const Case& c : cases) {
    write("a.npy", npy(c.descr, "(2, 2)", c.data));
    DataSource src;
    src.format = DataFormat::Npy;
    src.inputs = "a.npy";
    Dataset d = load(src);
    EXPECT_EQ(d.x.shape, (Shape{2, 2})) << c.descr;
    expect_values(d.x, c.want, c.descr);
  }
  // Version 2.0 header, a 1-D shape written "(4,)", and a 0-D array.
  Tensor t = parse_npy(npy("<i4", "(4,)", raw<int32_t>({1, 2, 3, 4}), 2), "v2.npy");
  EXPECT_EQ(t.shape, Shape{4});
  expect_values(t, {1, 2, 3, 4}, "v2");
  EXPECT_EQ(parse_npy(npy("<f8", "()", raw<double>({2.5})), "scalar.npy").data, std::vector<float>{2.5f});
}

TEST_F(LoadTest, NpySourceUsesPathsForInputsTargetsAndLengths) {
  write("x.npy", npy("<f4", "(2, 3, 1)", raw<float>({1, 2, 3, 4, 5, 6})));
  write("y.npy", npy("<i8", "(2,)", raw<int64_t>({1, 0})));
  write("len.npy", npy("<i4", "(2,)", raw<int32_t>({3, 2})));
  DataSource src;
  src.format = DataFormat::Npy;
  src.inputs = "x.npy";
  src.targets = "y.npy";
  src.lengths = "len.npy";
  Dataset d = load(src);
  EXPECT_EQ(d.x.shape, (Shape{2, 3, 1}));
  expect_values(d.y, {1, 0}, "y");
  EXPECT_EQ(d.lengths, (std::vector<int32_t>{3, 2}));
  // `path` alone names the inputs; the default targets "y" may be absent.
  DataSource only;
  only.format = DataFormat::Npy;
  only.path = "x.npy";
  Dataset p = load(only);
  EXPECT_EQ(p.x.shape, (Shape{2, 3, 1}));
  EXPECT_TRUE(p.y.empty());
}

TEST_F(LoadTest, NpyRejectsWhatItCannotReadWithReasons) {
  auto msg_for = [&](const std::string& bytes) {
    write("bad.npy", bytes);
    DataSource src;
    src.format = DataFormat::Npy;
    src.inputs = "bad.npy";
    return error_of([&] { load(src); });
  };
  std::string msg = msg_for(npy("<f4", "(2, 2)", raw<float>({1, 2, 3, 4}), 1, true));
  EXPECT_HAS(msg, "Fortran order");
  EXPECT_HAS(msg, "bad.npy");
  EXPECT_HAS(msg_for(npy(">f4", "(2,)", raw<float>({1, 2}))), "big-endian");
  EXPECT_HAS(msg_for(npy("<c8", "(1,)", raw<float>({1, 2}))), "dtype '<c8' is not supported");
  EXPECT_HAS(msg_for(npy("<U3", "(1,)", std::string(12, 'a'))), "not supported");
  EXPECT_HAS(msg_for(npy("<f4", "(3, 2)", raw<float>({1, 2, 3}))), "truncated");
  EXPECT_HAS(msg_for("x,y\n1,2\n"), "not a .npy file");
  DataSource src;
  src.format = DataFormat::Npy;
  src.inputs = "none.npy";
  EXPECT_HAS(error_of([&] { load(src); }), "no such file");
  src.inputs = "bad.npy";
  write("bad.npy", npy("<f4", "(1,)", raw<float>({1})));
  src.targets = "labels.npy";  // named explicitly, so it must exist
  EXPECT_HAS(error_of([&] { load(src); }), path("labels.npy"));
}

TEST_F(LoadTest, NpyHeadersWithImpossibleSizesAreDataErrorsNamingTheFile) {
  // Each header is damaged (or crafted) but the file is small; none may crash, wrap around, allocate
  // terabytes or leak a library exception.
  struct Case {
    std::string shape, want;
  };
  const std::vector<Case> cases = {
      {"(4, 4611686018427387904, 1)", "more elements than a 64-bit count can hold"},  // 2^64 elements: wraps to 0
      {"(100000000000, 30, 2)", "declares shape (100000000000, 30, 2)"},             // 24 TB
      {"(12345678901234567890123, 2)", "dimension 12345678901234567890123"},           // 23 digits: no int64
      {"(3, 3)", "holds only 16 bytes"},                                               // simply truncated
  };
  for (const Case& c : cases) {
    write("bad.npy", npy("<f4", c.shape, raw<float>({1, 2, 3, 4})));
    DataSource src;
    src.format = DataFormat::Npy;
    src.inputs = "bad.npy";
    std::string msg;
    try {
      load(src);
      ADD_FAILURE() << c.shape << ": loaded without an error";
    } catch (const DataError& e) {
      msg = e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.shape << ": " << typeid(e).name() << " instead of a DataError: " << e.what();
    }
    EXPECT_HAS(msg, path("bad.npy"));
    EXPECT_HAS(msg, c.want);
    EXPECT_HAS(msg, "numpy.save");  // what to do
  }
}

TEST_F(LoadTest, Hdf5DatasetDeclaringMoreThanMemoryIsRefusedBeforeReading) {
  // A chunked dataset of 6e15 float32 values with no chunk written: the file is a few KB.
  {
    hid_t file = H5Fcreate(path("huge.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    const hsize_t dims[3] = {100000000000000ull, 30, 2}, chunk[3] = {1, 30, 2};
    hid_t space = H5Screate_simple(3, dims, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 3, chunk);
    hid_t ds = H5Dcreate2(file, "x", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(file);
  }
  DataSource src;
  src.format = DataFormat::Hdf5;
  src.path = "huge.h5";
  std::string msg;
  try {
    load(src);
    ADD_FAILURE() << "loaded a dataset of 6e15 values";
  } catch (const DataError& e) {
    msg = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << typeid(e).name() << " instead of a DataError: " << e.what();
  }
  EXPECT_HAS(msg, path("huge.h5"));
  EXPECT_HAS(msg, "dataset 'x'");
  EXPECT_HAS(msg, "shape (100000000000000, 30, 2)");
  EXPECT_HAS(msg, "more than this machine has");
}

TEST_F(LoadTest, PathsThatCannotBeCheckedSayWhy) {
  DataSource src;
  src.format = DataFormat::Npy;
  src.inputs = std::string(5000, 'a') + ".npy";  // longer than any file name may be
  const std::string msg = error_of([&] { load(src); });
  EXPECT_HAS(msg, "cannot be opened");
  EXPECT_EQ(msg.find("no such file"), std::string::npos) << msg.substr(msg.size() - 200);
}

// ---- npz ---------------------------------------------------------------------------------------

TEST_F(LoadTest, NpzMemberDeclaringAnImpossibleSizeIsRefusedBeforeInflating) {
  if (!zip_supported()) GTEST_SKIP() << "built without libzip: .npz is not available";
  write_zip(path("d.npz"), {{"x.npy", npy("<f4", "(2, 2)", raw<float>({1, 2, 3, 4}))}}, false);
  // Claim ~100 MB uncompressed for the stored member, in its local and central directory headers.
  std::ifstream in(path("d.npz"), std::ios::binary);
  std::string zip((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const uint32_t lie = 0x06000000;
  auto patch = [&](const std::string& signature, size_t offset) {
    const size_t at = zip.find(signature);
    ASSERT_NE(at, std::string::npos) << "no " << signature.size() << "-byte signature in the archive";
    for (int k = 0; k < 4; ++k) zip[at + offset + k] = static_cast<char>((lie >> (8 * k)) & 0xff);
  };
  patch(std::string("PK\x03\x04", 4), 22);  // local file header: uncompressed size
  patch(std::string("PK\x01\x02", 4), 24);  // central directory: uncompressed size
  write("d.npz", zip);
  DataSource src;
  src.format = DataFormat::Npz;
  src.path = "d.npz";
  const std::string msg = error_of([&] { load(src); });
  EXPECT_HAS(msg, path("d.npz") + ": member 'x.npy'");
  EXPECT_HAS(msg, "declares 96 MiB uncompressed");
  EXPECT_HAS(msg, "damaged");
}

TEST_F(LoadTest, NpzReadsStoredAndDeflatedMembers) {
  if (!zip_supported()) GTEST_SKIP() << "built without libzip: .npz is not available";
  std::vector<float> xs(2 * 50 * 3);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 7) - 3.0f;
  const std::string x = npy("<f4", "(2, 50, 3)", raw<float>(xs));
  const std::string y = npy("<i8", "(2,)", raw<int64_t>({4, 1}));
  const std::string len = npy("|u1", "(2,)", raw<uint8_t>({50, 9}));
  for (bool deflate : {false, true}) {
    const std::string name = deflate ? "deflated.npz" : "stored.npz";
    write_zip(path(name), {{"x.npy", x}, {"y.npy", y}, {"len.npy", len}}, deflate);
    if (deflate) {
      EXPECT_LT(fs::file_size(path(name)), x.size()) << "members should be compressed";
    }
    DataSource src;
    src.format = DataFormat::Npz;
    src.path = name;
    src.lengths = "len";
    Dataset d = load(src);
    EXPECT_EQ(d.x.shape, (Shape{2, 50, 3})) << name;
    expect_values(d.x, xs, name);
    expect_values(d.y, {4, 1}, name);
    EXPECT_EQ(d.lengths, (std::vector<int32_t>{50, 9})) << name;
  }
  DataSource src;
  src.format = DataFormat::Npz;
  src.path = "stored.npz";
  src.inputs = "features";
  std::string msg = error_of([&] { load(src); });
  EXPECT_HAS(msg, "no array 'features'");
  EXPECT_HAS(msg, "x, y, len");
  write("fake.npz", "not a zip at all");
  src.path = "fake.npz";
  EXPECT_HAS(error_of([&] { load(src); }), "not a zip archive");
}

// ---- csv ---------------------------------------------------------------------------------------

static const char* kCsv =
    "date,temp,\"rain\",level\n"
    "2020-01,1,10,100\n"
    "2020-02,2,20,200\n"
    "2020-03,3,30,300\n"
    "\n"
    "2020-04,4,40,400\r\n"
    "2020-05,5,50,500\n"
    "2020-06,6,60,600\n"
    "2020-07,7,70,700\n";

TEST_F(LoadTest, CsvWindowsPredictTheNextRowsOfTheTargetColumns) {
  write("s.csv", kCsv);
  DataSource src;
  src.format = DataFormat::Csv;
  src.path = "s.csv";
  src.features = {"temp", "rain"};
  src.target_columns = {"level"};
  src.window = 3;
  src.horizon = 2;
  src.stride = 2;
  DataMeta meta;
  Dataset d = load_source(src, dir_.string(), meta);
  // 7 rows: windows start at rows 0 and 2 (row 4 would need rows 4..8).
  ASSERT_EQ(d.x.shape, (Shape{2, 3, 2}));
  ASSERT_EQ(d.y.shape, (Shape{2, 2}));
  expect_values(d.x, {1, 10, 2, 20, 3, 30, /**/ 3, 30, 4, 40, 5, 50}, "x");
  expect_values(d.y, {400, 500, /**/ 600, 700}, "y");
  EXPECT_EQ(meta.shift, (std::vector<double>{0, 0}));  // scaling none: identity, recorded
  EXPECT_EQ(meta.scale, (std::vector<double>{1, 1}));
}

// Forecasting (predict): the windows run to the last row and the last window is the file's last
// `window` rows, whose horizon lies past the end; no targets.
TEST_F(LoadTest, CsvForecastWindowsRunToTheLastRow) {
  write("s.csv", kCsv);
  DataSource src;
  src.format = DataFormat::Csv;
  src.path = "s.csv";
  src.features = {"temp", "rain"};
  src.target_columns = {"level"};
  src.window = 3;
  src.horizon = 2;
  src.stride = 3;
  src.forecast = true;
  DataMeta meta;
  Dataset d = load_source(src, dir_.string(), meta);
  // 7 rows: starts 0 and 3 by the stride, then 4 (rows 4..6, the last three).
  ASSERT_EQ(d.x.shape, (Shape{3, 3, 2}));
  EXPECT_TRUE(d.y.empty());
  expect_values(d.x, {1, 10, 2, 20, 3, 30, /**/ 4, 40, 5, 50, 6, 60, /**/ 5, 50, 6, 60, 7, 70}, "x");
  src.stride = 2;  // starts 0, 2, 4: the last window already ends on the last row
  EXPECT_EQ(load_source(src, dir_.string(), meta).x.dim(0), 3);
}

// Labelled sequences, one row per time step: grouped by the id column, padded to the longest with
// their lengths, one label each; a sequence's rows must be together and share the label.
TEST_F(LoadTest, CsvSequencesGroupRowsByIdIntoPaddedLabelledSequences) {
  write("seq.csv", "id,a,b,label\ns1,1,10,0\ns1,2,20,0\ns1,3,30,0\ns2,4,40,2\nx,5,50,1\nx,6,60,1\n");
  DataSource src;
  src.format = DataFormat::CsvSequences;
  src.path = "seq.csv";
  src.sequence_id = "id";
  src.target_columns = {"label"};
  DataMeta meta;
  Dataset d = load_source(src, dir_.string(), meta);
  ASSERT_EQ(d.x.shape, (Shape{3, 3, 2}));
  expect_values(d.x, {1, 10, 2, 20, 3, 30, /**/ 4, 40, 0, 0, 0, 0, /**/ 5, 50, 6, 60, 0, 0}, "x");
  EXPECT_EQ(d.lengths, (std::vector<int32_t>{3, 1, 2}));
  expect_values(d.y, {0, 2, 1}, "labels");
  src.forecast = true;  // predict: a file without the label column
  write("new.csv", "id,a,b\nq,1,10\nq,2,20\n");
  src.path = "new.csv";
  Dataset p = load_source(src, dir_.string(), meta);
  EXPECT_EQ(p.x.shape, (Shape{1, 2, 2}));
  EXPECT_TRUE(p.y.empty());

  src.forecast = false;
  write("bad.csv", "id,a,b,label\ns1,1,10,0\ns2,4,40,2\ns1,2,20,0\n");
  src.path = "bad.csv";
  DataMeta m2;
  std::string msg = error_of([&] { load_source(src, dir_.string(), m2); });
  EXPECT_HAS(msg, "bad.csv:4: the rows of sequence 's1' are not together (it started on line 2)");
  write("bad.csv", "id,a,b,label\ns1,1,10,0\ns1,2,20,1\n");
  msg = error_of([&] { load_source(src, dir_.string(), m2); });
  EXPECT_HAS(msg, "bad.csv:3: label 1 differs from the sequence's label 0 (line 2)");
  src.target_columns.clear();
  msg = error_of<ConfigError>([&] { load_source(src, dir_.string(), m2); });
  EXPECT_HAS(msg, "needs `targets`");
}

// One row per sequence: the feature columns are its time steps (one feature each).
TEST_F(LoadTest, CsvSequencesOneRowPerSequenceTakeTheColumnsAsSteps) {
  write("wide.csv", "t1,t2,t3,label\n1,2,3,1\n4,5,6,0\n");
  DataSource src;
  src.format = DataFormat::CsvSequences;
  src.path = "wide.csv";
  src.target_columns = {"label"};
  src.scaling = Scaling::MinMax;
  DataMeta meta;
  Dataset d = load_source(src, dir_.string(), meta);
  ASSERT_EQ(d.x.shape, (Shape{2, 3, 1}));
  EXPECT_TRUE(d.lengths.empty()) << "equal lengths: nothing to mask";
  expect_values(d.x, {0, 0.2f, 0.4f, 0.6f, 0.8f, 1}, "x scaled over every step of the one feature");
  expect_values(d.y, {1, 0}, "labels");
}

TEST_F(LoadTest, CsvScalingIsFittedOnTrainingDataAndReused) {
  write("train.csv", "a,b\n1,10\n2,10\n3,10\n4,10\n");
  write("val.csv", "a,b\n5,11\n6,12\n7,13\n");
  DataSource src;
  src.format = DataFormat::Csv;
  src.path = "train.csv";
  src.features = {"a", "b"};
  src.target_columns = {"a"};
  src.window = 2;
  src.scaling = Scaling::Standard;
  DataMeta meta;
  Dataset tr = load_source(src, dir_.string(), meta);
  // a: mean 2.5, population std sqrt(1.25); b is constant: shifted, scale 1.
  const double sd = std::sqrt(1.25);
  ASSERT_EQ(meta.shift.size(), 2u);
  EXPECT_DOUBLE_EQ(meta.shift[0], 2.5);
  EXPECT_DOUBLE_EQ(meta.scale[0], sd);
  EXPECT_DOUBLE_EQ(meta.shift[1], 10.0);
  EXPECT_DOUBLE_EQ(meta.scale[1], 1.0);
  EXPECT_FLOAT_EQ(tr.x[0], static_cast<float>((1 - 2.5) / sd));
  EXPECT_FLOAT_EQ(tr.y[0], static_cast<float>((3 - 2.5) / sd));
  // The validation file is scaled with the training statistics, not its own.
  src.path = "val.csv";
  Dataset va = load_source(src, dir_.string(), meta);
  ASSERT_EQ(va.x.shape, (Shape{1, 2, 2}));
  EXPECT_FLOAT_EQ(va.x[0], static_cast<float>((5 - 2.5) / sd));
  EXPECT_FLOAT_EQ(va.x[3], 2.0f);  // b = 12 -> 12 - 10
  EXPECT_FLOAT_EQ(va.y[0], static_cast<float>((7 - 2.5) / sd));

  DataMeta mm;
  src.path = "train.csv";
  src.scaling = Scaling::MinMax;
  Dataset m = load_source(src, dir_.string(), mm);
  EXPECT_EQ(mm.shift[0], 1.0);
  EXPECT_EQ(mm.scale[0], 3.0);
  expect_values(m.x, {0, 0, 1.0f / 3, 0, /**/ 1.0f / 3, 0, 2.0f / 3, 0}, "minmax x");
}

TEST_F(LoadTest, CsvErrorsNameFileLineAndColumn) {
  write("s.csv", std::string(kCsv) + "2020-08,8,n/a,800\n");
  DataSource src;
  src.format = DataFormat::Csv;
  src.path = "s.csv";
  src.features = {"temp", "rain"};
  src.target_columns = {"level"};
  src.window = 2;
  std::string msg = error_of([&] { load(src); });
  EXPECT_HAS(msg, path("s.csv") + ":10");
  EXPECT_HAS(msg, "column 'rain'");
  EXPECT_HAS(msg, "'n/a'");
  write("s.csv", kCsv);
  src.features = {"temp", "wind"};
  msg = error_of([&] { load(src); });
  EXPECT_HAS(msg, "no column 'wind'");
  EXPECT_HAS(msg, "date, temp, rain, level");
  src.features = {"temp"};
  src.window = 7;
  EXPECT_HAS(error_of([&] { load(src); }), "too few");
  src.window = 0;
  error_of<ConfigError>([&] { load(src); });
}

// ---- text --------------------------------------------------------------------------------------

TEST_F(LoadTest, TextBuildsASortedVocabularyAndShiftsTargetsByOne) {
  write("t.txt", "\xEF\xBB\xBF" "abca\r\nbé");  // BOM dropped, CRLF read as LF, é is one character
  DataSource src;
  src.format = DataFormat::Text;
  src.path = "t.txt";
  src.seq_len = 3;
  DataMeta meta;
  Dataset d = load_source(src, dir_.string(), meta);
  EXPECT_EQ(meta.vocab, (std::vector<std::string>{"", "\n", "a", "b", "c", "\xC3\xA9"}));
  // Characters: a b c a \n b é -> ids 2 3 4 2 1 3 5; 7 characters give (7-1)/3 = 2 sequences.
  ASSERT_EQ(d.x.shape, (Shape{2, 3}));
  expect_values(d.x, {2, 3, 4, /**/ 2, 1, 3}, "x");
  expect_values(d.y, {3, 4, 2, /**/ 1, 3, 5}, "y");

  write("v.txt", "ab\nca\nxb");
  src.path = "v.txt";
  std::string msg = error_of([&] { load_source(src, dir_.string(), meta); });
  EXPECT_HAS(msg, path("v.txt") + ":3");
  EXPECT_HAS(msg, "'x'");
  write("bad.txt", "ab\n\xC3(");
  src.path = "bad.txt";
  EXPECT_HAS(error_of([&] { load_source(src, dir_.string(), meta); }), "invalid UTF-8");
}
