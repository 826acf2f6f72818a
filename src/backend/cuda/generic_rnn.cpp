// Recurrent layers cuDNN cannot run (hard_sigmoid, reset_after: false, recurrent_dropout, relu LSTM,
// go_backwards, no bias, ...), on the GPU: one cuBLAS GEMM for the input projection of all steps, per
// step a recurrent GEMM and a fused element-wise cell kernel, and GEMMs for the weight gradients.
// Mirrors backend/cpu/recurrent.cpp and rnn_layers.cpp (time-major tapes in processing order).
#include <fmt/format.h>

#include "backend/cuda/blas.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/stage.h"
#include "core/error.h"
#include "spec/shapes.h"

namespace rnntrain::cuda {

namespace {

// One direction of one recurrent layer.
class GenericDirection {
 public:
  GenericDirection(Gpu& gpu, ParamStore& store, const LayerSpec& cell, bool go_backwards, bool zero_masked,
                   int64_t input)
      : gpu_(gpu), store_(store), spec_(cell), backwards_(go_backwards), zero_masked_(zero_masked), I_(input),
        H_(cell.units), G_(cell_traits(cell.kind).gates) {}

  void reserve(ParamStore& s) {
    k_off_ = s.reserve(I_ * G_ * H_);
    r_off_ = s.reserve(H_ * G_ * H_);
    if (const int rows = bias_rows(spec_); rows > 0) b_off_ = s.reserve(rows * G_ * H_);
  }
  // Keras weights in order: kernel, recurrent_kernel, bias. Returns the next free index.
  size_t place(ParamStore& s, size_t first) {
    s.place(first, k_off_);
    s.place(first + 1, r_off_);
    if (spec_.use_bias) s.place(first + 2, b_off_);
    return first + (spec_.use_bias ? 3 : 2);
  }

  // x: [B, T, I]; mask: [B, T] or null. Returns [B, T, H] (processing order) or [B, H].
  DevTensor forward(const DevTensor& x, const uint8_t* mask, const RunInfo& run);
  // dy: like forward's result. Adds the weight gradients; writes (or adds to) dx: [B, T, I] if not null.
  void backward(const DevTensor& dy, float* dx, bool accumulate);

 private:
  bool reset_after() const { return spec_.kind == LayerKind::GRU && spec_.reset_after; }
  float* W() const { return store_.w() + k_off_; }
  float* U() const { return store_.w() + r_off_; }
  float* bias() const { return spec_.use_bias ? store_.w() + b_off_ : nullptr; }
  const float* draw(DeviceBuffer<float>& buf, double rate, int64_t n, const RunInfo& run) {
    if (!run.training || !(rate > 0.0 && rate < 1.0)) return nullptr;  // Keras: only for 0 < rate < 1
    k::dropout_mask(buf.ensure(n), n, static_cast<float>(rate), run.seed, run.next_site(), gpu_.stream());
    return buf.get();
  }

