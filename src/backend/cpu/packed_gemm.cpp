// The own engine's GEMM (packed_gemm.h). One micro-kernel per type: up to 8 rows of A against one
// 32-column panel of B, the 8 x 32 sums held in 16 AVX-512 registers for the whole of K. Only the
// kernels are compiled for AVX-512 (function target attributes, not a file-wide flag, so no inline
// code of the rest of the program is built for it); own_gemm_refusal() checks the CPU first. bf16 also
// has a path on AMX tiles (gemm_packed_amx), the default where the CPU has them.
#include "backend/cpu/packed_gemm.h"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/cpu_math.h"
#include "core/error.h"

#define RNNTRAIN_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define RNNTRAIN_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define RNNTRAIN_AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,amx-tile,amx-bf16")))

namespace rnntrain::cpu {
namespace {

constexpr int64_t kPanel = 32;  // columns per panel: two registers of 16 floats
constexpr int kRows = 8;        // rows per block: 16 sums and 2 panel registers of the 32

// The bf16 bits of x, rounded to nearest even; NaN stays NaN, and subnormals become zero as
// AVX512-BF16's conversion makes them.
uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);  // zero, subnormal
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN, quiet
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// The float whose bits are bf16 h in the upper half.
float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// What a tile's sums start from: c itself (accumulate), the panel's part of a bias row, or zero.
struct Start {
  bool c;
  const float* bias;
};

// Masks of the columns [0, n) of a panel, per register.
struct PanelMask {
  __mmask16 lo, hi;
  explicit PanelMask(int64_t n)
      : lo(n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1)),
        hi(n >= 32 ? __mmask16(0xffff) : n > 16 ? __mmask16((1u << (n - 16)) - 1) : __mmask16(0)) {}
};

// A tile's R x 32 sums: started from c, the bias row or zero, and stored back to c's columns [0, n).
template <int R>
RNNTRAIN_AVX512 inline void start_sums(const float* c, int64_t ldc, PanelMask mask, Start start, __m512* lo, __m512* hi) {
  for (int r = 0; r < R; ++r) {
    const float* from = start.c ? c + r * ldc : start.bias;
    lo[r] = from ? _mm512_maskz_loadu_ps(mask.lo, from) : _mm512_setzero_ps();
    hi[r] = from ? _mm512_maskz_loadu_ps(mask.hi, from + 16) : _mm512_setzero_ps();
  }
}
template <int R>
RNNTRAIN_AVX512 inline void store_sums(float* c, int64_t ldc, PanelMask mask, const __m512* lo, const __m512* hi) {
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, mask.lo, lo[r]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, mask.hi, hi[r]);
  }
}

// c[r, 0..n) (+)= sum_k a[r * sr + k * sk] * panel[k, 0..n) for r < R; the panel is [K, 32].
template <int R>
RNNTRAIN_AVX512 void tile_f32(int64_t K, const float* a, int64_t sr, int64_t sk, const float* panel, float* c,
                              int64_t ldc, PanelMask mask, Start start) {
  __m512 lo[R], hi[R];
  start_sums<R>(c, ldc, mask, start, lo, hi);
  for (int64_t k = 0; k < K; ++k) {
    const __m512 b0 = _mm512_loadu_ps(panel + k * kPanel), b1 = _mm512_loadu_ps(panel + k * kPanel + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * sr + k * sk]);
      lo[r] = _mm512_fmadd_ps(x, b0, lo[r]);
      hi[r] = _mm512_fmadd_ps(x, b1, hi[r]);
    }
  }
  store_sums<R>(c, ldc, mask, lo, hi);
}

// The same in bf16: a holds pairs of bf16 (32-bit words), row r's pair i at a[r * sr + i * si];
// the panel is [K/2, 32, 2].
template <int R>
RNNTRAIN_AVX512BF16 void tile_bf16(int64_t pairs, const uint32_t* a, int64_t sr, int64_t si, const uint16_t* panel,
                                   float* c, int64_t ldc, PanelMask mask, Start start) {
  __m512 lo[R], hi[R];
  start_sums<R>(c, ldc, mask, start, lo, hi);
  for (int64_t i = 0; i < pairs; ++i) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(panel + i * 2 * kPanel);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(panel + i * 2 * kPanel + kPanel);
    for (int r = 0; r < R; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * sr + i * si]));
      lo[r] = _mm512_dpbf16_ps(lo[r], x, b0);
      hi[r] = _mm512_dpbf16_ps(hi[r], x, b1);
    }
  }
  store_sums<R>(c, ldc, mask, lo, hi);
}

