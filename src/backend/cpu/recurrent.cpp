// One direction of a recurrent layer on the CPU: everything but the cell equations. The input
// projection of all steps is one GEMM ([T*B, I] x [I, G*H]) and backward's dx another, or, on the own
// engine, one per step for each slice of batch rows in the loop's parallel region (RowHooks); dW is
// one GEMM over all steps. The per-step recurrent GEMMs and the cell math are in lstm.cpp, gru.cpp
// and simple_rnn.cpp.
#include "backend/cpu/recurrent.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "backend/cpu/cpu_math.h"
#include "backend/cpu/profile.h"
#include "backend/engine.h"
#include "core/error.h"
#include "spec/shapes.h"

namespace rnntrain::cpu {
namespace {

constexpr CellLoops kLoops[] = {
    {LayerKind::LSTM, lstm_forward, lstm_backward},
    {LayerKind::GRU, gru_forward, gru_backward},
    {LayerKind::SimpleRNN, simple_rnn_forward, simple_rnn_backward},
};

const CellLoops* loops_of(LayerKind k) {
  for (const CellLoops& l : kLoops)
    if (l.kind == k) return &l;
  throw RuntimeError(fmt::format("internal: the CPU has no time loops for {}", layer_kind_name(k)));
}

// One mask per sequence, scaled (inverted dropout), as Keras' DropoutRNNCell; empty when off.
void draw_dropout(std::vector<float>& m, double rate, int64_t n, bool training, Rng& rng) {
  m.clear();
  if (!training || !(rate > 0.0 && rate < 1.0)) return;  // Keras applies it only for 0 < rate < 1
  const double keep = 1.0 - rate;
  const float scale = static_cast<float>(1.0 / keep);
  m.resize(n);
  for (float& v : m) v = rng.uniform() < keep ? scale : 0.0f;
}

}  // namespace

void resize(Tensor& t, Shape s) {
  t.shape = std::move(s);
  t.data.resize(shape_numel(t.shape));
}

CpuRnn cpu_path(CpuRnn configured, bool bf16) {
  if (configured != CpuRnn::Auto) return configured;
  // bf16: the own engine where its GEMMs run on AMX tiles (1.1-1.3x oneDNN's bf16 stacks at 2 and 16
  // threads on a Xeon, bench/RESULTS.md), else oneDNN (its AMX stacks beat the AVX512-BF16 kernel).
  if (bf16) return amx_mode() == AmxMode::Hardware ? CpuRnn::Own : CpuRnn::Onednn;
  return own_gemm_refusal(false).empty() ? CpuRnn::Own : CpuRnn::Onednn;
}

RnnMath rnn_math(CpuRnn cpu, bool bf16) {
  cpu = cpu_path(cpu, bf16);
  if (cpu == CpuRnn::Onednn) return bf16 && own_gemm_refusal(true).empty() ? RnnMath::OwnBf16 : RnnMath::Reference;
  if (cpu != CpuRnn::Own || !own_gemm_refusal(false).empty()) return RnnMath::Reference;
  return bf16 && own_gemm_refusal(true).empty() ? RnnMath::OwnBf16 : RnnMath::Own;
}

void OwnGemms::need(bool t, const float* U, int64_t H, int64_t G, int64_t c0, int64_t w) {
  for (const Entry& e : u_)
    if (e.t == t && e.c0 == c0) return;
  u_.push_back({t, c0, {}});
  // U[:, c0:c0+w] is [H, w] with row stride G; its transpose is [w, H], read as that block with tb.
  u_.back().b.pack(bf16_, t, U + c0, G, t ? w : H, t ? H : w);
}

const PackedB& OwnGemms::get(bool t, int64_t c0) const {
  for (const Entry& e : u_)
    if (e.t == t && e.c0 == c0) return e.b;
  throw RuntimeError("internal: a recurrent GEMM block the cell loop did not pack");
}

const PackedB& OwnGemms::steps_b(bool tb, const float* b, int64_t ldb, int64_t k, int64_t n) {
  if (last_.b != b || last_.tb != tb || last_.ldb != ldb || last_.k != k || last_.n != n) {
    steps_.pack(bf16_, tb, b, ldb, k, n);
    last_ = {tb, b, ldb, k, n};
  }
  return steps_;
}

void loop_rows(const CellArgs& a, const std::function<void(int64_t, int64_t)>& fn) {
  const RowHooks* h = a.hooks;
  // Profiled only: each thread's start and busy time (ms after t0), for what the region loses to its
  // threads; unprofiled steps read no clock here.
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
  };
  const bool timed = Profile::active();
  std::vector<double> start(timed ? std::max(1, blas_threads()) : 0, -1.0), busy(start.size(), 0.0);
  const Clock::time_point t0 = timed ? Clock::now() : Clock::time_point{};
  parallel_rows(a.B, slice_rows(a), [&](int64_t b0, int64_t b1) {
    const Clock::time_point t = timed ? Clock::now() : Clock::time_point{};
    if (h && h->before) h->before(b0, b1);
    fn(b0, b1);
    if (h && h->after) h->after(b0, b1);
    if (const size_t k = static_cast<size_t>(omp_get_thread_num()); k < start.size()) {
      if (start[k] < 0) start[k] = ms(t0, t);
      busy[k] += ms(t, Clock::now());
    }
  });
  if (!timed) return;
  double last = 0.0, most = 0.0, least = std::numeric_limits<double>::max();
  for (size_t k = 0; k < start.size(); ++k) {
    if (start[k] < 0) continue;  // a thread that ran no slice
    last = std::max(last, start[k]);
    most = std::max(most, busy[k]);
    least = std::min(least, busy[k]);
  }
  if (least > most) return;  // no rows, no slices
  Profile::note_current("last thread's start", last);
  Profile::note_current("slowest thread over the fastest", most - least);
}

