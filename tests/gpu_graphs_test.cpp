// Training steps on the GPU as the trainer runs them: enqueued, with metrics summed on the device,
// and replayed as CUDA graphs once their shapes repeat (plan.graphs).
// - Device metrics equal the host metrics computed from the same predictions, masked and not, for
//   every kind (binary, categorical and sparse accuracy, mae, mse, perplexity, the top-k accuracies,
//   the confusion metrics, root_mean_squared_error, msle, logcosh, r2_score).
// - Graph-replayed steps give the losses, metrics and weights of uncaptured steps, in fp32 and in
//   fp16 with persist_static and loss scaling, while the learning rate changes every step, the batch
//   shape changes and changes back, and evaluations interleave (which shift the upload buffers); and
//   with every kind of dropout, whose masks must change from replay to replay as they do uncaptured.
// - Masked steps (lengths, Masking, mask_zero) with a different mask every step are captured once per
//   shape and give the losses and weights of uncaptured steps (masked bidirectional stacks run
//   uncaptured); a replayed step still rejects a bad batch (token id, class label) with the same
//   errors, and the queue of enqueued steps goes on past it.
// - Evaluations and predictions (eval, predict) are replayed as graphs too, masked or not, with the
//   numbers of uncaptured ones, also after training steps changed the weights.
// Skips without a GPU.
#include <gtest/gtest.h>

#include "core/error.h"
#include "gpu_helpers.h"
#include "model/metrics.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;

std::vector<std::unique_ptr<Metric>> metrics_of(const Config& cfg, const std::vector<MetricSpec>& specs) {
  std::vector<std::unique_ptr<Metric>> out;
  for (const MetricSpec& s : specs) out.push_back(make_metric(s, cfg.train.loss, infer_shapes(cfg.model).back().out));
  return out;
}

// A metric of Keras' defaults, or with a setting changed.
MetricSpec metric(MetricKind kind, void (*set)(MetricSpec&) = nullptr) {
  MetricSpec s{kind, ""};
  if (set) set(s);
  return s;
}

std::vector<Metric*> raw(const std::vector<std::unique_ptr<Metric>>& ms) {
  std::vector<Metric*> out;
  for (const auto& m : ms) out.push_back(m.get());
  return out;
}

struct MetricCase {
  std::string name, layers;
  LossKind loss;
  bool from_logits;
  std::vector<MetricSpec> metrics;
  bool masked;
};

void PrintTo(const MetricCase& c, std::ostream* os) { *os << c.name; }

class DeviceMetrics : public ::testing::TestWithParam<MetricCase> {};

TEST_P(DeviceMetrics, EqualTheHostMetricsOfTheSamePredictions) {
  SKIP_WITHOUT_GPU();
  const MetricCase& c = GetParam();
  Config cfg = config_of("[10, 6]", c.layers, c.name);
  cfg.device = Device::Cuda;
  cfg.train.loss.kind = c.loss, cfg.train.loss.from_logits = c.from_logits;
  const Params init = random_params(cfg.model, 11, 0.5);
  std::vector<int32_t> lens;
  if (c.masked) lens = {10, 3, 7, 10, 1, 8};
  Batch b = random_batch(cfg, 6, 10, 21, lens);
  if (cfg.train.loss.kind == LossKind::BinaryCrossentropy)
    for (float& v : b.y.data) v = v > 0 ? 1.0f : 0.0f;
  if (cfg.train.loss.kind == LossKind::CategoricalCrossentropy) {  // one-hot rows
    const int64_t K = b.y.dim(-1);
    for (int64_t i = 0; i < b.y.numel() / K; ++i)
      for (int64_t j = 0; j < K; ++j) b.y[i * K + j] = j == (i * 7) % K ? 1.0f : 0.0f;
  }

  // The device sums of one training step, against the host metrics of that step's predictions.
  Rng r1(1), r2(1);
  auto stepped = make_engine(cfg, init, r1);
  auto ms = metrics_of(cfg, c.metrics);
  stepped->train_step(b, 1e-3, raw(ms));
  auto probe = make_engine(cfg, init, r2);
  Tensor pred;
  probe->gradients(b, &pred, nullptr);
  Tensor mask;
  if (c.masked) {
    mask = Tensor({6, 10});
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t t = 0; t < 10; ++t) mask[i * 10 + t] = t < lens[i] ? 1.0f : 0.0f;
  }
  auto host = metrics_of(cfg, c.metrics);
  for (size_t j = 0; j < ms.size(); ++j) {
    host[j]->update(pred, b.y, c.masked ? &mask : nullptr);
    EXPECT_NEAR(ms[j]->result(), host[j]->result(), 1e-9 * std::max(1.0, std::fabs(host[j]->result())))
        << ms[j]->name();
  }
}

