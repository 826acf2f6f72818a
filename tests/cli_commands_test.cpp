// The command line as a user and a script see it: exit codes, --help, eval --json, predict, plan.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "cli_util.h"
#include "data/dataset.h"
#include "data/npy.h"
#include "io/h5.h"

using namespace rnntrain;
using namespace rnntrain::test;

namespace {

const char* kConfig = R"(model:
  layers:
    - {type: Input, shape: [12, 2]}
    - {type: LSTM, units: 8}
    - {type: Dense, units: 1}
data:
  train: {format: synthetic, task: adding, samples: 256, timesteps: 12, seed: 3}
  validation: {format: synthetic, task: adding, samples: 64, timesteps: 12, seed: 4}
train:
  epochs: 2
  batch_size: 32
  optimizer: {type: adam, learning_rate: 0.01}
  loss: mse
  metrics: [mae]
)";

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp = scratch(::testing::UnitTest::GetInstance()->current_test_info()->name());
    cfg = (tmp / "cfg.yaml").string();
    write_file(cfg, kConfig);
  }
  void TearDown() override { std::filesystem::remove_all(tmp); }
  std::filesystem::path tmp;
  std::string cfg;
};

TEST_F(Cli, VersionAndHelp) {
  CmdResult v = run_rnntrain("--version", tmp);
  EXPECT_EQ(v.code, 0);
  EXPECT_NE(v.out.find("rnntrain"), std::string::npos) << v.out;
  CmdResult h = run_rnntrain("--help", tmp);
  EXPECT_EQ(h.code, 0);
  for (const char* cmd : {"train", "eval", "predict", "plan"})
    EXPECT_NE(h.out.find(std::string("rnntrain ") + cmd), std::string::npos) << "no example for " << cmd << ":\n" << h.out;
}

TEST_F(Cli, UsageErrorsExitWith2) {
  EXPECT_EQ(run_rnntrain("", tmp).code, 2);
  CmdResult unknown = run_rnntrain("trian " + cfg, tmp);
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("'trian' is not a command of rnntrain (did you mean 'train'?); the commands are train, eval"),
            std::string::npos)
      << unknown.err;
  for (const auto& [word, cmd] : {std::pair{"fit", "train"}, {"evaluate", "eval"}, {"predcit", "predict"}}) {
    CmdResult keras = run_rnntrain(std::string(word) + " " + cfg, tmp);
    EXPECT_EQ(keras.code, 2);
    EXPECT_NE(keras.err.find(std::string("did you mean '") + cmd + "'?"), std::string::npos) << keras.err;
  }
  for (const char* cmd : {"train", "eval", "predict", "plan", "bench", "export", "import"}) {
    CmdResult help = run_rnntrain(std::string(cmd) + " --help", tmp);
    EXPECT_EQ(help.code, 0) << cmd;
    EXPECT_NE(help.out.find("-q,--quiet"), std::string::npos) << cmd << " --help lists no global options:\n" << help.out;
  }
  CmdResult r = run_rnntrain("train " + (tmp / "missing.yaml").string(), tmp);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("missing.yaml"), std::string::npos) << r.err;
  r = run_rnntrain("train " + cfg + " train.epochz=3", tmp);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("epochs"), std::string::npos) << "no did-you-mean: " << r.err;
  r = run_rnntrain("eval " + cfg, tmp);  // --weights is required
  EXPECT_EQ(r.code, 2);
}

// What the user trial tripped over: a Keras file given to train is named as one (not "not valid
// YAML"), a config given to import likewise; eval, predict and export take their weights from a run
// directory (its best.h5) or from model.init_from without --weights.
TEST_F(Cli, FilesAreNamedForWhatTheyAreAndWeightsComeFromTheRunOrTheConfig) {
  const std::string run = (tmp / "run").string();
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " output.dir=" + run, tmp).code, 0);
  const std::string keras = (tmp / "m.keras").string(), h5 = (tmp / "m.h5").string();
  CmdResult r = run_rnntrain("export " + run + " -o " + keras, tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(run_rnntrain("export " + cfg + " --weights " + run + "/final.h5 -o " + h5, tmp).code, 0);
  for (const std::string& f : {keras, h5}) {
    r = run_rnntrain("train " + f, tmp);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(f + " is a Keras file"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("rnntrain import " + f), std::string::npos) << r.err;
  }
  r = run_rnntrain("import " + cfg, tmp);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("is not a Keras file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rnntrain train " + cfg), std::string::npos) << r.err;

  const CmdResult by_run = run_rnntrain("eval " + run + " --json", tmp);
  ASSERT_EQ(by_run.code, 0) << by_run.err;
  const CmdResult by_file = run_rnntrain("eval " + cfg + " --weights " + run + "/best.h5 --json", tmp);
  EXPECT_EQ(by_run.out, by_file.out) << "a run directory evaluates its best.h5";
  const CmdResult by_init = run_rnntrain("eval " + cfg + " model.init_from=" + run + "/best.h5 --json", tmp);
  ASSERT_EQ(by_init.code, 0) << by_init.err;
  EXPECT_EQ(by_init.out, by_file.out) << "model.init_from names the weights";
  EXPECT_EQ(run_rnntrain("predict " + run + " -o " + (tmp / "p.npy").string(), tmp).code, 0);
  r = run_rnntrain("eval " + cfg, tmp);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no weights to use: pass --weights"), std::string::npos) << r.err;
}

