// bench/cudnn_bench.cpp: times the raw cuDNN 9 RNN training calls for one recurrent stack: the reference
// that rnntrain's own step is held to (issue 5: "within 1.15x of the raw cuDNN call sequence").
// It is not rnntrain: it links only the CUDA runtime and cuDNN, and has no embedding, Dense, loss or optimizer.
//
// One timed step, all on one stream: cudaMemsetAsync(dw, 0), cudnnRNNForward(TRAINING),
// cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8(ADD). x, y, dy, dx, the weights, workspace and
// reserve space are allocated and filled (uniform +-0.05, fixed seed) before timing; hx and cx are null
// (zeros). Fused: one L-layer descriptor. --per-layer: L one-layer descriptors chained (layer l's y is
// layer l+1's x; backward runs top-down, layer l+1's dx is layer l's dy), each with its own weights,
// workspace and reserve; the weights of all layers sit in one flat w/dw buffer, so dw is zeroed by one
// memset as in the fused case. Always double bias, linear input, no dropout, SEQ_MAJOR_UNPACKED data
// (BATCH_MAJOR_UNPACKED with --batch-major)
// with PADDED_IO as rnntrain uses. Timing: --warmup steps, then --repeats loops of --steps steps, each
// loop timed with CUDA events; ms_per_step is the median over loops. --graph captures the step once as a
// CUDA graph after the warm-up and times its replays (no host launch cost per cuDNN kernel). peak_mib is device memory in use
// (cudaMemGetInfo) after everything is allocated minus before (CUDA context and cuDNN handle excluded).
// --packed: SEQ_MAJOR_PACKED data (lengths sorted longest first, PADDED_IO off, activations sized by
// the sum of the lengths), the layout PyTorch's packed sequences use.
// --replay-lengths (with --graph and --min-length): whether a step captured with one set of lengths
// can be replayed with others written only into the device lengths: after the timing, new lengths go
// to the device copy alone and the graph is replayed; then the descriptors get the new lengths too
// and the step runs uncaptured. Prints (and writes to the JSON) the largest difference between the
// two in y, dx and dw, relative to each tensor's largest value, how much the new lengths changed y
// at all (so a zero difference is not just lengths that did not matter), and how far the replay's y
// is from the captured lengths' y (0: the device lengths were ignored).
//
//   rnntrain_cudnn_bench --workload blog [--per-layer] [--precision fp16] [--algo persist_static] [--json F]
//   (--algo persist_dynamic: cudnnBuildRNNDynamic compiles the persistent kernels for the batch size)
//   rnntrain_cudnn_bench --cell gru --layers 2 --hidden 256 --input 64 --batch 32 --time 50 [--bidir]
//
// Exit codes: 0 timed; 2 usage error or no CUDA device; 3 a CUDA or cuDNN call failed (for example
// CUDNN_STATUS_NOT_SUPPORTED for persist_static with variable lengths): the JSON status says which.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace {

// ---- checks and owners ----
struct CallError : std::runtime_error {  // a failed CUDA or cuDNN call; name is the status name
  std::string name;
  CallError(const std::string& what, std::string n) : std::runtime_error(what), name(std::move(n)) {}
};
void check(cudnnStatus_t s, const char* call, int line) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  char detail[512] = "";
  cudnnGetLastErrorString(detail, sizeof detail);
  throw CallError(std::string(call) + " (cudnn_bench.cpp:" + std::to_string(line) + "): " +
                      cudnnGetErrorString(s) + (detail[0] ? std::string(": ") + detail : ""),
                  cudnnGetErrorString(s));
}
void check(cudaError_t e, const char* call, int line) {
  if (e == cudaSuccess) return;
  throw CallError(std::string(call) + " (cudnn_bench.cpp:" + std::to_string(line) + "): " + cudaGetErrorName(e) +
                      ": " + cudaGetErrorString(e),
                  cudaGetErrorName(e));
}
#define CHECK(call) check((call), #call, __LINE__)