  Gpu& gpu_;
  ParamStore& store_;
  LayerSpec spec_;
  bool backwards_, zero_masked_;
  int64_t I_, H_, G_;
  int64_t k_off_ = 0, r_off_ = 0, b_off_ = 0;
  int64_t B_ = 0, T_ = 0;
  const float* in_drop_ = nullptr;   // [B, I] or null
  const float* rec_drop_ = nullptr;  // [B, H] or null
  DeviceBuffer<float> in_mask_{"input dropout mask"}, rec_mask_{"recurrent dropout mask"};
  DeviceBuffer<float> xp_{"RNN inputs"}, z_{"RNN gates"}, h_{"RNN states"}, c_{"LSTM cells"}, aux_{"RNN tape"};
  DeviceBuffer<float> hd_{"RNN dropped states"}, rh_{"GRU reset states"}, rec_{"RNN recurrent projection"};
  DeviceBuffer<float> y_{"RNN output"}, dyp_{"RNN output gradient"}, dh_{"RNN state gradient"};
  DeviceBuffer<float> dc_{"LSTM cell gradient"}, dhr_{"RNN carried gradient"}, dz_{"RNN gate gradient"};
  DeviceBuffer<float> dzr_{"GRU recurrent gradient"}, dxp_{"RNN input gradient"};
  DeviceBuffer<uint8_t> step_{"RNN step mask"};
};

DevTensor GenericDirection::forward(const DevTensor& x, const uint8_t* mask, const RunInfo& run) {
  const int64_t B = x.dim(0), T = x.dim(1), I = I_, H = H_, GH = G_ * H_, BH = B * H;
  B_ = B, T_ = T;
  cudaStream_t st = gpu_.stream();
  in_drop_ = draw(in_mask_, spec_.dropout, B * I, run);
  rec_drop_ = draw(rec_mask_, spec_.recurrent_dropout, B * H, run);

  float* xp = xp_.ensure(T * B * I);
  uint8_t* step = step_.ensure(T * B);
  k::rnn_gather(x.ptr, in_drop_, mask, xp, step, B, T, I, backwards_, st);

  // z: [T*B, G*H] = b_x + xp @ W, all steps in one GEMM.
  float* z = z_.ensure(T * B * GH);
  if (bias()) k::fill_rows(z, bias(), T * B, GH, st);
  gemm(gpu_, false, false, T * B, GH, I, 1.0f, xp, I, W(), GH, bias() ? 1.0f : 0.0f, z, GH);

  float* h = h_.ensure((T + 1) * BH);
  CUDA_CHECK(cudaMemsetAsync(h, 0, sizeof(float) * BH, st));
  float* c = nullptr;
  if (cell_traits(spec_.kind).cell_state) {
    c = c_.ensure((T + 1) * BH);
    CUDA_CHECK(cudaMemsetAsync(c, 0, sizeof(float) * BH, st));
  }
  float* aux = (spec_.kind == LayerKind::LSTM || reset_after()) ? aux_.ensure(T * BH) : nullptr;
  float* rh = (spec_.kind == LayerKind::GRU && !reset_after()) ? rh_.ensure(T * BH) : nullptr;
  float* rec = spec_.kind == LayerKind::GRU ? rec_.ensure(B * GH) : nullptr;
  float* hd = rec_drop_ ? hd_.ensure(T * BH) : nullptr;

  for (int64_t s = 0; s < T; ++s) {
    const float* hprev = h + s * BH;
    float* hnext = h + (s + 1) * BH;
    const float* hin = hprev;
    if (rec_drop_) {
      k::mul(hprev, rec_drop_, hd + s * BH, BH, st);
      hin = hd + s * BH;
    }
    float* zs = z + s * B * GH;
    const k::CellStep cs{B, H, spec_.activation, spec_.recurrent_activation,
                         step + s * B};
    switch (spec_.kind) {
      case LayerKind::LSTM:
        gemm(gpu_, false, false, B, GH, H, 1.0f, hin, H, U(), GH, 1.0f, zs, GH);  // zs += hin @ U
        k::lstm_fwd(cs, zs, hprev, c + s * BH, hnext, c + (s + 1) * BH, aux + s * BH, st);
        break;
      case LayerKind::GRU:
        if (reset_after()) {
          if (bias()) k::fill_rows(rec, bias() + GH, B, GH, st);
          gemm(gpu_, false, false, B, GH, H, 1.0f, hin, H, U(), GH, bias() ? 1.0f : 0.0f, rec, GH);
          k::gru_fwd_after(cs, zs, rec, aux + s * BH, hprev, hnext, st);
        } else {
          gemm(gpu_, false, false, B, 2 * H, H, 1.0f, hin, H, U(), GH, 0.0f, rec, GH);
          k::gru_fwd_before_a(cs, zs, rec, hin, rh + s * BH, st);
          gemm(gpu_, false, false, B, H, H, 1.0f, rh + s * BH, H, U() + 2 * H, GH, 0.0f, rec + 2 * H, GH);
          k::gru_fwd_before_b(cs, zs, rec, hprev, hnext, st);
        }
        break;
      default:  // SimpleRNN
        gemm(gpu_, false, false, B, H, H, 1.0f, hin, H, U(), H, 1.0f, zs, H);
        k::simple_fwd(cs, zs, hprev, hnext, st);
    }
  }
  const bool seq = spec_.return_sequences;
  DevTensor y{y_.ensure(seq ? B * T * H : B * H), seq ? Shape{B, T, H} : Shape{B, H}};
  k::rnn_outputs(h, step, y.ptr, B, T, H, seq, zero_masked_, st);
  return y;
}

void GenericDirection::backward(const DevTensor& dy, float* dx, bool accumulate) {
  const int64_t B = B_, T = T_, I = I_, H = H_, GH = G_ * H_, BH = B * H;
  cudaStream_t st = gpu_.stream();
  const uint8_t* step = step_.get();
  float* dyp = dyp_.ensure(T * BH);
  k::rnn_output_grads(dy.ptr, step, dyp, B, T, H, spec_.return_sequences, zero_masked_, st);

  float* dh = dh_.ensure(BH);
  float* dhr = dhr_.ensure(BH);
  CUDA_CHECK(cudaMemsetAsync(dh, 0, sizeof(float) * BH, st));
  float* dc = nullptr;
  if (cell_traits(spec_.kind).cell_state) {
    dc = dc_.ensure(BH);
    CUDA_CHECK(cudaMemsetAsync(dc, 0, sizeof(float) * BH, st));
  }
  float* dz = dz_.ensure(T * B * GH);  // d loss / d(x@W + b_x)
  float* dzr = reset_after() ? dzr_.ensure(T * B * GH) : nullptr;  // d loss / d(h@U + b_h)
  const float* h = h_.get();
  const float* hin_all = rec_drop_ ? hd_.get() : h;  // [T, B, H] what U multiplied
  float* dU = store_.g() + r_off_;

  for (int64_t s = T - 1; s >= 0; --s) {
    const k::CellStep cs{B, H, spec_.activation, spec_.recurrent_activation,
                         step + s * B};
    const float* zs = z_.get() + s * B * GH;
    float* dzs = dz + s * B * GH;
    const float* dys = dyp + s * BH;
    const float* hprev = h + s * BH;
    switch (spec_.kind) {
      case LayerKind::LSTM:
        k::lstm_bwd(cs, zs, aux_.get() + s * BH, c_.get() + s * BH, dys, dh, dc, dzs, st);
        gemm(gpu_, false, true, B, H, GH, 1.0f, dzs, GH, U(), GH, 0.0f, dhr, H);
        k::rnn_carry(cs, dhr, rec_drop_, dh, st);
        break;
      case LayerKind::GRU:
        if (reset_after()) {
          float* dzrs = dzr + s * B * GH;
          k::gru_bwd_a(cs, true, zs, aux_.get() + s * BH, hprev, dys, dh, dzs, dzrs, st);
          gemm(gpu_, false, true, B, H, GH, 1.0f, dzrs, GH, U(), GH, 0.0f, dhr, H);
        } else {
          k::gru_bwd_a(cs, false, zs, nullptr, hprev, dys, dh, dzs, nullptr, st);
          gemm(gpu_, false, true, B, H, H, 1.0f, dzs + 2 * H, GH, U() + 2 * H, GH, 0.0f, dhr, H);
          k::gru_bwd_before_b(cs, zs, hin_all + s * BH, dhr, dzs, st);
          gemm(gpu_, false, true, B, H, 2 * H, 1.0f, dzs, GH, U(), GH, 1.0f, dhr, H);
        }
        k::gru_carry(cs, zs, dhr, rec_drop_, dh, st);
        break;
      default:
        k::simple_bwd(cs, zs, dys, dh, dzs, st);
        gemm(gpu_, false, true, B, H, H, 1.0f, dzs, H, U(), H, 0.0f, dhr, H);
        k::rnn_carry(cs, dhr, rec_drop_, dh, st);
    }
  }

  // Recurrent weights over all steps.
  if (reset_after()) {
    gemm(gpu_, true, false, H, GH, T * B, 1.0f, hin_all, H, dzr, GH, 1.0f, dU, GH);
    if (bias()) add_colsum(gpu_, dzr, T * B, GH, GH, store_.g() + b_off_ + GH);
  } else if (spec_.kind == LayerKind::GRU) {
    gemm(gpu_, true, false, H, 2 * H, T * B, 1.0f, hin_all, H, dz, GH, 1.0f, dU, GH);
    gemm(gpu_, true, false, H, H, T * B, 1.0f, rh_.get(), H, dz + 2 * H, GH, 1.0f, dU + 2 * H, GH);
  } else {
    gemm(gpu_, true, false, H, GH, T * B, 1.0f, hin_all, H, dz, GH, 1.0f, dU, GH);
  }
  // Input weights and bias; then dx = dz @ W^T back to [B, T, I] time order.
  gemm(gpu_, true, false, I, GH, T * B, 1.0f, xp_.get(), I, dz, GH, 1.0f, store_.g() + k_off_, GH);
  if (bias()) add_colsum(gpu_, dz, T * B, GH, GH, store_.g() + b_off_);
  if (!dx) return;
  float* dxp = dxp_.ensure(T * B * I);
  gemm(gpu_, false, true, T * B, I, GH, 1.0f, dz, GH, W(), GH, 0.0f, dxp, I);
  k::rnn_scatter_dx(dxp, in_drop_, dx, B, T, I, backwards_, accumulate, st);
}

void check_cell(const LayerSpec& owner, const LayerSpec& r) {
  if (r.activation == Activation::Softmax || r.recurrent_activation == Activation::Softmax)
    throw ConfigError(fmt::format("{}: layer '{}' ({}): softmax cannot be a recurrent cell's activation; use tanh, "
                                  "sigmoid, hard_sigmoid, relu or linear",
                                  owner.loc.str(), owner.name, layer_kind_name(owner.kind)));
}

// A plain recurrent layer (one direction) or a Bidirectional one (two, merged).
class GenericRnnStage final : public DeviceStage {
 public:
  GenericRnnStage(const StageEnv& env, const LayerSpec& l, int64_t input, size_t first)
      : gpu_(env.gpu), spec_(l), cell_(l.kind == LayerKind::Bidirectional ? *l.inner : l), I_(input), first_(first) {
    check_cell(l, cell_);
    dirs_.reserve(2);
    if (l.kind == LayerKind::Bidirectional) {
      // Keras: the backward layer flips go_backwards; both zero masked outputs with return_sequences.
      dirs_.emplace_back(env.gpu, env.store, cell_, cell_.go_backwards, cell_.return_sequences, input);
      dirs_.emplace_back(env.gpu, env.store, cell_, !cell_.go_backwards, cell_.return_sequences, input);
    } else {
      dirs_.emplace_back(env.gpu, env.store, cell_, cell_.go_backwards, false, input);
    }
  }