TEST_F(Cli, MissingDataFileExitsWith1AndNamesIt) {
  CmdResult r = run_rnntrain("train " + cfg + " 'data.train={path: nowhere.h5}' output.dir=" + (tmp / "run").string(), tmp);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("nowhere.h5"), std::string::npos) << r.err;
}

TEST_F(Cli, TrainThenEvalJsonThenPredict) {
  const std::string run = (tmp / "run").string();
  CmdResult t = run_rnntrain("train " + cfg + " output.dir=" + run, tmp);
  ASSERT_EQ(t.code, 0) << t.err;
  auto summary = nlohmann::json::parse(t.out);
  EXPECT_EQ(summary["epochs"], 2);
  for (const char* f : {"config.yaml", "history.csv", "history.json", "last.h5", "best.h5"})
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(run) / f)) << f;
  const std::string csv = slurp(run + "/history.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "epoch,learning_rate,loss,mae,val_loss,val_mae") << csv;

  CmdResult e = run_rnntrain("eval " + cfg + " --weights " + run + "/last.h5 --json", tmp);
  ASSERT_EQ(e.code, 0) << e.err;
  auto j = nlohmann::json::parse(e.out);
  EXPECT_EQ(j["samples"], 64);  // data.validation is the default when there is no data.test
  EXPECT_TRUE(j["metrics"].contains("mae"));
  // eval of the last checkpoint reproduces the last epoch's validation loss.
  auto hist = nlohmann::json::parse(slurp(run + "/history.json"));
  EXPECT_NEAR(j["loss"].get<double>(), hist["val_loss"][1].get<double>(), 1e-5);

  const std::string pred = (tmp / "pred.h5").string();
  CmdResult p = run_rnntrain("predict " + cfg + " --weights " + run + "/last.h5 -o " + pred, tmp);
  ASSERT_EQ(p.code, 0) << p.err;
  h5::File f = h5::File::open(pred);
  EXPECT_EQ(f.root().shape("predictions"), (Shape{64, 1}));
}

// eval --data x.npy: the inputs' own targets come with --targets; the config's (other inputs') never do.
TEST_F(Cli, EvalOfAnNpyFileTakesItsTargetsFromTargets) {
  const std::string run = (tmp / "run").string(), x = (tmp / "x.npy").string(), y = (tmp / "y.npy").string();
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " train.epochs=1 output.dir=" + run, tmp).code, 0);
  Tensor xs({40, 12, 2}), ys({40, 1});
  for (int64_t i = 0; i < xs.numel(); ++i) xs.data[i] = static_cast<float>((i * 37 % 11) / 11.0);
  for (int64_t i = 0; i < ys.numel(); ++i) ys.data[i] = static_cast<float>(i % 5) * 0.3f;
  write_file(x, npy_bytes(xs));
  write_file(y, npy_bytes(ys));
  const std::string eval = "eval " + cfg + " --weights " + run + "/last.h5 --json";
  CmdResult r = run_rnntrain(eval + " --data " + x, tmp);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--targets"), std::string::npos) << r.err;
  r = run_rnntrain(eval + " --targets " + y, tmp);
  EXPECT_EQ(r.code, 2) << "--targets without --data: " << r.err;
  r = run_rnntrain(eval + " --data " + x + " --targets " + y, tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto got = nlohmann::json::parse(r.out);
  EXPECT_EQ(got["samples"], 40);
  CmdResult same = run_rnntrain(eval + " 'data.test={format: npy, inputs: " + x + ", targets: " + y + "}'", tmp);
  ASSERT_EQ(same.code, 0) << same.err;
  EXPECT_EQ(got["loss"], nlohmann::json::parse(same.out)["loss"]) << "the same as data.test naming both files";
}

