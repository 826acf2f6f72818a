// The CPU backend's batch split: parallel_rows' contract (slices, BLAS single-threaded inside,
// exceptions), and recurrent layers giving the same outputs and gradients with their time loops
// spread over several BLAS threads as on one, for every cell, with masks, dropout and go_backwards.
#include <cblas.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <mutex>
#include <ostream>
#include <string>
#include <stdexcept>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_math.h"
#include "backend/cpu/cpu_model.h"
#include "backend/cpu/thread_governor.h"
#include "backend_helpers.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;

// Sets OpenBLAS's thread count for a scope.
struct BlasThreads {
  int saved;
  explicit BlasThreads(int n) : saved(openblas_get_num_threads()) { openblas_set_num_threads(n); }
  ~BlasThreads() { openblas_set_num_threads(saved); }
};

TEST(ParallelRows, CoversEverySliceOnceWithSingleThreadedBlasInside) {
  BlasThreads bt(2);
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> seen;
  int inner_threads = 0;
  cpu::parallel_rows(21, 8, [&](int64_t r0, int64_t r1) {
    std::lock_guard<std::mutex> lock(mu);
    seen.emplace_back(r0, r1);
    inner_threads = std::max(inner_threads, openblas_get_num_threads());
  });
  std::sort(seen.begin(), seen.end());
  const std::vector<std::pair<int64_t, int64_t>> want{{0, 8}, {8, 16}, {16, 21}};
  EXPECT_EQ(seen, want);
  EXPECT_EQ(inner_threads, 1) << "BLAS must run single-threaded inside the slices";
  EXPECT_EQ(openblas_get_num_threads(), 2) << "the BLAS thread count must be restored";
}

TEST(ParallelRows, RethrowsAndRestoresTheBlasThreads) {
  BlasThreads bt(2);
  EXPECT_THROW(cpu::parallel_rows(32, 8,
                                  [](int64_t r0, int64_t) {
                                    if (r0 == 24) throw std::runtime_error("slice 24");
                                  }),
               std::runtime_error);
  EXPECT_EQ(openblas_get_num_threads(), 2);
}

struct Outcome {
  Tensor y, dx;
  std::vector<Tensor> grads;
};

constexpr int64_t B = 21, T = 6, I = 5;  // 21 rows: slices of 8, 8 and 5

// x: [B, T, I]; lengths: [B], so that every slice has masked steps.
Tensor input() {
  Rng r(11);
  return random_tensor({B, T, I}, r);
}
std::vector<int32_t> lengths() {
  std::vector<int32_t> out(B);
  for (int64_t b = 0; b < B; ++b) out[b] = static_cast<int32_t>(1 + (b * 5) % T);
  return out;
}

// One forward (fixed seeds) and backward of L = sum(w * y), w from a fixed seed, on BLAS `threads`.
Outcome forward_backward(const ModelSpec& spec, const Tensor& x, const std::vector<int32_t>& len, bool training,
                         int threads) {
  BlasThreads bt(threads);
  Params params = random_params(spec, 7);
  CpuModel model(spec, params);
  Rng rng(3);
  ForwardContext ctx;
  Outcome r;
  r.y = model.forward(x, &len, training, rng, &ctx);
  Rng wr(5);
  const Tensor w = random_tensor(r.y.shape, wr);
  params.zero_grad();
  r.dx = model.backward(ctx, w);
  for (const Param* p : params.all()) r.grads.push_back(p->grad);
  return r;
}

// |got - want| <= tol * (1e-2 + |want|) everywhere; prints the worst entry otherwise.
void expect_close(const Tensor& got, const Tensor& want, const std::string& what, double tol = 1e-5) {
  ASSERT_EQ(got.shape, want.shape) << what;
  double worst = 0.0;
  int64_t at = 0;
  for (int64_t k = 0; k < want.numel(); ++k) {
    const double err = std::fabs(static_cast<double>(got[k]) - want[k]) / (1e-2 + std::fabs(want[k]));
    if (err > worst) worst = err, at = k;
  }
  EXPECT_LE(worst, tol) << what << ": worst scaled error " << worst << " at entry " << at << " (got " << got[at]
                         << ", want " << want[at] << ")";
}

