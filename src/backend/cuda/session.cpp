// The CUDA session: model, loss and metric kernels and optimizer behind the engine's calls (see
// session.h). Targets are validated on the host (class labels at unmasked positions) before the loss
// runs. Training steps are enqueued; repeated training, evaluation and prediction steps are captured
// once as CUDA graphs and replayed.
#include "backend/cuda/session.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>

#include <fmt/format.h>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/device_optimizer.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/nccl.h"
#include "core/error.h"
#include "core/log.h"
#include "dist/comm.h"
#include "model/loss.h"

namespace rnntrain::cuda {

namespace {
std::atomic<int64_t> g_graph_steps{0}, g_graph_captures{0};
}  // namespace

int64_t graph_steps() { return g_graph_steps.load(); }
int64_t graph_captures() { return g_graph_captures.load(); }

struct Session::Impl {
  Impl(const Config& c, const ResolvedModel& m, Params& p, Comm* ranks)
      : cfg(c), params(p), model(gpu, m, cfg.plan, p, cfg.train.seed),
        opt(gpu, model.store(), cfg.train.optimizer, p, weight_regularizers(cfg.model, p),
            weight_constraints(cfg.model, p), keras_variable_paths(cfg.model, p)) {
    if (cfg.plan.precision == Precision::Fp16) opt.enable_loss_scale();
    // One launched rank takes the NCCL path where the build has it (mpirun -np 1 checks it against a
    // plain run), and trains alone where it does not.
    if (ranks && (ranks->distributed() || nccl_unavailable_reason().empty())) {
      if (const std::string why = nccl_unavailable_reason(); !why.empty()) throw UsageError(ranks->describe() + ": " + why);
      refuse_activity_regularizers(cfg.model, ranks->describe());
      check_own_gpu(*ranks);
      nccl = std::make_unique<Nccl>(*ranks);
      plan_buckets(*ranks);
      opt.share_clip_factors([this](float* f, int64_t n) { nccl->broadcast(f, n, gpu.stream()); });
      log_info("cuda: GPU {} of this machine, {} across {} rank(s); gradients summed in {} bucket(s) during backward "
               "and {} float(s) after it", gpu.device(), nccl->version(), ranks->size(), buckets.size(), rest);
    }
    use_graphs = cfg.plan.graphs && model.capturable();
    log_info("cuda: {}; {} parameters in {:.1f} MiB of device memory\n{}", device_description(), p.count(),
             static_cast<double>(device_bytes_held()) / (1024.0 * 1024.0), model.summary());
    if (cfg.plan.graphs && !use_graphs)
      log_info("cuda: masked training steps are launched one by one, not replayed as CUDA graphs: a layer other than "
               "the first makes a mask (Masking, mask_zero), or a bidirectional cuDNN stack takes its lengths from "
               "the data (no mask layer first) or has dropout, so the masks shape the GPU work of each batch");
  }

