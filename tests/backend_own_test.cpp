// The own CPU engine (plan.cpu: own, issue 35): its packed GEMM against a plain double-precision
// product over every shape edge (rows past a block of 8, columns past a panel of 32, odd K, either
// operand transposed, accumulate or overwrite, nothing written past N); and whole models against the
// reference path: LSTM, GRU (reset_after both ways) and SimpleRNN, one direction and both (every
// merge mode), 1 to 3 layers, return_sequences both ways, go_backwards, dropout, masked batches
// (lengths with an empty sequence, a mask with a gap): FP32 to float rounding, bf16 within bf16's
// rounding and not equal to FP32; the same bits on any thread count; and Adam training in bf16 ending
// near the FP32 reference run.
// Skips with the reason on a CPU without AVX-512 (or AVX512-BF16 for the bf16 cases).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <cblas.h>

#include <cmath>
#include <cstdio>

#include "backend/cpu/cpu_model.h"
#include "backend/cpu/onednn_stack.h"
#include "backend/cpu/packed_gemm.h"
#include "backend/cpu/recurrent.h"
#include "backend/engine.h"
#include "backend_helpers.h"
#include "spec/parse.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;

#define SKIP_WITHOUT_OWN(bf16)                                                           \
  do {                                                                                   \
    if (const std::string why = cpu::own_gemm_refusal(bf16); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

// op(a) @ op(b) in double, each operand first rounded as the GEMM rounds it.
std::vector<double> naive(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const std::vector<float>& a,
                          const std::vector<float>& b, bool bf16) {
  auto r = [&](float v) { return static_cast<double>(bf16 ? cpu::round_bf16(v) : v); };
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t q = 0; q < k; ++q) c[i * n + j] += r(ta ? a[q * m + i] : a[i * k + q]) * r(tb ? b[j * k + q] : b[q * n + j]);
  return c;
}

TEST(OwnGemm, MatchesAPlainProductOnEveryEdge) {
  SKIP_WITHOUT_OWN(false);
  const bool has_bf16 = cpu::own_gemm_refusal(true).empty();
  Rng rng(3);
  int cases = 0;
  for (bool bf16 : {false, true}) {
    if (bf16 && !has_bf16) continue;
    for (int64_t m : {1, 3, 8, 13, 37})
      for (int64_t k : {1, 5, 16, 37, 128})
        for (int64_t n : {1, 17, 32, 45, 130})
          for (int flags = 0; flags < 8; ++flags) {
            const bool ta = flags & 1, tb = flags & 2, acc = flags & 4;
            std::vector<float> a(m * k), b(k * n);
            for (float& v : a) v = static_cast<float>(rng.uniform(-1, 1));
            for (float& v : b) v = static_cast<float>(rng.uniform(-1, 1));
            // B as packed from a wider array (row stride 2 past its rows' length), as a block of a kernel.
            const int64_t rows = tb ? n : k, len = tb ? k : n, ldb = len + 2;
            std::vector<float> wide(rows * ldb, 7.0f);
            for (int64_t r = 0; r < rows; ++r)
              std::copy(b.begin() + r * len, b.begin() + (r + 1) * len, wide.begin() + r * ldb);
            cpu::PackedB pb;
            pb.pack(bf16, tb, wide.data(), ldb, k, n);
            const int64_t ldc = n + 3;  // 3 columns past N that must stay as they are
            std::vector<float> c(m * ldc);
            for (float& v : c) v = static_cast<float>(rng.uniform(-1, 1));
            const std::vector<float> before = c;
            cpu::gemm_packed(m, ta, a.data(), ta ? m : k, pb, acc, c.data(), ldc);
            const std::vector<double> want = naive(ta, tb, m, n, k, a, b, bf16);
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                const double w = want[i * n + j] + (acc ? before[i * ldc + j] : 0.0);
                ASSERT_NEAR(c[i * ldc + j], w, 1e-5 * (1.0 + std::sqrt(static_cast<double>(k))))
                    << fmt::format("bf16 {} m {} n {} k {} ta {} tb {} accumulate {} at [{}, {}]", bf16, m, n, k, ta, tb,
                                   acc, i, j);
              }
              for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], before[i * ldc + j]) << "written past N";
            }
            ++cases;
          }
  }
  std::printf("%d GEMM cases (bf16 %s)\n", cases, has_bf16 ? "included" : "skipped: no AVX512-BF16");
}

