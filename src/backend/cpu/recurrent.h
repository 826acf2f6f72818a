// One direction of one recurrent layer (LSTM, GRU, SimpleRNN) over a whole batch on the CPU, time-major
// inside: the shared sequence code (input projection GEMM, dropout masks, masks, weight-gradient
// GEMMs) in recurrent.cpp, and per cell the time loop forward and backward (lstm.cpp, gru.cpp,
// simple_rnn.cpp). Not the layer wrappers (Bidirectional, merge): rnn_layers.cpp.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/cpu/packed_gemm.h"

namespace rnntrain::cpu {

// Who makes a recurrent layer's GEMMs: OpenBLAS (the reference, the spec), or the own engine
// (plan.cpu: own) with its packed weights (packed_gemm.h) in FP32 or bf16. The loops are the same.
enum class RnnMath { Reference, Own, OwnBf16 };
// The math plan.cpu and plan.precision ask for on this CPU: the own engine under plan.cpu: own, in
// bf16 where asked and the CPU has AVX512-BF16, FP32 otherwise; under plan.cpu: onednn, for the layers
// oneDNN does not run, the own engine where bf16 is asked and the CPU has it; else the reference
// (describe_cpu_plan says which).
RnnMath rnn_math(CpuRnn cpu, bool bf16);
// What plan.cpu auto means on this CPU: in FP32 the own engine where it has AVX-512, else oneDNN; in
// bf16 oneDNN, whose bf16 LSTM stacks use AMX where the CPU has it, while its GRU stacks and the layers
// it cannot run go to the own engine's bf16 (rnn_math). Measured (bench/RESULTS.md): at 2 threads on the
// AMD EPYC (no AMX), FP32 LSTM steps 1.06-1.24x faster on the own engine, GRU and masked ones level, bf16
// LSTM within 1-3%; at 8 and 16 threads on the GPU machine's Xeon (AMX), FP32 level or the own engine up
// to 1.10x faster, bf16 LSTM 1.19-1.47x faster on oneDNN. Two runs at once with a fixed train.threads take 1.7-2.0x one
// alone on the own engine, against oneDNN's 3.5-5.1x (bench/BUSY.md). Other values stay as they are.
CpuRnn cpu_path(CpuRnn configured, bool bf16);

// The own engine's packed operands for one direction's forward or backward, made once per call.
class OwnGemms {
 public:
  explicit OwnGemms(bool bf16) : bf16_(bf16) {}
  // Packs U[:, c0:c0+w] of a [H, G] recurrent kernel (its transpose when t) for step_gemm; once per
  // (t, c0). pack_step_gemm calls it.
  void need(bool t, const float* U, int64_t H, int64_t G, int64_t c0, int64_t w);
  const PackedB& get(bool t, int64_t c0) const;
  // op(b) ([k, n]) packed as the B of an all-steps GEMM; the same b, ldb, k, n and tb again (a
  // direction's backward multiplies by dz twice) reuse the packing.
  const PackedB& steps_b(bool tb, const float* b, int64_t ldb, int64_t k, int64_t n);

 private:
  struct Entry {
    bool t;
    int64_t c0;
    PackedB b;
  };
  bool bf16_;
  std::vector<Entry> u_;
  struct {
    bool tb = false;
    const float* b = nullptr;
    int64_t ldb = 0, k = 0, n = 0;
  } last_;
  PackedB steps_;
};

struct RnnWeights {
  Param* kernel;     // [I, G*H]
  Param* recurrent;  // [H, G*H]
  Param* bias;       // [G*H], or with two rows (GRU reset_after) [2, G*H]: row 0 input bias, row 1 recurrent bias; null without bias
};

// What one direction keeps for backward. s indexes processing order (t = T-1-s with go_backwards).
struct RnnTape {
  int64_t B = 0, T = 0, I = 0, H = 0;
  Tensor xp;   // [T, B, I] inputs in processing order, after input dropout
  Tensor z;    // [T, B, G*H] x@W + b_x on entry to the cell loop, then the activated gates
  Tensor h;    // [T+1, B, H] hidden states; h[0] = 0, h[s+1] after step s
  Tensor c;    // LSTM: [T+1, B, H] cell states
  Tensor aux;  // LSTM: act(c) [T, B, H]; GRU reset_after: h@U_h + b_hh [T, B, H]
  Tensor hd;   // [T, B, H] h[s] * recurrent dropout mask (empty without recurrent dropout)
  Tensor rh;   // GRU reset_after=false: r * hd [T, B, H]
  std::vector<float> in_drop;      // [B, I] input dropout mask, scaled by 1/(1-rate); empty = none
  std::vector<float> rec_drop;     // [B, H] recurrent dropout mask, scaled; empty = none
  std::vector<uint8_t> step_mask;  // [T, B] in processing order; empty = every step used
  bool zero_masked_outputs = false;

