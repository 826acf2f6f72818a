// The enum spellings of the config language (Keras names in snake_case), one table per enum, shared
// by the parser and the emitter. Aliases are accepted on input and never written back.
#include "spec/sections.h"

#include "spec/cells.h"
#include "spec/layers.h"

#include <cctype>
#include <vector>

#include "spec/parse.h"

namespace rnntrain::spec {

namespace {


constexpr Choice<Activation> kActivations[] = {
    {"linear", Activation::Linear},   {"tanh", Activation::Tanh},
    {"sigmoid", Activation::Sigmoid}, {"hard_sigmoid", Activation::HardSigmoid},
    {"hard_sigmoid_keras2", Activation::HardSigmoidKeras2},
    {"relu", Activation::Relu},       {"softmax", Activation::Softmax},
    {"gelu", Activation::Gelu},       {"gelu_approximate", Activation::GeluApproximate},
    {"elu", Activation::Elu},         {"selu", Activation::Selu},
    {"softplus", Activation::Softplus}, {"softsign", Activation::Softsign},
    {"silu", Activation::Silu},       {"swish", Activation::Silu, true},
};

constexpr Choice<ConstraintKind> kConstraintKinds[] = {
    {"max_norm", ConstraintKind::MaxNorm},
    {"non_neg", ConstraintKind::NonNeg},
    {"unit_norm", ConstraintKind::UnitNorm},
    {"min_max_norm", ConstraintKind::MinMaxNorm},
};

constexpr Choice<InitKind> kInitKinds[] = {
    {"zeros", InitKind::Zeros},
    {"ones", InitKind::Ones},
    {"constant", InitKind::Constant},
    {"glorot_uniform", InitKind::GlorotUniform},
    {"glorot_normal", InitKind::GlorotNormal},
    {"orthogonal", InitKind::Orthogonal},
    {"random_uniform", InitKind::RandomUniform},
    {"random_normal", InitKind::RandomNormal},
    {"he_uniform", InitKind::HeUniform},
    {"he_normal", InitKind::HeNormal},
    {"lecun_uniform", InitKind::LecunUniform},
};

constexpr Choice<Padding> kPaddings[] = {{"valid", Padding::Valid}, {"same", Padding::Same}, {"causal", Padding::Causal}};

constexpr Choice<MergeMode> kMergeModes[] = {
    {"concat", MergeMode::Concat}, {"sum", MergeMode::Sum}, {"mul", MergeMode::Mul}, {"ave", MergeMode::Ave}};

constexpr Choice<Scaling> kScalings[] = {
    {"none", Scaling::None}, {"standard", Scaling::Standard}, {"minmax", Scaling::MinMax},
    {"min_max", Scaling::MinMax, true}};

constexpr Choice<AucCurve> kCurves[] = {
    {"ROC", AucCurve::ROC}, {"PR", AucCurve::PR}, {"roc", AucCurve::ROC, true}, {"pr", AucCurve::PR, true}};
constexpr Choice<AucSummation> kSummations[] = {
    {"interpolation", AucSummation::Interpolation}, {"minoring", AucSummation::Minoring},
    {"majoring", AucSummation::Majoring}};
constexpr Choice<FAverage> kAverages[] = {
    {"micro", FAverage::Micro}, {"macro", FAverage::Macro}, {"weighted", FAverage::Weighted}};
constexpr Choice<R2Aggregation> kAggregations[] = {{"uniform_average", R2Aggregation::Uniform},
                                                   {"variance_weighted_average", R2Aggregation::VarianceWeighted}};

constexpr Choice<ScheduleKind> kSchedules[] = {
    {"constant", ScheduleKind::Constant}, {"exponential", ScheduleKind::Exponential},
    {"cosine", ScheduleKind::Cosine},     {"step", ScheduleKind::Step},
    {"reduce_on_plateau", ScheduleKind::ReduceOnPlateau}, {"polynomial", ScheduleKind::Polynomial},
    {"inverse_time", ScheduleKind::InverseTime},          {"piecewise_constant", ScheduleKind::PiecewiseConstant},
    {"cosine_restarts", ScheduleKind::CosineRestarts},
    // Keras' classes (keras.optimizers.schedules, and the callback for reduce_on_plateau)
    {"ExponentialDecay", ScheduleKind::Exponential, true}, {"CosineDecay", ScheduleKind::Cosine, true},
    {"PolynomialDecay", ScheduleKind::Polynomial, true},   {"InverseTimeDecay", ScheduleKind::InverseTime, true},
    {"PiecewiseConstantDecay", ScheduleKind::PiecewiseConstant, true},
    {"CosineDecayRestarts", ScheduleKind::CosineRestarts, true},
    {"ReduceLROnPlateau", ScheduleKind::ReduceOnPlateau, true},
};

constexpr Choice<MonitorMode> kModes[] = {{"auto", MonitorMode::Auto}, {"min", MonitorMode::Min}, {"max", MonitorMode::Max}};
constexpr Choice<FuseMode> kFuse[] = {{"auto", FuseMode::Auto}, {"always", FuseMode::Always}, {"never", FuseMode::Never}};
constexpr Choice<Precision> kPrecisions[] = {{"fp32", Precision::Fp32}, {"tf32", Precision::Tf32},
                                            {"fp16", Precision::Fp16}, {"bf16", Precision::Bf16},
                                            {"auto", Precision::Auto}};
constexpr Choice<RnnAlgo> kAlgos[] = {{"standard", RnnAlgo::Standard},
                                      {"persist_static", RnnAlgo::PersistStatic},
                                      {"persist_dynamic", RnnAlgo::PersistDynamic},
                                      {"wavefront", RnnAlgo::Wavefront},
                                      {"auto", RnnAlgo::Auto}};
constexpr Choice<CpuRnn> kCpuRnns[] = {{"onednn", CpuRnn::Onednn}, {"reference", CpuRnn::Reference}, {"own", CpuRnn::Own}, {"auto", CpuRnn::Auto}};
constexpr Choice<Device> kDevices[] = {{"auto", Device::Auto}, {"cpu", Device::Cpu}, {"cuda", Device::Cuda}};

}  // namespace

// The layers (spec/layers.h) with the cells (spec/cells.h) among them, and Keras' InputLayer.
std::span<const Choice<LayerKind>> layer_kinds() {
  static const std::vector<Choice<LayerKind>> kinds = [] {
    std::vector<Choice<LayerKind>> v;
    for (const LayerTraits& l : layer_table())
      if (l.before_cells) v.push_back({l.keras_class, l.kind});
    for (const CellTraits& c : cells()) v.push_back({c.keras_class, c.kind});
    for (const LayerTraits& l : layer_table())
      if (!l.before_cells) v.push_back({l.keras_class, l.kind});
    v.push_back({"InputLayer", LayerKind::Input, true});
    return v;
  }();
  return kinds;
}
std::span<const Choice<Activation>> activations() { return kActivations; }
std::span<const Choice<InitKind>> init_kinds() { return kInitKinds; }
std::span<const Choice<ConstraintKind>> constraint_kinds() { return kConstraintKinds; }
std::span<const Choice<MergeMode>> merge_modes() { return kMergeModes; }
std::span<const Choice<Padding>> paddings() { return kPaddings; }
std::span<const Choice<DataFormat>> data_formats() {
  static const std::vector<Choice<DataFormat>> formats = [] {
    std::vector<Choice<DataFormat>> v;
    for (const DataFormatInfo& f : kDataFormats) v.push_back({f.name, f.kind});
    for (const DataFormatInfo& f : kDataFormats)
      for (const char* const* a = f.aliases; *a; ++a) v.push_back({*a, f.kind, true});
    return v;
  }();
  return formats;
}
std::span<const Choice<Scaling>> scalings() { return kScalings; }
std::span<const Choice<LossKind>> loss_kinds() {
  static const std::vector<Choice<LossKind>> kinds = [] {
    std::vector<Choice<LossKind>> v;
    for (const LossInfo* l : Losses::infos) v.push_back({l->name, l->kind});
    for (const LossInfo* l : Losses::infos) {  // aliases last: messages list the names first
      if (l->alias) v.push_back({l->alias, l->kind, true});
      v.push_back({l->keras_class, l->kind, true});  // "BinaryCrossentropy"
    }
    v.push_back({"bce", LossKind::BinaryCrossentropy, true});  // Keras' short names (mse, mae, msle are names here)
    return v;
  }();
  return kinds;
}
std::span<const Choice<MetricKind>> metric_kinds() {
  static const std::vector<Choice<MetricKind>> kinds = [] {
    std::vector<Choice<MetricKind>> v;
    for (const MetricInfo& m : kMetricInfos) v.push_back({m.name, m.kind});
    for (const MetricInfo& m : kMetricInfos)  // aliases last: messages list the names first
      for (const char* const* a = m.aliases; *a; ++a) v.push_back({*a, m.kind, true});
    return v;
  }();
  return kinds;
}
std::span<const Choice<AucCurve>> auc_curves() { return kCurves; }
std::span<const Choice<AucSummation>> auc_summations() { return kSummations; }
std::span<const Choice<FAverage>> f_averages() { return kAverages; }
std::span<const Choice<R2Aggregation>> r2_aggregations() { return kAggregations; }
std::span<const Choice<OptimizerKind>> optimizer_kinds() {
  static const std::vector<Choice<OptimizerKind>> kinds = [] {
    std::vector<Choice<OptimizerKind>> v;
    for (const OptimizerInfo* o : Optimizers::infos) v.push_back({o->name, o->kind});
    for (const OptimizerInfo* o : Optimizers::infos) v.push_back({o->keras_class, o->kind, true});  // "Adam"
    return v;
  }();
  return kinds;
}
std::span<const Choice<ScheduleKind>> schedule_kinds() { return kSchedules; }
std::span<const Choice<MonitorMode>> monitor_modes() { return kModes; }
std::span<const Choice<FuseMode>> fuse_modes() { return kFuse; }
std::span<const Choice<Precision>> precisions() { return kPrecisions; }
std::span<const Choice<RnnAlgo>> rnn_algos() { return kAlgos; }
std::span<const Choice<CpuRnn>> cpu_rnns() { return kCpuRnns; }
std::span<const Choice<Device>> devices() { return kDevices; }

}  // namespace rnntrain::spec

namespace rnntrain {

std::optional<MetricSpec> metric_named(const std::string& name) {
  for (const spec::Choice<MetricKind>& c : spec::metric_kinds())
    if (spec::squashed(c.name) == spec::squashed(name)) return MetricSpec{c.value, spec::enum_name(spec::metric_kinds(), c.value)};
  return std::nullopt;
}

std::vector<std::string> metric_names() {
  std::vector<std::string> out;
  for (const spec::Choice<MetricKind>& c : spec::metric_kinds())
    if (!c.alias) out.push_back(c.name);
  return out;
}

}  // namespace rnntrain