const char* kSeq =
    "[{type: LSTM, units: 12, return_sequences: true}, {type: TimeDistributed, layer: {type: Dense, units: 5}}]";

INSTANTIATE_TEST_SUITE_P(
    Kinds, DeviceMetrics,
    ::testing::Values(
        MetricCase{"sparse_logits", kSeq, LossKind::SparseCategoricalCrossentropy, true,
                   {metric(MetricKind::Accuracy), metric(MetricKind::Perplexity)}, false},
        MetricCase{"sparse_logits_masked", kSeq, LossKind::SparseCategoricalCrossentropy, true,
                   {metric(MetricKind::Accuracy), metric(MetricKind::Perplexity)}, true},
        MetricCase{"categorical_softmax",
                   "[{type: LSTM, units: 12, return_sequences: true}, {type: TimeDistributed, layer: {type: Dense, "
                   "units: 5, activation: softmax}}]",
                   LossKind::CategoricalCrossentropy, false, {metric(MetricKind::Accuracy), metric(MetricKind::Perplexity)}, true},
        MetricCase{"binary_logits", kSeq, LossKind::BinaryCrossentropy, true, {metric(MetricKind::Accuracy), metric(MetricKind::MSE)},
                   true},
        MetricCase{"regression", "[{type: GRU, units: 12}, {type: Dense, units: 3}]", LossKind::MSE, false,
                   {metric(MetricKind::MAE), metric(MetricKind::MSE), metric(MetricKind::Accuracy),
                    metric(MetricKind::RMSE), metric(MetricKind::MSLE), metric(MetricKind::LogCosh),
                    metric(MetricKind::R2Score),
                    metric(MetricKind::R2Score, [](MetricSpec& s) {
                      s.name = "r2_var", s.aggregation = R2Aggregation::VarianceWeighted, s.num_regressors = 2;
                    })},
                   false},
        MetricCase{"regression_masked", kSeq, LossKind::MSE, false,
                   {metric(MetricKind::RMSE), metric(MetricKind::MSLE), metric(MetricKind::LogCosh)}, true},
        MetricCase{"sparse_top_k_masked", kSeq, LossKind::SparseCategoricalCrossentropy, true,
                   {metric(MetricKind::SparseTopKCategoricalAccuracy, [](MetricSpec& s) { s.k = 2; })}, true},
        MetricCase{"binary_confusion_masked", kSeq, LossKind::BinaryCrossentropy, true,
                   {metric(MetricKind::Precision, [](MetricSpec& s) { s.threshold = 0.0; }),
                    metric(MetricKind::Recall, [](MetricSpec& s) { s.class_id = 3; }),
                    metric(MetricKind::AUC, [](MetricSpec& s) { s.from_logits = true; }),
                    metric(MetricKind::AUC, [](MetricSpec& s) {
                      s.name = "pr", s.from_logits = true, s.curve = AucCurve::PR;
                    })},
                   true},
        MetricCase{"categorical_scores",
                   "[{type: GRU, units: 12}, {type: Dense, units: 5, activation: softmax}]",
                   LossKind::CategoricalCrossentropy, false,
                   {metric(MetricKind::TopKCategoricalAccuracy, [](MetricSpec& s) { s.k = 2; }),
                    metric(MetricKind::F1Score),
                    metric(MetricKind::FBetaScore, [](MetricSpec& s) {
                      s.beta = 0.5, s.threshold = 0.2, s.average = FAverage::Weighted;
                    }),
                    metric(MetricKind::AUC, [](MetricSpec& s) { s.summation = AucSummation::Majoring; }),
                    metric(MetricKind::AUC, [](MetricSpec& s) { s.name = "ml", s.curve = AucCurve::PR, s.multi_label = true; })},
                   false}),
    [](const auto& info) { return info.param.name; });