TEST_F(Cli, PlanPrintsShapesAndTotal) {
  CmdResult r = run_rnntrain("plan " + cfg + " model.layers.1.units=16", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  // LSTM(16) on 2 features: 4*16*(2+16) + 4*16 = 1216; Dense(1): 16 + 1 = 17.
  EXPECT_NE(r.out.find("(None, 16)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1,216"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Total params: 1,233"), std::string::npos) << r.out;
}

TEST_F(Cli, CorruptWeightsFileIsAnErrorAndIsNotOverwritten) {
  const std::string bad = (tmp / "bad.h5").string();
  write_file(bad, "this is not HDF5");
  CmdResult r = run_rnntrain("eval " + cfg + " --weights " + bad, tmp);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("bad.h5"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(bad), "this is not HDF5");
}

}  // namespace

// data.*.sample_weight weighs the loss that eval reports (Keras' evaluate with sample_weight); Keras
// takes class_weight or sample_weight for training, not both: refused, naming both settings.
TEST_F(Cli, SampleWeightsWeighTheEvalLossAndClassWeightsExcludeThem) {
  const std::string run = (tmp / "run").string(), x = (tmp / "x.npy").string(), y = (tmp / "y.npy").string(),
                    w = (tmp / "w.npy").string();
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " train.epochs=1 output.dir=" + run, tmp).code, 0);
  Tensor xs({40, 12, 2}), ys({40, 1}), ws({40}, 2.0f);
  for (int64_t i = 0; i < xs.numel(); ++i) xs.data[i] = static_cast<float>((i * 37 % 11) / 11.0);
  for (int64_t i = 0; i < ys.numel(); ++i) ys.data[i] = static_cast<float>(i % 5) * 0.3f;
  write_file(x, npy_bytes(xs));
  write_file(y, npy_bytes(ys));
  write_file(w, npy_bytes(ws));
  const std::string eval = "eval " + cfg + " --weights " + run + "/last.h5 --json 'data.test={format: npy, inputs: " +
                           x + ", targets: " + y;
  CmdResult plain = run_rnntrain(eval + "}'", tmp), weighted = run_rnntrain(eval + ", sample_weight: " + w + "}'", tmp);
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(weighted.code, 0) << weighted.err;
  const double l1 = nlohmann::json::parse(plain.out)["loss"], l2 = nlohmann::json::parse(weighted.out)["loss"];
  EXPECT_NEAR(l2, 2.0 * l1, 1e-6 * l1);

  CmdResult both = run_rnntrain("train " + cfg + " output.dir=" + (tmp / "both").string() +
                                    " 'train.class_weight={0: 2}' 'data.train={format: npy, inputs: " + x +
                                    ", targets: " + y + ", sample_weight: " + w + "}'",
                                tmp);
  EXPECT_EQ(both.code, 2) << both.err;
  EXPECT_NE(both.err.find("train.class_weight and data.train.sample_weight are both set"), std::string::npos) << both.err;
}

#ifdef RNNTRAIN_HAVE_CAIRO
#include <cairo.h>

// Pixels of an RGB24 picture within `tol` of the colour (r, g, b).
static int64_t pixels_of(cairo_surface_t* s, int r, int g, int b, int tol = 12) {
  const int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
  const int stride = cairo_image_surface_get_stride(s);
  const unsigned char* data = cairo_image_surface_get_data(s);
  int64_t n = 0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const auto* p = data + y * stride + 4 * x;  // B, G, R, unused (little-endian ARGB32/RGB24)
      n += std::abs(p[2] - r) <= tol && std::abs(p[1] - g) <= tol && std::abs(p[0] - b) <= tol;
    }
  return n;
}