  // The loss checks on the host: targets fit predictions of shape `pred`, sparse labels are class
  // indices at unmasked positions. Returns the unmasked positions.
  double check_targets(const Shape& pred, const Batch& b, const std::vector<uint8_t>* mask) const;
  // The loss of `pred` against the uploaded targets yd into sums[0] (and its gradient into dpred when
  // grad; multiplied by the loss scale when scaled), then each metric's sum into sums[1 + j].
  // Returns the unmasked positions. With `ranks`, the gradient is the global batch's: scaled by 1 / the
  // positions of every rank, whose sum lands in sums[2 + metrics].
  double loss(const DevTensor& pred, const float* yd, const Batch& b, bool grad, bool scaled,
              const std::vector<MetricForm>& metrics = {}, bool ranks = false);
  // Data parallelism: the gradients are summed across the ranks in buckets of at least
  // RNNTRAIN_ALLREDUCE_BUCKET_MB (25 by default, as PyTorch's DDP) as backward makes them final, last
  // stage first, on comm_stream while backward goes on; the rest [0, rest), with the loss sum, once
  // backward is done. Every rank launches the same buckets in the same order (an empty share too).
  struct Bucket {
    int64_t first, n;
  };
  std::vector<Bucket> buckets;
  int64_t rest = 0;
  cudaStream_t comm_stream = nullptr;
  std::vector<cudaEvent_t> ready;  // per bucket and one for the rest: backward has made it final
  cudaEvent_t reduced = nullptr;   // comm_stream has summed them all
  void plan_buckets(Comm& ranks);
  // Refuses a rank whose GPU another rank computes on too (NCCL takes one GPU per rank).
  void check_own_gpu(Comm& ranks);
  void launch_bucket(size_t k);
  void finish_reduce();  // the rest and the loss sum; the compute stream waits for every sum
  // A training step of a rank whose share of the global batch is empty: it adds nothing to the sums
  // but takes part in the ranks' collectives and the update.
  void empty_work(const std::vector<MetricForm>& metrics);
  // The GPU work of a training step on uploaded inputs (what a CUDA graph captures): returns the
  // output and the unmasked positions.
  std::pair<DevTensor, double> train_work(const CudaModel::Input& in, const float* yd,
                                          const std::vector<MetricForm>& metrics);
  // The GPU work of an evaluation step (forward in inference mode, then with targets the loss and the
  // penalties into sums) or of a prediction (yd null: the forward only).
  std::pair<DevTensor, double> eval_work(const CudaModel::Input& in, const float* yd) {
    const DevTensor out = model.forward(in, false);
    if (!yd) return {out, 0.0};
    const double count = loss(out, yd, *in.batch, false, false);
    add_activity_penalty(sums.get() + 3);
    opt.penalty(sums.get() + 3);
    return {out, count};
  }
  void to_host(const DevTensor& d, Tensor* out) {
    if (!out) return;
    *out = Tensor(d.shape);
    copy_to_host(out->ptr(), d.ptr, sizeof(float) * d.numel(), gpu.stream());
    gpu.sync();
  }
  // The activity regularizers' penalty of the last forward into *to, a sum that loss() zeroed.
  void add_activity_penalty(double* to) {
    if (const double* a = model.activity_penalty())
      CUDA_CHECK(cudaMemcpyAsync(to, a, sizeof(double), cudaMemcpyDeviceToDevice, gpu.stream()));
  }
  double read_sum() {
    double v = 0.0;
    copy_to_host(&v, sums.get(), sizeof v, gpu.stream());
    gpu.sync();
    return v;
  }
  // The output's mask as 0/1 floats: the model's last forward's, or (replayed steps) the upload's.
  static void mask_tensor(const std::vector<uint8_t>& h, int64_t B, int64_t T, Tensor* out) {
    *out = Tensor({B, T});
    for (int64_t i = 0; i < B * T; ++i) (*out)[i] = h[i] ? 1.0f : 0.0f;
  }
  void mask_to_host(Tensor* out) {
    if (!out) return;
    *out = Tensor();
    MaskState& m = model.out_mask();
    if (m.present()) mask_tensor(m.on_host(gpu), m.B, m.T, out);
  }

  Config cfg;  // the model below keeps a reference to cfg.model
  Params& params;
  Gpu gpu;
  CudaModel model;
  DeviceOptimizer opt;
  std::unique_ptr<Nccl> nccl;  // data parallelism: the ranks' communicator
  Uploader target_up{gpu};
  std::vector<float> staged;  // targets and loss weights, side by side
  // The targets, and the batch's loss weights after them when it has any (loss() reads them there).
  const float* upload_targets(const Batch& b) {
    if (b.w.empty()) return static_cast<const float*>(target_up.put(b.y.ptr(), sizeof(float) * b.y.numel()));
    staged.assign(b.y.data.begin(), b.y.data.end());
    staged.insert(staged.end(), b.w.data.begin(), b.w.data.end());
    return static_cast<const float*>(target_up.put(staged.data(), sizeof(float) * staged.size()));
  }
  DeviceBuffer<float> dpred{"loss gradient"};
  DeviceBuffer<double> sums{"loss and metric sums"};
  DeviceBuffer<double> gscale{"loss gradient scale"};

