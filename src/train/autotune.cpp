// Plan candidates, their timing on one synthetic batch, and plan.autotune with its per-GPU cache.
#include "train/autotune.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "core/error.h"
#include "core/files.h"
#include "core/log.h"
#include "dist/comm.h"
#include "io/checkpoint.h"
#include "plan/plan.h"
#include "spec/compare.h"
#include "spec/parse.h"
#include "spec/shapes.h"
#include "backend/engine.h"

namespace fs = std::filesystem;

namespace rnntrain {

std::string PlanChoice::name() const {
  return fmt::format("{}/{}/{}", fuse == FuseMode::Never ? "per-layer" : "fused", precision_name(precision),
                     rnn_algo_name(algo));
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

bool has_stack(const Plan& p) {
  for (const Stage& s : p.stages)
    if (s.kind == StageKind::CudnnStack) return true;
  return false;
}

// Whether any step mask can reach the stacks: Masking, Embedding(mask_zero) or a lengths dataset.
bool may_mask(const Config& cfg) {
  for (const LayerSpec& l : cfg.model.layers)
    if (l.kind == LayerKind::Masking || (l.kind == LayerKind::Embedding && l.mask_zero)) return true;
  for (const std::optional<DataSource>* s : {&cfg.data.train, &cfg.data.validation, &cfg.data.test})
    if (*s && !(*s)->lengths.empty()) return true;
  return false;
}

bool is_half(Precision p) { return p == Precision::Fp16 || p == Precision::Bf16; }

}  // namespace

std::vector<PlanChoice> plan_candidates(const Config& cfg, const CandidateFilter& filter) {
  // Stacks as the own kernels may have them (GRUs with reset_after: false too): the CUDA engine plans
  // each candidate with its own rule (plan/gpu_plan.h), so a wavefront candidate may run stacks that
  // cuDNN's candidates run as generic layers.
  const Plan fused = make_plan(cfg.model, FuseMode::Auto, own_ineligible);
  const Plan split = make_plan(cfg.model, FuseMode::Never, own_ineligible);
  if (!has_stack(fused)) return {};
  const bool cudnn = has_stack(make_plan(cfg.model, FuseMode::Auto));  // else the persistent kernels add nothing
  std::vector<FuseMode> fuses;  // plan.fuse always / never pins one of them
  if (cfg.plan.fuse != FuseMode::Never) fuses.push_back(FuseMode::Auto);
  if (cfg.plan.fuse != FuseMode::Always && (fuses.empty() || !same_stages(fused, split))) fuses.push_back(FuseMode::Never);
  std::vector<Precision> precs = filter.precisions;
  if (precs.empty()) precs = {Precision::Fp32, Precision::Tf32, Precision::Fp16, Precision::Bf16};
  const bool persist_ok = !may_mask(cfg);
  std::vector<PlanChoice> out;
  for (FuseMode f : fuses)
    for (Precision p : precs) {
      std::vector<RnnAlgo> algos = filter.algos;
      if (algos.empty()) {
        algos = {RnnAlgo::Standard};
        // persist_static is 3-15x slower in fp32 (perf-anchors.md), the wavefront kernels are fp16/bf16
        // only, and persist_dynamic is 10-40x slower than standard at batch 64 and above: asked for only.
        if (is_half(p)) algos.push_back(RnnAlgo::PersistStatic), algos.push_back(RnnAlgo::Wavefront);
      }
      for (RnnAlgo a : algos) {
        const bool persistent = a == RnnAlgo::PersistStatic || a == RnnAlgo::PersistDynamic;
        if ((!persistent || (persist_ok && cudnn)) && (a != RnnAlgo::Wavefront || is_half(p))) out.push_back({f, p, a});
      }
    }
  return out;
}

Batch synthetic_batch(const Config& cfg, int64_t T, int64_t min_length, Rng& rng) {
  const std::vector<LayerShape> shapes = infer_shapes(cfg.model);
  const int64_t B = cfg.train.batch_size;
  const LayerSpec& input = cfg.model.layers[0];
  const LayerSpec* emb = nullptr;
  for (const auto& l : cfg.model.layers)
    if (l.kind == LayerKind::Embedding) {
      emb = &l;
      break;
    }
  Batch b;
  if (emb) {
    b.x = Tensor({B, T});
    const uint64_t ids = static_cast<uint64_t>(std::max<int64_t>(emb->input_dim - 1, 1));
    for (auto& v : b.x.data) v = static_cast<float>(1 + rng.below(ids));
  } else {
    Shape xs{B, T};
    for (size_t d = 1; d < input.shape.size(); ++d) xs.push_back(input.shape[d]);
    b.x = Tensor(xs);
    for (auto& v : b.x.data) v = static_cast<float>(rng.uniform(-1.0, 1.0));
  }
  if (min_length > 0) {
    const int64_t lo = std::min(min_length, T);
    for (int64_t i = 0; i < B; ++i)
      b.lengths.push_back(static_cast<int32_t>(lo + static_cast<int64_t>(rng.below(static_cast<uint64_t>(T - lo + 1)))));
  }
  Shape out{B};
  for (int64_t d : shapes.back().out) out.push_back(d < 0 ? T : d);
  const int64_t K = out.back();
  switch (loss_info(cfg.train.loss.kind).targets) {
    case Targets::Labels:
      out.pop_back();  // labels: [B] or [B, T]
      b.y = Tensor(out);
      for (auto& v : b.y.data) v = static_cast<float>(rng.below(static_cast<uint64_t>(K)));
      break;
    case Targets::Distributions:
      b.y = Tensor(out);  // one-hot rows
      for (int64_t r = 0; r < b.y.numel() / K; ++r) b.y[r * K + static_cast<int64_t>(rng.below(static_cast<uint64_t>(K)))] = 1.0f;
      break;
    case Targets::Probabilities:
      b.y = Tensor(out);
      for (auto& v : b.y.data) v = rng.uniform() < 0.5 ? 0.0f : 1.0f;
      break;
    case Targets::Values:
      b.y = Tensor(out);
      for (auto& v : b.y.data) v = static_cast<float>(rng.uniform(-1.0, 1.0));
  }
  return b;
}

Timing time_plan(const Config& base, const PlanChoice& choice, const Params& init, const std::vector<Batch>& batches,
                 int64_t warmup, int64_t repeats, int64_t steps, Comm* ranks, Workload workload) {
  Config cfg = base;
  cfg.plan.fuse = choice.fuse, cfg.plan.precision = choice.precision, cfg.plan.algo = choice.algo;
  cfg.plan.autotune = false;
  Timing t;
  try {
    reset_device_peak();
    Rng rng(cfg.train.seed);
    auto engine = make_engine(cfg, init, rng, ranks);
    t.device = engine->device_name();
    const double lr = cfg.train.optimizer.learning_rate;
    LossValue l;
    size_t next = 0;
    // As training without metrics runs: steps enqueued back to back, losses collected as they finish;
    // or as eval runs: each step's loss read back before the next.
    auto run = [&](int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        if (workload == Workload::Inference) {
          l = engine->eval_step(batches[next], {});
          next = (next + 1) % batches.size();
          continue;
        }
        engine->enqueue_train_step(batches[next], lr, {});
        next = (next + 1) % batches.size();
        for (const LossValue& v : engine->collect_losses(false)) l = v;
      }
      for (const LossValue& v : engine->collect_losses(true)) l = v;
    };
    run(warmup);
    const int64_t graphs0 = gpu_graph_steps(), captures0 = gpu_graph_captures();
    for (int64_t r = 0; r < repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      run(steps);
      const std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
      t.ms.push_back(dt.count() / static_cast<double>(steps));
      log_debug("candidate {} repeat {}: {:.4f} ms/step, loss {:.6g}", choice.name(), r, t.ms.back(), l.mean());
    }
    t.last_loss = l.mean();
    t.median_ms = median(t.ms);
    t.graph_share = static_cast<double>(gpu_graph_steps() - graphs0) / static_cast<double>(std::max<int64_t>(1, repeats * steps));
    t.graph_captures = gpu_graph_captures() - captures0;
    if (engine->traits().device_memory) t.peak_device_mib = device_peak_mib();
  } catch (const std::exception& e) {  // e.g. cuDNN's NOT_SUPPORTED, out of memory: this candidate only
    // ... unless the ranks time it together: a failed rank would leave the others in a collective.
    if (ranks && ranks->distributed()) throw;
    t = Timing();
    t.error = e.what();
    log_info("candidate {} failed: {}", choice.name(), t.error);
  }
  return t;
}