template <auto Destroy>
struct Deleter {
  void operator()(auto p) const { Destroy(p); }  // destructors do not throw: a failure here is ignored
};
template <class H, auto Destroy>
using Own = std::unique_ptr<std::remove_pointer_t<H>, Deleter<Destroy>>;
using Handle = Own<cudnnHandle_t, cudnnDestroy>;
using RnnDesc = Own<cudnnRNNDescriptor_t, cudnnDestroyRNNDescriptor>;
using DataDesc = Own<cudnnRNNDataDescriptor_t, cudnnDestroyRNNDataDescriptor>;
using TensorDesc = Own<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using DropDesc = Own<cudnnDropoutDescriptor_t, cudnnDestroyDropoutDescriptor>;
using Stream = Own<cudaStream_t, cudaStreamDestroy>;
using Event = Own<cudaEvent_t, cudaEventDestroy>;
using DevMem = std::unique_ptr<void, Deleter<cudaFree>>;

template <class O, class F>
O make(F create) {  // make<RnnDesc>(cudnnCreateRNNDescriptor)
  typename O::pointer p{};
  CHECK(create(&p));
  return O(p);
}
DevMem dev_alloc(size_t bytes) {
  void* p = nullptr;
  if (bytes) CHECK(cudaMalloc(&p, bytes));
  return DevMem(p);
}

// ---- options ----
struct Options {
  std::string workload = "custom", cell, precision = "fp32", algo = "standard", json;
  int layers = 0, hidden = 0, input = 0, batch = 0, time = 0, min_length = 0;  // min_length 0: all lengths T
  bool bidir = false, per_layer = false, batch_major = false, graph = false, packed = false, replay_lengths = false;
  int steps = 10, repeats = 5, warmup = 3;
};

const char* kUsage =
    "usage: rnntrain_cudnn_bench (--workload blog|large|gru|charlm|bilstm|maskzero | --cell lstm|gru --layers L\n"
    "         --hidden H"
    " --input I --batch B --time T [--bidir] [--min-length N]) [--per-layer]\n"
    "         [--precision fp32|tf32|fp16|bf16] [--algo standard|persist_static|persist_dynamic] [--batch-major]\n"
    "         [--packed] [--graph [--replay-lengths]] [--steps 10] [--repeats 5] [--warmup 3] [--json FILE]\n"
    "Times cuDNN's RNN training calls (memset dw, forward, backward data, backward weights) for one stack.\n"
    "Options after --workload override its shape (the workload is then reported as custom).\n"
    "--min-length N: lengths uniform in [N, T] (fixed seed). Exit: 0 ok, 2 usage/no GPU, 3 CUDA/cuDNN failure.\n";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "rnntrain_cudnn_bench: %s\n(run with --help for the options)\n", msg.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  std::string preset;
  bool shape_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    auto number = [&](int min) {
      const std::string v = value();
      int n = 0;
      const auto r = std::from_chars(v.data(), v.data() + v.size(), n);
      if (r.ec != std::errc() || r.ptr != v.data() + v.size() || n < min)
        usage_error(a + " wants an integer >= " + std::to_string(min) + ", got '" + v + "'");
      return n;
    };
    auto choice = [&](std::initializer_list<const char*> allowed) {
      const std::string v = value();
      for (const char* c : allowed)
        if (v == c) return v;
      usage_error("unknown value '" + v + "' for " + a);
    };
    if (a == "-h" || a == "--help") { std::fputs(kUsage, stdout); std::exit(0); }
    else if (a == "--workload") preset = choice({"blog", "large", "gru", "charlm", "bilstm", "maskzero"});
    else if (a == "--cell") { o.cell = choice({"lstm", "gru"}); shape_given = true; }
    else if (a == "--layers") { o.layers = number(1); shape_given = true; }
    else if (a == "--hidden") { o.hidden = number(1); shape_given = true; }
    else if (a == "--input") { o.input = number(1); shape_given = true; }
    else if (a == "--batch") { o.batch = number(1); shape_given = true; }
    else if (a == "--time") { o.time = number(1); shape_given = true; }
    else if (a == "--min-length") { o.min_length = number(1); shape_given = true; }
    else if (a == "--bidir") { o.bidir = true; shape_given = true; }
    else if (a == "--per-layer") o.per_layer = true;
    else if (a == "--batch-major") o.batch_major = true;
    else if (a == "--graph") o.graph = true;
    else if (a == "--packed") o.packed = true;
    else if (a == "--replay-lengths") o.replay_lengths = true;
    else if (a == "--precision") o.precision = choice({"fp32", "tf32", "fp16", "bf16"});
    else if (a == "--algo") o.algo = choice({"standard", "persist_static", "persist_dynamic"});
    else if (a == "--steps") o.steps = number(1);
    else if (a == "--repeats") o.repeats = number(1);
    else if (a == "--warmup") o.warmup = number(0);
    else if (a == "--json") o.json = value();
    else usage_error("unknown argument '" + a + "'");
  }
  if (!preset.empty()) {  // the stacks of issue 5, input to the recurrent stack; explicit options win
    struct P { const char* cell; int L, H, I, B, T; bool bidir; int min_len; };
    const P p = preset == "blog"    ? P{"lstm", 4, 512, 512, 64, 100, false, 0}
              : preset == "large"   ? P{"lstm", 4, 1024, 1024, 128, 100, false, 0}
              : preset == "gru"     ? P{"gru", 4, 512, 512, 64, 100, false, 0}
              : preset == "charlm"  ? P{"lstm", 3, 512, 128, 256, 50, false, 0}
              // maskzero as rnntrain runs its masked steps: all 400 steps, the masks applied around the calls
              : preset == "maskzero" ? P{"lstm", 2, 512, 128, 64, 400, false, 0}
                                    : P{"lstm", 2, 256, 128, 128, 200, true, 50};  // bilstm
    if (o.cell.empty()) o.cell = p.cell;
    if (!o.layers) o.layers = p.L;
    if (!o.hidden) o.hidden = p.H;
    if (!o.input) o.input = p.I;
    if (!o.batch) o.batch = p.B;
    if (!o.time) o.time = p.T;
    o.bidir = o.bidir || p.bidir;
    if (!o.min_length) o.min_length = p.min_len;
    o.workload = shape_given ? "custom" : preset;
  }
  if (o.cell.empty() || !o.layers || !o.hidden || !o.input || !o.batch || !o.time)
    usage_error("give --workload, or all of --cell --layers --hidden --input --batch --time");
  if (o.min_length > o.time) usage_error("--min-length must be <= --time");
  if (o.packed && o.batch_major) usage_error("--packed is a sequence-major layout: leave out --batch-major");
  if (o.replay_lengths && (!o.graph || !o.min_length || o.packed))
    usage_error("--replay-lengths needs --graph and --min-length, and padded data (not --packed)");
  return o;
}