  // Enqueued steps: pinned slots for their sums (`width` doubles each), an event each, and the queue.
  // A step's sums: the loss, the metrics' (MetricForm::width() each), the optimizer's non-finite flag,
  // the ranks' positions, the regularizers' penalty.
  struct Pending {
    int slot;
    double count;  // this rank's unmasked positions
    size_t metrics;  // the metrics' sums
  };
  static size_t sums_for(size_t metrics) { return 4 + metrics; }
  static size_t width_of(const std::vector<MetricForm>& metrics) {
    size_t n = 0;
    for (const MetricForm& f : metrics) n += static_cast<size_t>(f.width());
    return n;
  }
  double* sums_host = nullptr;
  size_t width = 0;
  cudaEvent_t done[kInFlight] = {};
  std::deque<Pending> pending;
  std::vector<StepLoss> collected;  // waited for early (queue full), not yet returned
  StepLoss finish_oldest();
  void reserve_slots(size_t nsums);
  // Queues the copy of the step's sums to a free slot, and its event.
  void record_step(double count, size_t metrics);

  // CUDA graphs of steps, one per signature: the kind of step, the shapes, the upload buffers the
  // step read (the Uploaders alternate between two) and the metrics. A graph is valid while
  // device_version() is what it was at its capture.
  enum class Work { Train, Eval, Predict };
  struct Signature {
    Work work = Work::Train;
    bool masked = false;  // lengths or a first-layer mask (run() sets it): its first run allocates them
    Shape x, y, w;
    const void* xd = nullptr;
    const void* yd = nullptr;
    std::vector<MetricForm> metrics;
    bool operator==(const Signature&) const = default;
    bool same_work(const Signature& o) const {
      return work == o.work && masked == o.masked && x == o.x && y == o.y && w == o.w && metrics == o.metrics;
    }
  };
  struct Graph {
    Signature sig;
    cudaGraphExec_t exec = nullptr;
    uint64_t used = 0;  // launches when it last ran
    DevTensor out;
    double count = 0.0;
    bool out_masked = false;  // a mask reaches the output: the host count of a replay needs it
  };
  // One graph per signature, the least recently used dropped beyond kMaxGraphs: bucketed batches
  // (train.bucketing, bucket_steps) take up to 53 shapes for 400 steps, each with either upload buffer.
  static constexpr size_t kMaxGraphs = 128;
  bool use_graphs = false;
  std::vector<Graph> graphs;
  uint64_t graphs_version = 0;  // device_version() when the graphs were captured
  uint64_t launches = 0;        // graph launches so far, for the least recently used
  // The work (Signature::same_work) of the steps that ran uncaptured and warm (allocating and changing
  // nothing on the device) at device_version() warm_version. A step is captured only when its work is
  // among them and nothing has changed since: its capture then allocates nothing and records the
  // work that step did, whatever other shapes ran in between.
  std::vector<Signature> warm;
  uint64_t warm_version = 0;
  bool ran_warm(const Signature& sig) const {
    return warm_version == device_version() &&
           std::any_of(warm.begin(), warm.end(), [&](const Signature& w) { return w.same_work(sig); });
  }
  void drop_graphs() {
    for (Graph& g : graphs) CUDA_LOG(cudaGraphExecDestroy(g.exec));
    graphs.clear();
  }
  using WorkFn = std::function<std::pair<DevTensor, double>()>;
  struct Ran {
    DevTensor out;
    double count = 0.0;             // unmasked positions
    const Graph* replay = nullptr;  // the graph replayed (the model's host state is then another step's)
  };
  // Runs a step's work (train_work or eval_work on the uploaded batch b): replays its graph, or
  // captures one where the same work ran warm before, or runs it uncaptured.
  Ran run(Signature sig, const Batch& b, const CudaModel::Input& in, const WorkFn& work);
  // Captures the work as a graph and launches it; on failure, turns graphs off (with a warning) and
  // runs the work uncaptured.
  std::pair<DevTensor, double> capture(const Signature& sig, const WorkFn& work);

