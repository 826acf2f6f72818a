// `rnntrain bench`: times complete training steps (forward, loss, backward, optimizer) of a config's
// model, or with --inference evaluation steps (forward and loss), on one synthetic batch (or, with
// --stream, a stream of batches with fresh lengths), for each candidate plan, and prints a table and
// the winner (and JSON). Not a data pipeline benchmark: the batches are made before timing; metrics
// are not computed.
#include <sys/resource.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "core/files.h"
#include "core/log.h"
#include "dist/comm.h"
#include "io/checkpoint.h"
#include "plan/plan.h"
#include "spec/sections.h"
#include "spec/shapes.h"
#include "train/autotune.h"
#include "train/batching.h"
#include "train/data_parallel.h"
#include "backend/engine.h"
#include "train/trainer.h"

namespace rnntrain {
namespace {

struct Candidate {
  PlanChoice choice;
  CpuRnn cpu = CpuRnn::Onednn;  // the CPU: plan.cpu
  std::string name;  // "configured" on the CPU, else choice.name()
  std::string plan;  // stage summary: "3 stages: layer, cudnn(2), layer"
  Timing t;
  double seq_per_s = 0, tflops = 0, peak_host_mib = 0;
  // Under mpirun: ms/step of the same steps with the ranks' all-reduce (0: not timed), and without it
  // in the runs alternating with those.
  double dp_ms = 0, alone_ms = 0;
};

// As `rnntrain plan` counts them: the Input layer's stage (always layer 0's) left out.
std::string plan_summary(const Plan& p) {
  std::vector<const Stage*> stages;
  for (const Stage& st : p.stages)
    if (st.layers[0] != 0) stages.push_back(&st);
  std::string s = fmt::format("{} stage{}:", stages.size(), stages.size() == 1 ? "" : "s");
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage& st = *stages[i];
    s += i ? ", " : " ";
    if (st.kind == StageKind::CudnnStack) s += fmt::format("cudnn({})", st.rnn_layers);
    else if (st.kind == StageKind::GenericRnn) s += "generic";
    else s += "layer";
  }
  return s;
}

// "fp16,bf16" -> the enum values among `values`, spelled as configs spell them (name), with an error
// naming the option and the bad item.
template <typename E>
std::vector<E> parse_list(const std::string& text, const char* option, std::span<const E> values,
                          const char* (*name)(E)) {
  std::vector<E> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    const auto it = std::find_if(values.begin(), values.end(), [&](E v) { return item == name(v); });
    if (it == values.end()) {
      std::string all;
      for (E v : values) all += (all.empty() ? "" : ", ") + std::string(name(v));
      throw UsageError(fmt::format("{} {}: '{}' is not one of {}", option, text, item, all));
    }
    out.push_back(*it);
  }
  return out;
}

// What a candidate can be timed with (auto is a choice among these, not a candidate).
constexpr Precision kPrecisions[] = {Precision::Fp32, Precision::Tf32, Precision::Fp16, Precision::Bf16};
constexpr RnnAlgo kAlgos[] = {RnnAlgo::Standard, RnnAlgo::PersistStatic, RnnAlgo::PersistDynamic, RnnAlgo::Wavefront};
constexpr CpuRnn kCpuPaths[] = {CpuRnn::Onednn, CpuRnn::Reference, CpuRnn::Own, CpuRnn::Auto};
const char* cpu_path_name(CpuRnn c) { return spec::enum_name(spec::cpu_rnns(), c); }

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
    fwd += 2.0 * cell_traits(cell.kind).gates * H * (in + H) * B * T * (bidi ? 2 : 1);
  }
  return 3.0 * fwd;
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: KiB
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

// Each of n sequences' length: uniform in [min_length, T], or log-normal around `median` (sigma of
// its log) clamped to [max(min_length, 1), T].
std::vector<int32_t> draw_lengths(int64_t n, int64_t T, int64_t min_length, double median, double sigma, Rng& rng) {
  std::vector<int32_t> out;
  const int64_t lo = std::clamp<int64_t>(min_length, 1, T);
  for (int64_t i = 0; i < n; ++i) {
    int64_t len = lo + static_cast<int64_t>(rng.below(static_cast<uint64_t>(T - lo + 1)));
    if (median > 0) {  // Box-Muller
      const double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
      len = std::clamp<int64_t>(std::llround(median * std::exp(sigma * z)), lo, T);
    }
    out.push_back(static_cast<int32_t>(len));
  }
  return out;
}

