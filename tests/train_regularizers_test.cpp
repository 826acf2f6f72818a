// Keras' weight regularizers (L1, L2, L1L2 on kernel, recurrent kernel, bias and embeddings),
// activity regularizers and weight constraints as a user meets them: the config keys and their errors, the round trip through an emitted config, the
// parameter each factor lands on, Keras' formulas, and what a CPU training step does with them
// (penalty in the reported loss, gradient before clipping, evaluation too). The GPU's kernel is
// compared with this engine in gpu_train_test.cpp, Keras' own numbers in tests/keras/test_regularizers.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/engine.h"
#include "backend_helpers.h"
#include "core/error.h"
#include "spec/compare.h"
#include "spec/parse.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;

const char* kModel = R"(model:
  layers:
    - {type: Input, shape: [6]}
    - {type: Embedding, input_dim: 9, output_dim: 4, embeddings_regularizer: {l2: 0.002}}
    - {type: LSTM, units: 5, return_sequences: true, kernel_regularizer: l1, recurrent_regularizer: {l2: 0.02},
       bias_regularizer: {l1: 0.003, l2: 0.004}}
    - {type: Bidirectional, layer: {type: GRU, units: 3, kernel_regularizer: {l1: 0.005}}}
    - {type: Dense, units: 2, bias_regularizer: l2}
train: {optimizer: {type: sgd, learning_rate: 0.1}}
)";

