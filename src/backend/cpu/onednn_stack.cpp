// Recurrent stacks on oneDNN's RNN primitives (onednn_stack.h). A stack is cut into segments, each
// one primitive: oneDNN's multi-layer primitives need a layer's input as wide as its output, so the
// first layer (input I) is a segment of its own unless I equals H, and bidirectional layers are one
// primitive each (see the constructor). Activations are batch-major (oneDNN's ntc), as the rest of the CPU
// backend, so nothing is transposed.
#include "backend/cpu/onednn_stack.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "backend/cpu/packed_gemm.h"
#include "backend/cpu/recurrent.h"
#include "spec/sections.h"
#include "core/error.h"
#include "spec/shapes.h"

#ifdef RNNTRAIN_WITH_ONEDNN
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace rnntrain::cpu {

namespace {
const LayerSpec& cell_of(const LayerSpec& l) { return l.kind == LayerKind::Bidirectional ? *l.inner : l; }
}  // namespace

#ifdef RNNTRAIN_WITH_ONEDNN
bool onednn_built() { return true; }
void set_onednn_threads(int n) { omp_set_num_threads(n); }
#else
bool onednn_built() { return false; }
void set_onednn_threads(int) {}
#endif

std::string onednn_ineligible(const LayerSpec& l, int64_t input) {
  if (!onednn_built()) return "this build has no oneDNN (install libdnnl-dev and rebuild)";
  const LayerSpec& c = cell_of(l);
  if (!cell_traits(c.kind).onednn) return fmt::format("{} has no oneDNN path here", layer_kind_name(c.kind));
  if (std::string why = fused_cell_refusal(c, "oneDNN"); !why.empty()) return why;
  if (!c.use_bias) return "use_bias: false";
  if (c.dropout > 0) return fmt::format("input dropout {}", c.dropout);
  if (c.recurrent_dropout > 0) return fmt::format("recurrent_dropout {}", c.recurrent_dropout);
  if (c.go_backwards) return "go_backwards: true";
  // oneDNN 2.6's GRU over a single input feature computes wrong outputs (for 12 units or fewer, and a
  // masked batch can crash it); Onednn.EveryWidthMatchesTheReferencePath sweeps the widths.
  if (c.kind == LayerKind::GRU && input == 1) return "a GRU over one input feature (oneDNN's is wrong there)";
  if (l.kind == LayerKind::Bidirectional && l.merge_mode != MergeMode::Concat && l.merge_mode != MergeMode::Sum)
    return "merge_mode mul or ave (oneDNN concatenates or sums the directions)";
  return "";
}

std::string onednn_bf16_reason(LayerKind cell) {
  if (!onednn_built()) return "this build has no oneDNN";
  if (cell == LayerKind::GRU)
    return "oneDNN 2.6's bf16 GRU is no faster than its FP32 one here (bench/results/cpu_probe)";
#ifdef RNNTRAIN_WITH_ONEDNN
  const int isa = static_cast<int>(dnnl::get_effective_cpu_isa()), bf16 = static_cast<int>(dnnl::cpu_isa::avx512_core_bf16);
  if ((isa & bf16) != bf16) return "this CPU has no AVX512-BF16 (or AMX): oneDNN would emulate bf16, slower than FP32";
#endif
  return "";
}

CpuPlan plan_cpu(const ModelSpec& model, const Plan& plan, bool bf16) {
  CpuPlan out;
  const std::vector<LayerShape> shapes = infer_shapes(model);
  // In bf16, a layer oneDNN would keep in FP32 goes to the own engine's bf16 where the CPU has it:
  // a GRU stack takes 10.3-11.2 ms a step there against 14.7-15.4 on oneDNN (gru_small, 2 threads).
  const bool own_bf16 = bf16 && rnn_math(CpuRnn::Onednn, true) == RnnMath::OwnBf16;
  auto why_not = [&](size_t i) {
    std::string why = onednn_ineligible(model.layers[i], shapes[i].in.back());
    if (why.empty() && own_bf16) why = onednn_bf16_reason(cell_of(model.layers[i]).kind);
    return why;
  };
  for (const Stage& st : plan.stages) {
    if (!is_recurrent(model.layers[st.layers[0]].kind) && model.layers[st.layers[0]].kind != LayerKind::Bidirectional)
      continue;
    size_t i = 0;
    while (i < st.layers.size()) {
      size_t j = i;
      while (j < st.layers.size() && model.layers[st.layers[j]].kind != LayerKind::Dropout &&
             why_not(st.layers[j]).empty())
        ++j;
      if (j > i) out.runs.push_back({st.layers[i], j - i});
      if (j < st.layers.size() && model.layers[st.layers[j]].kind != LayerKind::Dropout)
        out.reference.emplace_back(st.layers[j], why_not(st.layers[j]));
      i = j + 1;
    }
  }
  return out;
}

std::string describe_cpu_plan(const ModelSpec& model, const Plan& plan, CpuRnn mode, bool bf16) {
  const CpuRnn configured = mode;
  mode = cpu_path(mode, bf16);
  std::string out = fmt::format("CPU (plan.cpu: {}{}{}):\n", spec::enum_name(spec::cpu_rnns(), configured),
                                configured != mode ? fmt::format(", here {}", spec::enum_name(spec::cpu_rnns(), mode)) : "",
                                bf16 && mode != CpuRnn::Reference ? ", plan.precision: bf16" : "");
  if (mode == CpuRnn::Reference) return out + "  every layer on the reference ops\n";
  if (mode == CpuRnn::Own) {
    if (std::string why = own_gemm_refusal(false); !why.empty()) return out + "  every layer on the reference ops: " + why + "\n";
    std::string how = "  the recurrent layers on rnntrain's own engine (packed AVX-512 GEMMs, batch rows spread over the "
                      "threads, the reference's cell loops), ";
    if (!bf16) return out + how + "in FP32\n";
    const std::string why = own_gemm_refusal(true);
    if (!why.empty()) return out + how + "in FP32: " + why + "\n";
    return out + how + "in bf16 (FP32 sums and cell state)" + amx_note() + "\n";
  }
  const CpuPlan cp = plan_cpu(model, plan, bf16);
  const std::vector<LayerShape> shapes = infer_shapes(model);
  // Where the layers oneDNN does not run go: the reference ops, or in bf16 the own engine.
  const std::string rest = rnn_math(CpuRnn::Onednn, bf16) == RnnMath::OwnBf16 ? "the own engine in bf16" : "the reference ops";
  // A Masking layer or an Embedding with mask_zero masks every batch from there on, unless a layer
  // before the stack drops the mask (spec/layers.h).
  auto mask_maker = [&](size_t before) -> const LayerSpec* {
    if (!shapes[before].mask_in) return nullptr;
    for (size_t k = before; k-- > 0;)  // the one whose mask reaches it: the last before it
      if (model.layers[k].kind == LayerKind::Masking || model.layers[k].mask_zero) return &model.layers[k];
    return nullptr;
  };
  std::vector<std::pair<size_t, std::string>> lines;  // in layer order
  for (const CpuPlan::Run& r : cp.runs) {
    const std::string what = r.count == 1 ? model.layers[r.first].name
                                          : fmt::format("{}..{}", model.layers[r.first].name,
                                                        model.layers[r.first + r.count - 1].name);
    const LayerSpec* masker = mask_maker(r.first);
    if (masker && model.layers[r.first].kind == LayerKind::Bidirectional)
      lines.emplace_back(r.first, fmt::format("{} on {}: '{}' masks every batch, and masked "
                                              "bidirectional stacks run there", what, rest, masker->name));
    else {
      std::string how = r.count == 1 ? what + " on oneDNN" : fmt::format("{} on oneDNN ({} layers, one stack)", what, r.count);
      if (bf16) {
        const std::string why = onednn_bf16_reason(cell_of(model.layers[r.first]).kind);
        how += why.empty() ? ", in bf16" : ", in FP32: " + why;
      }
      lines.emplace_back(r.first, how);
    }
  }
  for (const auto& [i, why] : cp.reference) lines.emplace_back(i, model.layers[i].name + " on " + rest + ": " + why);
  std::sort(lines.begin(), lines.end());
  for (const auto& l : lines) out += "  " + l.second + "\n";
  if (lines.empty()) out += "  no recurrent layers\n";
  out += "  (masked batches: unidirectional stacks run every step on oneDNN with the mask applied around them; "
         "bidirectional ones, and masks with gaps, on " + rest + ")\n";
  return out;
}

#ifndef RNNTRAIN_WITH_ONEDNN

std::unique_ptr<Op> make_onednn_stack(const ModelSpec&, size_t, size_t, int64_t, Params&, bool) {
  throw RuntimeError("internal: a oneDNN stack in a build without oneDNN");
}

#else

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// Layers [first, first + n) of the stack on one primitive; in, out: the channels it reads and writes.
struct Segment {
  int64_t first = 0, n = 0, in = 0, out = 0;
  dnnl::rnn_direction dir = dnnl::rnn_direction::unidirectional_left2right;
};

// One segment's primitives for a batch shape.
struct Prims {
  dnnl::primitive fwd, bwd;
  memory::desc ws, fwd_wl, fwd_wi, bwd_wl, bwd_wi;  // the weights' formats each primitive chose
};

struct StackSaved : Saved {
  bool reference = false;
  std::vector<std::unique_ptr<Saved>> saved;  // reference path: per layer
  std::vector<Tensor> acts;                   // reference path: each layer's output but the last
  std::vector<memory> out, ws;                // oneDNN: each segment's dst_layer (the last: scratch) and workspace
  std::vector<memory> wl, wi, bias;           // oneDNN: each segment's weights in Keras' layouts, for backward
  memory hy, cy;                              // the last segment's final states (return_sequences: false)
  int64_t B = 0, T = 0;       // T: the steps the primitives ran (a masked batch: its longest sequence)
  int64_t T_in = 0;           // the batch's steps
  std::vector<int32_t> lens;  // a masked batch on oneDNN: each sequence's length (else empty)
  Tensor x;                   // the input the primitives read, when trimmed to T steps
  memory xb;                  // bf16 stacks: that input in bf16
};

// The lengths of a right-padded [B, T] mask; empty when a sample has a used step after a masked one.
std::vector<int32_t> right_padded_lengths(const Mask& m, int64_t B, int64_t T) {
  std::vector<int32_t> lens(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    int64_t len = 0;
    while (len < T && m[b * T + len]) ++len;
    for (int64_t t = len; t < T; ++t)
      if (m[b * T + t]) return {};
    lens[b] = static_cast<int32_t>(len);
  }
  return lens;
}

class OnednnStack : public Op {
 public:
  OnednnStack(const ModelSpec& m, size_t first, size_t count, int64_t input, Params& params, bool bf16)
      : params_(params), first_(first) {
    std::vector<const LayerSpec*> layers_;
    for (size_t i = first; i < first + count; ++i) {
      layers_.push_back(&m.layers[i]);
      const RnnMath math = rnn_math(CpuRnn::Onednn, bf16);  // masked batches it cannot run
      ref_.push_back(m.layers[i].kind == LayerKind::Bidirectional ? make_bidirectional(m.layers[i], math)
                                                                  : make_recurrent(m.layers[i], math));
    }
    const LayerSpec& c = cell_of(*layers_[0]);
    gru_ = c.kind == LayerKind::GRU;
    bf16_ = bf16 && onednn_bf16_reason(c.kind).empty();
    G_ = cell_traits(c.kind).gates;
    H_ = c.units;
    D_ = layers_[0]->kind == LayerKind::Bidirectional ? 2 : 1;
    sequences_ = cell_of(*layers_.back()).return_sequences;
    const bool sum = D_ == 2 && layers_.back()->merge_mode == MergeMode::Sum;
    const int64_t L = static_cast<int64_t>(count);
    // Segments: a unidirectional layer joins the previous one's when both read what they write
    // (oneDNN's multi-layer primitives need that). Bidirectional layers are one primitive each: in
    // oneDNN's multi-layer bidirectional RNN each direction runs its own stack and they meet only at
    // the end, while in Keras every layer reads both directions of the layer below.
    const auto bi = [&](bool last_sum) {
      return D_ == 1 ? dnnl::rnn_direction::unidirectional_left2right
                     : last_sum ? dnnl::rnn_direction::bidirectional_sum : dnnl::rnn_direction::bidirectional_concat;
    };
    for (int64_t l = 0; l < L; ++l) {
      const bool last_sum = sum && l == L - 1;
      const int64_t out = last_sum || D_ == 1 ? H_ : 2 * H_;
      const int64_t in = l == 0 ? input : D_ * H_;
      const dnnl::rnn_direction dir = bi(last_sum);
      if (D_ == 1 && !segs_.empty() && in == out && segs_.back().in == segs_.back().out) {
        ++segs_.back().n;
      } else {
        segs_.push_back({l, 1, in, out, dir});
      }
    }
  }

  Tensor forward(LayerParams&, const Tensor& x, Mask& mask, bool training, Rng& rng,
                 std::unique_ptr<Saved>& saved) override {
    auto& s = saved_as<StackSaved>(saved);
    const int64_t B = x.dim(0), T_in = x.dim(1);
    // A masked batch with right-padded sequences runs a unidirectional stack over the batch's longest
    // sequence, the mask applied around the primitives: a step's output depends on earlier steps
    // only, so the padded steps change no used output, and with no gradient there they add none.
    // Bidirectional stacks (whose backward direction starts at each sequence's end) and masks with
    // gaps run on the reference ops.
    s.lens = mask.empty() ? std::vector<int32_t>() : right_padded_lengths(mask, B, T_in);
    s.reference = !mask.empty() && (D_ == 2 || s.lens.empty());
    if (s.reference) return reference_forward(x, mask, training, rng, s);
    const int64_t T = s.lens.empty() ? T_in : std::max<int64_t>(1, *std::max_element(s.lens.begin(), s.lens.end()));
    s.B = B, s.T = T, s.T_in = T_in, s.x = Tensor();
    const int64_t I = segs_[0].in;
    if (T < T_in) {  // the steps no sequence uses are left out
      s.x = Tensor({B, T, I});
      for (int64_t b = 0; b < B; ++b) std::copy_n(x.ptr() + b * T_in * I, T * I, s.x.ptr() + b * T * I);
    }
    std::vector<Prims>& prims = primitives(B, T, training);
    dnnl::stream st(cpu_engine());
    s.out.resize(segs_.size()), s.ws.resize(segs_.size());
    s.wl.resize(segs_.size()), s.wi.resize(segs_.size()), s.bias.resize(segs_.size());
    Tensor y = sequences_ ? Tensor({B, s.lens.empty() ? T : 0, segs_.back().out})
                          : Tensor({B, D_ == 2 && !sum_last() ? 2 * H_ : H_});
    memory src = f32_memory(B, T, I, T < T_in ? s.x.ptr() : x.ptr());
    if (bf16_) s.xb = converted(src, layer_md(B, T, I), st), src = s.xb;
    for (size_t k = 0; k < segs_.size(); ++k) {
      const Segment& g = segs_[k];
      const bool last = k + 1 == segs_.size();
      Weights w = weights(g);
      s.wl[k] = w.layer, s.wi[k] = w.iter, s.bias[k] = w.bias;  // the step's weights, converted once
      if (!(prims[k].fwd_wl == w.layer.get_desc())) {  // the primitive's own (packed) formats
        memory wl(prims[k].fwd_wl, cpu_engine()), wi(prims[k].fwd_wi, cpu_engine());
        dnnl::reorder(w.layer, wl).execute(st, w.layer, wl);
        dnnl::reorder(w.iter, wi).execute(st, w.iter, wi);
        w.layer = wl, w.iter = wi;
      }
      // The last segment writes y itself, unless y is remade from it (a masked batch, a bf16 stack):
      // backward reads it.
      s.out[k] = last && sequences_ && s.lens.empty() && !bf16_ ? memory(layer_md(B, T, g.out), cpu_engine(), y.ptr())
                                                                : memory(layer_md(B, T, g.out), cpu_engine());
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC_LAYER, src},      {DNNL_ARG_WEIGHTS_LAYER, w.layer},
                                           {DNNL_ARG_WEIGHTS_ITER, w.iter}, {DNNL_ARG_BIAS, w.bias},
                                           {DNNL_ARG_DST_LAYER, s.out[k]}};
      if (last && !sequences_) {
        s.hy = memory(iter_md(g, B), cpu_engine());
        args[DNNL_ARG_DST_ITER] = s.hy;
        if (!gru_) s.cy = memory(iter_md(g, B, dt::f32), cpu_engine()), args[DNNL_ARG_DST_ITER_C] = s.cy;
      }
      if (training) s.ws[k] = memory(prims[k].ws, cpu_engine()), args[DNNL_ARG_WORKSPACE] = s.ws[k];
      prims[k].fwd.execute(st, args);
      src = s.out[k];
    }
    const int64_t C = segs_.back().out;
    // The last segment's outputs (and final states) in FP32: bf16 stacks convert them.
    memory last = s.out.back(), hy = s.hy;
    if (bf16_ && sequences_ && s.lens.empty()) converted(last, f32_memory(B, T, C, y.ptr()), st);
    else if (bf16_) last = converted(last, layer_md(B, T, C, dt::f32), st);
    if (bf16_ && !sequences_) hy = converted(s.hy, iter_md(segs_.back(), B, dt::f32), st);
    st.wait();
    if (!s.lens.empty() && sequences_) {  // Keras: a masked step repeats the last used output (0 before any)
      const float* o = static_cast<const float*>(last.get_data_handle());
      Tensor full({B, T_in, C});
      for (int64_t b = 0; b < B; ++b) {
        const int64_t len = s.lens[b];
        std::copy_n(o + b * T * C, len * C, full.ptr() + b * T_in * C);
        for (int64_t t = len; t < T_in; ++t)
          for (int64_t j = 0; j < C; ++j) full[(b * T_in + t) * C + j] = len > 0 ? o[(b * T + len - 1) * C + j] : 0.0f;
      }
      return full;
    } else if (!s.lens.empty()) {  // the output at each sequence's last used step
      const float* o = static_cast<const float*>(last.get_data_handle());
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < H_; ++j) y[b * H_ + j] = s.lens[b] > 0 ? o[(b * T + s.lens[b] - 1) * H_ + j] : 0.0f;
      mask.clear();
    } else if (!sequences_) {  // the last layer's final states: forward direction after step T-1, backward after step 0
      const Segment& g = segs_.back();
      const float* h = static_cast<const float*>(hy.get_data_handle()) + (g.n - 1) * D_ * B * H_;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < H_; ++j) {
          if (D_ == 1) y[b * H_ + j] = h[b * H_ + j];
          else if (sum_last()) y[b * H_ + j] = h[b * H_ + j] + h[(B + b) * H_ + j];
          else y[b * 2 * H_ + j] = h[b * H_ + j], y[b * 2 * H_ + H_ + j] = h[(B + b) * H_ + j];
        }
      mask.clear();
    }
    return y;
  }

  Tensor backward(LayerParams&, const Saved* saved, const Tensor& x, const Tensor& y, const Tensor& dy) override {
    const auto& s = static_cast<const StackSaved&>(*saved);
    if (s.reference) return reference_backward(s, x, y, dy);
    const int64_t B = s.B, T = s.T, T_in = s.T_in;
    std::vector<Prims>& prims = primitives(B, T, true);
    dnnl::stream st(cpu_engine());
    Tensor dx({B, T, segs_[0].in});
    memory ddst;  // the gradient of the current segment's output
    for (size_t k = segs_.size(); k-- > 0;) {
      const Segment& g = segs_[k];
      const bool last = k + 1 == segs_.size();
      memory src = k > 0 ? s.out[k - 1] : bf16_ ? s.xb : f32_memory(B, T, g.in, T < T_in ? s.x.ptr() : x.ptr());
      // The gradients of the activations are FP32 in bf16 stacks too (oneDNN takes no other).
      memory dsrc = k == 0 ? f32_memory(B, T, g.in, dx.ptr()) : memory(layer_md(B, T, g.in, dt::f32), cpu_engine());
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC_LAYER, src}, {DNNL_ARG_DST_LAYER, s.out[k]},
                                           {DNNL_ARG_WORKSPACE, s.ws[k]}, {DNNL_ARG_DIFF_SRC_LAYER, dsrc}};
      if (last) {
        ddst = memory(layer_md(B, T, g.out, dt::f32), cpu_engine());
        float* d = static_cast<float*>(ddst.get_data_handle());
        if (sequences_ && s.lens.empty()) {
          std::memcpy(d, dy.ptr(), sizeof(float) * B * T * g.out);
        } else if (sequences_) {  // masked: the used steps' gradient, and the padded ones' added to the last used step
          const int64_t C = g.out;
          std::memset(d, 0, sizeof(float) * B * T * C);
          for (int64_t b = 0; b < B; ++b) {
            const int64_t len = s.lens[b];
            std::copy_n(dy.ptr() + b * T_in * C, len * C, d + b * T * C);
            for (int64_t t = len; t < T_in && len > 0; ++t)
              for (int64_t j = 0; j < C; ++j) d[(b * T + len - 1) * C + j] += dy[(b * T_in + t) * C + j];
          }
        } else {
          std::memset(d, 0, sizeof(float) * B * T * g.out);
          memory dhy(iter_md(g, B, dt::f32), cpu_engine());
          float* h = static_cast<float*>(dhy.get_data_handle());
          std::memset(h, 0, sizeof(float) * g.n * D_ * B * H_);
          h += (g.n - 1) * D_ * B * H_;
          for (int64_t b = 0; b < B && !s.lens.empty(); ++b)  // masked: dy enters y at the last used step
            for (int64_t j = 0; j < H_ && s.lens[b] > 0; ++j) d[(b * T + s.lens[b] - 1) * H_ + j] = dy[b * H_ + j];
          for (int64_t b = 0; b < B && s.lens.empty(); ++b)
            for (int64_t j = 0; j < H_; ++j) {
              if (D_ == 1) h[b * H_ + j] = dy[b * H_ + j];
              else if (sum_last()) h[b * H_ + j] = h[(B + b) * H_ + j] = dy[b * H_ + j];
              else h[b * H_ + j] = dy[b * 2 * H_ + j], h[(B + b) * H_ + j] = dy[b * 2 * H_ + H_ + j];
            }
          args[DNNL_ARG_DST_ITER] = s.hy, args[DNNL_ARG_DIFF_DST_ITER] = dhy;
          if (!gru_) {
            memory dcy(iter_md(g, B, dt::f32), cpu_engine());
            std::memset(dcy.get_data_handle(), 0, sizeof(float) * g.n * D_ * B * H_);
            args[DNNL_ARG_DST_ITER_C] = s.cy, args[DNNL_ARG_DIFF_DST_ITER_C] = dcy;
          }
        }
      }
      args[DNNL_ARG_DIFF_DST_LAYER] = ddst;
      // Weights in the backward primitive's format; gradients in Keras' (ldigo), zeroed, then added.
      memory wl(prims[k].bwd_wl, cpu_engine()), wi(prims[k].bwd_wi, cpu_engine());
      memory kl = s.wl[k], ki = s.wi[k];  // handles: the buffers are forward's
      dnnl::reorder(kl, wl).execute(st, kl, wl);
      dnnl::reorder(ki, wi).execute(st, ki, wi);
      memory dwl(wl_md(g), cpu_engine()), dwi(wi_md(g), cpu_engine()), db(bias_md(g), cpu_engine());
      for (const memory* m : {&dwl, &dwi, &db}) std::memset(m->get_data_handle(), 0, m->get_desc().get_size());
      args[DNNL_ARG_WEIGHTS_LAYER] = wl, args[DNNL_ARG_WEIGHTS_ITER] = wi, args[DNNL_ARG_BIAS] = s.bias[k];
      args[DNNL_ARG_DIFF_WEIGHTS_LAYER] = dwl, args[DNNL_ARG_DIFF_WEIGHTS_ITER] = dwi, args[DNNL_ARG_DIFF_BIAS] = db;
      prims[k].bwd.execute(st, args);
      st.wait();
      add_grads(g, dwl, dwi, db);
      ddst = dsrc;
    }
    if (s.lens.empty()) return dx;
    const int64_t I = segs_[0].in;
    Tensor full({B, T_in, I});  // zeros: masked steps get no gradient (Keras)
    for (int64_t b = 0; b < B; ++b) std::copy_n(dx.ptr() + b * T * I, s.lens[b] * I, full.ptr() + b * T_in * I);
    return full;
  }

 private:
  struct Weights {
    memory layer, iter, bias;
  };

  bool sum_last() const { return segs_.back().dir == dnnl::rnn_direction::bidirectional_sum; }
  int64_t bias_gates() const { return 4; }  // LSTM 4; linear-before-reset GRU 3 + the candidate's recurrent bias

  // Activations and hidden states: bf16 in bf16 stacks unless asked for FP32 (their gradients, c).
  dt act() const { return bf16_ ? dt::bf16 : dt::f32; }
  memory::desc layer_md(int64_t B, int64_t T, int64_t C) const { return layer_md(B, T, C, act()); }
  static memory::desc layer_md(int64_t B, int64_t T, int64_t C, dt d) { return memory::desc({T, B, C}, d, tag::ntc); }
  memory::desc iter_md(const Segment& g, int64_t B) const { return iter_md(g, B, act()); }
  memory::desc iter_md(const Segment& g, int64_t B, dt d) const { return memory::desc({g.n, D_, B, H_}, d, tag::ldnc); }
  // An FP32 [B, T, C] tensor's memory, and a memory of `to` (an FP32 buffer's memory, or a desc) with from's values.
  static memory f32_memory(int64_t B, int64_t T, int64_t C, const float* p) {
    return memory(layer_md(B, T, C, dt::f32), cpu_engine(), const_cast<float*>(p));
  }
  static memory converted(const memory& from, const memory::desc& to, dnnl::stream& st) {
    return converted(from, memory(to, cpu_engine()), st);
  }
  static memory converted(const memory& from, memory to, dnnl::stream& st) {
    dnnl::reorder(from, to).execute(st, const_cast<memory&>(from), to);
    return to;
  }
  memory::desc wl_md(const Segment& g) const { return memory::desc({g.n, D_, g.in, G_, H_}, dt::f32, tag::ldigo); }
  memory::desc wi_md(const Segment& g) const { return memory::desc({g.n, D_, H_, G_, H_}, dt::f32, tag::ldigo); }
  memory::desc bias_md(const Segment& g) const { return memory::desc({g.n, D_, bias_gates(), H_}, dt::f32, tag::ldgo); }

  // Param k (0 kernel, 1 recurrent, 2 bias) of direction d of stack layer l.
  Param& param(int64_t l, int64_t d, int k) { return params_.layers[first_ + l].params.at(static_cast<size_t>(d * 3 + k)); }

  // The segment's weights in oneDNN's layouts, from the Keras tensors (copies; the GRU's biases folded).
  Weights weights(const Segment& g) {
    Weights w{memory(wl_md(g), cpu_engine()), memory(wi_md(g), cpu_engine()), memory(bias_md(g), cpu_engine())};
    float* wl = static_cast<float*>(w.layer.get_data_handle());
    float* wi = static_cast<float*>(w.iter.get_data_handle());
    float* b = static_cast<float*>(w.bias.get_data_handle());
    const int64_t GH = G_ * H_;
    for (int64_t l = 0; l < g.n; ++l)
      for (int64_t d = 0; d < D_; ++d) {
        const int64_t ld = l * D_ + d, sl = g.first + l;
        std::memcpy(wl + ld * g.in * GH, param(sl, d, 0).value.ptr(), sizeof(float) * g.in * GH);
        std::memcpy(wi + ld * H_ * GH, param(sl, d, 1).value.ptr(), sizeof(float) * H_ * GH);
        const float* kb = param(sl, d, 2).value.ptr();
        float* ob = b + ld * 4 * H_;
        if (!gru_) {
          std::memcpy(ob, kb, sizeof(float) * 4 * H_);
        } else {  // Keras [2, 3H] (input, recurrent) -> oneDNN z, r (both summed), candidate input, candidate recurrent
          for (int64_t j = 0; j < 2 * H_; ++j) ob[j] = kb[j] + kb[GH + j];
          for (int64_t j = 0; j < H_; ++j) ob[2 * H_ + j] = kb[2 * H_ + j], ob[3 * H_ + j] = kb[GH + 2 * H_ + j];
        }
      }
    return w;
  }

  void add_grads(const Segment& g, const memory& dwl, const memory& dwi, const memory& db) {
    const float* wl = static_cast<const float*>(dwl.get_data_handle());
    const float* wi = static_cast<const float*>(dwi.get_data_handle());
    const float* b = static_cast<const float*>(db.get_data_handle());
    const int64_t GH = G_ * H_;
    for (int64_t l = 0; l < g.n; ++l)
      for (int64_t d = 0; d < D_; ++d) {
        const int64_t ld = l * D_ + d, sl = g.first + l;
        float* k = param(sl, d, 0).grad.ptr();
        for (int64_t i = 0; i < g.in * GH; ++i) k[i] += wl[ld * g.in * GH + i];
        float* r = param(sl, d, 1).grad.ptr();
        for (int64_t i = 0; i < H_ * GH; ++i) r[i] += wi[ld * H_ * GH + i];
        float* kb = param(sl, d, 2).grad.ptr();
        const float* ob = b + ld * 4 * H_;
        if (!gru_) {
          for (int64_t j = 0; j < 4 * H_; ++j) kb[j] += ob[j];
        } else {
          for (int64_t j = 0; j < 2 * H_; ++j) kb[j] += ob[j], kb[GH + j] += ob[j];
          for (int64_t j = 0; j < H_; ++j) kb[2 * H_ + j] += ob[2 * H_ + j], kb[GH + 2 * H_ + j] += ob[3 * H_ + j];
        }
      }
  }

  // The primitives for batches of B sequences of T steps (built once per shape: oneDNN compiles them).
  std::vector<Prims>& primitives(int64_t B, int64_t T, bool training) {
    const auto key = std::make_tuple(B, T, training);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    if (cache_.size() >= 16) cache_.clear();
    std::vector<Prims> out;
    const dnnl::prop_kind pk = training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
    const memory::desc none;
    for (size_t k = 0; k < segs_.size(); ++k) {
      const Segment& g = segs_[k];
      const bool states = k + 1 == segs_.size() && !sequences_;
      const memory::desc src = layer_md(B, T, g.in), dst = layer_md(B, T, g.out);
      const memory::desc dsrc = layer_md(B, T, g.in, dt::f32), ddst = layer_md(B, T, g.out, dt::f32);
      const memory::desc hy = states ? iter_md(g, B) : none, cy = states ? iter_md(g, B, dt::f32) : none;
      const memory::desc dhy = states ? iter_md(g, B, dt::f32) : none;
      const memory::desc any_wl({g.n, D_, g.in, G_, H_}, act(), tag::any), any_wi({g.n, D_, H_, G_, H_}, act(), tag::any);
      Prims p;
      if (!gru_) {
        dnnl::lstm_forward::primitive_desc f(
            dnnl::lstm_forward::desc(pk, g.dir, src, none, none, any_wl, any_wi, bias_md(g), dst, hy, cy), cpu_engine());
        p.fwd = dnnl::lstm_forward(f);
        p.fwd_wl = f.weights_layer_desc(), p.fwd_wi = f.weights_iter_desc();
        if (training) {
          p.ws = f.workspace_desc();
          dnnl::lstm_backward::primitive_desc b(
              dnnl::lstm_backward::desc(dnnl::prop_kind::backward, g.dir, src, none, none, any_wl, any_wi, bias_md(g), dst,
                                        hy, cy, dsrc, none, none, wl_md(g), wi_md(g), bias_md(g), ddst, dhy, dhy),
              cpu_engine(), f);
          p.bwd = dnnl::lstm_backward(b);
          p.bwd_wl = b.weights_layer_desc(), p.bwd_wi = b.weights_iter_desc();
        }
      } else {
        dnnl::lbr_gru_forward::primitive_desc f(
            dnnl::lbr_gru_forward::desc(pk, g.dir, src, none, any_wl, any_wi, bias_md(g), dst, hy), cpu_engine());
        p.fwd = dnnl::lbr_gru_forward(f);
        p.fwd_wl = f.weights_layer_desc(), p.fwd_wi = f.weights_iter_desc();
        if (training) {
          p.ws = f.workspace_desc();
          dnnl::lbr_gru_backward::primitive_desc b(
              dnnl::lbr_gru_backward::desc(dnnl::prop_kind::backward, g.dir, src, none, any_wl, any_wi, bias_md(g), dst, hy,
                                           dsrc, none, wl_md(g), wi_md(g), bias_md(g), ddst, dhy),
              cpu_engine(), f);
          p.bwd = dnnl::lbr_gru_backward(b);
          p.bwd_wl = b.weights_layer_desc(), p.bwd_wi = b.weights_iter_desc();
        }
      }
      out.push_back(std::move(p));
    }
    return cache_.emplace(key, std::move(out)).first->second;
  }

  // Masked batches: the reference ops, layer by layer.
  Tensor reference_forward(const Tensor& x, Mask& mask, bool training, Rng& rng, StackSaved& s) {
    s.saved.resize(ref_.size());
    s.acts.resize(ref_.size() - 1);
    Tensor cur = x;
    for (size_t k = 0; k < ref_.size(); ++k) {
      Tensor y = ref_[k]->forward(params_.layers[first_ + k], cur, mask, training, rng, s.saved[k]);
      if (k + 1 < ref_.size()) s.acts[k] = y;
      cur = std::move(y);
    }
    return cur;
  }

  Tensor reference_backward(const StackSaved& s, const Tensor& x, const Tensor& y, const Tensor& dy) {
    Tensor g = dy;
    for (size_t k = ref_.size(); k-- > 0;) {
      const Tensor& in = k == 0 ? x : s.acts[k - 1];
      const Tensor& out = k + 1 == ref_.size() ? y : s.acts[k];
      g = ref_[k]->backward(params_.layers[first_ + k], s.saved[k].get(), in, out, g);
    }
    return g;
  }

  Params& params_;
  size_t first_;
  std::vector<std::unique_ptr<Op>> ref_;
  std::vector<Segment> segs_;
  bool gru_ = false, sequences_ = true;
  bool bf16_ = false;  // activations and weights in bf16 on oneDNN's bf16 kernels (FP32 sums, c and gradients)
  int64_t G_ = 4, H_ = 0, D_ = 1;
  std::map<std::tuple<int64_t, int64_t, bool>, std::vector<Prims>> cache_;
};

}  // namespace

std::unique_ptr<Op> make_onednn_stack(const ModelSpec& model, size_t first, size_t count, int64_t input,
                                      Params& params, bool bf16) {
  return std::make_unique<OnednnStack>(model, first, count, input, params, bf16);
}

#endif

}  // namespace rnntrain::cpu
