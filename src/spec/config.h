// The typed configuration: what `rnntrain train config.yaml` reads, after YAML parsing, overrides
// and validation (spec/parse.cpp). Nothing downstream looks up option strings; it reads these
// structs. Defaults are Keras 3's. Documented key by key in docs/config.md.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "spec/activations.h"
#include "spec/data_formats.h"
#include "spec/losses.h"
#include "spec/metrics.h"
#include "spec/optimizers.h"

namespace rnntrain {

// Where a value came from, for error messages: "configs/x.yaml:12:5".
struct SourceLoc {
  std::string file;
  int line = 0;  // 1-based; 0 = unknown (a default, or a command-line override)
  int col = 0;
  std::string str() const;
};

enum class LayerKind {
  Input, Embedding, Masking, LSTM, GRU, SimpleRNN, Bidirectional, Dropout, Dense, TimeDistributed,
  Conv1D, MaxPooling1D, AveragePooling1D, GlobalAveragePooling1D, GlobalMaxPooling1D, LayerNormalization,
  Flatten, SpatialDropout1D, Activation
};
// How a window (Conv1D, the 1D poolings) meets the sequence's ends: valid (no padding), same (zeros
// split as Keras splits them: the odd one on the right), causal (Conv1D: all on the left).
enum class Padding { Valid, Same, Causal };
const char* layer_kind_name(LayerKind k);   // Keras class name: "LSTM", "TimeDistributed", ...
const char* layer_snake_name(LayerKind k);  // its snake_case: "lstm", "simple_rnn", "input_layer" (default names, Keras 3 paths)
bool is_recurrent(LayerKind k);            // LSTM, GRU, SimpleRNN (not Bidirectional)

const char* activation_name(Activation a);  // "linear", "tanh", ..., "hard_sigmoid_keras2"
const char* merge_mode_name(MergeMode m);   // "concat", "sum", "mul", "ave" (configs and Keras alike)

enum class InitKind { Zeros, Ones, Constant, GlorotUniform, GlorotNormal, Orthogonal, RandomUniform, RandomNormal, HeUniform, HeNormal, LecunUniform };
struct Initializer {
  InitKind kind = InitKind::Zeros;
  double a = 0.0;  // RandomUniform: minval (-0.05); RandomNormal: mean (0); Constant: value; Orthogonal: gain (1)
  double b = 0.0;  // RandomUniform: maxval (0.05); RandomNormal: stddev (0.05)
};

// Keras' L1, L2 and L1L2 weight regularizers: l1 * sum(|w|) + l2 * sum(w^2) added to the loss (and
// to the reported loss, in training and evaluation), its gradient l1 * sign(w) + 2 * l2 * w (sign(0) = 0,
// as TensorFlow and PyTorch; Keras on JAX takes +1 at exactly 0) added before clipping.
struct Regularizer {
  double l1 = 0.0, l2 = 0.0;
  bool active() const { return l1 != 0.0 || l2 != 0.0; }
  bool operator==(const Regularizer&) const = default;
};

// Keras' weight constraints, applied to the weight after each optimizer step: max_norm (max_value,
// default 2), unit_norm and min_max_norm (min_value 0, max_value 1, rate 1) scale each slice along
// `axis` (of the weight's Keras shape; negative counts from the end) to the wanted norm; non_neg
// zeroes negative entries. Formulas: spec/constraint_rule.h.
enum class ConstraintKind { None, MaxNorm, NonNeg, UnitNorm, MinMaxNorm };
struct Constraint {
  ConstraintKind kind = ConstraintKind::None;
  double min_value = 0.0, max_value = 2.0, rate = 1.0;
  std::vector<int> axis{0};
  bool active() const { return kind != ConstraintKind::None; }
  bool operator==(const Constraint&) const = default;
};

// The largest units, features, timesteps, vocabulary or batch a config or an imported model may
// give, so that no later size arithmetic can overflow (token ids are float32: exact below 2^24).
constexpr int64_t kMaxDim = int64_t{1} << 24;

struct LayerSpec {
  LayerKind kind = LayerKind::Dense;
  std::string name;  // unique; Keras-style defaults: "lstm", "lstm_1", "bidirectional", ...
  SourceLoc loc;     // the layer's entry in the YAML file

  // Input: shape without the batch dimension; -1 = None (variable timesteps).
  // Token ids for Embedding: shape [T]; features: shape [T, F].
  Shape shape;

