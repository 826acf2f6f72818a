// bench/wavefront_bench.cpp: times rnntrain's own recurrent kernels (plan.algo: wavefront) for one stack
// as rnntrain_cudnn_bench times the raw cuDNN calls, so that the two compare (issue 33: "the recurrent
// part alone at most 0.5x the raw cuDNN calls replayed as a graph").
//
// One timed step, all on rnntrain's stream: the weight gradients zeroed, WavefrontRnn::forward
// (training) and WavefrontRnn::backward: the kernels and the cuBLAS GEMMs around them (the first
// layer's input projection, every weight and bias gradient, the input gradient), what cudnnRNNForward,
// BackwardData and BackwardWeights do. The half and FP32 weights, x, dy and the lengths (all T; with
// --ragged sequence b has T - (b * 37) % (T / 2), from T / 2 + 1 to T, so the kernels run padded steps)
// are filled before timing (uniform +-0.05, fixed seed). --graph captures the step once after the warm-up
// and times its replays. Besides the step, the forward and backward kernels alone are timed with the
// events WavefrontRnn records around them (eagerly, every step), and divided by the wave steps they
// ran: the per-wave-step figures of docs/cuda.md. peak_mib: rnntrain's own count of device memory.
// RNNTRAIN_WAVEFRONT_DESIGN=1 runs the first design; the JSON says which design each pass ran on.
//
//   rnntrain_wavefront_bench --workload blog|gru|charlm|large [--precision bf16|fp16] [--graph]
//                            [--ragged] [--steps 10] [--repeats 3] [--warmup 3] [--json FILE]
//
// Exit codes: 0 timed; 2 usage error, no CUDA device or a stack the kernels cannot run (the JSON's
// status says why); 3 a CUDA call failed.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/api_errors.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gpu.h"
#include "backend/cuda/wavefront.h"

namespace {

using namespace rnntrain;
using namespace rnntrain::cuda;

struct Options {
  std::string workload, precision = "bf16", json;
  bool graph = false, ragged = false;
  int steps = 10, repeats = 3, warmup = 3;
};

struct Shape {
  LayerKind cell;
  int64_t L, H, I, B, T;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "rnntrain_wavefront_bench: %s\nusage: rnntrain_wavefront_bench --workload blog|gru|charlm|large "
               "[--precision bf16|fp16] [--graph] [--ragged] [--steps 10] [--repeats 3] [--warmup 3] [--json FILE]\n",
               why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    auto count = [&](int lo) {
      const std::string v = value();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < lo || n > 100000) usage(a + " must be a whole number from " + std::to_string(lo));
      return static_cast<int>(n);
    };
    if (a == "--workload") o.workload = value();
    else if (a == "--precision") o.precision = value();
    else if (a == "--graph") o.graph = true;
    else if (a == "--ragged") o.ragged = true;
    else if (a == "--steps") o.steps = count(1);
    else if (a == "--repeats") o.repeats = count(1);
    else if (a == "--warmup") o.warmup = count(0);
    else if (a == "--json") o.json = value();
    else usage("unknown argument '" + a + "'");
  }
  if (o.precision != "bf16" && o.precision != "fp16") usage("--precision is bf16 or fp16 (the kernels are half)");
  if (o.workload != "blog" && o.workload != "gru" && o.workload != "charlm" && o.workload != "large")
    usage("--workload is blog, gru, charlm or large");
  return o;
}

// The stacks of rnntrain_cudnn_bench's workloads of the same names.
Shape shape_of(const std::string& w) {
  if (w == "large") return {LayerKind::LSTM, 4, 1024, 1024, 128, 100};
  if (w == "gru") return {LayerKind::GRU, 4, 512, 512, 64, 100};
  if (w == "charlm") return {LayerKind::LSTM, 3, 512, 128, 256, 50};
  return {LayerKind::LSTM, 4, 512, 512, 64, 100};
}