// rnntrain plot RUN_DIR: a panel per quantity (loss, each metric, learning rate) of two columns,
// training curves in blue and validation curves in orange; an SVG by default, a PNG with -o x.png.
TEST_F(Cli, PlotDrawsTheTrainingAndValidationCurvesOfARun) {
  const std::string run = (tmp / "run").string(), png = (tmp / "c.png").string();
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " output.dir=" + run, tmp).code, 0);
  CmdResult r = run_rnntrain("plot " + run + " -o " + png, tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  cairo_surface_t* s = cairo_image_surface_create_from_png(png.c_str());
  ASSERT_EQ(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
  EXPECT_EQ(cairo_image_surface_get_width(s), 920);
  EXPECT_EQ(cairo_image_surface_get_height(s), 2 * 300 + 40) << "loss, mae, learning_rate: two rows of panels";
  EXPECT_GT(pixels_of(s, 31, 119, 180), 200) << "training curves";
  EXPECT_GT(pixels_of(s, 255, 127, 14), 200) << "validation curves";
  cairo_surface_destroy(s);
  // Without validation data: no orange.
  const std::string plain = (tmp / "plain").string();
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " data.validation=null output.dir=" + plain, tmp).code, 0);
  ASSERT_EQ(run_rnntrain("plot " + plain + " -o " + png, tmp).code, 0);
  s = cairo_image_surface_create_from_png(png.c_str());
  EXPECT_GT(pixels_of(s, 31, 119, 180), 200);
  EXPECT_EQ(pixels_of(s, 255, 127, 14), 0);
  cairo_surface_destroy(s);

  // A run of 3 epochs labels each one under the x axis (the tick labels of the first panel, in grey
  // between its frame at y 302 and the word "epoch"; the user trial's plot had none).
  const std::string three = (tmp / "three").string();
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " train.epochs=3 output.dir=" + three, tmp).code, 0);
  ASSERT_EQ(run_rnntrain("plot " + three + " -o " + png, tmp).code, 0);
  s = cairo_image_surface_create_from_png(png.c_str());
  int64_t labels = 0;
  for (int y = 306; y <= 320; ++y)
    for (int x = 62; x <= 444; ++x) {
      const unsigned char* p = cairo_image_surface_get_data(s) + y * cairo_image_surface_get_stride(s) + 4 * x;
      labels += p[0] < 128 && p[1] < 128 && p[2] < 128;
    }
  EXPECT_GT(labels, 15) << "no epoch labels under the first panel of a 3-epoch run";
  cairo_surface_destroy(s);

  ASSERT_EQ(run_rnntrain("plot " + run, tmp).code, 0);
  const std::string svg = slurp(run + "/curves.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos) << "the default is RUN_DIR/curves.svg";

  r = run_rnntrain("plot " + (tmp / "nowhere").string(), tmp);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("history.json: no training history here"), std::string::npos) << r.err;
  r = run_rnntrain("plot " + run + " -o c.jpg", tmp);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(".svg or a .png"), std::string::npos) << r.err;
}
#endif