  // Embedding
  int64_t input_dim = 0, output_dim = 0;
  bool mask_zero = false;
  Initializer embeddings_initializer{InitKind::RandomUniform, -0.05, 0.05};
  Regularizer embeddings_regularizer;
  Constraint embeddings_constraint;

  // Masking
  double mask_value = 0.0;

  // LSTM, GRU, SimpleRNN, Dense
  int64_t units = 0;
  Activation activation = Activation::Tanh;  // Dense default is Linear (set by the parser)
  Activation recurrent_activation = Activation::Sigmoid;
  bool use_bias = true;
  bool return_sequences = false;
  bool go_backwards = false;
  bool reset_after = true;       // GRU
  bool unit_forget_bias = true;  // LSTM
  double dropout = 0.0;          // recurrent layers: on the inputs, one mask per sequence
  double recurrent_dropout = 0.0;
  Initializer kernel_initializer{InitKind::GlorotUniform};
  Initializer recurrent_initializer{InitKind::Orthogonal, 1.0};
  Initializer bias_initializer{InitKind::Zeros};
  Regularizer kernel_regularizer, recurrent_regularizer, bias_regularizer;  // recurrent: cells only
  Constraint kernel_constraint, recurrent_constraint, bias_constraint;
  // Embedding, cells, Dense: Keras' penalty on the layer's output (a Bidirectional's: on each
  // direction's), divided by the batch size; not inside TimeDistributed, which Keras 3 runs without it.
  Regularizer activity_regularizer;

  // Dropout, SpatialDropout1D
  double rate = 0.0;

  // Conv1D (filters, kernel_size, dilation_rate; activation, use_bias, the kernel and bias settings
  // above) and the 1D poolings (pool_size): windows moved by strides (a pooling's default: pool_size).
  int64_t filters = 0, kernel_size = 0, pool_size = 0, strides = 1, dilation_rate = 1;
  Padding padding = Padding::Valid;
  // GlobalAveragePooling1D, GlobalMaxPooling1D: keep the time axis, as one step.
  bool keepdims = false;
  // LayerNormalization over the last axis: (x - mean) / sqrt(variance + epsilon) * gamma + beta.
  double epsilon = 1e-3;
  bool center = true, scale = true;
  Initializer gamma_initializer{InitKind::Ones}, beta_initializer{InitKind::Zeros};
  Regularizer gamma_regularizer, beta_regularizer;
  Constraint gamma_constraint, beta_constraint;

