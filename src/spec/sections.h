// The config language's sections, each typed from its YAML subtree, and the enum spellings they share
// with emit.cpp (internal to spec/). parse.cpp drives them; nothing outside spec/ includes this.
#pragma once
#include <span>
#include <string>

#include "spec/reader.h"

namespace rnntrain::spec {

// Applies one "key.path=value" override to the tree and records which subtree it wrote.
void apply_override(YAML::Node& root, const std::string& text, Context& ctx);

ModelSpec read_model(const Value& v);  // names the layers; no shape checks (infer_shapes does them)
DataSpec read_data(const Value& v);
TrainSpec read_train(const Value& v);

std::span<const Choice<LayerKind>> layer_kinds();
std::span<const Choice<Padding>> paddings();
std::span<const Choice<Activation>> activations();
std::span<const Choice<InitKind>> init_kinds();
std::span<const Choice<ConstraintKind>> constraint_kinds();
std::span<const Choice<MergeMode>> merge_modes();
std::span<const Choice<DataFormat>> data_formats();
std::span<const Choice<Scaling>> scalings();
std::span<const Choice<LossKind>> loss_kinds();
std::span<const Choice<MetricKind>> metric_kinds();
std::span<const Choice<AucCurve>> auc_curves();
std::span<const Choice<AucSummation>> auc_summations();
std::span<const Choice<FAverage>> f_averages();
std::span<const Choice<R2Aggregation>> r2_aggregations();
std::span<const Choice<OptimizerKind>> optimizer_kinds();
std::span<const Choice<ScheduleKind>> schedule_kinds();
std::span<const Choice<MonitorMode>> monitor_modes();
std::span<const Choice<FuseMode>> fuse_modes();
std::span<const Choice<Precision>> precisions();
std::span<const Choice<RnnAlgo>> rnn_algos();
std::span<const Choice<CpuRnn>> cpu_rnns();
std::span<const Choice<Device>> devices();

// Keras-style default layer name prefix: "lstm", "simple_rnn", "time_distributed", "input_layer".

}  // namespace rnntrain::spec