// b with these lengths and zeros (token id 0, or features 0) at its padded steps.
void set_lengths(Batch& b, std::vector<int32_t> lengths) {
  const int64_t B = b.x.dim(0), T = b.x.dim(1), F = b.x.numel() / (B * T);
  for (int64_t i = 0; i < B; ++i)
    std::fill(b.x.data.begin() + (i * T + lengths[i]) * F, b.x.data.begin() + (i + 1) * T * F, 0.0f);
  b.lengths = std::move(lengths);
}

// One `rnntrain bench`: what it times (the workload, its batches, the candidates) and what it measured.
struct Bench {
  Bench(const BenchArgs& args, Config config) : a(args), cfg(std::move(config)) {}
  const BenchArgs& a;
  Config cfg;
  std::vector<LayerShape> shapes;
  int64_t B = 0, T = 0, warmup = 0;
  double median = 0, sigma = 0;  // --lognormal
  std::vector<Batch> batches;    // the batches the steps take in turn
  double padding = 0.0;          // of a stream
  Workload workload = Workload::Training;
  double flops = 0.0;
  std::vector<Candidate> cands;
  const Candidate* win = nullptr;
  std::string device;
};

// The workload the command line asks for, checked: the config, the timesteps, the lengths.
Bench bench_of(const BenchArgs& a) {
  if (a.steps < 1) throw UsageError(fmt::format("--steps {}: must be at least 1", a.steps));
  if (a.repeats < 3) throw UsageError(fmt::format("--repeats {}: must be at least 3 (the median of repeats is reported)", a.repeats));
  if (a.warmup < 0) throw UsageError(fmt::format("--warmup {}: must be 0 or more", a.warmup));
  if (a.min_length < 0) throw UsageError(fmt::format("--min-length {}: must be 0 or more", a.min_length));
  Bench b(a, DataParallel(*a.world).for_engine(load_config_args(a.args)));
  b.shapes = infer_shapes(b.cfg.model);
  const LayerSpec& input = b.cfg.model.layers[0];
  b.T = input.shape.empty() ? -1 : input.shape[0];
  if (a.timesteps > 0) {
    if (b.T > 0 && b.T != a.timesteps)
      throw UsageError(fmt::format("--timesteps {}: the Input layer ({}) fixes timesteps at {}", a.timesteps, input.loc.str(), b.T));
    b.T = a.timesteps;
  }
  if (b.T <= 0)
    throw UsageError(fmt::format("{}: the Input shape has no fixed timesteps (None); pass --timesteps N", input.loc.str()));
  if (a.min_length > b.T) throw UsageError(fmt::format("--min-length {}: longer than the {} timesteps", a.min_length, b.T));
  if (!a.lognormal.empty()) {
    char comma = 0;
    std::istringstream in(a.lognormal);
    if (!(in >> b.median >> comma >> b.sigma) || comma != ',' || !(b.median > 0) || !(b.sigma > 0) || !in.eof())
      throw UsageError(fmt::format("--lognormal {}: give MEDIAN,SIGMA, two positive numbers (e.g. 60,0.8)", a.lognormal));
  }
  if (a.inference && a.world->launched())
    throw UsageError("--inference times one GPU's evaluation steps: run it without mpirun");
  if (a.stream && a.min_length <= 0 && b.median <= 0)
    throw UsageError("--stream draws fresh sequence lengths for every batch: give --min-length or --lognormal");
  b.B = b.cfg.train.batch_size;
  b.workload = a.inference ? Workload::Inference : Workload::Training;
  b.flops = step_flops(b.cfg.model, b.shapes, b.B, b.T) / (a.inference ? 3.0 : 1.0);
  return b;
}

// The batches the steps take in turn: one, or a stream batched from a pool as an epoch would be.
void make_batches(Bench& b) {
  const BenchArgs& a = b.a;
  Rng data_rng(b.cfg.train.seed + 1);
  if (!a.stream) {
    b.batches.push_back(synthetic_batch(b.cfg, b.T, b.median > 0 ? 0 : a.min_length, data_rng));
    if (b.median > 0) set_lengths(b.batches[0], draw_lengths(b.B, b.T, a.min_length, b.median, b.sigma, data_rng));
  } else {
    constexpr int64_t kPool = 32;  // batches' worth of sequences
    Config pool_cfg = b.cfg;
    pool_cfg.train.batch_size = kPool * b.B;
    Batch pool = synthetic_batch(pool_cfg, b.T, 0, data_rng);
    set_lengths(pool, draw_lengths(kPool * b.B, b.T, a.min_length, b.median, b.sigma, data_rng));
    Dataset d;
    d.x = std::move(pool.x), d.y = std::move(pool.y), d.lengths = std::move(pool.lengths), d.source = "bench stream";
    const bool trim = b.cfg.train.bucketing && b.cfg.model.layers[0].shape[0] < 0;
    const std::vector<EpochBatch> plan = plan_epoch(b.cfg.train, d.size(), d.lengths, trim, data_rng);
    for (const EpochBatch& e : plan) b.batches.push_back(gather_batch(d, e, b.shapes.back().out.size() >= 2));
    b.padding = padding_share(plan, d.lengths, b.T);
  }
  // A stream warms up over three passes, as the start of a long run would: every batch shape has run
  // uncaptured and been captured as a CUDA graph (plan.graphs) before the timed steps.
  b.warmup = a.stream ? std::max<int64_t>(a.warmup, 3 * static_cast<int64_t>(b.batches.size())) : a.warmup;
}