// ---- one cuDNN RNN descriptor and its buffers: the fused stack, or one layer of the per-layer chain ----
struct Rnn {
  int in = 0, layers = 0;  // input width I of this descriptor, physical layers L
  RnnDesc desc;
  DataDesc x_desc, y_desc;
  TensorDesc h_desc;  // h/c shape [L*D, B, H]; hx, cx, hy, cy are null
  size_t w_bytes = 0, w_off = 0, work_bytes = 0, reserve_bytes = 0;  // w_off: bytes into the flat w/dw
  DevMem work, reserve;
  void *x = nullptr, *y = nullptr, *dy = nullptr, *dx = nullptr;  // x, dx: [B, T, I]; y, dy: [B, T, D*H]
};

size_t elem_size(cudnnDataType_t dt) { return dt == CUDNN_DATA_FLOAT ? 4 : 2; }

// Fills count elements of dt at dst with uniform +-0.05 (host fill, one copy).
void fill_uniform(void* dst, size_t count, cudnnDataType_t dt, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  auto put = [&](auto convert) {
    std::vector<decltype(convert(0.f))> h(count);
    for (auto& v : h) v = convert(u(rng));
    CHECK(cudaMemcpy(dst, h.data(), count * sizeof h[0], cudaMemcpyHostToDevice));
  };
  if (dt == CUDNN_DATA_FLOAT) put([](float f) { return f; });
  else if (dt == CUDNN_DATA_HALF) put([](float f) { return __float2half(f); });
  else put([](float f) { return __float2bfloat16(f); });
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// count elements of dt at src, as floats on the host.
std::vector<float> host_floats(const void* src, size_t count, cudnnDataType_t dt) {
  std::vector<float> out(count);
  auto get = [&](auto zero, auto convert) {
    std::vector<decltype(zero)> h(count);
    CHECK(cudaMemcpy(h.data(), src, count * sizeof h[0], cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) out[i] = convert(h[i]);
  };
  if (dt == CUDNN_DATA_FLOAT) get(0.f, [](float f) { return f; });
  else if (dt == CUDNN_DATA_HALF) get(__half(), [](__half v) { return __half2float(v); });
  else get(__nv_bfloat16(), [](__nv_bfloat16 v) { return __bfloat162float(v); });
  return out;
}

// max |a - b| / max |b|.
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
    m = std::max(m, static_cast<double>(std::fabs(b[i])));
  }
  return m > 0 ? d / m : d;
}

