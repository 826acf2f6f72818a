// The SimpleRNN cell's time loops on the CPU: h = act(x@W + b + h_{t-1}@U). A masked step carries h
// over. Not the input projection or weight GEMMs: recurrent.cpp.
#include <cstring>

#include "backend/cpu/cpu_math.h"
#include "backend/cpu/recurrent.h"

namespace rnntrain::cpu {

namespace {

// The forward loop over batch rows [b0, b1).
void forward_rows(const CellArgs& a, RnnTape& tape, int64_t b0, int64_t b1) {
  const int64_t B = a.B, H = a.H, BH = B * H;
  for (int64_t s = 0; s < a.T; ++s) {
    const float* hprev = tape.h.ptr() + s * BH;  // [B, H]
    float* hnext = tape.h.ptr() + (s + 1) * BH;
    float* zs = tape.z.ptr() + s * BH;  // [B, H]: x@W + b, becomes h
    const float* hin = recurrent_input(tape, s, b0, b1);  // [b1 - b0, H]
    if (!tape.any_used(s, b0, b1)) {  // every row carries h over
      std::memcpy(hnext + b0 * H, hprev + b0 * H, sizeof(float) * (b1 - b0) * H);
      continue;
    }
    step_gemm(a, H, false, 0, H, b1 - b0, hin, H, true, zs + b0 * H, H);
    for (int64_t b = b0; b < b1; ++b) {
      float* hn = hnext + b * H;
      if (!tape.used(s, b)) {
        std::memcpy(hn, hprev + b * H, sizeof(float) * H);
        continue;
      }
      float* z = zs + b * H;
      apply_act(a.act, z, H);
      std::memcpy(hn, z, sizeof(float) * H);
    }
  }
}

// The backward loop over batch rows [b0, b1): writes their rows of dz.
void backward_rows(const CellArgs& a, const RnnTape& tape, const float* dyp, float* dz, int64_t b0, int64_t b1) {
  const int64_t B = a.B, H = a.H, BH = B * H, nh = (b1 - b0) * H;
  std::vector<float> dh(nh, 0.0f), dhr(nh);  // [b1 - b0, H], row b at (b - b0) * H
  for (int64_t s = a.T - 1; s >= 0; --s) {
    const float* dys = dyp + s * BH + b0 * H;
    for (int64_t k = 0; k < nh; ++k) dh[k] += dys[k];
    const float* zs = tape.z.ptr() + s * BH;
    float* dzs = dz + s * BH;
    if (!tape.any_used(s, b0, b1)) {  // every row carried h over: dh passes through
      std::memset(dzs + b0 * H, 0, sizeof(float) * (b1 - b0) * H);
      continue;
    }
    for (int64_t b = b0; b < b1; ++b) {
      float* d = dzs + b * H;
      if (!tape.used(s, b)) {
        std::memset(d, 0, sizeof(float) * H);
        continue;
      }
      std::memcpy(d, dh.data() + (b - b0) * H, sizeof(float) * H);
      mul_act_grad(a.act, zs + b * H, d, H);
    }
    step_gemm(a, H, true, 0, H, b1 - b0, dzs + b0 * H, H, false, dhr.data(), H);
    for (int64_t b = b0; b < b1; ++b) {
      if (!tape.used(s, b)) continue;
      carry_dh(tape, b, H, dhr.data() + (b - b0) * H, dh.data() + (b - b0) * H);
    }
  }
}

}  // namespace

void simple_rnn_forward(const CellArgs& a, RnnTape& tape) {
  pack_step_gemm(a, a.H, false, 0, a.H);
  loop_rows(a, [&](int64_t b0, int64_t b1) { forward_rows(a, tape, b0, b1); });
}

void simple_rnn_backward(const CellArgs& a, const RnnTape& tape, const float* dyp, float* dz, float* dU, float*) {
  pack_step_gemm(a, a.H, true, 0, a.H);
  loop_rows(a, [&](int64_t b0, int64_t b1) { backward_rows(a, tape, dyp, dz, b0, b1); });
  // dU += h_in^T dz over all steps ([H, T*B] x [T*B, H]), one GEMM on every BLAS thread.
  steps_gemm(a.own, true, false, a.H, a.H, a.T * a.B, tape.h_in(), a.H, dz, a.H, true, dU, a.H);
}

}  // namespace rnntrain::cpu