template <typename F>
void for_rows(int rows, F&& f) {  // f(std::integral_constant<int, rows>)
  switch (rows) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 5: f(std::integral_constant<int, 5>{}); break;
    case 6: f(std::integral_constant<int, 6>{}); break;
    case 7: f(std::integral_constant<int, 7>{}); break;
    default: f(std::integral_constant<int, 8>{}); break;
  }
}

// out[j] = the bf16 pair (even[j], odd[j]) as one word, the even one in the low half, for j < n; odd
// null reads as zeros.
RNNTRAIN_AVX512BF16 void pair_rows(const float* even, const float* odd, int64_t n, uint32_t* out) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512i lo = _mm512_maskz_cvtepu16_epi32(0xffff, (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(even + j)));
    const __m512i hi = odd ? _mm512_maskz_cvtepu16_epi32(0xffff, (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(odd + j)))
                           : _mm512_setzero_si512();
    _mm512_storeu_si512(out + j, _mm512_or_si512(lo, _mm512_maskz_slli_epi32(0xffff, hi, 16)));
  }
  for (; j < n; ++j) out[j] = to_bf16(even[j]) | (odd ? static_cast<uint32_t>(to_bf16(odd[j])) << 16 : 0u);
}

// Rows r0..r0+R of op(a) in bf16 pairs, into out: row-major [R, pairs] (sr = pairs, si = 1) from
// rows of a, or pair-major [pairs, R] (sr = 1, si = R) from columns of a (ta), each read contiguously.
// (sr, si: the strides tile_bf16 reads it with.)
RNNTRAIN_AVX512BF16 void convert_block(int R, bool ta, const float* a, int64_t lda, int64_t r0, int64_t K,
                                       uint32_t* out) {
  const int64_t pairs = (K + 1) / 2;
  if (!ta) {
    for (int r = 0; r < R; ++r) {
      const float* src = a + (r0 + r) * lda;
      auto* dst = reinterpret_cast<uint16_t*>(out + r * pairs);
      int64_t k = 0;
      for (; k + 16 <= K; k += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + k)));
      for (; k < K; ++k) dst[k] = to_bf16(src[k]);
      if (K % 2) dst[K] = 0;
    }
    return;
  }
  for (int64_t i = 0; i < pairs; ++i) {
    const float* even = a + 2 * i * lda + r0;
    pair_rows(even, 2 * i + 1 < K ? even + lda : nullptr, R, out + i * R);
  }
}

RNNTRAIN_AVX512 void gemm_f32(int64_t m, bool ta, const float* a, int64_t lda, const PackedB& b, bool accumulate,
                              const float* bias, float* c, int64_t ldc) {
  const int64_t sr = ta ? 1 : lda, sk = ta ? lda : 1, panels = (b.N + kPanel - 1) / kPanel;
  for (int64_t r0 = 0; r0 < m; r0 += kRows) {
    const int R = static_cast<int>(std::min<int64_t>(kRows, m - r0));
    const float* ar = a + r0 * sr;
    for (int64_t p = 0; p < panels; ++p) {
      const PanelMask mask(std::min(kPanel, b.N - p * kPanel));
      const float* panel = b.f.data() + p * b.K * kPanel;
      float* cp = c + r0 * ldc + p * kPanel;
      const Start start{accumulate, bias ? bias + p * kPanel : nullptr};
      for_rows(R, [&](auto rows) { tile_f32<rows()>(b.K, ar, sr, sk, panel, cp, ldc, mask, start); });
    }
  }
}

