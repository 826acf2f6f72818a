// CudaModel: builds device stages from the plan, lays out and uploads the parameters, uploads each
// batch and its length mask, and runs the stages forward and backward. Not the layer math (the
// stage files) and not the loss or optimizer (session.cpp).
#include "backend/cuda/cuda_model.h"

#include <algorithm>

#include <fmt/format.h>

#include "backend/cuda/kernels.h"
#include "backend/cuda/wavefront.h"
#include "core/error.h"
#include "spec/shapes.h"

namespace rnntrain::cuda {

namespace {

const LayerSpec* rnn_cell(const LayerSpec& l) {
  if (is_recurrent(l.kind)) return &l;
  if (l.kind == LayerKind::Bidirectional) return l.inner.get();
  return nullptr;
}

}  // namespace

CudaModel::CudaModel(Gpu& gpu, const ResolvedModel& model, const PlanSpec& plan, Params& params, uint64_t seed)
    : gpu_(gpu), spec_(model.spec), store_(gpu) {
  const ModelSpec& spec = model.spec;
  if (plan.precision == Precision::Auto || plan.algo == RnnAlgo::Auto)
    throw RuntimeError("internal: plan.precision or plan.algo is still auto when the CUDA model is built");
  check_params_fit(params, model.shapes);
  const std::vector<LayerShape>& shapes = model.shapes;
  const std::vector<size_t>& first = model.first_weight;  // Params::all() index of each layer's first weight
  token_input_ = spec.layers[0].shape.size() == 1;

  // How masks run, which bidirectional stacks split and which stacks run on the own kernels: the
  // planner's decisions (plan/gpu_plan.h), built as they are.
  const GpuPlan how = plan_gpu(model, plan.precision, plan.algo, own_kernel_check());
  const rnntrain::Plan& model_plan = model.plan;
  if (how.mask_first) mask_first_ = &spec.layers[*how.mask_first];
  cudnn_ = how.cudnn;
  full_length_ = how.full_length;
  stacks_see_masks_ = how.stacks_see_masks;
  capturable_ = how.capturable;

  StageEnv env{gpu, store_, seed, plan.precision, plan.algo};
  env.full_length = full_length_;
  gpu.set_tf32(plan.precision != Precision::Fp32);  // cuBLAS (Dense, Embedding) follows the stacks
  for (size_t s = 0; s < model_plan.stages.size(); ++s) {
    const rnntrain::Stage& st = model_plan.stages[s];
    const GpuStagePlan& stage_how = how.stages[s];
    const size_t i = st.layers[0];
    const LayerSpec& l = spec.layers[i];
    const int64_t input = shapes[i].in.empty() ? 0 : shapes[i].in.back();
    std::string names;
    for (size_t j : st.layers) names += (names.empty() ? "" : ", ") + spec.layers[j].name;
    switch (st.kind) {
      case StageKind::CudnnStack: {
        if (stage_how.split_bidirectional) {  // layer by layer, each direction on its own
          for (size_t j : st.layers) {
            const LayerSpec& lj = spec.layers[j];
            const int64_t in_j = shapes[j].in.back();
            if (lj.kind == LayerKind::Bidirectional)
              stages_.push_back(make_split_bidirectional_stage(env, lj, in_j, first[j], stage_how));
            else if (lj.kind == LayerKind::Dropout) stages_.push_back(make_dropout_stage(env, lj));
            else stages_.push_back(make_cudnn_stack_stage(env, {&lj}, in_j, {first[j]}, stage_how));
            names_.push_back("cudnn " + lj.name);
            activity_.push_back(activity_regularizer_of(lj));
          }
          summary_ += fmt::format("  cudnn stack ({} layers, each direction on its own for masked steps): {}\n",
                                  st.rnn_layers, names);
          continue;
        }
        std::vector<const LayerSpec*> layers;
        std::vector<size_t> firsts;
        for (size_t j : st.layers) {
          layers.push_back(&spec.layers[j]);
          if (rnn_cell(spec.layers[j])) firsts.push_back(first[j]);
        }
        stages_.push_back(make_cudnn_stack_stage(env, layers, input, firsts, stage_how));
        names_.push_back("cudnn " + names);
        activity_.push_back(activity_regularizer_of(spec.layers[st.layers.back()]));
        summary_ += fmt::format("  cudnn stack ({} layers): {}\n", st.rnn_layers, names);
        continue;
      }
      case StageKind::GenericRnn:
        stages_.push_back(make_generic_rnn_stage(env, l, input, first[i]));
        names_.push_back("generic " + names);
        activity_.push_back(activity_regularizer_of(l));
        summary_ += fmt::format("  generic rnn: {} ({})\n", names, st.why_generic);
        continue;
      case StageKind::Layer: break;
    }
    switch (l.kind) {
      case LayerKind::Input: continue;
      case LayerKind::Embedding: stages_.push_back(make_embedding_stage(env, l, first[i])); break;
      case LayerKind::Masking: stages_.push_back(make_masking_stage(env, l)); break;
      case LayerKind::Dropout: stages_.push_back(make_dropout_stage(env, l)); break;
      case LayerKind::Dense: stages_.push_back(make_dense_stage(env, l, l, input, first[i])); break;
      case LayerKind::TimeDistributed:  // wrapping a Dense or a Dropout (infer_shapes checked)
        if (l.inner->kind == LayerKind::Dropout) stages_.push_back(make_dropout_stage(env, *l.inner));
        else stages_.push_back(make_dense_stage(env, l, *l.inner, input, first[i]));
        break;
      default:
        if (is_recurrent(l.kind))
          throw RuntimeError(fmt::format("internal: layer '{}' is recurrent but outside a recurrent stage", l.name));
        stages_.push_back(make_sequence_stage(env, l, input, first[i]));  // Conv1D, poolings, ...
        break;
    }
    names_.push_back(names);
    activity_.push_back(activity_regularizer_of(l));
    summary_ += fmt::format("  layer: {}\n", names);
  }
  for (const LayerSpec& l : spec.layers) {
    const LayerSpec& c = l.inner ? *l.inner : l;
    const bool layer_dropout = c.kind == LayerKind::Dropout || c.kind == LayerKind::SpatialDropout1D;
    if ((layer_dropout && c.rate > 0) || c.dropout > 0 || c.recurrent_dropout > 0) dropout_ = true;
  }
  outs_.resize(stages_.size());
  if (std::any_of(activity_.begin(), activity_.end(), [](const Regularizer& r) { return r.active(); }))
    activity_sum_.ensure(1);
  for (auto& s : stages_) {
    const int64_t first = store_.size();
    s->reserve(store_);
    ranges_.emplace_back(first, store_.size() - first);
  }
  store_.allocate();
  for (auto& s : stages_) s->place(store_);
  store_.finish(params);
}

CudaModel::~CudaModel() = default;

CudaModel::Input CudaModel::upload(const Batch& b) {
  const Tensor& x = b.x;
  check_input_batch(spec_.layers[0], x);
  for (auto& s : stages_) s->check(b);
  const int64_t B = x.dim(0), T = x.dim(1);
  cudaStream_t st = gpu_.stream();
  Input in;
  in.batch = &b;
  in.x = DevTensor{static_cast<float*>(x_up_.put(x.ptr(), sizeof(float) * x.numel())), x.shape};
  MaskState& mask = in.mask;
  if (b.lengths.empty() && !mask_first_) return in;
  auto host = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(B * T), 1);
  std::vector<uint8_t>& m = *host;
  if (!b.lengths.empty()) {
    if (static_cast<int64_t>(b.lengths.size()) != B)
      throw DataError(fmt::format("the batch has {} samples but {} sequence lengths", B, b.lengths.size()));
    for (int64_t i = 0; i < B; ++i) {
      const int32_t len = b.lengths[i];
      if (len < 0 || len > T)
        throw DataError(fmt::format("sample {} of the batch has length {}, outside [0, {}] (the padded timesteps)", i,
                                    len, T));
      for (int64_t t = len; t < T; ++t) m[i * T + t] = 0;
    }
  }
  if (mask_first_) {  // what the first layer's forward would make on the device, from the host batch
    const int64_t F = x.numel() / (B * T);
    for (int64_t k = 0; k < B * T; ++k) {
      bool keep = false;  // Masking: a step is kept when some feature differs from mask_value
      if (mask_first_->mask_zero) keep = x[k] != 0.0f;
      else
        for (int64_t j = 0; j < F && !keep; ++j) keep = x[k * F + j] != static_cast<float>(mask_first_->mask_value);
      m[k] = m[k] && keep;
    }
    mask.includes_first = true;
  }
  if (full_length_ && cudnn_ && stacks_see_masks_)  // the stacks take lengths from the device mask: check it as they would
    mask_lengths(m, B, T, "the mask of the batch");
  copy_to_device(mask_.ensure(B * T), m.data(), m.size(), st);
  mask.dev = mask_.get(), mask.B = B, mask.T = T, mask.host = host;
  return in;
}

