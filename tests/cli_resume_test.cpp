// Resume equivalence: 4 epochs straight and 2 epochs + --resume + 2 more give bit-identical weights,
// optimizer state and history on the CPU (dropout, shuffling and a schedule are all in play).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/h5.h"

using namespace rnntrain;
using namespace rnntrain::test;

namespace {

const char* kConfig = R"(model:
  layers:
    - {type: Input, shape: [10, 2]}
    - {type: LSTM, units: 8, return_sequences: true, dropout: 0.1, recurrent_dropout: 0.1}
    - {type: Dropout, rate: 0.2}
    - {type: GRU, units: 6}
    - {type: Dense, units: 1}
data:
  train: {format: synthetic, task: adding, samples: 200, timesteps: 10, seed: 5}
  validation_split: 0.2
train:
  epochs: 4
  batch_size: 16
  seed: 7
  optimizer: {type: adam, learning_rate: 0.01}
  schedule: {type: reduce_on_plateau, monitor: val_loss, patience: 1, factor: 0.5}
  early_stopping: {monitor: val_loss, patience: 10}
  loss: mse
  metrics: [mae]
)";

// Every float dataset under `group`, keyed by path.
void collect(const h5::Group& g, const std::string& prefix, std::map<std::string, Tensor>& out) {
  for (const auto& c : g.children()) {
    const std::string p = prefix + "/" + c;
    if (g.has_group(c)) collect(g.group(c), p, out);
    else if (c != "iteration:0") out[p] = g.read(c);
  }
}

std::map<std::string, Tensor> state_of(const std::string& path) {
  h5::File f = h5::File::open(path);
  std::map<std::string, Tensor> out;
  collect(f.root().group("model_weights"), "model_weights", out);
  collect(f.root().group("rnntrain/optimizer_weights"), "optimizer_weights", out);
  return out;
}

TEST(Resume, TwoPlusTwoEqualsFour) {
  auto tmp = scratch("resume");
  const std::string cfg = (tmp / "cfg.yaml").string();
  write_file(cfg, kConfig);
  const std::string straight = (tmp / "straight").string(), split = (tmp / "split").string();

  CmdResult a = run_rnntrain("train " + cfg + " output.dir=" + straight, tmp);
  ASSERT_EQ(a.code, 0) << a.err;
  CmdResult b1 = run_rnntrain("train " + cfg + " train.epochs=2 output.dir=" + split, tmp);
  ASSERT_EQ(b1.code, 0) << b1.err;
  CmdResult b2 = run_rnntrain("train --resume " + split + " train.epochs=4", tmp);
  ASSERT_EQ(b2.code, 0) << b2.err;
  EXPECT_NE(b2.err.find("resuming"), std::string::npos) << b2.err;

  auto sa = state_of(straight + "/last.h5"), sb = state_of(split + "/last.h5");
  ASSERT_EQ(sa.size(), sb.size());
  ASSERT_GT(sa.size(), 8u);  // weights of three layers plus Adam's slots
  for (const auto& [name, t] : sa) {
    ASSERT_TRUE(sb.count(name)) << name;
    ASSERT_EQ(t.shape, sb[name].shape) << name;
    for (int64_t i = 0; i < t.numel(); ++i)
      ASSERT_EQ(t[i], sb[name][i]) << name << "[" << i << "] differs after resume";
  }
  EXPECT_EQ(slurp(straight + "/history.csv"), slurp(split + "/history.csv"));
  std::filesystem::remove_all(tmp);
}

