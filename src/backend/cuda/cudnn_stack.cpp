// One planner CudnnStack as one cuDNN RNN: numLayers recurrent layers of one cell, uni- or
// bidirectional, the Dropout between them as cuDNN's inter-layer dropout, padded time-major IO with
// per-sequence lengths for masks (as PyTorch calls cuDNN). Precision (plan.precision): fp32 is
// CUDNN_FMA_MATH (strict), tf32 DEFAULT_MATH, fp16/bf16 half data with FP32 math on tensor cores.
// Algorithm (plan.algo): STANDARD, or PERSIST_STATIC / PERSIST_DYNAMIC with STANDARD for batches with
// padded sequences (which persistent kernels do not support); the descriptors share one weight layout.
// plan.algo: wavefront replaces the three cuDNN calls with rnntrain's own kernels (wavefront.h), whose
// weights are laid out as Keras lays them out; stacks they cannot run use STANDARD.
// The stack's FP32 master weights are a range of the ParamStore laid out element for element like
// cuDNN's weight space (layout/weight_layout.cpp maps the Keras weights into it); in half precision
// each forward casts them into a half weight space and backward adds the half gradients back.
// Around the cuDNN calls: batch-major <-> time-major conversion (and the cast) where needed (half
// precision, persist_static; FP32 standard runs on batch-major arrays directly), the first layer's
// input dropout, the last layer's merge mode or last-step output, padded-step fixes. The cuDNN
// workspace and the backward conversion buffers are scratch shared by all stacks (Gpu::scratch).
#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/kernels.h"
#include "backend/cuda/layout/weight_layout.h"
#include "backend/cuda/stage.h"
#include "backend/cuda/wavefront.h"
#include "core/error.h"
#include "core/log.h"

namespace rnntrain::cuda {

namespace {

const LayerSpec& cell_of(const LayerSpec& l) { return l.kind == LayerKind::Bidirectional ? *l.inner : l; }

class CudnnStackStage final : public DeviceStage {
 public:
  CudnnStackStage(const StageEnv& env, const std::vector<const LayerSpec*>& layers, int64_t input,
                  const std::vector<size_t>& first_params, const GpuStagePlan& how);
  void reserve(ParamStore& store) override;
  void place(ParamStore& store) override;
  DevTensor forward(const DevTensor& x, MaskState& mask, const RunInfo& run) override;
  DevTensor backward(const DevTensor& dy, bool need_dx) override;

 private:
  bool set_lengths(MaskState& mask, int64_t B, int64_t T);
  void set_descriptors(int64_t B, int64_t T);
  void set_rnn(RnnDesc& d, cudnnRNNAlgo_t algo, cudnnRNNMode_t mode);
  std::vector<std::vector<CudnnSlot>> slots(cudnnRNNDescriptor_t d, const void* base);
  // [B, T, F] fp32 -> [T, B, F] in the stack's data type, into buf (x itself when direct_); and back.
  const void* to_cudnn(const float* x, void* buf, int64_t F);
  void from_cudnn(const void* c, float* out, int64_t F);
  const void* weights();  // cuDNN's weight space for this forward
  DevTensor finish_dx(void* dxc);