namespace {

std::string cache_path(const Config& cfg) {
  if (!cfg.plan.cache.empty()) return cfg.plan.cache;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return (fs::path(x) / "rnntrain" / "autotune.json").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".cache" / "rnntrain" / "autotune.json").string();
  return "";
}

// What the choice depends on (spec/compare.h).
std::string cache_key(const Config& cfg, int64_t T, Workload workload) {
  const bool inference = workload == Workload::Inference;
  return AutotuneKey{cfg.model, cfg.train.optimizer, cfg.train.loss, cfg.plan, cfg.train.batch_size, T,
                     gpu_description(), inference}
      .hash();
}

nlohmann::json read_cache(const std::string& path, bool& usable) {
  usable = true;
  if (path.empty() || !fs::exists(path)) return nlohmann::json::object();
  if (const std::string kind = special_file(path); !kind.empty()) {
    log_warn("{}: is {}, not an autotune cache; ignoring it and leaving it untouched", path, kind);
    usable = false;
    return nlohmann::json::object();
  }
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    log_warn("{}: not an rnntrain autotune cache (unreadable JSON); ignoring it and leaving it untouched. Delete it "
             "to let rnntrain write a new one",
             path);
    usable = false;
    return nlohmann::json::object();
  }
  return j;
}

}  // namespace