// Without training metrics the trainer enqueues steps and reads their losses back later (on a GPU,
// without waiting); the epoch losses must be those of the step-by-step path, the last partial batch
// (160 training rows in batches of 24) weighted by its size, and training itself must not change.
TEST(Resume, EnqueuedStepsReportTheSameEpochLossesAsSynchronousOnes) {
  auto tmp = scratch("async_losses");
  const std::string cfg = (tmp / "cfg.yaml").string();
  write_file(cfg, kConfig);
  const std::string with = (tmp / "with").string(), without = (tmp / "without").string();
  CmdResult a = run_rnntrain("train " + cfg + " train.epochs=3 train.batch_size=24 output.dir=" + with, tmp);
  ASSERT_EQ(a.code, 0) << a.err;
  CmdResult b = run_rnntrain("train " + cfg + " train.epochs=3 train.batch_size=24 train.metrics=[] "
                             "output.dir=" + without, tmp);
  ASSERT_EQ(b.code, 0) << b.err;
  const auto ha = nlohmann::json::parse(slurp(with + "/history.json"));
  const auto hb = nlohmann::json::parse(slurp(without + "/history.json"));
  ASSERT_EQ(ha["loss"].size(), 3u);
  EXPECT_EQ(ha["loss"], hb["loss"]) << "epoch losses, metrics on vs off";
  EXPECT_EQ(ha["val_loss"], hb["val_loss"]);
  EXPECT_FALSE(hb.contains("mae"));
  std::filesystem::remove_all(tmp);
}

TEST(Resume, FromTheRunDirectoryAloneFindsRelativeDataPaths) {
  // configs/classify.yaml names its data relative to configs/; the run's config.yaml must still
  // find it when --resume is given no config file.
  auto tmp = scratch("resume_paths");
  const std::string run = (tmp / "run").string();
  CmdResult a = run_rnntrain("train configs/classify.yaml -q train.epochs=1 output.dir=" + run, tmp);
  ASSERT_EQ(a.code, 0) << a.err;
  CmdResult b = run_rnntrain("train -q --resume " + run + " train.epochs=2", tmp);
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_NE(slurp(run + "/history.csv").find("\n1,"), std::string::npos) << slurp(run + "/history.csv");
  std::filesystem::remove_all(tmp);
}

TEST(Resume, ADifferentModelIsRefusedAndTheRunIsLeftIntact) {
  auto tmp = scratch("resume_changed");
  const std::string cfg = (tmp / "cfg.yaml").string(), run = (tmp / "run").string();
  write_file(cfg, kConfig);
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " train.epochs=1 output.dir=" + run, tmp).code, 0);
  const std::string before = slurp(run + "/config.yaml");
  CmdResult r = run_rnntrain("train -q --resume " + run + " " + cfg + " model.layers.3.units=7", tmp);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("model differs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("units is 7, was"), std::string::npos) << r.err;
  r = run_rnntrain("train -q --resume " + run + " train.optimizer.type=sgd", tmp);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("optimizer"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(run + "/config.yaml"), before);
  EXPECT_EQ(run_rnntrain("train -q --resume " + run + " train.epochs=2", tmp).code, 0);
  std::filesystem::remove_all(tmp);
}

// Makes the epoch-end last.h5 of `run` (epochs done) look stopped after `step` steps of `bs` into
// the next epoch: its RNG as the epoch's start, running sums of a loss of 0.1 and an mae of 0.2.
void stop_inside_next_epoch(const std::string& run, int64_t step, int64_t bs) {
  h5::File f = h5::File::open(run + "/last.h5", true);
  h5::Group rg = f.root().group("rnntrain");
  const double rows = static_cast<double>(step * bs);
  rg.set_attr("step", step);
  rg.set_attr_u64("epoch_rng", rg.attr_u64("rng"));
  rg.set_attr("partial", std::vector<double>{0.1 * rows, rows, 0.2 * rows, rows});
  rg.set_attr_u64("epoch_plan", {static_cast<uint64_t>(bs), 1, 0, 32, static_cast<uint64_t>(step * bs)});
  f.close();
}