  Gpu& gpu_;
  ParamStore& store_;
  std::vector<const LayerSpec*> rnn_;  // the recurrent layers, in order
  std::vector<size_t> first_;
  LayerSpec cell_;                     // the first layer's cell (all share kind, units, activation)
  std::string name_;                   // "lstm_1..lstm_3", for messages
  bool bidir_ = false, last_seq_ = true;
  // Masked batches run at full length (StageEnv::full_length): cuDNN sees every sequence as T steps,
  // the true lengths come from the device mask, and the masks are applied around the calls. A
  // unidirectional stack computes each valid step from earlier ones only, so the padded steps change
  // no valid output, and with zero gradient there they add nothing to any gradient.
  bool full_ = false;
  bool gathered_ = false;  // this forward took the last valid steps from y (full_, masked, !last_seq_)
  MergeMode merge_ = MergeMode::Concat;
  int64_t L_ = 0, D_ = 1, I_ = 0, H_ = 0;
  double between_dropout_ = 0.0, input_dropout_ = 0.0;
  bool half_ = false, persist_ = false, dynamic_ = false;
  int64_t built_for_ = -1;  // the batch size persist_dynamic's kernels were built for
  std::unique_ptr<WavefrontRnn> own_;  // plan.algo: wavefront, when it can run this stack
  bool direct_ = true;  // cuDNN reads and writes the batch-major FP32 arrays themselves (FP32 standard)
  int etype_ = k::kF32;  // the cuDNN side's element type
  cudnnDataType_t dtype_ = CUDNN_DATA_FLOAT;
  size_t esize_ = 4;
  cudnnMathType_t math_ = CUDNN_FMA_MATH;
  RnnDesc std_desc_, persist_desc_;  // STANDARD; PERSIST_STATIC or _DYNAMIC when plan.algo asks for it
  cudnnRNNDescriptor_t desc_ = nullptr;  // the one this step uses (forward and backward)
  DropoutDesc drop_desc_;
  DeviceBuffer<uint8_t> drop_states_{"cuDNN dropout states"};
  size_t w_bytes_ = 0;
  int64_t w_off_ = 0, w_elems_ = 0;
  DeviceBuffer<uint8_t> wh_{"half weight space"}, dwh_{"half weight gradients"};
  // per call
  RnnDataDesc x_desc_, y_desc_;
  TensorDesc h_desc_;
  float pad_fill_ = 0.0f;
  int64_t B_ = 0, T_ = 0;
  bool training_ = false, padded_ = false, empty_ = false, in_drop_ = false;
  std::vector<int32_t> lens_, cudnn_lens_;  // true lengths; cuDNN's (0 -> 1: it refuses empty sequences)
  DeviceBuffer<int32_t> lens_dev_{"sequence lengths"}, cudnn_lens_dev_{"cuDNN sequence lengths"};
  // full_: cuDNN's lengths (all T) for every T up to the longest yet, full_B_ apiece (segment T holds
  // T), written when the batch grows only, so that the captured graph of every batch shape stays
  // valid when the shapes change from step to step (train.bucketing) and no shape allocates its own.
  DeviceBuffer<int32_t> full_lens_{"cuDNN sequence lengths"};
  int64_t full_B_ = 0, full_T_ = 0;
  const int32_t* cudnn_lens_at_ = nullptr;  // what the cuDNN calls read: cudnn_lens_dev_ or full_lens_'s
  const float* x_in_ = nullptr;
  const void* xc_in_ = nullptr;  // what cuDNN read as x (time-major, the stack's type)
  const float* cat_ = nullptr;  // the last layer's [B, T, D*H] output before the merge (y, or a fixed copy)
  DevTensor x_;
  DeviceBuffer<float> in_mask_{"input dropout mask"}, x_drop_{"stack input"};
  DeviceBuffer<float> y_{"stack output (all directions)"}, hy_{"cuDNN final states"}, out_{"stack output"};
  DeviceBuffer<float> fixed_{"stack output"};
  const void* yc_used_ = nullptr;  // cuDNN's y of the last forward
  DeviceBuffer<float> dy_{"cuDNN output gradient"}, dy2_{"cuDNN output gradient"}, dhy_{"cuDNN state gradient"};
  DeviceBuffer<float> dx_{"stack input gradient"};
  // cuDNN-side arrays (time-major, the stack's type)
  DeviceBuffer<uint8_t> xc_{"cuDNN input"}, yc_{"cuDNN output"}, hyc_{"cuDNN final states"};
  DeviceBuffer<uint8_t> dhyc_{"cuDNN state gradient"};
  DeviceBuffer<uint8_t> reserve_{"cuDNN reserve space"};
  size_t work_bytes_ = 0, reserve_bytes_ = 0;
  int64_t desc_T_ = -1;  // the T the data descriptors were set for (with lens_)
  std::pair<cudnnRNNDescriptor_t, cudnnForwardMode_t> sizes_for_{};  // what work/reserve_bytes_ are for
};

CudnnStackStage::CudnnStackStage(const StageEnv& env, const std::vector<const LayerSpec*>& layers, int64_t input,
                                 const std::vector<size_t>& first_params, const GpuStagePlan& how)
    : gpu_(env.gpu), store_(env.store), first_(first_params) {
  for (const LayerSpec* l : layers) {
    if (l->kind == LayerKind::Dropout) {
      between_dropout_ = l->rate;  // the planner merges only equal rates
      continue;
    }
    rnn_.push_back(l);
  }
  const LayerSpec& first = *rnn_.front();
  const LayerSpec& last = *rnn_.back();
  cell_ = cell_of(first);
  name_ = rnn_.size() == 1 ? first.name : first.name + ".." + last.name;
  bidir_ = first.kind == LayerKind::Bidirectional;
  last_seq_ = cell_of(last).return_sequences;
  merge_ = bidir_ ? last.merge_mode : MergeMode::Concat;
  input_dropout_ = cell_.dropout;
  if (bidir_ && input_dropout_ > 0)
    throw RuntimeError("internal: a Bidirectional layer with input dropout cannot start a cuDNN stack");
  L_ = static_cast<int64_t>(rnn_.size()), D_ = bidir_ ? 2 : 1, I_ = input, H_ = cell_.units;
  full_ = env.full_length && !bidir_;

  cudnnRNNMode_t mode = CUDNN_LSTM;
  if (cell_.kind == LayerKind::GRU) mode = CUDNN_GRU;
  if (cell_.kind == LayerKind::SimpleRNN) mode = cell_.activation == Activation::Relu ? CUDNN_RNN_RELU : CUDNN_RNN_TANH;

  half_ = env.precision == Precision::Fp16 || env.precision == Precision::Bf16;
  if (half_) {
    const bool bf16 = env.precision == Precision::Bf16;
    etype_ = bf16 ? k::kBF16 : k::kF16, dtype_ = bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF, esize_ = 2;
  }
  if (env.precision == Precision::Tf32) math_ = CUDNN_DEFAULT_MATH;
  if (half_) math_ = CUDNN_TENSOR_OP_MATH;
  persist_ = env.algo == RnnAlgo::PersistStatic || env.algo == RnnAlgo::PersistDynamic;
  dynamic_ = env.algo == RnnAlgo::PersistDynamic;
  direct_ = !half_ && !persist_;
  if (how.own_kernels) {  // the planner's decision (plan/gpu_plan.cpp)
    const WavefrontShape ws{cell_.kind, L_, D_, I_, H_, env.precision == Precision::Bf16, cell_.reset_after};
    own_ = std::make_unique<WavefrontRnn>(gpu_, ws);
    w_elems_ = own_->weight_elems(), w_bytes_ = static_cast<size_t>(w_elems_) * esize_;
    wh_.ensure(static_cast<int64_t>(w_bytes_));
    log_debug("cudnn stack {}: {} x {}{}({}), input {}, {}, wavefront kernels, {} weights", name_, L_,
              layer_kind_name(cell_.kind), bidir_ ? " bidirectional " : " ", H_, I_, precision_name(env.precision),
              w_elems_);
    return;
  }
  if (cell_.kind == LayerKind::GRU && !cell_.reset_after)
    throw RuntimeError(fmt::format("internal: layers {} (GRU, reset_after: false) in a stack the own kernels do not run: {}",
                                   name_, how.why_not_own));
  if (env.algo == RnnAlgo::Wavefront) log_info("layers {} run on cuDNN's standard algorithm: {}", name_, how.why_not_own);

  cudnnHandle_t h = gpu_.cudnn();
  if (between_dropout_ > 0.0) {
    size_t bytes = 0;
    CUDNN_CHECK(cudnnDropoutGetStatesSize(h, &bytes));
    CUDNN_CHECK(cudnnSetDropoutDescriptor(drop_desc_.get(), h, static_cast<float>(between_dropout_),
                                          drop_states_.ensure(static_cast<int64_t>(bytes)), bytes, env.seed));
  } else {
    CUDNN_CHECK(cudnnSetDropoutDescriptor(drop_desc_.get(), h, 0.0f, nullptr, 0, 0));
  }
  set_rnn(std_desc_, CUDNN_RNN_ALGO_STANDARD, mode);
  CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(h, std_desc_.get(), &w_bytes_));
  if (persist_) {
    set_rnn(persist_desc_, dynamic_ ? CUDNN_RNN_ALGO_PERSIST_DYNAMIC : CUDNN_RNN_ALGO_PERSIST_STATIC, mode);
    size_t bytes = 0;
    CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(h, persist_desc_.get(), &bytes));
    if (bytes != w_bytes_)
      throw RuntimeError(fmt::format("cuDNN's {} weight space for layers {} differs from standard's ({} vs {} bytes); "
                                     "set plan.algo: standard and report it",
                                     rnn_algo_name(env.algo), name_, bytes, w_bytes_));
  }
  w_elems_ = static_cast<int64_t>(w_bytes_ / esize_);
  if (half_) wh_.ensure(static_cast<int64_t>(w_bytes_)), dwh_.ensure(static_cast<int64_t>(w_bytes_));
  log_debug("cudnn stack {}: {} x {}{}({}), input {}, dropout {}, {} {}, weight space {} elements", name_, L_,
            layer_kind_name(cell_.kind), bidir_ ? " bidirectional " : " ", H_, I_, between_dropout_,
            precision_name(env.precision), rnn_algo_name(env.algo), w_elems_);
}