  void reserve(ParamStore& s) override {
    for (auto& d : dirs_) d.reserve(s);
  }
  void place(ParamStore& s) override {
    size_t next = first_;
    for (auto& d : dirs_) next = d.place(s, next);
  }

  DevTensor forward(const DevTensor& x, MaskState& mask, const RunInfo& run) override {
    x_ = x;
    const bool seq = cell_.return_sequences;
    const uint8_t* m = mask.dev;
    if (!seq) mask.clear();  // Keras: the mask passes on only with return_sequences
    DevTensor yf = dirs_[0].forward(x, m, run);
    if (dirs_.size() == 1) return yf;
    DevTensor yb = dirs_[1].forward(x, m, run);
    const int64_t H = cell_.units, B = x.dim(0), T = x.dim(1), rows = seq ? B * T : B;
    if (seq) {
      k::flip_time(yb.ptr, ybt_.ensure(B * T * H), B, T, H, gpu_.stream());
      yb.ptr = ybt_.get();
    }
    yf_ = yf, yb_ = yb;
    const bool concat = spec_.merge_mode == MergeMode::Concat;
    Shape shape = yf.shape;
    if (concat) shape.back() = 2 * H;
    DevTensor y{out_.ensure(rows * (concat ? 2 * H : H)), shape};
    k::merge_dirs(spec_.merge_mode, rows, H, yf.ptr, H, yb.ptr, H, y.ptr, gpu_.stream());
    return y;
  }