struct GraphCase {
  std::string name;
  Precision precision;
  RnnAlgo algo;
  std::string layers;
};

const char* kLstm2 =
    "[{type: LSTM, units: 32, return_sequences: true}, {type: LSTM, units: 32, return_sequences: true}, "
    "{type: TimeDistributed, layer: {type: Dense, units: 4}}]";
// GRUs with reset_after: false, a stack only on the wavefront kernels (their second design).
const char* kGruResetFirst =
    "[{type: GRU, units: 32, reset_after: false, return_sequences: true}, {type: GRU, units: 32, reset_after: false, "
    "return_sequences: true}, {type: TimeDistributed, layer: {type: Dense, units: 4}}]";
// Every kind of dropout: a cuDNN stack's input dropout and inter-layer Dropout, a Dropout layer, and
// a generic GRU's recurrent dropout.
const char* kDropout =
    "[{type: LSTM, units: 32, dropout: 0.2, return_sequences: true}, {type: Dropout, rate: 0.3}, {type: LSTM, "
    "units: 32, return_sequences: true}, {type: Dropout, rate: 0.1}, {type: GRU, units: 16, recurrent_dropout: 0.2, "
    "return_sequences: true}, {type: TimeDistributed, layer: {type: Dense, units: 4}}]";

// The layers around the stacks (issue 36), spatial and per-step dropout included.
const char* kSequenceLayers =
    "[{type: Conv1D, filters: 16, kernel_size: 3, padding: causal, activation: gelu}, {type: SpatialDropout1D, rate: "
    "0.2}, {type: MaxPooling1D, pool_size: 2, padding: same}, {type: LSTM, units: 16, return_sequences: true}, {type: "
    "LayerNormalization}, {type: TimeDistributed, layer: {type: Dropout, rate: 0.1}}, {type: Activation, activation: "
    "silu}, {type: AveragePooling1D, pool_size: 2, strides: 1, padding: same}, {type: GlobalAveragePooling1D, keepdims: "
    "true}, {type: Flatten}, {type: Dense, units: 4}]";

void PrintTo(const GraphCase& c, std::ostream* os) { *os << c.name; }

class CudaGraphs : public ::testing::TestWithParam<GraphCase> {};