// A run stopped inside an epoch and resumed with another train.batch_size goes on from the sample
// where it stopped (the user trial's resume skipped the rest of the epoch: step 206 of an epoch that
// now had 188 steps). Resumed on other data, a stopped epoch is refused (and last.h5 kept); at an
// epoch's end the new data are said and used.
TEST(Resume, AnotherBatchSizeGoesOnFromTheSampleWhereTheEpochStopped) {
  auto tmp = scratch("resume_batch_size");
  const std::string cfg = (tmp / "cfg.yaml").string(), run = (tmp / "run").string();
  write_file(cfg, kConfig);  // 160 training samples: 10 steps of 16
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " train.epochs=1 output.dir=" + run, tmp).code, 0);
  stop_inside_next_epoch(run, 8, 16);  // 128 of 160 samples done
  const std::string before = slurp(run + "/last.h5");
  CmdResult r = run_rnntrain("train --resume " + run + " train.epochs=2 data.train.seed=6", tmp);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("stopped inside epoch 2 (8 steps done)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("other values than the run's"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(run + "/last.h5"), before) << "a refused resume leaves last.h5 as it was";
  r = run_rnntrain("train --resume " + run + " train.epochs=2 train.batch_size=24", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("epoch 2 was stopped after 128 of its 160 samples, drawn in batches of 16: it goes on from "
                       "sample 129 in 2 batches of 24"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("resuming " + run + " at epoch 2 step 9"), std::string::npos) << r.err;
  EXPECT_NE(slurp(run + "/history.csv").find("\n1,"), std::string::npos) << "epoch 2 ends in the history";
  // Between epochs other data are a new start of the next epoch, said once.
  r = run_rnntrain("train --resume " + run + " train.epochs=3 data.train.samples=240", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("hold 192 training samples, where the run had 160"), std::string::npos) << r.err;
  std::filesystem::remove_all(tmp);
}

// A resume reads last.h5 and the run's config alone: model.init_from (the first start's weights,
// named by every imported config) is not read again, so it may be gone; a changed model is reported
// as one, not as weights that do not fit.
TEST(Resume, DoesNotNeedTheInitialWeightsFileAgain) {
  auto tmp = scratch("resume_init_from");
  const std::string cfg = (tmp / "cfg.yaml").string(), run = (tmp / "run").string();
  write_file(cfg, kConfig);
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " train.epochs=1 output.dir=" + (tmp / "first").string(), tmp).code, 0);
  std::filesystem::copy_file(tmp / "first" / "final.h5", tmp / "start.h5");
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " train.epochs=1 model.init_from=" + (tmp / "start.h5").string() +
                             " output.dir=" + run, tmp).code, 0);
  std::filesystem::remove(tmp / "start.h5");
  CmdResult r = run_rnntrain("train -q --resume " + run + " train.epochs=2 model.layers.3.units=7", tmp);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("model differs"), std::string::npos) << r.err;
  r = run_rnntrain("train -q --resume " + run + " train.epochs=2", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(slurp(run + "/history.csv").find("\n1,"), std::string::npos);
  std::filesystem::remove_all(tmp);
}