// The ConfigError of a model with `layer` after a features Input ("parsed" when there is none).
std::string error_of(const std::string& layer) {
  try {
    parse_config("model:\n  layers:\n    - {type: Input, shape: [null, 3]}\n    - " + layer + "\n", "bad.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "parsed";
}

TEST(Regularizers, ConfigKeysTakeKerasNamesAndFactors) {
  const Config c = parse_config(kModel, "r.yaml");
  const auto& L = c.model.layers;
  EXPECT_EQ(L[1].embeddings_regularizer, (Regularizer{0.0, 0.002}));
  EXPECT_EQ(L[2].kernel_regularizer, (Regularizer{0.01, 0.0})) << "l1 is Keras' L1(0.01)";
  EXPECT_EQ(L[2].recurrent_regularizer, (Regularizer{0.0, 0.02}));
  EXPECT_EQ(L[2].bias_regularizer, (Regularizer{0.003, 0.004}));
  EXPECT_EQ(L[3].inner->kernel_regularizer, (Regularizer{0.005, 0.0}));
  EXPECT_FALSE(L[3].inner->bias_regularizer.active());
  EXPECT_EQ(L[4].bias_regularizer, (Regularizer{0.0, 0.01})) << "l2 is Keras' L2(0.01)";
  EXPECT_FALSE(L[4].kernel_regularizer.active());

  // The emitted config (run directories keep it) parses back to the same regularizers.
  const Config again = parse_config(emit_config(c), "again.yaml");
  EXPECT_EQ(model_difference(c.model, again.model), "");
  EXPECT_EQ(again.model.layers[2].bias_regularizer, (Regularizer{0.003, 0.004}));
  // And a changed factor is a changed model (a resume with it is refused, as for dropout).
  Config other = c;
  other.model.layers[2].recurrent_regularizer.l2 = 0.03;
  EXPECT_NE(model_difference(c.model, other.model).find("recurrent_regularizer"), std::string::npos);
}

TEST(Regularizers, BadRegularizersNameTheKeyAndTheFix) {
  const std::string neg = error_of("{type: LSTM, units: 2, kernel_regularizer: {l2: -0.1}}");
  EXPECT_NE(neg.find("bad.yaml:4:"), std::string::npos) << neg;
  EXPECT_NE(neg.find("kernel_regularizer.l2"), std::string::npos) << neg;
  const std::string name = error_of("{type: Dense, units: 2, bias_regularizer: l3}");
  EXPECT_NE(name.find("expected l1, l2"), std::string::npos) << name;
  const std::string key = error_of("{type: GRU, units: 2, recurrent_regularizer: {l3: 0.1}}");
  EXPECT_NE(key.find("l3"), std::string::npos) << key;
  EXPECT_NE(key.find("regularizer"), std::string::npos) << key;
  const std::string where = error_of("{type: Dense, units: 2, recurrent_regularizer: l2}");
  EXPECT_NE(where.find("recurrent_regularizer"), std::string::npos) << "Dense has no recurrent kernel: " << where;
  const std::string inf = error_of("{type: Dense, units: 2, kernel_regularizer: {l1: .inf}}");
  EXPECT_NE(inf.find("kernel_regularizer.l1"), std::string::npos) << inf;
}

TEST(Regularizers, EachWeightGetsItsLayersFactorAndKerasFormulas) {
  const Config c = parse_config(kModel, "r.yaml");
  Params p = random_params(c.model, 4, 0.5);
  const std::vector<Regularizer> regs = weight_regularizers(c.model, p);
  const std::vector<Param*> all = p.all();
  ASSERT_EQ(regs.size(), all.size());
  std::string seen;
  for (size_t i = 0; i < all.size(); ++i)
    if (regs[i].active()) seen += all[i]->name + "=" + std::to_string(regs[i].l1 + regs[i].l2) + " ";
  EXPECT_EQ(seen, "embeddings=0.002000 kernel=0.010000 recurrent_kernel=0.020000 bias=0.007000 "
                  "forward/kernel=0.005000 backward/kernel=0.005000 bias=0.010000 ");

  // The penalty: l1 * sum|w| + l2 * sum w^2 over every regularized weight, in double.
  double want = 0.0;
  for (size_t i = 0; i < all.size(); ++i)
    for (float w : all[i]->value.data) want += regs[i].l1 * std::fabs(w) + regs[i].l2 * double(w) * w;
  p.zero_grad();
  EXPECT_NEAR(weight_penalty(regs, all, false), want, 1e-12 * want);
  for (const Param* q : all)
    for (float g : q->grad.data) ASSERT_EQ(g, 0.0f) << "no gradients without add_grads";
  // Its gradient is the penalty's derivative: central differences, away from the kink of |w| at 0.
  EXPECT_NEAR(weight_penalty(regs, all, true), want, 1e-12 * want);
  for (size_t i = 0; i < all.size(); ++i) {
    for (int64_t k = 0; k < all[i]->value.numel(); k += 3) {
      float& w = all[i]->value[k];
      const float w0 = w;
      if (std::fabs(w0) < 1e-2f) continue;
      const float h = 1e-3f;
      w = w0 + h;
      const double up = weight_penalty(regs, all, false);
      w = w0 - h;
      const double down = weight_penalty(regs, all, false);
      w = w0;
      const double fd = (up - down) / (double(w0 + h) - double(w0 - h));
      EXPECT_NEAR(all[i]->grad[k], fd, 1e-5 + 1e-4 * std::fabs(fd)) << all[i]->name << "[" << k << "]";
    }
  }
  // sign(0) = 0: a zero weight under L1 gets no gradient from it.
  all[3]->value[0] = 0.0f, all[3]->grad[0] = 0.0f;
  weight_penalty(regs, all, true);
  EXPECT_EQ(all[3]->grad[0], 0.0f);
}

Batch token_batch(uint64_t seed) {
  Rng rng(seed);
  Batch b;
  b.x = Tensor({4, 6});
  for (float& v : b.x.data) v = static_cast<float>(1 + rng.below(8));
  b.y = random_tensor({4, 2}, rng);
  return b;
}

// One SGD step with and one without the regularizers, from the same weights and batch: the loss
// differs by the penalty, the update by lr times its gradient; evaluation reports the penalty too.
TEST(Regularizers, ATrainingStepAddsThePenaltyToTheLossAndItsGradientToTheUpdate) {
  Config with = parse_config(kModel, "r.yaml");
  with.device = Device::Cpu;
  Config without = with;
  for (LayerSpec& l : without.model.layers) {
    LayerSpec& r = l.inner ? *l.inner : l;
    r.kernel_regularizer = r.recurrent_regularizer = r.bias_regularizer = r.embeddings_regularizer = Regularizer{};
  }
  const Params init = random_params(with.model, 8, 0.5);
  const std::vector<Regularizer> regs = weight_regularizers(with.model, init);
  Params scratch = init;
  const double penalty = weight_penalty(regs, scratch.all(), true);  // scratch's grads: the penalty's gradient
  ASSERT_GT(penalty, 0.01);
  Rng r1(3), r2(3);
  auto a = make_engine(with, init, r1);
  auto b = make_engine(without, init, r2);
  const Batch batch = token_batch(11);
  EXPECT_NEAR(a->eval_step(batch, {}).mean(), b->eval_step(batch, {}).mean() + penalty, 1e-9);
  const LossValue la = a->train_step(batch, 0.1, {}), lb = b->train_step(batch, 0.1, {});
  EXPECT_NEAR(la.penalty, penalty, 1e-12 * penalty);
  EXPECT_NEAR(la.mean(), lb.mean() + penalty, 1e-9);
  const std::vector<Param*> pa = a->host_params().all(), pb = b->host_params().all(), g = scratch.all();
  for (size_t i = 0; i < pa.size(); ++i)
    for (int64_t k = 0; k < pa[i]->value.numel(); ++k)
      ASSERT_NEAR(pa[i]->value[k], pb[i]->value[k] - 0.1f * g[i]->grad[k], 2e-6) << pa[i]->name << "[" << k << "]";
  // Evaluation after the step: the penalty at the new weights.
  Params now = a->host_params();
  EXPECT_NEAR(a->eval_step(batch, {}).penalty, weight_penalty(regs, now.all(), false), 1e-12);
}

// Keras clips the whole gradient, the regularizers' part included: with global_clipnorm the step's
// length is lr * clipnorm whatever the penalty adds.
TEST(Regularizers, ClippingSeesTheRegularizersGradient) {
  Config cfg = parse_config(kModel, "r.yaml");
  cfg.device = Device::Cpu;
  cfg.train.optimizer.global_clipnorm = 0.05;
  for (LayerSpec& l : cfg.model.layers) (l.inner ? *l.inner : l).kernel_regularizer = Regularizer{0.0, 5.0};
  const Params init = random_params(cfg.model, 8, 0.5);
  Rng rng(3);
  auto e = make_engine(cfg, init, rng);
  e->train_step(token_batch(11), 0.1, {});
  double moved = 0.0;
  const std::vector<Param*> now = e->host_params().all();
  Params before = init;
  const std::vector<Param*> was = before.all();
  for (size_t i = 0; i < now.size(); ++i)
    for (int64_t k = 0; k < now[i]->value.numel(); ++k) moved += std::pow(double(now[i]->value[k]) - was[i]->value[k], 2);
  EXPECT_NEAR(std::sqrt(moved), 0.1 * 0.05, 1e-5) << "the clipped step's length is lr * global_clipnorm";
}

// Activity regularizers: the keys, the two refusals (what Keras does not do, or rnntrain cannot), and
// the penalty as Keras computes it: l1 * sum|y| + l2 * sum y^2 of the layer's output over the batch,
// divided by the batch size, in training and evaluation.
TEST(ActivityRegularizers, KeysRefusalsAndThePenaltyOfTheOutput) {
  const Config c = parse_config(R"(model:
  layers:
    - {type: Input, shape: [5]}
    - {type: Embedding, input_dim: 9, output_dim: 4, activity_regularizer: {l1: 0.01}}
    - {type: Bidirectional, layer: {type: LSTM, units: 3, activity_regularizer: l2}}
    - {type: Dense, units: 2, activity_regularizer: {l1: 0.3, l2: 0.7}}
)", "a.yaml");
  EXPECT_EQ(c.model.layers[1].activity_regularizer, (Regularizer{0.01, 0.0}));
  EXPECT_EQ(activity_regularizer_of(c.model.layers[2]), (Regularizer{0.0, 0.01})) << "the wrapped layer's";
  EXPECT_EQ(c.model.layers[3].activity_regularizer, (Regularizer{0.3, 0.7}));
  EXPECT_EQ(parse_config(emit_config(c), "again.yaml").model.layers[3].activity_regularizer, (Regularizer{0.3, 0.7}));

  const std::string td = error_of("{type: TimeDistributed, layer: {type: Dense, units: 2, activity_regularizer: l1}}");
  EXPECT_NE(td.find("TimeDistributed runs its Dense without"), std::string::npos) << td;
  const std::string sum = error_of("{type: Bidirectional, merge_mode: sum, layer: {type: GRU, units: 2, "
                                   "activity_regularizer: l1}}");
  EXPECT_NE(sum.find("merge_mode concat"), std::string::npos) << sum;

  // Only the Dense output regularized: the penalty is a function of the predictions alone.
  Config only = c;
  only.device = Device::Cpu;
  only.model.layers[1].activity_regularizer = only.model.layers[2].inner->activity_regularizer = Regularizer{};
  Rng rng(2);
  auto e = make_engine(only, random_params(only.model, 5, 0.5), rng);
  Batch b;
  b.x = Tensor({3, 5});
  for (int64_t k = 0; k < b.x.numel(); ++k) b.x[k] = static_cast<float>(1 + k % 8);
  b.y = Tensor({3, 2});
  const Tensor pred = e->predict(b);
  double want = 0.0;
  for (float v : pred.data) want += 0.3 * std::fabs(v) + 0.7 * double(v) * v;
  want /= 3.0;
  EXPECT_NEAR(e->eval_step(b, {}).penalty, want, 1e-9 * want);
  EXPECT_NEAR(e->train_step(b, 0.0, {}).penalty, want, 1e-9 * want) << "a step at lr 0 sees the same outputs";
}

// Constraints: the keys with Keras' defaults and their errors, the slices each axis gives (a GRU's
// two-row bias included), Keras' formulas, and a training step that projects the updated weights.
TEST(Constraints, KeysDefaultsAndErrors) {
  const Config c = parse_config(R"(model:
  layers:
    - {type: Input, shape: [7]}
    - {type: Embedding, input_dim: 9, output_dim: 4, embeddings_constraint: {type: max_norm, max_value: 1, axis: 1}}
    - {type: GRU, units: 3, kernel_constraint: max_norm, recurrent_constraint: unit_norm, bias_constraint: non_neg}
    - {type: Dense, units: 2, kernel_constraint: {type: min_max_norm, min_value: 0.2, rate: 0.5, axis: [0, -1]}}
)", "c.yaml");
  const auto& L = c.model.layers;
  EXPECT_EQ(L[1].embeddings_constraint.kind, ConstraintKind::MaxNorm);
  EXPECT_EQ(L[1].embeddings_constraint.axis, std::vector<int>{1});
  EXPECT_EQ(L[2].kernel_constraint.max_value, 2.0) << "Keras' MaxNorm default";
  EXPECT_EQ(L[2].kernel_constraint.axis, std::vector<int>{0});
  EXPECT_EQ(L[2].recurrent_constraint.kind, ConstraintKind::UnitNorm);
  EXPECT_EQ(L[2].bias_constraint.kind, ConstraintKind::NonNeg);
  const Constraint& mm = L[3].kernel_constraint;
  EXPECT_EQ(mm.kind, ConstraintKind::MinMaxNorm);
  EXPECT_EQ(mm.max_value, 1.0) << "Keras' MinMaxNorm default";
  EXPECT_EQ(mm.min_value, 0.2);
  EXPECT_EQ(mm.rate, 0.5);
  EXPECT_EQ(mm.axis, (std::vector<int>{0, -1}));
  const Config again = parse_config(emit_config(c), "again.yaml");
  EXPECT_EQ(model_difference(c.model, again.model), "");

  EXPECT_NE(error_of("{type: Dense, units: 2, kernel_constraint: max_nrom}").find("max_norm"), std::string::npos);
  EXPECT_NE(error_of("{type: Dense, units: 2, kernel_constraint: {type: non_neg, axis: 0}}").find("non_neg has no axis"),
            std::string::npos);
  EXPECT_NE(error_of("{type: LSTM, units: 2, bias_constraint: {type: min_max_norm, min_value: 2, max_value: 1}}")
                .find("swap them"), std::string::npos);
  EXPECT_NE(error_of("{type: LSTM, units: 2, kernel_constraint: {type: unit_norm, axis: 2}}").find("kernel_constraint.axis"),
            std::string::npos);
  // An axis the weight does not have: a bias is a vector (axis 0 or -1).
  Config bad = parse_config("model:\n  layers:\n    - {type: Input, shape: [null, 3]}\n    - {type: LSTM, units: 2, "
                            "bias_constraint: {type: unit_norm, axis: 1}}\n", "bad.yaml");
  bad.device = Device::Cpu;
  Rng rng(1);
  try {
    make_engine(bad, random_params(bad.model, 1), rng);
    ADD_FAILURE() << "an axis outside the bias was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'lstm': bias: the constraint's axis 1 is outside"), std::string::npos)
        << e.what();
  }
}