// On the GPU: every candidate plan (fused/per-layer x precision x algorithm). On the CPU the
// planner's stages do not change what runs, so the configured model is the only candidate.
void make_candidates(Bench& b) {
  const BenchArgs& a = b.a;
  CandidateFilter filter;
  filter.precisions = parse_list<Precision>(a.precisions, "--precision", kPrecisions, precision_name);
  filter.algos = parse_list<RnnAlgo>(a.algos, "--algo", kAlgos, rnn_algo_name);
  const bool gpu = trains_on_gpu(b.cfg);
  for (const PlanChoice& c : gpu ? plan_candidates(b.cfg, filter) : std::vector<PlanChoice>{}) {
    // Padded batches run cuDNN's persistent stacks with the standard algorithm: nothing new to time.
    const bool padded = (a.min_length > 0 && a.min_length < b.T) || b.median > 0;
    if ((c.algo == RnnAlgo::PersistStatic || c.algo == RnnAlgo::PersistDynamic) && padded) {
      if (!a.algos.empty())
        log_warn("{}: skipped; with --min-length the batch is padded, and padded batches run on standard", c.name());
      continue;
    }
    const bool own = c.algo == RnnAlgo::Wavefront;  // may run GRUs with reset_after: false as stacks
    b.cands.push_back({c, b.cfg.plan.cpu, c.name(),
                       plan_summary(make_plan(b.cfg.model, c.fuse, own ? own_ineligible : cudnn_ineligible)), {}, 0, 0, 0});
  }
  if (b.cands.empty()) {  // the CPU, or a GPU model without a cuDNN stack
    PlanChoice c{b.cfg.plan.fuse, gpu && b.cfg.plan.precision != Precision::Auto ? b.cfg.plan.precision : Precision::Fp32,
                 RnnAlgo::Standard};
    // The CPU's oneDNN stacks take bf16 too (backend/cpu/onednn_stack.h): timed beside FP32 when asked for.
    const bool bf16 = b.cfg.plan.precision == Precision::Bf16 ||
                      std::find(filter.precisions.begin(), filter.precisions.end(), Precision::Bf16) != filter.precisions.end();
    const std::string plan = plan_summary(make_plan(b.cfg.model, c.fuse));
    std::vector<CpuRnn> paths = parse_list<CpuRnn>(a.cpu_paths, "--cpu", kCpuPaths, cpu_path_name);
    if (gpu || paths.empty()) paths = {b.cfg.plan.cpu};
    // --precision bf16 alone times bf16 alone (fp32 only where asked for or configured).
    const bool only_bf16 = filter.precisions.size() == 1 && filter.precisions[0] == Precision::Bf16;
    for (CpuRnn path : paths) {
      // Named cpu/PRECISION as before when only the configured path runs, cpu/PATH/PRECISION otherwise.
      const std::string prefix = a.cpu_paths.empty() || gpu ? "cpu" : fmt::format("cpu/{}", cpu_path_name(path));
      if (!gpu && bf16)
        for (Precision p : {Precision::Fp32, Precision::Bf16}) {
          if (only_bf16 && p == Precision::Fp32) continue;
          c.precision = p;
          b.cands.push_back({c, path, fmt::format("{}/{}", prefix, precision_name(p)), plan, {}, 0, 0, 0});
        }
      else
        b.cands.push_back({c, path, a.cpu_paths.empty() || gpu ? "configured" : prefix, plan, {}, 0, 0, 0});
    }
  }
}

