// Faults a long training run meets: kill -9 at random points (checkpoint writes included), SIGINT,
// SIGTERM and SIGHUP, a full disk, and divergence to inf/NaN. Each test checks what the user relies
// on: every checkpoint on disk still loads, a resumed run ends bit-identical to an uninterrupted one
// (CPU), nothing non-finite is written, and the error says what happened.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cli_util.h"
#include "io/checkpoint.h"
#include "io/h5.h"
#include "spec/parse.h"

extern char** environ;

using namespace rnntrain;
using namespace rnntrain::test;
namespace fs = std::filesystem;

namespace {

// 8 epochs of 25 steps with dropout, shuffling, a schedule and early stopping's saved best weights:
// about a second on 2 CPU cores, and every piece of resume state in play.
const char* kConfig = R"(model:
  layers:
    - {type: Input, shape: [12, 2]}
    - {type: LSTM, units: 24, return_sequences: true, dropout: 0.1}
    - {type: GRU, units: 16}
    - {type: Dense, units: 1}
data:
  train: {format: synthetic, task: adding, samples: 500, timesteps: 12, seed: 5}
  validation_split: 0.2
train:
  epochs: 8
  batch_size: 16
  seed: 7
  threads: 1
  optimizer: {type: adam, learning_rate: 0.01}
  schedule: {type: reduce_on_plateau, monitor: val_loss, patience: 1, factor: 0.5}
  early_stopping: {monitor: val_loss, patience: 20, restore_best_weights: true}
  loss: mse
  metrics: [mae]
device: cpu
)";

// A child rnntrain with stdout and stderr in files; kill() and wait() on it.
struct Child {
  pid_t pid = -1;
  int wait() const {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  }
};