struct Result {
  std::string status = "ok", device;
  std::vector<double> ms;  // ms/step of each repeat
  double peak_mib = -1;
  double replay_y = -1, replay_dx = -1, replay_dw = -1, lengths_effect = -1;  // --replay-lengths
  double replay_vs_captured = -1;  // y replayed with the new device lengths against y with the captured ones
  bool temp_grew = false;  // the new lengths needed more workspace or reserve than the captured ones
};

// Builds the descriptors and buffers, then times the steps.
void run(const Options& o, Result& res) {
  const int D = o.bidir ? 2 : 1, H = o.hidden, B = o.batch, T = o.time;
  const cudnnDataType_t dt = o.precision == "fp16"   ? CUDNN_DATA_HALF
                             : o.precision == "bf16" ? CUDNN_DATA_BFLOAT16
                                                     : CUDNN_DATA_FLOAT;
  const cudnnMathType_t math = o.precision == "fp32"   ? CUDNN_FMA_MATH       // strict fp32
                               : o.precision == "tf32" ? CUDNN_DEFAULT_MATH   // fp32 data, TF32 allowed
                                                       : CUDNN_TENSOR_OP_MATH;  // fp16/bf16 data, fp32 math
  const cudnnRNNAlgo_t algo = o.algo == "standard"         ? CUDNN_RNN_ALGO_STANDARD
                              : o.algo == "persist_static" ? CUDNN_RNN_ALGO_PERSIST_STATIC
                                                           : CUDNN_RNN_ALGO_PERSIST_DYNAMIC;
  const size_t es = elem_size(dt);

  Stream stream = make<Stream>([](cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); });
  Handle handle = make<Handle>(cudnnCreate);
  cudnnHandle_t h = handle.get();
  CHECK(cudnnSetStream(h, stream.get()));
  DropDesc drop = make<DropDesc>(cudnnCreateDropoutDescriptor);
  CHECK(cudnnSetDropoutDescriptor(drop.get(), h, 0.f, nullptr, 0, 0));  // p = 0: no dropout, no states
  CHECK(cudaDeviceSynchronize());
  size_t free_before = 0, total = 0, free_after = 0;
  CHECK(cudaMemGetInfo(&free_before, &total));

  // Sequence lengths: all T, or uniform in [min_length, T] from a fixed seed (host and device copies).
  std::vector<int> lens(B, T);
  std::mt19937 len_rng(1234);
  if (o.min_length > 0)
    for (int& l : lens) l = o.min_length + static_cast<int>(len_rng() % (T - o.min_length + 1));
  if (o.packed) std::sort(lens.begin(), lens.end(), std::greater<>());
  size_t tokens = 0;  // the rows a packed tensor holds
  for (int l : lens) tokens += static_cast<size_t>(l);
  DevMem dev_lens = dev_alloc(B * sizeof(int));
  CHECK(cudaMemcpy(dev_lens.get(), lens.data(), B * sizeof(int), cudaMemcpyHostToDevice));
  double pad_fill = 0;  // y's padded steps: zero bytes whatever type cuDNN reads it as

  const cudnnRNNDataLayout_t layout = o.packed        ? CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED
                                      : o.batch_major ? CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED
                                                      : CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED;
  auto set_lengths = [&](Rnn& r, const std::vector<int>& l) {
    const int steps = o.packed ? *std::max_element(l.begin(), l.end()) : T;  // packed: the longest, exactly
    CHECK(cudnnSetRNNDataDescriptor(r.x_desc.get(), dt, layout, steps, B, r.in, l.data(), &pad_fill));
    CHECK(cudnnSetRNNDataDescriptor(r.y_desc.get(), dt, layout, steps, B, D * H, l.data(), &pad_fill));
  };

  // Descriptors: one L-layer stack, or L one-layer stacks (input I, then D*H).
  std::vector<Rnn> rnns(o.per_layer ? o.layers : 1);
  size_t w_total = 0;
  for (size_t i = 0; i < rnns.size(); ++i) {
    Rnn& r = rnns[i];
    r.in = i == 0 ? o.input : D * H;
    r.layers = o.per_layer ? 1 : o.layers;
    r.desc = make<RnnDesc>(cudnnCreateRNNDescriptor);
    CHECK(cudnnSetRNNDescriptor_v8(r.desc.get(), algo, o.cell == "lstm" ? CUDNN_LSTM : CUDNN_GRU, CUDNN_RNN_DOUBLE_BIAS,
                                   o.bidir ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, dt,
                                   CUDNN_DATA_FLOAT, math, r.in, H, H, r.layers, drop.get(),
                                   o.packed ? CUDNN_RNN_PADDED_IO_DISABLED : CUDNN_RNN_PADDED_IO_ENABLED));
    if (algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC) CHECK(cudnnBuildRNNDynamic(h, r.desc.get(), B));
    CHECK(cudnnGetRNNWeightSpaceSize(h, r.desc.get(), &r.w_bytes));
    r.w_off = w_total;
    w_total += (r.w_bytes + 255) / 256 * 256;  // each layer's block 256-byte aligned in the flat buffer
    r.x_desc = make<DataDesc>(cudnnCreateRNNDataDescriptor);
    r.y_desc = make<DataDesc>(cudnnCreateRNNDataDescriptor);
    set_lengths(r, lens);
    r.h_desc = make<TensorDesc>(cudnnCreateTensorDescriptor);
    const int dims[3] = {r.layers * D, B, H}, strides[3] = {B * H, H, 1};
    CHECK(cudnnSetTensorNdDescriptor(r.h_desc.get(), dt, 3, dims, strides));
    CHECK(cudnnGetRNNTempSpaceSizes(h, r.desc.get(), CUDNN_FWD_MODE_TRAINING, r.x_desc.get(), &r.work_bytes,
                                    &r.reserve_bytes));
    r.work = dev_alloc(r.work_bytes);
    r.reserve = dev_alloc(r.reserve_bytes);
  }

  // Activations. Fused: x, y, dy, dx. Per-layer: x, one y per layer, the top dy, and two dx buffers used
  // in turn (layer l's dx is layer l-1's dy and is dead once layer l-1's BackwardData has run).
  const size_t bt = o.packed ? tokens : static_cast<size_t>(B) * T, out_bytes = bt * D * H * es;
  DevMem w = dev_alloc(w_total), dw = dev_alloc(w_total), x = dev_alloc(bt * o.input * es),
         dy = dev_alloc(out_bytes);
  std::vector<DevMem> ys, dxs;
  for (size_t i = 0; i < rnns.size(); ++i) ys.push_back(dev_alloc(out_bytes));
  const size_t dx_bytes = bt * std::max(o.input, rnns.size() > 1 ? D * H : o.input) * es;
  for (size_t i = 0; i < std::min<size_t>(rnns.size(), 2); ++i) dxs.push_back(dev_alloc(dx_bytes));
  const int n = static_cast<int>(rnns.size());
  for (int i = 0; i < n; ++i) {
    rnns[i].x = i == 0 ? x.get() : ys[i - 1].get();
    rnns[i].y = ys[i].get();
  }
  for (int i = n - 1; i >= 0; --i) {  // top-down, the order backward runs in
    rnns[i].dx = dxs[(n - 1 - i) % 2].get();
    rnns[i].dy = i == n - 1 ? dy.get() : rnns[i + 1].dx;
  }
  std::mt19937 rng(42);
  fill_uniform(w.get(), w_total / es, dt, rng);
  fill_uniform(x.get(), bt * o.input, dt, rng);
  fill_uniform(dy.get(), bt * D * H, dt, rng);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemGetInfo(&free_after, &total));
  res.peak_mib = static_cast<double>(free_before > free_after ? free_before - free_after : 0) / (1 << 20);

  auto step = [&] {
    char* wp = static_cast<char*>(w.get());
    char* dwp = static_cast<char*>(dw.get());
    const int* dl = static_cast<const int*>(dev_lens.get());
    CHECK(cudaMemsetAsync(dwp, 0, w_total, stream.get()));  // BackwardWeights only adds
    for (Rnn& r : rnns)
      CHECK(cudnnRNNForward(h, r.desc.get(), CUDNN_FWD_MODE_TRAINING, dl, r.x_desc.get(), r.x, r.y_desc.get(), r.y,
                            r.h_desc.get(), nullptr, nullptr, r.h_desc.get(), nullptr, nullptr, r.w_bytes,
                            wp + r.w_off, r.work_bytes, r.work.get(), r.reserve_bytes, r.reserve.get()));
    for (int i = n - 1; i >= 0; --i) {  // BackwardData must precede BackwardWeights: it updates the reserve
      Rnn& r = rnns[i];
      CHECK(cudnnRNNBackwardData_v8(h, r.desc.get(), dl, r.y_desc.get(), r.y, r.dy, r.x_desc.get(), r.dx,
                                    r.h_desc.get(), nullptr, nullptr, nullptr, r.h_desc.get(), nullptr, nullptr,
                                    nullptr, r.w_bytes, wp + r.w_off, r.work_bytes, r.work.get(), r.reserve_bytes,
                                    r.reserve.get()));
      CHECK(cudnnRNNBackwardWeights_v8(h, r.desc.get(), CUDNN_WGRAD_MODE_ADD, dl, r.x_desc.get(), r.x,
                                       r.h_desc.get(), nullptr, r.y_desc.get(), r.y, r.w_bytes, dwp + r.w_off,
                                       r.work_bytes, r.work.get(), r.reserve_bytes, r.reserve.get()));
    }
  };
  for (int i = 0; i < o.warmup; ++i) step();
  CHECK(cudaStreamSynchronize(stream.get()));
  using GraphExec = Own<cudaGraphExec_t, cudaGraphExecDestroy>;
  GraphExec exec;
  if (o.graph) {
    cudaGraph_t g = nullptr;
    CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
    step();
    CHECK(cudaStreamEndCapture(stream.get(), &g));
    cudaGraphExec_t e = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&e, g, 0);
    cudaGraphDestroy(g);
    CHECK(made);
    exec.reset(e);
    CHECK(cudaGraphLaunch(exec.get(), stream.get()));  // the first replay uploads the graph: untimed
    CHECK(cudaStreamSynchronize(stream.get()));
  }
  auto new_event = [](cudaEvent_t* e) { return cudaEventCreate(e); };
  Event start = make<Event>(new_event), stop = make<Event>(new_event);
  for (int rep = 0; rep < o.repeats; ++rep) {
    CHECK(cudaEventRecord(start.get(), stream.get()));
    for (int i = 0; i < o.steps; ++i) {
      if (exec) CHECK(cudaGraphLaunch(exec.get(), stream.get()));
      else step();
    }
    CHECK(cudaEventRecord(stop.get(), stream.get()));
    CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    res.ms.push_back(ms / o.steps);
  }
  if (!o.replay_lengths) return;

  // The graph was captured with lengths `lens`; replay it with others in the device copy only, then
  // run the step uncaptured with the others everywhere.
  auto snapshot = [&] {
    CHECK(cudaStreamSynchronize(stream.get()));
    return std::vector<std::vector<float>>{host_floats(ys.back().get(), bt * D * H, dt),
                                           host_floats(rnns[0].dx, bt * o.input, dt),
                                           host_floats(dw.get(), w_total / es, dt)};
  };
  const auto before = snapshot();
  std::vector<int> lens2(B);
  std::mt19937 rng2(4321);
  for (int& l : lens2) l = o.min_length + static_cast<int>(rng2() % (T - o.min_length + 1));
  CHECK(cudaMemcpy(dev_lens.get(), lens2.data(), B * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaGraphLaunch(exec.get(), stream.get()));
  const auto replayed = snapshot();
  for (Rnn& r : rnns) {
    set_lengths(r, lens2);
    size_t work = 0, reserve = 0;  // they depend on the lengths: grow them (the graph is not replayed again)
    CHECK(cudnnGetRNNTempSpaceSizes(h, r.desc.get(), CUDNN_FWD_MODE_TRAINING, r.x_desc.get(), &work, &reserve));
    res.temp_grew = res.temp_grew || work > r.work_bytes || reserve > r.reserve_bytes;
    if (work > r.work_bytes) r.work = dev_alloc(r.work_bytes = work);
    if (reserve > r.reserve_bytes) r.reserve = dev_alloc(r.reserve_bytes = reserve);
  }
  step();
  const auto direct = snapshot();
  res.replay_y = rel_diff(replayed[0], direct[0]);
  res.replay_dx = rel_diff(replayed[1], direct[1]);
  res.replay_dw = rel_diff(replayed[2], direct[2]);
  res.lengths_effect = rel_diff(before[0], direct[0]);
  res.replay_vs_captured = rel_diff(replayed[0], before[0]);
}