TEST_P(CudaGraphs, ReplayedStepsGiveTheLossesMetricsAndWeightsOfUncapturedOnes) {
  SKIP_WITHOUT_GPU();
  const GraphCase& c = GetParam();
  Config cfg = config_of("[12, 16]", c.layers, c.name);
  cfg.device = Device::Cuda;
  cfg.train.optimizer.kind = OptimizerKind::Adam;
  cfg.train.optimizer.global_clipnorm = 1.0;
  cfg.plan.precision = c.precision, cfg.plan.algo = c.algo;
  Config plain = cfg;
  plain.plan.graphs = false;
  Params init = random_params(cfg.model, 3, 0.3);
  Rng r1(9), r2(9);
  auto graphed = make_engine(cfg, init, r1);
  auto eager = make_engine(plain, init, r2);
  auto mg = metrics_of(cfg, {metric(MetricKind::MAE)}), me = metrics_of(cfg, {metric(MetricKind::MAE)});

  // 8 steps of B = 16, one of B = 5 (a new shape: uncaptured), then after step 10 evaluations (one
  // with lengths, which rewrites the lengths the captured cuDNN calls read) and a prediction (which
  // shifts the input upload buffers only), then 7 more of B = 16; the learning rate changes every step.
  std::vector<Batch> batches;
  for (int s = 0; s < 17; ++s) batches.push_back(random_batch(cfg, s == 8 ? 5 : 16, 12, 100 + s));
  const Batch val = random_batch(cfg, 16, 12, 99);
  const Batch val_masked = random_batch(cfg, 16, 12, 98, {12, 3, 7, 12, 1, 9, 12, 5, 12, 12, 2, 8, 11, 12, 6, 4});
  std::vector<double> lg, le;
  const int64_t before = gpu_graph_steps();
  for (size_t s = 0; s < batches.size(); ++s) {
    const double lr = 1e-2 / (1.0 + static_cast<double>(s));
    graphed->enqueue_train_step(batches[s], lr, raw(mg));
    for (const LossValue& l : graphed->collect_losses(false)) lg.push_back(l.mean());
    if (s == 9) {
      for (const LossValue& l : graphed->collect_losses(true)) lg.push_back(l.mean());
      const double a = graphed->eval_step(val, {}).mean();
      const double am = graphed->eval_step(val_masked, {}).mean();  // rewrites cuDNN's sequence lengths
      graphed->predict(val);                                         // moves only the input upload buffer
      const int64_t replayed = gpu_graph_steps() - before;
      for (size_t u = 0; u <= s; ++u) le.push_back(eager->train_step(batches[u], 1e-2 / (1.0 + u), raw(me)).mean());
      EXPECT_EQ(gpu_graph_steps() - before, replayed) << "plan.graphs: false replays nothing";
      EXPECT_NEAR(a, eager->eval_step(val, {}).mean(), 1e-6 * std::fabs(a)) << "evaluation between steps";
      EXPECT_NEAR(am, eager->eval_step(val_masked, {}).mean(), 1e-6 * std::fabs(am)) << "masked evaluation";
      eager->predict(val);
    }
  }
  for (const LossValue& l : graphed->collect_losses(true)) lg.push_back(l.mean());
  const int64_t replayed = gpu_graph_steps() - before;
  for (size_t s = 10; s < batches.size(); ++s)
    le.push_back(eager->train_step(batches[s], 1e-2 / (1.0 + static_cast<double>(s)), raw(me)).mean());
  EXPECT_EQ(gpu_graph_steps() - before, replayed) << "plan.graphs: false replays nothing";
  // Captured from the second step of each shape on; the batch of 5 and the step after it (new
  // shape, then the first again after the buffers may have changed) can run uncaptured.
  EXPECT_GE(replayed, 12) << "steps replayed as CUDA graphs";
  ASSERT_EQ(lg.size(), le.size());
  for (size_t i = 0; i < le.size(); ++i) EXPECT_NEAR(lg[i], le[i], 1e-6 * std::fabs(le[i])) << "step " << i + 1;
  EXPECT_NEAR(mg[0]->result(), me[0]->result(), 1e-6 * me[0]->result()) << "mae over the steps";
  const std::vector<Param*> pg = graphed->host_params().all(), pe = eager->host_params().all();
  for (size_t i = 0; i < pe.size(); ++i) expect_near_all(pg[i]->value, pe[i]->value, 1e-6, 1e-5, pe[i]->name);
  for (size_t i = 0; i < pe.size(); ++i)
    EXPECT_FALSE(pg[i]->value.data == init.all()[i]->value.data) << pe[i]->name << " was trained";
}