struct Result {
  std::string status = "ok", device;
  std::vector<double> ms;  // per step, one a repeat
  double fwd_ms = 0, bwd_ms = 0;  // the kernels alone, per step (median of the eager steps)
  int64_t fwd_waves = 0, bwd_waves = 0;
  int design_fwd = 0, design_bwd = 0;
  double peak_mib = -1;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

void run(const Options& o, Result& r) {
  const Shape sh = shape_of(o.workload);
  const WavefrontShape ws{sh.cell, sh.L, 1, sh.I, sh.H, o.precision == "bf16"};
  const std::string why = WavefrontRnn::unsupported(ws, o.precision == "bf16" ? Precision::Bf16 : Precision::Fp16, sh.B);
  if (!why.empty()) {
    r.status = "not run: " + why;
    return;
  }
  Gpu gpu;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, gpu.device()));
  r.device = prop.name;
  WavefrontRnn rnn(gpu, ws);
  const int64_t n = rnn.weight_elems(), xs = sh.T * sh.B * sh.I, ys = sh.T * sh.B * sh.H;
  DeviceBuffer<uint16_t> wh("half weights"), x("x"), y("y"), dy("dy"), dx("dx");
  DeviceBuffer<float> w("weights"), g("weight gradients");
  DeviceBuffer<int32_t> lens("lengths");
  // Uniform +-0.05, as the half type's bits.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  auto halves = [&](int64_t count) {
    std::vector<uint16_t> h(static_cast<size_t>(count));
    for (auto& v : h) {
      const float f = u(rng);
      if (ws.bf16) {
        const __nv_bfloat16 b = __float2bfloat16(f);
        std::memcpy(&v, &b, 2);
      } else {
        const __half b = __float2half(f);
        std::memcpy(&v, &b, 2);
      }
    }
    return h;
  };
  auto upload = [&](auto& buf, const auto& host) {
    using E = typename std::decay_t<decltype(host)>::value_type;
    CUDA_CHECK(cudaMemcpy(buf.ensure(static_cast<int64_t>(host.size())), host.data(), host.size() * sizeof(E),
                          cudaMemcpyHostToDevice));
  };
  std::vector<float> wf(static_cast<size_t>(n));
  for (float& v : wf) v = u(rng);
  upload(w, wf);
  upload(wh, halves(n));
  upload(x, halves(xs));
  upload(dy, halves(ys));
  std::vector<int32_t> len(static_cast<size_t>(sh.B), static_cast<int32_t>(sh.T));
  if (o.ragged)
    for (size_t b = 0; b < len.size(); ++b)
      len[b] = static_cast<int32_t>(sh.T - static_cast<int64_t>(b) * 37 % std::max<int64_t>(1, sh.T / 2));
  upload(lens, len);
  y.ensure(ys), dx.ensure(xs), g.ensure(n);
  cudaStream_t st = gpu.stream();
  auto step = [&] {
    CUDA_CHECK(cudaMemsetAsync(g.get(), 0, static_cast<size_t>(n) * sizeof(float), st));
    rnn.forward(sh.B, sh.T, lens.get(), x.get(), y.get(), nullptr, wh.get(), w.get(), true);
    rnn.backward(dy.get(), nullptr, dx.get(), wh.get(), g.get());
  };
  const int64_t f2 = wavefront2_passes(), b2 = wavefront2_backward_passes();
  for (int i = 0; i < o.warmup; ++i) step();
  CUDA_CHECK(cudaStreamSynchronize(st));
  r.design_fwd = wavefront2_passes() > f2 ? 2 : 1;
  r.design_bwd = wavefront2_backward_passes() > b2 ? 2 : 1;

  // The kernels alone, eagerly: the events WavefrontRnn records around them.
  cudaEvent_t ev[4];
  for (cudaEvent_t& e : ev) CUDA_CHECK(cudaEventCreate(&e));
  rnn.time_kernels(ev);
  std::vector<double> fwd, bwd;
  for (int i = 0; i < o.steps; ++i) {
    step();
    CUDA_CHECK(cudaEventSynchronize(ev[3]));
    float a = 0, b = 0;
    CUDA_CHECK(cudaEventElapsedTime(&a, ev[0], ev[1]));
    CUDA_CHECK(cudaEventElapsedTime(&b, ev[2], ev[3]));
    fwd.push_back(a), bwd.push_back(b);
  }
  rnn.time_kernels(nullptr);
  r.fwd_ms = median(fwd), r.bwd_ms = median(bwd);
  r.fwd_waves = rnn.forward_waves(), r.bwd_waves = rnn.backward_waves();

  // The whole step, eagerly or replayed as a graph.
  cudaGraphExec_t exec = nullptr;
  if (o.graph) {
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    step();
    CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaGraphLaunch(exec, st));
  }
  for (int rep = 0; rep < o.repeats; ++rep) {
    CUDA_CHECK(cudaEventRecord(ev[0], st));
    for (int i = 0; i < o.steps; ++i) {
      if (exec) CUDA_CHECK(cudaGraphLaunch(exec, st));
      else step();
    }
    CUDA_CHECK(cudaEventRecord(ev[1], st));
    CUDA_CHECK(cudaEventSynchronize(ev[1]));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
    r.ms.push_back(ms / o.steps);
  }
  if (exec) CUDA_CHECK(cudaGraphExecDestroy(exec));
  for (cudaEvent_t e : ev) CUDA_CHECK(cudaEventDestroy(e));
  r.peak_mib = static_cast<double>(device_bytes_peak()) / (1024.0 * 1024.0);
}