  ~Impl() {
    CUDA_LOG(cudaStreamSynchronize(gpu.stream()));  // queued steps still copy into sums_host
    if (comm_stream) CUDA_LOG(cudaStreamSynchronize(comm_stream));
    drop_graphs();
    for (cudaEvent_t e : done)
      if (e) CUDA_LOG(cudaEventDestroy(e));
    for (cudaEvent_t e : ready) CUDA_LOG(cudaEventDestroy(e));
    if (reduced) CUDA_LOG(cudaEventDestroy(reduced));
    if (comm_stream) CUDA_LOG(cudaStreamDestroy(comm_stream));
    if (sums_host) CUDA_LOG(cudaFreeHost(sums_host));
  }
};

StepLoss Session::Impl::finish_oldest() {
  const Pending p = pending.front();
  pending.pop_front();
  CUDA_CHECK(cudaEventSynchronize(done[p.slot]));
  const double* v = sums_host + p.slot * width;
  const size_t m = p.metrics;
  return StepLoss{v[0], nccl ? v[2 + m] : p.count, std::vector<double>(v + 1, v + 1 + m), p.count, v[1 + m] == 0.0, v[3 + m]};
}

void Session::Impl::reserve_slots(size_t nsums) {
  if (nsums <= width) return;
  while (!pending.empty()) collected.push_back(finish_oldest());  // their sums live in the old slots
  if (sums_host) CUDA_CHECK(cudaFreeHost(sums_host));
  sums_host = nullptr;
  CUDA_CHECK(cudaMallocHost(&sums_host, sizeof(double) * nsums * kInFlight));
  width = nsums;
  for (cudaEvent_t& e : done)
    if (!e) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

double Session::Impl::check_targets(const Shape& pred, const Batch& b, const std::vector<uint8_t>* mask) const {
  const bool sparse = loss_info(cfg.train.loss.kind).targets == Targets::Labels;
  const int64_t K = pred.back(), N = shape_numel(pred) / K;
  const Tensor& y = b.y;
  if (y.numel() != (sparse ? N : N * K))
    throw DataError(fmt::format("the targets have shape {} but the predictions have shape {}; check the targets in "
                                "the data file and the units of the last layer",
                                shape_str(y.shape), shape_str(pred)));
  double count = 0.0;
  for (int64_t i = 0; i < N; ++i) count += (!mask || (*mask)[i]) ? 1.0 : 0.0;
  if (!sparse) return count;
  for (int64_t i = 0; i < N; ++i) {
    if (mask && !(*mask)[i]) continue;
    const float v = y[i];
    if (std::isfinite(v) && std::floor(v) == v && v >= 0.0f && v < static_cast<float>(K)) continue;
    const std::string where = pred.size() == 3 ? fmt::format("sample {}, step {}", i / pred[1], i % pred[1])
                                               : fmt::format("sample {}", i);
    throw DataError(fmt::format("sparse_categorical_crossentropy: label {} at {} is not a class index in [0, {}); "
                                "the last layer has {} units, so labels must be integers 0..{}; check the targets "
                                "or the units of the last layer",
                                v, where, K, K, K - 1));
  }
  return count;
}

double Session::Impl::loss(const DevTensor& pred, const float* yd, const Batch& b, bool grad, bool scaled,
                           const std::vector<MetricForm>& metrics, bool ranks) {
  MaskState& m = model.out_mask();
  const std::vector<uint8_t>* mask = m.present() ? &m.on_host(gpu) : nullptr;
  const double count = check_targets(pred.shape, b, mask);
  cudaStream_t st = gpu.stream();
  const int64_t K = pred.dim(-1), N = pred.numel() / K;
  // The loss, the metrics, the flag the optimizer raises when a parameter becomes inf or NaN, the
  // ranks' positions.
  const size_t nsums = sums_for(width_of(metrics));
  double* sd = sums.ensure(static_cast<int64_t>(nsums));
  CUDA_CHECK(cudaMemsetAsync(sd, 0, sizeof(double) * nsums, st));
  auto loss_args = [&](const LossSpec& spec, double* sum) {
    k::LossArgs a;
    a.kind = spec.kind;
    a.params = loss_params(spec);
    a.pred = pred.ptr, a.target = yd, a.sparse = loss_info(spec.kind).targets == Targets::Labels;
    a.mask = mask ? m.dev : nullptr;
    a.n = N, a.k = K;
    a.sum = sum;
    return a;
  };
  k::LossArgs a = loss_args(cfg.train.loss, sd);
  a.gscale = count > 0 ? 1.0 / count : 0.0;
  if (!b.w.empty()) {  // upload_targets put them after the targets
    a.weight = yd + b.y.numel();
    a.weight_per = positions_per_weight(b.w, N);
  }
  if (ranks) {  // every rank's positions, summed on the device
    double* all = sd + 2 + width_of(metrics);
    k::count_positions(mask ? m.dev : nullptr, N, all, st);
    nccl->sum(all, 1, st);
    k::invert_count(all, gscale.ensure(1), st);
    a.gscale_dev = gscale.get();
  } else if (mask) {  // the count of a masked step, on the device: a captured step replays it for any mask
    k::inverse_count(m.dev, N, gscale.ensure(1), st);
    a.gscale_dev = gscale.get();
  }
  a.gmul = scaled ? opt.loss_scale() : nullptr;
  if (grad) {
    a.grad = dpred.ensure(N * K);  // the kernels write every unmasked position; masked ones get no gradient
    if (mask) CUDA_CHECK(cudaMemsetAsync(a.grad, 0, sizeof(float) * N * K, st));
  }
  k::loss(a, st);
  double* at = sd + 1;  // each metric's sums, in order
  for (const MetricForm& f : metrics) {
    if (f.kind == MetricForm::Kind::Loss) {
      k::loss(loss_args(f.loss, at), st);
    } else if (f.kind == MetricForm::Kind::Accuracy) {
      k::AccuracyArgs c;
      c.rule = f.accuracy, c.threshold = static_cast<float>(f.threshold), c.top_k = f.top_k;
      c.pred = pred.ptr, c.target = yd, c.mask = mask ? m.dev : nullptr;
      c.n = N, c.k = K, c.sum = at;
      k::accuracy(c, st);
    } else if (f.kind == MetricForm::Kind::Moments) {
      k::MomentsArgs c;
      c.pred = pred.ptr, c.target = yd, c.mask = mask ? m.dev : nullptr;
      c.n = N, c.k = K, c.sums = at;
      k::moments(c, st);
    } else {
      k::ConfusionArgs c;
      c.rule = f.confusion;
      c.pred = pred.ptr, c.target = yd, c.mask = mask ? m.dev : nullptr;
      c.n = N, c.k = K, c.hist = at, c.width = f.width();
      k::confusion(c, st);
    }
    at += f.width();
  }
  return count;
}

std::pair<DevTensor, double> Session::Impl::train_work(const CudaModel::Input& in, const float* yd,
                                                       const std::vector<MetricForm>& metrics) {
  model.store().zero_grad();  // cuDNN's weight gradients accumulate
  const DevTensor out = model.forward(in, true);
  const double count = loss(out, yd, *in.batch, true, true, metrics, nccl != nullptr);
  add_activity_penalty(sums.get() + 3 + width_of(metrics));
  gpu.profiler().mark("loss and metrics");
  if (!nccl) {
    model.backward(DevTensor{dpred.get(), out.shape}, false, {}, opt.loss_scale());
  } else {
    size_t next = 0;  // the buckets launched so far
    model.backward(DevTensor{dpred.get(), out.shape}, false, [&](int64_t first) {
      while (next < buckets.size() && buckets[next].first >= first) launch_bucket(next++);
    }, opt.loss_scale());
    while (next < buckets.size()) launch_bucket(next++);  // a backward that stopped early leaves zeros
    finish_reduce();
  }
  opt.apply(sums.get() + 1 + width_of(metrics), sums.get() + 3 + width_of(metrics));
  gpu.profiler().mark("optimizer");
  return {out, count};
}

void Session::Impl::check_own_gpu(Comm& ranks) {
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, gpu.device()));
  const int n = static_cast<int>(sizeof p.uuid.bytes);
  const std::vector<uint8_t> all = ranks.allgather(p.uuid.bytes, n);
  for (int r = 0; r < ranks.size(); ++r)
    if (r != ranks.rank() && std::memcmp(all.data() + r * n, p.uuid.bytes, n) == 0)
      throw UsageError(fmt::format("{}: rank {} computes on the same GPU ({}, GPU {} of {} visible here); "
                                   "data-parallel training takes one GPU per rank: start at most as many ranks on a "
                                   "machine as it has GPUs, or give each rank its own (CUDA_VISIBLE_DEVICES)",
                                   ranks.describe(), r, p.name, gpu.device(), visible_devices()));
}

