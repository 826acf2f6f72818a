// The per-tensor optimizers on the device (per_tensor_optimizers.h).
#include "backend/cuda/per_tensor_optimizers.h"

#include <algorithm>

#include <fmt/format.h>

#include "backend/cuda/blas.h"
#include "backend/cuda/api_errors.h"
#include "core/error.h"

namespace rnntrain::cuda {

TensorOptimizer::TensorOptimizer(Gpu& gpu, ParamStore& store, const OptimizerSpec& spec, Params& params,
                                 const std::vector<std::string>& paths)
    : gpu_(gpu), spec_(spec) {
  const bool muon = spec.kind == OptimizerKind::Muon;
  if (!muon && spec.kind != OptimizerKind::Adafactor)
    throw RuntimeError(fmt::format("optimizer {} has no device update (an internal error: please report it)",
                                   optimizer_name(spec.kind)));
  std::vector<int64_t> pos;
  std::vector<int32_t> var;
  const std::vector<Param*> ps = params.all();
  int64_t square = 0, matrix = 0;  // Muon: the largest min(R, C)^2 and R * C
  for (size_t i = 0; i < ps.size(); ++i) {
    const Shape& shape = ps[i]->value.shape;
    k::TensorVar t;
    t.off = n_, t.n = ps[i]->value.numel();
    t.cols = shape.size() >= 2 ? shape.back() : t.n;
    t.rows = shape.size() >= 2 && t.cols > 0 ? t.n / t.cols : 1;
    if (muon) {
      t.adamw = Muon::adamw(shape, i < paths.size() ? paths[i] : ps[i]->name, spec);
      t.wd = static_cast<float>(t.adamw ? spec.adam_weight_decay : spec.weight_decay);
      if (!t.adamw) square = std::max(square, std::min(t.rows, t.cols) * std::min(t.rows, t.cols)),
                    matrix = std::max(matrix, t.n);
    } else {
      t.factored = shape.size() >= 2;
      t.wd = static_cast<float>(spec.weight_decay);
      t.r_off = nr_, t.c_off = nc_;
      nr_ += t.factored ? t.rows : 1, nc_ += t.factored ? t.cols : 1;
    }
    for (int64_t e = 0; e < t.n; ++e) pos.push_back(store.position(i, e)), var.push_back(static_cast<int32_t>(i));
    n_ += t.n;
    vars_.push_back(t);
  }
  const auto nv = static_cast<int64_t>(vars_.size());
  for (auto* b : {&g_, &p_, &s0_, &s1_}) b->ensure(std::max<int64_t>(n_, 1));
  r_.ensure(std::max<int64_t>(nr_, 1)), c_.ensure(std::max<int64_t>(nc_, 1));
  a_.ensure(std::max<int64_t>(square, 1)), b_.ensure(std::max<int64_t>(square, 1)), t_.ensure(std::max<int64_t>(matrix, 1));
  sums_.ensure(std::max<int64_t>(3 * nv, 1));
  for (size_t i = 0; i < vars_.size(); ++i) {
    const k::TensorVar& t = vars_[i];
    const Shape& shape = ps[i]->value.shape;
    auto add = [&](const char* name, Shape s, float* dev) {
      slots_.push_back({fmt::format("{}/{}", name, i), Tensor(std::move(s)), dev});
    };
    if (muon) {
      add("momentum", shape, s0_.get() + t.off);
      if (t.adamw) add("velocity", shape, s1_.get() + t.off);
    } else {
      add("r", Adafactor::slot_shape(0, shape), r_.get() + t.r_off);
      add("c", Adafactor::slot_shape(1, shape), c_.get() + t.c_off);
      add("velocity", shape, s0_.get() + t.off);
    }
  }
  copy_to_device(pos_.ensure(std::max<int64_t>(n_, 1)), pos.data(), sizeof(int64_t) * pos.size(), gpu.stream());
  copy_to_device(var_.ensure(std::max<int64_t>(n_, 1)), var.data(), sizeof(int32_t) * var.size(), gpu.stream());
  copy_to_device(dvars_.ensure(std::max<int64_t>(nv, 1)), vars_.data(), sizeof(k::TensorVar) * vars_.size(),
                 gpu.stream());
  gpu.sync();  // the host vectors are locals
  upload();
}

// Keras' zeropower_via_newtonschulz5 on x = g_[t.off ...] in place, over the smaller side (as
// model/per_tensor_optimizers.cpp): A = X X^T, X = a X + B X (rows <= cols), or A = X^T X, X = a X + X B.
void TensorOptimizer::newton_schulz(const k::TensorVar& t) {
  const int64_t R = t.rows, C = t.cols, s = std::min(R, C);
  float* x = g_.get() + t.off;
  const float a = static_cast<float>(spec_.muon_a), b = static_cast<float>(spec_.muon_b), c = static_cast<float>(spec_.muon_c);
  cudaStream_t st = gpu_.stream();
  for (int step = 0; step < static_cast<int>(spec_.ns_steps); ++step) {
    if (R <= C) gemm(gpu_, false, true, s, s, C, 1.0f, x, C, x, C, 0.0f, a_.get(), s);
    else gemm(gpu_, true, false, s, s, R, 1.0f, x, C, x, C, 0.0f, a_.get(), s);
    CUDA_CHECK(cudaMemcpyAsync(b_.get(), a_.get(), sizeof(float) * s * s, cudaMemcpyDeviceToDevice, st));
    gemm(gpu_, false, false, s, s, s, c, a_.get(), s, a_.get(), s, b, b_.get(), s);  // B = b A + c A A
    CUDA_CHECK(cudaMemcpyAsync(t_.get(), x, sizeof(float) * t.n, cudaMemcpyDeviceToDevice, st));
    if (R <= C) gemm(gpu_, false, false, R, C, R, 1.0f, b_.get(), R, x, C, a, t_.get(), C);
    else gemm(gpu_, false, false, R, C, C, 1.0f, x, C, b_.get(), C, a, t_.get(), C);
    CUDA_CHECK(cudaMemcpyAsync(x, t_.get(), sizeof(float) * t.n, cudaMemcpyDeviceToDevice, st));
  }
}

void TensorOptimizer::apply(const k::OptArgs& a) {
  cudaStream_t st = gpu_.stream();
  const auto nv = static_cast<int64_t>(vars_.size());
  k::tensor_gather(a, dvars_.get(), pos_.get(), var_.get(), n_, g_.get(), p_.get(), st);
  if (spec_.kind == OptimizerKind::Muon) {
    k::muon_moments(dvars_.get(), var_.get(), pos_.get(), n_, g_.get(), p_.get(), s0_.get(), s1_.get(),
                    static_cast<float>(1.0 - spec_.beta_1), static_cast<float>(1.0 - spec_.beta_2),
                    static_cast<float>(spec_.epsilon), static_cast<float>(spec_.momentum), spec_.nesterov, a.sched,
                    a.skip, a.p, a.nonfinite, st);
    k::tensor_squares(g_.get(), dvars_.get(), nv, sums_.get(), a.skip, st);
    k::muon_normalize(dvars_.get(), var_.get(), n_, g_.get(), sums_.get(), a.skip, st);
    for (const k::TensorVar& t : vars_)
      if (!t.adamw) newton_schulz(t);
    k::muon_apply(dvars_.get(), var_.get(), pos_.get(), n_, p_.get(), g_.get(), static_cast<float>(spec_.rms_rate),
                  a.sched, a.skip, a.p, a.nonfinite, st);
    return;
  }
  const auto eps1 = static_cast<float>(spec_.epsilon_1);
  k::tensor_squares(p_.get(), dvars_.get(), nv, sums_.get(), a.skip, st);
  for (int64_t v = 0; v < nv; ++v)
    k::adafactor_moments(vars_[v], static_cast<int>(v), nv, g_.get(), r_.get(), c_.get(), sums_.get(), eps1, a.sched,
                         a.skip, st);
  k::adafactor_velocity(dvars_.get(), var_.get(), n_, nv, g_.get(), r_.get(), c_.get(), s0_.get(), sums_.get(), eps1,
                        a.sched, a.skip, st);
  k::tensor_squares(g_.get(), dvars_.get(), nv, sums_.get() + nv, a.skip, st);
  k::adafactor_apply(dvars_.get(), var_.get(), pos_.get(), n_, nv, p_.get(), g_.get(), sums_.get(),
                     static_cast<float>(spec_.epsilon_2), static_cast<float>(spec_.clip_threshold), a.sched, a.skip,
                     a.p, a.nonfinite, st);
}

std::vector<std::pair<std::string, Tensor*>> TensorOptimizer::slots() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (Slot& s : slots_) out.emplace_back(s.name, &s.host);
  return out;
}

void TensorOptimizer::download() {
  for (Slot& s : slots_) copy_to_host(s.host.ptr(), s.dev, sizeof(float) * s.host.numel(), gpu_.stream());
  gpu_.sync();
}

void TensorOptimizer::upload() {
  for (Slot& s : slots_) copy_to_device(s.dev, s.host.ptr(), sizeof(float) * s.host.numel(), gpu_.stream());
  gpu_.sync();
}

}  // namespace rnntrain::cuda
