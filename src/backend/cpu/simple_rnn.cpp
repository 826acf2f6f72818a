// The SimpleRNN cell's time loops on the CPU: h = act(x@W + b + h_{t-1}@U). A masked step carries h
// over. Not the input projection or weight GEMMs: recurrent.cpp.
#include <cstring>

#include "backend/cpu/cpu_math.h"
#include "backend/cpu/recurrent.h"

namespace rnntrain::cpu {

namespace {

// The forward loop over one part of a slice of batch rows: its units of rows [b0, b1).
void forward_rows(const CellArgs& a, RnnTape& tape, const SlicePart& p) {
  const int64_t B = a.B, H = a.H, BH = B * H, b0 = p.r0, b1 = p.r1;
  const Units u = part_units(H, p);
  const int64_t u0 = u.u0, w = u.u1 - u.u0;
  for (int64_t s = 0; s < a.T; ++s) {
    const float* hprev = tape.h.ptr() + s * BH;  // [B, H]
    float* hnext = tape.h.ptr() + (s + 1) * BH;
    float* zs = tape.z.ptr() + s * BH;  // [B, H]: x@W + b, becomes h
    p.wait();  // h[s] has every part's units
    const float* hin = recurrent_input(tape, s, b0, b1);  // [b1 - b0, H]
    if (!tape.any_used(s, b0, b1)) {  // every row carries h over
      for (int64_t b = b0; b < b1; ++b) std::memcpy(hnext + b * H + u0, hprev + b * H + u0, sizeof(float) * w);
      continue;
    }
    step_gemm(a, H, false, 0, H, b1 - b0, hin, H, true, zs + b0 * H, H, u0, u.u1);
    for (int64_t b = b0; b < b1; ++b) {
      float* hn = hnext + b * H;
      if (!tape.used(s, b)) {
        std::memcpy(hn + u0, hprev + b * H + u0, sizeof(float) * w);
        continue;
      }
      float* z = zs + b * H;
      apply_act(a.act, z + u0, w);
      std::memcpy(hn + u0, z + u0, sizeof(float) * w);
    }
  }
}

// The backward loop over one part of a slice of batch rows: writes its units' columns of their rows of
// dz.
void backward_rows(const CellArgs& a, const RnnTape& tape, const float* dyp, float* dz, const SlicePart& p) {
  const int64_t B = a.B, H = a.H, BH = B * H, b0 = p.r0, b1 = p.r1, nh = (b1 - b0) * H;
  const Units u = part_units(H, p);
  const int64_t u0 = u.u0, w = u.u1 - u.u0;
  std::vector<float> dh(nh, 0.0f), dhr(nh);  // [b1 - b0, H], row b at (b - b0) * H; this part's units
  for (int64_t s = a.T - 1; s >= 0; --s) {
    const float* dys = dyp + s * BH + b0 * H;
    for (int64_t r = 0; r < b1 - b0; ++r)
      for (int64_t j = u0; j < u.u1; ++j) dh[r * H + j] += dys[r * H + j];
    const float* zs = tape.z.ptr() + s * BH;
    float* dzs = dz + s * BH;
    if (!tape.any_used(s, b0, b1)) {  // every row carried h over: dh passes through
      for (int64_t b = b0; b < b1; ++b) std::memset(dzs + b * H + u0, 0, sizeof(float) * w);
      continue;
    }
    for (int64_t b = b0; b < b1; ++b) {
      float* d = dzs + b * H;
      if (!tape.used(s, b)) {
        std::memset(d + u0, 0, sizeof(float) * w);
        continue;
      }
      std::memcpy(d + u0, dh.data() + (b - b0) * H + u0, sizeof(float) * w);
      mul_act_grad(a.act, zs + b * H + u0, d + u0, w);
    }
    p.wait();  // dz's rows of step s have every part's columns
    step_gemm(a, H, true, 0, H, b1 - b0, dzs + b0 * H, H, false, dhr.data(), H, u0, u.u1);
    for (int64_t b = b0; b < b1; ++b) {
      if (!tape.used(s, b)) continue;
      carry_dh(tape, b, u, dhr.data() + (b - b0) * H, dh.data() + (b - b0) * H);
    }
  }
}

}  // namespace

void simple_rnn_forward(const CellArgs& a, RnnTape& tape) {
  pack_step_gemm(a, a.H, false, 0, a.H);
  loop_rows(a, unit_parts(a, tape), [&](const SlicePart& p) { forward_rows(a, tape, p); });
}

void simple_rnn_backward(const CellArgs& a, const RnnTape& tape, const float* dyp, float* dz, float* dU, float*) {
  pack_step_gemm(a, a.H, true, 0, a.H);
  loop_rows(a, unit_parts(a, tape), [&](const SlicePart& p) { backward_rows(a, tape, dyp, dz, p); });
  // dU += h_in^T dz over all steps ([H, T*B] x [T*B, H]), one GEMM on every BLAS thread.
  steps_gemm(a.own, true, false, a.H, a.H, a.T * a.B, tape.h_in(), a.H, dz, a.H, true, dU, a.H);
}

}  // namespace rnntrain::cpu