struct SplitCase {
  const char* name;
  LayerSpec layer;
};

void PrintTo(const SplitCase& c, std::ostream* os) { *os << c.name; }

class BatchSplit : public ::testing::TestWithParam<SplitCase> {
 protected:
  ModelSpec spec() const { return model_of({input_layer({T, I}), GetParam().layer, dense(3)}); }
};

// With dropout on: the same masks and numbers whether the slices run on one thread or several.
TEST_P(BatchSplit, SameOnOneThreadAndOnSeveral) {
  const Outcome one = forward_backward(spec(), input(), lengths(), true, 1);
  for (int threads : {2, 3}) {
    const Outcome split = forward_backward(spec(), input(), lengths(), true, threads);
    const std::string at = std::string(GetParam().name) + " on " + std::to_string(threads) + " threads";
    expect_close(split.y, one.y, at + ", output");
    expect_close(split.dx, one.dx, at + ", dx");
    ASSERT_EQ(split.grads.size(), one.grads.size());
    for (size_t k = 0; k < one.grads.size(); ++k)
      expect_close(split.grads[k], one.grads[k], at + ", grad #" + std::to_string(k));
  }
}

// Without dropout every sample is independent: the batch (slices at rows 0, 8, 16) must give each
// sample's output and dx as that sample alone, and the gradients as their sum.
TEST_P(BatchSplit, EachRowAsItsSampleAlone) {
  const Tensor x = input();
  const std::vector<int32_t> len = lengths();
  const Outcome batch = forward_backward(spec(), x, len, false, 2);
  const int64_t y_row = batch.y.numel() / B, x_row = T * I;
  Tensor y(batch.y.shape), dx(batch.dx.shape);
  std::vector<Tensor> grads;
  for (const Tensor& g : batch.grads) grads.emplace_back(g.shape);
  for (int64_t b = 0; b < B; ++b) {
    Tensor xb({1, T, I});
    std::copy_n(x.ptr() + b * x_row, x_row, xb.ptr());
    // The loss weights w are drawn for the whole batch: give sample b its own rows of them.
    const ModelSpec s = spec();
    BlasThreads bt(1);
    Params params = random_params(s, 7);
    CpuModel model(s, params);
    Rng rng(3);
    ForwardContext ctx;
    const std::vector<int32_t> lb{len[b]};
    const Tensor yb = model.forward(xb, &lb, false, rng, &ctx);
    std::copy_n(yb.ptr(), y_row, y.ptr() + b * y_row);
    Rng wr(5);
    const Tensor w_all = random_tensor(batch.y.shape, wr);
    Tensor wb(yb.shape);
    std::copy_n(w_all.ptr() + b * y_row, y_row, wb.ptr());
    params.zero_grad();
    const Tensor dxb = model.backward(ctx, wb);
    std::copy_n(dxb.ptr(), x_row, dx.ptr() + b * x_row);
    const std::vector<Param*> ps = params.all();
    for (size_t k = 0; k < ps.size(); ++k)
      for (int64_t e = 0; e < grads[k].numel(); ++e) grads[k][e] += ps[k]->grad[e];
  }
  // Float round-off only: the GEMMs sum in another order (a slicing error is of the order of 1).
  constexpr double kTol = 1e-4;
  const std::string at = GetParam().name;
  expect_close(batch.y, y, at + ", output", kTol);
  expect_close(batch.dx, dx, at + ", dx", kTol);
  for (size_t k = 0; k < grads.size(); ++k)
    expect_close(batch.grads[k], grads[k], at + ", grad #" + std::to_string(k), kTol);
}

LayerSpec with_dropout(LayerSpec l) {
  l.dropout = 0.3;
  l.recurrent_dropout = 0.2;
  return l;
}

LayerSpec backwards(LayerSpec l) {
  l.go_backwards = true;
  return l;
}

LayerSpec reset_before(LayerSpec l) {
  l.reset_after = false;
  return l;
}

