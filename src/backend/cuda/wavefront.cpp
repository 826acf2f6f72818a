// Host side of the wavefront kernels: how a stack is cut into launches (groups of layers that fit
// on chip together, batch slices), the buffers between them, and the cuBLAS GEMMs around them.
#include "backend/cuda/wavefront.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/blas.h"
#include "backend/cuda/layout/wavefront_launches.h"
#include "core/error.h"

namespace rnntrain::cuda {

namespace {

std::atomic<int64_t> passes{0}, passes2{0}, backward_passes2{0};

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
size_t align128(size_t n) { return (n + 127) & ~size_t(127); }

// How one launch of `layers` layers over batch slices of Bs sequences divides the GPU: S = 0 when
// its weights and buffers do not fit in one block's shared memory. Mirrors Smem in the kernels.
wf::Split split(const WavefrontShape& s, int64_t layers, int64_t Bs, bool fwd) {
  const int64_t rows = layers * s.dirs, H = s.hidden, G = cell_traits(s.cell).gates;
  const int64_t Hp = round_up(H, 16), GHp = round_up(G * H, 16);
  if (rows > wf::kMaxRows) return {};
  int64_t S = wf::sm_count() / rows;
  if (S < 1) return {};
  const int64_t U = (H + S - 1) / S;
  S = (H + U - 1) / U;
  const int64_t N = round_up(fwd ? G * U : U, 16);
  const int64_t K = fwd ? (layers > 1 ? s.dirs * Hp : 0) + Hp : (layers > 1 ? s.dirs * GHp : 0) + GHp;
  const int64_t Bp = round_up(Bs, 16), TM = Bp / 16;
  if (TM > wf::kWarps || N / 16 > wf::kMaxTiles) return {};
  const int64_t ksplit = wf::kWarps / TM;
  const int64_t sides = fwd && s.cell == LayerKind::GRU ? 2 : 1;
  // Rows of 16 are swizzled instead of padded (kernels_wavefront.cu: swz); wider ones padded by 8
  // against bank conflicts where that fits.
  for (int64_t ldw : {N == 16 ? N : N + 8, N}) {
    const size_t rings = wf::kWarps * wf::kStages * 256 * 2, sums = ksplit * sides * Bp * (N + wf::kAccPad) * 4;
    const size_t smem = align128(K * ldw * 2) + align128(std::max(rings, sums)) + (Bs + 8) * U * 4;
    if (smem <= wf::smem_optin()) {
      wf::Split sp;
      sp.S = static_cast<int>(S), sp.U = static_cast<int>(U), sp.N = static_cast<int>(N);
      sp.ldw = static_cast<int>(ldw), sp.ksplit = static_cast<int>(ksplit);
      sp.smem = smem;
      return sp;
    }
  }
  return {};
}

struct GroupPlan {
  int64_t layers = 0, batch = 0;
  wf::Split fwd, bwd;
};

// The launch for layers first..: the most layers that fit with the largest batch slice (the whole
// batch when it fits, else halves of at most 256 sequences). layers = 0 when not even one layer of 16
// sequences fits.
GroupPlan plan_group(const WavefrontShape& s, int64_t first, int64_t B) {
  const int64_t most = s.dirs == 2 ? 1 : std::min<int64_t>(s.layers - first, wf::kMaxRows);
  for (int64_t Bs = B; Bs >= 1; Bs = Bs > 16 ? std::min<int64_t>(round_up(Bs / 2, 16), 256) : 0) {
    for (int64_t n = most; n >= 1; --n) {
      GroupPlan g{n, Bs, split(s, n, Bs, true), split(s, n, Bs, false)};
      if (g.fwd.S && g.bwd.S) return g;
    }
  }
  return {};
}

// The second design's clusters for a stack: U units per CTA (4U weight columns: 128 at most, where
// wgmma runs fastest), C = H / U CTAs per row (16 at most, a cluster). Its shared memory: the weight
// slice and the operand [64 x Kp], the biases, each thread's input side of the next step (2U floats,
// padded by 4 against bank conflicts), one mbarrier. C = 0 where H is too wide.
wf::Cluster cluster2(const WavefrontShape& s) {
  wf::Cluster cl;
  const int64_t H = s.hidden;
  cl.U = H > 256 ? 32 : H > 128 ? 16 : 8;
  cl.C = static_cast<int>((H + cl.U - 1) / cl.U);
  if (cl.C > 16) return {};
  cl.Kp = static_cast<int>(round_up(int64_t{cl.C} * cl.U, 16));
  const int64_t N = 4 * cl.U;
  cl.smem = static_cast<size_t>((N + 64) * cl.Kp * 2 + N * 4 + 128 * (2 * cl.U + 4) * 4 + 8);
  return cl;
}

// The second design's backward keeps the forward's clusters (C, U): a CTA holds its units' rows of
// the recurrent kernel ([U x C*KS], KS = 4U gate slots, for GRU too) and a ring of S slots of one dG
// slice each ([64 x KS]), as many as fit (at most C), then S + 1 mbarriers (a GRU without reset_after:
// up to 2S + 1, its recurrent rows' ring holding half slices). C = 0 where none fits.
wf::Cluster cluster2_backward(const WavefrontShape& s) {
  wf::Cluster cl = cluster2(s);
  if (!cl.C) return {};
  const int64_t KS = 4 * cl.U, weights = cl.U * cl.C * KS * 2, slot = 64 * KS * 2;
  const int64_t room = static_cast<int64_t>(wf::smem_optin()) - weights - 8 * (cl.C + 1);
  cl.S = static_cast<int>(std::min<int64_t>(cl.C, room / slot));
  if (cl.S < 1) return {};
  const int64_t bars = 1 + (s.reset_after ? cl.S : std::min(2 * cl.S, cl.C));
  cl.smem = static_cast<size_t>(weights + cl.S * slot + 8 * bars);
  return cl;
}

[[maybe_unused]] wf::Cell2 cell2(const WavefrontShape& s) {
  if (s.cell == LayerKind::LSTM) return wf::Cell2::Lstm;
  return s.reset_after ? wf::Cell2::Gru : wf::Cell2::GruResetFirst;
}
bool reset_first(const WavefrontShape& s) { return s.cell == LayerKind::GRU && !s.reset_after; }

// The forward and the backward run on the second design where the build and GPU have it (sm_90a) and
// the stack fits its clusters; RNNTRAIN_WAVEFRONT_DESIGN=1 keeps the first (for comparison, and its tests).
bool design2_allowed() {
#if RNNTRAIN_WITH_SM90A
  const char* v = std::getenv("RNNTRAIN_WAVEFRONT_DESIGN");
  return !(v && std::strcmp(v, "1") == 0) && wf::has_forward2();
#else
  return false;
#endif
}

}  // namespace

int64_t wavefront_passes() { return passes.load(); }
int64_t wavefront2_passes() { return passes2.load(); }
int64_t wavefront2_backward_passes() { return backward_passes2.load(); }

OwnKernelCheck own_kernel_check() {
  return [](const OwnStackShape& s, Precision precision) {
    return WavefrontRnn::unsupported(
        {s.cell, s.layers, s.dirs, s.input, s.hidden, precision == Precision::Bf16, s.reset_after}, precision, 1);
  };
}

std::string WavefrontRnn::unsupported(const WavefrontShape& s, Precision precision, int64_t batch) {
  if (!cell_traits(s.cell).wavefront)
    return fmt::format("the wavefront kernels do not have {} cells", layer_kind_name(s.cell));
  if (precision != Precision::Fp16 && precision != Precision::Bf16)
    return fmt::format("the wavefront kernels compute in fp16 or bf16, not {} (set plan.precision)",
                       precision_name(precision));
  if (s.dirs > 2 || s.layers < 1 || s.hidden < 1) return "internal: bad stack shape";
  if (reset_first(s)) {  // the second design only (sm_90a)
    if (!design2_allowed())
      return "GRU reset_after: false runs on the second design of the wavefront kernels only, which needs an "
             "sm_90 GPU (H100, H200) and a build for it";
#if RNNTRAIN_WITH_SM90A
    const wf::Cluster cl = cluster2(s), clb = cluster2_backward(s);
    if (!cl.C || !clb.C || !wf::max_clusters2(cl, cell2(s), s.bf16) || !wf::max_clusters2_backward(clb, cell2(s), s.bf16))
      return fmt::format("GRU reset_after: false runs on the second design only, whose clusters hold at most 512 "
                         "units a layer (this layer has {})",
                         s.hidden);
#endif
  }
  if (!plan_group(s, 0, std::max<int64_t>(batch, 1)).layers) {
    const wf::Split one = split(s, 1, 16, false);
    return fmt::format("a {}({}) layer's recurrent weights do not fit in the {} KiB of shared memory of the GPU's {} "
                       "multiprocessors{}",
                       layer_kind_name(s.cell), s.hidden, wf::smem_optin() / 1024, wf::sm_count(),
                       one.S ? "" : " (the hidden size is too large)");
  }
  return "";
}

WavefrontRnn::WavefrontRnn(Gpu& gpu, const WavefrontShape& shape) : gpu_(gpu), s_(shape) {
  G_ = cell_traits(s_.cell).gates;
  const int64_t H = s_.hidden;
  Hp_ = round_up(H, 16), GH_ = G_ * H, GHp_ = round_up(GH_, 16), GP_ = round_up(4 * H, 16);
  int64_t at = 0;
  auto take = [&](int64_t n) {
    const int64_t o = at;
    at = round_up(at + n, 64);  // 256-byte aligned in FP32, 128 in the half copy
    return o;
  };
  for (int64_t l = 0; l < s_.layers; ++l) {
    const int64_t in = l == 0 ? s_.input : s_.dirs * H;
    for (int64_t d = 0; d < s_.dirs; ++d) {
      Offsets o;
      o.kernel = take(in * GH_);
      o.recurrent = take(H * GH_);
      o.bias = take(s_.cell == LayerKind::GRU && s_.reset_after ? 2 * GH_ : GH_);
      off_.push_back(o);
    }
  }
  size_ = at;
}

void WavefrontRnn::make_groups(int64_t B) {
  groups_.clear();
  for (int64_t l = 0; l < s_.layers;) {
    const GroupPlan p = plan_group(s_, l, B);
    if (!p.layers)
      throw RuntimeError(fmt::format("the wavefront kernels cannot run {}({}) layers on this GPU ({}); set plan.algo: "
                                     "standard",
                                     layer_kind_name(s_.cell), s_.hidden, unsupported(s_, Precision::Bf16, B)));
    groups_.push_back({l, p.layers, p.batch, p.fwd, p.bwd});
    l += p.layers;
  }
  groups_for_ = B;
  groups2_.clear(), groups2b_.clear();
#if RNNTRAIN_WITH_SM90A
  if (design2_allowed()) {
    const wf::Cluster cl = cluster2(s_), clb = cluster2_backward(s_);
    if (cl.C) groups2_ = groups2(cl, wf::max_clusters2(cl, cell2(s_), s_.bf16), B);
    if (clb.C) groups2b_ = groups2(clb, wf::max_clusters2_backward(clb, cell2(s_), s_.bf16), B);
  }
#endif
  if (reset_first(s_) && (groups2_.empty() || groups2b_.empty()))
    throw RuntimeError(fmt::format("the wavefront kernels cannot run GRU({}) layers with reset_after: false on this GPU "
                                   "({}); set plan.algo: standard",
                                   s_.hidden, unsupported(s_, Precision::Bf16, B)));
}

// Layers as launches of the second design (layout/wavefront_launches.h).
std::vector<WavefrontRnn::Group2> WavefrontRnn::groups2(const wf::Cluster& cl, int64_t most_clusters,
                                                        int64_t B) const {
  std::vector<Group2> groups;
  for (const Launch2& l : split_launches2(s_.layers, s_.dirs, wf::kMaxRows, most_clusters, B)) {
    Group2 g{l.first, l.layers, cl};
    g.cl.rows = static_cast<int>(launch_rows2(s_.dirs, l.layers));
    g.cl.slices = static_cast<int>(l.slices);
    groups.push_back(g);
  }
  return groups;
}

void* WavefrontRnn::out(int64_t l) const {
  if (l == s_.layers - 1) return y_;
  return out_.get() + static_cast<size_t>(l * T_ * B_ * s_.dirs * s_.hidden) * es_;
}

void* WavefrontRnn::hseq(int64_t l) const {
  if (Hp_ == s_.hidden) return out(l);
  return hseq_.get() + static_cast<size_t>(l * T_ * B_ * s_.dirs * Hp_) * es_;
}

// Row pr's T + 1 slots of [B, GP] in gates_: its gates of steps 0..T-1 and, one slot over towards the
// step the backward ends at, its dG of the same steps (wavefront_kernels.h: Args::dgx).
char* WavefrontRnn::gates(int64_t pr, bool dg) const {
  const size_t slot = static_cast<size_t>(B_ * GP_) * es_;
  return gates_.get() + static_cast<size_t>(pr * (T_ + 1)) * slot + ((pr % s_.dirs == 0) == dg ? slot : 0);
}

const void* WavefrontRnn::layer_input(int64_t l) const { return l == 0 ? x_ : out(l - 1); }

void WavefrontRnn::project_input(int64_t l) {
  const int64_t D = s_.dirs, TB = T_ * B_, in = l == 0 ? s_.input : D * s_.hidden;
  for (int64_t d = 0; d < D; ++d)
    gemm_half(gpu_, s_.bf16, false, false, TB, GH_, in, 1.0f, layer_input(l), in,
              static_cast<const char*>(wh_) + off_[l * D + d].kernel * es_, GH_, 0.0f,
              xproj_.get() + static_cast<size_t>(d * TB * GH_) * es_, true, GH_);
}

wf::Args WavefrontRnn::args(int64_t first, int64_t layers, int64_t b0, int64_t Bs) const {
  wf::Args a;
  const int64_t D = s_.dirs, H = s_.hidden, TB = T_ * B_;
  a.gru = s_.cell == LayerKind::GRU;
  a.reset_after = !reset_first(s_);
  a.L = static_cast<int>(layers), a.D = static_cast<int>(D), a.B = static_cast<int>(B_), a.T = static_cast<int>(T_);
  a.H = static_cast<int>(H), a.Hp = static_cast<int>(Hp_), a.GH = static_cast<int>(GH_), a.GHp = static_cast<int>(GHp_);
  a.GP = static_cast<int>(GP_), a.ldgh = static_cast<int>(a.gru ? GHp_ : GP_);
  a.b0 = static_cast<int>(b0), a.Bs = static_cast<int>(Bs);
  a.lens = lens_;
  a.flags = flags_.get();
  a.xproj = xproj_.get();
  const char* wh = static_cast<const char*>(wh_);
  for (int64_t l = 0; l < layers; ++l) {
    const int64_t gl = first + l;
    a.hseq[l] = hseq(gl);
    a.out[l] = out(gl);
    for (int64_t d = 0; d < D; ++d) {
      const int64_t r = l * D + d, pr = gl * D + d;  // row in the launch, in the stack
      const Offsets& o = off_[pr];
      a.wk[r] = wh + o.kernel * es_;
      a.wr[r] = wh + o.recurrent * es_;
      a.bias[r] = w_ + o.bias;
      if (trained_) {
        a.gates[r] = gates(pr, false);
        a.dgx[r] = gates(pr, true);
        a.state[r] = state_.get() + static_cast<size_t>(pr * TB * H) * es_;
        a.dgh[r] = !a.gru ? a.dgx[r] : dgh_.get() ? dgh_.get() + static_cast<size_t>(pr * TB * GHp_) * es_ : nullptr;
        if (!a.reset_after) a.rh[r] = rh_.get() + static_cast<size_t>(pr * TB * H) * es_;
      }
    }
  }
  return a;
}

void WavefrontRnn::forward(int64_t B, int64_t T, const int32_t* lens, const void* x, void* y, void* hy, const void* wh,
                           const float* w, bool training) {
  const int64_t L = s_.layers, D = s_.dirs, H = s_.hidden, TB = T * B;
  cudaStream_t st = gpu_.stream();
  B_ = B, T_ = T, lens_ = lens, x_ = x, y_ = y, hy_ = hy, wh_ = wh, w_ = w, trained_ = training;
  if (groups_for_ != B) make_groups(B);
  fwd_waves_ = 0;
  ++passes;
  if (L > 1) out_.ensure(static_cast<int64_t>((L - 1) * TB * D * H * es_));
  if (Hp_ != H) {  // the padding columns are read (times zero weights): they must be zero
    const size_t bytes = static_cast<size_t>(L * TB * D * Hp_) * es_;
    CUDA_CHECK(cudaMemsetAsync(hseq_.ensure(static_cast<int64_t>(bytes)), 0, bytes, st));
  }
  xproj_.ensure(static_cast<int64_t>(D * TB * GH_ * es_));
  if (training) {
    gates_.ensure(static_cast<int64_t>(L * D * (T + 1) * B * GP_ * es_));
    state_.ensure(static_cast<int64_t>(L * D * TB * H * es_));
    if (reset_first(s_)) rh_.ensure(static_cast<int64_t>(L * D * TB * H * es_));
  }
  flags_.ensure(wf::kMaxRows * T);  // the backward's too
  if (!groups2_.empty()) return forward2();
  const bool bf16 = s_.bf16;
  for (const Group& g : groups_) {
    project_input(g.first);
    for (int64_t b0 = 0; b0 < B; b0 += g.batch) {
      wf::Args a = args(g.first, g.layers, b0, std::min(g.batch, B - b0));
      a.sp = g.fwd;
      if (g.first + g.layers == L) a.hy = hy;
      CUDA_CHECK(cudaMemsetAsync(flags_.get(), 0, sizeof(unsigned) * wf::kMaxRows * T, st));
      before_launch(g.layers, false);
      wf::launch_forward(a, bf16, st);
      after_launch(false);
    }
  }
}

void WavefrontRnn::forward2() {
#if RNNTRAIN_WITH_SM90A
  const int64_t D = s_.dirs, B = B_;
  cudaStream_t st = gpu_.stream();
  ++passes2;
  // Per batch slice of a launch: its recurrent rows' T steps of h (hcore; and two of r * h for a GRU
  // with reset_after: false) and its input rows' ring.
  const wf::Cluster& cl = groups2_[0].cl;
  const size_t step_elems = static_cast<size_t>(64 * cl.Kp);
  const int64_t steps = T_ + (reset_first(s_) ? 2 : 0);
  auto core_slice = [&](const Group2& g) { return static_cast<size_t>(g.layers * D * steps) * step_elems; };
  auto xring_slice = [&](const Group2& g) {
    return static_cast<size_t>((g.layers - 1) * wf::kRing2 * cl.C * 64 * 4 * cl.U);
  };
  size_t core = 0, ring = 0;
  int64_t side = 1;
  for (const Group2& g : groups2_) {
    core = std::max(core, g.cl.slices * core_slice(g));
    ring = std::max(ring, g.cl.slices * xring_slice(g));
    side = std::max<int64_t>(side, g.cl.slices);
  }
  char* hcore = hcore_.ensure(static_cast<int64_t>(core * es_));
  float* xring = ring ? xring_.ensure(static_cast<int64_t>(ring)) : nullptr;
  unsigned* done = done_.ensure(side * wf::kDone);
  for (const Group2& g2 : groups2_) {
    project_input(g2.first);
    const int64_t rows_at_once = 64 * g2.cl.slices;
    for (int64_t b0 = 0; b0 < B; b0 += rows_at_once) {
      wf::Args a = args(g2.first, g2.layers, b0, std::min(rows_at_once, B - b0));
      a.cl = g2.cl;
      a.cl.slices = static_cast<int>((a.Bs + 63) / 64);
      for (int64_t r = 0; r < g2.layers * D; ++r) a.hcore[r] = hcore + r * steps * step_elems * es_;
      a.xring = g2.layers > 1 ? xring : nullptr;
      a.done = done;
      a.core_slice = core_slice(g2), a.xring_slice = xring_slice(g2);
      if (g2.first + g2.layers == s_.layers) a.hy = hy_;
      CUDA_CHECK(cudaMemsetAsync(done, 0, sizeof(unsigned) * a.cl.slices * wf::kDone, st));
      before_launch(g2.layers, false);
      wf::launch_forward2(a, s_.bf16, st);
      after_launch(false);
    }
  }
#endif
}

void WavefrontRnn::backward(const void* dy, const void* dhy, void* dx, const void* wh, float* g) {
  if (!trained_) throw RuntimeError("internal: wavefront backward after an inference forward");
  const int64_t L = s_.layers, D = s_.dirs, H = s_.hidden, B = B_, T = T_, TB = T * B, DH = D * H;
  const bool gru = s_.cell == LayerKind::GRU;
  cudaStream_t st = gpu_.stream();
  wh_ = wh;
  bwd_waves_ = 0;
  if (gru && groups2b_.empty()) dgh_.ensure(static_cast<int64_t>(L * D * TB * GHp_ * es_));
  if (!groups2b_.empty()) {
    if (groups2b_.size() > 1) dy32_.ensure(TB * DH);
    for (auto it = groups2b_.rbegin(); it != groups2b_.rend(); ++it) {
      backward2(*it, dy, dhy);
      gradients(it->first, it->layers, dx, g);
    }
    return;
  }
  if (groups_.size() > 1) dy32_.ensure(TB * DH);
  for (auto it = groups_.rbegin(); it != groups_.rend(); ++it) {
    const Group& gr = *it;
    for (int64_t b0 = 0; b0 < B; b0 += gr.batch) {
      wf::Args a = args(gr.first, gr.layers, b0, std::min(gr.batch, B - b0));
      a.sp = gr.bwd;
      if (gr.first + gr.layers == L) a.dy = dy, a.dhy = dhy;
      else a.dy32 = dy32_.get();
      CUDA_CHECK(cudaMemsetAsync(flags_.get(), 0, sizeof(unsigned) * wf::kMaxRows * T, st));
      before_launch(gr.layers, true);
      wf::launch_backward(a, s_.bf16, st);
      after_launch(true);
    }
    gradients(gr.first, gr.layers, dx, g);
  }
}

void WavefrontRnn::backward2(const Group2& g2, const void* dy, const void* dhy) {
#if RNNTRAIN_WITH_SM90A
  const int64_t D = s_.dirs, B = B_;
  cudaStream_t st = gpu_.stream();
  ++backward_passes2;
  const wf::Cluster& cl = g2.cl;
  const int64_t KS = 4 * cl.U, rows = g2.layers * D, side = cl.slices, rows_at_once = 64 * side;
  const size_t ring_elems = static_cast<size_t>(wf::kRing2 * cl.C * 64 * KS);  // a row's dG slices
  const size_t core_slice = rows * ring_elems;
  const size_t xring_slice = g2.layers > 1 ? static_cast<size_t>((g2.layers - 1) * wf::kRing2 * cl.C * 64 * cl.U) : 0;
  char* gcore = gcore_.ensure(static_cast<int64_t>(side * core_slice * es_));
  float* xring = xring_slice ? xring_.ensure(static_cast<int64_t>(side * xring_slice)) : nullptr;
  unsigned* done = done_.ensure(side * wf::kDone);
  for (int64_t b0 = 0; b0 < B; b0 += rows_at_once) {
    wf::Args a = args(g2.first, g2.layers, b0, std::min(rows_at_once, B - b0));
    a.cl = cl;
    a.cl.slices = static_cast<int>((a.Bs + 63) / 64);
    for (int64_t r = 0; r < rows; ++r) a.gcore[r] = gcore + r * ring_elems * es_;
    a.xring = xring;
    a.done = done;
    a.core_slice = core_slice, a.xring_slice = xring_slice;
    if (g2.first + g2.layers == s_.layers) a.dy = dy, a.dhy = dhy;
    else a.dy32 = dy32_.get();
    CUDA_CHECK(cudaMemsetAsync(done, 0, sizeof(unsigned) * a.cl.slices * wf::kDone, st));
    before_launch(g2.layers, true);
    wf::launch_backward2(a, s_.bf16, st);
    after_launch(true);
  }
#else
  (void)g2, (void)dy, (void)dhy;
#endif
}

void WavefrontRnn::before_launch(int64_t layers, bool backward) {
  int64_t& waves = backward ? bwd_waves_ : fwd_waves_;
  if (ev_ && waves == 0) CUDA_CHECK(cudaEventRecord(ev_[backward ? 2 : 0], gpu_.stream()));
  waves += T_ + layers - 1;
}

void WavefrontRnn::after_launch(bool backward) {
  if (ev_) CUDA_CHECK(cudaEventRecord(ev_[backward ? 3 : 1], gpu_.stream()));
}

// After a launch of the backward over layers first..: their weight gradients as GEMMs over all steps
// and sequences at once, and the gradient of their input (the layers below get it as their output
// gradient, in dy32; layer 0's goes to dx unless it is null).
void WavefrontRnn::gradients(int64_t first, int64_t layers, void* dx, float* g) {
  const int64_t D = s_.dirs, H = s_.hidden, T = T_, TB = T * B_, DH = D * H, B = B_;
  const bool gru = s_.cell == LayerKind::GRU, bf16 = s_.bf16;
  cudaStream_t st = gpu_.stream();
  for (int64_t l = first; l < first + layers; ++l) {
    const int64_t in = l == 0 ? s_.input : DH;
    for (int64_t d = 0; d < D; ++d) {
      const int64_t pr = l * D + d;
      const Offsets& o = off_[pr];
      const char* dgx = gates(pr, true);
      gemm_half(gpu_, bf16, true, false, in, GH_, TB, 1.0f, layer_input(l), in, dgx, GP_, 1.0f, g + o.kernel, false,
                GH_);
      float* part = colsum_.ensure(wf::kColsumParts * GH_);
      wf::add_colsum(dgx, bf16, TB, GH_, GP_, part, g + o.bias, st);
      // The recurrent side's gradients, as column blocks: dgx itself (LSTM); dgh (a GRU on the first
      // design); z and r from dgx and the candidate's from dgx's columns 3H.. (a GRU on the second),
      // times r * h_{t-1} where reset_after is false.
      struct Side {
        const char* p = nullptr;
        int64_t ld = 0, col = 0, cols = 0;
      } sides[2] = {{dgx, GP_, 0, GH_}, {}};
      if (gru && groups2b_.empty()) sides[0] = {dgh_.get() + static_cast<size_t>(pr * TB * GHp_) * es_, GHp_, 0, GH_};
      else if (gru) sides[0] = {dgx, GP_, 0, 2 * H}, sides[1] = {dgx + static_cast<size_t>(3 * H) * es_, GP_, 2 * H, H};
      for (const Side& sd : sides) {
        if (!sd.p) continue;
        if (reset_first(s_) && sd.col == 2 * H) {  // r * h_{t-1} of every step (0 at the first)
          gemm_half(gpu_, bf16, true, false, H, sd.cols, TB, 1.0f, rh_.get() + static_cast<size_t>(pr * TB * H) * es_,
                    H, sd.p, sd.ld, 1.0f, g + o.recurrent + sd.col, false, GH_);
        } else if (T > 1) {  // h_{t-1} (forward direction) or h_{t+1} (backward) with the step's gradients
          const char* h = static_cast<const char*>(out(l)) + static_cast<size_t>(d * H) * es_;
          const size_t step_h = static_cast<size_t>(B * DH) * es_, step_g = static_cast<size_t>(B * sd.ld) * es_;
          gemm_half(gpu_, bf16, true, false, H, sd.cols, (T - 1) * B, 1.0f, d == 0 ? h : h + step_h, DH,
                    d == 0 ? sd.p + step_g : sd.p, sd.ld, 1.0f, g + o.recurrent + sd.col, false, GH_);
        }
        if (gru && s_.reset_after) wf::add_colsum(sd.p, bf16, TB, sd.cols, sd.ld, part, g + o.bias + GH_ + sd.col, st);
      }
    }
  }
  const int64_t l = first;
  if (l == 0 && !dx) return;
  const int64_t in = l == 0 ? s_.input : DH;
  const char* whc = static_cast<const char*>(wh_);
  for (int64_t d = 0; d < D; ++d) {
    const char* dgx = gates(l * D + d, true);
    const char* k = whc + off_[l * D + d].kernel * es_;
    const float beta = d == 0 ? 0.0f : 1.0f;
    if (l == 0) gemm_half(gpu_, bf16, false, true, TB, in, GH_, 1.0f, dgx, GP_, k, GH_, beta, dx, true, in);
    else gemm_half(gpu_, bf16, false, true, TB, in, GH_, 1.0f, dgx, GP_, k, GH_, beta, dy32_.get(), false, in);
  }
}

}  // namespace rnntrain::cuda
