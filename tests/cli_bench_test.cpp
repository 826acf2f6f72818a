// `rnntrain bench`: the JSON it writes has the documented structure, its numbers are positive and
// consistent with each other (sequences/s = batch * 1000 / ms_per_step, the median of the repeats),
// and bad arguments are usage errors. Never a timing threshold: only structure and arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "cli_util.h"

using namespace rnntrain::test;

TEST(Bench, QuickstartJsonIsConsistent) {
  auto tmp = scratch("bench");
  const std::string json = (tmp / "out.json").string();
  CmdResult r = run_rnntrain("bench configs/quickstart.yaml device=cpu --steps 2 --repeats 3 --json " + json, tmp);  // the CPU engine, also on GPU machines
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("winner: configured"), std::string::npos) << r.out;
  const std::string text = slurp(json);
  ASSERT_FALSE(text.empty()) << "no JSON written to " << json << "\nstderr: " << r.err;
  const auto j = nlohmann::json::parse(text);

  for (const char* k : {"date", "config", "hardware", "versions", "batch_size", "timesteps", "steps", "repeats",
                        "flops_per_step", "candidates", "winner"})
    EXPECT_TRUE(j.contains(k)) << "missing key " << k << " in\n" << text;
  EXPECT_EQ(j["batch_size"], 32);  // configs/quickstart.yaml
  EXPECT_EQ(j["timesteps"], 30);
  EXPECT_EQ(j["steps"], 2);
  EXPECT_EQ(j["repeats"], 3);
  EXPECT_TRUE(j["hardware"].contains("device")) << text;
  EXPECT_EQ(j["versions"]["rnntrain"], RNNTRAIN_VERSION);
  // LSTM(32) on 2 features, B=32, T=30: 3 x 2*4*32*(2+32)*32*30.
  EXPECT_DOUBLE_EQ(j["flops_per_step"].get<double>(), 3.0 * 2 * 4 * 32 * (2 + 32) * 32 * 30);

  ASSERT_EQ(j["candidates"].size(), 1u) << text;  // on the CPU, only the configured model
  const auto& c = j["candidates"][0];
  EXPECT_EQ(c["name"], "configured");
  EXPECT_EQ(c["status"], "ok");
  EXPECT_EQ(c["precision"], "fp32") << "the CPU computes in FP32";
  EXPECT_EQ(c["algo"], "standard");
  EXPECT_EQ(j["winner"], c["name"]);
  const double ms = c["ms_per_step"].get<double>();
  const double sps = c["sequences_per_s"].get<double>();
  const double tflops = c["tflops"].get<double>();
  EXPECT_GT(ms, 0.0);
  EXPECT_GT(sps, 0.0);
  EXPECT_GT(tflops, 0.0);
  EXPECT_GT(c["peak_host_rss_mib"].get<double>(), 0.0);
  EXPECT_TRUE(c["peak_device_mib"].is_null()) << "a CPU engine has no device memory";
  EXPECT_TRUE(std::isfinite(c["last_loss"].get<double>()));

  EXPECT_NEAR(sps, 32 * 1000.0 / ms, 1e-6 * sps) << "sequences/s must be batch * 1000 / ms_per_step";
  EXPECT_NEAR(tflops, j["flops_per_step"].get<double>() / (ms / 1000.0) / 1e12, 1e-6 * tflops);
  std::vector<double> reps = c["ms_per_step_repeats"].get<std::vector<double>>();
  ASSERT_EQ(reps.size(), 3u);
  for (double v : reps) EXPECT_GT(v, 0.0);
  std::sort(reps.begin(), reps.end());
  EXPECT_DOUBLE_EQ(ms, reps[1]) << "ms_per_step is the median of the repeats";
  std::filesystem::remove_all(tmp);
}