// Every block of 8 rows of op(a) is converted first, then each panel of B meets all of them while it
// is in cache: the all-steps GEMMs' B (K = T * B rows) is too large to stream once per block.
RNNTRAIN_AVX512BF16 void gemm_bf16(int64_t m, bool ta, const float* a, int64_t lda, const PackedB& b,
                                   bool accumulate, const float* bias, float* c, int64_t ldc) {
  thread_local std::vector<uint32_t> buf;
  const int64_t pairs = (b.K + 1) / 2, panels = (b.N + kPanel - 1) / kPanel, blocks = (m + kRows - 1) / kRows;
  buf.resize(static_cast<size_t>(blocks * kRows * pairs));
  for (int64_t k = 0; k < blocks; ++k)
    convert_block(static_cast<int>(std::min<int64_t>(kRows, m - k * kRows)), ta, a, lda, k * kRows, b.K,
                  buf.data() + k * kRows * pairs);
  for (int64_t p = 0; p < panels; ++p) {
    const PanelMask mask(std::min(kPanel, b.N - p * kPanel));
    const uint16_t* panel = b.h.data() + p * pairs * 2 * kPanel;
    const Start start{accumulate, bias ? bias + p * kPanel : nullptr};
    for (int64_t k = 0; k < blocks; ++k) {
      const int R = static_cast<int>(std::min<int64_t>(kRows, m - k * kRows));
      const int64_t sr = ta ? 1 : pairs, si = ta ? R : 1;  // convert_block's layout
      float* cp = c + k * kRows * ldc + p * kPanel;
      const uint32_t* ab = buf.data() + k * kRows * pairs;
      for_rows(R, [&](auto rows) { tile_bf16<rows()>(pairs, ab, sr, si, panel, cp, ldc, mask, start); });
    }
  }
}

// AMX: 8 tile registers of up to 16 rows of 64 bytes. A block of up to 16 rows of op(a) in bf16 pairs
// (row major, zero rows past m) meets one panel of B at a time: tiles C0 and C1 hold its sums (columns
// 0-15 and 16-31), loaded from and stored to c where the block and the panel are whole, and per chunk
// of 16 pairs of K, tile A (the rows x 16 pairs) and B0, B1 (16 pairs x 16 columns, read from the
// panel with its row stride of 32 words) meet in two TDPBF16PS. The last chunk, when K has fewer
// pairs, has tiles of its own shape (Ar, B0r, B1r).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
enum Tile { kC0, kC1, kA, kB0, kB1, kAr, kB0r, kB1r };
enum Dot { kFull0, kFull1, kRest0, kRest1 };  // C0 += A B0, C1 += A B1; the same with Ar, B0r, B1r

// The tile instructions (their tile numbers must be literals).
struct AmxTiles {
  RNNTRAIN_AMX void config(const TileConfig& c) { _tile_loadconfig(&c); }
  RNNTRAIN_AMX void load(int t, const void* p, int64_t stride) {
    switch (t) {
      case kC0: _tile_loadd(0, p, stride); break;
      case kC1: _tile_loadd(1, p, stride); break;
      case kA: _tile_loadd(2, p, stride); break;
      case kB0: _tile_loadd(3, p, stride); break;
      case kB1: _tile_loadd(4, p, stride); break;
      case kAr: _tile_loadd(5, p, stride); break;
      case kB0r: _tile_loadd(6, p, stride); break;
      default: _tile_loadd(7, p, stride); break;
    }
  }
  RNNTRAIN_AMX void store(int t, void* p, int64_t stride) {
    if (t == kC0) _tile_stored(0, p, stride);
    else _tile_stored(1, p, stride);
  }
  RNNTRAIN_AMX void zero(int t) {
    if (t == kC0) _tile_zero(0);
    else _tile_zero(1);
  }
  RNNTRAIN_AMX void dot(Dot d) {
    switch (d) {
      case kFull0: _tile_dpbf16ps(0, 2, 3); break;
      case kFull1: _tile_dpbf16ps(1, 2, 4); break;
      case kRest0: _tile_dpbf16ps(0, 5, 6); break;
      default: _tile_dpbf16ps(1, 5, 7); break;
    }
  }
  RNNTRAIN_AMX void release() { _tile_release(); }
};