void Session::Impl::plan_buckets(Comm& ranks) {
  const char* env = std::getenv("RNNTRAIN_ALLREDUCE_BUCKET_MB");
  double mb = env && *env ? std::atof(env) : 25.0;
  ranks.broadcast(&mb, sizeof mb);  // rank 0's: mpirun does not pass every variable to other machines
  const auto floats = std::max<int64_t>(1, static_cast<int64_t>(mb * 1024 * 1024 / sizeof(float)));
  const auto& ranges = model.param_ranges();
  int64_t hi = model.store().size();  // [stage first, hi) is final after that stage's backward
  for (size_t i = ranges.size(); i-- > 0;)
    if (hi - ranges[i].first >= floats) {
      buckets.push_back({ranges[i].first, hi - ranges[i].first});
      hi = ranges[i].first;
    }
  rest = hi;
  // Every rank must sum the same ranges: the same model in the same device layout (cuDNN's weight
  // space can differ between cuDNN versions on different machines).
  uint64_t plan = static_cast<uint64_t>(model.store().size());
  for (const Bucket& b : buckets) plan = plan * 1000003u + static_cast<uint64_t>(b.first) * 31u + static_cast<uint64_t>(b.n);
  if (!ranks.same(static_cast<int64_t>(plan)))
    throw UsageError(fmt::format("{}: the ranks' models differ on the device ({} parameters in cuDNN's layout here); "
                                 "run the same rnntrain build, config and cuDNN version on every machine",
                                 ranks.describe(), model.store().size()));
  if (buckets.empty()) return;
  CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));
  ready.resize(buckets.size() + 1);
  for (cudaEvent_t& e : ready) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&reduced, cudaEventDisableTiming));
}