INSTANTIATE_TEST_SUITE_P(
    Cells, BatchSplit,
    ::testing::Values(SplitCase{"LSTM", with_dropout(recurrent(LayerKind::LSTM, 12))},
                      SplitCase{"LSTM last state, go_backwards", backwards(recurrent(LayerKind::LSTM, 12, false))},
                      SplitCase{"GRU", with_dropout(recurrent(LayerKind::GRU, 12))},
                      SplitCase{"GRU reset_after=false", with_dropout(reset_before(recurrent(LayerKind::GRU, 12)))},
                      SplitCase{"SimpleRNN", with_dropout(backwards(recurrent(LayerKind::SimpleRNN, 12)))},
                      SplitCase{"Bidirectional LSTM", bidirectional(with_dropout(recurrent(LayerKind::LSTM, 12)),
                                                                    MergeMode::Concat)}),
    [](const ::testing::TestParamInfo<SplitCase>& info) {
      std::string n = info.param.name;
      for (char& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

}  // namespace
}  // namespace rnntrain

namespace rnntrain {
namespace {

// train.threads 0 on a shared machine (thread_governor.h): it keeps the thread count whose steps are
// faster, trying the other one now and then.
// Runs `steps` steps of 0.1 s of work 1 at `per_thread[n]` seconds per step on n threads; returns the
// threads of each step.
std::vector<int> drive(cpu::ThreadGovernor& g, int steps, const std::vector<double>& per_thread) {
  std::vector<int> seen;
  for (int i = 0; i < steps; ++i) {
    seen.push_back(g.threads());
    g.update(per_thread[g.threads()], 1.0);
  }
  return seen;
}

int count(const std::vector<int>& v, int x) { return static_cast<int>(std::count(v.begin(), v.end(), x)); }

TEST(ThreadGovernor, KeepsAllCoresWhereTheyAreFaster) {
  cpu::ThreadGovernor g(4, 4);
  const std::vector<int> seen = drive(g, 400, {0, 0.1, 0, 0, 0.06});  // 4 threads: 0.06 s a step, 1: 0.1
  EXPECT_EQ(seen.front(), 4);
  EXPECT_EQ(seen.back(), 4);
  EXPECT_GE(count(seen, 1), 5) << "it tried one thread";
  EXPECT_LT(count(seen, 1), 40) << "and not for long: tries are half a second, their pauses double";
}

TEST(ThreadGovernor, DropsToOneThreadWhereAllCoresCollapseAndStaysThere) {
  cpu::ThreadGovernor g(2, 2);
  // Beside another run: 2 threads take 0.5 s a step, 1 thread 0.05 s.
  const std::vector<int> seen = drive(g, 2000, {0, 0.05, 0.5});
  EXPECT_EQ(seen.back(), 1);
  EXPECT_LT(count(seen, 2), 20) << "each try of 2 threads ends after its first collapsed step";
  int tries = 0;
  for (size_t i = 1; i < seen.size(); ++i) tries += seen[i] == 2 && seen[i - 1] == 1;
  EXPECT_GE(tries, 3) << "it keeps trying, with doubling pauses";
}

TEST(ThreadGovernor, AStartOnFewerCoresWaitsBeforeTryingAllAndReturnsToThemWhenFree) {
  cpu::ThreadGovernor g(2, 1);
  EXPECT_EQ(g.threads(), 1);
  std::vector<int> seen = drive(g, 40, {0, 0.1, 0.06});  // 4 s of steps: within the first pause
  EXPECT_EQ(count(seen, 2), 0);
  seen = drive(g, 200, {0, 0.1, 0.06});  // the other run ended: 2 threads are faster
  EXPECT_EQ(seen.back(), 2);
}

TEST(ThreadGovernor, OneCoreNeverChangesAndTheCoresAreCounted) {
  cpu::ThreadGovernor one(1, 1);
  EXPECT_EQ(count(drive(one, 100, {0, 0.1}), 1), 100);
  EXPECT_GE(cpu::ThreadGovernor::cores(), 1);
  EXPECT_GE(cpu::ThreadGovernor::free_cores(), 1);
  EXPECT_LE(cpu::ThreadGovernor::free_cores(), cpu::ThreadGovernor::cores());
}

}  // namespace
}  // namespace rnntrain