// The same instructions on plain memory, as Intel's SDM describes them: a load fills the configured
// rows and bytes and zeroes the rest; TDPBF16PS adds to each FP32 sum the products of a row of A and
// a column of B, pair by pair, the even element first (a product of two bf16 is exact in FP32).
struct EmulatedTiles {
  TileConfig cfg;
  uint8_t t[8][16][64] = {};
  void config(const TileConfig& c) { cfg = c; }
  void load(int k, const void* p, int64_t stride) {
    std::memset(t[k], 0, sizeof t[k]);
    for (int r = 0; r < cfg.rows[k]; ++r)
      std::memcpy(t[k][r], static_cast<const uint8_t*>(p) + r * stride, cfg.colsb[k]);
  }
  void store(int k, void* p, int64_t stride) {
    for (int r = 0; r < cfg.rows[k]; ++r) std::memcpy(static_cast<uint8_t*>(p) + r * stride, t[k][r], cfg.colsb[k]);
  }
  void zero(int k) { std::memset(t[k], 0, sizeof t[k]); }
  static float bf(const uint8_t* row, int e) {
    uint16_t h;
    std::memcpy(&h, row + 2 * e, sizeof h);
    return from_bf16(h);
  }
  void dot(Dot d) {
    const int c = d == kFull0 || d == kRest0 ? kC0 : kC1, a = d <= kFull1 ? kA : kAr;
    const int b = d == kFull0 ? kB0 : d == kFull1 ? kB1 : d == kRest0 ? kB0r : kB1r;
    for (int m = 0; m < cfg.rows[c]; ++m) {
      float sums[16];
      std::memcpy(sums, t[c][m], sizeof sums);
      for (int k = 0; k < cfg.colsb[a] / 4; ++k)
        for (int n = 0; n < cfg.colsb[c] / 4; ++n)
          for (int e = 0; e < 2; ++e) sums[n] += bf(t[a][m], 2 * k + e) * bf(t[b][k], 2 * n + e);
      std::memcpy(t[c][m], sums, sizeof sums);
    }
  }
  void release() {}
};

template <class Tiles>
RNNTRAIN_AMX void gemm_bf16_tiles(Tiles& tiles, int64_t m, bool ta, const float* a, int64_t lda, const PackedB& b,
                                  bool accumulate, const float* bias, float* c, int64_t ldc) {
  // Tiles of m rows when m < 16 (a step's few rows), else of 16, the last block then partly empty.
  const int tr = static_cast<int>(std::min<int64_t>(16, m));
  const int64_t pairs = (b.K + 1) / 2, chunks = (pairs + 15) / 16, rest = pairs - 16 * (chunks - 1);
  const int64_t panels = (b.N + kPanel - 1) / kPanel, blocks = (m + tr - 1) / tr;
  // op(a) in bf16 pairs: block k's row r, pair i at buf[(k * tr + r) * pairs + i]; rows past m zero
  // (the conversion writes every other word).
  thread_local std::vector<uint32_t> buf, column;
  buf.resize(static_cast<size_t>(blocks * tr * pairs));
  column.resize(16);
  for (int64_t k = 0; k < blocks; ++k) {
    const int R = static_cast<int>(std::min<int64_t>(tr, m - k * tr));
    uint32_t* out = buf.data() + k * tr * pairs;
    std::fill(out + R * pairs, out + tr * pairs, 0u);
    if (!ta) {
      convert_block(R, false, a, lda, k * tr, b.K, out);
      continue;
    }
    for (int64_t i = 0; i < pairs; ++i) {  // pair i of the block's rows, then to its place in each row
      const float* even = a + 2 * i * lda + k * tr;
      pair_rows(even, 2 * i + 1 < b.K ? even + lda : nullptr, R, column.data());
      for (int r = 0; r < R; ++r) out[r * pairs + i] = column[r];
    }
  }
  TileConfig cfg;
  for (int t : {kC0, kC1, kA, kAr}) cfg.rows[t] = static_cast<uint8_t>(tr);
  for (int t : {kC0, kC1, kA, kB0, kB1, kB0r, kB1r}) cfg.colsb[t] = 64;
  cfg.rows[kB0] = cfg.rows[kB1] = 16;
  cfg.colsb[kAr] = static_cast<uint16_t>(4 * rest);
  cfg.rows[kB0r] = cfg.rows[kB1r] = static_cast<uint8_t>(rest);
  tiles.config(cfg);
  alignas(64) float sums[16][kPanel];  // C0 | C1 where a block or panel is not whole, row stride 128 bytes
  const int64_t ldc_bytes = ldc * static_cast<int64_t>(sizeof(float));
  const auto* words = reinterpret_cast<const uint32_t*>(b.h.data());
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t cols = std::min(kPanel, b.N - p * kPanel);
    const uint32_t* panel = words + p * pairs * kPanel;
    for (int64_t k = 0; k < blocks; ++k) {
      const int R = static_cast<int>(std::min<int64_t>(tr, m - k * tr));
      const bool whole = R == tr && cols == kPanel;  // the tiles load and store c itself
      float* cp = c + k * tr * ldc + p * kPanel;
      // The start: c (accumulate), the bias row, or zero.
      if (accumulate && whole) {
        tiles.load(kC0, cp, ldc_bytes);
        tiles.load(kC1, cp + 16, ldc_bytes);
      } else if (accumulate || bias) {
        for (int r = 0; r < tr; ++r)
          for (int64_t j = 0; j < kPanel; ++j)
            sums[r][j] = r < R && j < cols ? (accumulate ? cp[r * ldc + j] : bias[p * kPanel + j]) : 0.0f;
        tiles.load(kC0, sums, sizeof sums[0]);
        tiles.load(kC1, &sums[0][16], sizeof sums[0]);
      } else {
        tiles.zero(kC0);
        tiles.zero(kC1);
      }
      const uint32_t* ab = buf.data() + k * tr * pairs;
      for (int64_t q = 0; q < chunks; ++q) {
        const uint32_t* bq = panel + q * 16 * kPanel;
        const bool full = q < chunks - 1 || rest == 16;
        tiles.load(full ? kA : kAr, ab + q * 16, 4 * pairs);
        tiles.load(full ? kB0 : kB0r, bq, 4 * kPanel);
        tiles.load(full ? kB1 : kB1r, bq + 16, 4 * kPanel);
        tiles.dot(full ? kFull0 : kRest0);
        tiles.dot(full ? kFull1 : kRest1);
      }
      if (whole) {
        tiles.store(kC0, cp, ldc_bytes);
        tiles.store(kC1, cp + 16, ldc_bytes);
        continue;
      }
      tiles.store(kC0, sums, sizeof sums[0]);
      tiles.store(kC1, &sums[0][16], sizeof sums[0]);
      for (int r = 0; r < R; ++r) std::copy(sums[r], sums[r] + cols, cp + r * ldc);
    }
  }
  tiles.release();
}

}  // namespace