Child spawn(const std::vector<std::string>& args, const fs::path& tmp) {
  std::vector<std::string> argv{RNNTRAIN_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, (tmp / "stdout.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, (tmp / "stderr.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  Child c;
  const int rc = posix_spawn(&c.pid, RNNTRAIN_BINARY, &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  EXPECT_EQ(rc, 0) << "posix_spawn failed";
  return c;
}

Config test_config(const fs::path& tmp) {
  write_file(tmp / "cfg.yaml", kConfig);
  return load_config((tmp / "cfg.yaml").string(), {});
}

// Every weight and optimizer value of a checkpoint, keyed by dataset path.
std::map<std::string, Tensor> state_of(const std::string& path) {
  std::map<std::string, Tensor> out;
  std::function<void(const h5::Group&, const std::string&)> collect = [&](const h5::Group& g, const std::string& p) {
    for (const auto& c : g.children()) {
      if (g.has_group(c)) collect(g.group(c), p + "/" + c);
      else if (g.has_dataset(c) && g.shape(c).size() > 0) out[p + "/" + c] = g.read(c);
    }
  };
  h5::File f = h5::File::open(path);
  collect(f.root().group("model_weights"), "model_weights");
  if (f.root().has_group("rnntrain/optimizer_weights")) collect(f.root().group("rnntrain/optimizer_weights"), "optimizer_weights");
  return out;
}

void expect_same_state(const std::string& a, const std::string& b) {
  auto sa = state_of(a), sb = state_of(b);
  ASSERT_EQ(sa.size(), sb.size()) << a << " vs " << b;
  for (const auto& [name, t] : sa) {
    ASSERT_TRUE(sb.count(name)) << name;
    ASSERT_EQ(t.shape, sb[name].shape) << name;
    for (int64_t i = 0; i < t.numel(); ++i)
      ASSERT_EQ(t[i], sb[name][i]) << name << "[" << i << "] differs between " << a << " and " << b;
  }
}

// Every checkpoint in the run directory loads into the model, with finite weights.
void expect_checkpoints_load(const Config& cfg, const fs::path& run) {
  for (const char* name : {"last.h5", "best.h5", "final.h5", "early_stopping_best.h5"}) {
    const fs::path p = run / name;
    if (!fs::exists(p)) continue;
    Rng rng(0);
    Params params = init_params(cfg.model, rng);
    try {
      load_weights(p.string(), cfg.model, params);
    } catch (const std::exception& e) {
      FAIL() << p << " does not load: " << e.what();
    }
    EXPECT_EQ(params.first_nonfinite(), "") << p;
  }
}

// An uninterrupted run of cfg.yaml, and how long it took (ms).
std::pair<fs::path, double> reference_run(const fs::path& tmp, const std::string& overrides = "") {
  const fs::path ref = tmp / "reference";
  const auto t0 = std::chrono::steady_clock::now();
  CmdResult r = run_rnntrain("train " + (tmp / "cfg.yaml").string() + " -q output.dir=" + ref.string() + " " + overrides, tmp);
  EXPECT_EQ(r.code, 0) << r.err;
  return {ref, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()};
}

bool has_temporary(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".tmp") return true;
  return false;
}

TEST(Faults, KillNineAtRandomPointsLosesNothingAndResumesBitIdentical) {
  auto tmp = scratch("kill9");
  const Config cfg = test_config(tmp);
  const auto [ref, full_ms] = reference_run(tmp);
  const fs::path run = tmp / "run";

  std::mt19937 gen(12345);
  int kills = 0, during_writes = 0, finished = 0;
  for (int attempt = 0; attempt < 200 && (kills < 24 || finished == 0); ++attempt) {
    if (finished) {  // the run is done: start it over, to keep killing
      fs::remove_all(run);
      finished = 0;
    }
    std::vector<std::string> args{"train", "-q"};
    if (fs::exists(run / "last.h5")) args.insert(args.end(), {"--resume", run.string()});
    else args.insert(args.end(), {(tmp / "cfg.yaml").string(), "output.dir=" + run.string()});
    // Killed before its first last.h5 (while writing it, after best.h5): nothing to resume, start over.
    if (!fs::exists(run / "last.h5") && fs::exists(run)) args.push_back("--overwrite");
    Child c = spawn(args, tmp);
    // Half of the kills land while a checkpoint or history file is being written (its .tmp exists),
    // the others at a random time.
    const bool at_write = kills % 2 == 1;
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::microseconds(static_cast<int64_t>(std::uniform_real_distribution<>(0.05, 1.0)(gen) * full_ms * 1000));
    bool killed = false;
    for (;;) {
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << slurp((tmp / "stderr.txt").string());
        finished = 1;
        break;
      }
      if (at_write ? fs::exists(run) && has_temporary(run) : std::chrono::steady_clock::now() >= deadline) {
        ::kill(c.pid, SIGKILL);
        const int code = c.wait();
        if (code == 0) {  // it finished just before the kill
          finished = 1;
        } else {
          EXPECT_EQ(code, 128 + SIGKILL) << slurp((tmp / "stderr.txt").string());
          killed = true;
        }
        break;
      }
      if (!at_write) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (killed) {
      ++kills;
      during_writes += at_write;
      expect_checkpoints_load(cfg, run);
    }
  }
  ASSERT_GE(kills, 20);
  EXPECT_GE(during_writes, 8) << "too few kills landed during checkpoint writes";
  if (!finished) {  // go on to the end
    CmdResult r = run_rnntrain("train -q --resume " + run.string(), tmp);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  // The last life of the run started from a killed one, so it resumed: same end as uninterrupted.
  expect_same_state((ref / "last.h5").string(), (run / "last.h5").string());
  expect_same_state((ref / "final.h5").string(), (run / "final.h5").string());
  EXPECT_EQ(slurp((ref / "history.csv").string()), slurp((run / "history.csv").string()));
  EXPECT_FALSE(has_temporary(run)) << "a resumed run removes the temporaries a killed one left";
  std::printf("kill -9: %d kills (%d during writes), every checkpoint loaded, resumed run bit-identical\n", kills,
              during_writes);
  fs::remove_all(tmp);
}

TEST(Faults, AFinishedRunKilledBeforeFinalH5IsCompletedByResume) {
  auto tmp = scratch("final");
  test_config(tmp);
  const fs::path ref = reference_run(tmp).first;
  // As when killed between the last epoch's last.h5 and its history files: final.h5 missing, the history
  // one epoch behind (history.csv without its last line, history.json not there).
  const std::string csv = slurp((ref / "history.csv").string()), json = slurp((ref / "history.json").string());
  fs::remove(ref / "final.h5");
  fs::remove(ref / "history.json");
  write_file((ref / "history.csv").string(), csv.substr(0, csv.rfind('\n', csv.size() - 2) + 1));
  CmdResult r = run_rnntrain("train -q --resume " + ref.string(), tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("nothing to do"), std::string::npos) << r.err;
  EXPECT_EQ(slurp((ref / "history.csv").string()), csv) << "resume writes the checkpoint's history back";
  EXPECT_EQ(slurp((ref / "history.json").string()), json);
  const fs::path again = tmp / "again";
  ASSERT_EQ(run_rnntrain("train " + (tmp / "cfg.yaml").string() + " -q output.dir=" + again.string(), tmp).code, 0);
  expect_same_state((again / "final.h5").string(), (ref / "final.h5").string());
  fs::remove_all(tmp);
}

// Waits until history.csv lists `epochs` epochs (it is rewritten after each), at most 60 s.
void wait_for_epochs(const fs::path& run, int epochs) {
  for (int i = 0; i < 30000; ++i) {
    const std::string h = slurp((run / "history.csv").string());
    if (std::count(h.begin(), h.end(), '\n') > epochs) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

TEST(Faults, SignalStopsAfterTheStepSavesAndResumesBitIdentical) {
  auto tmp = scratch("signal");
  const Config cfg = test_config(tmp);
  const fs::path ref = reference_run(tmp, "train.epochs=24").first;  // early stopping ends it at epoch 21
  const std::pair<int, int> cases[] = {{SIGINT, 130}, {SIGTERM, 143}, {SIGHUP, 129}};
  int after = 1;  // epochs written to history.csv before the signal: stop at different points
  for (const auto& [sig, code] : cases) {
    const fs::path run = tmp / ("run_" + std::to_string(sig));
    Child c = spawn({"train", (tmp / "cfg.yaml").string(), "-q", "output.dir=" + run.string(), "train.epochs=24"}, tmp);
    wait_for_epochs(run, after);
    after += 4;
    ::kill(c.pid, sig);
    ASSERT_EQ(c.wait(), code) << slurp((tmp / "stderr.txt").string());
    const std::string err = slurp((tmp / "stderr.txt").string());
    EXPECT_NE(err.find("rnntrain train --resume " + run.string()), std::string::npos) << err;
    const auto summary = nlohmann::json::parse(slurp((tmp / "stdout.txt").string()));
    EXPECT_TRUE(summary.contains("interrupted")) << summary.dump();
    ASSERT_TRUE(fs::exists(run / "last.h5"));
    ASSERT_TRUE(fs::exists(run / "history.csv"));
    EXPECT_FALSE(fs::exists(run / "final.h5")) << "an interrupted run is not finished";
    expect_checkpoints_load(cfg, run);
    CmdResult r = run_rnntrain("train -q --resume " + run.string(), tmp);
    ASSERT_EQ(r.code, 0) << r.err;
    expect_same_state((ref / "last.h5").string(), (run / "last.h5").string());
    expect_same_state((ref / "final.h5").string(), (run / "final.h5").string());
    EXPECT_EQ(slurp((ref / "history.csv").string()), slurp((run / "history.csv").string()));
  }
  fs::remove_all(tmp);
}

// Length bucketing (train.bucketing): a run stopped inside an epoch draws the same bucketed batches
// again on resume, and ends where an uninterrupted run ends.
TEST(Faults, ABucketedRunStoppedInsideAnEpochResumesBitIdentical) {
  auto tmp = scratch("bucketed");
  write_file(tmp / "cfg.yaml", R"(model:
  layers:
    - {type: Input, shape: [null]}
    - {type: Embedding, input_dim: 9, output_dim: 8, mask_zero: true}
    - {type: LSTM, units: 24, dropout: 0.1}
    - {type: Dense, units: 8}
data:
  train: {format: synthetic, task: classify, samples: 1200, timesteps: 40, seed: 3}
train:
  epochs: 6
  batch_size: 8
  seed: 5
  threads: 1
  bucketing: true
  bucket_window: 8
  optimizer: {type: adam, learning_rate: 0.01}
  loss: {type: sparse_categorical_crossentropy, from_logits: true}
  metrics: [accuracy]
device: cpu
)");
  const fs::path ref = reference_run(tmp).first;
  const fs::path run = tmp / "run";
  Child c = spawn({"train", (tmp / "cfg.yaml").string(), "-q", "output.dir=" + run.string()}, tmp);
  wait_for_epochs(run, 2);
  ::kill(c.pid, SIGTERM);
  ASSERT_EQ(c.wait(), 143) << slurp((tmp / "stderr.txt").string());
  const auto summary = nlohmann::json::parse(slurp((tmp / "stdout.txt").string()));
  ASSERT_TRUE(summary.contains("interrupted")) << summary.dump();
  std::printf("bucketed run stopped at epoch %d step %d\n", summary["interrupted"]["epoch"].get<int>(),
              summary["interrupted"]["step"].get<int>());
  CmdResult r = run_rnntrain("train -q --resume " + run.string(), tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_same_state((ref / "final.h5").string(), (run / "final.h5").string());
  EXPECT_EQ(slurp((ref / "history.csv").string()), slurp((run / "history.csv").string()));
  fs::remove_all(tmp);
}

TEST(Faults, SecondSignalExitsAtOnceLeavingValidFiles) {
  auto tmp = scratch("signal2");
  test_config(tmp);
  // Wide layers and large batches: a step takes long enough for the second signal to arrive inside it.
  const Config cfg = load_config((tmp / "cfg.yaml").string(), {"train.batch_size=400", "model.layers.1.units=512"});
  const fs::path run = tmp / "run";
  Child c = spawn({"train", (tmp / "cfg.yaml").string(), "-q", "output.dir=" + run.string(), "train.batch_size=400",
                   "model.layers.1.units=512"}, tmp);
  wait_for_epochs(run, 1);  // one step per epoch: the next step (about a second) is under way
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ::kill(c.pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // apart, so that they are not merged into one
  ::kill(c.pid, SIGTERM);
  EXPECT_EQ(c.wait(), 143);
  const std::string err = slurp((tmp / "stderr.txt").string());
  EXPECT_NE(err.find("second signal"), std::string::npos) << err;
  expect_checkpoints_load(cfg, run);
  fs::remove_all(tmp);
}

// A pre-existing checkpoint, then a run whose writes fail for lack of space: one clean error (exit
// 1, no crash in HDF5's exit handler), no temporaries left, the old checkpoint intact.
void expect_clean_disk_full(const CmdResult& r, const fs::path& run, const std::string& old_last) {
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(r.err.find("Is the disk full") != std::string::npos || r.err.find("cannot write") != std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("closing id"), std::string::npos) << r.err;
  EXPECT_FALSE(has_temporary(run));
  if (!old_last.empty()) EXPECT_TRUE(slurp((run / "last.h5").string()) == old_last) << "the existing last.h5 changed";
}

TEST(Faults, FullDiskIsOneCleanErrorAndDamagesNothing) {
  auto tmp = scratch("diskfull");
  test_config(tmp);
  const fs::path run = tmp / "run";
  CmdResult first = run_rnntrain("train " + (tmp / "cfg.yaml").string() + " -q train.epochs=1 output.dir=" + run.string(), tmp);
  ASSERT_EQ(first.code, 0) << first.err;
  const std::string old_last = slurp((run / "last.h5").string());
  // RLIMIT_FSIZE (ulimit -f, in KiB) with SIGXFSZ ignored: writes past the limit fail with EFBIG,
  // as on a full disk; no root needed. The checkpoints are ~150 KB.
  const std::string limited = "bash -c 'ulimit -f 40; trap \"\" XFSZ; exec " + std::string(RNNTRAIN_BINARY) + " ";
  CmdResult r = run_command(limited + "train --resume " + run.string() + " -q train.epochs=3'", tmp);
  expect_clean_disk_full(r, run, old_last);
  const std::string tiny = "bash -c 'ulimit -f 8; trap \"\" XFSZ; exec " + std::string(RNNTRAIN_BINARY) + " ";
  for (const char* out : {"m.h5", "m.weights.h5", "m.keras"}) {  // each is ~30 KB
    write_file(tmp / out, "existing");
    CmdResult e = run_command(tiny + "export " + (tmp / "cfg.yaml").string() +
                               " --weights " + (run / "last.h5").string() + " -o " + (tmp / out).string() + "'", tmp);
    EXPECT_EQ(e.code, 1) << out << ": " << e.err;
    EXPECT_TRUE(slurp((tmp / out).string()) == "existing") << out << " was damaged";
  }

  // A real full file system where one can be mounted (root): a 200 KiB tmpfs.
  const fs::path mnt = tmp / "tiny";
  fs::create_directories(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=200k") != 0) {
    std::printf("SKIPPED part: cannot mount a tmpfs here (%s); the RLIMIT_FSIZE run above covered the failure\n",
                std::strerror(errno));
  } else {
    CmdResult t = run_rnntrain("train " + (tmp / "cfg.yaml").string() + " -q train.epochs=3 output.dir=" + (mnt / "run").string(), tmp);
    EXPECT_NE(t.code, 0);
    expect_clean_disk_full(t, mnt / "run", "");
    ::umount(mnt.c_str());
  }
  fs::remove_all(tmp);
}

TEST(Faults, DivergenceStopsBeforeANonFiniteCheckpoint) {
  auto tmp = scratch("nan");
  const Config cfg = test_config(tmp);
  const fs::path run = tmp / "run";
  CmdResult r = run_rnntrain("train " + (tmp / "cfg.yaml").string() + " -q 'train.optimizer={type: sgd, learning_rate: 1e6}' "
                             "train.steps_per_epoch=1 train.early_stopping=null train.schedule=null output.dir=" + run.string(), tmp);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("inf or NaN"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("step 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("last good checkpoint"), std::string::npos) << r.err;
  expect_checkpoints_load(cfg, run);  // whatever was written is finite

  // A float32-overflowing learning rate is a config error, not a run that diverges.
  CmdResult big = run_rnntrain("train " + (tmp / "cfg.yaml").string() + " 'train.optimizer.learning_rate=1e300'", tmp);
  EXPECT_EQ(big.code, 2) << big.err;
  EXPECT_NE(big.err.find("learning_rate"), std::string::npos) << big.err;
  fs::remove_all(tmp);
}

TEST(Faults, EvalAndPredictRefuseNonFiniteWeightsUnlessAsked) {
  auto tmp = scratch("nanweights");
  const Config cfg = test_config(tmp);
  Rng rng(1);
  Params params = init_params(cfg.model, rng);
  params.layers[2].params[1].value[3] = std::nanf("");
  const std::string ckpt = (tmp / "nan.h5").string();
  save_checkpoint(ckpt, cfg.model, params, {}, ResumeState{});
  const std::string base = (tmp / "cfg.yaml").string() + " --weights " + ckpt;
  CmdResult e = run_rnntrain("eval " + base + " --json", tmp);
  EXPECT_EQ(e.code, 1) << e.err;
  EXPECT_NE(e.err.find(ckpt), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("gru/recurrent_kernel"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("--allow-nonfinite"), std::string::npos) << e.err;
  EXPECT_EQ(e.out, "");
  CmdResult p = run_rnntrain("predict " + base + " -o " + (tmp / "p.npy").string(), tmp);
  EXPECT_EQ(p.code, 1) << p.err;
  EXPECT_FALSE(fs::exists(tmp / "p.npy"));
  CmdResult t = run_rnntrain("train " + base + " output.dir=" + (tmp / "run").string(), tmp);
  EXPECT_EQ(t.code, 1) << t.err;
  CmdResult asked = run_rnntrain("eval " + base + " --json --allow-nonfinite", tmp);
  EXPECT_EQ(asked.code, 0) << asked.err;
  fs::remove_all(tmp);
}

TEST(Faults, StaleTemporariesAreRemovedAtStart) {
  auto tmp = scratch("stale");
  test_config(tmp);
  const fs::path run = tmp / "run";
  CmdResult a = run_rnntrain("train " + (tmp / "cfg.yaml").string() + " -q train.epochs=1 output.dir=" + run.string(), tmp);
  ASSERT_EQ(a.code, 0) << a.err;
  write_file(run / "last.h5.tmp", "half a checkpoint");
  write_file(run / "history.csv.tmp", "epoch,lo");
  write_file(run / "notes.tmp", "the user's own file");
  CmdResult b = run_rnntrain("train --resume " + run.string() + " train.epochs=2", tmp);
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_FALSE(fs::exists(run / "last.h5.tmp"));
  EXPECT_FALSE(fs::exists(run / "history.csv.tmp"));
  EXPECT_TRUE(fs::exists(run / "notes.tmp")) << "only rnntrain's own temporaries are removed";
  EXPECT_NE(b.err.find("last.h5.tmp"), std::string::npos) << b.err;
  fs::remove_all(tmp);
}

}  // namespace

namespace {

TEST(Faults, AModelTooLargeForMemoryIsRefusedBeforeAllocating) {
  auto tmp = scratch("toolarge");
  for (const char* cmd : {"train configs/quickstart.yaml model.layers.1.units=10000000",
                          "eval configs/quickstart.yaml model.layers.1.units=10000000 --weights missing.h5"}) {
    CmdResult r = run_rnntrain(std::string(cmd) + " output.dir=" + (tmp / "run").string(), tmp);
    EXPECT_EQ(r.code, 1) << cmd << ": " << r.err;
    EXPECT_NE(r.err.find(" are available"), std::string::npos) << r.err;  // not std::bad_alloc
  }
  fs::remove_all(tmp);
}

}  // namespace