// eval and predict (plan.graphs): repeated evaluations and predictions on a shape are replayed as
// graphs and give the uncaptured numbers, also after training steps changed the weights.
TEST_P(CudaGraphs, ReplayedEvaluationsAndPredictionsGiveTheNumbersOfUncapturedOnes) {
  SKIP_WITHOUT_GPU();
  const GraphCase& c = GetParam();
  Config cfg = config_of("[12, 16]", c.layers, c.name);
  cfg.device = Device::Cuda;
  cfg.plan.precision = c.precision, cfg.plan.algo = c.algo;
  Config plain = cfg;
  plain.plan.graphs = false;
  const Params init = random_params(cfg.model, 3, 0.3);
  Rng r1(9), r2(9);
  auto graphed = make_engine(cfg, init, r1);
  auto eager = make_engine(plain, init, r2);
  const Batch val = random_batch(cfg, 16, 12, 99), other = random_batch(cfg, 16, 12, 98);
  const int64_t before = gpu_graph_steps();
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    for (int k = 0; k < 4; ++k) {
      const Batch& b = k % 2 ? other : val;  // the same shape, other data: one graph for both
      auto mg = metrics_of(cfg, {metric(MetricKind::MAE)}), me = metrics_of(cfg, {metric(MetricKind::MAE)});
      const double g = graphed->eval_step(b, raw(mg)).mean(), e = eager->eval_step(b, raw(me)).mean();
      EXPECT_NEAR(g, e, 1e-6 * std::fabs(e)) << "evaluation " << k;
      EXPECT_NEAR(mg[0]->result(), me[0]->result(), 1e-6 * me[0]->result()) << "mae of evaluation " << k;
      expect_near_all(graphed->predict(b), eager->predict(b), 1e-6, 1e-6, "prediction");
    }
    const Batch t = random_batch(cfg, 16, 12, 200 + round);
    graphed->train_step(t, 1e-2, {}), eager->train_step(t, 1e-2, {});  // new weights for the next round
  }
  EXPECT_GE(gpu_graph_steps() - before, 12) << "evaluations and predictions replayed as CUDA graphs";
}

INSTANTIATE_TEST_SUITE_P(Plans, CudaGraphs,
                         ::testing::Values(GraphCase{"fp32", Precision::Fp32, RnnAlgo::Standard, kLstm2},
                                           GraphCase{"fp16_persist", Precision::Fp16, RnnAlgo::PersistStatic, kLstm2},
                                           GraphCase{"bf16_wavefront", Precision::Bf16, RnnAlgo::Wavefront, kLstm2},
                                           GraphCase{"bf16_wavefront_gru_reset_first", Precision::Bf16,
                                                     RnnAlgo::Wavefront, kGruResetFirst},
                                           GraphCase{"dropout", Precision::Fp32, RnnAlgo::Standard, kDropout},
                                           GraphCase{"sequence_layers", Precision::Fp32, RnnAlgo::Standard,
                                                     kSequenceLayers}),
                         [](const auto& info) { return info.param.name; });

// Masked steps (lengths, Masking, mask_zero) of one padded shape with different masks every step:
// the unidirectional stacks run at full length with device-made lengths, so the steps are captured
// once and replayed, and give the losses and weights of the same steps run uncaptured.
struct MaskedCase {
  std::string name, input, layers;
  bool lengths;  // the batches carry lengths; otherwise the mask comes from the data
  LossKind loss;
  Precision precision = Precision::Fp32;
  RnnAlgo algo = RnnAlgo::Standard;
};

void PrintTo(const MaskedCase& c, std::ostream* os) { *os << c.name; }

class MaskedGraphs : public ::testing::TestWithParam<MaskedCase> {};