void CudaModel::new_seed(Rng& rng) {
  if (!dropout_) return;
  const uint64_t s = rng.next_u64();
  seed_.set(&s);
}

DevTensor CudaModel::forward(const Input& in, bool training) {
  MaskState mask = in.mask;
  Profiler& prof = gpu_.profiler();  // training steps only (eval and predict never end a profiled step)
  if (training) prof.mark("upload (and host gaps)");
  uint64_t sites = 0;
  const RunInfo run{training, static_cast<const uint64_t*>(seed_.dev()), &sites, in.batch};
  DevTensor cur = in.x;
  double* activity = activity_sum_.get();
  if (activity) CUDA_CHECK(cudaMemsetAsync(activity, 0, sizeof(double), gpu_.stream()));
  for (size_t i = 0; i < stages_.size(); ++i) {
    cur = stages_[i]->forward(cur, mask, run);
    outs_[i] = cur;
    if (const Regularizer& r = activity_[i]; r.active())
      k::activity_regularizer(cur.ptr, nullptr, cur.numel(), r.l1, r.l2, 1.0 / cur.dim(0), nullptr, activity,
                              gpu_.stream());
    if (training) prof.mark(names_[i] + " forward");
  }
  out_mask_ = cur.shape.size() == 3 ? mask : MaskState{};
  return cur;
}

DevTensor CudaModel::backward(const DevTensor& dy, bool need_input_grad,
                              const std::function<void(int64_t)>& grads_ready, const float* dy_scale) {
  DevTensor g = dy;
  for (size_t i = stages_.size(); i-- > 0;) {
    const bool need_dx = i > 0 || (need_input_grad && !token_input_);
    if (const Regularizer& r = activity_[i]; r.active())  // g is the next stage's dx (or the loss gradient): ours
      k::activity_regularizer(outs_[i].ptr, g.ptr, g.numel(), r.l1, r.l2, 1.0 / outs_[i].dim(0), dy_scale, nullptr,
                              gpu_.stream());
    g = stages_[i]->backward(g, need_dx);
    gpu_.profiler().mark(names_[i] + " backward");
    if (grads_ready) grads_ready(ranges_[i].first);
    if (!g.ptr) break;
  }
  return g;
}

}  // namespace rnntrain::cuda