// The bf16 GEMM on AMX tiles: its blocks of 16 rows, chunks of 16 pairs of K (the last one shorter),
// the panel read as two tiles of 16 columns, and the start from c, a bias row or zero. On the tile
// instructions emulated as the SDM describes them (any CPU with AVX512-BF16), and on the hardware where
// the CPU has AMX; the emulation fails if a tile reads or writes past the configured rows or bytes.
TEST(OwnGemm, AmxTilesMatchAPlainProduct) {
  SKIP_WITHOUT_OWN(true);
  Rng rng(5);
  int cases = 0;
  const bool hardware = cpu::amx_available();
  for (bool emulate : {true, false}) {
    if (!emulate && !hardware) continue;
    for (int64_t m : {1, 3, 16, 17, 40})
      for (int64_t k : {1, 5, 32, 33, 64, 100})
        for (int64_t n : {1, 17, 32, 45, 130})
          for (int flags = 0; flags < 16; ++flags) {
            const bool ta = flags & 1, tb = flags & 2, acc = flags & 4, with_bias = flags & 8;
            if (acc && with_bias) continue;  // the bias row is ignored when accumulating
            std::vector<float> a(m * k), b(k * n), bias(n + 1, 9.0f);
            for (float& v : a) v = static_cast<float>(rng.uniform(-1, 1));
            for (float& v : b) v = static_cast<float>(rng.uniform(-1, 1));
            for (int64_t j = 0; j < n; ++j) bias[j] = static_cast<float>(rng.uniform(-1, 1));
            cpu::PackedB pb;
            pb.pack(true, tb, b.data(), tb ? k : n, k, n);
            const int64_t ldc = n + 3;  // 3 columns past N that must stay as they are
            std::vector<float> c(m * ldc);
            for (float& v : c) v = static_cast<float>(rng.uniform(-1, 1));
            const std::vector<float> before = c;
            cpu::gemm_packed_amx(m, ta, a.data(), ta ? m : k, pb, acc, c.data(), ldc, with_bias ? bias.data() : nullptr,
                                 emulate);
            const std::vector<double> want = naive(ta, tb, m, n, k, a, b, true);
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                const double start = acc ? before[i * ldc + j] : with_bias ? bias[j] : 0.0;
                ASSERT_NEAR(c[i * ldc + j], want[i * n + j] + start, 1e-5 * (1.0 + std::sqrt(static_cast<double>(k))))
                    << fmt::format("emulated {} m {} n {} k {} ta {} tb {} accumulate {} bias {} at [{}, {}]", emulate,
                                   m, n, k, ta, tb, acc, with_bias, i, j);
              }
              for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], before[i * ldc + j]) << "written past N";
            }
            ++cases;
          }
  }
  std::printf("%d AMX GEMM cases (hardware %s)\n", cases, hardware ? "included" : "skipped: this CPU has no AMX-BF16");
}

TEST(OwnGemm, Bf16RoundsToNearestEven) {
  EXPECT_EQ(cpu::round_bf16(1.0f), 1.0f);
  EXPECT_EQ(cpu::round_bf16(1.0f + 1.0f / 256), 1.0f);  // halfway: to the even neighbour
  EXPECT_EQ(cpu::round_bf16(1.0f + 3.0f / 256), 1.0f + 4.0f / 256);
  EXPECT_EQ(cpu::round_bf16(-2.5f), -2.5f);
  EXPECT_TRUE(std::isnan(cpu::round_bf16(std::nanf(""))));
  EXPECT_TRUE(std::isinf(cpu::round_bf16(INFINITY)));
}

