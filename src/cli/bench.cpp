// `rnntrain bench`: times complete training steps (forward, loss, backward, optimizer) of a config's
// model on one synthetic batch, for each candidate plan, and prints a table and the winner (and JSON).
// Not a data pipeline benchmark: the batch is made once and reused; metrics are not computed.
#include <sys/resource.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "plan/plan.h"
#include "spec/shapes.h"
#include "train/trainer.h"

// OpenBLAS is the CPU backend's BLAS (CMakeLists.txt requires it); asked only to report its
// configuration and thread count.
extern "C" int openblas_get_num_threads(void);
extern "C" char* openblas_get_config(void);

namespace rnntrain {
namespace {

struct Candidate {
  std::string name;  // "configured", "fused", "per-layer"
  FuseMode fuse = FuseMode::Auto;
  std::string plan;  // stage summary: "3 stages: layer, cudnn(2), layer"
  std::vector<double> ms;  // ms/step of each repeat
  double median_ms = 0, seq_per_s = 0, tflops = 0, last_loss = 0;
  double peak_host_mib = 0;
  std::string device;
};

Candidate make_candidate(std::string name, FuseMode fuse, std::string plan) {
  Candidate c;
  c.name = std::move(name);
  c.fuse = fuse;
  c.plan = std::move(plan);
  return c;
}

const char* fuse_name(FuseMode f) { return f == FuseMode::Auto ? "auto" : f == FuseMode::Always ? "always" : "never"; }

std::string plan_summary(const Plan& p) {
  std::string s = fmt::format("{} stage{}:", p.stages.size(), p.stages.size() == 1 ? "" : "s");
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const Stage& st = p.stages[i];
    s += i ? ", " : " ";
    if (st.kind == StageKind::CudnnStack) s += fmt::format("cudnn({})", st.rnn_layers);
    else if (st.kind == StageKind::GenericRnn) s += "generic";
    else s += "layer";
  }
  return s;
}

bool same_stages(const Plan& a, const Plan& b) {
  if (a.stages.size() != b.stages.size()) return false;
  for (size_t i = 0; i < a.stages.size(); ++i)
    if (a.stages[i].kind != b.stages[i].kind || a.stages[i].layers != b.stages[i].layers) return false;
  return true;
}

// Model FLOPs of one training step (../shared/docs/perf-anchors.md): 3 x forward, forward = sum over
// recurrent layers of 2*G*H*(in+H)*B*T, doubled for Bidirectional. Embedding and Dense not counted.
double step_flops(const ModelSpec& m, const std::vector<LayerShape>& shapes, int64_t B, int64_t T) {
  double fwd = 0;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerSpec& l = m.layers[i];
    const bool bidi = l.kind == LayerKind::Bidirectional && l.inner;
    const LayerSpec& cell = bidi ? *l.inner : l;
    if (!is_recurrent(cell.kind)) continue;
    const double in = static_cast<double>(shapes[i].in.back()), H = static_cast<double>(cell.units);
    fwd += 2.0 * gates(cell.kind) * H * (in + H) * B * T * (bidi ? 2 : 1);
  }
  return 3.0 * fwd;
}