  const float* h_in() const { return hd.empty() ? h.ptr() : hd.ptr(); }  // [T, B, H] what U multiplies
  bool used(int64_t s, int64_t b) const { return step_mask.empty() || step_mask[s * B + b]; }
  // Whether any of rows [b0, b1) uses step s; the loops skip a step none uses (its GEMM included), so a
  // slice of short sequences does not pay for the batch's longest.
  bool any_used(int64_t s, int64_t b0, int64_t b1) const {
    if (step_mask.empty()) return true;
    for (int64_t b = b0; b < b1; ++b)
      if (step_mask[s * B + b]) return true;
    return false;
  }
};

// Work a direction gives its cell's loop to run in the loop's parallel region on the loop's own batch
// rows [b0, b1): before the loop over them and after it (own engine: the layout copies, the input
// projection and dx of those rows, each of which would otherwise be a parallel region of its own).
struct RowHooks {
  std::function<void(int64_t, int64_t)> before, after;
};

// What every cell loop reads.
struct CellArgs {
  Activation act, ract;
  bool reset_after;  // the cell's flag (GRU)
  int64_t B, T, H;
  const float* U;      // [H, G*H]
  const float* b_rec;  // the second bias row (GRU reset_after): [3H] recurrent bias, else null
  OwnGemms* own = nullptr;  // the own engine's GEMMs, or null for OpenBLAS
  const RowHooks* hooks = nullptr;
};

// The rows per slice of a cell's time loops: kSliceRows on OpenBLAS; on the own engine fewer where the
// threads outnumber the slices (16 threads, batch 32: 2 rows each instead of 4 threads of 8), down to
// 2, since its GEMM keeps its rate there (one core here, [M, 128] x [128, 512] bf16: 207 GFLOP/s at
// M = 8, 213 at 4, 158 at 2).
int64_t slice_rows(const CellArgs& a);
// The loops' parallel region: fn on every slice of slice_rows(a) batch rows, with a.hooks around it.
void loop_rows(const CellArgs& a, const std::function<void(int64_t, int64_t)>& fn);

// A step's recurrent GEMM over n batch rows, U being [H, G] (a.U): c[n, w] (+)= x[n, H] @ U[:, c0:c0+w],
// or, when t, c[n, H] (+)= x[n, w] @ U[:, c0:c0+w]^T. OpenBLAS, or the own engine's packing of that block.
void step_gemm(const CellArgs& a, int64_t G, bool t, int64_t c0, int64_t w, int64_t n, const float* x, int64_t ldx,
               bool accumulate, float* c, int64_t ldc);
// On the own engine, packs the block of a.U that step_gemm(a, G, t, c0, w, ...) multiplies. Call it
// before the loop's threads start: they only read the packings. Nothing on OpenBLAS.
void pack_step_gemm(const CellArgs& a, int64_t G, bool t, int64_t c0, int64_t w);
// An all-steps GEMM, c[m, n] (+)= op(a) @ op(b), or = bias + op(a) @ op(b) with a bias row [n]: one
// OpenBLAS call on every BLAS thread, or the own engine's packed GEMM with the rows of c spread over the
// threads.
void steps_gemm(OwnGemms* own, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc, const float* bias = nullptr);

// Gives t the shape, keeping its buffer when possible; contents are unspecified.
void resize(Tensor& t, Shape s);

// Rows [b0, b1) of h_{t-1} as the recurrent GEMM of step s sees them ([b1 - b0, H], row stride H):
// h[s], or h[s] times the recurrent dropout mask (written to tape.hd for backward).
const float* recurrent_input(RnnTape& tape, int64_t s, int64_t b0, int64_t b1);
// Row b of d h_{t-1}: dhr [H] (= dz @ U^T for that row), times the recurrent dropout mask if any.
void carry_dh(const RnnTape& tape, int64_t b, int64_t H, const float* dhr, float* dh);

// Each batch row's recurrence is independent of the others, so the time loops run on slices of the
// batch spread over the BLAS threads (parallel_rows), each slice making single-threaded per-step GEMMs.
// Rows per slice: OpenBLAS's AVX-512 kernels (Debian 12's 0.3.21 has them) multiply small matrices,
// M*N*K up to 100^3, in place; larger ones they first copy into packed panels. A 128-unit LSTM's
// per-step GEMMs on 8 rows ([8, 128] x [128, 512] and back) are small, so U is not re-packed every
// step (measured: one 16-row GEMM takes 1.8x two 8-row ones backward, 1.1x forward).
inline constexpr int64_t kSliceRows = 8;

// A cell's time loops, one pair per cell (lstm.cpp, gru.cpp, simple_rnn.cpp), listed in recurrent.cpp;
// each runs its loop through loop_rows, so a.hooks run around it on the same rows.
// forward: tape.z holds x@W + b_x on entry and tape.h is [T+1, B, H] with h[0] = 0; sizes the cell's
// own tape (c, aux, rh) and fills h. backward: dyp [T, B, H] is the gradient of the per-step outputs
// (processing order); writes dz [T, B, G*H] = d loss / d(x@W + b_x), accumulates dU [H, G*H] and,
// when not null, db_rec (the second bias row). With a.hooks, "on entry" means once the before hook
// has run on a slice's rows (the own engine fills z and dyp that way).
struct CellLoops {
  LayerKind kind;
  void (*forward)(const CellArgs& a, RnnTape& tape);
  void (*backward)(const CellArgs& a, const RnnTape& tape, const float* dyp, float* dz, float* dU, float* db_rec);
};
void lstm_forward(const CellArgs& a, RnnTape& tape);
void lstm_backward(const CellArgs& a, const RnnTape& tape, const float* dyp, float* dz, float* dU, float* db_rec);
void gru_forward(const CellArgs& a, RnnTape& tape);
void gru_backward(const CellArgs& a, const RnnTape& tape, const float* dyp, float* dz, float* dU, float* db_rec);
void simple_rnn_forward(const CellArgs& a, RnnTape& tape);
void simple_rnn_backward(const CellArgs& a, const RnnTape& tape, const float* dyp, float* dz, float* dU, float* db_rec);

class RnnDirection {
 public:
  // spec: the LSTM/GRU/SimpleRNN spec (its go_backwards is ignored: pass the direction here).
  RnnDirection(const LayerSpec& spec, bool go_backwards, bool zero_masked_outputs, RnnMath math = RnnMath::Reference);