void CudnnStackStage::set_rnn(RnnDesc& d, cudnnRNNAlgo_t algo, cudnnRNNMode_t mode) {
  CUDNN_CHECK(cudnnSetRNNDescriptor_v8(d.get(), algo, mode, CUDNN_RNN_DOUBLE_BIAS,
                                       bidir_ ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, dtype_,
                                       CUDNN_DATA_FLOAT, math_, static_cast<int32_t>(I_), static_cast<int32_t>(H_),
                                       static_cast<int32_t>(H_), static_cast<int32_t>(L_), drop_desc_.get(),
                                       CUDNN_RNN_PADDED_IO_ENABLED));
}

// Where cuDNN puts each matrix and bias of each pseudo-layer, in elements from `base`.
std::vector<std::vector<CudnnSlot>> CudnnStackStage::slots(cudnnRNNDescriptor_t d, const void* base) {
  const int ids = 2 * cell_traits(cell_.kind).gates;
  std::vector<std::vector<CudnnSlot>> out(L_ * D_, std::vector<CudnnSlot>(ids));
  TensorDesc m_desc, b_desc;
  const char* b0 = static_cast<const char*>(base);
  const int64_t es = static_cast<int64_t>(esize_);
  for (int64_t pl = 0; pl < L_ * D_; ++pl) {
    for (int id = 0; id < ids; ++id) {
      void* m_addr = nullptr;
      void* b_addr = nullptr;
      CUDNN_CHECK(cudnnGetRNNWeightParams(gpu_.cudnn(), d, static_cast<int32_t>(pl), w_bytes_, base, id, m_desc.get(),
                                          &m_addr, b_desc.get(), &b_addr));
      CudnnSlot& s = out[pl][id];
      cudnnDataType_t dt;
      int nb = 0, dims[3] = {0, 0, 0}, strides[3] = {0, 0, 0};
      if (m_addr) {
        CUDNN_CHECK(cudnnGetTensorNdDescriptor(m_desc.get(), 3, &dt, &nb, dims, strides));
        s.m_off = (static_cast<const char*>(m_addr) - b0) / es, s.rows = dims[1], s.cols = dims[2];
      }
      if (b_addr) {
        CUDNN_CHECK(cudnnGetTensorNdDescriptor(b_desc.get(), 3, &dt, &nb, dims, strides));
        s.b_off = (static_cast<const char*>(b_addr) - b0) / es, s.b_rows = dims[1];
      }
    }
  }
  return out;
}

