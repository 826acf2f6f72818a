// Hostile Keras, HDF5 and zip files (issue 10): each is built here, small, and must give one clear
// DataError naming the file and what is wrong, never a crash, a stack overflow, a huge allocation
// or a library's raw text. Deep nesting, forged sizes, links out of the file, damaged resume state.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/h5.h"
#include "io/keras_file.h"
#include "io/keras_model.h"
#include "io/zip.h"
#include "spec/parse.h"
#include "spec/shapes.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace rnntrain;

namespace {

class Hostile : public ScratchTest {
 protected:
  Hostile() : ScratchTest("io_hostile") {}

  // A legacy full-model .h5 holding only `model_config` (import reads it before the weights).
  std::string legacy_h5(const std::string& name, const std::string& model_config) const {
    h5::File f = h5::File::create(path(name));
    f.root().set_attr("keras_version", std::string("3.15.1"));
    f.root().set_attr("model_config", model_config);
    f.close();
    return path(name);
  }
  // A .keras archive with this config.json and some bytes as model.weights.h5.
  std::string keras_zip(const std::string& name, const std::string& config, const std::string& weights) const {
    write_zip(path(name), {{"metadata.json", R"({"keras_version": "3.15.1"})"}, {"config.json", config},
                           {"model.weights.h5", weights}}, false);
    return path(name);
  }
};

// {"class_name": "Sequential", "config": {"layers": [InputLayer, <layer>]}} in Keras 3's layout.
std::string sequential(const std::string& layer) {
  return R"({"class_name": "Sequential", "config": {"name": "s", "layers": [
    {"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [null, 5, 3]}}, )" + layer + "]}}";
}

// Bidirectional wrapped `depth` times around an LSTM.
std::string nested_bidirectional(int depth) {
  std::string s = R"({"class_name": "LSTM", "config": {"name": "l", "units": 2}})";
  for (int i = 0; i < depth; ++i)
    s = R"({"class_name": "Bidirectional", "config": {"name": "b)" + std::to_string(i) + R"(", "layer": )" + s + "}}";
  return s;
}

// ---- nesting -----------------------------------------------------------------------------------

TEST_F(Hostile, DeeplyNestedWrappersInAKerasArchiveAreRefusedWhileParsing) {
  if (!zip_supported()) GTEST_SKIP() << "built without libzip: .keras is not available";
  // 20,000 levels (about 1.3 MB) overflowed the stack of the recursive layer reader.
  const std::string file = keras_zip("deep.keras", sequential(nested_bidirectional(20000)), "x");
  const std::string msg = error_of([&] { import_keras(file); });
  EXPECT_HAS(msg, file + ": config.json nests lists or objects deeper than 100 levels");
  EXPECT_HAS(msg, "Bidirectional or TimeDistributed inside each other");
}

TEST_F(Hostile, DeeplyNestedWrappersInALegacyModelConfigAreRefused) {
  // 300 levels stay under HDF5's 64 KB attribute limit and are already far too deep.
  const std::string file = legacy_h5("deep.h5", sequential(nested_bidirectional(300)));
  const std::string msg = error_of([&] { import_keras(file); });
  EXPECT_HAS(msg, file + ": model_config nests lists or objects deeper than 100 levels");
}

TEST_F(Hostile, AWrapperInsideAWrapperIsRefusedByNameWithoutReadingFurther) {
  const std::string msg = error_of([&] {
    model_from_keras_json(nlohmann::json::parse(sequential(nested_bidirectional(3))), KerasOrigin{"m.h5", "3.15.1"});
  });
  EXPECT_HAS(msg, "m.h5: cannot import this model");
  EXPECT_HAS(msg, "layer 'b2' (Bidirectional): wraps a Bidirectional; rnntrain's Bidirectional wraps LSTM, GRU or SimpleRNN");
}

// ---- sizes and values from the model config ----------------------------------------------------

TEST_F(Hostile, ImportedSizesOutsideTheConfigLimitsAreRefusedByLayer) {
  const KerasOrigin origin{"m.h5", "3.15.1"};
  // units 2^40 overflowed the parameter count (UBSan) and then asked for terabytes.
  std::string msg = error_of([&] {
    model_from_keras_json(nlohmann::json::parse(sequential(R"({"class_name": "LSTM", "config": {"name": "big", "units": 1099511627776}})")), origin);
  });
  EXPECT_HAS(msg, "layer 'big' (LSTM): 'units' is missing or not a whole number from 1 to 16777216");
  msg = error_of([&] {
    model_from_keras_json(nlohmann::json::parse(R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [null, 5]}},
      {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 16777217, "output_dim": 2.5}}]}})"), origin);
  });
  EXPECT_HAS(msg, "layer 'emb' (Embedding): 'input_dim' is missing or not a whole number");
  EXPECT_HAS(msg, "layer 'emb' (Embedding): 'output_dim' is missing or not a whole number");
  msg = error_of([&] {
    model_from_keras_json(nlohmann::json::parse(R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [null, 5, 1099511627776]}}]}})"), origin);
  });
  EXPECT_HAS(msg, "layer 'in' (InputLayer): input dimension 2 is 1099511627776");
}