// A new run into a directory that holds one is refused with the commands that continue or replace
// it, and nothing there changes; --overwrite replaces it (the other files in the folder stay). The
// run's train.log holds what stderr showed, and a resumed run appends to it.
TEST(RunDirectory, AnEarlierRunIsNeverReplacedSilently) {
  auto tmp = scratch("run_dir_taken");
  const std::string cfg = (tmp / "cfg.yaml").string(), run = (tmp / "run").string();
  write_file(cfg, kConfig);
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " train.epochs=2 output.dir=" + run, tmp).code, 0);
  write_file(run + "/notes.txt", "mine");
  // train.log: what stderr shows without -q (info lines, epochs), with times, also under -q.
  const std::string log = slurp(run + "/train.log");
  for (const char* part : {"] [info] train: ", "epoch=1/2", "epoch=2/2", "[20"})
    EXPECT_NE(log.find(part), std::string::npos) << part << " in train.log:\n" << log;
  const std::string history = slurp(run + "/history.csv"), best = slurp(run + "/best.h5");
  CmdResult r = run_rnntrain("train -q " + cfg + " train.epochs=1 output.dir=" + run, tmp);
  EXPECT_EQ(r.code, 2) << r.err;
  for (const char* part : {"holds an earlier run", "best.h5", "nothing was changed", "--resume", "--overwrite",
                           "output.dir="})
    EXPECT_NE(r.err.find(part), std::string::npos) << part << " in: " << r.err;
  EXPECT_EQ(slurp(run + "/history.csv"), history);
  EXPECT_EQ(slurp(run + "/best.h5"), best);
  r = run_rnntrain("train -q --resume " + run + " --overwrite", tmp);
  EXPECT_EQ(r.code, 2) << "--resume and --overwrite contradict each other: " << r.err;
  // A run killed before its first last.h5 (best.h5 written, last.h5 not) cannot be resumed: the hint
  // is --overwrite, not --resume.
  const std::string last = slurp(run + "/last.h5");
  std::filesystem::rename(run + "/last.h5", tmp / "last.h5");
  r = run_rnntrain("train -q " + cfg + " train.epochs=1 output.dir=" + run, tmp);
  EXPECT_EQ(r.code, 2) << r.err;
  for (const char* part : {"never wrote last.h5", "cannot be resumed", "--overwrite", "nothing was changed"})
    EXPECT_NE(r.err.find(part), std::string::npos) << part << " in: " << r.err;
  EXPECT_EQ(r.err.find("--resume"), std::string::npos) << r.err;
  std::filesystem::rename(tmp / "last.h5", run + "/last.h5");
  EXPECT_EQ(slurp(run + "/last.h5"), last);

  r = run_rnntrain("train " + cfg + " train.epochs=1 output.dir=" + run + " --overwrite", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("removed the earlier run"), std::string::npos) << r.err;
  const std::string now = slurp(run + "/history.csv");
  EXPECT_EQ(std::count(now.begin(), now.end(), '\n'), 2) << "a header and one epoch: " << now;
  EXPECT_EQ(slurp(run + "/notes.txt"), "mine");
  const std::string replaced = slurp(run + "/train.log");
  EXPECT_EQ(replaced.find("epoch=2/2"), std::string::npos) << "the earlier run's log went with it:\n" << replaced;
  EXPECT_NE(replaced.find("epoch=1/1"), std::string::npos) << replaced;
  // A resumed run appends to the log.
  ASSERT_EQ(run_rnntrain("train -q --resume " + run + " train.epochs=2", tmp).code, 0);
  const std::string resumed = slurp(run + "/train.log");
  EXPECT_EQ(resumed.rfind(replaced, 0), 0u) << "appended, not rewritten";
  EXPECT_NE(resumed.find("epoch=2/2"), std::string::npos) << resumed;
  std::filesystem::remove_all(tmp);
}

// Every file below `dir` (hidden ones included) with its bytes.
std::map<std::string, std::string> snapshot(const std::filesystem::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    out[std::filesystem::relative(e.path(), dir).string()] = e.is_regular_file() ? slurp(e.path().string()) : "<dir>";
  return out;
}