void CudnnStackStage::reserve(ParamStore& store) { w_off_ = store.reserve(w_elems_); }

void CudnnStackStage::place(ParamStore& store) {
  if (own_) {  // Keras' layouts, one after another
    for (int64_t l = 0; l < L_; ++l) {
      for (int64_t d = 0; d < D_; ++d) {
        const WavefrontRnn::Offsets& o = own_->offsets(l, d);
        const size_t base = first_[l] + static_cast<size_t>(d) * 3;
        store.place(base, w_off_ + o.kernel);
        store.place(base + 1, w_off_ + o.recurrent);
        store.place(base + 2, w_off_ + o.bias);
      }
    }
    return;
  }
  CudnnLayout layout;
  layout.cell = cell_.kind, layout.layers = L_, layout.dirs = D_, layout.input = I_, layout.hidden = H_;
  layout.size = w_elems_;
  const void* ws = half_ ? static_cast<const void*>(wh_.get()) : static_cast<const void*>(store.w() + w_off_);
  layout.slots = slots(std_desc_.get(), ws);
  if (persist_ && !(slots(persist_desc_.get(), ws) == layout.slots))
    throw RuntimeError(fmt::format("cuDNN lays out persistent-kernel weights for layers {} unlike standard's; set "
                                   "plan.algo: standard and report it",
                                   name_));
  for (int64_t l = 0; l < L_; ++l) {
    for (int64_t d = 0; d < D_; ++d) {
      KerasPlacement p = place_keras(layout, l, d);
      for (auto* v : {&p.kernel, &p.recurrent, &p.bias})
        for (int64_t& i : *v) i += w_off_;
      const size_t base = first_[l] + static_cast<size_t>(d) * 3;
      store.place(base, std::move(p.kernel));
      store.place(base + 1, std::move(p.recurrent));
      store.place(base + 2, std::move(p.bias));
    }
  }
}