// Prints one grep-able line to stdout and, with --json, writes the same figures.
void report(const Options& o, const Result& r) {
  const bool ok = r.status == "ok";
  const double med = ok ? median(r.ms) : 0;
  std::printf("workload=%s cell=%s layers=%d hidden=%d input=%d batch=%d time=%d bidir=%d min_length=%d "
              "precision=%s algo=%s per_layer=%d layout=%s graph=%d",
              o.workload.c_str(), o.cell.c_str(), o.layers, o.hidden, o.input, o.batch, o.time, o.bidir,
              o.min_length, o.precision.c_str(), o.algo.c_str(), o.per_layer,
              o.packed ? "packed" : o.batch_major ? "batch" : "seq", o.graph);
  if (ok)
    std::printf(" ms_per_step=%.3f min=%.3f max=%.3f loops=%dx%d peak_mib=%.0f", med,
                *std::min_element(r.ms.begin(), r.ms.end()), *std::max_element(r.ms.begin(), r.ms.end()),
                o.repeats, o.steps, r.peak_mib);
  if (r.replay_y >= 0)
    std::printf(" replay_lengths_diff_y=%.3g dx=%.3g dw=%.3g lengths_effect_y=%.3g replay_vs_captured_y=%.3g temp_grew=%d",
                r.replay_y, r.replay_dx, r.replay_dw, r.lengths_effect, r.replay_vs_captured, r.temp_grew);
  std::printf(" status=\"%s\"\n", r.status.c_str());
  if (o.json.empty()) return;
  FILE* f = std::fopen(o.json.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "rnntrain_cudnn_bench: cannot write %s: %s\n", o.json.c_str(), std::strerror(errno));
    std::exit(3);
  }
  const int v = static_cast<int>(cudnnGetVersion());
  std::fprintf(f, "{\"workload\": \"%s\", \"cell\": \"%s\", \"layers\": %d, \"hidden\": %d, \"input\": %d, "
               "\"batch\": %d, \"time\": %d, \"bidir\": %s, \"min_length\": %d, \"precision\": \"%s\", "
               "\"algo\": \"%s\", \"per_layer\": %s, \"packed\": %s, \"graph\": %s, ",
               o.workload.c_str(), o.cell.c_str(), o.layers, o.hidden, o.input, o.batch, o.time,
               o.bidir ? "true" : "false", o.min_length, o.precision.c_str(), o.algo.c_str(),
               o.per_layer ? "true" : "false", o.packed ? "true" : "false", o.graph ? "true" : "false");
  if (r.replay_y >= 0)
    std::fprintf(f,
                 "\"replay_lengths\": {\"y\": %.4g, \"dx\": %.4g, \"dw\": %.4g, \"lengths_effect_y\": %.4g, "
                 "\"replay_vs_captured_y\": %.4g, \"temp_grew\": %s}, ",
                 r.replay_y, r.replay_dx, r.replay_dw, r.lengths_effect, r.replay_vs_captured,
                 r.temp_grew ? "true" : "false");
  if (ok) std::fprintf(f, "\"ms_per_step\": %.4f, \"ms_per_step_repeats\": [", med);
  else std::fprintf(f, "\"ms_per_step\": null, \"ms_per_step_repeats\": [");
  for (size_t i = 0; i < r.ms.size(); ++i) std::fprintf(f, "%s%.4f", i ? ", " : "", r.ms[i]);
  if (r.peak_mib >= 0) std::fprintf(f, "], \"peak_mib\": %.1f, ", r.peak_mib);
  else std::fprintf(f, "], \"peak_mib\": null, ");
  std::fprintf(f, "\"status\": \"%s\", \"device\": \"%s\", \"cudnn_version\": \"%d.%d.%d\"}\n", r.status.c_str(),
               r.device.c_str(), v / 10000, v / 100 % 100, v % 100);
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  Result res;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::fprintf(stderr, "rnntrain_cudnn_bench: no CUDA device (%s); this program times cuDNN on a GPU\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0");
    res.status = "failed: no CUDA device";
    report(o, res);
    return 2;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) res.device = prop.name;
  try {
    run(o, res);
  } catch (const CallError& err) {
    std::fprintf(stderr, "rnntrain_cudnn_bench: %s\n", err.what());
    res.status = "failed: " + err.name;
    res.ms.clear();
    report(o, res);
    return 3;
  }
  report(o, res);
  return 0;
}
