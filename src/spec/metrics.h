// The metrics: their kind and one descriptor row each (kMetricInfos: names, Keras class, direction,
// config keys, and how a batch is added up). The parser, the emitter, the callbacks' direction, the
// CPU metrics (model/metrics.cpp), the CUDA backend's metric kernels and the Keras reader and writer
// read the table; MetricSpec (spec/config.h) holds a metric's settings. Adding a metric:
// docs/contributing.md. Plain C++17: the CUDA kernels include it.
#pragma once

#include "spec/losses.h"

namespace rnntrain {

// Every metric; kMetricInfos lists them in this order, which is the order of configs and messages.
enum class MetricKind {
  Accuracy, BinaryAccuracy, CategoricalAccuracy, SparseCategoricalAccuracy, MAE, MSE, Perplexity,
  TopKCategoricalAccuracy, SparseTopKCategoricalAccuracy, Precision, Recall, AUC, F1Score, FBetaScore,
  RMSE, MSLE, LogCosh, R2Score
};

// How a metric adds up a batch: one value per position (an accuracy's hits, a loss's values, or the
// crossentropy behind perplexity), histograms of the confusion metrics (spec/confusion.h), or
// R2Score's moments.
enum class MetricFamily { Accuracy, ErrorMean, Perplexity, Confusion, R2 };
// How an accuracy counts a position's hit, on the CPU and in the CUDA kernel. ByLoss is "accuracy",
// which Keras resolves by the loss (and, for regression losses, by the shapes) to one of the others.
enum class AccuracyRule { ByLoss, Binary, Categorical, Sparse, TopK, SparseTopK };

struct MetricInfo {
  MetricKind kind;
  const char* name;          // in configs, and the default history column
  const char* const* aliases;  // also accepted in configs (null-terminated), never written
  // The Keras class of a metric written as a class_name/config object (those with settings, and
  // those Keras 3 knows only by class); null: written by its name.
  const char* keras_class;
  bool rises;  // improves upwards (Keras' _direction "up"): what monitor mode "auto" follows
  MetricFamily family;
  AccuracyRule accuracy;  // Accuracy: its rule
  LossKind error;         // ErrorMean: the loss whose per-position values it averages
  bool root;              // ErrorMean: the square root of the mean (root_mean_squared_error)
  const char* const* keys;  // its config keys besides type and name (null-terminated)
};

namespace metric_table {
constexpr const char* kNone[] = {nullptr};
constexpr const char* kTopK[] = {"k", nullptr};
constexpr const char* kThresholds[] = {"thresholds", "class_id", nullptr};
constexpr const char* kAuc[] = {"num_thresholds", "curve", "summation_method", "multi_label", "from_logits", nullptr};
constexpr const char* kF1[] = {"average", "threshold", nullptr};
constexpr const char* kFBeta[] = {"average", "beta", "threshold", nullptr};
constexpr const char* kR2[] = {"class_aggregation", "num_regressors", nullptr};
constexpr const char* kAcc[] = {"acc", nullptr};
constexpr const char* kMae[] = {"mean_absolute_error", nullptr};
constexpr const char* kMse[] = {"mean_squared_error", nullptr};
constexpr const char* kRmse[] = {"rmse", nullptr};
constexpr const char* kMsle[] = {"mean_squared_logarithmic_error", nullptr};
constexpr const char* kLogCosh[] = {"log_cosh", "log_cosh_error", nullptr};

constexpr MetricInfo accuracy_metric(MetricKind kind, const char* name, AccuracyRule rule,
                                     const char* keras_class = nullptr, const char* const* keys = kNone,
                                     const char* const* aliases = kNone) {
  return {kind, name, aliases, keras_class, true, MetricFamily::Accuracy, rule, LossKind::MSE, false, keys};
}
constexpr MetricInfo error_metric(MetricKind kind, const char* name, const char* const* aliases, const char* keras_class,
                                  LossKind error, bool root = false) {
  return {kind, name, aliases, keras_class, false, MetricFamily::ErrorMean, AccuracyRule::ByLoss, error, root, kNone};
}
constexpr MetricInfo other_metric(MetricKind kind, const char* name, const char* keras_class, bool rises,
                                  MetricFamily family, const char* const* keys) {
  return {kind, name, kNone, keras_class, rises, family, AccuracyRule::ByLoss, LossKind::MSE, false, keys};
}

// The rows, in MetricKind's order.
constexpr MetricInfo kMetricInfos[] = {
    accuracy_metric(MetricKind::Accuracy, "accuracy", AccuracyRule::ByLoss, nullptr, kNone, kAcc),
    accuracy_metric(MetricKind::BinaryAccuracy, "binary_accuracy", AccuracyRule::Binary),
    accuracy_metric(MetricKind::CategoricalAccuracy, "categorical_accuracy", AccuracyRule::Categorical),
    accuracy_metric(MetricKind::SparseCategoricalAccuracy, "sparse_categorical_accuracy", AccuracyRule::Sparse),
    error_metric(MetricKind::MAE, "mae", kMae, nullptr, LossKind::MAE),
    error_metric(MetricKind::MSE, "mse", kMse, nullptr, LossKind::MSE),
    other_metric(MetricKind::Perplexity, "perplexity", nullptr, false, MetricFamily::Perplexity, kNone),
    accuracy_metric(MetricKind::TopKCategoricalAccuracy, "top_k_categorical_accuracy", AccuracyRule::TopK,
                    "TopKCategoricalAccuracy", kTopK),
    accuracy_metric(MetricKind::SparseTopKCategoricalAccuracy, "sparse_top_k_categorical_accuracy",
                    AccuracyRule::SparseTopK, "SparseTopKCategoricalAccuracy", kTopK),
    other_metric(MetricKind::Precision, "precision", "Precision", true, MetricFamily::Confusion, kThresholds),
    other_metric(MetricKind::Recall, "recall", "Recall", true, MetricFamily::Confusion, kThresholds),
    other_metric(MetricKind::AUC, "auc", "AUC", true, MetricFamily::Confusion, kAuc),
    other_metric(MetricKind::F1Score, "f1_score", "F1Score", true, MetricFamily::Confusion, kF1),
    other_metric(MetricKind::FBetaScore, "fbeta_score", "FBetaScore", true, MetricFamily::Confusion, kFBeta),
    error_metric(MetricKind::RMSE, "root_mean_squared_error", kRmse, "RootMeanSquaredError", LossKind::MSE, true),
    error_metric(MetricKind::MSLE, "msle", kMsle, "MeanSquaredLogarithmicError", LossKind::MSLE),
    error_metric(MetricKind::LogCosh, "logcosh", kLogCosh, "LogCoshError", LossKind::LogCosh),
    other_metric(MetricKind::R2Score, "r2_score", "R2Score", true, MetricFamily::R2, kR2),
};
}  // namespace metric_table

// One row per MetricKind, in its order.
using metric_table::kMetricInfos;

static_assert(rows_in_kind_order(kMetricInfos, static_cast<int>(MetricKind::R2Score) + 1),
              "kMetricInfos has one row per MetricKind, in its order");

constexpr const MetricInfo& metric_info(MetricKind k) { return kMetricInfos[static_cast<int>(k)]; }

}  // namespace rnntrain