// Returns whether the lengths (or B, T) differ from the previous call's: only then are the
// descriptors set again and cuDNN asked for its temp space sizes (both cost host time per call).
bool CudnnStackStage::set_lengths(MaskState& mask, int64_t B, int64_t T) {
  if (full_) {  // lengths on the device, from the mask (the upload checked it has no gaps)
    padded_ = empty_ = mask.present();
    if (mask.present()) k::lengths_from_mask(mask.dev, B, T, lens_dev_.ensure(B), gpu_.stream());
    if (T == desc_T_ && static_cast<int64_t>(cudnn_lens_.size()) == B) return false;
    lens_.assign(B, static_cast<int32_t>(T));
    cudnn_lens_ = lens_;
    desc_T_ = T;
    if (B > full_B_ || T > full_T_) {
      full_B_ = std::max(full_B_, B), full_T_ = std::max(full_T_, T);
      std::vector<int32_t> all(static_cast<size_t>((full_T_ + 1) * full_B_));
      for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(static_cast<int64_t>(i) / full_B_);
      copy_to_device(full_lens_.ensure(static_cast<int64_t>(all.size())), all.data(), sizeof(int32_t) * all.size(),
                     gpu_.stream());
      note_device_state_changed();  // captured graphs read these lengths
    }
    cudnn_lens_at_ = full_lens_.get() + T * full_B_;
    return true;
  }
  // lens_ changes only once these are valid
  std::vector<int32_t> lens = mask.present() ? mask_lengths(mask.on_host(gpu_), B, T,
                                                            fmt::format("the mask reaching layer '{}'", rnn_.front()->name))
                                             : std::vector<int32_t>(B, static_cast<int32_t>(T));
  if (lens == lens_ && T == desc_T_) return false;
  lens_ = std::move(lens);
  desc_T_ = T;
  cudnn_lens_ = lens_;
  padded_ = empty_ = false;
  for (int32_t& l : cudnn_lens_) {
    padded_ = padded_ || l < T;
    empty_ = empty_ || l == 0;
    if (l == 0) l = 1;  // computed on step 0, then zeroed (fix_padded_outputs, zero_empty_rows)
  }
  copy_to_device(lens_dev_.ensure(B), lens_.data(), sizeof(int32_t) * B, gpu_.stream());
  copy_to_device(cudnn_lens_dev_.ensure(B), cudnn_lens_.data(), sizeof(int32_t) * B, gpu_.stream());
  cudnn_lens_at_ = cudnn_lens_dev_.get();
  note_device_state_changed();  // captured graphs read these lengths
  return true;
}

void CudnnStackStage::set_descriptors(int64_t B, int64_t T) {
  const int b = static_cast<int>(B), t = static_cast<int>(T);
  const cudnnRNNDataLayout_t layout =
      direct_ ? CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED : CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED;
  CUDNN_CHECK(cudnnSetRNNDataDescriptor(x_desc_.get(), dtype_, layout, t, b, static_cast<int>(I_), cudnn_lens_.data(),
                                        &pad_fill_));
  CUDNN_CHECK(cudnnSetRNNDataDescriptor(y_desc_.get(), dtype_, layout, t, b, static_cast<int>(D_ * H_),
                                        cudnn_lens_.data(), &pad_fill_));
  const int dims[3] = {static_cast<int>(L_ * D_), b, static_cast<int>(H_)};
  const int strides[3] = {static_cast<int>(B * H_), static_cast<int>(H_), 1};
  CUDNN_CHECK(cudnnSetTensorNdDescriptor(h_desc_.get(), dtype_, 3, dims, strides));
}