// One batch of the model's input shape with targets valid for the loss. x: [B, T, F] features in
// [-1, 1), or [B, T] token ids in [1, input_dim) (never the padding id 0); no lengths (no masking).
Batch synthetic_batch(const Config& cfg, const std::vector<LayerShape>& shapes, int64_t T, Rng& rng) {
  const int64_t B = cfg.train.batch_size;
  const LayerSpec& input = cfg.model.layers[0];
  const LayerSpec* emb = nullptr;
  for (const auto& l : cfg.model.layers)
    if (l.kind == LayerKind::Embedding) { emb = &l; break; }
  Batch b;
  if (emb) {
    b.x = Tensor({B, T});
    for (auto& v : b.x.data) v = static_cast<float>(1 + rng.below(static_cast<uint64_t>(std::max<int64_t>(emb->input_dim - 1, 1))));
  } else {
    Shape xs{B, T};
    for (size_t d = 1; d < input.shape.size(); ++d) xs.push_back(input.shape[d]);
    b.x = Tensor(xs);
    for (auto& v : b.x.data) v = static_cast<float>(rng.uniform(-1.0, 1.0));
  }
  Shape out{B};
  for (int64_t d : shapes.back().out) out.push_back(d < 0 ? T : d);
  const int64_t K = out.back();
  const LossKind loss = cfg.train.loss.kind;
  if (loss == LossKind::SparseCategoricalCrossentropy) {
    out.pop_back();  // labels: [B] or [B, T]
    b.y = Tensor(out);
    for (auto& v : b.y.data) v = static_cast<float>(rng.below(static_cast<uint64_t>(K)));
  } else if (loss == LossKind::CategoricalCrossentropy) {
    b.y = Tensor(out);  // one-hot rows
    for (int64_t r = 0; r < b.y.numel() / K; ++r) b.y[r * K + static_cast<int64_t>(rng.below(static_cast<uint64_t>(K)))] = 1.0f;
  } else if (loss == LossKind::BinaryCrossentropy) {
    b.y = Tensor(out);
    for (auto& v : b.y.data) v = rng.uniform() < 0.5 ? 0.0f : 1.0f;
  } else {
    b.y = Tensor(out);
    for (auto& v : b.y.data) v = static_cast<float>(rng.uniform(-1.0, 1.0));
  }
  return b;
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: KiB
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void run_candidate(Candidate& c, const Config& base, const Batch& batch, const BenchArgs& a, double flops) {
  Config cfg = base;
  cfg.plan.fuse = c.fuse;
  Rng rng(cfg.train.seed);
  auto engine = make_engine(cfg, initial_params(cfg, ""), rng);
  c.device = engine->device_name();
  const double lr = cfg.train.optimizer.learning_rate;
  LossValue l;
  for (int64_t i = 0; i < a.warmup; ++i) l = engine->train_step(batch, lr, {});
  for (int64_t r = 0; r < a.repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < a.steps; ++i) l = engine->train_step(batch, lr, {});
    const std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
    c.ms.push_back(dt.count() / static_cast<double>(a.steps));
    log_debug("bench candidate={} repeat={} ms_per_step={:.4f} loss={:.6g}", c.name, r, c.ms.back(), l.mean());
  }
  c.last_loss = l.mean();
  c.median_ms = median(c.ms);
  c.seq_per_s = static_cast<double>(batch.size()) * 1000.0 / c.median_ms;
  c.tflops = flops / (c.median_ms / 1000.0) / 1e12;
  c.peak_host_mib = peak_rss_mib();
}

}  // namespace