// --overwrite checks the new start before it touches the directory, and sets the earlier run aside
// until the new one's first checkpoint: a start that fails (a missing data file, data that do not
// fit the model, a model too big for memory, a divergence in the first epoch) leaves the run
// directory byte for byte as it was, the user's files in it included. (It used to delete the
// earlier run first.) A start from the run's own best.h5 reads it before anything is replaced.
TEST(RunDirectory, AnOverwriteThatCannotStartLeavesTheEarlierRunAsItWas) {
  auto tmp = scratch("overwrite_fails");
  const std::string cfg = (tmp / "cfg.yaml").string(), run = (tmp / "run").string();
  write_file(cfg, kConfig);
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " train.epochs=2 output.dir=" + run, tmp).code, 0);
  write_file(run + "/notes.txt", "mine");
  write_file(run + "/tensorboard/train/my_events.txt", "also mine");
  const auto before = snapshot(run);
  ASSERT_TRUE(before.count("tensorboard/validation")) << "the run wrote TensorBoard events";
  const std::string start = "train -q " + cfg + " output.dir=" + run + " --overwrite ";
  const std::pair<std::string, std::string> failing[] = {
      {"data.train={format: npy, inputs: " + (tmp / "gone.npy").string() + ", targets: " + (tmp / "gone.npy").string() +
           "}",
       "gone.npy"},
      {"model.layers.0.shape=[10,3]", "3"},                            // the data have 2 features
      {"model.layers.1.units=60000", "memory"},                        // about 60 GB of parameters
      {"train.optimizer={type: sgd, learning_rate: 1e30}", "inf or NaN"},  // diverges in its first step
  };
  for (const auto& [change, says] : failing) {
    SCOPED_TRACE(change);
    CmdResult r = run_rnntrain(start + "'" + change + "'", tmp);
    EXPECT_NE(r.code, 0) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    const auto after = snapshot(run);
    EXPECT_EQ(after.size(), before.size());
    for (const auto& [f, bytes] : before) {
      auto it = after.find(f);
      EXPECT_TRUE(it != after.end() && it->second == bytes) << f << " is not as it was";
    }
    for (const auto& [f, bytes] : after) EXPECT_TRUE(before.count(f)) << f << " was added";
  }
  // From the run's own best.h5: read first, then the run replaced; the user's files stay.
  CmdResult r = run_rnntrain(start + "train.epochs=1 model.init_from=" + run + "/best.h5", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(run + "/notes.txt"), "mine");
  EXPECT_EQ(slurp(run + "/tensorboard/train/my_events.txt"), "also mine");
  EXPECT_FALSE(std::filesystem::exists(run + "/.replaced")) << "the earlier run is gone once the new one has a checkpoint";
  const std::string history = slurp(run + "/history.csv");
  EXPECT_EQ(std::count(history.begin(), history.end(), '\n'), 2) << history;
  EXPECT_NE(slurp(run + "/last.h5"), before.at("last.h5"));
  // And from its last.h5 through --weights: read before the run it belongs to is set aside.
  const std::string last = slurp(run + "/last.h5");
  r = run_rnntrain(start + "train.epochs=1 --weights " + run + "/last.h5", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(slurp(run + "/last.h5"), last);
  EXPECT_FALSE(std::filesystem::exists(run + "/.replaced"));
  std::filesystem::remove_all(tmp);
}

