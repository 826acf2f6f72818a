// The device optimizer: slot buffers, the dynamic loss scale, clipping factors from per-variable
// gradient norms (both on the device), and the launch of the update kernel (kernels_train.cu).
#include "backend/cuda/device_optimizer.h"

#include <algorithm>

#include <fmt/format.h>

#include "backend/cuda/kernels.h"
#include "core/error.h"
#include "model/params.h"

namespace rnntrain::cuda {

namespace {
bool is_set(const std::optional<double>& v) { return v.has_value() && *v > 0; }
}  // namespace

DeviceOptimizer::DeviceOptimizer(Gpu& gpu, ParamStore& store, const OptimizerSpec& spec, Params& params,
                                 const std::vector<Regularizer>& regs, const std::vector<Constraint>& constraints,
                                 const std::vector<std::string>& paths)
    : gpu_(gpu), store_(store), spec_(spec), sched_(gpu, sizeof(float) * k::kSchedFloats, "learning rate") {
  check_clipping(spec);
  const SlotKinds kinds = optimizer_slot_kinds(spec);  // the descriptor's slots, as model/optimizer.cpp
  if (with_optimizer(spec.kind, [](auto d) { return PerTensor<decltype(d)>::value; }))
    tensor_ = std::make_unique<TensorOptimizer>(gpu, store, spec, params, paths);
  else
    groups_.resize(kinds.n);
  for (size_t k = 0; k < groups_.size(); ++k) {
    groups_[k].name = kinds.at[k].name;
    for (Param* p : params.all()) groups_[k].host.emplace_back(p->value.shape, kinds.at[k].init);
    groups_[k].dev.ensure(std::max<int64_t>(store.size(), 1));
    if (kinds.at[k].from_value) copy_slots_ |= 1u << k;
  }
  upload();
  if (kinds.trust_ratio) {  // allocated here, not in a captured step
    const auto nv = static_cast<int64_t>(store.variables());
    scratch_.ensure(std::max<int64_t>(store.size(), 1));
    sums_.ensure(std::max<int64_t>(2 * nv, 1));
    factors_.ensure(std::max<int64_t>(nv, 1));
  }
  if (std::any_of(regs.begin(), regs.end(), [](const Regularizer& r) { return r.active(); })) {
    std::vector<float> f;
    for (const Regularizer& r : regs) f.insert(f.end(), {static_cast<float>(r.l1), static_cast<float>(r.l2)});
    copy_to_device(regs_.ensure(static_cast<int64_t>(f.size())), f.data(), sizeof(float) * f.size(), gpu.stream());
    gpu.sync();  // f is a local
  }
  if (is_set(spec.clipnorm) || is_set(spec.global_clipnorm) || regs_.get() || scratch_.get())
    var_ids_ = store.var_ids();  // before any capture
  if (std::any_of(constraints.begin(), constraints.end(), [](const Constraint& c) { return c.active(); })) {
    std::vector<int32_t> slice(static_cast<size_t>(std::max<int64_t>(store.size(), 1)), -1), groups;
    std::vector<ConstraintRule> rules;
    const std::vector<Param*> ps = params.all();
    for (size_t p = 0; p < constraints.size(); ++p) {
      if (!constraints[p].active()) continue;
      const auto first = static_cast<int32_t>(rules.size());
      rules.resize(rules.size() + constraint_groups(constraints[p], ps[p]->value.shape, groups, ps[p]->name),
                   constraint_rule(constraints[p]));
      for (int64_t k = 0; k < ps[p]->value.numel(); ++k) slice[store.position(p, k)] = first + groups[k];
    }
    slices_ = static_cast<int64_t>(rules.size());
    copy_to_device(slice_.ensure(static_cast<int64_t>(slice.size())), slice.data(), sizeof(int32_t) * slice.size(),
                   gpu.stream());
    copy_to_device(rules_.ensure(slices_), rules.data(), sizeof(ConstraintRule) * rules.size(), gpu.stream());
    slice_sums_.ensure(slices_);
    gpu.sync();  // the host vectors are locals
  }
}

void DeviceOptimizer::set_step(double lr, int64_t t) {
  const StepScalars sc = with_optimizer(spec_.kind, [&](auto d) { return decltype(d)::scalars(spec_, lr, t); });
  const float v[k::kSchedFloats] = {sc.lr, sc.k[0], sc.k[1], sc.k[2],
                                    spec_.weight_decay > 0 ? static_cast<float>(lr * spec_.weight_decay) : 0.0f,
                                    t == 1 ? 1.0f : 0.0f};
  sched_.set(v);
}

std::vector<std::pair<std::string, Tensor*>> DeviceOptimizer::slots() {
  if (tensor_) return tensor_->slots();
  std::vector<std::pair<std::string, Tensor*>> out;
  for (Group& g : groups_)
    for (size_t i = 0; i < g.host.size(); ++i) out.emplace_back(fmt::format("{}/{}", g.name, i), &g.host[i]);
  return out;
}

void DeviceOptimizer::download() {
  if (tensor_) tensor_->download();
  for (Group& g : groups_) {
    std::vector<Tensor*> t;
    for (Tensor& h : g.host) t.push_back(&h);
    store_.download_flat(g.dev.get(), t);
  }
}

void DeviceOptimizer::upload() {
  if (tensor_) tensor_->upload();
  for (Group& g : groups_) {
    std::vector<Tensor*> t;
    for (Tensor& h : g.host) t.push_back(&h);
    store_.upload_flat(g.dev.get(), t);
  }
}

void DeviceOptimizer::penalty(double* penalty) {
  if (regs_.get()) k::weight_penalty(store_.w(), nullptr, var_ids_, store_.size(), regs_.get(), penalty, gpu_.stream());
}

void DeviceOptimizer::apply(double* nonfinite, double* penalty) {
  cudaStream_t st = gpu_.stream();
  k::OptArgs a;
  a.p = store_.w(), a.g = store_.g(), a.trained = store_.trained(), a.n = store_.size();
  a.nonfinite = nonfinite;
  for (size_t k = 0; k < groups_.size(); ++k) a.s[k] = groups_[k].dev.get();
  if (scratch_.get()) a.s[groups_.size()] = scratch_.get();
  a.copy_slots = copy_slots_;

  if (scaled_) {
    a.skip = scale_state_.get() + 1;
    k::unscale_check(store_.g(), store_.trained(), store_.size(), scale_.get(), scale_state_.get() + 1, st);
  }
  if (regs_.get()) k::weight_penalty(store_.w(), store_.g(), var_ids_, store_.size(), regs_.get(), penalty, st);
  // Clipping, in Keras' precedence: clipnorm, else global_clipnorm, else clipvalue.
  if (is_set(spec_.clipnorm) || is_set(spec_.global_clipnorm)) {
    const int64_t nv = static_cast<int64_t>(store_.variables());
    double* sums = sums_.ensure(nv);
    CUDA_CHECK(cudaMemsetAsync(sums, 0, sizeof(double) * nv, st));
    k::sum_squares_by_var(store_.g(), var_ids_, store_.size(), sums, st);
    const bool per_var = is_set(spec_.clipnorm);
    k::clip_factors(sums, nv, per_var, per_var ? *spec_.clipnorm : *spec_.global_clipnorm,
                    factors_.ensure(nv), st);
    if (share_) share_(factors_.get(), nv);
    a.clip = k::GradClip::Factors, a.factors = factors_.get(), a.var = var_ids_;
  } else if (is_set(spec_.clipvalue)) {
    a.clip = k::GradClip::Value, a.clipvalue = static_cast<float>(*spec_.clipvalue);
  }
  a.sched = static_cast<const float*>(sched_.dev());
  if (tensor_) tensor_->apply(a);
  else k::optimizer_step(a, spec_, st);
  if (scratch_.get()) {  // Lamb's trust ratio: each variable's |p| and |u|, then p -= r*lr*u
    const int64_t nv = static_cast<int64_t>(store_.variables());
    double* sums = sums_.ensure(2 * nv);
    CUDA_CHECK(cudaMemsetAsync(sums, 0, sizeof(double) * 2 * nv, st));
    k::sum_squares_by_var(store_.w(), var_ids_, store_.size(), sums, st);
    k::sum_squares_by_var(scratch_.get(), var_ids_, store_.size(), sums + nv, st);
    k::trust_ratios(sums, nv, factors_.ensure(nv), st);
    if (share_) share_(factors_.get(), nv);
    k::trust_update(store_.w(), scratch_.get(), var_ids_, store_.size(), factors_.get(), a.sched, a.skip, nonfinite,
                    st);
  }
  if (slices_ > 0) {  // Keras' constraints, on the updated weights
    CUDA_CHECK(cudaMemsetAsync(slice_sums_.get(), 0, sizeof(double) * slices_, st));
    k::sum_squares_by_var(store_.w(), slice_.get(), store_.size(), slice_sums_.get(), st);
    k::constrain(store_.w(), slice_.get(), store_.size(), rules_.get(), slice_sums_.get(), a.skip, st);
  }
  if (scaled_) k::update_scale(scale_.get(), scale_state_.get(), scale_state_.get() + 1, 2000, st);
}

void DeviceOptimizer::enable_loss_scale() {
  const float init = 32768.0f;
  const int state[2] = {0, 0};
  copy_to_device(scale_.ensure(1), &init, sizeof init, gpu_.stream());
  copy_to_device(scale_state_.ensure(2), state, sizeof state, gpu_.stream());
  gpu_.sync();  // the host values above are locals
  scaled_ = true;
}

}  // namespace rnntrain::cuda