// A case's model twice on the GPU from the same weights and seed: with CUDA graphs (plan.graphs, the
// default) and without. input: the Input shape.
struct GraphedAndPlain {
  GraphedAndPlain(const MaskedCase& c, const std::string& input) : cfg(config_of(input, c.layers, c.name)) {
    cfg.device = Device::Cuda;
    cfg.train.loss.kind = c.loss;
    cfg.train.loss.from_logits = c.loss == LossKind::SparseCategoricalCrossentropy;
    cfg.train.optimizer.kind = OptimizerKind::Adam;
    cfg.plan.precision = c.precision, cfg.plan.algo = c.algo;
    Config plain_cfg = cfg;
    plain_cfg.plan.graphs = false;
    const Params init = random_params(cfg.model, 3, 0.3);
    graphed = make_engine(cfg, init, r1);
    plain = make_engine(plain_cfg, init, r2);
  }
  void expect_same_weights() const {
    const std::vector<Param*> pg = graphed->host_params().all(), pe = plain->host_params().all();
    for (size_t i = 0; i < pe.size(); ++i) expect_near_all(pg[i]->value, pe[i]->value, 1e-6, 1e-5, pe[i]->name);
  }
  Config cfg;
  Rng r1{9}, r2{9};  // the engines' dropout streams: declared before them, so they outlive them
  std::unique_ptr<Engine> graphed, plain;
};

TEST_P(MaskedGraphs, ReplaysWithChangingMasksGiveTheLossesOfUncapturedSteps) {
  SKIP_WITHOUT_GPU();
  const MaskedCase& c = GetParam();
  GraphedAndPlain run(c, c.input);
  const Config& cfg = run.cfg;
  Rng pick(5);
  const int64_t before = gpu_graph_steps();
  for (int s = 0; s < 17; ++s) {
    std::vector<int32_t> lens(16);
    for (int32_t& l : lens) l = static_cast<int32_t>(pick.below(13));  // 0..12: empty sequences too
    lens[0] = 12;
    Batch b = random_batch(cfg, 16, 12, 300 + s, lens);  // padded steps hold zeros / token 0
    if (!c.lengths) b.lengths.clear();
    const double lr = 1e-2 / (1.0 + s);
    const double g = run.graphed->train_step(b, lr, {}).mean();
    const int64_t replayed = gpu_graph_steps() - before;
    const double e = run.plain->train_step(b, lr, {}).mean();
    EXPECT_EQ(gpu_graph_steps() - before, replayed) << "plan.graphs: false replays nothing";
    EXPECT_NEAR(g, e, 1e-6 * std::fabs(e)) << "step " << s + 1;
  }
  EXPECT_GE(gpu_graph_steps() - before, 14) << "masked steps replayed as CUDA graphs";
  run.expect_same_weights();

  // Masked evaluations, a different mask each: the loss and a metric (computed on the host from the
  // predictions and the output's mask) as uncaptured, replayed or not.
  const MetricSpec m = metric(c.loss == LossKind::MSE ? MetricKind::MAE : MetricKind::SparseCategoricalAccuracy);
  for (int s = 0; s < 6; ++s) {
    std::vector<int32_t> lens(16);
    for (int32_t& l : lens) l = static_cast<int32_t>(1 + pick.below(12));
    lens[0] = 12;
    Batch b = random_batch(cfg, 16, 12, 400 + s, lens);
    if (!c.lengths) b.lengths.clear();
    auto mg = metrics_of(cfg, {m}), me = metrics_of(cfg, {m});
    const double g = run.graphed->eval_step(b, raw(mg)).mean(), e = run.plain->eval_step(b, raw(me)).mean();
    EXPECT_NEAR(g, e, 1e-6 * std::fabs(e)) << "evaluation " << s;
    EXPECT_NEAR(mg[0]->result(), me[0]->result(), 1e-6 * std::fabs(me[0]->result())) << "metric of evaluation " << s;
  }
}