// A --overwrite killed before the new run's first checkpoint left the earlier run in RUN/.replaced:
// the next start puts it back (and says so) before anything else.
TEST(RunDirectory, AKilledOverwriteIsRolledBackByTheNextStart) {
  auto tmp = scratch("overwrite_killed");
  const std::string cfg = (tmp / "cfg.yaml").string(), run = (tmp / "run").string();
  write_file(cfg, kConfig);
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " train.epochs=2 output.dir=" + run, tmp).code, 0);
  const auto before = snapshot(run);
  // As the kill leaves it: the earlier run's files moved aside, the new start's config and log in place.
  namespace fs = std::filesystem;
  for (const auto& [f, bytes] : before) {
    if (bytes == "<dir>") continue;
    fs::create_directories(fs::path(run) / ".replaced" / fs::path(f).parent_path());
    fs::rename(fs::path(run) / f, fs::path(run) / ".replaced" / f);
  }
  write_file(run + "/.replaced/.complete", "");
  write_file(run + "/config.yaml", "the new start's");
  write_file(run + "/train.log", "the new start's log");
  CmdResult r = run_rnntrain("train --resume " + run + " train.epochs=2", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("the earlier run it was replacing is back in place"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nothing to do"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(run + "/.replaced"));
  EXPECT_EQ(slurp(run + "/last.h5"), before.at("last.h5"));
  EXPECT_EQ(slurp(run + "/config.yaml"), before.at("config.yaml"));
  // Killed while the earlier run was being set aside (last.h5 moved, best.h5 not yet, no .complete):
  // every file there is the earlier run's, and all of them come back.
  const auto again = snapshot(run);
  fs::create_directories(fs::path(run) / ".replaced");
  fs::rename(fs::path(run) / "last.h5", fs::path(run) / ".replaced" / "last.h5");
  r = run_rnntrain("train --resume " + run + " train.epochs=2", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  auto now = snapshot(run);
  for (const auto& [f, bytes] : again)
    if (f != "train.log") EXPECT_TRUE(now.count(f) && now.at(f) == bytes) << f << ": the half-moved run is not whole again";
  EXPECT_FALSE(fs::exists(run + "/.replaced"));
  std::filesystem::remove_all(tmp);
}

TEST(Resume, NothingToDoLeavesTheRunUntouched) {
  auto tmp = scratch("resume_done");
  const std::string cfg = (tmp / "cfg.yaml").string(), run = (tmp / "run").string();
  write_file(cfg, kConfig);
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " train.epochs=2 output.dir=" + run, tmp).code, 0);
  const std::string final_before = slurp(run + "/final.h5"), last_before = slurp(run + "/last.h5");
  CmdResult r = run_rnntrain("train --resume " + run, tmp);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("nothing to do"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(run + "/final.h5"), final_before);
  EXPECT_EQ(slurp(run + "/last.h5"), last_before);
  std::filesystem::remove_all(tmp);
}

TEST(Resume, RestoreBestWeightsAppliesAtTheEndOfTraining) {
  // Keras restores the best epoch's weights at the end of training even when it did not stop early.
  auto tmp = scratch("restore_best");
  const std::string cfg = (tmp / "cfg.yaml").string(), run = (tmp / "run").string();
  write_file(cfg, kConfig);
  CmdResult r = run_rnntrain("train -q " + cfg + " output.dir=" + run +
                                 " train.optimizer.learning_rate=0.05 'train.early_stopping={monitor: val_loss, "
                                 "patience: 50, restore_best_weights: true}'", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  auto fin = state_of(run + "/final.h5"), best = state_of(run + "/early_stopping_best.h5");
  for (const auto& [name, t] : fin)
    if (name.rfind("model_weights", 0) == 0) {
      ASSERT_TRUE(best.count(name)) << name;
      for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t[i], best[name][i]) << name;
    }
  std::filesystem::remove_all(tmp);
}

// A file without rnntrain's run state (as Keras writes them; here an export of a checkpoint, which
// carries the optimizer but no epochs) resumes at the epoch its optimizer steps make, as Keras'
// fit(initial_epoch=...) would go on, and says so when the steps are not whole epochs.
TEST(Resume, AFileWithoutEpochsGoesOnAtTheEpochItsStepsMake) {
  auto tmp = scratch("resume_keras_epochs");
  const std::string cfg = (tmp / "cfg.yaml").string(), run = (tmp / "run").string(), keras = (tmp / "keras").string();
  write_file(cfg, kConfig);
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " train.epochs=2 output.dir=" + run, tmp).code, 0);  // 2 x 10 steps
  std::filesystem::create_directories(keras);
  CmdResult e = run_rnntrain("export -q " + cfg + " --weights " + run + "/last.h5 -o " + keras + "/last.h5", tmp);
  ASSERT_EQ(e.code, 0) << e.err;
  std::filesystem::copy_file(cfg, keras + "/config.yaml");
  CmdResult r = run_rnntrain("train --resume " + keras + " train.epochs=3", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("optimizer step 20: 2 epochs of 10 steps done"), std::string::npos) << r.err;
  {
    h5::File f = h5::File::open(keras + "/final.h5");
    EXPECT_EQ(f.root().group("rnntrain").attr_int64("epoch"), 3);
    EXPECT_EQ(f.root().group("rnntrain").attr_int64("iterations"), 30);
  }
  // Batches of 24: 7 steps an epoch, and 20 steps are 2 epochs and 6 steps.
  std::filesystem::remove(keras + "/final.h5");
  ASSERT_EQ(run_rnntrain("export -q " + cfg + " --weights " + run + "/last.h5 -o " + keras + "/last.h5", tmp).code, 0);
  r = run_rnntrain("train --resume " + keras + " train.epochs=3 train.batch_size=24", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("not a whole number of epochs of 7 steps"), std::string::npos) << r.err;
  h5::File f = h5::File::open(keras + "/final.h5");
  EXPECT_EQ(f.root().group("rnntrain").attr_int64("iterations"), 27);
  std::filesystem::remove_all(tmp);
}

