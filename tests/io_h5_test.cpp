// Tests of the HDF5 layer (io/h5.h): round trips of every dataset and attribute call, the on-disk
// string encoding Keras needs, reading variable-length strings as h5py writes them (fixtures made
// here with the HDF5 C API), and the errors for missing, foreign and truncated files.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "io/h5.h"

namespace fs = std::filesystem;
using namespace rnntrain;

namespace {

class H5Test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rnntrain_io_h5_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// Runs f and returns the DataError message; fails the test if nothing (or something else) is thrown.
template <typename F>
std::string data_error(F&& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a DataError";
  return "";
}

// Type facts of an attribute as stored on disk, read with the C API.
struct AttrType {
  H5T_class_t cls;
  bool variable;
  size_t size;
  H5T_str_t pad;
  H5T_cset_t cset;
  int rank;
  hssize_t npoints;
};

AttrType attr_type(const std::string& file, const std::string& obj, const std::string& name) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t a = H5Aopen_by_name(f, obj.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
  hid_t t = H5Aget_type(a), s = H5Aget_space(a);
  AttrType r{H5Tget_class(t), false, H5Tget_size(t), H5T_STR_ERROR, H5T_CSET_ERROR,
             H5Sget_simple_extent_ndims(s), H5Sget_simple_extent_npoints(s)};
  if (r.cls == H5T_STRING) {
    r.variable = H5Tis_variable_str(t) > 0;
    r.pad = H5Tget_strpad(t);
    r.cset = H5Tget_cset(t);
  }
  H5Sclose(s);
  H5Tclose(t);
  H5Aclose(a);
  H5Fclose(f);
  return r;
}

}  // namespace

