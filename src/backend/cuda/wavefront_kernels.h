// rnntrain's own recurrent kernels (plan.algo: wavefront): the launch arguments shared by
// wavefront.cpp and kernels_wavefront.cu. One launch runs a group of consecutive layers of a stack
// (both directions) over all time steps: S thread blocks per (layer, direction) row, each owning a
// slice of U hidden units with their weight columns resident in shared memory for every step, and
// each row's step t starting as soon as the steps it reads are done (a per-row, per-step counter in
// global memory), so layer l+1 runs step t while layer l runs step t+1. docs/cuda.md has the design.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace rnntrain::cuda::wf {

constexpr int kWarps = 16;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxTiles = 4;  // 16x16 accumulator tiles per warp (and side): N <= 64
constexpr int kStages = 8;    // operand tiles per warp's ring (kStages - 1 in flight)
constexpr int kAccPad = 8;    // floats past N in a row of partial sums (fewer bank conflicts)
constexpr int kMaxRows = 8;   // (layer, direction) rows in one launch

// How one launch divides its work and shared memory (wavefront.cpp: split(); at most 256 sequences).
struct Split {
  int S = 0;    // blocks per row
  int U = 0;    // units per block (the last block of a row may have fewer)
  int N = 0;    // weight columns per block: G*U (forward) or U (backward), padded to 16
  int ldw = 0;  // row stride of the weights in shared memory (N; N + 8 against bank conflicts when N > 16)
  int ksplit = 1;  // warps sharing one row tile, each a share of its k steps (kWarps / row tiles)
  size_t smem = 0;
};

// The second design's forward (sm90a/kernels_wavefront2.cu, docs/cuda.md): every (layer, direction)
// row is a cluster of C CTAs of U units each (4U weight columns: LSTM i,f,g,o; GRU z, r, the
// candidate's recurrent and input sides); each layer above the launch's first has a second cluster
// (its "input row") that multiplies the layer below's h by its kernel, one step ahead.
constexpr int kRing2 = 8;  // input-row partial sums kept per layer (steps)
constexpr int kDone = 2 * kMaxRows * 16;  // a batch slice's done flags (Args::done)
struct Cluster {
  int C = 0;     // CTAs per row (the cluster size)
  int U = 0;     // units per CTA: 8, 16 or 32
  int Kp = 0;    // H padded to the operand's k steps (C * U rounded up to 16)
  int rows = 0;  // recurrent rows (L * D) and, after them, L - 1 input rows
  int slices = 1;  // batch slices of 64 rows a launch runs side by side, rows clusters each
  int S = 0;     // backward: the slots of its ring of dG slices in shared memory (at most C)
  int depth = 3;  // backward: slices whose products may still run when a slot is released (clamped to S - 1)
  size_t smem = 0;
};