// predict on CSV data forecasts past the end of the series (the last window is the file's last
// rows) and writes the forecasts in the data's units (the target scaling undone; --scaled keeps
// the model's units).
TEST_F(Cli, PredictOnACsvForecastsPastItsEndInTheDatasUnits) {
  const std::string csv = (tmp / "series.csv").string(), run = (tmp / "run").string();
  std::string text = "t,level\n";
  for (int i = 0; i < 40; ++i) text += fmt::format("{},{}\n", i, 100.0 + 20.0 * std::sin(0.3 * i));
  write_file(csv, text);
  const std::string c = (tmp / "csv.yaml").string();
  write_file(c, "model:\n  layers:\n    - {type: Input, shape: [5, 1]}\n    - {type: LSTM, units: 4}\n"
                "    - {type: Dense, units: 2}\n"
                "data:\n  train: {format: csv, path: " + csv + ", window: 5, horizon: 2, features: [level], "
                "targets: [level], scaling: standard}\n"
                "train: {epochs: 1, batch_size: 8}\noutput: {dir: " + run + "}\n");
  ASSERT_EQ(run_rnntrain("train -q " + c, tmp).code, 0);
  const std::string units = (tmp / "p.npy").string(), scaled = (tmp / "s.npy").string();
  const std::string predict = "predict " + c + " --weights " + run + "/final.h5 -o ";
  CmdResult r = run_rnntrain(predict + units, tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(run_rnntrain(predict + scaled + " --scaled", tmp).code, 0);
  const Tensor p = parse_npy(slurp(units), units), s = parse_npy(slurp(scaled), scaled);
  EXPECT_EQ(p.shape, (Shape{36, 2})) << "windows of rows 0..4 to 35..39: the last forecasts rows 40 and 41";
  const DataMeta meta = DataMeta::from_json(slurp(run + "/data_meta.json"), "data_meta.json");
  ASSERT_EQ(meta.target_shift.size(), 1u);
  EXPECT_NEAR(meta.target_shift[0], 100.0, 5.0);
  for (int64_t i = 0; i < p.numel(); ++i)
    ASSERT_NEAR(p[i], s[i] * meta.target_scale[0] + meta.target_shift[0], 1e-3) << i;
  CmdResult e = run_rnntrain("eval " + c + " --weights " + run + "/final.h5 --json", tmp);
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_EQ(nlohmann::json::parse(e.out)["samples"], 34) << "eval keeps the windows whose targets are in the file";

  // The same windows as arrays in the data's units (.npy inputs, and targets for eval): scaled with
  // the run's CSV scaling as the CSV was, so predict and eval give what they give on the CSV (the
  // user trial's predict scaled the forecasts back but not the inputs: off by up to 1.02).
  Tensor x({34, 5, 1}), y({34, 2});
  for (int64_t w = 0; w < 34; ++w) {
    for (int64_t t = 0; t < 5; ++t) x[w * 5 + t] = static_cast<float>(100.0 + 20.0 * std::sin(0.3 * (w + t)));
    for (int64_t h = 0; h < 2; ++h) y[w * 2 + h] = static_cast<float>(100.0 + 20.0 * std::sin(0.3 * (w + 5 + h)));
  }
  const std::string xs = (tmp / "x.npy").string(), ys = (tmp / "y.npy").string(), pa = (tmp / "pa.npy").string();
  write_file(xs, npy_bytes(x));
  write_file(ys, npy_bytes(y));
  r = run_rnntrain(predict + pa + " --data " + xs, tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  const Tensor q = parse_npy(slurp(pa), pa);
  ASSERT_EQ(q.shape, (Shape{34, 2}));
  for (int64_t i = 0; i < q.numel(); ++i) ASSERT_NEAR(q[i], p[i], 1e-3) << "forecast " << i << " of the arrays";
  CmdResult ea = run_rnntrain("eval " + c + " --weights " + run + "/final.h5 --json --data " + xs + " --targets " + ys, tmp);
  ASSERT_EQ(ea.code, 0) << ea.err;
  EXPECT_NEAR(nlohmann::json::parse(ea.out)["loss"].get<double>(), nlohmann::json::parse(e.out)["loss"].get<double>(),
              1e-6) << "eval on the arrays is eval on the CSV";
  r = run_rnntrain(predict + pa + " --data " + xs + " --scaled", tmp);  // taken as scaled: other forecasts
  ASSERT_EQ(r.code, 0) << r.err;
  const Tensor raw = parse_npy(slurp(pa), pa);
  double moved = 0.0;  // against the scaled forecasts of the scaled inputs
  for (int64_t i = 0; i < raw.numel(); ++i) moved = std::max(moved, static_cast<double>(std::fabs(raw[i] - s[i])));
  EXPECT_GT(moved, 1e-3) << "--scaled takes the inputs as they are (here in the data's units: other forecasts)";
}

// csv_sequences: labelled sequences of varying length (one row per step, by id) train a classifier;
// eval reports its accuracy and predict reads a file without labels.
TEST_F(Cli, ALabelledSequenceCsvTrainsAClassifier) {
  const std::string csv = (tmp / "seq.csv").string(), fresh = (tmp / "new.csv").string(), run = (tmp / "run").string();
  std::string text = "id,x,label\n", unlabelled = "id,x\n";
  for (int s = 0; s < 60; ++s)  // label 1: rising sequences, 0: falling; 3 to 8 steps
    for (int t = 0; t < 3 + s % 6; ++t) text += fmt::format("s{},{},{}\n", s, s % 2 ? t : -t, s % 2);
  for (int t = 0; t < 5; ++t) unlabelled += fmt::format("q,{}\n", t);
  write_file(csv, text);
  write_file(fresh, unlabelled);
  const std::string c = (tmp / "seq.yaml").string();
  write_file(c, "model:\n  layers:\n    - {type: Input, shape: [null, 1]}\n    - {type: GRU, units: 8}\n"
                "    - {type: Dense, units: 2}\n"
                "data:\n  train: {format: csv_sequences, path: " + csv + ", id: id, targets: label, scaling: standard}\n"
                "train: {epochs: 15, batch_size: 10, loss: {type: sparse_categorical_crossentropy, from_logits: true},"
                " metrics: [accuracy], optimizer: {type: adam, learning_rate: 0.05}}\noutput: {dir: " + run + "}\n");
  ASSERT_EQ(run_rnntrain("train -q " + c, tmp).code, 0);
  CmdResult e = run_rnntrain("eval " + c + " --weights " + run + "/final.h5 --json", tmp);
  ASSERT_EQ(e.code, 0) << e.err;
  const auto j = nlohmann::json::parse(e.out);
  EXPECT_EQ(j["samples"], 60);
  EXPECT_GT(j["metrics"]["accuracy"].get<double>(), 0.9) << e.out;
  const std::string out = (tmp / "p.npy").string();
  CmdResult p = run_rnntrain("predict " + c + " --weights " + run + "/final.h5 --data " + fresh + " -o " + out, tmp);
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(parse_npy(slurp(out), out).shape, (Shape{1, 2}));
}
