// A Bidirectional LSTM/GRU layer run as two unidirectional cuDNN stages at full length
// (StageEnv::full_length), so that a masked step is the same GPU work for every mask of a batch shape
// and can be captured as a CUDA graph. cuDNN's own bidirectional call cannot be: its backward
// direction starts at each sequence's end, which it reads from host lengths. Here the forward
// direction reads x; the backward direction reads x reversed within each sequence's length, so it too
// starts at step 0, and its output is reversed back, 0 at padded steps (what Keras' backward layer
// gives there). The directions' outputs are merged as the layer says, or (return_sequences: false)
// each taken at the sequence's last valid step. Backward mirrors this.
#include <algorithm>

#include <fmt/format.h>

#include "backend/cuda/api_errors.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/stage.h"
#include "core/error.h"

namespace rnntrain::cuda {

namespace {

class SplitBidirectionalStage final : public DeviceStage {
 public:
  SplitBidirectionalStage(const StageEnv& env, const LayerSpec& l, int64_t input, size_t first_param,
                          const GpuStagePlan& how)
      : gpu_(env.gpu), merge_(l.merge_mode), sequences_(l.inner->return_sequences), I_(input), H_(l.inner->units) {
    cell_ = *l.inner;
    cell_.return_sequences = true;  // each direction's whole output: merged here, or its last step taken
    cell_.go_backwards = false;
    // A Bidirectional layer's weights: the forward direction's kernel, recurrent kernel and bias, then
    // the backward direction's (as CudnnStackStage places them).
    fwd_ = make_cudnn_stack_stage(env, {&cell_}, input, {first_param}, how);
    bwd_ = make_cudnn_stack_stage(env, {&cell_}, input, {first_param + 3}, how);
  }

  void reserve(ParamStore& store) override { fwd_->reserve(store), bwd_->reserve(store); }
  void place(ParamStore& store) override { fwd_->place(store), bwd_->place(store); }

  DevTensor forward(const DevTensor& x, MaskState& mask, const RunInfo& run) override {
    const int64_t B = x.dim(0), T = x.dim(1), H = H_;
    cudaStream_t st = gpu_.stream();
    B_ = B, T_ = T;
    int32_t* lens = lens_.ensure(B);
    if (mask.present()) k::lengths_from_mask(mask.dev, B, T, lens, st);
    else k::fill_i32(lens, B, static_cast<int32_t>(T), st);
    MaskState mf = mask, mb = mask;  // each direction may end its copy
    yf_ = fwd_->forward(x, mf, run).ptr;
    float* xr = xr_.ensure(B * T * I_);
    k::reverse_in_lengths(x.ptr, xr, B, T, I_, lens, false, false, st);
    yr_ = bwd_->forward(DevTensor{xr, {B, T, I_}}, mb, run).ptr;
    const int64_t W = merge_ == MergeMode::Concat ? 2 * H : H;
    if (sequences_) {
      float* yb = yb_.ensure(B * T * H);
      k::reverse_in_lengths(yr_, yb, B, T, H, lens, true, false, st);
      float* out = out_.ensure(B * T * W);
      k::merge_dirs(merge_, B * T, H, yf_, H, yb, H, out, st);
      // Keras' Bidirectional outputs 0 at padded steps; the forward stage repeats its last state there.
      k::zero_padded(out, B, T, W, lens, st);
      return DevTensor{out, {B, T, W}};  // the mask goes on
    }
    float* last = last_.ensure(2 * B * H);  // each direction at the sequence's last valid step
    k::last_step_gather(yf_, B, T, H, lens, last, st);
    k::last_step_gather(yr_, B, T, H, lens, last + B * H, st);
    float* out = out_.ensure(B * W);
    k::merge_dirs(merge_, B, H, last, H, last + B * H, H, out, st);
    mask.clear();
    return DevTensor{out, {B, W}};
  }

  DevTensor backward(const DevTensor& dy, bool need_dx) override {
    const int64_t B = B_, T = T_, H = H_;
    cudaStream_t st = gpu_.stream();
    const int32_t* lens = lens_.get();
    float* dyf = dyf_.ensure(B * T * H);
    float* dyr = dyr_.ensure(B * T * H);
    float* tmp = dtmp_.ensure(std::max(B * T, 2 * B) * H);
    if (sequences_) {
      k::unmerge_dirs(merge_, B * T, H, dy.ptr, yf_, H, yb_.get(), H, dyf, H, tmp, H, st);
      // The output is a constant 0 at padded steps: no gradient reaches either direction there.
      k::zero_padded(dyf, B, T, H, lens, st);
      k::reverse_in_lengths(tmp, dyr, B, T, H, lens, true, false, st);
    } else {
      const float* last = last_.get();
      k::unmerge_dirs(merge_, B, H, dy.ptr, last, H, last + B * H, H, tmp, H, tmp + B * H, H, st);
      k::last_step_scatter(tmp, B, T, H, lens, dyf, st);
      k::last_step_scatter(tmp + B * H, B, T, H, lens, dyr, st);
    }
    const DevTensor dxf = fwd_->backward(DevTensor{dyf, {B, T, H}}, need_dx);
    const DevTensor dxr = bwd_->backward(DevTensor{dyr, {B, T, H}}, need_dx);
    if (!need_dx) return DevTensor{};
    float* dx = dx_.ensure(B * T * I_);
    CUDA_CHECK(cudaMemcpyAsync(dx, dxf.ptr, sizeof(float) * B * T * I_, cudaMemcpyDeviceToDevice, st));
    k::reverse_in_lengths(dxr.ptr, dx, B, T, I_, lens, true, true, st);
    return DevTensor{dx, {B, T, I_}};
  }

 private:
  Gpu& gpu_;
  LayerSpec cell_;  // the inner cell, returning sequences, forward in time: both stages point at it
  MergeMode merge_;
  bool sequences_;
  int64_t I_, H_, B_ = 0, T_ = 0;
  std::unique_ptr<DeviceStage> fwd_, bwd_;
  const float* yf_ = nullptr;  // the directions' outputs (views into the stages' buffers)
  const float* yr_ = nullptr;
  DeviceBuffer<int32_t> lens_{"sequence lengths"};
  DeviceBuffer<float> xr_{"reversed input"}, yb_{"backward direction output"}, out_{"bidirectional output"};
  DeviceBuffer<float> last_{"last valid steps"}, dyf_{"output gradient"}, dyr_{"output gradient"};
  DeviceBuffer<float> dtmp_{"output gradient"}, dx_{"bidirectional input gradient"};
};

}  // namespace

std::unique_ptr<DeviceStage> make_split_bidirectional_stage(const StageEnv& env, const LayerSpec& l, int64_t input,
                                                            size_t first_param, const GpuStagePlan& how) {
  if (l.kind != LayerKind::Bidirectional || !l.inner)
    throw RuntimeError(fmt::format("internal: layer '{}' is not a Bidirectional layer", l.name));
  return std::make_unique<SplitBidirectionalStage>(env, l, input, first_param, how);
}

}  // namespace rnntrain::cuda