  DevTensor backward(const DevTensor& dy, bool need_dx) override {
    const int64_t B = x_.dim(0), T = x_.dim(1);
    float* dx = need_dx ? dx_.ensure(B * T * I_) : nullptr;
    if (dirs_.size() == 1) {
      dirs_[0].backward(dy, dx, false);
      return need_dx ? DevTensor{dx, x_.shape} : DevTensor{};
    }
    const int64_t H = cell_.units, rows = yf_.numel() / H;
    float* df = dyf_.ensure(rows * H);
    float* db = dyb_.ensure(rows * H);
    k::unmerge_dirs(spec_.merge_mode, rows, H, dy.ptr, yf_.ptr, H, yb_.ptr, H, df, H, db, H,
                    gpu_.stream());
    if (cell_.return_sequences) {
      k::flip_time(db, dybp_.ensure(rows * H), B, T, H, gpu_.stream());
      db = dybp_.get();
    }
    dirs_[0].backward(DevTensor{df, yf_.shape}, dx, false);
    dirs_[1].backward(DevTensor{db, yf_.shape}, dx, true);
    return need_dx ? DevTensor{dx, x_.shape} : DevTensor{};
  }

 private:
  Gpu& gpu_;
  LayerSpec spec_, cell_;
  int64_t I_;
  size_t first_;
  std::vector<GenericDirection> dirs_;
  DevTensor x_, yf_, yb_;
  DeviceBuffer<float> ybt_{"RNN backward output"}, out_{"Bidirectional output"}, dx_{"RNN input gradient"};
  DeviceBuffer<float> dyf_{"Bidirectional gradient"}, dyb_{"Bidirectional gradient"}, dybp_{"Bidirectional gradient"};
};

}  // namespace

std::unique_ptr<DeviceStage> make_generic_rnn_stage(const StageEnv& env, const LayerSpec& l, int64_t input,
                                              size_t first_param) {
  return std::make_unique<GenericRnnStage>(env, l, input, first_param);
}

}  // namespace rnntrain::cuda