  // Bidirectional (wraps a recurrent layer), TimeDistributed (wraps a Dense or a Dropout)
  MergeMode merge_mode = MergeMode::Concat;
  std::shared_ptr<LayerSpec> inner;
};

// The activity regularizer on a layer's output: its own, or a Bidirectional's wrapped layer's (concat
// merges only, where the penalty of the output is the sum of the directions').
const Regularizer& activity_regularizer_of(const LayerSpec& l);

struct ModelSpec {
  std::vector<LayerSpec> layers;  // layers[0] is always the Input layer
  std::optional<std::string> init_from;  // a checkpoint or weights file to start from
};

// One data source. `format` (spec/data_formats.h) is inferred from the path's suffix when not given.
enum class Scaling { None, Standard, MinMax };
struct DataSource {
  DataFormat format = DataFormat::Hdf5;
  SourceLoc loc;
  std::string path;  // hdf5, npz, csv, text (relative paths are relative to the config file)
  // hdf5 and npz: dataset / array names. npy: paths of the .npy files.
  std::string inputs = "x", targets = "y", lengths;  // lengths optional ("" = none)
  // Keras' sample_weight: per sample [N] or per timestep [N, T], weighing each position's loss
  // (optional, "" = none; hdf5/npz: its dataset / array, npy: its file).
  std::string sample_weight;
  // csv: windows of `window` rows predict the next `horizon` rows of the target columns.
  int64_t window = 0, horizon = 1, stride = 1;
  // csv_sequences: labelled sequences, one row per time step grouped by the `id` column (sequence_id),
  // or without it one row per sequence whose `features` columns are its time steps; `targets`: the
  // label column (features and target_columns as for csv).
  std::string sequence_id;
  // Not a config key: `predict` sets it. The windows then run to the last row (the last one forecasts
  // the `horizon` rows after the file), without targets.
  bool forecast = false;
  std::vector<std::string> features, target_columns;
  Scaling scaling = Scaling::None;
  // text: character-level LM, sequences of seq_len characters; targets are the next characters.
  int64_t seq_len = 0;
  // synthetic: a generated task (see data/synthetic.h): "adding", "sine", "parity", "copy".
  std::string task;
  int64_t samples = 0, timesteps = 0;
  uint64_t seed = 0;
};

struct DataSpec {
  std::optional<DataSource> train;
  std::optional<DataSource> validation;  // separate validation data
  double validation_split = 0.0;         // or: the last fraction of train (as Keras, before shuffling)
  std::optional<DataSource> test;        // default data for `rnntrain eval`
};

// LossKind and LossSpec: spec/losses.h, with the losses' descriptors.

// MetricKind and the metrics' descriptors: spec/metrics.h.
enum class AucCurve { ROC, PR };
enum class AucSummation { Interpolation, Minoring, Majoring };
enum class FAverage { Micro, Macro, Weighted };
enum class R2Aggregation { Uniform, VarianceWeighted };
struct MetricSpec {
  MetricKind kind;
  std::string name;  // the history column: "accuracy", "mae", "perplexity", "auc", ...
  int64_t k = 5;     // top-k accuracies
  // precision, recall: the threshold (0.5); f-scores: predicted positive above it, or (none) the
  // row's maximum
  std::optional<double> threshold{};
  int64_t class_id = -1;  // precision, recall: only this output unit (-1: all, flattened)
  // auc
  int64_t num_thresholds = 200;
  AucCurve curve = AucCurve::ROC;
  AucSummation summation = AucSummation::Interpolation;
  bool multi_label = false, from_logits = false;
  // f1_score, fbeta_score
  FAverage average = FAverage::Macro;
  double beta = 1.0;
  // r2_score: Keras' class_aggregation (uniform_average, variance_weighted_average) and
  // num_regressors (the adjusted R2 when > 0)
  R2Aggregation aggregation = R2Aggregation::Uniform;
  int64_t num_regressors = 0;
  bool operator==(const MetricSpec&) const = default;
};

// OptimizerKind and OptimizerSpec: spec/optimizers.h, with the optimizers' descriptors.

enum class ScheduleKind {
  Constant, Exponential, Cosine, Step, ReduceOnPlateau, Polynomial, InverseTime, PiecewiseConstant, CosineRestarts
};
// The per-step kinds are Keras' schedules of the same names (ExponentialDecay, CosineDecay with
// warmup, PolynomialDecay, InverseTimeDecay, PiecewiseConstantDecay, CosineDecayRestarts) of the
// optimizer's step, from train.optimizer.learning_rate (piecewise_constant: from its values).
// Whether a monitored value improves downwards (min), upwards (max), or as its metric goes (auto).
enum class MonitorMode { Auto, Min, Max };
struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::Constant;
  // exponential (per optimizer step): lr * decay_rate ^ (step / decay_steps), floor() if staircase;
  // inverse_time: lr / (1 + decay_rate * step / decay_steps), floor() if staircase
  int64_t decay_steps = 0;
  double decay_rate = 0.96;
  bool staircase = false;
  // cosine (per step): linear warmup over warmup_steps from 0, then cosine to alpha*lr over decay_steps
  int64_t warmup_steps = 0;
  double alpha = 0.0;
  // polynomial: (lr - end_learning_rate) * (1 - step/decay_steps)^power + end_learning_rate, the
  // step held at decay_steps, or with cycle, decay_steps stretched to the next multiple past the step
  double end_learning_rate = 0.0001, power = 1.0;
  bool cycle = false;
  // piecewise_constant: values[i] up to and including step boundaries[i], values.back() after
  std::vector<int64_t> boundaries;
  std::vector<double> values;
  // cosine_restarts: cosine periods from decay_steps, each t_mul times longer and m_mul times lower
  double t_mul = 2.0, m_mul = 1.0;
  // step (per epoch): lr * gamma ^ floor(epoch / step_size)
  int64_t step_size = 10;
  double gamma = 0.1;
  // reduce_on_plateau (per epoch, Keras ReduceLROnPlateau)
  std::string monitor = "val_loss";
  MonitorMode mode = MonitorMode::Auto;
  double factor = 0.1;
  int64_t patience = 10;
  double min_delta = 1e-4;
  int64_t cooldown = 0;
  double min_lr = 0.0;
};