// One grep-able line to stdout and, with --json, the same figures.
void report(const Options& o, const Result& r) {
  const Shape sh = shape_of(o.workload);
  const bool ok = r.status == "ok";
  const double us_f = r.fwd_waves ? 1e3 * r.fwd_ms / static_cast<double>(r.fwd_waves) : 0;
  const double us_b = r.bwd_waves ? 1e3 * r.bwd_ms / static_cast<double>(r.bwd_waves) : 0;
  std::printf("workload=%s precision=%s algo=wavefront graph=%d ragged=%d", o.workload.c_str(), o.precision.c_str(),
              o.graph, o.ragged);
  if (ok)
    std::printf(" ms_per_step=%.3f design=%d/%d forward_kernels_ms=%.3f (%lld wave steps, %.2f us each) "
                "backward_kernels_ms=%.3f (%lld wave steps, %.2f us each) peak_mib=%.0f",
                median(r.ms), r.design_fwd, r.design_bwd, r.fwd_ms, static_cast<long long>(r.fwd_waves), us_f,
                r.bwd_ms, static_cast<long long>(r.bwd_waves), us_b, r.peak_mib);
  std::printf(" status=\"%s\"\n", r.status.c_str());
  if (o.json.empty()) return;
  FILE* f = std::fopen(o.json.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "rnntrain_wavefront_bench: cannot write %s: %s\n", o.json.c_str(), std::strerror(errno));
    std::exit(3);
  }
  std::fprintf(f, "{\"workload\": \"%s\", \"cell\": \"%s\", \"layers\": %lld, \"hidden\": %lld, \"input\": %lld, "
               "\"batch\": %lld, \"time\": %lld, \"precision\": \"%s\", \"algo\": \"wavefront\", \"per_layer\": false, "
               "\"graph\": %s, \"ragged\": %s, ",
               o.workload.c_str(), sh.cell == LayerKind::GRU ? "gru" : "lstm", static_cast<long long>(sh.L),
               static_cast<long long>(sh.H), static_cast<long long>(sh.I), static_cast<long long>(sh.B),
               static_cast<long long>(sh.T), o.precision.c_str(), o.graph ? "true" : "false",
               o.ragged ? "true" : "false");
  if (ok) {
    std::fprintf(f, "\"ms_per_step\": %.4f, \"ms_per_step_repeats\": [", median(r.ms));
    for (size_t i = 0; i < r.ms.size(); ++i) std::fprintf(f, "%s%.4f", i ? ", " : "", r.ms[i]);
    std::fprintf(f, "], \"design\": [%d, %d], \"forward_kernels_ms\": %.4f, \"forward_waves\": %lld, "
                 "\"forward_us_per_wave_step\": %.3f, \"backward_kernels_ms\": %.4f, \"backward_waves\": %lld, "
                 "\"backward_us_per_wave_step\": %.3f, \"peak_mib\": %.1f, ",
                 r.design_fwd, r.design_bwd, r.fwd_ms, static_cast<long long>(r.fwd_waves), us_f, r.bwd_ms,
                 static_cast<long long>(r.bwd_waves), us_b, r.peak_mib);
  } else {
    std::fprintf(f, "\"ms_per_step\": null, ");
  }
  std::fprintf(f, "\"status\": \"%s\", \"device\": \"%s\"}\n", r.status.c_str(), r.device.c_str());
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  Result r;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "rnntrain_wavefront_bench: no CUDA device; this program times rnntrain's kernels on a GPU\n");
    r.status = "failed: no CUDA device";
    report(o, r);
    return 2;
  }
  try {
    run(o, r);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rnntrain_wavefront_bench: %s\n", e.what());
    r.status = std::string("failed: ") + e.what();
    r.ms.clear();
    report(o, r);
    return 3;
  }
  report(o, r);
  return r.status == "ok" ? 0 : 2;
}