// Bucketed batches (train.bucketing): the padded length changes from step to step among a few
// shapes, in no order; each shape's graph is captured once it has run warm, and replayed whatever
// ran in between.
TEST_P(MaskedGraphs, BucketedShapesReplayTheirOwnGraphsWithTheLossesOfUncapturedSteps) {
  SKIP_WITHOUT_GPU();
  const MaskedCase& c = GetParam();
  std::string input = c.input;
  input.replace(input.find("12"), 2, "null");
  GraphedAndPlain run(c, input);
  const Config& cfg = run.cfg;
  Rng pick(6);
  const int64_t before = gpu_graph_steps();
  const int steps = 40;
  for (int s = 0; s < steps; ++s) {
    const int32_t T = s == 0 ? 16 : std::vector<int32_t>{4, 8, 12, 16}[pick.below(4)];  // the longest first
    std::vector<int32_t> lens(16);
    for (int32_t& l : lens) l = static_cast<int32_t>(pick.below(static_cast<uint64_t>(T) + 1));
    lens[0] = T;
    Batch b = random_batch(cfg, 16, T, 500 + s, lens);
    if (!c.lengths) b.lengths.clear();
    const double g = run.graphed->train_step(b, 1e-2, {}).mean();
    const double e = run.plain->train_step(b, 1e-2, {}).mean();
    EXPECT_NEAR(g, e, 1e-6 * std::fabs(e)) << "step " << s + 1 << ", " << T << " steps";
  }
  // A shape runs uncaptured until it has run once allocating nothing (its first run allocates, e.g.
  // the stacks' lengths for it; the first of each upload buffer too): 29 of 40 on the H200.
  EXPECT_GE(gpu_graph_steps() - before, steps - 12) << "steps replayed (or captured) as CUDA graphs";
  run.expect_same_weights();
}

INSTANTIATE_TEST_SUITE_P(
    Masks, MaskedGraphs,
    ::testing::Values(
        MaskedCase{"mask_zero_last_step", "[12]",
                   "[{type: Embedding, input_dim: 50, output_dim: 8, mask_zero: true}, {type: LSTM, units: 16, "
                   "return_sequences: true}, {type: LSTM, units: 16}, {type: Dense, units: 3}]",
                   false, LossKind::SparseCategoricalCrossentropy},
        MaskedCase{"masking_every_step", "[12, 4]",
                   "[{type: Masking, mask_value: 0.0}, {type: GRU, units: 16, return_sequences: true}, "
                   "{type: TimeDistributed, layer: {type: Dense, units: 2}}]",
                   false, LossKind::MSE},
        MaskedCase{"lengths_two_layers", "[12, 4]",
                   "[{type: LSTM, units: 16, return_sequences: true}, {type: LSTM, units: 8, return_sequences: true}, "
                   "{type: TimeDistributed, layer: {type: Dense, units: 2}}]",
                   true, LossKind::MSE},
        MaskedCase{"lengths_bf16_wavefront", "[12, 4]",
                   "[{type: LSTM, units: 16, return_sequences: true}, {type: LSTM, units: 16}, {type: Dense, units: 2}]",
                   true, LossKind::MSE, Precision::Bf16, RnnAlgo::Wavefront},
        MaskedCase{"lengths_fp16_wavefront_gru_reset_first", "[12, 4]",
                   "[{type: GRU, units: 16, reset_after: false, return_sequences: true}, {type: GRU, units: 16, "
                   "reset_after: false}, {type: Dense, units: 2}]",
                   true, LossKind::MSE, Precision::Fp16, RnnAlgo::Wavefront},
        MaskedCase{"masking_bidirectional", "[12, 4]",
                   "[{type: Masking, mask_value: 0.0}, {type: Bidirectional, layer: {type: LSTM, units: 8, "
                   "return_sequences: true}}, {type: Bidirectional, merge_mode: sum, layer: {type: GRU, units: 8, "
                   "return_sequences: true}}, {type: TimeDistributed, layer: {type: Dense, units: 2}}]",
                   true, LossKind::MSE},
        MaskedCase{"mask_zero_bidirectional_last_step", "[12]",
                   "[{type: Embedding, input_dim: 50, output_dim: 8, mask_zero: true}, {type: Bidirectional, "
                   "layer: {type: LSTM, units: 8}}, {type: Dense, units: 3}]",
                   false, LossKind::SparseCategoricalCrossentropy}),
    [](const auto& info) { return info.param.name; });