struct EarlyStoppingSpec {
  std::string monitor = "val_loss";
  MonitorMode mode = MonitorMode::Auto;
  int64_t patience = 0;
  double min_delta = 0.0;
  bool restore_best_weights = false;
  std::optional<double> baseline;
  int64_t start_from_epoch = 0;
};

struct CheckpointSpec {
  std::string monitor = "val_loss";  // picks best.h5; falls back to "loss" without validation data
  MonitorMode mode = MonitorMode::Auto;
  bool every_epoch = true;  // last.h5 after each epoch
};

struct TrainSpec {
  int64_t epochs = 1;
  int64_t batch_size = 32;
  uint64_t seed = 42;
  bool shuffle = true;
  // Length bucketing: each window of bucket_window batches' worth of (shuffled) samples is sorted by
  // length and cut into batches, the batches are shuffled, and each is trimmed to its longest
  // sequence (when the Input's timesteps are None). Needs lengths: a lengths dataset, or an Embedding
  // with mask_zero or a Masking layer right after the Input.
  bool bucketing = false;
  int64_t bucket_window = 32;
  int64_t steps_per_epoch = 0;  // 0 = the whole training set
  OptimizerSpec optimizer;
  LossSpec loss;
  std::vector<MetricSpec> metrics;
  ScheduleSpec schedule;
  std::optional<EarlyStoppingSpec> early_stopping;
  CheckpointSpec checkpoint;
  int64_t threads = 0;  // CPU threads for BLAS; 0 = all cores
  // Keras' class_weight: the loss of a training position whose target is class c (its label, its
  // one-hot argmax, or a rounded 0/1 target) is weighed by class_weight[c]; classes not listed by 1.
  std::map<int64_t, double> class_weight;
};

enum class Device { Auto, Cpu, Cuda };
enum class FuseMode { Auto, Always, Never };
// The cuDNN stacks' arithmetic. fp32: strict FP32 (FMA math, no tensor cores). tf32: FP32 data with
// TF32 tensor-core products (cuDNN and cuBLAS). fp16 / bf16: the stacks compute in half precision from
// an FP32 master copy of the weights (the optimizer and every other layer stay FP32), with dynamic loss
// scaling for fp16. auto: measured (needs plan.autotune). The CPU backend always computes in FP32.
enum class Precision { Fp32, Tf32, Fp16, Bf16, Auto };
// The stacks' RNN algorithm: cuDNN's standard, persist_static (recurrent weights held on chip;
// batches with padded sequences fall back to standard) or persist_dynamic (the same, compiled for the
// batch size); rnntrain's own wavefront kernels (fp16/bf16 LSTM and GRU, backend/cuda/wavefront.h;
// stacks they cannot run use standard); or auto (measured; needs plan.autotune).
enum class RnnAlgo { Standard, PersistStatic, PersistDynamic, Wavefront, Auto };
// The CPU backend's recurrent layers: oneDNN's RNN primitives where they can run (the reference path
// elsewhere, and in builds without oneDNN), the reference path only, the own engine
// (backend/cpu/recurrent.h), or auto (the default: the own engine where the CPU has AVX-512, else oneDNN).
enum class CpuRnn { Onednn, Reference, Own, Auto };
struct PlanSpec {
  FuseMode fuse = FuseMode::Auto;
  Precision precision = Precision::Fp32;
  RnnAlgo algo = RnnAlgo::Standard;
  bool autotune = false;  // time the candidate plans on the first batch and train with the fastest
  std::string cache;      // autotune's cache file; "" = $XDG_CACHE_HOME/rnntrain/autotune.json
  bool graphs = true;     // GPU: replay repeated training steps as CUDA graphs (backend/cuda/session.h)
  CpuRnn cpu = CpuRnn::Auto;
};
// As written in configs: "fp16", "persist_static", "never".
const char* precision_name(Precision p);
const char* rnn_algo_name(RnnAlgo a);
const char* fuse_mode_name(FuseMode f);

struct OutputSpec {
  std::string dir = "runs/run";  // the run directory (relative to the working directory)
  // TensorBoard event files in dir/tensorboard: 0 per epoch, N > 0 also every N steps, -1 none
  // (`tensorboard: epoch | N | off`).
  int64_t tensorboard = 0;
};

struct Config {
  std::string path;  // the config file
  ModelSpec model;
  DataSpec data;
  TrainSpec train;
  PlanSpec plan;
  Device device = Device::Auto;
  OutputSpec output;
};

}  // namespace rnntrain