// --inference times evaluation steps: the forward's FLOPs only, and nothing is trained (the loss of the
// last step is the same after 1 or 6 steps, where training steps change it).
TEST(Bench, InferenceTimesEvaluationStepsThatTrainNothing) {
  auto tmp = scratch("bench_inference");
  double loss[2][2] = {};
  for (int infer = 0; infer < 2; ++infer)
    for (int n = 0; n < 2; ++n) {
      const std::string json = (tmp / ("b" + std::to_string(2 * infer + n) + ".json")).string();
      CmdResult r = run_rnntrain(std::string("bench configs/quickstart.yaml device=cpu --repeats 3 --warmup 0 --steps ") +
                                     (n ? "2" : "1") + (infer ? " --inference" : "") + " --json " + json,
                                 tmp);
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_NE(r.out.find(infer ? "evaluation steps" : "training steps"), std::string::npos) << r.out;
      const auto j = nlohmann::json::parse(slurp(json));
      EXPECT_EQ(j["workload"], infer ? "inference" : "training");
      EXPECT_DOUBLE_EQ(j["flops_per_step"].get<double>(), (infer ? 1.0 : 3.0) * 2 * 4 * 32 * (2 + 32) * 32 * 30);
      loss[infer][n] = j["candidates"][0]["last_loss"].get<double>();
    }
  EXPECT_NE(loss[0][0], loss[0][1]) << "3 and 6 training steps end at different losses";
  EXPECT_EQ(loss[1][0], loss[1][1]) << "evaluation steps leave the weights as they were";
  std::filesystem::remove_all(tmp);
}

TEST(Bench, EmbeddingModelWithNoneTimesteps) {
  auto tmp = scratch("bench_tokens");
  const std::string json = (tmp / "out.json").string();
  CmdResult no_t = run_rnntrain("bench configs/tokens.yaml --steps 1 --repeats 3", tmp);
  EXPECT_EQ(no_t.code, 2) << "None timesteps without --timesteps is a usage error\n" << no_t.err;
  EXPECT_NE(no_t.err.find("--timesteps"), std::string::npos) << no_t.err;
  CmdResult r = run_rnntrain("bench configs/tokens.yaml --timesteps 12 --steps 1 --repeats 3 --warmup 1 --json " + json, tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["timesteps"], 12);
  EXPECT_GT(j["candidates"][0]["ms_per_step"].get<double>(), 0.0);
  std::filesystem::remove_all(tmp);
}

// OpenMP's threads (oneDNN's stacks) spin 1000 pauses after a parallel region unless the user chose
// (backend/cpu/blas_env.h); the bench header says what the run had. RNNTRAIN_PROFILE on the CPU prints
// the time of every layer's forward and backward, the loss and the optimizer, and the parts of the own
// engine's layers.
TEST(Bench, OpenMpSpinAndCpuProfileAreReported) {
  auto tmp = scratch("bench_spin");
  const std::string bench =
      std::string(RNNTRAIN_BINARY) + " bench configs/quickstart.yaml device=cpu --steps 2 --repeats 3 --warmup 1";
  CmdResult d = run_command("env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY RNNTRAIN_PROFILE=1 " + bench, tmp);
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_NE(d.out.find("GOMP_SPINCOUNT 1000"), std::string::npos) << d.out;
  EXPECT_NE(d.err.find("profile: "), std::string::npos) << d.err;
  for (const char* phase : {"lstm forward", "dense forward", "loss and metrics", "dense backward", "lstm backward",
                            "optimizer"})
    EXPECT_NE(d.err.find(phase), std::string::npos) << phase << "\n" << d.err;
  // The own engine's layers split their time into parts (what a slow layer spends it on).
  CmdResult o = run_command("env RNNTRAIN_PROFILE=1 " + bench + " --cpu own", tmp);
  ASSERT_EQ(o.code, 0) << o.err;
  for (const char* part : {"own: pack W, buffers", "own: forward loop", "own: pack W^T, buffers", "own: backward loop",
                           "own: dW, db", "last thread's start", "slowest thread over the fastest"})
    EXPECT_NE(o.err.find(part), std::string::npos) << part << "\n" << o.err;
  CmdResult u = run_command("env GOMP_SPINCOUNT=123 " + bench, tmp);
  ASSERT_EQ(u.code, 0) << u.err;
  EXPECT_NE(u.out.find("GOMP_SPINCOUNT 123"), std::string::npos) << "the user's value stays\n" << u.out;
  EXPECT_EQ(u.err.find("profile: "), std::string::npos) << "no profile unless asked\n" << u.err;
  CmdResult p = run_command("env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive " + bench, tmp);
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_NE(p.out.find("GOMP_SPINCOUNT unset"), std::string::npos) << "a wait policy is the user's choice\n" << p.out;
  std::filesystem::remove_all(tmp);
}

