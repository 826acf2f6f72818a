// One direction of a recurrent layer on the CPU: everything but the cell equations. The input
// projection of all steps is one GEMM ([T*B, I] x [I, G*H]); backward does one GEMM each for dW and dx.
// The per-step recurrent GEMMs and the cell math are in lstm.cpp, gru.cpp and simple_rnn.cpp.
#include "backend/cpu/recurrent.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "backend/cpu/cpu_math.h"
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
  return !bf16 && own_gemm_refusal(false).empty() ? CpuRnn::Own : CpuRnn::Onednn;
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

  // xp: [T, B, I] in processing order, times the input dropout mask.
  resize(tape.xp, {T, B, I});
  parallel_each(B, true, [&](int64_t b) {  // each row's copies are its own
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
  });

  // z: [T*B, G*H] = b_x + xp @ W, all steps in one GEMM.
  resize(tape.z, {T, B, GH});
  std::optional<OwnGemms> own = own_gemms();
  OwnGemms* og = own ? &*own : nullptr;
  const float* bx = w.bias ? w.bias->value.ptr() : nullptr;  // row 0 of a two-row bias
  steps_gemm(og, false, false, T * B, GH, I, tape.xp.ptr(), I, w.kernel->value.ptr(), GH, false, tape.z.ptr(), GH, bx);

  resize(tape.h, {T + 1, B, H});
  std::fill(tape.h.data.begin(), tape.h.data.begin() + B * H, 0.0f);
  if (tape.rec_drop.empty()) tape.hd = Tensor();
  else resize(tape.hd, {T, B, H});

  CellArgs a{spec_.activation, spec_.recurrent_activation, spec_.reset_after, B, T, H, w.recurrent->value.ptr(), nullptr, og};
  if (bias_rows(spec_) == 2) a.b_rec = w.bias->value.ptr() + GH;
  loops_->forward(a, tape);

  // The output: every step's state in processing order, or the state after the last step.
  if (!spec_.return_sequences) {
    Tensor y({B, H});
    std::memcpy(y.ptr(), tape.h.ptr() + T * B * H, sizeof(float) * B * H);
    return y;
  }
  Tensor y({B, T, H});
  parallel_each(B, true, [&](int64_t b) {  // each row's copies are its own
    for (int64_t s = 0; s < T; ++s) {
      if (zero_masked_outputs_ && !tape.used(s, b)) continue;  // stays 0 (Keras zero_output_for_mask)
      std::memcpy(y.ptr() + (b * T + s) * H, tape.h.ptr() + ((s + 1) * B + b) * H, sizeof(float) * H);
    }
  });
  return y;
}

Tensor RnnDirection::backward(const RnnWeights& w, const RnnTape& tape, const Tensor& dy) const {
  const int64_t B = tape.B, T = tape.T, I = tape.I, H = tape.H, GH = gates_ * H;
  auto time_of = [&](int64_t s) { return go_backwards_ ? T - 1 - s : s; };

  // dyp: [T, B, H] gradient of each step's output, processing order.
  Tensor dyp({T, B, H});
  if (spec_.return_sequences) {
    parallel_each(B, true, [&](int64_t b) {  // each row's copies are its own
      for (int64_t s = 0; s < T; ++s) {
        if (tape.zero_masked_outputs && !tape.used(s, b)) continue;
        std::memcpy(dyp.ptr() + (s * B + b) * H, dy.ptr() + (b * T + s) * H, sizeof(float) * H);
      }
    });
  } else if (T > 0) {
    std::memcpy(dyp.ptr() + (T - 1) * B * H, dy.ptr(), sizeof(float) * B * H);
  }

  std::optional<OwnGemms> own = own_gemms();
  OwnGemms* og = own ? &*own : nullptr;
  CellArgs a{spec_.activation, spec_.recurrent_activation, spec_.reset_after, B, T, H, w.recurrent->value.ptr(), nullptr, og};
  float* db_rec = nullptr;
  if (bias_rows(spec_) == 2) {
    a.b_rec = w.bias->value.ptr() + GH;
    db_rec = w.bias->grad.ptr() + GH;
  }
  Tensor dz({T, B, GH});  // d loss / d(x@W + b_x)
  loops_->backward(a, tape, dyp.ptr(), dz.ptr(), w.recurrent->grad.ptr(), db_rec);

  // dW += xp^T dz over all steps; db_x += column sums of dz.
  steps_gemm(og, true, false, I, GH, T * B, tape.xp.ptr(), I, dz.ptr(), GH, true, w.kernel->grad.ptr(), GH);
  if (w.bias) add_colsum(dz.ptr(), T * B, GH, GH, w.bias->grad.ptr());

  // dx: dxp = dz @ W^T ([T*B, I]), back to [B, T, I] time order, times the input dropout mask.
  Tensor dxp({T, B, I});
  steps_gemm(og, false, true, T * B, I, GH, dz.ptr(), GH, w.kernel->value.ptr(), GH, false, dxp.ptr(), I);
  Tensor dx({B, T, I});
  parallel_each(B, true, [&](int64_t b) {  // each row's copies are its own
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
  });
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