TEST_F(H5Test, DatasetsRoundTripEveryShapeAndType) {
  Tensor t3({2, 3, 4});
  for (int64_t i = 0; i < t3.numel(); ++i) t3[i] = 0.25f * static_cast<float>(i) - 3.0f;
  Tensor scalar(Shape{});
  scalar.data = {7.5f};
  Tensor empty({0, 5});
  {
    h5::File f = h5::File::create(path("d.h5"));
    h5::Group r = f.root();
    r.write("t3", t3);
    r.write("scalar", scalar);
    r.write("empty", empty);
    r.write_int64("iteration:0", {123456789012345LL}, true);
    r.write_int64("ints", {-1, 0, 1, INT64_MAX});
    r.write_double("dbl", {0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, {2, 3});
    r.write("t3", t3);  // writing again replaces
  }
  h5::File f = h5::File::open(path("d.h5"));
  h5::Group r = f.root();
  EXPECT_EQ(r.shape("t3"), (Shape{2, 3, 4}));
  Tensor back = r.read("t3");
  ASSERT_EQ(back.shape, t3.shape);
  for (int64_t i = 0; i < t3.numel(); ++i) ASSERT_EQ(back[i], t3[i]) << "first difference at " << i;
  EXPECT_EQ(r.read("scalar").shape, Shape{});
  EXPECT_EQ(r.read("scalar").data, std::vector<float>{7.5f});
  EXPECT_EQ(r.read("empty").shape, (Shape{0, 5}));
  EXPECT_EQ(r.read_int64("iteration:0"), std::vector<int64_t>{123456789012345LL});
  EXPECT_EQ(r.shape("iteration:0"), Shape{});
  EXPECT_EQ(r.read_int64("ints"), (std::vector<int64_t>{-1, 0, 1, INT64_MAX}));
  EXPECT_EQ(r.read_double("dbl"), (std::vector<double>{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}));
  EXPECT_EQ(r.shape("dbl"), (Shape{2, 3}));
  // Integer datasets read as float32 and float datasets as int64 (conversion by HDF5).
  EXPECT_EQ(r.read("ints").data[2], 1.0f);
  EXPECT_EQ(r.read_int64("t3")[4], -2);
  // On disk: float32 little-endian, contiguous.
  hid_t fid = H5Fopen(path("d.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t ds = H5Dopen2(fid, "t3", H5P_DEFAULT);
  hid_t type = H5Dget_type(ds), dcpl = H5Dget_create_plist(ds);
  EXPECT_GT(H5Tequal(type, H5T_IEEE_F32LE), 0);
  EXPECT_EQ(H5Pget_layout(dcpl), H5D_CONTIGUOUS);
  H5Pclose(dcpl);
  H5Tclose(type);
  H5Dclose(ds);
  H5Fclose(fid);
}

TEST_F(H5Test, ReadsNumpyBoolEnumsAsIntegers) {
  // h5py stores numpy bool as an int8 enum {FALSE = 0, TRUE = 1}.
  hid_t f = H5Fcreate(path("b.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
  int8_t no = 0, yes = 1;
  H5Tenum_insert(t, "FALSE", &no);
  H5Tenum_insert(t, "TRUE", &yes);
  hsize_t n = 5;
  hid_t s = H5Screate_simple(1, &n, nullptr);
  hid_t d = H5Dcreate2(f, "mask", t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const int8_t v[5] = {1, 0, 0, 1, 1};
  H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
  H5Dclose(d);
  H5Sclose(s);
  H5Tclose(t);
  H5Fclose(f);
  h5::File file = h5::File::open(path("b.h5"));
  EXPECT_EQ(file.root().read("mask").data, (std::vector<float>{1, 0, 0, 1, 1}));
  EXPECT_EQ(file.root().read_int64("mask"), (std::vector<int64_t>{1, 0, 0, 1, 1}));
}

TEST_F(H5Test, NamesWithSlashesCreateIntermediateGroups) {
  Tensor k({3, 8}, 0.5f);
  {
    h5::File f = h5::File::create(path("g.h5"));
    h5::Group r = f.root();
    h5::Group mw = r.create_group("model_weights");
    h5::Group lstm = mw.create_group("lstm");
    lstm.write("lstm/lstm_cell/kernel:0", k);
    r.create_group("a/b/c");
    EXPECT_EQ(r.require_group("a/b").path(), "/a/b");
    EXPECT_EQ(r.require_group("new").path(), "/new");
  }
  h5::File f = h5::File::open(path("g.h5"));
  h5::Group r = f.root();
  EXPECT_TRUE(r.has_group("model_weights/lstm/lstm/lstm_cell"));
  EXPECT_TRUE(r.has_dataset("model_weights/lstm/lstm/lstm_cell/kernel:0"));
  EXPECT_FALSE(r.has_group("model_weights/lstm/lstm/lstm_cell/kernel:0"));
  EXPECT_FALSE(r.has_dataset("model_weights/lstm"));
  EXPECT_TRUE(r.has("a/b/c"));
  EXPECT_FALSE(r.has("a/x/c"));
  EXPECT_FALSE(r.has("model_weights/lstm/lstm/lstm_cell/kernel:0/deeper"));
  h5::Group cell = r.group("model_weights").group("lstm/lstm/lstm_cell");
  EXPECT_EQ(cell.path(), "/model_weights/lstm/lstm/lstm_cell");
  EXPECT_EQ(cell.read("kernel:0").shape, (Shape{3, 8}));
  EXPECT_EQ(r.children(), (std::vector<std::string>{"a", "model_weights", "new"}));
}

TEST_F(H5Test, AttributesRoundTripEveryType) {
  const std::vector<std::string> names = {"lstm", "lstm_1", "dense"};
  const std::vector<uint64_t> rng = {0, 1, UINT64_MAX, 0x9E3779B97F4A7C15ull};
  const std::string utf8 = "caf\xC3\xA9 \xE2\x82\xAC";  // UTF-8 bytes pass through an ASCII-tagged string
  {
    h5::File f = h5::File::create(path("a.h5"));
    h5::Group r = f.root();
    r.set_attr("keras_version", std::string("2.15.0"));
    r.set_attr("layer_names", names);
    r.set_attr("weight_names", std::vector<std::string>{});
    r.set_attr("empty_string", std::string());
    r.set_attr("utf8", utf8);
    r.set_attr("epoch", int64_t{-42});
    r.set_attr("lr", 1e-3);
    r.set_attr("schedule", std::vector<double>{0.5, -2.25, 1e300});
    r.set_attr("none", std::vector<double>{});
    r.set_attr_u64("rng", rng);
    r.set_attr("epoch", int64_t{7});  // replaces, even with the same type
    r.set_attr("lr", std::string("now a string"));  // replaces with another type
  }
  h5::File f = h5::File::open(path("a.h5"));
  h5::Group r = f.root();
  EXPECT_EQ(r.attr_string("keras_version"), "2.15.0");
  EXPECT_EQ(r.attr_strings("layer_names"), names);
  EXPECT_EQ(r.attr_strings("weight_names"), std::vector<std::string>{});
  EXPECT_EQ(r.attr_string("empty_string"), "");
  EXPECT_EQ(r.attr_string("utf8"), utf8);
  EXPECT_EQ(r.attr_int64("epoch"), 7);
  EXPECT_EQ(r.attr_string("lr"), "now a string");
  EXPECT_EQ(r.attr_doubles("schedule"), (std::vector<double>{0.5, -2.25, 1e300}));
  EXPECT_EQ(r.attr_doubles("none"), std::vector<double>{});
  EXPECT_EQ(r.attr_u64("rng"), rng);
  EXPECT_EQ(r.attr_double("epoch"), 7.0);  // integer attributes read as double too
  EXPECT_TRUE(r.has_attr("rng"));
  EXPECT_FALSE(r.has_attr("missing"));
  EXPECT_EQ(r.attr_strings("keras_version"), std::vector<std::string>{"2.15.0"});  // scalar as a list of one
}

TEST_F(H5Test, StringsAreFixedLengthAsciiNulPaddedAndEmptyListsFloat64) {
  {
    h5::File f = h5::File::create(path("s.h5"));
    h5::Group r = f.root();
    r.set_attr("layer_names", std::vector<std::string>{"lstm", "bidirectional_12", "d"});
    r.set_attr("backend", std::string("tensorflow"));
    r.set_attr("blank", std::string());
    r.set_attr("weight_names", std::vector<std::string>{});
    r.write_strings("history", {"{\"loss\": [1, 2]}", ""});
  }
  AttrType list = attr_type(path("s.h5"), "/", "layer_names");
  EXPECT_EQ(list.cls, H5T_STRING);
  EXPECT_FALSE(list.variable);
  EXPECT_EQ(list.size, 16u) << "size must be the longest name";
  EXPECT_EQ(list.pad, H5T_STR_NULLPAD);
  EXPECT_EQ(list.cset, H5T_CSET_ASCII);
  EXPECT_EQ(list.rank, 1);
  EXPECT_EQ(list.npoints, 3);
  AttrType scalar = attr_type(path("s.h5"), "/", "backend");
  EXPECT_EQ(scalar.rank, 0) << "single strings are scalar attributes";
  EXPECT_EQ(scalar.size, 10u);
  EXPECT_FALSE(scalar.variable);
  EXPECT_EQ(attr_type(path("s.h5"), "/", "blank").size, 1u) << "an empty string still has size 1";
  AttrType none = attr_type(path("s.h5"), "/", "weight_names");
  EXPECT_EQ(none.cls, H5T_FLOAT);
  EXPECT_EQ(none.size, 8u);
  EXPECT_EQ(none.rank, 1);
  EXPECT_EQ(none.npoints, 0);
  h5::File f = h5::File::open(path("s.h5"));
  EXPECT_EQ(f.root().read_strings("history"), (std::vector<std::string>{"{\"loss\": [1, 2]}", ""}));
}

// Writes what h5py 3 writes for Python str and bytes: variable-length strings (UTF-8 and ASCII),
// scalar and 1-D, as attributes and as a dataset; plus a fixed-length NUL-terminated string.
static void write_h5py_style(const std::string& file) {
  hid_t f = H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t g = H5Gcreate2(f, "model_weights", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  auto vlen = [](H5T_cset_t cset) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, cset);
    return t;
  };
  hid_t scalar = H5Screate(H5S_SCALAR);
  hsize_t n3 = 3;
  hid_t space3 = H5Screate_simple(1, &n3, nullptr);
  // root @keras_version: vlen UTF-8 scalar (a Python str)
  hid_t tu = vlen(H5T_CSET_UTF8);
  const char* version = "3.6.0 \xCE\xBB";
  hid_t a = H5Acreate2(f, "keras_version", tu, scalar, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, tu, &version);
  H5Aclose(a);
  // model_weights @layer_names: vlen ASCII 1-D (a list of bytes)
  hid_t ta = vlen(H5T_CSET_ASCII);
  const char* names[3] = {"lstm", "lstm_1", "dense"};
  a = H5Acreate2(g, "layer_names", ta, space3, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, ta, names);
  H5Aclose(a);
  // a vlen UTF-8 1-D dataset
  const char* lines[3] = {"alpha", "", "\xE2\x82\xAC uro"};
  hid_t ds = H5Dcreate2(f, "notes", tu, space3, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(ds, tu, H5S_ALL, H5S_ALL, H5P_DEFAULT, lines);
  H5Dclose(ds);
  // fixed-length NUL-terminated, 8 bytes
  hid_t tf = H5Tcopy(H5T_C_S1);
  H5Tset_size(tf, 8);
  H5Tset_strpad(tf, H5T_STR_NULLTERM);
  char fixed[8] = {'a', 'd', 'a', 'm', '\0', '\0', '\0', '\0'};
  a = H5Acreate2(g, "optimizer", tf, scalar, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, tf, fixed);
  H5Aclose(a);
  H5Tclose(tf);
  H5Tclose(ta);
  H5Tclose(tu);
  H5Sclose(space3);
  H5Sclose(scalar);
  H5Gclose(g);
  H5Fclose(f);
}

TEST_F(H5Test, ReadsVariableLengthStringsAsH5pyWritesThem) {
  write_h5py_style(path("h5py.h5"));
  h5::File f = h5::File::open(path("h5py.h5"));
  h5::Group r = f.root();
  EXPECT_EQ(r.attr_string("keras_version"), "3.6.0 \xCE\xBB");
  h5::Group mw = r.group("model_weights");
  EXPECT_EQ(mw.attr_strings("layer_names"), (std::vector<std::string>{"lstm", "lstm_1", "dense"}));
  EXPECT_EQ(mw.attr_string("optimizer"), "adam");
  EXPECT_EQ(r.read_strings("notes"), (std::vector<std::string>{"alpha", "", "\xE2\x82\xAC uro"}));
}

TEST_F(H5Test, OpenRejectsMissingForeignAndTruncatedFiles) {
  std::string msg = data_error([&] { h5::File::open(path("nope.h5")); });
  EXPECT_NE(msg.find(path("nope.h5")), std::string::npos) << msg;
  EXPECT_NE(msg.find("no such file"), std::string::npos) << msg;

  std::ofstream(path("text.h5")) << "this is not HDF5, just some text that is long enough to look like a file\n";
  EXPECT_FALSE(h5::is_hdf5(path("text.h5")));
  msg = data_error([&] { h5::File::open(path("text.h5")); });
  EXPECT_NE(msg.find(path("text.h5")), std::string::npos) << msg;
  EXPECT_NE(msg.find("not an HDF5 file"), std::string::npos) << msg;

  {
    h5::File f = h5::File::create(path("full.h5"));
    h5::Group r = f.root();
    r.set_attr("layer_names", std::vector<std::string>{"a", "b"});
    for (int i = 0; i < 4; ++i) r.write("w" + std::to_string(i), Tensor({64, 64}, 1.0f));
  }
  EXPECT_TRUE(h5::is_hdf5(path("full.h5")));
  const auto size = fs::file_size(path("full.h5"));
  fs::copy_file(path("full.h5"), path("half.h5"));
  fs::resize_file(path("half.h5"), size / 2);
  EXPECT_TRUE(h5::is_hdf5(path("half.h5"))) << "the signature survives truncation";
  msg = data_error([&] { h5::File::open(path("half.h5")); });
  EXPECT_NE(msg.find(path("half.h5")), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST_F(H5Test, MissingObjectsAndWrongTypesNameTheFileAndWhatIsThere) {
  {
    h5::File f = h5::File::create(path("m.h5"));
    h5::Group r = f.root();
    r.write("x", Tensor({2, 2}));
    r.create_group("model_weights");
    r.set_attr("epoch", int64_t{3});
    r.set_attr("name", std::string("run"));
  }
  h5::File f = h5::File::open(path("m.h5"));
  h5::Group r = f.root();
  std::string msg = data_error([&] { r.read("y"); });
  EXPECT_NE(msg.find(path("m.h5")), std::string::npos) << msg;
  EXPECT_NE(msg.find("'/y'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model_weights, x"), std::string::npos) << "should list what is there: " << msg;
  msg = data_error([&] { r.group("optimizer_weights"); });
  EXPECT_NE(msg.find("optimizer_weights"), std::string::npos) << msg;
  msg = data_error([&] { r.attr_int64("iterations"); });
  EXPECT_NE(msg.find("iterations"), std::string::npos) << msg;
  EXPECT_NE(msg.find("epoch, name"), std::string::npos) << "should list the attributes: " << msg;
  msg = data_error([&] { r.attr_int64("name"); });
  EXPECT_NE(msg.find("string"), std::string::npos) << msg;
  msg = data_error([&] { r.attr_strings("epoch"); });
  EXPECT_NE(msg.find("expected strings"), std::string::npos) << msg;
  msg = data_error([&] { r.read_strings("x"); });
  EXPECT_NE(msg.find("not strings"), std::string::npos) << msg;
}

TEST_F(H5Test, FailedCallsNameTheCallFileAndObject) {
  std::string msg;
  {
    h5::File f = h5::File::create(path("c.h5"));
    h5::Group r = f.root();
    r.create_group("g");
    // Creating a group where one exists fails inside HDF5: the message carries the call text.
    msg = data_error([&] { r.create_group("g"); });
    EXPECT_NE(msg.find("H5Gcreate2"), std::string::npos) << msg;
    EXPECT_NE(msg.find(path("c.h5")), std::string::npos) << msg;
    EXPECT_NE(msg.find("'/g'"), std::string::npos) << msg;
  }
  // A read-only file refuses writes, with the same kind of message.
  h5::File ro = h5::File::open(path("c.h5"));
  msg = data_error([&] { ro.root().set_attr("x", int64_t{1}); });
  EXPECT_NE(msg.find(path("c.h5")), std::string::npos) << msg;
  EXPECT_NE(msg.find("H5Acreate2"), std::string::npos) << msg;
  msg = data_error([&] { h5::File::create((dir_ / "no_such_dir" / "x.h5").string()); });
  EXPECT_NE(msg.find("cannot create"), std::string::npos) << msg;
}

TEST_F(H5Test, HandlesMoveAndCloseOnce) {
  h5::File f = h5::File::create(path("h.h5"));
  h5::Group a = f.root();
  const int64_t id = a.id();
  h5::Group b = std::move(a);
  EXPECT_EQ(b.id(), id);
  EXPECT_EQ(a.id(), -1);  // NOLINT(bugprone-use-after-move): the moved-from handle is empty
  b.set_attr("ok", int64_t{1});
  EXPECT_EQ(b.attr_int64("ok"), 1);
  f.flush();
}