TEST(Bench, BadArgumentsAreUsageErrors) {
  auto tmp = scratch("bench_args");
  EXPECT_EQ(run_rnntrain("bench configs/quickstart.yaml --repeats 2", tmp).code, 2);
  EXPECT_EQ(run_rnntrain("bench configs/quickstart.yaml --steps 0", tmp).code, 2);
  EXPECT_EQ(run_rnntrain("bench configs/no_such.yaml", tmp).code, 2);
  CmdResult p = run_rnntrain("bench configs/quickstart.yaml --precision fp32,fp8", tmp);
  EXPECT_EQ(p.code, 2);
  EXPECT_NE(p.err.find("--precision fp32,fp8: 'fp8' is not one of fp32, tf32, fp16, bf16"), std::string::npos) << p.err;
  CmdResult al = run_rnntrain("bench configs/quickstart.yaml --algo persist", tmp);
  EXPECT_EQ(al.code, 2);
  EXPECT_NE(al.err.find("'persist' is not one of standard, persist_static"), std::string::npos) << al.err;
  CmdResult ml = run_rnntrain("bench configs/quickstart.yaml --min-length 31", tmp);
  EXPECT_EQ(ml.code, 2);
  EXPECT_NE(ml.err.find("--min-length 31: longer than the 30 timesteps"), std::string::npos) << ml.err;
  CmdResult st = run_rnntrain("bench configs/quickstart.yaml --stream", tmp);
  EXPECT_EQ(st.code, 2);
  EXPECT_NE(st.err.find("--stream draws fresh sequence lengths for every batch: give --min-length or --lognormal"),
            std::string::npos)
      << st.err;
  CmdResult ln = run_rnntrain("bench configs/quickstart.yaml --lognormal 12", tmp);
  EXPECT_EQ(ln.code, 2);
  EXPECT_NE(ln.err.find("--lognormal 12: give MEDIAN,SIGMA, two positive numbers"), std::string::npos) << ln.err;
  std::filesystem::remove_all(tmp);
}

// --stream: a new batch per step from a pool with log-normal lengths, batched as an epoch would be;
// with train.bucketing the batches hold similar lengths and are trimmed, so far less is padding.
TEST(Bench, AStreamOfBucketedBatchesIsMostlyFreeOfPadding) {
  auto tmp = scratch("bench_stream");
  double share[2] = {0, 0};
  for (int bucketing = 0; bucketing < 2; ++bucketing) {
    const std::string json = (tmp / ("s" + std::to_string(bucketing) + ".json")).string();
    CmdResult r = run_rnntrain("bench configs/tokens.yaml device=cpu --timesteps 60 --lognormal 12,0.7 --min-length 3 "
                               "--stream --steps 2 --repeats 3 --warmup 1 train.bucketing=" +
                                   std::string(bucketing ? "true" : "false") + " --json " + json,
                               tmp);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("stream: 32 batches in turn"), std::string::npos) << r.out;
    const auto j = nlohmann::json::parse(slurp(json));
    EXPECT_EQ(j["stream"], true);
    EXPECT_EQ(j["bucketing"], bucketing == 1);
    EXPECT_EQ(j["lognormal"]["median"], 12.0);
    EXPECT_EQ(j["candidates"][0]["status"], "ok");
    share[bucketing] = j["padding_share"].get<double>();
  }
  EXPECT_GT(share[0], 0.5) << "log-normal lengths around 12 padded to 60";
  EXPECT_LT(share[1], share[0] / 3) << "bucketed and trimmed";
  std::printf("stream padding share: %.3f without bucketing, %.3f with\n", share[0], share[1]);
  std::filesystem::remove_all(tmp);
}
