// The GRU cell's time loops on the CPU (Keras gate order z, r, h), both variants:
//   reset_after:  m = h_{t-1}@U + b_h;  z,r = ract(x_zr + m_zr);  hh = act(x_h + r*m_h)
//   reset before: z,r = ract(x_zr + h_{t-1}@U_zr);  hh = act(x_h + (r*h_{t-1})@U_h)
//   h = z*h_{t-1} + (1-z)*hh.  A masked step carries h over. Not the input projection: recurrent.cpp.
#include <cstring>

#include "backend/cpu/cpu_math.h"
#include "backend/cpu/recurrent.h"

namespace rnntrain::cpu {

namespace {

// The forward loop over one part of a slice of batch rows: its units of rows [b0, b1) (reset_after
// only: reset before has one part, since the candidate's product needs r * h of every unit).
void forward_rows(const CellArgs& a, bool reset_after, RnnTape& tape, const SlicePart& p) {
  const int64_t B = a.B, H = a.H, G3 = 3 * H, BH = B * H, b0 = p.r0, b1 = p.r1, nb = b1 - b0;
  const Units u = part_units(H, p);
  const int64_t u0 = u.u0, u1 = u.u1, w = u1 - u0;
  std::vector<float> rec(nb * G3);  // [b1 - b0, 3H] the recurrent projection of this step
  for (int64_t s = 0; s < a.T; ++s) {
    const float* hprev = tape.h.ptr() + s * BH;  // [B, H]
    float* hnext = tape.h.ptr() + (s + 1) * BH;
    float* zs = tape.z.ptr() + s * B * G3;  // [B, 3H]: x@W + b_x, becomes z, r, hh
    p.wait();  // h[s] has every part's units
    const float* hin = recurrent_input(tape, s, b0, b1);  // [b1 - b0, H]
    if (!tape.any_used(s, b0, b1)) {  // every row carries h over
      for (int64_t b = b0; b < b1; ++b) std::memcpy(hnext + b * H + u0, hprev + b * H + u0, sizeof(float) * w);
      if (!reset_after) std::memset(tape.rh.ptr() + s * BH + b0 * H, 0, sizeof(float) * nb * H);  // read by dU's GEMM
      continue;
    }
    if (reset_after) {
      for_gate_cols(3, H, u, [&](int64_t n0, int64_t n1) {
        if (a.b_rec)
          for (int64_t r = 0; r < nb; ++r) std::memcpy(rec.data() + r * G3 + n0, a.b_rec + n0, sizeof(float) * (n1 - n0));
        step_gemm(a, G3, false, 0, G3, nb, hin, H, a.b_rec != nullptr, rec.data(), G3, n0, n1);
      });
    } else {
      step_gemm(a, G3, false, 0, 2 * H, nb, hin, H, false, rec.data(), G3);
    }
    for (int64_t b = b0; b < b1; ++b) {
      float* z = zs + b * G3;
      const float* m = rec.data() + (b - b0) * G3;
      for_gate_cols(2, H, u, [&](int64_t n0, int64_t n1) {
        for (int64_t j = n0; j < n1; ++j) z[j] += m[j];
        apply_act(a.ract, z + n0, n1 - n0);  // z, r
      });
      const float* r = z + H;
      if (reset_after) {
        float* mh = tape.aux.ptr() + s * BH + b * H;
        for (int64_t j = u0; j < u1; ++j) {
          mh[j] = m[2 * H + j];
          z[2 * H + j] += r[j] * mh[j];
        }
        apply_act(a.act, z + 2 * H + u0, w);
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
        std::memcpy(hn + u0, hp + u0, sizeof(float) * w);
        continue;
      }
      const float* z = zs + b * G3;
      const float* hh = z + 2 * H;
      for (int64_t j = u0; j < u1; ++j) hn[j] = z[j] * hp[j] + (1.0f - z[j]) * hh[j];
    }
  }
}

// The backward loop over one part of a slice of batch rows: writes its units' columns of their rows of
// dz and (reset_after) dzr.
void backward_rows(const CellArgs& a, bool reset_after, const RnnTape& tape, const float* dyp, float* dz, float* dzr,
                   const SlicePart& p) {
  const int64_t B = a.B, H = a.H, G3 = 3 * H, BH = B * H, T = a.T, b0 = p.r0, b1 = p.r1, nb = b1 - b0;
  const Units u = part_units(H, p);
  const int64_t u0 = u.u0, u1 = u.u1, w = u1 - u0;
  std::vector<float> dh(nb * H, 0.0f), dhr(nb * H);  // [b1 - b0, H], row b at (b - b0) * H
  for (int64_t s = T - 1; s >= 0; --s) {
    const float* dys = dyp + s * BH + b0 * H;
    for (int64_t r = 0; r < nb; ++r)
      for (int64_t j = u0; j < u1; ++j) dh[r * H + j] += dys[r * H + j];
    const float* zs = tape.z.ptr() + s * B * G3;
    const float* hprev = tape.h.ptr() + s * BH;
    const float* hin = tape.h_in() + s * BH;
    float* dzs = dz + s * B * G3;
    float* dzrs = reset_after ? dzr + s * B * G3 : nullptr;
    auto zero_dz = [&](int64_t b) {
      for_gate_cols(3, H, u, [&](int64_t n0, int64_t n1) {
        std::memset(dzs + b * G3 + n0, 0, sizeof(float) * (n1 - n0));
        if (dzrs) std::memset(dzrs + b * G3 + n0, 0, sizeof(float) * (n1 - n0));
      });
    };
    if (!tape.any_used(s, b0, b1)) {  // every row carried h over: dh passes through
      for (int64_t b = b0; b < b1; ++b) zero_dz(b);
      continue;
    }
    // d z (before ract'), d hh -> d(x_h + ...) for every used row.
    for (int64_t b = b0; b < b1; ++b) {
      float* d = dzs + b * G3;
      if (!tape.used(s, b)) {
        zero_dz(b);
        continue;
      }
      const float* z = zs + b * G3;
      const float* hh = z + 2 * H;
      const float* hp = hprev + b * H;
      const float* dhb = dh.data() + (b - b0) * H;
      for (int64_t j = u0; j < u1; ++j) {
        d[j] = dhb[j] * (hp[j] - hh[j]);
        d[2 * H + j] = dhb[j] * (1.0f - z[j]);
      }
      mul_act_grad(a.act, hh + u0, d + 2 * H + u0, w);
      if (reset_after) {
        const float* r = z + H;
        const float* mh = tape.aux.ptr() + s * BH + b * H;
        float* dr = dzrs + b * G3;
        for (int64_t j = u0; j < u1; ++j) {
          d[H + j] = d[2 * H + j] * mh[j];      // d r
          dr[2 * H + j] = d[2 * H + j] * r[j];  // d m_h
        }
        for_gate_cols(2, H, u, [&](int64_t n0, int64_t n1) {
          mul_act_grad(a.ract, z + n0, d + n0, n1 - n0);
          std::memcpy(dr + n0, d + n0, sizeof(float) * (n1 - n0));  // d m_z, d m_r
        });
      }
    }
    if (reset_after) {
      p.wait();  // dzr's rows of step s have every part's columns
      // d hin = dzr @ U^T: this part's units.
      step_gemm(a, G3, true, 0, G3, nb, dzrs + b0 * G3, G3, false, dhr.data(), H, u0, u1);
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
        for (int64_t j = u0; j < u1; ++j) dhb[j] = dhb[j] * z[j] + r[j];
      } else {
        const float* m = tape.rec_drop.data() + b * H;
        for (int64_t j = u0; j < u1; ++j) dhb[j] = dhb[j] * z[j] + r[j] * m[j];
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
  const int parts = a.reset_after ? unit_parts(a, tape) : 1;
  loop_rows(a, parts, [&](const SlicePart& p) { forward_rows(a, a.reset_after, tape, p); });
}

void gru_backward(const CellArgs& a, const RnnTape& tape, const float* dyp, float* dz, float* dU, float* db_rec) {
  const bool reset_after = a.reset_after;
  const int64_t B = a.B, H = a.H, G3 = 3 * H, T = a.T;
  pack_blocks(a, true);
  Tensor dzr;  // reset_after: [T, B, 3H] d loss / d(h@U + b_h)
  if (reset_after) dzr = Tensor({T, B, G3});
  const int parts = reset_after ? unit_parts(a, tape) : 1;
  loop_rows(a, parts, [&](const SlicePart& p) { backward_rows(a, reset_after, tape, dyp, dz, dzr.ptr(), p); });
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