// Times every candidate. Under mpirun each is also timed as a data-parallel step whose gradients are
// all-reduced across the ranks (each rank a batch of B), on every rank at once, in three runs
// alternating with runs alone so that the GPU's clocks drift on both; the difference of the medians is
// the all-reduce's share of the step.
void time_candidates(Bench& b) {
  const BenchArgs& a = b.a;
  Comm& comm = *a.world;
  const Params init = initial_params(b.cfg, "");
  auto timed = [&](const Candidate& c, Comm* ranks, Workload w) {
    Config cfg = b.cfg;
    cfg.plan.cpu = c.cpu;
    return time_plan(cfg, c.choice, init, b.batches, b.warmup, a.repeats, a.steps, ranks, w);
  };
  for (auto& c : b.cands) {
    log_info("bench candidate={} steps={} repeats={} warmup={}", c.name, a.steps, a.repeats, b.warmup);
    c.t = timed(c, nullptr, b.workload);
    if (comm.launched() && comm.max(!c.t.error.empty()) == 0) {
      std::vector<double> alone{c.t.median_ms}, dp;
      for (int r = 0; r < 3; ++r) {
        const Timing d = timed(c, &comm, Workload::Training);
        if (comm.max(!d.error.empty())) break;
        dp.push_back(d.median_ms);
        if (r < 2) alone.push_back(timed(c, nullptr, Workload::Training).median_ms);
      }
      if (dp.size() == 3) c.dp_ms = rnntrain::median(dp), c.alone_ms = rnntrain::median(alone);
    }
    if (!c.t.error.empty()) continue;
    c.seq_per_s = static_cast<double>(b.B) * 1000.0 / c.t.median_ms;
    c.tflops = b.flops / (c.t.median_ms / 1000.0) / 1e12;
    c.peak_host_mib = peak_rss_mib();
  }
  for (const auto& c : b.cands)
    if (c.t.error.empty() && (!b.win || c.t.median_ms < b.win->t.median_ms)) b.win = &c;
  for (const auto& c : b.cands)
    if (!c.t.device.empty()) b.device = c.t.device;
}

void print_report(const Bench& b) {
  const BenchArgs& a = b.a;
  const std::string lengths = b.median > 0 ? fmt::format(" (lengths log-normal, median {}, sigma {}, in {}..{})",
                                                         b.median, b.sigma, std::max<int64_t>(a.min_length, 1), b.T)
                              : a.min_length > 0 ? fmt::format(" (lengths {}..{})", a.min_length, b.T)
                                                 : std::string();
  std::printf("bench %s: device %s, batch %lld, timesteps %lld%s, %lld %s steps x %lld repeats after %lld warm-up steps\n",
              b.cfg.path.c_str(), b.device.c_str(), (long long)b.B, (long long)b.T, lengths.c_str(), (long long)a.steps,
              a.inference ? "evaluation" : "training", (long long)a.repeats, (long long)b.warmup);
  if (a.stream)
    std::printf("stream: %zu batches in turn, %s, padding share %.3f\n", b.batches.size(),
                b.cfg.train.bucketing ? "bucketed by length (train.bucketing)" : "not bucketed", b.padding);
  const char* spin = std::getenv("GOMP_SPINCOUNT");  // blas_env.h: what OpenMP's threads spin, set at start
  std::printf("model FLOPs per step %.4g (%s of the recurrent layers); BLAS threads %d; GOMP_SPINCOUNT %s\n", b.flops,
              a.inference ? "the forward" : "3 x forward", blas_threads(), spin ? spin : "unset");
  std::printf("%-30s %-30s %10s %9s %9s %10s %8s %9s %11s %7s %9s\n", "candidate", "plan", "ms/step", "min", "max",
              "seq/s", "TFLOP/s", "host MiB", "device MiB", "graphs", "captures");
  for (const auto& c : b.cands) {
    if (!c.t.error.empty()) {
      std::printf("%-30s %-30s failed: %s\n", c.name.c_str(), c.plan.c_str(), c.t.error.c_str());
      continue;
    }
    const std::string dev = c.t.peak_device_mib < 0 ? "n/a" : fmt::format("{:.1f}", c.t.peak_device_mib);
    std::printf("%-30s %-30s %10.3f %9.3f %9.3f %10.1f %8.3f %9.1f %11s %6.0f%% %9lld\n", c.name.c_str(),
                c.plan.c_str(), c.t.median_ms, *std::min_element(c.t.ms.begin(), c.t.ms.end()),
                *std::max_element(c.t.ms.begin(), c.t.ms.end()), c.seq_per_s, c.tflops, c.peak_host_mib, dev.c_str(),
                100.0 * c.t.graph_share, static_cast<long long>(c.t.graph_captures));
  }
  for (const auto& c : b.cands)
    if (c.dp_ms > 0)
      std::printf("%-30s data-parallel over %d rank(s): %.3f ms/step with the all-reduce, %.3f without (medians of 3 "
                  "alternating runs): all-reduce %.3f ms, %.1f%% of the step\n", c.name.c_str(), a.world->size(),
                  c.dp_ms, c.alone_ms, c.dp_ms - c.alone_ms, 100.0 * (c.dp_ms - c.alone_ms) / c.dp_ms);
  if (b.win) std::printf("winner: %s (%.3f ms/step)\n", b.win->name.c_str(), b.win->t.median_ms);
  else std::printf("winner: none (every candidate failed)\n");
}