void Session::Impl::launch_bucket(size_t k) {
  CUDA_CHECK(cudaEventRecord(ready[k], gpu.stream()));
  CUDA_CHECK(cudaStreamWaitEvent(comm_stream, ready[k]));
  nccl->sum(model.store().g() + buckets[k].first, buckets[k].n, comm_stream);
}

void Session::Impl::finish_reduce() {
  cudaStream_t st = buckets.empty() ? gpu.stream() : comm_stream;
  if (!buckets.empty()) {
    CUDA_CHECK(cudaEventRecord(ready.back(), gpu.stream()));
    CUDA_CHECK(cudaStreamWaitEvent(comm_stream, ready.back()));
  }
  nccl->begin();
  if (rest > 0) nccl->sum(model.store().g(), rest, st);
  nccl->sum(sums.get(), 1, st);
  nccl->end();
  if (!buckets.empty()) {
    CUDA_CHECK(cudaEventRecord(reduced, comm_stream));
    CUDA_CHECK(cudaStreamWaitEvent(gpu.stream(), reduced));
  }
  gpu.profiler().mark("all-reduce");
}

void Session::Impl::empty_work(const std::vector<MetricForm>& metrics) {
  cudaStream_t st = gpu.stream();
  model.store().zero_grad();
  const size_t nsums = sums_for(width_of(metrics));
  double* sd = sums.ensure(static_cast<int64_t>(nsums));
  CUDA_CHECK(cudaMemsetAsync(sd, 0, sizeof(double) * nsums, st));
  nccl->sum(sd + 2 + width_of(metrics), 1, st);  // the positions, as loss() sums them
  for (size_t k = 0; k < buckets.size(); ++k) launch_bucket(k);
  finish_reduce();
  opt.apply(sd + 1 + width_of(metrics), sd + 3 + width_of(metrics));
}