const void* CudnnStackStage::to_cudnn(const float* x, void* buf, int64_t F) {
  if (direct_) return x;
  k::swap01_from_f32(x, buf, etype_, B_, T_, F, gpu_.stream());
  return buf;
}

void CudnnStackStage::from_cudnn(const void* c, float* out, int64_t F) {
  k::swap01_to_f32(c, etype_, out, T_, B_, F, gpu_.stream());
}

const void* CudnnStackStage::weights() {
  if (!half_) return store_.w() + w_off_;
  k::to_half(store_.w() + w_off_, wh_.get(), w_elems_, etype_ == k::kBF16, gpu_.stream());
  return wh_.get();
}

// x: [B, T, I] -> [B, T, D*H] (concat), [B, T, H] (other merges), or the last valid step [B, D*H] / [B, H].
DevTensor CudnnStackStage::forward(const DevTensor& x, MaskState& mask, const RunInfo& run) {
  const int64_t B = x.dim(0), T = x.dim(1), DH = D_ * H_;
  cudaStream_t st = gpu_.stream();
  B_ = B, T_ = T, x_ = x, training_ = run.training;
  if (set_lengths(mask, B, T)) set_descriptors(B, T), sizes_for_ = {};
  desc_ = persist_ && !padded_ ? persist_desc_.get() : std_desc_.get();

  x_in_ = x.ptr;
  in_drop_ = run.training && input_dropout_ > 0.0 && input_dropout_ < 1.0;
  if (in_drop_) {  // one mask per sequence, as Keras
    k::dropout_mask(in_mask_.ensure(B * I_), B * I_, static_cast<float>(input_dropout_), run.seed, run.next_site(),
                    st);
    k::mul_per_sequence(x.ptr, in_mask_.get(), x_drop_.ensure(B * T * I_), B, T, I_, st);
    x_in_ = x_drop_.get();
  }
  xc_in_ = to_cudnn(x_in_, direct_ ? nullptr : xc_.ensure(B * T * I_ * static_cast<int64_t>(esize_)), I_);

  const int64_t es = static_cast<int64_t>(esize_);
  void* yc = direct_ ? static_cast<void*>(y_.ensure(B * T * DH)) : static_cast<void*>(yc_.ensure(B * T * DH * es));
  yc_used_ = yc;
  // The final states are read only for return_sequences: false; cuDNN is not asked for them otherwise
  // (nor at full length with a mask: the last valid steps are taken from y).
  gathered_ = full_ && padded_ && !last_seq_;
  float* hy = last_seq_ || gathered_ ? nullptr : hy_.ensure(L_ * D_ * B * H_);
  void* hyc = half_ && hy ? static_cast<void*>(hyc_.ensure(L_ * D_ * B * H_ * es)) : hy;
  if (own_) {
    void* hy_last = hyc ? static_cast<char*>(hyc) + (L_ - 1) * D_ * B * H_ * es : nullptr;
    own_->forward(B, T, cudnn_lens_at_, xc_in_, yc, hy_last, weights(), store_.w() + w_off_, run.training);
  } else {
    if (dynamic_ && desc_ == persist_desc_.get() && built_for_ != B) {
      CUDNN_CHECK(cudnnBuildRNNDynamic(gpu_.cudnn(), desc_, static_cast<int>(B)));
      built_for_ = B, sizes_for_ = {};
      note_device_state_changed();  // never inside a capture: each batch size runs warm again first
    }
    const cudnnForwardMode_t fmode = run.training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE;
    if (sizes_for_ != std::pair{desc_, fmode}) {
      CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(gpu_.cudnn(), desc_, fmode, x_desc_.get(), &work_bytes_, &reserve_bytes_));
      if (!run.training) reserve_bytes_ = 0;
      sizes_for_ = {desc_, fmode};
    }
    void* work = gpu_.scratch(0, work_bytes_);
    reserve_.ensure(static_cast<int64_t>(reserve_bytes_));
    CUDNN_CHECK(cudnnRNNForward(gpu_.cudnn(), desc_, fmode, cudnn_lens_at_, x_desc_.get(), xc_in_, y_desc_.get(),
                                yc, h_desc_.get(), nullptr, hyc, h_desc_.get(), nullptr, nullptr, w_bytes_, weights(),
                                work_bytes_, work, reserve_bytes_, reserve_bytes_ ? reserve_.get() : nullptr));
  }
  if (half_ && hy) k::from_half(hyc, hy, L_ * D_ * B * H_, etype_ == k::kBF16, false, st);

  if (last_seq_) {
    float* y = static_cast<float*>(yc);
    if (!direct_) from_cudnn(yc, y = y_.ensure(B * T * DH), DH);
    if (padded_) {
      // Keras: a plain layer repeats its last state over masked steps; Bidirectional outputs zeros there.
      // (Direct: cuDNN's y stays untouched for backward; the output is a fixed copy.)
      if (direct_) {
        y = fixed_.ensure(B * T * DH);
        CUDA_CHECK(cudaMemcpyAsync(y, yc, sizeof(float) * B * T * DH, cudaMemcpyDeviceToDevice, st));
      }
      k::fix_padded_outputs(y, B, T, DH, lens_dev_.get(), !bidir_, st);
    }
    cat_ = y;
    if (!bidir_ || merge_ == MergeMode::Concat) return DevTensor{const_cast<float*>(cat_), {B, T, DH}};
    float* out = out_.ensure(B * T * H_);
    k::merge_dirs(merge_, B * T, H_, cat_, DH, cat_ + H_, DH, out, st);
    return DevTensor{out, {B, T, H_}};
  }
  mask.clear();  // return_sequences: false ends the mask
  if (gathered_) {  // unidirectional (full_): the output at each sequence's last valid step
    float* y = static_cast<float*>(yc);
    if (!direct_) from_cudnn(yc, y = y_.ensure(B * T * DH), DH);
    float* out = out_.ensure(B * H_);
    k::last_step_gather(y, B, T, H_, lens_dev_.get(), out, st);
    return DevTensor{out, {B, H_}};
  }
  // The last layer's final states: forward direction at each sequence's last valid step, backward at step 0.
  const float* a = hy + (L_ - 1) * D_ * B * H_;
  const int64_t width = (bidir_ && merge_ == MergeMode::Concat) ? 2 * H_ : H_;
  float* out = out_.ensure(B * width);
  if (bidir_) k::merge_dirs(merge_, B, H_, a, H_, a + B * H_, H_, out, st);
  else CUDA_CHECK(cudaMemcpyAsync(out, a, sizeof(float) * B * H_, cudaMemcpyDeviceToDevice, st));
  if (empty_) k::zero_empty_rows(out, B, width, lens_dev_.get(), st);
  return DevTensor{out, {B, width}};
}