nlohmann::ordered_json candidate_json(const Candidate& c, int ranks) {
  nlohmann::ordered_json cj;
  cj["name"] = c.name;
  cj["fuse"] = fuse_mode_name(c.choice.fuse);
  cj["precision"] = precision_name(c.choice.precision);
  cj["algo"] = rnn_algo_name(c.choice.algo);
  cj["cpu"] = cpu_path_name(c.cpu);
  cj["plan"] = c.plan;
  cj["status"] = c.t.error.empty() ? "ok" : "failed: " + c.t.error;
  if (!c.t.error.empty()) {
    cj["ms_per_step"] = nullptr;
    cj["peak_device_mib"] = nullptr;
    return cj;
  }
  cj["ms_per_step"] = c.t.median_ms;
  cj["ms_per_step_repeats"] = c.t.ms;
  cj["sequences_per_s"] = c.seq_per_s;
  cj["tflops"] = c.tflops;
  cj["peak_host_rss_mib"] = c.peak_host_mib;
  cj["peak_device_mib"] = c.t.peak_device_mib < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(c.t.peak_device_mib);
  cj["last_loss"] = c.t.last_loss;
  cj["graph_share"] = c.t.graph_share;
  cj["graph_captures"] = c.t.graph_captures;
  if (c.dp_ms > 0)
    cj["data_parallel"] = {{"ranks", ranks}, {"ms_per_step", c.dp_ms}, {"alone_ms_per_step", c.alone_ms},
                           {"allreduce_ms", c.dp_ms - c.alone_ms}, {"allreduce_share", (c.dp_ms - c.alone_ms) / c.dp_ms}};
  return cj;
}

void write_json(const Bench& b) {
  const BenchArgs& a = b.a;
  nlohmann::ordered_json j;
  j["date"] = utc_now();
  j["config"] = b.cfg.path;
  j["overrides"] = nlohmann::ordered_json::array();
  for (const auto& s : a.args)
    if (s.find('=') != std::string::npos) j["overrides"].push_back(s);
  j["hardware"] = {{"device", b.device}, {"gpu", gpu_description()}, {"cpu", cpu_model()},
                   {"cores", std::thread::hardware_concurrency()}, {"blas_threads", blas_threads()}};
  j["versions"] = {{"rnntrain", RNNTRAIN_VERSION}, {"compiler", std::string("gcc-compatible ") + __VERSION__}, {"blas", blas_config()}};
  j["batch_size"] = b.B;
  j["timesteps"] = b.T;
  j["min_length"] = a.min_length;
  j["lognormal"] = b.median > 0 ? nlohmann::ordered_json({{"median", b.median}, {"sigma", b.sigma}}) : nlohmann::ordered_json();
  j["stream"] = a.stream;
  j["workload"] = a.inference ? "inference" : "training";
  j["bucketing"] = a.stream && b.cfg.train.bucketing;
  j["padding_share"] = a.stream ? nlohmann::ordered_json(b.padding) : nlohmann::ordered_json();
  j["steps"] = a.steps;
  j["repeats"] = a.repeats;
  j["warmup"] = b.warmup;
  j["flops_per_step"] = b.flops;
  j["candidates"] = nlohmann::ordered_json::array();
  for (const auto& c : b.cands) j["candidates"].push_back(candidate_json(c, a.world->size()));
  j["winner"] = b.win ? nlohmann::ordered_json(b.win->name) : nlohmann::ordered_json();
  write_atomically(a.json_file, [&](const std::string& tmp) {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    out.close();
    if (!out) throw RuntimeError(fmt::format("--json {}: cannot write the file", a.json_file));
  });
  log_info("wrote {}", a.json_file);
}

}  // namespace

int cmd_bench(const BenchArgs& a) {
  Bench b = bench_of(a);
  make_candidates(b);  // the options are checked before the batches are made
  make_batches(b);
  time_candidates(b);
  if (!a.world->root()) return b.win ? 0 : 1;  // rank 0 reports
  print_report(b);
  if (!a.json_file.empty()) write_json(b);
  return b.win ? 0 : 1;
}

}  // namespace rnntrain
