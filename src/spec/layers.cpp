// kLayers: the layers besides the recurrent cells, their config keys and mask rules (spec/layers.h).
#include "spec/layers.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace rnntrain {

namespace {

constexpr const char* kInputKeys[] = {"type", "name", "shape"};
constexpr const char* kEmbeddingKeys[] = {"type", "name", "input_dim", "output_dim", "mask_zero", "embeddings_initializer",
                                          "embeddings_regularizer", "activity_regularizer", "embeddings_constraint"};
constexpr const char* kMaskingKeys[] = {"type", "name", "mask_value"};
constexpr const char* kBidirectionalKeys[] = {"type", "name", "layer", "merge_mode"};
constexpr const char* kDropoutKeys[] = {"type", "name", "rate"};
constexpr const char* kDenseKeys[] = {"type", "name", "units", "activation", "use_bias", "kernel_initializer",
                                      "bias_initializer", "kernel_regularizer", "bias_regularizer",
                                      "activity_regularizer", "kernel_constraint", "bias_constraint"};
constexpr const char* kWrapperKeys[] = {"type", "name", "layer"};
constexpr const char* kConv1DKeys[] = {"type", "name", "filters", "kernel_size", "strides", "padding", "dilation_rate",
                                       "groups", "activation", "use_bias", "kernel_initializer", "bias_initializer",
                                       "kernel_regularizer", "bias_regularizer", "activity_regularizer",
                                       "kernel_constraint", "bias_constraint"};
constexpr const char* kPoolingKeys[] = {"type", "name", "pool_size", "strides", "padding"};
constexpr const char* kGlobalPoolingKeys[] = {"type", "name", "keepdims"};
constexpr const char* kLayerNormKeys[] = {"type", "name", "axis", "epsilon", "center", "scale", "beta_initializer",
                                          "gamma_initializer", "beta_regularizer", "gamma_regularizer",
                                          "beta_constraint", "gamma_constraint"};
constexpr const char* kNameKeys[] = {"type", "name"};
constexpr const char* kActivationKeys[] = {"type", "name", "activation"};

constexpr LayerTraits kLayers[] = {
    {LayerKind::Input, "Input", "input_layer", kInputKeys, MaskRule::Keep, true},
    {LayerKind::Embedding, "Embedding", "embedding", kEmbeddingKeys, MaskRule::Make, true},
    {LayerKind::Masking, "Masking", "masking", kMaskingKeys, MaskRule::Make, true},
    {LayerKind::Bidirectional, "Bidirectional", "bidirectional", kBidirectionalKeys, MaskRule::Keep, false},
    {LayerKind::Dropout, "Dropout", "dropout", kDropoutKeys, MaskRule::Keep, false},
    {LayerKind::Dense, "Dense", "dense", kDenseKeys, MaskRule::Keep, false},
    {LayerKind::TimeDistributed, "TimeDistributed", "time_distributed", kWrapperKeys, MaskRule::Keep, false},
    {LayerKind::Conv1D, "Conv1D", "conv1d", kConv1DKeys, MaskRule::Drop, false},
    {LayerKind::MaxPooling1D, "MaxPooling1D", "max_pooling1d", kPoolingKeys, MaskRule::Drop, false},
    {LayerKind::AveragePooling1D, "AveragePooling1D", "average_pooling1d", kPoolingKeys, MaskRule::Drop, false},
    {LayerKind::GlobalAveragePooling1D, "GlobalAveragePooling1D", "global_average_pooling1d", kGlobalPoolingKeys,
     MaskRule::Consume, false},
    {LayerKind::GlobalMaxPooling1D, "GlobalMaxPooling1D", "global_max_pooling1d", kGlobalPoolingKeys, MaskRule::Drop,
     false},
    {LayerKind::LayerNormalization, "LayerNormalization", "layer_normalization", kLayerNormKeys, MaskRule::Keep, false},
    {LayerKind::Flatten, "Flatten", "flatten", kNameKeys, MaskRule::Drop, false},
    {LayerKind::SpatialDropout1D, "SpatialDropout1D", "spatial_dropout1d", kDropoutKeys, MaskRule::Keep, false},
    {LayerKind::Activation, "Activation", "activation", kActivationKeys, MaskRule::Keep, false},
};

}  // namespace

std::span<const LayerTraits> layer_table() { return kLayers; }

const LayerTraits* find_layer(LayerKind k) {
  const auto* it = std::find_if(std::begin(kLayers), std::end(kLayers), [&](const LayerTraits& t) { return t.kind == k; });
  return it == std::end(kLayers) ? nullptr : it;
}

bool ends_mask(LayerKind k) {
  const LayerTraits* t = find_layer(k);
  return t && (t->mask == MaskRule::Consume || t->mask == MaskRule::Drop);
}

Window layer_window(const LayerSpec& l, int64_t T) {
  const bool conv = l.kind == LayerKind::Conv1D;
  const int64_t size = conv ? l.kernel_size : l.pool_size, dilation = conv ? l.dilation_rate : 1;
  const Window w = window_1d(T, size, l.strides, dilation, l.padding);
  if (w.out < 1)
    throw DataError(fmt::format("layer '{}' ({}): the batch has {} steps, fewer than its window spans ({}); use "
                                "padding: same, a smaller window or longer sequences",
                                l.name, layer_kind_name(l.kind), T, (size - 1) * dilation + 1));
  return w;
}

Window window_1d(int64_t steps, int64_t size, int64_t strides, int64_t dilation, Padding padding) {
  const int64_t span = (size - 1) * dilation + 1;
  if (steps < 0) return {-1, padding == Padding::Causal ? span - 1 : 0};
  if (padding == Padding::Valid) return {steps >= span ? (steps - span) / strides + 1 : 0, 0};
  const int64_t out = (steps + strides - 1) / strides;
  if (padding == Padding::Causal) return {out, span - 1};
  const int64_t total = std::max<int64_t>((out - 1) * strides + span - steps, 0);
  return {out, total / 2};
}

}  // namespace rnntrain
