// Element-wise kernels of the generic recurrent layers (what cuDNN cannot run): gathering inputs
// into processing order, one time step of each cell forward and backward, and the outputs. The
// GEMMs between them are cuBLAS calls in generic_rnn.cpp. Kernels first, then launchers. Each cell
// kernel mirrors the CPU loop in backend/cpu/{lstm,gru,simple_rnn}.cpp, one thread per (b, j).
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"

namespace rnntrain::cuda::k {

namespace {

// ---------------- kernels ----------------

__global__ void rnn_gather_k(const float* x, const float* in_drop, const uint8_t* mask, float* xp, uint8_t* step,
                             int64_t B, int64_t T, int64_t I, bool backwards) {
  GRID_LOOP(idx, T * B * I) {
    const int64_t i = idx % I, b = (idx / I) % B, s = idx / (I * B);
    const int64_t t = backwards ? T - 1 - s : s;
    const float v = x[(b * T + t) * I + i];
    xp[idx] = in_drop ? v * in_drop[b * I + i] : v;
    if (i == 0) step[s * B + b] = mask ? mask[b * T + t] : 1;
  }
}

__global__ void rnn_scatter_dx_k(const float* dxp, const float* in_drop, float* dx, int64_t B, int64_t T, int64_t I,
                                 bool backwards, bool accumulate) {
  GRID_LOOP(idx, T * B * I) {
    const int64_t i = idx % I, b = (idx / I) % B, s = idx / (I * B);
    const int64_t t = backwards ? T - 1 - s : s;
    float v = dxp[idx];
    if (in_drop) v *= in_drop[b * I + i];
    float* o = dx + (b * T + t) * I + i;
    *o = accumulate ? *o + v : v;
  }
}

__global__ void rnn_outputs_k(const float* h, const uint8_t* step, float* y, int64_t B, int64_t T, int64_t H,
                              bool sequences, bool zero_masked) {
  if (!sequences) {
    GRID_LOOP(i, B * H) y[i] = h[T * B * H + i];
    return;
  }
  GRID_LOOP(idx, B * T * H) {
    const int64_t j = idx % H, s = (idx / H) % T, b = idx / (T * H);
    y[idx] = (zero_masked && !step[s * B + b]) ? 0.0f : h[((s + 1) * B + b) * H + j];
  }
}

__global__ void rnn_output_grads_k(const float* dy, const uint8_t* step, float* dyp, int64_t B, int64_t T, int64_t H,
                                   bool sequences, bool zero_masked) {
  GRID_LOOP(idx, T * B * H) {
    const int64_t j = idx % H, b = (idx / H) % B, s = idx / (H * B);
    float v = 0.0f;
    if (sequences) v = (zero_masked && !step[s * B + b]) ? 0.0f : dy[(b * T + s) * H + j];
    else if (s == T - 1) v = dy[b * H + j];
    dyp[idx] = v;
  }
}

__global__ void lstm_fwd_k(CellStep c, float* z, const float* hprev, const float* cprev, float* hnext, float* cnext,
                           float* aux) {
  const int64_t H = c.H;
  GRID_LOOP(idx, c.B * H) {
    const int64_t b = idx / H, j = idx % H;
    if (!c.step[b]) {
      cnext[idx] = cprev[idx];
      hnext[idx] = hprev[idx];
      continue;
    }
    float* zb = z + b * 4 * H;
    const float i = act_f(c.ract, zb[j]), f = act_f(c.ract, zb[H + j]);
    const float g = act_f(c.act, zb[2 * H + j]), o = act_f(c.ract, zb[3 * H + j]);
    zb[j] = i, zb[H + j] = f, zb[2 * H + j] = g, zb[3 * H + j] = o;
    const float cn = f * cprev[idx] + i * g;
    cnext[idx] = cn;
    const float ac = act_f(c.act, cn);
    aux[idx] = ac;
    hnext[idx] = o * ac;
  }
}

__global__ void lstm_bwd_k(CellStep c, const float* z, const float* aux, const float* cprev, const float* dy, float* dh,
                           float* dc, float* dz) {
  const int64_t H = c.H;
  GRID_LOOP(idx, c.B * H) {
    const int64_t b = idx / H, j = idx % H;
    const float d = dh[idx] + dy[idx];
    dh[idx] = d;
    float* db = dz + b * 4 * H;
    if (!c.step[b]) {
      db[j] = db[H + j] = db[2 * H + j] = db[3 * H + j] = 0.0f;
      continue;
    }
    const float* zb = z + b * 4 * H;
    const float i = zb[j], f = zb[H + j], g = zb[2 * H + j], o = zb[3 * H + j];
    const float ac = aux[idx];
    const float dcv = dc[idx] + act_grad_f(c.act, ac, d * o);
    const float cp = cprev[idx];
    db[j] = act_grad_f(c.ract, i, dcv * g);
    db[H + j] = act_grad_f(c.ract, f, dcv * cp);
    db[2 * H + j] = act_grad_f(c.act, g, dcv * i);
    db[3 * H + j] = act_grad_f(c.ract, o, d * ac);
    dc[idx] = dcv * f;
  }
}

__global__ void gru_fwd_after_k(CellStep c, float* z, const float* rec, float* aux, const float* hprev, float* hnext) {
  const int64_t H = c.H;
  GRID_LOOP(idx, c.B * H) {
    const int64_t b = idx / H, j = idx % H;
    float* zb = z + b * 3 * H;
    const float* m = rec + b * 3 * H;
    const float zz = act_f(c.ract, zb[j] + m[j]);
    const float rr = act_f(c.ract, zb[H + j] + m[H + j]);
    const float mh = m[2 * H + j];
    aux[idx] = mh;
    const float hh = act_f(c.act, zb[2 * H + j] + rr * mh);
    zb[j] = zz, zb[H + j] = rr, zb[2 * H + j] = hh;
    const float hp = hprev[idx];
    hnext[idx] = c.step[b] ? zz * hp + (1.0f - zz) * hh : hp;
  }
}

__global__ void gru_fwd_before_a_k(CellStep c, float* z, const float* rec, const float* hin, float* rh) {
  const int64_t H = c.H;
  GRID_LOOP(idx, c.B * H) {
    const int64_t b = idx / H, j = idx % H;
    float* zb = z + b * 3 * H;
    const float* m = rec + b * 3 * H;
    const float zz = act_f(c.ract, zb[j] + m[j]);
    const float rr = act_f(c.ract, zb[H + j] + m[H + j]);
    zb[j] = zz, zb[H + j] = rr;
    rh[idx] = rr * hin[idx];
  }
}

__global__ void gru_fwd_before_b_k(CellStep c, float* z, const float* rec, const float* hprev, float* hnext) {
  const int64_t H = c.H;
  GRID_LOOP(idx, c.B * H) {
    const int64_t b = idx / H, j = idx % H;
    float* zb = z + b * 3 * H;
    const float hh = act_f(c.act, zb[2 * H + j] + rec[b * 3 * H + 2 * H + j]);
    zb[2 * H + j] = hh;
    const float zz = zb[j], hp = hprev[idx];
    hnext[idx] = c.step[b] ? zz * hp + (1.0f - zz) * hh : hp;
  }
}

__global__ void gru_bwd_a_k(CellStep c, bool reset_after, const float* z, const float* aux, const float* hprev,
                            const float* dy, float* dh, float* dz, float* dzr) {
  const int64_t H = c.H;
  GRID_LOOP(idx, c.B * H) {
    const int64_t b = idx / H, j = idx % H;
    const float d = dh[idx] + dy[idx];
    dh[idx] = d;
    float* db = dz + b * 3 * H;
    float* dr = dzr ? dzr + b * 3 * H : nullptr;
    if (!c.step[b]) {
      db[j] = db[H + j] = db[2 * H + j] = 0.0f;
      if (dr) dr[j] = dr[H + j] = dr[2 * H + j] = 0.0f;
      continue;
    }
    const float* zb = z + b * 3 * H;
    const float zz = zb[j], hh = zb[2 * H + j];
    const float dzz = d * (hprev[idx] - hh);
    const float dhh = act_grad_f(c.act, hh, d * (1.0f - zz));
    db[2 * H + j] = dhh;
    if (reset_after) {
      const float rr = zb[H + j];
      const float g_z = act_grad_f(c.ract, zz, dzz);
      const float g_r = act_grad_f(c.ract, rr, dhh * aux[idx]);
      db[j] = g_z, db[H + j] = g_r;
      dr[j] = g_z, dr[H + j] = g_r, dr[2 * H + j] = dhh * rr;
    } else {
      db[j] = dzz;  // ract' is applied in gru_bwd_before_b, with d r
    }
  }
}

__global__ void gru_bwd_before_b_k(CellStep c, const float* z, const float* hin, float* drh, float* dz) {
  const int64_t H = c.H;
  GRID_LOOP(idx, c.B * H) {
    const int64_t b = idx / H, j = idx % H;
    if (!c.step[b]) continue;
    const float* zb = z + b * 3 * H;
    float* db = dz + b * 3 * H;
    const float rr = zb[H + j];
    const float g_r = drh[idx] * hin[idx];
    drh[idx] *= rr;
    db[j] = act_grad_f(c.ract, zb[j], db[j]);
    db[H + j] = act_grad_f(c.ract, rr, g_r);
  }
}

__global__ void gru_carry_k(CellStep c, const float* z, const float* dhr, const float* rec_drop, float* dh) {
  const int64_t H = c.H;
  GRID_LOOP(idx, c.B * H) {
    const int64_t b = idx / H, j = idx % H;
    if (!c.step[b]) continue;
    const float r = rec_drop ? dhr[idx] * rec_drop[idx] : dhr[idx];
    dh[idx] = dh[idx] * z[b * 3 * H + j] + r;
  }
}

__global__ void simple_fwd_k(CellStep c, float* z, const float* hprev, float* hnext) {
  GRID_LOOP(idx, c.B * c.H) {
    if (!c.step[idx / c.H]) {
      hnext[idx] = hprev[idx];
      continue;
    }
    const float v = act_f(c.act, z[idx]);
    z[idx] = v;
    hnext[idx] = v;
  }
}

__global__ void simple_bwd_k(CellStep c, const float* z, const float* dy, float* dh, float* dz) {
  GRID_LOOP(idx, c.B * c.H) {
    const float d = dh[idx] + dy[idx];
    dh[idx] = d;
    dz[idx] = c.step[idx / c.H] ? act_grad_f(c.act, z[idx], d) : 0.0f;
  }
}

__global__ void rnn_carry_k(CellStep c, const float* dhr, const float* rec_drop, float* dh) {
  GRID_LOOP(idx, c.B * c.H) {
    if (!c.step[idx / c.H]) continue;
    dh[idx] = rec_drop ? dhr[idx] * rec_drop[idx] : dhr[idx];
  }
}

}  // namespace

// ---------------- launchers ----------------

void rnn_gather(const float* x, const float* in_drop, const uint8_t* mask, float* xp, uint8_t* step, int64_t B,
                int64_t T, int64_t I, bool backwards, cudaStream_t s) {
  if (T * B * I == 0) return;
  rnn_gather_k<<<blocks_for(T * B * I), kThreads, 0, s>>>(x, in_drop, mask, xp, step, B, T, I, backwards);
  LAUNCH_CHECK("rnn_gather");
}

void rnn_scatter_dx(const float* dxp, const float* in_drop, float* dx, int64_t B, int64_t T, int64_t I, bool backwards,
                    bool accumulate, cudaStream_t s) {
  if (T * B * I == 0) return;
  rnn_scatter_dx_k<<<blocks_for(T * B * I), kThreads, 0, s>>>(dxp, in_drop, dx, B, T, I, backwards, accumulate);
  LAUNCH_CHECK("rnn_scatter_dx");
}

void rnn_outputs(const float* h, const uint8_t* step, float* y, int64_t B, int64_t T, int64_t H, bool sequences,
                 bool zero_masked, cudaStream_t s) {
  const int64_t n = sequences ? B * T * H : B * H;
  if (n == 0) return;
  rnn_outputs_k<<<blocks_for(n), kThreads, 0, s>>>(h, step, y, B, T, H, sequences, zero_masked);
  LAUNCH_CHECK("rnn_outputs");
}

void rnn_output_grads(const float* dy, const uint8_t* step, float* dyp, int64_t B, int64_t T, int64_t H,
                      bool sequences, bool zero_masked, cudaStream_t s) {
  if (T * B * H == 0) return;
  rnn_output_grads_k<<<blocks_for(T * B * H), kThreads, 0, s>>>(dy, step, dyp, B, T, H, sequences, zero_masked);
  LAUNCH_CHECK("rnn_output_grads");
}

void lstm_fwd(const CellStep& c, float* z, const float* hprev, const float* cprev, float* hnext, float* cnext,
              float* aux, cudaStream_t s) {
  lstm_fwd_k<<<blocks_for(c.B * c.H), kThreads, 0, s>>>(c, z, hprev, cprev, hnext, cnext, aux);
  LAUNCH_CHECK("lstm_fwd");
}

void lstm_bwd(const CellStep& c, const float* z, const float* aux, const float* cprev, const float* dy, float* dh,
              float* dc, float* dz, cudaStream_t s) {
  lstm_bwd_k<<<blocks_for(c.B * c.H), kThreads, 0, s>>>(c, z, aux, cprev, dy, dh, dc, dz);
  LAUNCH_CHECK("lstm_bwd");
}

void gru_fwd_after(const CellStep& c, float* z, const float* rec, float* aux, const float* hprev, float* hnext,
                   cudaStream_t s) {
  gru_fwd_after_k<<<blocks_for(c.B * c.H), kThreads, 0, s>>>(c, z, rec, aux, hprev, hnext);
  LAUNCH_CHECK("gru_fwd_after");
}

void gru_fwd_before_a(const CellStep& c, float* z, const float* rec, const float* hin, float* rh, cudaStream_t s) {
  gru_fwd_before_a_k<<<blocks_for(c.B * c.H), kThreads, 0, s>>>(c, z, rec, hin, rh);
  LAUNCH_CHECK("gru_fwd_before_a");
}

void gru_fwd_before_b(const CellStep& c, float* z, const float* rec, const float* hprev, float* hnext, cudaStream_t s) {
  gru_fwd_before_b_k<<<blocks_for(c.B * c.H), kThreads, 0, s>>>(c, z, rec, hprev, hnext);
  LAUNCH_CHECK("gru_fwd_before_b");
}

void gru_bwd_a(const CellStep& c, bool reset_after, const float* z, const float* aux, const float* hprev,
               const float* dy, float* dh, float* dz, float* dzr, cudaStream_t s) {
  gru_bwd_a_k<<<blocks_for(c.B * c.H), kThreads, 0, s>>>(c, reset_after, z, aux, hprev, dy, dh, dz, dzr);
  LAUNCH_CHECK("gru_bwd_a");
}

void gru_bwd_before_b(const CellStep& c, const float* z, const float* hin, float* drh, float* dz, cudaStream_t s) {
  gru_bwd_before_b_k<<<blocks_for(c.B * c.H), kThreads, 0, s>>>(c, z, hin, drh, dz);
  LAUNCH_CHECK("gru_bwd_before_b");
}

void gru_carry(const CellStep& c, const float* z, const float* dhr, const float* rec_drop, float* dh, cudaStream_t s) {
  gru_carry_k<<<blocks_for(c.B * c.H), kThreads, 0, s>>>(c, z, dhr, rec_drop, dh);
  LAUNCH_CHECK("gru_carry");
}

void simple_fwd(const CellStep& c, float* z, const float* hprev, float* hnext, cudaStream_t s) {
  simple_fwd_k<<<blocks_for(c.B * c.H), kThreads, 0, s>>>(c, z, hprev, hnext);
  LAUNCH_CHECK("simple_fwd");
}

void simple_bwd(const CellStep& c, const float* z, const float* dy, float* dh, float* dz, cudaStream_t s) {
  simple_bwd_k<<<blocks_for(c.B * c.H), kThreads, 0, s>>>(c, z, dy, dh, dz);
  LAUNCH_CHECK("simple_bwd");
}

void rnn_carry(const CellStep& c, const float* dhr, const float* rec_drop, float* dh, cudaStream_t s) {
  rnn_carry_k<<<blocks_for(c.B * c.H), kThreads, 0, s>>>(c, dhr, rec_drop, dh);
  LAUNCH_CHECK("rnn_carry");
}

}  // namespace rnntrain::cuda::k