TEST_F(Hostile, AStringDropoutIsRefusedNotReadAsZero) {
  const std::string msg = error_of([&] {
    model_from_keras_json(nlohmann::json::parse(sequential(R"({"class_name": "GRU", "config": {"name": "g", "units": 2, "dropout": "nan", "recurrent_dropout": 1.5}})")),
                          KerasOrigin{"m.h5", "3.15.1"});
  });
  EXPECT_HAS(msg, R"(layer 'g' (GRU): 'dropout' is "nan"; it must be a number in [0, 1))");
  EXPECT_HAS(msg, "layer 'g' (GRU): 'recurrent_dropout' is 1.5");
}

TEST_F(Hostile, AModelConfigThatIsNotAnObjectIsNamed) {
  const std::string file = legacy_h5("five.h5", R"({"class_name": "Sequential", "config": 5})");
  const std::string msg = error_of([&] { import_keras(file); });
  EXPECT_HAS(msg, file + ": the model's 'config' is 5, not an object of layers");
  // A value of the wrong JSON type deeper down is the file's fault too, without nlohmann's text.
  const std::string bad = legacy_h5("bad.h5", R"({"class_name": "Functional", "config": {"layers": [{"name": "a", "inbound_nodes": 3}],
                                                  "input_layers": [["in", 0, 0]], "output_layers": [["a", 0, 0]]}})");
  const std::string msg2 = error_of([&] { import_keras(bad); });
  EXPECT_HAS(msg2, bad + ":");
  EXPECT_EQ(msg2.find("[json.exception"), std::string::npos) << msg2;
}

TEST_F(Hostile, AnImportedModelWithNoFeaturesNamesTheFile) {
  const std::string file = legacy_h5("nofeat.h5", R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [null, 5, 0]}},
      {"class_name": "LSTM", "config": {"name": "l", "units": 2}}]}})");
  const std::string msg = error_of([&] { import_keras(file); });
  EXPECT_EQ(msg.rfind(file + ": layer 'in' (Input): shape (None, 5, 0) has no features", 0), 0u) << msg;
  EXPECT_EQ(msg.find("<config>"), std::string::npos) << msg;
}

TEST_F(Hostile, ParameterCountsThatOverflowAreConfigErrorsNamingTheLayer) {
  ModelSpec m = parse_config("model: {layers: [{type: Input, shape: [null, 3]}, {type: LSTM, units: 4}]}\n", "t.yaml").model;
  m.layers[1].units = int64_t{1} << 40;  // past the config's limit, as code or a damaged file could set it
  const std::string msg = error_of<ConfigError>([&] { infer_shapes(m); });
  EXPECT_HAS(msg, "layer 'lstm' (LSTM): its parameter count does not fit in 64 bits");
  EXPECT_THROW(shape_numel({int64_t{1} << 40, int64_t{1} << 40}), DataError);
}

// ---- zip -----------------------------------------------------------------------------------------

