// The own CPU engine's GEMM (plan.cpu: own): C = A @ B with B packed once into 32-column panels,
// in FP32 or in bf16 (pairs of K interleaved, as AVX512-BF16's dot product reads them), FP32 sums.
// Built for the recurrent layers' shapes: a step's [8, H] x [H, 4H] against weights that stay in
// cache for every step, and the all-steps GEMMs around the loop. A is FP32 and converted per block
// of 8 rows. Measured on one core of the 2-core AMD EPYC (bench/PROFILE_CPU.md): 8 x 128 x 512 in
// 4.9 us bf16 (212 GFLOP/s) and 9.0 us FP32 (116), against OpenBLAS's 9.2 (FP32 only).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rnntrain::cpu {

// Why this CPU cannot run the own engine in FP32 (bf16 = false) or bf16, or "" when it can.
std::string own_gemm_refusal(bool bf16);

// B = op(b): [K, N] (b is [N, K] when tb), packed into panels of 32 columns, the columns past N zero.
// FP32: panel p, row k at f[(p * K + k) * 32]. bf16: K rounded up to even, rows 2i and 2i+1
// interleaved: panel p, pair i at h[(p * K/2 + i) * 64], each column's two values side by side.
struct PackedB {
  int64_t K = 0, N = 0;
  bool bf16 = false;
  std::vector<float> f;
  std::vector<uint16_t> h;
  void pack(bool as_bf16, bool tb, const float* b, int64_t ldb, int64_t k, int64_t n);
};

// c: [m, N] (row stride ldc) = op(a) @ b, or += when accumulate, or = bias + op(a) @ b with a bias row
// [N] (ignored when accumulate). op(a): [m, K]; a is [K, m] when ta. Single-threaded; the caller
// spreads rows over threads (parallel_rows).
void gemm_packed(int64_t m, bool ta, const float* a, int64_t lda, const PackedB& b, bool accumulate, float* c,
                 int64_t ldc, const float* bias = nullptr);

// Rounds to the nearest bf16 (ties to even) and back: what the bf16 GEMM multiplies (tests).
float round_bf16(float x);

// Whether this CPU can run bf16 on AMX tiles: it has AMX-BF16 and AVX512-BF16, and Linux grants the
// tile state.
bool amx_available();
// How gemm_packed runs bf16: on AMX tiles where amx_available() (1.2-1.5x the AVX512-BF16 kernel's
// speed at 16 threads on a Xeon, bench/PROFILE_CPU.md) unless RNNTRAIN_CPU_AMX=0, on their emulation
// with RNNTRAIN_CPU_AMX=emulate (tests: slow), else on the AVX512-BF16 kernel.
enum class AmxMode { Off, Hardware, Emulated };
AmxMode amx_mode();
// For `rnntrain plan`: ", its GEMMs on AMX tiles" and the like, why RNNTRAIN_CPU_AMX is ignored, or "".
std::string amx_note();
// gemm_packed's bf16 path on AMX tiles (b.bf16): on the hardware (needs amx_available()), or (emulate)
// on plain memory with the tile instructions as Intel's SDM describes them, on any CPU with
// AVX512-BF16 (tests).
void gemm_packed_amx(int64_t m, bool ta, const float* a, int64_t lda, const PackedB& b, bool accumulate, float* c,
                     int64_t ldc, const float* bias, bool emulate);

}  // namespace rnntrain::cpu