std::pair<DevTensor, double> Session::Impl::capture(const Signature& sig, const WorkFn& work) {
  cudaStream_t st = gpu.stream();
  const uint64_t version = device_version();
  Graph g;
  g.sig = sig;
  cudaGraph_t graph = nullptr;
  try {
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    std::tie(g.out, g.count) = work();
    g.out_masked = model.out_mask().present();
    CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    if (device_version() != version) throw RuntimeError("device state changed during the capture");
    CUDA_CHECK(cudaGraphInstantiate(&g.exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
  } catch (const std::exception& e) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    CUDA_LOG(cudaStreamIsCapturing(st, &status));
    if (status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;
      (void)cudaStreamEndCapture(st, &partial);
      graph = graph ? graph : partial;
    }
    if (graph) CUDA_LOG(cudaGraphDestroy(graph));
    (void)cudaGetLastError();  // the capture's error, not sticky
    if (dynamic_cast<const DataError*>(&e)) throw;  // the batch is wrong, not the capture
    log_warn("cuda: capturing a step as a CUDA graph failed ({}); steps run uncaptured from now on "
             "(plan.graphs: false silences this)",
             e.what());
    use_graphs = false;
    drop_graphs();
    return work();
  }
  if (graphs_version != version) drop_graphs();  // graphs_version is the capture time of every graph kept
  graphs_version = version;
  if (graphs.size() == kMaxGraphs) {
    const auto lru = std::min_element(graphs.begin(), graphs.end(),
                                      [](const Graph& a, const Graph& b) { return a.used < b.used; });
    CUDA_LOG(cudaGraphExecDestroy(lru->exec));
    graphs.erase(lru);
  }
  g.used = ++launches;
  graphs.push_back(g);
  CUDA_CHECK(cudaGraphLaunch(g.exec, st));
  ++g_graph_steps, ++g_graph_captures;
  log_debug("cuda: captured the {} step on inputs {} as a CUDA graph",
            sig.work == Work::Train ? "training" : sig.work == Work::Eval ? "evaluation" : "prediction",
            shape_str(sig.x));
  return {g.out, g.count};
}

Session::Impl::Ran Session::Impl::run(Signature sig, const Batch& b, const CudaModel::Input& in, const WorkFn& work) {
  sig.masked = in.mask.present() || !b.lengths.empty();
  const bool graphable = use_graphs && (b.lengths.empty() || model.full_length()) && !gpu.profiler().on();
  if (graphable && graphs_version != device_version() && !graphs.empty()) {
    log_debug("cuda: {} CUDA graphs dropped: device buffers moved since their capture", graphs.size());
    drop_graphs();
  }
  Graph* hit = nullptr;
  for (Graph& g : graphs)
    if (graphable && g.sig == sig) hit = &g;
  if (hit) {
    const std::vector<uint8_t>* mask = hit->out_masked ? in.mask.host.get() : nullptr;
    const double count = sig.yd ? check_targets(hit->out.shape, b, mask) : 0.0;
    CUDA_CHECK(cudaGraphLaunch(hit->exec, gpu.stream()));
    hit->used = ++launches;
    ++g_graph_steps;
    return {hit->out, count, hit};
  }
  if (graphable && ran_warm(sig)) {
    const auto [out, count] = capture(sig, work);
    return {out, count};
  }
  const uint64_t allocs = device_allocs(), version = device_version();
  const auto [out, count] = work();
  if (graphable && device_allocs() == allocs && device_version() == version) {
    if (warm_version != version) warm.clear();
    warm_version = version;
    if (!ran_warm(sig)) warm.push_back(sig);
  }
  return {out, count};
}

Session::Session(const Config& cfg, const ResolvedModel& model, Params& params, Comm* ranks)
    : impl_(std::make_unique<Impl>(cfg, model, params, ranks)) {}
Session::~Session() {
  // A rank failing in a data-parallel run is about to end every rank (cli.cpp). Freeing device memory
  // or destroying the NCCL communicator waits for the GPU and the other ranks, which may be waiting
  // in a collective for this one: leave it all to the end of the process.
  if (impl_->nccl && impl_->nccl->ranks() > 1 && std::uncaught_exceptions() > 0) (void)impl_.release();
}

std::string Session::device_name() const { return "cuda (" + device_description() + ")"; }

void Session::enqueue_train_step(const Batch& b, double lr, int64_t t, Rng& rng,
                                 const std::vector<MetricForm>& metrics) {
  Impl& s = *impl_;
  const size_t nsums = Impl::sums_for(Impl::width_of(metrics));
  s.reserve_slots(nsums);
  if (static_cast<int>(s.pending.size()) == kInFlight) s.collected.push_back(s.finish_oldest());
  if (s.nccl && b.x.dim(0) == 0) {
    s.opt.set_step(lr, t);
    s.empty_work(metrics);
    s.record_step(0.0, Impl::width_of(metrics));
    return;
  }

  const CudaModel::Input in = s.model.upload(b);
  const float* yd = s.upload_targets(b);
  s.opt.set_step(lr, t);
  s.model.new_seed(rng);
  const Impl::Signature sig{Impl::Work::Train, false, b.x.shape, b.y.shape, b.w.shape, in.x.ptr, yd, metrics};
  const double count = s.run(sig, b, in, [&] { return s.train_work(in, yd, metrics); }).count;
  s.record_step(count, Impl::width_of(metrics));
}

void Session::Impl::record_step(double count, size_t metrics) {
  // A free slot (fewer than kInFlight are pending); one is taken only by a step that got this far.
  int slot = 0;
  while (std::any_of(pending.begin(), pending.end(), [&](const Pending& p) { return p.slot == slot; })) ++slot;
  cudaStream_t st = gpu.stream();
  CUDA_CHECK(cudaMemcpyAsync(sums_host + slot * width, sums.get(), sizeof(double) * sums_for(metrics),
                             cudaMemcpyDeviceToHost, st));
  CUDA_CHECK(cudaEventRecord(done[slot], st));
  pending.push_back({slot, count, metrics});
  gpu.profiler().end_step();
}

std::vector<StepLoss> Session::collect(bool wait) {
  Impl& s = *impl_;
  std::vector<StepLoss> out = std::move(s.collected);
  s.collected.clear();
  while (!s.pending.empty()) {
    if (!wait) {
      const cudaError_t e = cudaEventQuery(s.done[s.pending.front().slot]);
      if (e == cudaErrorNotReady) break;
      CUDA_CHECK(e);
    }
    out.push_back(s.finish_oldest());
  }
  return out;
}

StepLoss Session::eval_step(const Batch& b, Tensor* pred, Tensor* mask) {
  Impl& s = *impl_;
  const CudaModel::Input in = s.model.upload(b);
  const float* yd = s.upload_targets(b);
  const Impl::Signature sig{Impl::Work::Eval, false, b.x.shape, b.y.shape, b.w.shape, in.x.ptr, yd, {}};
  StepLoss l;
  const Impl::Ran r = s.run(sig, b, in, [&] { return s.eval_work(in, yd); });
  l.count = r.count;
  double v[4];
  copy_to_host(v, s.sums.get(), sizeof v, s.gpu.stream());
  s.gpu.sync();
  l.sum = v[0], l.penalty = v[3];
  s.to_host(r.out, pred);
  if (!r.replay) {
    s.mask_to_host(mask);
  } else if (mask) {  // a replayed step's output mask is the upload's (full_length), as its loss took it
    *mask = Tensor();
    if (r.replay->out_masked && in.mask.host) Impl::mask_tensor(*in.mask.host, in.mask.B, in.mask.T, mask);
  }
  return l;
}

Tensor Session::predict(const Batch& b) {
  Impl& s = *impl_;
  const CudaModel::Input in = s.model.upload(b);
  const Impl::Signature sig{Impl::Work::Predict, false, b.x.shape, {}, {}, in.x.ptr, nullptr, {}};
  Tensor pred;
  s.to_host(s.run(sig, b, in, [&] { return s.eval_work(in, nullptr); }).out, &pred);
  return pred;
}

StepLoss Session::gradients(const Batch& b, Rng& rng, Tensor* pred, Tensor* dx) {
  Impl& s = *impl_;
  const CudaModel::Input in = s.model.upload(b);
  const float* yd = s.upload_targets(b);
  s.model.new_seed(rng);
  s.model.store().zero_grad();
  const DevTensor out = s.model.forward(in, true);
  StepLoss l;
  l.count = s.loss(out, yd, b, true, false);
  l.sum = s.read_sum();
  s.to_host(out, pred);
  const DevTensor g = s.model.backward(DevTensor{s.dpred.get(), out.shape}, dx != nullptr);
  if (dx) {
    *dx = Tensor();
    if (g.ptr) s.to_host(g, dx);
  }
  s.model.store().download(s.params, true);
  s.gpu.profiler().end_step();
  return l;
}

void Session::download() {
  impl_->model.store().download(impl_->params, false);
  impl_->opt.download();
}

void Session::upload() {
  impl_->model.store().upload(impl_->params);
  impl_->opt.upload();
}

std::vector<std::pair<std::string, Tensor*>> Session::slots() { return impl_->opt.slots(); }

}  // namespace rnntrain::cuda