// The archive at `file` with its first member's uncompressed size set to `lie` in both headers.
void forge_size(const std::string& file, uint32_t lie) {
  std::ifstream in(file, std::ios::binary);
  std::string zip((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  auto patch = [&](const std::string& signature, size_t offset) {
    for (size_t at = zip.find(signature); at != std::string::npos; at = zip.find(signature, at + 4))
      for (int k = 0; k < 4; ++k) zip[at + offset + k] = static_cast<char>((lie >> (8 * k)) & 0xff);
  };
  patch(std::string("PK\x03\x04", 4), 22);  // local file headers
  patch(std::string("PK\x01\x02", 4), 24);  // central directory
  std::ofstream(file, std::ios::binary) << zip;
}

TEST_F(Hostile, AForgedKerasArchiveIsRefusedBeforeAllocating) {
  if (!zip_supported()) GTEST_SKIP() << "built without libzip: .keras is not available";
  // Every member claims ~4 GiB: eval --weights allocated 4.2 GB for 17 s before failing.
  Config c = parse_config("model: {layers: [{type: Input, shape: [null, 3]}, {type: LSTM, units: 4}]}\n", "t.yaml");
  Rng rng(1);
  Params p = init_params(c.model, rng);
  const std::string file = keras_zip("forged.keras", "{}", std::string(15000, 'w'));
  forge_size(file, 0xFFFFFFF0u);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string msg = error_of([&] { load_keras_weights(file, c.model, p); });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 1.0) << "the forged archive took " << s << " s to refuse";
  EXPECT_HAS(msg, file + ": ");
  EXPECT_HAS(msg, "declares");
  EXPECT_TRUE(msg.find("4 GiB") != std::string::npos || msg.find("4.00 GiB") != std::string::npos) << msg;
  // The same check guards every member ZipReader reads, .npz or .keras.
  ZipReader z(file);
  const std::string m2 = error_of([&] { z.read("config.json"); });
  EXPECT_HAS(m2, file + ": member 'config.json' declares");
  EXPECT_HAS(m2, "a stored member cannot be larger than its archive");
}

TEST_F(Hostile, ATruncatedKerasArchiveGetsAKerasHint) {
  if (!zip_supported()) GTEST_SKIP() << "built without libzip: .keras is not available";
  const std::string file = keras_zip("t.keras", sequential(nested_bidirectional(0)), std::string(4000, 'w'));
  fs::resize_file(file, 3000);
  const std::string msg = error_of([&] { import_keras(file); });
  EXPECT_HAS(msg, file + ": cannot open as a zip archive");
  EXPECT_HAS(msg, "a .keras file is written by Keras' model.save");
  EXPECT_EQ(msg.find("npz"), std::string::npos) << msg;
}

TEST_F(Hostile, ADamagedWeightsMemberIsNamedByArchiveAndMember) {
  if (!zip_supported()) GTEST_SKIP() << "built without libzip: .keras is not available";
  Config c = parse_config("model: {layers: [{type: Input, shape: [null, 3]}, {type: LSTM, units: 4}]}\n", "t.yaml");
  Rng rng(1);
  Params p = init_params(c.model, rng);
  const std::string file = keras_zip("d.keras", "{}", "\x89HDF\r\n\x1a\n and then nothing");
  const std::string msg = error_of([&] { load_keras_weights(file, c.model, p); });
  EXPECT_HAS(msg, file + ":model.weights.h5");
  EXPECT_EQ(msg.find("rnntrain-keras-"), std::string::npos) << "names the temporary file: " << msg;
}

// ---- HDF5 --------------------------------------------------------------------------------------

// A chunked float32 dataset of `dims` with no chunk written: the file stays a few KB.
void declare_dataset(const std::string& file, const char* name, std::vector<hsize_t> dims) {
  hid_t f = H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  std::vector<hsize_t> chunk(dims.size(), 1);
  hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, static_cast<int>(dims.size()), chunk.data());
  hid_t ds = H5Dcreate2(f, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(f);
}

TEST_F(Hostile, ADatasetDeclaringMoreThanTheFileStoresIsRefusedBeforeReading) {
  // A (2, 2^40) kernel in a file of a few KB: read() allocated 8 TB (std::bad_alloc naming nothing).
  declare_dataset(path("k.h5"), "kernel", {2, hsize_t{1} << 40});
  h5::File f = h5::File::open(path("k.h5"));
  const std::string msg = error_of([&] { f.root().read("kernel"); });
  EXPECT_HAS(msg, path("k.h5") + ": dataset '/kernel' declares shape (2, 1099511627776)");
  EXPECT_HAS(msg, "the file stores 0 bytes for it");
}

TEST_F(Hostile, DatasetsOutsideTheFileAreNamedAsLinks) {
  {
    h5::File other = h5::File::create(path("other.h5"));
    other.root().write("x", Tensor({2}, 1.0f));
    other.close();
    hid_t f = H5Fcreate(path("links.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Lcreate_external(path("other.h5").c_str(), "/x", f, "ext", H5P_DEFAULT, H5P_DEFAULT), 0);
    ASSERT_GE(H5Lcreate_soft("/nowhere", f, "soft", H5P_DEFAULT, H5P_DEFAULT), 0);
    H5Fclose(f);
  }
  h5::File f = h5::File::open(path("links.h5"));
  // The external target exists and is readable: it is still refused, as is a dangling one.
  std::string msg = error_of([&] { f.root().read("ext"); });
  EXPECT_HAS(msg, "'/ext' is an external link to " + path("other.h5") + ":/x; rnntrain reads only data stored inside the file");
  msg = error_of([&] { f.root().read("soft"); });
  EXPECT_HAS(msg, "'/soft' is a soft link to '/nowhere', which does not exist in the file");
}

TEST_F(Hostile, ExternalStorageIsRefused) {
  {
    std::ofstream(path("raw.bin"), std::ios::binary) << std::string(8, '\0');
    hid_t f = H5Fcreate(path("extstore.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[1] = {2};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_external(dcpl, path("raw.bin").c_str(), 0, 8);
    hid_t ds = H5Dcreate2(f, "x", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
  }
  h5::File f = h5::File::open(path("extstore.h5"));
  const std::string msg = error_of([&] { f.root().read("x"); });
  EXPECT_HAS(msg, "dataset '/x' keeps its values in other files (external storage)");
}

// ---- resume state ------------------------------------------------------------------------------

TEST_F(Hostile, ADamagedResumeStateNamesTheFileNotTheLibrary) {
  Config c = parse_config("model: {layers: [{type: Input, shape: [null, 3]}, {type: Dense, units: 1}]}\n"
                          "train: {optimizer: sgd}\n", "t.yaml");
  Rng rng(1);
  Params p = init_params(c.model, rng);
  ResumeState st;
  st.epoch = 1;
  st.schedule = {1, 0, 0, 0, 0, 0};
  st.checkpoint = {0, 0};
  st.history_json = R"({"epoch": [0], "loss": [0.5]})";
  st.config_yaml = emit_config(c);
  const std::string file = path("last.h5");
  for (const char* history : {"{\"epoch\": [0", "[1, 2]", R"({"epoch": [0], "loss": []})"}) {
    save_checkpoint(file, c.model, p, {}, st);
    {
      h5::File f = h5::File::open(file, true);
      f.root().group("rnntrain").write_strings("history", {history});
      f.close();
    }
    const std::string msg = error_of([&] { load_checkpoint(file, c.model, p, {}); });
    EXPECT_HAS(msg, file + ": the training history in /rnntrain/history is damaged");
    EXPECT_EQ(msg.find("json.exception"), std::string::npos) << msg;
  }
  save_checkpoint(file, c.model, p, {}, st);
  {
    h5::File f = h5::File::open(file, true);
    f.root().group("rnntrain").write_strings("config", {});
    f.close();
  }
  const std::string msg = error_of([&] { load_checkpoint(file, c.model, p, {}); });
  EXPECT_HAS(msg, file + ": /rnntrain/config holds 0 strings, expected one");
}

}  // namespace