std::string own_gemm_refusal(bool bf16) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq"))
    return "this CPU has no AVX-512 (the own engine's kernels need AVX-512F/BW/VL/DQ); use plan.cpu: onednn";
  if (bf16 && !__builtin_cpu_supports("avx512bf16")) return "this CPU has no AVX512-BF16";
  return "";
}

float round_bf16(float x) { return from_bf16(to_bf16(x)); }

void PackedB::pack(bool as_bf16, bool tb, const float* b, int64_t ldb, int64_t k, int64_t n) {
  K = k, N = n, bf16 = as_bf16;
  const int64_t panels = (n + kPanel - 1) / kPanel;
  auto at = [&](int64_t r, int64_t col) { return tb ? b[col * ldb + r] : b[r * ldb + col]; };
  if (!as_bf16) {
    h.clear();
    f.assign(static_cast<size_t>(panels * k * kPanel), 0.0f);
    parallel_each(panels, k * n >= kSpreadElements, [&](int64_t p) {
      const int64_t cols = std::min(kPanel, n - p * kPanel);
      for (int64_t r = 0; r < k; ++r) {
        float* dst = f.data() + (p * k + r) * kPanel;
        if (!tb) std::copy(b + r * ldb + p * kPanel, b + r * ldb + p * kPanel + cols, dst);  // part of row r
        else
          for (int64_t j = 0; j < cols; ++j) dst[j] = at(r, p * kPanel + j);
      }
    });
    return;
  }
  f.clear();
  const int64_t pairs = (k + 1) / 2;
  h.assign(static_cast<size_t>(panels * pairs * 2 * kPanel), 0);
  auto* words = reinterpret_cast<uint32_t*>(h.data());  // panel p, pair i, column j at (p * pairs + i) * 32 + j
  parallel_each(panels, k * n >= kSpreadElements, [&](int64_t p) {
    const int64_t cols = std::min(kPanel, n - p * kPanel);
    for (int64_t i = 0; i < pairs; ++i) {
      uint32_t* dst = words + (p * pairs + i) * kPanel;
      if (!tb) {  // rows 2i and 2i+1 of b, contiguous
        const float* even = b + 2 * i * ldb + p * kPanel;
        pair_rows(even, 2 * i + 1 < k ? even + ldb : nullptr, cols, dst);
        continue;
      }
      for (int64_t j = 0; j < cols; ++j)
        dst[j] = to_bf16(at(2 * i, p * kPanel + j)) |
                 (2 * i + 1 < k ? static_cast<uint32_t>(to_bf16(at(2 * i + 1, p * kPanel + j))) << 16 : 0u);
    }
  });
}

