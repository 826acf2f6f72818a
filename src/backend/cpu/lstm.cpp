// The LSTM cell's time loops on the CPU (Keras gate order i, f, c, o):
//   z = x@W + b + h_{t-1}@U;  i,f,o = ract(z_i,z_f,z_o);  g = act(z_c);  c = f*c_{t-1} + i*g;  h = o*act(c).
// A masked step carries h and c over. Not the input projection or weight GEMMs: recurrent.cpp.
#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_math.h"
#include "backend/cpu/recurrent.h"

namespace rnntrain::cpu {

namespace {

// The forward loop over one part of a slice of batch rows: its units of rows [b0, b1).
void forward_rows(const CellArgs& a, RnnTape& tape, const SlicePart& p) {
  const int64_t B = a.B, H = a.H, G4 = 4 * H, BH = B * H, b0 = p.r0, b1 = p.r1;
  const Units u = part_units(H, p);
  const int64_t u0 = u.u0, w = u.u1 - u.u0;
  for (int64_t s = 0; s < a.T; ++s) {
    const float* hprev = tape.h.ptr() + s * BH;  // [B, H]
    const float* cprev = tape.c.ptr() + s * BH;
    float* hnext = tape.h.ptr() + (s + 1) * BH;
    float* cnext = tape.c.ptr() + (s + 1) * BH;
    float* zs = tape.z.ptr() + s * B * G4;  // [B, 4H]
    float* act_c = tape.aux.ptr() + s * BH;
    p.wait();  // h[s] has every part's units
    const float* hin = recurrent_input(tape, s, b0, b1);  // [b1 - b0, H]
    if (!tape.any_used(s, b0, b1)) {  // every row carries h and c over
      for (int64_t b = b0; b < b1; ++b) {
        std::memcpy(hnext + b * H + u0, hprev + b * H + u0, sizeof(float) * w);
        std::memcpy(cnext + b * H + u0, cprev + b * H + u0, sizeof(float) * w);
      }
      continue;
    }
    for_gate_cols(4, H, u, [&](int64_t n0, int64_t n1) {  // zs += hin @ U
      step_gemm(a, G4, false, 0, G4, b1 - b0, hin, H, true, zs + b0 * G4, G4, n0, n1);
    });
    for (int64_t b = b0; b < b1; ++b) {
      float* z = zs + b * G4;
      const float* cp = cprev + b * H;
      float* cn = cnext + b * H;
      float* hn = hnext + b * H;
      if (!tape.used(s, b)) {
        std::memcpy(cn + u0, cp + u0, sizeof(float) * w);
        std::memcpy(hn + u0, hprev + b * H + u0, sizeof(float) * w);
        continue;
      }
      for_gate_cols(2, H, u, [&](int64_t n0, int64_t n1) { apply_act(a.ract, z + n0, n1 - n0); });  // i, f
      apply_act(a.act, z + 2 * H + u0, w);   // g
      apply_act(a.ract, z + 3 * H + u0, w);  // o
      const float* i = z;
      const float* f = z + H;
      const float* g = z + 2 * H;
      const float* o = z + 3 * H;
      float* ac = act_c + b * H;
      for (int64_t j = u0; j < u.u1; ++j) {
        cn[j] = f[j] * cp[j] + i[j] * g[j];
        ac[j] = cn[j];
      }
      apply_act(a.act, ac + u0, w);
      for (int64_t j = u0; j < u.u1; ++j) hn[j] = o[j] * ac[j];
    }
  }
}

// The backward loop over one part of a slice of batch rows: writes its units' columns of their rows of
// dz.
void backward_rows(const CellArgs& a, const RnnTape& tape, const float* dyp, float* dz, const SlicePart& p) {
  const int64_t B = a.B, H = a.H, G4 = 4 * H, BH = B * H, b0 = p.r0, b1 = p.r1, nh = (b1 - b0) * H;
  const Units u = part_units(H, p);
  const int64_t u0 = u.u0, u1 = u.u1, w = u1 - u0;
  // dh, dc, dhr: [b1 - b0, H], row b at (b - b0) * H; this part's units of each.
  std::vector<float> dh(nh, 0.0f), dc(nh, 0.0f), dhr(nh), tmp_buf(H);
  float* tmp = tmp_buf.data();  // [H]
  for (int64_t s = a.T - 1; s >= 0; --s) {
    const float* dys = dyp + s * BH + b0 * H;
    for (int64_t r = 0; r < b1 - b0; ++r)
      for (int64_t j = u0; j < u1; ++j) dh[r * H + j] += dys[r * H + j];
    const float* zs = tape.z.ptr() + s * B * G4;
    float* dzs = dz + s * B * G4;
    auto zero_dz = [&](int64_t b) {
      for_gate_cols(4, H, u, [&](int64_t n0, int64_t n1) { std::memset(dzs + b * G4 + n0, 0, sizeof(float) * (n1 - n0)); });
    };
    if (!tape.any_used(s, b0, b1)) {  // every row carried h and c over: their gradients pass through
      for (int64_t b = b0; b < b1; ++b) zero_dz(b);
      continue;
    }
    for (int64_t b = b0; b < b1; ++b) {
      float* d = dzs + b * G4;
      if (!tape.used(s, b)) {  // h and c were carried over: their gradients pass through
        zero_dz(b);
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
      for (int64_t j = u0; j < u1; ++j) tmp[j] = dhb[j] * o[j];
      mul_act_grad(a.act, ac + u0, tmp + u0, w);  // d h / d c = o * act'(c)
      for (int64_t j = u0; j < u1; ++j) dcb[j] += tmp[j];  // d c_t
      float* di = d;  // one loop per gate block: each vectorises
      float* df = d + H;
      float* dg = d + 2 * H;
      float* dout = d + 3 * H;
      for (int64_t j = u0; j < u1; ++j) di[j] = dcb[j] * g[j];
      for (int64_t j = u0; j < u1; ++j) df[j] = dcb[j] * cp[j];
      for (int64_t j = u0; j < u1; ++j) dg[j] = dcb[j] * i[j];
      for (int64_t j = u0; j < u1; ++j) dout[j] = dhb[j] * ac[j];
      for (int64_t j = u0; j < u1; ++j) dcb[j] *= f[j];  // d c_{t-1}
      for_gate_cols(2, H, u, [&](int64_t n0, int64_t n1) { mul_act_grad(a.ract, i + n0, d + n0, n1 - n0); });
      mul_act_grad(a.act, g + u0, dg + u0, w);
      mul_act_grad(a.ract, o + u0, dout + u0, w);
    }
    p.wait();  // dz's rows of step s have every part's columns
    // d h_{t-1} = dz @ U^T (times the recurrent dropout mask) where the step was used: this part's units.
    step_gemm(a, G4, true, 0, G4, b1 - b0, dzs + b0 * G4, G4, false, dhr.data(), H, u0, u1);
    for (int64_t b = b0; b < b1; ++b) {
      if (!tape.used(s, b)) continue;
      carry_dh(tape, b, u, dhr.data() + (b - b0) * H, dh.data() + (b - b0) * H);
    }
  }
}

}  // namespace

void lstm_forward(const CellArgs& a, RnnTape& tape) {
  resize(tape.c, {a.T + 1, a.B, a.H});
  std::fill(tape.c.data.begin(), tape.c.data.begin() + a.B * a.H, 0.0f);
  resize(tape.aux, {a.T, a.B, a.H});
  pack_step_gemm(a, 4 * a.H, false, 0, 4 * a.H);
  loop_rows(a, unit_parts(a, tape), [&](const SlicePart& p) { forward_rows(a, tape, p); });
}

void lstm_backward(const CellArgs& a, const RnnTape& tape, const float* dyp, float* dz, float* dU, float*) {
  pack_step_gemm(a, 4 * a.H, true, 0, 4 * a.H);
  loop_rows(a, unit_parts(a, tape), [&](const SlicePart& p) { backward_rows(a, tape, dyp, dz, p); });
  // dU += h_in^T dz over all steps ([H, T*B] x [T*B, 4H]), one GEMM on every BLAS thread.
  steps_gemm(a.own, true, false, a.H, 4 * a.H, a.T * a.B, tape.h_in(), a.H, dz, 4 * a.H, true, dU, 4 * a.H);
}

}  // namespace rnntrain::cpu