TEST(CudaGraphsScope, MaskedBidirectionalStacksWithoutAMaskLayerRunUncaptured) {
  SKIP_WITHOUT_GPU();
  // Lengths from the data, no mask layer: the bidirectional stack stays one cuDNN call, whose
  // backward direction starts at each sequence's end from cuDNN's host lengths, which a captured call
  // would keep. (With Masking or mask_zero it runs one direction at a time and is captured: MaskedGraphs.)
  Config cfg = config_of("[8, 4]",
                         "[{type: Bidirectional, layer: {type: LSTM, units: 8, return_sequences: true}}, "
                         "{type: TimeDistributed, layer: {type: Dense, units: 2}}]",
                         "bidir_lengths");
  cfg.device = Device::Cuda;
  const int64_t before = gpu_graph_steps();
  Rng r(1);
  auto e = make_engine(cfg, random_params(cfg.model, 1), r);
  for (int s = 0; s < 6; ++s) e->train_step(random_batch(cfg, 4, 8, s, {8, 5, 8, 2}), 1e-2, {});
  EXPECT_EQ(gpu_graph_steps(), before);
}

TEST(CudaGraphsScope, AReplayedStepStillRejectsABadBatchAndTheQueueGoesOn) {
  SKIP_WITHOUT_GPU();
  Config cfg = config_of("[8]",
                         "[{type: Embedding, input_dim: 20, output_dim: 6}, {type: LSTM, units: 8, return_sequences: "
                         "true}, {type: Dense, units: 5}]",
                         "bad_batch");
  cfg.device = Device::Cuda;
  cfg.train.loss.kind = LossKind::SparseCategoricalCrossentropy;
  cfg.train.loss.from_logits = true;
  Config plain = cfg;
  plain.plan.graphs = false;
  const Params init = random_params(cfg.model, 1);
  Rng r1(1), r2(1);
  auto e = make_engine(cfg, init, r1);
  auto ref = make_engine(plain, init, r2);
  std::vector<double> got, want;
  auto good = [&](int s) {  // enqueued, not collected: up to 13 in flight, more than the queue holds
    const Batch b = random_batch(cfg, 4, 8, s);
    e->enqueue_train_step(b, 1e-2, {});
    want.push_back(ref->train_step(b, 1e-2, {}).mean());
  };
  const int64_t before = gpu_graph_steps();
  for (int s = 0; s < 6; ++s) good(s);
  ASSERT_GE(gpu_graph_steps() - before, 3) << "the steps are replayed";
  Batch bad_id = random_batch(cfg, 4, 8, 50);
  bad_id.x[9] = 20.0f;
  try {
    e->enqueue_train_step(bad_id, 1e-2, {});
    ADD_FAILURE() << "a token id of 20 with input_dim 20 was accepted";
  } catch (const DataError& err) {
    EXPECT_NE(std::string(err.what()).find("token id 20 at sample 1 step 1"), std::string::npos) << err.what();
  }
  for (int s = 6; s < 9; ++s) good(s);
  Batch bad_label = random_batch(cfg, 4, 8, 51);
  bad_label.y[3] = 5.0f;
  try {
    e->enqueue_train_step(bad_label, 1e-2, {});
    ADD_FAILURE() << "a label of 5 with 5 classes was accepted";
  } catch (const DataError& err) {
    EXPECT_NE(std::string(err.what()).find("label 5 at sample 0, step 3"), std::string::npos) << err.what();
  }
  for (int s = 9; s < 13; ++s) good(s);
  for (const LossValue& l : e->collect_losses(true)) got.push_back(l.mean());
  ASSERT_EQ(got.size(), want.size()) << "one loss per accepted step";
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6 * std::fabs(want[i])) << "step " << i + 1;
  EXPECT_EQ(e->optimizer().iterations(), 13);
}

}  // namespace
}  // namespace rnntrain