TEST(Constraints, KerasFormulasOnEachSlice) {
  Rng rng(4);
  Param p{"kernel", random_tensor({3, 4}, rng, -2.0, 2.0), Tensor({3, 4})};
  auto norms = [&](const Tensor& w, bool cols) {
    std::vector<double> n(cols ? 4 : 3, 0.0);
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t k = 0; k < 4; ++k) n[cols ? k : r] += double(w[r * 4 + k]) * w[r * 4 + k];
    for (double& v : n) v = std::sqrt(v);
    return n;
  };
  // max_norm along axis 0: each column's norm becomes min(norm, 1).
  Param a = p;
  apply_constraints({Constraint{ConstraintKind::MaxNorm, 0, 1.0, 1, {0}}}, {&a});
  const std::vector<double> before = norms(p.value, true), after = norms(a.value, true);
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(after[k], std::min(before[k], 1.0), 1e-6) << "column " << k;
  // unit_norm along axis 1 (-1): each row's norm becomes 1.
  Param b = p;
  apply_constraints({Constraint{ConstraintKind::UnitNorm, 0, 2, 1, {-1}}}, {&b});
  for (double n : norms(b.value, false)) EXPECT_NEAR(n, 1.0, 1e-6);
  // min_max_norm over the whole matrix with rate 0.5: halfway between the norm and its clip.
  Param c = p;
  apply_constraints({Constraint{ConstraintKind::MinMaxNorm, 0.5, 1.0, 0.5, {0, 1}}}, {&c});
  double whole = 0.0, got = 0.0;
  for (int64_t k = 0; k < 12; ++k) whole += double(p.value[k]) * p.value[k], got += double(c.value[k]) * c.value[k];
  EXPECT_NEAR(std::sqrt(got), 0.5 * 1.0 + 0.5 * std::sqrt(whole), 1e-5);
  // non_neg: negative entries become 0, the others stay.
  Param d = p;
  apply_constraints({Constraint{ConstraintKind::NonNeg}}, {&d});
  for (int64_t k = 0; k < 12; ++k) EXPECT_EQ(d.value[k], std::max(p.value[k], 0.0f));
  // A GRU's [2, 3H] bias under axis 0: each column of two entries.
  std::vector<int32_t> g;
  EXPECT_EQ(constraint_groups(Constraint{ConstraintKind::MaxNorm}, {2, 6}, g, "bias"), 6);
  EXPECT_EQ(g[0], 0);
  EXPECT_EQ(g[6], 0) << "row 1 column 0 joins row 0 column 0";
  EXPECT_EQ(constraint_groups(Constraint{ConstraintKind::MaxNorm}, {6}, g, "bias"), 1) << "a vector is one slice";
}