int64_t slice_rows(const CellArgs& a) {
  if (!a.own) return kSliceRows;
  const int64_t threads = std::max(1, blas_threads());
  return std::clamp<int64_t>((a.B + threads - 1) / threads, 2, kSliceRows);
}

void pack_step_gemm(const CellArgs& a, int64_t G, bool t, int64_t c0, int64_t w) {
  if (a.own) a.own->need(t, a.U, a.H, G, c0, w);
}

void step_gemm(const CellArgs& a, int64_t G, bool t, int64_t c0, int64_t w, int64_t n, const float* x, int64_t ldx,
               bool accumulate, float* c, int64_t ldc) {
  if (a.own) gemm_packed(n, false, x, ldx, a.own->get(t, c0), accumulate, c, ldc);
  else if (t) gemm(false, true, n, a.H, w, 1.0f, x, ldx, a.U + c0, G, accumulate ? 1.0f : 0.0f, c, ldc);
  else gemm(false, false, n, w, a.H, 1.0f, x, ldx, a.U + c0, G, accumulate ? 1.0f : 0.0f, c, ldc);
}

void steps_gemm(OwnGemms* own, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc, const float* bias) {
  if (!own) {
    if (bias && !accumulate) {
      for (int64_t r = 0; r < m; ++r) std::memcpy(c + r * ldc, bias, sizeof(float) * n);
      accumulate = true;
    }
    gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
    return;
  }
  const PackedB& pb = own->steps_b(tb, b, ldb, k, n);
  // One run of rows per thread, whole blocks of 8: gemm_packed passes each panel of B over all of them.
  const int64_t threads = std::max(1, blas_threads()), slice = ((m + threads - 1) / threads + 7) / 8 * 8;
  parallel_rows(m, slice, [&](int64_t r0, int64_t r1) {
    gemm_packed(r1 - r0, ta, ta ? a + r0 : a + r0 * lda, lda, pb, accumulate, c + r0 * ldc, ldc, bias);
  });
}