Config resolve_plan(const Config& cfg, const Params& init, int64_t T, Workload workload) {
  Config out = cfg;
  const bool gpu = trains_on_gpu(cfg);
  if (!gpu) {  // the CPU: FP32, or bf16 on its oneDNN stacks or the own engine (backend/cpu/recurrent.h)
    const bool bf16 = cfg.plan.precision == Precision::Bf16 && cfg.plan.cpu != CpuRnn::Reference;
    if (cfg.plan.precision != Precision::Fp32 && cfg.plan.precision != Precision::Auto && !bf16)
      log_warn("plan.precision: {} applies to the GPU's cuDNN stacks (the CPU takes bf16 on plan.cpu onednn or own); "
               "the CPU computes in FP32", precision_name(cfg.plan.precision));
    out.plan.precision = bf16 ? Precision::Bf16 : Precision::Fp32, out.plan.algo = RnnAlgo::Standard;
    return out;
  }
  if (!cfg.plan.autotune) return out;

  CandidateFilter f;
  if (cfg.plan.precision != Precision::Auto) f.precisions = {cfg.plan.precision};
  if (cfg.plan.algo != RnnAlgo::Auto) f.algos = {cfg.plan.algo};
  std::vector<PlanChoice> cands = plan_candidates(cfg, f);
  auto apply = [&](const PlanChoice& c) {
    if (cfg.plan.fuse == FuseMode::Auto) out.plan.fuse = c.fuse;
    out.plan.precision = c.precision, out.plan.algo = c.algo;
  };
  if (cands.empty()) {  // no cuDNN stack: nothing to choose
    apply({cfg.plan.fuse, cfg.plan.precision == Precision::Auto ? Precision::Fp32 : cfg.plan.precision,
           RnnAlgo::Standard});
    return out;
  }

  const bool infer = workload == Workload::Inference;
  const char* what = infer ? "evaluation" : "training";
  const std::string path = cache_path(cfg), key = cache_key(cfg, T, workload);
  bool usable = true;
  nlohmann::json cache = read_cache(path, usable);
  if (cache.contains(key)) {
    const nlohmann::json& e = cache[key];
    const bool ok = e.is_object() && e.contains("choice") && e["choice"].is_string();
    for (const PlanChoice& c : cands)
      if (ok && e["choice"].get<std::string>() == c.name()) {
        log_info("autotune: {} for {} (cached in {})", c.name(), what, path);
        apply(c);
        return out;
      }
    log_warn("{}: the cached entry for this model is not one of its candidate plans; measuring again", path);
  }

  log_info("autotune: timing {} candidate plans' {} steps on a synthetic batch of {} x {} steps", cands.size(), what,
           cfg.train.batch_size, T);
  Rng data_rng(cfg.train.seed + 1);
  const Batch batch = synthetic_batch(cfg, T, 0, data_rng);
  const PlanChoice* best = nullptr;
  double best_ms = 0;
  nlohmann::json measured = nlohmann::json::object();
  for (const PlanChoice& c : cands) {
    const Timing t = time_plan(cfg, c, init, {batch}, 2, 3, 5, nullptr, workload);
    measured[c.name()] = t.error.empty() ? nlohmann::json(t.median_ms) : nlohmann::json(t.error);
    if (!t.error.empty()) continue;
    log_info("autotune: {} {:.3f} ms/step", c.name(), t.median_ms);
    if (!best || t.median_ms < best_ms) best = &c, best_ms = t.median_ms;
  }
  if (!best)
    throw RuntimeError("autotune: every candidate plan failed (see the messages above); set plan.autotune: false "
                       "and plan.precision: fp32, or device: cpu");
  log_info("autotune: chose {} for {} ({:.3f} ms/step)", best->name(), what, best_ms);
  apply(*best);

  if (path.empty() || !usable) return out;
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  // Re-read just before writing (another run may have added entries meanwhile), then write through a
  // temporary file of this process's own and rename it into place.
  cache = read_cache(path, usable);
  if (!usable) return out;
  cache[key] = {{"choice", best->name()}, {"ms_per_step", best_ms}, {"date", date}, {"gpu", gpu_description()},
                {"batch_size", cfg.train.batch_size}, {"timesteps", T}, {"workload", infer ? "inference" : "training"}, {"measured", measured}};
  const std::string tmp = fmt::format("{}.{}.tmp", path, static_cast<long>(::getpid()));
  try {
    if (const fs::path dir = fs::path(path).parent_path(); !dir.empty()) fs::create_directories(dir);
    {
      std::ofstream o(tmp);
      o << cache.dump(2) << "\n";
      o.close();
      if (!o) throw RuntimeError(fmt::format("cannot write {}", tmp));
    }
    rename_into_place(tmp, path);
  } catch (const std::exception& e) {
    std::remove(tmp.c_str());
    log_warn("autotune: could not save the choice in {} ({}); it will be measured again next time", path, e.what());
  }
  return out;
}

}  // namespace rnntrain
