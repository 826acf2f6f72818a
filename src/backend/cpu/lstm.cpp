// The LSTM cell's time loops on the CPU (Keras gate order i, f, c, o):
//   z = x@W + b + h_{t-1}@U;  i,f,o = ract(z_i,z_f,z_o);  g = act(z_c);  c = f*c_{t-1} + i*g;  h = o*act(c).
// A masked step carries h and c over. Not the input projection or weight GEMMs: recurrent.cpp.
#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_math.h"
#include "backend/cpu/recurrent.h"

namespace rnntrain::cpu {

namespace {

// The forward loop over batch rows [b0, b1).
void forward_rows(const CellArgs& a, RnnTape& tape, int64_t b0, int64_t b1) {
  const int64_t B = a.B, H = a.H, G4 = 4 * H, BH = B * H;
  for (int64_t s = 0; s < a.T; ++s) {
    const float* hprev = tape.h.ptr() + s * BH;  // [B, H]
    const float* cprev = tape.c.ptr() + s * BH;
    float* hnext = tape.h.ptr() + (s + 1) * BH;
    float* cnext = tape.c.ptr() + (s + 1) * BH;
    float* zs = tape.z.ptr() + s * B * G4;  // [B, 4H]
    float* act_c = tape.aux.ptr() + s * BH;
    const float* hin = recurrent_input(tape, s, b0, b1);  // [b1 - b0, H]
    if (!tape.any_used(s, b0, b1)) {  // every row carries h and c over
      std::memcpy(hnext + b0 * H, hprev + b0 * H, sizeof(float) * (b1 - b0) * H);
      std::memcpy(cnext + b0 * H, cprev + b0 * H, sizeof(float) * (b1 - b0) * H);
      continue;
    }
    step_gemm(a, G4, false, 0, G4, b1 - b0, hin, H, true, zs + b0 * G4, G4);  // zs += hin @ U
    for (int64_t b = b0; b < b1; ++b) {
      float* z = zs + b * G4;
      const float* cp = cprev + b * H;
      float* cn = cnext + b * H;
      float* hn = hnext + b * H;
      if (!tape.used(s, b)) {
        std::memcpy(cn, cp, sizeof(float) * H);
        std::memcpy(hn, hprev + b * H, sizeof(float) * H);
        continue;
      }
      apply_act(a.ract, z, 2 * H);     // i, f
      apply_act(a.act, z + 2 * H, H);  // g
      apply_act(a.ract, z + 3 * H, H);  // o
      const float* i = z;
      const float* f = z + H;
      const float* g = z + 2 * H;
      const float* o = z + 3 * H;
      float* ac = act_c + b * H;
      for (int64_t j = 0; j < H; ++j) {
        cn[j] = f[j] * cp[j] + i[j] * g[j];
        ac[j] = cn[j];
      }
      apply_act(a.act, ac, H);
      for (int64_t j = 0; j < H; ++j) hn[j] = o[j] * ac[j];
    }
  }
}

// The backward loop over batch rows [b0, b1): writes their rows of dz.
void backward_rows(const CellArgs& a, const RnnTape& tape, const float* dyp, float* dz, int64_t b0, int64_t b1) {
  const int64_t B = a.B, H = a.H, G4 = 4 * H, BH = B * H, nh = (b1 - b0) * H;
  // dh, dc, dhr: [b1 - b0, H], row b at (b - b0) * H.
  std::vector<float> dh(nh, 0.0f), dc(nh, 0.0f), dhr(nh), tmp_buf(H);
  float* tmp = tmp_buf.data();  // [H]
  for (int64_t s = a.T - 1; s >= 0; --s) {
    const float* dys = dyp + s * BH + b0 * H;
    for (int64_t k = 0; k < nh; ++k) dh[k] += dys[k];
    const float* zs = tape.z.ptr() + s * B * G4;
    float* dzs = dz + s * B * G4;
    if (!tape.any_used(s, b0, b1)) {  // every row carried h and c over: their gradients pass through
      std::memset(dzs + b0 * G4, 0, sizeof(float) * (b1 - b0) * G4);
      continue;
    }
    for (int64_t b = b0; b < b1; ++b) {
      float* d = dzs + b * G4;
      if (!tape.used(s, b)) {  // h and c were carried over: their gradients pass through
        std::memset(d, 0, sizeof(float) * G4);
        continue;
      }
      const float* i = zs + b * G4;
      const float* f = i + H;
      const float* g = i + 2 * H;
      const float* o = i + 3 * H;
      const float* ac = tape.aux.ptr() + s * BH + b * H;
      const float* cp = tape.c.ptr() + s * BH + b * H;
      float* dhb = dh.data() + (b - b0) * H;
      float* dcb = dc.data() + (b - b0) * H;
      for (int64_t j = 0; j < H; ++j) tmp[j] = dhb[j] * o[j];
      mul_act_grad(a.act, ac, tmp, H);  // d h / d c = o * act'(c)
      for (int64_t j = 0; j < H; ++j) dcb[j] += tmp[j];  // d c_t
      float* di = d;  // one loop per gate block: each vectorises
      float* df = d + H;
      float* dg = d + 2 * H;
      float* dout = d + 3 * H;
      for (int64_t j = 0; j < H; ++j) di[j] = dcb[j] * g[j];
      for (int64_t j = 0; j < H; ++j) df[j] = dcb[j] * cp[j];
      for (int64_t j = 0; j < H; ++j) dg[j] = dcb[j] * i[j];
      for (int64_t j = 0; j < H; ++j) dout[j] = dhb[j] * ac[j];
      for (int64_t j = 0; j < H; ++j) dcb[j] *= f[j];  // d c_{t-1}
      mul_act_grad(a.ract, i, d, 2 * H);
      mul_act_grad(a.act, g, d + 2 * H, H);
      mul_act_grad(a.ract, o, d + 3 * H, H);
    }
    // d h_{t-1} = dz @ U^T (times the recurrent dropout mask) where the step was used.
    step_gemm(a, G4, true, 0, G4, b1 - b0, dzs + b0 * G4, G4, false, dhr.data(), H);
    for (int64_t b = b0; b < b1; ++b) {
      if (!tape.used(s, b)) continue;
      carry_dh(tape, b, H, dhr.data() + (b - b0) * H, dh.data() + (b - b0) * H);
    }
  }
}

}  // namespace

void lstm_forward(const CellArgs& a, RnnTape& tape) {
  resize(tape.c, {a.T + 1, a.B, a.H});
  std::fill(tape.c.data.begin(), tape.c.data.begin() + a.B * a.H, 0.0f);
  resize(tape.aux, {a.T, a.B, a.H});
  pack_step_gemm(a, 4 * a.H, false, 0, 4 * a.H);
  loop_rows(a, [&](int64_t b0, int64_t b1) { forward_rows(a, tape, b0, b1); });
}

void lstm_backward(const CellArgs& a, const RnnTape& tape, const float* dyp, float* dz, float* dU, float*) {
  pack_step_gemm(a, 4 * a.H, true, 0, 4 * a.H);
  loop_rows(a, [&](int64_t b0, int64_t b1) { backward_rows(a, tape, dyp, dz, b0, b1); });
  // dU += h_in^T dz over all steps ([H, T*B] x [T*B, 4H]), one GEMM on every BLAS thread.
  steps_gemm(a.own, true, false, a.H, 4 * a.H, a.T * a.B, tape.h_in(), a.H, dz, 4 * a.H, true, dU, 4 * a.H);
}

}  // namespace rnntrain::cpu