TEST(Constraints, ATrainingStepProjectsTheUpdatedWeights) {
  Config with = parse_config(R"(model:
  layers:
    - {type: Input, shape: [5, 3]}
    - {type: LSTM, units: 4, kernel_constraint: {type: max_norm, max_value: 0.3}, bias_constraint: non_neg}
    - {type: Dense, units: 2, kernel_constraint: unit_norm}
train: {optimizer: {type: sgd, learning_rate: 0.1}}
)", "c.yaml");
  with.device = Device::Cpu;
  Config without = with;
  without.model.layers[1].kernel_constraint = without.model.layers[1].bias_constraint = Constraint{};
  without.model.layers[2].kernel_constraint = Constraint{};
  const Params init = random_params(with.model, 3, 0.5);
  Rng r1(1), r2(1);
  auto a = make_engine(with, init, r1);
  auto b = make_engine(without, init, r2);
  Rng data(5);
  Batch batch;
  batch.x = random_tensor({4, 5, 3}, data);
  batch.y = random_tensor({4, 2}, data);
  a->train_step(batch, 0.1, {});
  b->train_step(batch, 0.1, {});
  Params projected = b->host_params();
  apply_constraints(weight_constraints(with.model, projected), projected.all());
  const std::vector<Param*> pa = a->host_params().all(), pp = projected.all();
  bool changed = false;
  for (size_t i = 0; i < pa.size(); ++i)
    for (int64_t k = 0; k < pa[i]->value.numel(); ++k) {
      ASSERT_EQ(pa[i]->value[k], pp[i]->value[k]) << pa[i]->name << "[" << k << "]";
      changed |= pp[i]->value[k] != b->host_params().all()[i]->value[k];
    }
  EXPECT_TRUE(changed) << "the constraints must bind for the test to mean anything";
}

}  // namespace
}  // namespace rnntrain