RnnDirection::RnnDirection(const LayerSpec& spec, bool go_backwards, bool zero_masked_outputs, RnnMath math)
    : spec_(spec), go_backwards_(go_backwards), zero_masked_outputs_(zero_masked_outputs), math_(math),
      gates_(cell_traits(spec.kind).gates), loops_(loops_of(spec.kind)) {}

std::optional<OwnGemms> RnnDirection::own_gemms() const {
  if (math_ == RnnMath::Reference) return std::nullopt;
  return OwnGemms(math_ == RnnMath::OwnBf16);
}

RnnWeights RnnDirection::weights(const LayerSpec& owner, LayerParams& p, size_t first, int64_t input) const {
  const int64_t h = spec_.units, gh = gates_ * h;
  RnnWeights w{};
  w.kernel = &layer_param(owner, p, first, {input, gh});
  w.recurrent = &layer_param(owner, p, first + 1, {h, gh});
  w.bias = nullptr;
  if (const int rows = bias_rows(spec_); rows > 0) w.bias = &layer_param(owner, p, first + 2, rows == 2 ? Shape{2, gh} : Shape{gh});
  return w;
}

Tensor RnnDirection::forward(const RnnWeights& w, const Tensor& x, const Mask& mask, bool training, Rng& rng,
                             RnnTape& tape) const {
  // x: [B, T, I]
  const int64_t B = x.dim(0), T = x.dim(1), I = x.dim(2), H = spec_.units, GH = gates_ * H;
  tape.B = B;
  tape.T = T;
  tape.I = I;
  tape.H = H;
  tape.zero_masked_outputs = zero_masked_outputs_;
  auto time_of = [&](int64_t s) { return go_backwards_ ? T - 1 - s : s; };

  tape.step_mask.clear();
  if (!mask.empty()) {
    tape.step_mask.resize(T * B);
    for (int64_t s = 0; s < T; ++s)
      for (int64_t b = 0; b < B; ++b) tape.step_mask[s * B + b] = mask[b * T + time_of(s)];
  }
  draw_dropout(tape.in_drop, spec_.dropout, B * I, training, rng);
  draw_dropout(tape.rec_drop, spec_.recurrent_dropout, B * H, training, rng);

  // xp: [T, B, I] in processing order, times the input dropout mask; z: [T*B, G*H] = b_x + xp @ W.
  resize(tape.xp, {T, B, I});
  resize(tape.z, {T, B, GH});
  auto gather = [&](int64_t b) {  // row b of xp, every step
    for (int64_t s = 0; s < T; ++s) {
      const float* src = x.ptr() + (b * T + time_of(s)) * I;
      float* dst = tape.xp.ptr() + (s * B + b) * I;
      if (tape.in_drop.empty()) {
        std::memcpy(dst, src, sizeof(float) * I);
      } else {
        const float* m = tape.in_drop.data() + b * I;
        for (int64_t i = 0; i < I; ++i) dst[i] = src[i] * m[i];
      }
    }
  };
  std::optional<OwnGemms> own = own_gemms();
  OwnGemms* og = own ? &*own : nullptr;
  const float* W = w.kernel->value.ptr();
  const float* bx = w.bias ? w.bias->value.ptr() : nullptr;  // row 0 of a two-row bias
  CellArgs a{spec_.activation, spec_.recurrent_activation, spec_.reset_after, B, T, H, w.recurrent->value.ptr(), nullptr, og};
  if (bias_rows(spec_) == 2) a.b_rec = w.bias->value.ptr() + GH;
  // The own engine gathers and projects a slice's rows in the loop's parallel region, just before its
  // loop (RowHooks); OpenBLAS makes z in one GEMM over all rows first.
  RowHooks hooks;
  if (og) {
    const PackedB& pw = og->steps_b(false, W, GH, I, GH);
    Profile::mark_current("  own: pack W, buffers");
    hooks.before = [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) gather(b);
      for (int64_t s = 0; s < T; ++s) {
        const int64_t r = s * B + b0;  // the slice's first row of step s
        gemm_packed(b1 - b0, false, tape.xp.ptr() + r * I, I, pw, false, tape.z.ptr() + r * GH, GH, bx);
      }
    };
  } else {
    parallel_each(B, true, gather);
    steps_gemm(nullptr, false, false, T * B, GH, I, tape.xp.ptr(), I, W, GH, false, tape.z.ptr(), GH, bx);
  }

  resize(tape.h, {T + 1, B, H});
  std::fill(tape.h.data.begin(), tape.h.data.begin() + B * H, 0.0f);
  if (tape.rec_drop.empty()) tape.hd = Tensor();
  else resize(tape.hd, {T, B, H});

  // The output: every step's state in processing order (each slice copies its rows after its loop),
  // or the state after the last step.
  Tensor y = spec_.return_sequences ? Tensor({B, T, H}) : Tensor({B, H});
  auto output = [&](int64_t b) {
    for (int64_t s = 0; s < T; ++s) {
      if (zero_masked_outputs_ && !tape.used(s, b)) continue;  // stays 0 (Keras zero_output_for_mask)
      std::memcpy(y.ptr() + (b * T + s) * H, tape.h.ptr() + ((s + 1) * B + b) * H, sizeof(float) * H);
    }
  };
  if (og && spec_.return_sequences)
    hooks.after = [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) output(b);
    };
  a.hooks = &hooks;
  loops_->forward(a, tape);
  if (og) Profile::mark_current("  own: forward loop");

  if (!spec_.return_sequences) std::memcpy(y.ptr(), tape.h.ptr() + T * B * H, sizeof(float) * B * H);
  else if (!og) parallel_each(B, true, output);
  return y;
}

