// One direction of a recurrent layer on the CPU: everything but the cell equations. The input
// projection of all steps is one GEMM ([T*B, I] x [I, G*H]); backward does one GEMM each for dW and dx.
// The per-step recurrent GEMMs and the cell math are in lstm.cpp, gru.cpp and simple_rnn.cpp.
#include "backend/cpu/recurrent.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "backend/cpu/cpu_math.h"
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

RnnDirection::RnnDirection(const LayerSpec& spec, bool go_backwards, bool zero_masked_outputs)
    : spec_(spec), go_backwards_(go_backwards), zero_masked_outputs_(zero_masked_outputs),
      gates_(cell_traits(spec.kind).gates), loops_(loops_of(spec.kind)) {}

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
  for (int64_t s = 0; s < T; ++s) {
    for (int64_t b = 0; b < B; ++b) {
      const float* src = x.ptr() + (b * T + time_of(s)) * I;
      float* dst = tape.xp.ptr() + (s * B + b) * I;
      if (tape.in_drop.empty()) {
        std::memcpy(dst, src, sizeof(float) * I);
      } else {
        const float* m = tape.in_drop.data() + b * I;
        for (int64_t i = 0; i < I; ++i) dst[i] = src[i] * m[i];
      }
    }
  }

  // z: [T*B, G*H] = b_x + xp @ W, all steps in one GEMM.
  resize(tape.z, {T, B, GH});
  float beta = 0.0f;
  if (w.bias) {
    const float* bx = w.bias->value.ptr();  // row 0 of a two-row bias
    for (int64_t r = 0; r < T * B; ++r) std::memcpy(tape.z.ptr() + r * GH, bx, sizeof(float) * GH);
    beta = 1.0f;
  }
  gemm(false, false, T * B, GH, I, 1.0f, tape.xp.ptr(), I, w.kernel->value.ptr(), GH, beta, tape.z.ptr(), GH);

  resize(tape.h, {T + 1, B, H});
  std::fill(tape.h.data.begin(), tape.h.data.begin() + B * H, 0.0f);
  if (tape.rec_drop.empty()) tape.hd = Tensor();
  else resize(tape.hd, {T, B, H});

  CellArgs a{spec_.activation, spec_.recurrent_activation, spec_.reset_after, B, T, H, w.recurrent->value.ptr(), nullptr};
  if (bias_rows(spec_) == 2) a.b_rec = w.bias->value.ptr() + GH;
  loops_->forward(a, tape);

  // The output: every step's state in processing order, or the state after the last step.
  if (!spec_.return_sequences) {
    Tensor y({B, H});
    std::memcpy(y.ptr(), tape.h.ptr() + T * B * H, sizeof(float) * B * H);
    return y;
  }
  Tensor y({B, T, H});
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < T; ++s) {
      if (zero_masked_outputs_ && !tape.used(s, b)) continue;  // stays 0 (Keras zero_output_for_mask)
      std::memcpy(y.ptr() + (b * T + s) * H, tape.h.ptr() + ((s + 1) * B + b) * H, sizeof(float) * H);
    }
  }
  return y;
}

Tensor RnnDirection::backward(const RnnWeights& w, const RnnTape& tape, const Tensor& dy) const {
  const int64_t B = tape.B, T = tape.T, I = tape.I, H = tape.H, GH = gates_ * H;
  auto time_of = [&](int64_t s) { return go_backwards_ ? T - 1 - s : s; };

  // dyp: [T, B, H] gradient of each step's output, processing order.
  Tensor dyp({T, B, H});
  if (spec_.return_sequences) {
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t s = 0; s < T; ++s) {
        if (tape.zero_masked_outputs && !tape.used(s, b)) continue;
        std::memcpy(dyp.ptr() + (s * B + b) * H, dy.ptr() + (b * T + s) * H, sizeof(float) * H);
      }
    }
  } else if (T > 0) {
    std::memcpy(dyp.ptr() + (T - 1) * B * H, dy.ptr(), sizeof(float) * B * H);
  }

  CellArgs a{spec_.activation, spec_.recurrent_activation, spec_.reset_after, B, T, H, w.recurrent->value.ptr(), nullptr};
  float* db_rec = nullptr;
  if (bias_rows(spec_) == 2) {
    a.b_rec = w.bias->value.ptr() + GH;
    db_rec = w.bias->grad.ptr() + GH;
  }
  Tensor dz({T, B, GH});  // d loss / d(x@W + b_x)
  loops_->backward(a, tape, dyp.ptr(), dz.ptr(), w.recurrent->grad.ptr(), db_rec);

  // dW += xp^T dz over all steps; db_x += column sums of dz.
  gemm(true, false, I, GH, T * B, 1.0f, tape.xp.ptr(), I, dz.ptr(), GH, 1.0f, w.kernel->grad.ptr(), GH);
  if (w.bias) add_colsum(dz.ptr(), T * B, GH, GH, w.bias->grad.ptr());

  // dx: dxp = dz @ W^T ([T*B, I]), back to [B, T, I] time order, times the input dropout mask.
  Tensor dxp({T, B, I});
  gemm(false, true, T * B, I, GH, 1.0f, dz.ptr(), GH, w.kernel->value.ptr(), GH, 0.0f, dxp.ptr(), I);
  Tensor dx({B, T, I});
  for (int64_t s = 0; s < T; ++s) {
    for (int64_t b = 0; b < B; ++b) {
      const float* src = dxp.ptr() + (s * B + b) * I;
      float* dst = dx.ptr() + (b * T + time_of(s)) * I;
      if (tape.in_drop.empty()) {
        std::memcpy(dst, src, sizeof(float) * I);
      } else {
        const float* m = tape.in_drop.data() + b * I;
        for (int64_t i = 0; i < I; ++i) dst[i] = src[i] * m[i];
      }
    }
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