  // x: [B, T, I]; mask: [B, T] (time order) or empty. Returns [B, T, H] in processing order
  // (return_sequences) or [B, H] (the state after the last step).
  Tensor forward(const RnnWeights& w, const Tensor& x, const Mask& mask, bool training, Rng& rng, RnnTape& tape) const;
  // dy: like forward's result. Accumulates into w's grads; returns dx: [B, T, I]. Not const: it keeps
  // its scratch (dz_, dxp_) from pass to pass.
  Tensor backward(const RnnWeights& w, const RnnTape& tape, const Tensor& dy);

  // The weights of this direction inside a layer's params, starting at index `first`.
  RnnWeights weights(const LayerSpec& owner, LayerParams& p, size_t first, int64_t input) const;

 private:
  std::optional<OwnGemms> own_gemms() const;  // a pass's packings on the own engine, none on OpenBLAS

  LayerSpec spec_;
  bool go_backwards_;
  bool zero_masked_outputs_;
  RnnMath math_;
  int gates_;
  const CellLoops* loops_;
  // Backward's dz and dxp, kept from pass to pass so that they are not zero-filled (and, on a new
  // allocation, paged in) every time: each pass writes every element of both (the loops all of dz,
  // masked steps as zeros; the GEMM all of dxp).
  Tensor dz_, dxp_;
};

}  // namespace rnntrain::cpu