Tensor RnnDirection::backward(const RnnWeights& w, const RnnTape& tape, const Tensor& dy) {
  const int64_t B = tape.B, T = tape.T, I = tape.I, H = tape.H, GH = gates_ * H;
  auto time_of = [&](int64_t s) { return go_backwards_ ? T - 1 - s : s; };

  // dyp: [T, B, H] gradient of each step's output, processing order.
  Tensor dyp({T, B, H});
  auto copy_dy = [&](int64_t b) {
    for (int64_t s = 0; s < T; ++s) {
      if (tape.zero_masked_outputs && !tape.used(s, b)) continue;
      std::memcpy(dyp.ptr() + (s * B + b) * H, dy.ptr() + (b * T + s) * H, sizeof(float) * H);
    }
  };
  std::optional<OwnGemms> own = own_gemms();
  OwnGemms* og = own ? &*own : nullptr;
  if (!spec_.return_sequences) {
    if (T > 0) std::memcpy(dyp.ptr() + (T - 1) * B * H, dy.ptr(), sizeof(float) * B * H);
  } else if (!og) {
    parallel_each(B, true, copy_dy);
  }

  CellArgs a{spec_.activation, spec_.recurrent_activation, spec_.reset_after, B, T, H, w.recurrent->value.ptr(), nullptr, og};
  float* db_rec = nullptr;
  if (bias_rows(spec_) == 2) {
    a.b_rec = w.bias->value.ptr() + GH;
    db_rec = w.bias->grad.ptr() + GH;
  }
  // dx: dxp = dz @ W^T ([T*B, I]), back to [B, T, I] time order, times the input dropout mask. The
  // own engine makes a slice's rows in the loop's parallel region, after its loop (and copies its rows
  // of dy in before it); OpenBLAS in one GEMM after the loops.
  const float* W = w.kernel->value.ptr();
  Tensor& dz = dz_;  // d loss / d(x@W + b_x)
  Tensor& dxp = dxp_;
  resize(dz, {T, B, GH});
  resize(dxp, {T, B, I});
  Tensor dx({B, T, I});
  auto copy_dx = [&](int64_t b) {
    for (int64_t s = 0; s < T; ++s) {
      const float* src = dxp.ptr() + (s * B + b) * I;
      float* dst = dx.ptr() + (b * T + time_of(s)) * I;
      if (tape.in_drop.empty()) {
        std::memcpy(dst, src, sizeof(float) * I);
      } else {
        const float* m = tape.in_drop.data() + b * I;
        for (int64_t i = 0; i < I; ++i) dst[i] = src[i] * m[i];
      }
    }
  };
  RowHooks hooks;
  std::vector<float> db_rows;  // own engine: each batch row's sums of dz over its steps, [B, G*H]
  if (og) {
    if (spec_.return_sequences)
      hooks.before = [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) copy_dy(b);
      };
    const PackedB& pwt = og->steps_b(true, W, GH, GH, I);  // W^T; the loops' dU repacks the slot after
    if (w.bias) db_rows.assign(static_cast<size_t>(B * GH), 0.0f);
    hooks.after = [&](int64_t b0, int64_t b1) {
      for (int64_t s = 0; s < T; ++s)
        gemm_packed(b1 - b0, false, dz.ptr() + (s * B + b0) * GH, GH, pwt, false, dxp.ptr() + (s * B + b0) * I, I);
      for (int64_t b = b0; b < b1; ++b) {
        copy_dx(b);
        if (db_rows.empty()) continue;
        float* sum = db_rows.data() + b * GH;  // while the slice's dz is still in this core's cache
        for (int64_t s = 0; s < T; ++s) {
          const float* d = dz.ptr() + (s * B + b) * GH;
          for (int64_t j = 0; j < GH; ++j) sum[j] += d[j];
        }
      }
    };
  }
  if (og) Profile::mark_current("  own: pack W^T, buffers");
  a.hooks = &hooks;
  loops_->backward(a, tape, dyp.ptr(), dz.ptr(), w.recurrent->grad.ptr(), db_rec);
  if (og) Profile::mark_current("  own: backward loop");

  // dW += xp^T dz over all steps; db_x += column sums of dz (own engine: the rows' sums, in row order,
  // so the bits do not depend on how the rows were sliced).
  steps_gemm(og, true, false, I, GH, T * B, tape.xp.ptr(), I, dz.ptr(), GH, true, w.kernel->grad.ptr(), GH);
  if (!og && w.bias) add_colsum(dz.ptr(), T * B, GH, GH, w.bias->grad.ptr());
  if (!db_rows.empty()) add_colsum(db_rows.data(), B, GH, GH, w.bias->grad.ptr());
  if (og) Profile::mark_current("  own: dW, db");
  if (!og) {
    steps_gemm(nullptr, false, true, T * B, I, GH, dz.ptr(), GH, W, GH, false, dxp.ptr(), I);
    parallel_each(B, true, copy_dx);
  }
  return dx;
}

const float* recurrent_input(RnnTape& tape, int64_t s, int64_t b0, int64_t b1) {
  const int64_t H = tape.H, first = (s * tape.B + b0) * H;  // row b0 of step s
  const float* hprev = tape.h.ptr() + first;
  if (tape.rec_drop.empty()) return hprev;
  float* hd = tape.hd.ptr() + first;
  const float* m = tape.rec_drop.data() + b0 * H;
  for (int64_t k = 0; k < (b1 - b0) * H; ++k) hd[k] = hprev[k] * m[k];
  return hd;
}

void carry_dh(const RnnTape& tape, int64_t b, int64_t H, const float* dhr, float* dh) {
  if (tape.rec_drop.empty()) {
    std::memcpy(dh, dhr, sizeof(float) * H);
    return;
  }
  const float* m = tape.rec_drop.data() + b * H;
  for (int64_t j = 0; j < H; ++j) dh[j] = dhr[j] * m[j];
}

}  // namespace rnntrain::cpu
