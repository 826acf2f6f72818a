// The GRU cell's time loops on the CPU (Keras gate order z, r, h), both variants:
//   reset_after:  m = h_{t-1}@U + b_h;  z,r = ract(x_zr + m_zr);  hh = act(x_h + r*m_h)
//   reset before: z,r = ract(x_zr + h_{t-1}@U_zr);  hh = act(x_h + (r*h_{t-1})@U_h)
//   h = z*h_{t-1} + (1-z)*hh.  A masked step carries h over. Not the input projection: recurrent.cpp.
#include <cstring>

#include "backend/cpu/cpu_math.h"
#include "backend/cpu/recurrent.h"

namespace rnntrain::cpu {

namespace {

// The forward loop over batch rows [b0, b1).
void forward_rows(const CellArgs& a, bool reset_after, RnnTape& tape, int64_t b0, int64_t b1) {
  const int64_t B = a.B, H = a.H, G3 = 3 * H, BH = B * H, nb = b1 - b0;
  std::vector<float> rec(nb * G3);  // [b1 - b0, 3H] the recurrent projection of this step
  for (int64_t s = 0; s < a.T; ++s) {
    const float* hprev = tape.h.ptr() + s * BH;  // [B, H]
    float* hnext = tape.h.ptr() + (s + 1) * BH;
    float* zs = tape.z.ptr() + s * B * G3;  // [B, 3H]: x@W + b_x, becomes z, r, hh
    const float* hin = recurrent_input(tape, s, b0, b1);  // [b1 - b0, H]
    if (!tape.any_used(s, b0, b1)) {  // every row carries h over
      std::memcpy(hnext + b0 * H, hprev + b0 * H, sizeof(float) * nb * H);
      if (!reset_after) std::memset(tape.rh.ptr() + s * BH + b0 * H, 0, sizeof(float) * nb * H);  // read by dU's GEMM
      continue;
    }
    if (reset_after) {
      float beta = 0.0f;
      if (a.b_rec) {
        for (int64_t r = 0; r < nb; ++r) std::memcpy(rec.data() + r * G3, a.b_rec, sizeof(float) * G3);
        beta = 1.0f;
      }
      step_gemm(a, G3, false, 0, G3, nb, hin, H, beta != 0.0f, rec.data(), G3);
    } else {
      step_gemm(a, G3, false, 0, 2 * H, nb, hin, H, false, rec.data(), G3);
    }
    for (int64_t b = b0; b < b1; ++b) {
      float* z = zs + b * G3;
      const float* m = rec.data() + (b - b0) * G3;
      for (int64_t j = 0; j < 2 * H; ++j) z[j] += m[j];
      apply_act(a.ract, z, 2 * H);  // z, r
      const float* r = z + H;
      if (reset_after) {
        float* mh = tape.aux.ptr() + s * BH + b * H;
        for (int64_t j = 0; j < H; ++j) {
          mh[j] = m[2 * H + j];
          z[2 * H + j] += r[j] * mh[j];
        }
        apply_act(a.act, z + 2 * H, H);
      } else {
        float* rh = tape.rh.ptr() + s * BH + b * H;
        const float* hb = hin + (b - b0) * H;
        for (int64_t j = 0; j < H; ++j) rh[j] = r[j] * hb[j];
      }
    }
    if (!reset_after) {
      // rec[:, 2H:] = (r*h) @ U_h, then hh = act(x_h + that).
      step_gemm(a, G3, false, 2 * H, H, nb, tape.rh.ptr() + s * BH + b0 * H, H, false, rec.data() + 2 * H, G3);
      for (int64_t b = b0; b < b1; ++b) {
        float* zh = zs + b * G3 + 2 * H;
        const float* q = rec.data() + (b - b0) * G3 + 2 * H;
        for (int64_t j = 0; j < H; ++j) zh[j] += q[j];
        apply_act(a.act, zh, H);
      }
    }
    for (int64_t b = b0; b < b1; ++b) {
      const float* hp = hprev + b * H;
      float* hn = hnext + b * H;
      if (!tape.used(s, b)) {
        std::memcpy(hn, hp, sizeof(float) * H);
        continue;
      }
      const float* z = zs + b * G3;
      const float* hh = z + 2 * H;
      for (int64_t j = 0; j < H; ++j) hn[j] = z[j] * hp[j] + (1.0f - z[j]) * hh[j];
    }
  }
}

// The backward loop over batch rows [b0, b1): writes their rows of dz and (reset_after) dzr.
void backward_rows(const CellArgs& a, bool reset_after, const RnnTape& tape, const float* dyp, float* dz, float* dzr,
                   int64_t b0, int64_t b1) {
  const int64_t B = a.B, H = a.H, G3 = 3 * H, BH = B * H, T = a.T, nb = b1 - b0;
  std::vector<float> dh(nb * H, 0.0f), dhr(nb * H);  // [b1 - b0, H], row b at (b - b0) * H
  for (int64_t s = T - 1; s >= 0; --s) {
    const float* dys = dyp + s * BH + b0 * H;
    for (int64_t k = 0; k < nb * H; ++k) dh[k] += dys[k];
    const float* zs = tape.z.ptr() + s * B * G3;
    const float* hprev = tape.h.ptr() + s * BH;
    const float* hin = tape.h_in() + s * BH;
    float* dzs = dz + s * B * G3;
    float* dzrs = reset_after ? dzr + s * B * G3 : nullptr;
    if (!tape.any_used(s, b0, b1)) {  // every row carried h over: dh passes through
      std::memset(dzs + b0 * G3, 0, sizeof(float) * nb * G3);
      if (dzrs) std::memset(dzrs + b0 * G3, 0, sizeof(float) * nb * G3);
      continue;
    }
    // d z (before ract'), d hh -> d(x_h + ...) for every used row.
    for (int64_t b = b0; b < b1; ++b) {
      float* d = dzs + b * G3;
      if (!tape.used(s, b)) {
        std::memset(d, 0, sizeof(float) * G3);
        if (dzrs) std::memset(dzrs + b * G3, 0, sizeof(float) * G3);
        continue;
      }
      const float* z = zs + b * G3;
      const float* hh = z + 2 * H;
      const float* hp = hprev + b * H;
      const float* dhb = dh.data() + (b - b0) * H;
      for (int64_t j = 0; j < H; ++j) {
        d[j] = dhb[j] * (hp[j] - hh[j]);
        d[2 * H + j] = dhb[j] * (1.0f - z[j]);
      }
      mul_act_grad(a.act, hh, d + 2 * H, H);
      if (reset_after) {
        const float* r = z + H;
        const float* mh = tape.aux.ptr() + s * BH + b * H;
        float* dr = dzrs + b * G3;
        for (int64_t j = 0; j < H; ++j) {
          d[H + j] = d[2 * H + j] * mh[j];      // d r
          dr[2 * H + j] = d[2 * H + j] * r[j];  // d m_h
        }
        mul_act_grad(a.ract, z, d, 2 * H);
        std::memcpy(dr, d, sizeof(float) * 2 * H);  // d m_z, d m_r
      }
    }
    if (reset_after) {
      // d hin = dzr @ U^T
      step_gemm(a, G3, true, 0, G3, nb, dzrs + b0 * G3, G3, false, dhr.data(), H);
    } else {
      // d(r*hin) = d hh_pre @ U_h^T, then d r and d hin.
      step_gemm(a, G3, true, 2 * H, H, nb, dzs + b0 * G3 + 2 * H, G3, false, dhr.data(), H);
      for (int64_t b = b0; b < b1; ++b) {
        if (!tape.used(s, b)) continue;
        const float* z = zs + b * G3;
        const float* r = z + H;
        const float* hb = hin + b * H;
        float* d = dzs + b * G3;
        float* drh = dhr.data() + (b - b0) * H;
        for (int64_t j = 0; j < H; ++j) {
          d[H + j] = drh[j] * hb[j];  // d r
          drh[j] *= r[j];             // d hin through r*hin
        }
        mul_act_grad(a.ract, z, d, 2 * H);
      }
      step_gemm(a, G3, true, 0, 2 * H, nb, dzs + b0 * G3, G3, true, dhr.data(), H);  // + d[z,r] @ U_zr^T
    }
    for (int64_t b = b0; b < b1; ++b) {
      if (!tape.used(s, b)) continue;  // h was carried over: dh passes through unchanged
      const float* z = zs + b * G3;
      float* dhb = dh.data() + (b - b0) * H;
      const float* r = dhr.data() + (b - b0) * H;
      if (tape.rec_drop.empty()) {
        for (int64_t j = 0; j < H; ++j) dhb[j] = dhb[j] * z[j] + r[j];
      } else {
        const float* m = tape.rec_drop.data() + b * H;
        for (int64_t j = 0; j < H; ++j) dhb[j] = dhb[j] * z[j] + r[j] * m[j];
      }
    }
  }
}

// The blocks of U the loops multiply (own engine): all 3H columns with reset_after, else z and r apart
// from the candidate's.
void pack_blocks(const CellArgs& a, bool t) {
  const int64_t H = a.H;
  if (a.reset_after) {
    pack_step_gemm(a, 3 * H, t, 0, 3 * H);
  } else {
    pack_step_gemm(a, 3 * H, t, 0, 2 * H);
    pack_step_gemm(a, 3 * H, t, 2 * H, H);
  }
}

}  // namespace

void gru_forward(const CellArgs& a, RnnTape& tape) {
  pack_blocks(a, false);
  if (a.reset_after) resize(tape.aux, {a.T, a.B, a.H});
  else resize(tape.rh, {a.T, a.B, a.H});
  loop_rows(a, [&](int64_t b0, int64_t b1) { forward_rows(a, a.reset_after, tape, b0, b1); });
}

void gru_backward(const CellArgs& a, const RnnTape& tape, const float* dyp, float* dz, float* dU, float* db_rec) {
  const bool reset_after = a.reset_after;
  const int64_t B = a.B, H = a.H, G3 = 3 * H, T = a.T;
  pack_blocks(a, true);
  Tensor dzr;  // reset_after: [T, B, 3H] d loss / d(h@U + b_h)
  if (reset_after) dzr = Tensor({T, B, G3});
  loop_rows(a, [&](int64_t b0, int64_t b1) { backward_rows(a, reset_after, tape, dyp, dz, dzr.ptr(), b0, b1); });
  // The recurrent weight gradients over all steps, one GEMM each on every BLAS thread.
  if (reset_after) {
    steps_gemm(a.own, true, false, H, G3, T * B, tape.h_in(), H, dzr.ptr(), G3, true, dU, G3);
    if (db_rec) add_colsum(dzr.ptr(), T * B, G3, G3, db_rec);
  } else {
    steps_gemm(a.own, true, false, H, 2 * H, T * B, tape.h_in(), H, dz, G3, true, dU, G3);
    steps_gemm(a.own, true, false, H, H, T * B, tape.rh.ptr(), H, dz + 2 * H, G3, true, dU + 2 * H, G3);
  }
}

}  // namespace rnntrain::cpu