struct Case {
  std::string name, layers;  // YAML list items after the Input
  int64_t features = 6;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

Config config_of(const Case& c, bool bf16) {
  Config cfg = parse_config("model:\n  layers: [{type: Input, shape: [null, " + std::to_string(c.features) + "]}, " +
                                c.layers.substr(1) + "\n",
                            c.name + ".yaml");
  cfg.plan.cpu = CpuRnn::Own;
  cfg.plan.precision = bf16 ? Precision::Bf16 : Precision::Fp32;
  return cfg;
}

struct Errors {
  double out = 0, dx = 0, grad = 0;
  Tensor y;
};

// One training batch (dropout draws the same masks on both) forward and backward on the own engine
// and on the reference path from the same weights.
Errors against_reference(const Case& c, const std::vector<int32_t>& lengths, bool bf16, Tensor x = {}) {
  const Config cfg = config_of(c, bf16);
  Params p1 = random_params(cfg.model, 3, 0.5), p2 = p1;
  CpuModel ref(cfg.model, p1), own(cfg.model, p2, &cfg.plan);
  Rng rng(5);
  const int64_t B = 13, T = 9;
  if (x.empty()) x = random_tensor({B, T, c.features}, rng);
  const std::vector<int32_t>* lens = lengths.empty() ? nullptr : &lengths;
  ForwardContext c1, c2;
  Rng r1(1), r2(1);
  const Tensor y1 = ref.forward(x, lens, true, r1, &c1), y2 = own.forward(x, lens, true, r2, &c2);
  const Tensor dy = random_tensor(y1.shape, rng);
  const Tensor dx1 = ref.backward(c1, dy), dx2 = own.backward(c2, dy);
  Errors e{rel_err(y2, y1), rel_err(dx2, dx1), 0, y2};
  const std::vector<Param*> g1 = p1.all(), g2 = p2.all();
  for (size_t i = 0; i < g1.size(); ++i) e.grad = std::max(e.grad, rel_err(g2[i]->grad, g1[i]->grad));
  return e;
}

const std::vector<int32_t> kLengths = {9, 3, 9, 0, 5, 1, 9, 8, 2, 9, 4, 7, 6};  // batch 13, T 9

class OwnEngine : public ::testing::TestWithParam<Case> {};

TEST_P(OwnEngine, Fp32MatchesTheReferencePath) {
  SKIP_WITHOUT_OWN(false);
  for (const auto& lens : {std::vector<int32_t>{}, kLengths}) {
    const Errors e = against_reference(GetParam(), lens, false);
    const std::string what = GetParam().name + (lens.empty() ? "" : " (masked)");
    EXPECT_LT(e.out, 1e-5) << what << ": outputs";
    EXPECT_LT(e.dx, 1e-5) << what << ": input gradient";
    EXPECT_LT(e.grad, 1e-5) << what << ": weight gradients";
  }
}

TEST_P(OwnEngine, Bf16MatchesTheReferenceWithinBf16) {
  SKIP_WITHOUT_OWN(true);
  for (const auto& lens : {std::vector<int32_t>{}, kLengths}) {
    const Errors e = against_reference(GetParam(), lens, true), f = against_reference(GetParam(), lens, false);
    const std::string what = GetParam().name + (lens.empty() ? "" : " (masked)");
    EXPECT_LT(e.out, 2e-2) << what << ": outputs";
    EXPECT_LT(e.dx, 5e-2) << what << ": input gradient";
    EXPECT_LT(e.grad, 5e-2) << what << ": weight gradients";
    EXPECT_NE(e.y.data, f.y.data) << what << ": the bf16 run computed what FP32 does";
    std::printf("bf16 %s: output %.3g, dx %.3g, weight gradients %.3g (relative to the largest)\n", what.c_str(),
                e.out, e.dx, e.grad);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cells, OwnEngine,
    ::testing::Values(
        Case{"lstm3", "[{type: LSTM, units: 8, return_sequences: true}, {type: LSTM, units: 8, return_sequences: "
                      "true}, {type: LSTM, units: 8, return_sequences: true}]"},
        Case{"lstm37_odd_input", "[{type: LSTM, units: 37, return_sequences: true}, {type: LSTM, units: 37}]", 11},
        Case{"gru_reset_after_last_state", "[{type: GRU, units: 9, return_sequences: true}, {type: GRU, units: 9}]"},
        Case{"gru_reset_before", "[{type: GRU, units: 7, reset_after: false, return_sequences: true}]"},
        Case{"simple_rnn2", "[{type: SimpleRNN, units: 10, return_sequences: true}, {type: SimpleRNN, units: 5}]"},
        Case{"bilstm_concat", "[{type: Bidirectional, layer: {type: LSTM, units: 5, return_sequences: true}}]"},
        Case{"bigru_sum_last_state", "[{type: Bidirectional, merge_mode: sum, layer: {type: GRU, units: 6}}]"},
        Case{"bilstm_mul", "[{type: Bidirectional, merge_mode: mul, layer: {type: LSTM, units: 4, return_sequences: "
                           "true}}]"},
        Case{"bisimple_ave", "[{type: Bidirectional, merge_mode: ave, layer: {type: SimpleRNN, units: 4, "
                             "return_sequences: true}}]"},
        Case{"lstm_go_backwards", "[{type: LSTM, units: 6, go_backwards: true, return_sequences: true}]"},
        Case{"lstm_dropout", "[{type: LSTM, units: 6, dropout: 0.3, recurrent_dropout: 0.2, return_sequences: true}, "
                             "{type: Dense, units: 2}]"},
        Case{"gru_no_bias", "[{type: GRU, units: 5, use_bias: false, return_sequences: true}]"}),
    [](const auto& info) { return info.param.name; });

// Outputs, input gradient and every parameter gradient of one training batch of B x T x F on the own
// engine with `threads` BLAS threads, in one vector.
std::vector<float> own_run(const Case& c, bool bf16, int threads, int64_t B, int64_t T, int64_t F,
                           const std::vector<int32_t>* lengths) {
  openblas_set_num_threads(threads);
  const Config cfg = config_of(c, bf16);
  Params p = random_params(cfg.model, 3, 0.5);
  CpuModel own(cfg.model, p, &cfg.plan);
  Rng rng(5), r(1);
  const Tensor x = random_tensor({B, T, F}, rng);
  ForwardContext ctx;
  const Tensor y = own.forward(x, lengths, true, r, &ctx);
  std::vector<float> all = y.data;
  const Tensor dx = own.backward(ctx, random_tensor(y.shape, rng));
  all.insert(all.end(), dx.data.begin(), dx.data.end());
  for (const Param* q : p.all()) all.insert(all.end(), q->grad.data.begin(), q->grad.data.end());
  return all;
}

// 1, 2 or 6 threads give the same bits, in FP32 and bf16.
void expect_same_bits_on_any_thread_count(const Case& c, int64_t B, int64_t T, int64_t F,
                                          const std::vector<int32_t>* lengths) {
  const int before = openblas_get_num_threads();
  for (bool bf16 : {false, true}) {
    if (bf16 && !cpu::own_gemm_refusal(true).empty()) continue;
    const std::vector<float> one = own_run(c, bf16, 1, B, T, F, lengths);
    EXPECT_EQ(own_run(c, bf16, 2, B, T, F, lengths), one) << (bf16 ? "bf16" : "FP32") << ": 2 threads against 1";
    EXPECT_EQ(own_run(c, bf16, 6, B, T, F, lengths), one) << (bf16 ? "bf16" : "FP32") << ": 6 threads against 1";
  }
  openblas_set_num_threads(before);
}

// Each batch row is one slice's, its sums in a fixed order: slices of 13, 7 or 3 rows give the same
// bits, masked or not.
TEST(OwnEngine, AnyThreadCountGivesTheSameBits) {
  SKIP_WITHOUT_OWN(false);
  const Case c{"mix", "[{type: LSTM, units: 9, return_sequences: true}, {type: Bidirectional, layer: {type: GRU, units: "
                      "5, return_sequences: true}}, {type: SimpleRNN, units: 3}]"};
  expect_same_bits_on_any_thread_count(c, 13, 9, 6, &kLengths);
}

// Stacks large enough that the all-steps gate gradients are packed and their column sums taken on
// several threads (over 2^18 elements: LSTM(64) and GRU(96) over 32 x 40), with the layout copies
// around the loops split by batch rows: still the same bits on any thread count.
TEST(OwnEngine, LargeStacksGiveTheSameBitsOnAnyThreadCount) {
  SKIP_WITHOUT_OWN(false);
  const Case c{"large", "[{type: LSTM, units: 64, return_sequences: true}, {type: GRU, units: 96, "
                        "return_sequences: true}]"};
  expect_same_bits_on_any_thread_count(c, 32, 40, 6, nullptr);
}

TEST(OwnEngine, AMaskWithAGapMatchesTheReferencePath) {
  SKIP_WITHOUT_OWN(false);
  // Masking makes the mask from the data: sample 1 has a masked step between used ones.
  const Case c{"gap", "[{type: Masking, mask_value: 0.0}, {type: LSTM, units: 4, return_sequences: true}, {type: GRU, "
                      "units: 4}]"};
  Rng rng(7);
  Tensor x = random_tensor({13, 9, 6}, rng);
  for (int64_t j = 0; j < 6; ++j) x[(1 * 9 + 2) * 6 + j] = 0.0f;  // sample 1, step 2
  const Errors e = against_reference(c, {}, false, x);
  EXPECT_LT(e.out, 1e-5);
  EXPECT_LT(e.dx, 1e-5);
  EXPECT_LT(e.grad, 1e-5);
}

// A layer keeps its backward buffers from pass to pass without clearing them: a second batch with
// other lengths (masked steps and rows that the first batch used) gives the same bits as on a layer
// that never ran, on the reference path and the own engine (FP32, bf16).
TEST(OwnEngine, ASecondBatchGivesWhatAFreshLayerGives) {
  const Case c{"two", "[{type: LSTM, units: 7, return_sequences: true}, {type: Bidirectional, layer: {type: GRU, "
                      "units: 5, return_sequences: true}}, {type: SimpleRNN, units: 3}]"};
  Rng rng(11);
  const Tensor x1 = random_tensor({13, 9, 6}, rng), x2 = random_tensor({13, 9, 6}, rng);
  for (int engine = 0; engine < 3; ++engine) {  // reference, own FP32, own bf16
    if (engine > 0 && !cpu::own_gemm_refusal(engine == 2).empty()) continue;
    const Config cfg = config_of(c, engine == 2);
    Params p1 = random_params(cfg.model, 3, 0.5), p2 = p1;
    CpuModel used(cfg.model, p1, engine ? &cfg.plan : nullptr), fresh(cfg.model, p2, engine ? &cfg.plan : nullptr);
    auto pass = [&](CpuModel& m, const Tensor& x, const std::vector<int32_t>* lens) {
      ForwardContext ctx;
      Rng r(1), d(2);
      const Tensor y = m.forward(x, lens, true, r, &ctx);
      std::vector<float> all = y.data;
      const Tensor dx = m.backward(ctx, random_tensor(y.shape, d));
      all.insert(all.end(), dx.data.begin(), dx.data.end());
      return all;
    };
    pass(used, x1, nullptr);
    for (Param* q : p1.all()) std::fill(q->grad.data.begin(), q->grad.data.end(), 0.0f);
    std::vector<float> a = pass(used, x2, &kLengths), b = pass(fresh, x2, &kLengths);
    for (const Param* q : p1.all()) a.insert(a.end(), q->grad.data.begin(), q->grad.data.end());
    for (const Param* q : p2.all()) b.insert(b.end(), q->grad.data.begin(), q->grad.data.end());
    EXPECT_EQ(a, b) << "engine " << engine << " (0 reference, 1 own FP32, 2 own bf16)";
  }
}

TEST(OwnEngine, ThePlanSaysWhatRuns) {
  const Config cfg = config_of(Case{"p", "[{type: LSTM, units: 4}]"}, true);
  const std::string text = cpu::describe_cpu_plan(cfg.model, make_plan(cfg.model, FuseMode::Auto), CpuRnn::Own, true);
  if (const std::string why = cpu::own_gemm_refusal(false); !why.empty())
    EXPECT_NE(text.find("every layer on the reference ops: " + why), std::string::npos) << text;
  else if (const std::string why16 = cpu::own_gemm_refusal(true); !why16.empty())
    EXPECT_NE(text.find("in FP32: " + why16), std::string::npos) << text;
  else {
    EXPECT_NE(text.find("own engine") , std::string::npos) << text;
    // The bf16 GEMMs' kernel: AMX tiles where the CPU has them, emulated ones where RNNTRAIN_CPU_AMX asks
    // (ctest's emulated run sets it).
    const cpu::AmxMode amx = cpu::amx_mode();
    EXPECT_EQ(text.find("its GEMMs on emulated AMX tiles") != std::string::npos, amx == cpu::AmxMode::Emulated) << text;
    EXPECT_EQ(text.find("its GEMMs on AMX tiles") != std::string::npos, amx == cpu::AmxMode::Hardware) << text;
    if (amx == cpu::AmxMode::Off && !cpu::amx_available())
      EXPECT_EQ(text.find("its GEMMs on"), std::string::npos) << text;
  }
  EXPECT_NE(text.find("CPU (plan.cpu: own, plan.precision: bf16)"), std::string::npos) << text;
}

// plan.cpu's default, auto, is the own engine in FP32 on a CPU with AVX-512 (the same bits as plan.cpu:
// own) and in bf16 where its GEMMs run on AMX tiles, oneDNN elsewhere; the plan says which.
TEST(OwnEngine, AutoIsTheOwnEngineWhereTheCpuHasAvx512) {
  Config def = parse_config("model:\n  layers: [{type: Input, shape: [null, 6]}, {type: LSTM, units: 7}]\n", "d.yaml");
  ASSERT_EQ(def.plan.cpu, CpuRnn::Auto);
  const bool own = cpu::own_gemm_refusal(false).empty();
  EXPECT_EQ(cpu::cpu_path(CpuRnn::Auto, false), own ? CpuRnn::Own : CpuRnn::Onednn);
  const bool amx = cpu::amx_mode() == cpu::AmxMode::Hardware;
  EXPECT_EQ(cpu::cpu_path(CpuRnn::Auto, true), amx ? CpuRnn::Own : CpuRnn::Onednn);
  EXPECT_EQ(cpu::cpu_path(CpuRnn::Reference, false), CpuRnn::Reference);
  const std::string text = cpu::describe_cpu_plan(def.model, make_plan(def.model, FuseMode::Auto), CpuRnn::Auto);
  EXPECT_NE(text.find(own ? "CPU (plan.cpu: auto, here own)" : "CPU (plan.cpu: auto, here onednn)"), std::string::npos)
      << text;
  if (!own) return;
  Config pinned = def;
  pinned.plan.cpu = CpuRnn::Own;
  Params p1 = random_params(def.model, 3, 0.5), p2 = p1;
  CpuModel a(def.model, p1, &def.plan), b(pinned.model, p2, &pinned.plan);
  Rng rng(5), r1(1), r2(1);
  const Tensor x = random_tensor({13, 9, 6}, rng);
  EXPECT_EQ(a.forward(x, nullptr, false, r1).data, b.forward(x, nullptr, false, r2).data);
}

// bf16 training (Adam) ends near the FP32 reference run: bf16's rounding does not derail it.
TEST(OwnEngine, Bf16TrainingEndsNearTheFp32ReferenceRun) {
  SKIP_WITHOUT_OWN(true);
  const testing::SideBySide l = testing::expect_bf16_training_tracks_fp32(
      "[{type: Input, shape: [null, 4]}, {type: LSTM, units: 16, return_sequences: true}, {type: GRU, units: 16}, "
      "{type: Dense, units: 3}]",
      CpuRnn::Own);
  EXPECT_NE(l.fast, l.ref) << "the own engine ran in bf16";
  std::printf("30 Adam steps: own bf16 loss %.6g, FP32 reference %.6g (first %.6g)\n", l.fast, l.ref, l.first);
}

}  // namespace
}  // namespace rnntrain