void gemm_packed(int64_t m, bool ta, const float* a, int64_t lda, const PackedB& b, bool accumulate, float* c,
                 int64_t ldc, const float* bias) {
  if (m <= 0 || b.N <= 0) return;
  if (accumulate) bias = nullptr;
  if (b.K == 0) {
    if (!accumulate)
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < b.N; ++j) c[r * ldc + j] = bias ? bias[j] : 0.0f;
    return;
  }
  const AmxMode amx = b.bf16 ? amx_mode() : AmxMode::Off;
  if (amx != AmxMode::Off) gemm_packed_amx(m, ta, a, lda, b, accumulate, c, ldc, bias, amx == AmxMode::Emulated);
  else if (b.bf16) gemm_bf16(m, ta, a, lda, b, accumulate, bias, c, ldc);
  else gemm_f32(m, ta, a, lda, b, accumulate, bias, c, ldc);
}

AmxMode amx_mode() {
  static const AmxMode mode = [] {
    const char* v = std::getenv("RNNTRAIN_CPU_AMX");
    if (v && std::strcmp(v, "emulate") == 0) return AmxMode::Emulated;
    if (v && std::strcmp(v, "0") == 0) return AmxMode::Off;
    return amx_available() ? AmxMode::Hardware : AmxMode::Off;
  }();
  return mode;
}

std::string amx_note() {
  const char* v = std::getenv("RNNTRAIN_CPU_AMX");
  const bool known = !v || !*v || !std::strcmp(v, "0") || !std::strcmp(v, "1") || !std::strcmp(v, "emulate");
  const std::string ignored =
      known ? "" : std::string("; RNNTRAIN_CPU_AMX=") + v + " is ignored: it takes 0 (no AMX), 1 or emulate";
  switch (amx_mode()) {
    case AmxMode::Hardware: return ", its GEMMs on AMX tiles (RNNTRAIN_CPU_AMX=0: on AVX512-BF16)" + ignored;
    case AmxMode::Emulated: return ", its GEMMs on emulated AMX tiles (RNNTRAIN_CPU_AMX=emulate: for tests, slow)";
    case AmxMode::Off: break;
  }
  if (v && std::strcmp(v, "0") == 0 && amx_available()) return ", its GEMMs on AVX512-BF16 (RNNTRAIN_CPU_AMX=0)";
  if (v && std::strcmp(v, "1") == 0)
    return "; RNNTRAIN_CPU_AMX=1 is ignored: this CPU has no AMX-BF16, or Linux does not grant the tile state";
  return ignored;
}

bool amx_available() {
  static const bool on = [] {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16") ||
        !__builtin_cpu_supports("avx512bf16") || !own_gemm_refusal(true).empty())
      return false;
#if defined(__linux__) && defined(SYS_arch_prctl)
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;  // Linux: ask for the tile state
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return on;
}

void gemm_packed_amx(int64_t m, bool ta, const float* a, int64_t lda, const PackedB& b, bool accumulate, float* c,
                     int64_t ldc, const float* bias, bool emulate) {
  if (m <= 0 || b.N <= 0 || b.K == 0 || !b.bf16) return gemm_packed(m, ta, a, lda, b, accumulate, c, ldc, bias);
  if (accumulate) bias = nullptr;
  if (emulate) {
    EmulatedTiles tiles;
    gemm_bf16_tiles(tiles, m, ta, a, lda, b, accumulate, bias, c, ldc);
  } else {
    AmxTiles tiles;
    gemm_bf16_tiles(tiles, m, ta, a, lda, b, accumulate, bias, c, ldc);
  }
}

}  // namespace rnntrain::cpu
