// The SimpleRNN cell's time loops on the CPU: h = act(x@W + b + h_{t-1}@U). A masked step carries h
// over. Not the input projection or weight GEMMs: recurrent.cpp.
#include <cstring>

#include "backend/cpu/cpu_math.h"
#include "backend/cpu/recurrent.h"

namespace rnntrain::cpu {

void simple_rnn_forward(const CellArgs& a, RnnTape& tape) {
  const int64_t B = a.B, H = a.H, BH = B * H;
  for (int64_t s = 0; s < a.T; ++s) {
    const float* hprev = tape.h.ptr() + s * BH;  // [B, H]
    float* hnext = tape.h.ptr() + (s + 1) * BH;
    float* zs = tape.z.ptr() + s * BH;  // [B, H]: x@W + b, becomes h
    const float* hin = recurrent_input(tape, s, hprev);
    gemm(false, false, B, H, H, 1.0f, hin, H, a.U, H, 1.0f, zs, H);
    for (int64_t b = 0; b < B; ++b) {
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

void simple_rnn_backward(const CellArgs& a, const RnnTape& tape, const float* dyp, float* dz, float* dU) {
  const int64_t B = a.B, H = a.H, BH = B * H;
  std::vector<float> dh(BH, 0.0f), dhr(BH);
  for (int64_t s = a.T - 1; s >= 0; --s) {
    const float* dys = dyp + s * BH;
    for (int64_t k = 0; k < BH; ++k) dh[k] += dys[k];
    const float* zs = tape.z.ptr() + s * BH;
    float* dzs = dz + s * BH;
    for (int64_t b = 0; b < B; ++b) {
      float* d = dzs + b * H;
      if (!tape.used(s, b)) {
        std::memset(d, 0, sizeof(float) * H);
        continue;
      }
      std::memcpy(d, dh.data() + b * H, sizeof(float) * H);
      mul_act_grad(a.act, zs + b * H, d, H);
    }
    gemm(false, true, B, H, H, 1.0f, dzs, H, a.U, H, 0.0f, dhr.data(), H);
    for (int64_t b = 0; b < B; ++b) {
      if (!tape.used(s, b)) continue;
      carry_dh(tape, b, H, dhr.data() + b * H, dh.data() + b * H);
    }
  }
  gemm(true, false, H, H, a.T * B, 1.0f, tape.h_in(), H, dz, H, 1.0f, dU, H);
}

}  // namespace rnntrain::cpu