// All arrays time-major. Row r = l * D + d, l relative to the launch's first layer. E is the half type.
struct Args {
  bool gru = false;
  bool reset_after = true;  // GRU: false only on the second design (Cell2::GruResetFirst)
  int L = 0, D = 1, B = 0, T = 0, H = 0;
  int Hp = 0;   // H padded to 16: the row width of hseq's per-direction blocks
  int GH = 0;   // gates * H (Keras' kernel width)
  int GHp = 0;  // GH padded to 16: the columns of dgx, dgh the first design reads (the padding ones are 0)
  int GP = 0;   // 4H padded to 16: the row width of gates and dgx
  int ldgh = 0;  // the row width of dgh: GP (LSTM: dgh is dgx) or GHp (GRU: a buffer of its own)
  int b0 = 0, Bs = 0;  // the batch rows [b0, b0 + Bs) this launch computes (second design: cl.slices of 64)
  Split sp;
  const int32_t* lens = nullptr;  // [B], 1..T
  unsigned* flags = nullptr;      // [L * D][T], zero at launch
  const void* wk[kMaxRows] = {};     // E [in, GH]: each row's Keras kernel (in = D*H above the first layer)
  const void* wr[kMaxRows] = {};     // E [H, GH]: recurrent kernel
  const float* bias[kMaxRows] = {};  // [GH], GRU [2, GH] (input, recurrent)
  // forward
  const void* xproj = nullptr;   // E [D][T, B, GH]: the first layer's input times its kernel (no bias)
  void* hseq[kMaxRows] = {};     // per layer, E [T, B, D, Hp]: outputs, zero-padded to Hp (read back)
  void* out[kMaxRows] = {};      // per layer, E [T, B, D*H]: outputs (may be hseq itself when Hp == H)
  void* hy = nullptr;            // E [D, B, H]: the last layer's final states, or null
  // Training keeps, per row, E [T, B, GP] gates: LSTM i,f,g,o; GRU z,r,h~,(h U_h + b_h); E [T, B, H]
  // state: LSTM c_t, GRU h_{t-1}.
  void* gates[kMaxRows] = {};
  void* state[kMaxRows] = {};
  // backward: per row, the gradients of the input-side pre-activations (dgx: E [T, B, GP]) and, for
  // the first design, of the recurrent side (dgh: GRU, E [T, B, ldgh]; LSTM: = dgx). The second
  // design writes a GRU's recurrent-side candidate gradient to columns 3H..4H of dgx (its z and r are
  // dgx's). dgx shares the gates' memory one step over: dG of step t fills the slot of the step the
  // backward did before it (wavefront.cpp: gates), whose gates every CTA of the row has read before
  // any can start step t. The first design reads columns up to GHp and writes GH..GHp as zeros.
  void* dgx[kMaxRows] = {};
  void* dgh[kMaxRows] = {};
  const void* dy = nullptr;      // E [T, B, D*H]: gradient of the last layer's outputs, or
  const float* dy32 = nullptr;   // FP32 [T, B, D*H] (from the layers above the launch)
  const void* dhy = nullptr;     // E [D, B, H]: gradient of the last layer's final states, or null
  // second design (forward)
  Cluster cl;
  void* hcore[kMaxRows] = {};    // per recurrent row, E [T][64 x Kp] in wgmma's operand layout; a GRU
                                 // with reset_after: false has 2 more, r * h_{t-1} by the step's parity
  void* rh[kMaxRows] = {};       // GRU, reset_after: false, training: E [T, B, H] r * h_{t-1} (0 on padded steps)
  // Second design, cl.slices > 1: each batch slice's hcore, gcore (elements) and xring (floats) lie these
  // far after the previous slice's; its done flags kDone after.
  size_t core_slice = 0, xring_slice = 0;
  float* xring = nullptr;        // [L - 1][kRing2][C][2U / 4][128][4]: the input rows' partial sums
  unsigned* done = nullptr;      // [slices][2][kMaxRows][16]: steps finished by each CTA of a recurrent / input row
  // second design (backward)
  void* gcore[kMaxRows] = {};    // per recurrent row, E [kRing2][C][64 x 4U]: dG slices in wgmma's operand layout
};

void launch_forward(const Args& a, bool bf16, cudaStream_t s);
void launch_backward(const Args& a, bool bf16, cudaStream_t s);
// out[c] += sum over rows of a[r * lda + c] (a in the half type), the same sums every run; part:
// scratch of kColsumParts * cols floats.
constexpr int kColsumParts = 64;
void add_colsum(const void* a, bool bf16, int64_t rows, int64_t cols, int64_t lda, float* part, float* out,
                cudaStream_t s);
// The second design: whether this build and GPU have it (sm_90a), how many clusters of `cl` can be
// resident at once (0: none), and the launch (a.cl.rows clusters for each of a.cl.slices batch slices,
// all resident).
// The cells it runs: LSTM, and GRU with reset_after (Keras 3's default) or without it (Keras 2's: the
// reset gate applied to h_{t-1} before its product with the candidate's recurrent kernel).
enum class Cell2 { Lstm, Gru, GruResetFirst };
bool has_forward2();
int max_clusters2(const Cluster& cl, Cell2 cell, bool bf16);
void launch_forward2(const Args& a, bool bf16, cudaStream_t s);
// The second design's backward (sm90a/kernels_wavefront2_backward.cu): the forward's clusters, with
// S and smem of its own (wavefront.cpp: cluster2_backward); xring holds the input rows' sums here
// ([L - 1][kRing2][C][U / 8][128][4]).
int max_clusters2_backward(const Cluster& cl, Cell2 cell, bool bf16);
void launch_backward2(const Args& a, bool bf16, cudaStream_t s);
// The device's multiprocessors and the shared memory one block may opt in to.
int sm_count();
size_t smem_optin();

}  // namespace rnntrain::cuda::wf