int cmd_bench(const BenchArgs& a) {
  if (a.steps < 1) throw UsageError(fmt::format("--steps {}: must be at least 1", a.steps));
  if (a.repeats < 3) throw UsageError(fmt::format("--repeats {}: must be at least 3 (the median of repeats is reported)", a.repeats));
  if (a.warmup < 0) throw UsageError(fmt::format("--warmup {}: must be 0 or more", a.warmup));
  Config cfg = load_config_args(a.args);
  const auto shapes = infer_shapes(cfg.model);
  const LayerSpec& input = cfg.model.layers[0];
  int64_t T = input.shape.empty() ? -1 : input.shape[0];
  if (a.timesteps > 0) {
    if (T > 0 && T != a.timesteps)
      throw UsageError(fmt::format("--timesteps {}: the Input layer ({}) fixes timesteps at {}", a.timesteps, input.loc.str(), T));
    T = a.timesteps;
  }
  if (T <= 0)
    throw UsageError(fmt::format("{}: the Input shape has no fixed timesteps (None); pass --timesteps N", input.loc.str()));
  const int64_t B = cfg.train.batch_size;
  Rng data_rng(cfg.train.seed + 1);
  const Batch batch = synthetic_batch(cfg, shapes, T, data_rng);
  const double flops = step_flops(cfg.model, shapes, B, T);

  // Candidates: on the GPU fused (plan.fuse auto) versus per-layer (never) when their plans differ;
  // on the CPU the stages are not used, so the configured model is the only candidate.
  const bool gpu = cfg.device != Device::Cpu && gpu_unavailable_reason().empty();
  std::vector<Candidate> cands;
  if (gpu) {
    const Plan fused = make_plan(cfg.model, FuseMode::Auto), split = make_plan(cfg.model, FuseMode::Never);
    cands.push_back(make_candidate("fused", FuseMode::Auto, plan_summary(fused)));
    if (!same_stages(fused, split)) cands.push_back(make_candidate("per-layer", FuseMode::Never, plan_summary(split)));
  } else {
    cands.push_back(make_candidate("configured", cfg.plan.fuse, plan_summary(make_plan(cfg.model, cfg.plan.fuse))));
  }
  for (auto& c : cands) {
    log_info("bench candidate={} plan.fuse={} steps={} repeats={} warmup={}", c.name, fuse_name(c.fuse), a.steps, a.repeats, a.warmup);
    run_candidate(c, cfg, batch, a, flops);
  }
  const auto win = std::min_element(cands.begin(), cands.end(), [](const Candidate& x, const Candidate& y) { return x.median_ms < y.median_ms; });

  const int threads = openblas_get_num_threads();
  std::printf("bench %s: device %s, batch %lld, timesteps %lld, %lld steps x %lld repeats after %lld warm-up steps\n",
              cfg.path.c_str(), cands.front().device.c_str(), (long long)B, (long long)T, (long long)a.steps,
              (long long)a.repeats, (long long)a.warmup);
  std::printf("model FLOPs per step %.4g (3 x forward of the recurrent layers); BLAS threads %d\n", flops, threads);
  std::printf("%-11s %-38s %10s %9s %9s %11s %9s %10s %12s\n", "candidate", "plan", "ms/step", "min", "max", "seq/s",
              "TFLOP/s", "host MiB", "device MiB");
  for (const auto& c : cands)
    std::printf("%-11s %-38s %10.3f %9.3f %9.3f %11.1f %9.4f %10.1f %12s\n", c.name.c_str(), c.plan.c_str(), c.median_ms,
                *std::min_element(c.ms.begin(), c.ms.end()), *std::max_element(c.ms.begin(), c.ms.end()), c.seq_per_s,
                c.tflops, c.peak_host_mib, "n/a");
  std::printf("winner: %s (%.3f ms/step)\n", win->name.c_str(), win->median_ms);

  if (!a.json_file.empty()) {
    nlohmann::ordered_json j;
    j["date"] = utc_now();
    j["config"] = cfg.path;
    j["overrides"] = nlohmann::ordered_json::array();
    for (const auto& s : a.args)
      if (s.find('=') != std::string::npos) j["overrides"].push_back(s);
    j["hardware"] = {{"device", cands.front().device}, {"cpu", cpu_model()},
                     {"cores", std::thread::hardware_concurrency()}, {"blas_threads", threads}};
    j["versions"] = {{"rnntrain", RNNTRAIN_VERSION}, {"compiler", std::string("gcc-compatible ") + __VERSION__}, {"blas", openblas_get_config()}};
    j["batch_size"] = B;
    j["timesteps"] = T;
    j["steps"] = a.steps;
    j["repeats"] = a.repeats;
    j["warmup"] = a.warmup;
    j["flops_per_step"] = flops;
    j["candidates"] = nlohmann::ordered_json::array();
    for (const auto& c : cands) {
      nlohmann::ordered_json cj;
      cj["name"] = c.name;
      cj["fuse"] = fuse_name(c.fuse);
      cj["plan"] = c.plan;
      cj["ms_per_step"] = c.median_ms;
      cj["ms_per_step_repeats"] = c.ms;
      cj["sequences_per_s"] = c.seq_per_s;
      cj["tflops"] = c.tflops;
      cj["peak_host_rss_mib"] = c.peak_host_mib;
      cj["peak_device_mib"] = nullptr;  // the Engine interface does not report device memory yet
      cj["last_loss"] = c.last_loss;
      j["candidates"].push_back(cj);
    }
    j["winner"] = win->name;
    std::ofstream out(a.json_file);
    if (!out) throw RuntimeError(fmt::format("--json {}: cannot write the file", a.json_file));
    out << j.dump(2) << "\n";
    if (!out) throw RuntimeError(fmt::format("--json {}: write failed", a.json_file));
    log_info("wrote {}", a.json_file);
  }
  return 0;
}

}  // namespace rnntrain