// Checkpoints and exports hold the learning rate the next step takes (after a per-epoch schedule
// lowered it), in the optimizer's config and its variable; an export whose --weights hold another
// optimizer's state says so and exports a fresh optimizer.
TEST(Resume, FilesHoldTheLearningRateOfTheNextStep) {
  auto tmp = scratch("resume_lr");
  const std::string cfg = (tmp / "cfg.yaml").string(), run = (tmp / "run").string();
  write_file(cfg, kConfig);
  ASSERT_EQ(run_rnntrain("train -q " + cfg + " train.epochs=2 output.dir=" + run +
                             " 'train.schedule={type: step, step_size: 1, gamma: 0.5}'", tmp).code, 0);
  const std::string out = (tmp / "out.h5").string();
  ASSERT_EQ(run_rnntrain("export -q " + cfg + " --weights " + run + "/last.h5 -o " + out, tmp).code, 0);
  for (const std::string& file : {run + "/last.h5", run + "/final.h5", out}) {
    SCOPED_TRACE(file);
    h5::File f = h5::File::open(file);
    const auto j = nlohmann::json::parse(f.root().attr_string("training_config"));
    EXPECT_FLOAT_EQ(j["optimizer_config"]["config"]["learning_rate"].get<float>(), 0.0025f);  // exports: read as float32
    EXPECT_EQ(j["metrics"], nlohmann::json::parse(R"(["mae"])"));
    EXPECT_FLOAT_EQ(f.root().group("rnntrain/optimizer_weights").read("adam/learning_rate")[0], 0.0025f);
    EXPECT_EQ(f.root().group("rnntrain/optimizer_weights").read_int64("adam/iteration").at(0), 20);
  }
  CmdResult r = run_rnntrain("export " + cfg + " train.optimizer.type=sgd --weights " + run + "/last.h5 -o " + out, tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("is not exported"), std::string::npos) << r.err;
  h5::File f = h5::File::open(out);
  EXPECT_EQ(f.root().group("rnntrain/optimizer_weights").read_int64("sgd/iteration").at(0), 0);
  std::filesystem::remove_all(tmp);
}

TEST(Resume, MissingRunDirectoryIsAUsageError) {
  auto tmp = scratch("resume_missing");
  CmdResult r = run_rnntrain("train --resume " + (tmp / "nothing").string(), tmp);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("nothing: no such run directory"), std::string::npos) << r.err;
  // A start that failed (here: data that does not fit the Input layer) leaves a folder with train.log
  // only; resuming it says so instead of naming a missing config.yaml.
  const std::string bad = (tmp / "bad").string();
  r = run_rnntrain("train configs/quickstart.yaml model.layers.0.shape=[30,3] -q output.dir=" + bad, tmp);
  ASSERT_EQ(r.code, 1) << r.err;
  r = run_rnntrain("train --resume " + bad, tmp);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("holds no run to resume"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("train again without --resume"), std::string::npos) << r.err;
  std::filesystem::remove_all(tmp);
}

}  // namespace