DevTensor CudnnStackStage::backward(const DevTensor& dy, bool need_dx) {
  if (!training_) throw RuntimeError("internal: cuDNN stack backward after an inference forward");
  const int64_t B = B_, T = T_, DH = D_ * H_, es = static_cast<int64_t>(esize_);
  cudaStream_t st = gpu_.stream();
  void* dyc = nullptr;  // cuDNN's dy: [T, B, D*H]
  void* dhyc = nullptr;
  if (gathered_) {  // dy reaches y at each sequence's last valid step only
    float* d = dy_.ensure(B * T * DH);
    k::last_step_scatter(dy.ptr, B, T, H_, lens_dev_.get(), d, st);
    dyc = const_cast<void*>(to_cudnn(d, direct_ ? nullptr : gpu_.scratch(1, B * T * DH * esize_), DH));
  } else if (last_seq_) {
    const float* src = dy.ptr;
    if (bidir_ && merge_ != MergeMode::Concat) {
      float* u = dy2_.ensure(B * T * DH);
      k::unmerge_dirs(merge_, B * T, H_, dy.ptr, cat_, DH, cat_ + H_, DH, u, DH, u + H_, DH, st);
      src = u;
    }
    if (padded_) {
      float* d = dy_.ensure(B * T * DH);
      k::prepare_padded_grads(src, d, B, T, DH, lens_dev_.get(), !bidir_, st);
      src = d;
    }
    dyc = const_cast<void*>(to_cudnn(src, direct_ ? nullptr : gpu_.scratch(1, B * T * DH * esize_), DH));
  } else {
    dyc = gpu_.scratch(1, B * T * DH * esize_);
    CUDA_CHECK(cudaMemsetAsync(dyc, 0, B * T * DH * es, st));  // zero bits are 0 in every type
    float* dhy = dhy_.ensure(L_ * D_ * B * H_);
    CUDA_CHECK(cudaMemsetAsync(dhy, 0, sizeof(float) * L_ * D_ * B * H_, st));
    float* a = dhy + (L_ - 1) * D_ * B * H_;
    const float* ha = hy_.get() + (L_ - 1) * D_ * B * H_;
    if (bidir_) {
      k::unmerge_dirs(merge_, B, H_, dy.ptr, ha, H_, ha + B * H_, H_, a, H_, a + B * H_, H_, st);
      if (empty_) k::zero_empty_rows(a + B * H_, B, H_, lens_dev_.get(), st);
    } else {
      CUDA_CHECK(cudaMemcpyAsync(a, dy.ptr, sizeof(float) * B * H_, cudaMemcpyDeviceToDevice, st));
    }
    if (empty_) k::zero_empty_rows(a, B, H_, lens_dev_.get(), st);
    dhyc = dhy;
    if (half_) {
      dhyc = dhyc_.ensure(L_ * D_ * B * H_ * es);
      k::to_half(dhy, dhyc, L_ * D_ * B * H_, etype_ == k::kBF16, st);
    }
  }

  void* dxc = direct_ ? static_cast<void*>(dx_.ensure(B * T * I_)) : gpu_.scratch(2, B * T * I_ * esize_);
  const void* w = half_ ? static_cast<const void*>(wh_.get()) : static_cast<const void*>(store_.w() + w_off_);
  if (own_) {
    const void* dhy_last = dhyc ? static_cast<const char*>(dhyc) + (L_ - 1) * D_ * B * H_ * es : nullptr;
    own_->backward(dyc, dhy_last, need_dx ? dxc : nullptr, w, store_.g() + w_off_);
    return need_dx ? finish_dx(dxc) : DevTensor{};
  }
  void* work = gpu_.scratch(0, work_bytes_);
  CUDNN_CHECK(cudnnRNNBackwardData_v8(gpu_.cudnn(), desc_, cudnn_lens_at_, y_desc_.get(), yc_used_, dyc,
                                      x_desc_.get(), dxc, h_desc_.get(), nullptr, dhyc, nullptr, h_desc_.get(), nullptr,
                                      nullptr, nullptr, w_bytes_, w, work_bytes_, work, reserve_bytes_,
                                      reserve_.get()));
  // cuDNN only accumulates weight gradients: into the FP32 gradient buffer, which the engine zeroes
  // before each step, or into a zeroed half buffer that is then added to it.
  void* dw = store_.g() + w_off_;
  if (half_) {
    dw = dwh_.get();
    CUDA_CHECK(cudaMemsetAsync(dw, 0, w_bytes_, st));
  }
  CUDNN_CHECK(cudnnRNNBackwardWeights_v8(gpu_.cudnn(), desc_, CUDNN_WGRAD_MODE_ADD, cudnn_lens_at_,
                                         x_desc_.get(), xc_in_, h_desc_.get(), nullptr, y_desc_.get(), yc_used_,
                                         w_bytes_, dw, work_bytes_, work, reserve_bytes_, reserve_.get()));
  if (half_) k::from_half(dw, store_.g() + w_off_, w_elems_, etype_ == k::kBF16, true, st);
  return need_dx ? finish_dx(dxc) : DevTensor{};
}

// cuDNN's (or the wavefront kernels') input gradient as the stage's: batch-major FP32, zero at
// padded steps, through the input dropout.
DevTensor CudnnStackStage::finish_dx(void* dxc) {
  const int64_t B = B_, T = T_;
  cudaStream_t st = gpu_.stream();
  float* dx = static_cast<float*>(dxc);
  if (!direct_) from_cudnn(dxc, dx = dx_.ensure(B * T * I_), I_);
  if (padded_) k::zero_padded(dx, B, T, I_, lens_dev_.get(), st);  // Keras: masked steps get no gradient
  if (in_drop_) k::mul_per_sequence(dx, in_mask_.get(), dx, B, T, I_, st);
  return DevTensor{dx, x_.shape};
}

}  // namespace

std::unique_ptr<DeviceStage> make_cudnn_stack_stage(const StageEnv& env, const std::vector<const LayerSpec*>& layers,
                                              int64_t input, const std::vector<size_t>& first_params,
                                              const GpuStagePlan& how) {
  return std::make_unique<CudnnStackStage>(env, layers, input, first_params, how);
}

}  // namespace rnntrain::cuda
