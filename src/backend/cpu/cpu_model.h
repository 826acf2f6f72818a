// The CPU backend's model: forward and backward of every layer of the config language in float32
// over BLAS, in Keras' exact equations. This is the specification the CUDA backend is checked
// against. It reads and accumulates into a Params it does not own.
#pragma once
#include <memory>
#include <vector>

#include "core/batch.h"
#include "model/params.h"
#include "plan/plan.h"
#include "spec/shapes.h"

namespace rnntrain {

namespace cpu {
class Profile;
}

// What forward() keeps for backward(): per-layer activations, masks and dropout masks.
struct ForwardContext {
  struct Impl;
  std::unique_ptr<Impl> impl;
  ForwardContext();
  ~ForwardContext();
  ForwardContext(ForwardContext&&) noexcept;
  ForwardContext& operator=(ForwardContext&&) noexcept;
};

class CpuModel {
 public:
  // plan: where given, plan->cpu picks who runs the recurrent layers (recurrent.h: cpu_path, rnn_math):
  // oneDNN's stacks where they can (onednn_stack.h), the own engine, or the reference ops, in bf16 where
  // plan->precision is bf16 and the path can; null: every layer on the reference ops.
  CpuModel(const ModelSpec& spec, Params& params, const PlanSpec* plan = nullptr);
  // The same from a resolved model (its plan made for plan->fuse).
  CpuModel(ResolvedModel model, Params& params, const PlanSpec* plan);
  ~CpuModel();

  // x: [B, T, F] or token ids [B, T]; lengths: optional (size B), combined with any Masking or
  // Embedding(mask_zero) mask. training enables dropout, drawing from rng.
  // Returns the model output ([B, K] or [B, T, K]). When the output has a time axis and a mask
  // reaches it, *out_mask (if given) receives it as [B, T] of 0/1; otherwise it is left empty.
  // ctx (if given) receives what backward() needs. *activity (if given) receives the activity
  // regularizers' penalty: per regularized layer, l1 * sum|y| + l2 * sum y^2 of its output y over
  // every position (masked ones included, as Keras), divided by the batch size.
  Tensor forward(const Tensor& x, const std::vector<int32_t>* lengths, bool training, Rng& rng,
                 ForwardContext* ctx = nullptr, Tensor* out_mask = nullptr, double* activity = nullptr);

  // dy: gradient of the loss w.r.t. the output of forward(). Accumulates (+=) every parameter's
  // gradient, the activity penalty's included. Returns the gradient w.r.t. x for feature inputs
  // (empty for token ids).
  Tensor backward(ForwardContext& ctx, const Tensor& dy);

  const ResolvedModel& model() const { return model_; }
  // Where forward (with a ctx) and backward mark each layer's time (RNNTRAIN_PROFILE), or null.
  void set_profile(cpu::Profile* p) { profile_ = p; }
  const std::vector<LayerShape>& shapes() const { return model_.shapes; }

 private:
  struct Layer;
  void use_onednn(bool bf16);  // bf16: plan.precision bf16 (onednn_stack.h says which stacks take it)
  const ResolvedModel model_;
  Params& params_;
  std::vector<std::unique_ptr<Layer>> layers_;
  cpu::Profile* profile_ = nullptr;
  std::string phase_name(size_t i, const char* pass) const;  // layer i's op ("a .. c" for a stack)
};

}  // namespace rnntrain
