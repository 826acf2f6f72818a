// Launchers of the CUDA backend's own kernels (the .cu files hold kernels, then launchers). Every
// launcher takes the stream, checks the launch, and mirrors a CPU-backend function; shapes are
// row-major, batch-major unless noted. Not cuBLAS or cuDNN calls: blas.h, cudnn_stack.h.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "spec/activations.h"
#include "spec/constraint_rule.h"
#include "spec/confusion.h"
#include "spec/losses.h"
#include "spec/metrics.h"
#include "spec/optimizers.h"

namespace rnntrain::cuda::k {

// ---- layers (kernels_layers.cu) ----
void fill_rows(float* out, const float* vec, int64_t rows, int64_t cols, cudaStream_t s);  // out[r, :] = vec
// y = act(y + bias); pre (if not null) gets y + bias, what act_grad needs where act_grad_from_input(act).
void bias_act(float* y, const float* bias, int64_t rows, int64_t cols, Activation act, cudaStream_t s, float* pre = nullptr);
// d *= act'(pre), from y = act(pre), or from pre itself where act_grad_from_input(act).
void act_grad(float* d, const float* y, int64_t n, Activation act, cudaStream_t s);
void softmax_rows(float* x, int64_t rows, int64_t cols, cudaStream_t s);
void softmax_rows_grad(const float* y, const float* dy, float* dpre, int64_t rows, int64_t cols, cudaStream_t s);
// ids: [n] token ids as floats; emb: [V, E]; y: [n, E]. Backward adds dy rows into demb (atomics).
void embedding_forward(const float* ids, const float* emb, float* y, int64_t n, int64_t E, cudaStream_t s);
void embedding_backward(const float* ids, const float* dy, float* demb, int64_t n, int64_t E, cudaStream_t s);
// x, y: [steps, F]; a step is used when any feature differs from value. mask_in may be null (all used).
void masking_forward(const float* x, float* y, const uint8_t* mask_in, uint8_t* mask_out, uint8_t* used,
                     int64_t steps, int64_t F, float value, cudaStream_t s);
void masking_backward(const float* dy, float* dx, const uint8_t* used, int64_t steps, int64_t F, cudaStream_t s);
// m: [n] = 1/(1-rate) with probability 1-rate, else 0; counter-based, a function of (*seed, site,
// index). *seed is on the device (the step's, set before the step: a replayed graph draws new masks);
// site tells a step's dropout calls apart.
void dropout_mask(float* m, int64_t n, float rate, const uint64_t* seed, uint64_t site, cudaStream_t s);
void mul(const float* a, const float* b, float* out, int64_t n, cudaStream_t s);
void add_inplace(float* a, const float* b, int64_t n, cudaStream_t s);
// x, out: [B, T, F]; m: [B, F] (one mask per sequence).
void mul_per_sequence(const float* x, const float* m, float* out, int64_t B, int64_t T, int64_t F, cudaStream_t s);
// a, b: [rows, H] with row strides lda, ldb; out: [rows, 2H] (concat) or [rows, H] (sum, mul, ave).
void merge_dirs(MergeMode mode, int64_t rows, int64_t H, const float* a, int64_t lda, const float* b, int64_t ldb, float* out,
                cudaStream_t s);
// The gradients of merge_dirs: dy like its out; a, b the merged inputs (read for mul only).
void unmerge_dirs(MergeMode mode, int64_t rows, int64_t H, const float* dy, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float* da, int64_t ldda, float* db, int64_t lddb, cudaStream_t s);
void flip_time(const float* in, float* out, int64_t B, int64_t T, int64_t F, cudaStream_t s);  // [B, T, F]
// y: [B, T, F]; lens: [B]. Steps t >= lens[b] become y[b, lens[b]-1] (carry_last) or 0.
void fix_padded_outputs(float* y, int64_t B, int64_t T, int64_t F, const int32_t* lens, bool carry_last,
                        cudaStream_t s);
// out = dy at valid steps, 0 at padded ones; with fold_into_last the padded steps' sum is added to
// the last valid step (the gradient of fix_padded_outputs with carry_last).
void prepare_padded_grads(const float* dy, float* out, int64_t B, int64_t T, int64_t F, const int32_t* lens,
                          bool fold_into_last, cudaStream_t s);
void zero_padded(float* x, int64_t B, int64_t T, int64_t F, const int32_t* lens, cudaStream_t s);
void zero_empty_rows(float* x, int64_t B, int64_t F, const int32_t* lens, cudaStream_t s);  // x: [B, F], lens 0
// lens[b] = the steps before sample b's first masked one (mask: [B, T], right-padded).
void lengths_from_mask(const uint8_t* mask, int64_t B, int64_t T, int32_t* lens, cudaStream_t s);
// out[b, :] = y[b, lens[b] - 1, :], or 0 when lens[b] is 0 (y: [B, T, F]); and its gradient: out
// [B, T, F] holds dy[b, :] at step lens[b] - 1 and 0 everywhere else.
void last_step_gather(const float* y, int64_t B, int64_t T, int64_t F, const int32_t* lens, float* out,
                      cudaStream_t s);
void last_step_scatter(const float* dy, int64_t B, int64_t T, int64_t F, const int32_t* lens, float* out,
                       cudaStream_t s);
// Each sequence reversed within its length: out[b, t, :] (+)= in[b, lens[b] - 1 - t, :] for t < lens[b];
// at t >= lens[b], in[b, t, :] or (zero_padded) 0. in, out: [B, T, F], not the same array.
void reverse_in_lengths(const float* in, float* out, int64_t B, int64_t T, int64_t F, const int32_t* lens,
                        bool zero_padded, bool accumulate, cudaStream_t s);
void fill_i32(int32_t* p, int64_t n, int32_t v, cudaStream_t s);

// ---- the layers around the recurrent stacks (kernels_sequence.cu), [B, T, C] sequences ----
// A 1D window (spec/layers.h's window_1d): `out` steps, moved by strides, dilated, `pad` zeros on the left.
struct Window1d {
  int64_t out = 0, strides = 1, dilation = 1, pad = 0;
};
// Conv1D: col [B * out, K * C] holds each output step's window of x (zeros outside); col2im is its
// gradient: dx [B, T, C] = every window place's dcol entries summed.
void conv1d_im2col(const float* x, float* col, const Window1d& w, int64_t B, int64_t T, int64_t C, int64_t K,
                   cudaStream_t s);
void conv1d_col2im(const float* dcol, float* dx, const Window1d& w, int64_t B, int64_t T, int64_t C, int64_t K,
                   cudaStream_t s);
// MaxPooling1D (from: [B, out, C], the step each maximum came from) and AveragePooling1D (the mean
// over the window's steps inside the sequence) of window P, and their gradients (dx written whole).
void pool1d_forward(const float* x, float* y, int32_t* from, const Window1d& w, int64_t B, int64_t T, int64_t C,
                    int64_t P, bool max_pool, cudaStream_t s);
void pool1d_backward(const float* dy, const int32_t* from, float* dx, const Window1d& w, int64_t B, int64_t T, int64_t C,
                     int64_t P, bool max_pool, cudaStream_t s);
// GlobalAveragePooling1D (the mean over the steps mask keeps; mask may be null) and GlobalMaxPooling1D:
// y, n [B, C] (n: the steps averaged, or those equal to the maximum, which share its gradient).
void global_pool_forward(const float* x, const uint8_t* mask, float* y, float* n, int64_t B, int64_t T, int64_t C,
                         bool max_pool, cudaStream_t s);
void global_pool_backward(const float* x, const float* y, const float* n, const float* dy, const uint8_t* mask,
                          float* dx, int64_t B, int64_t T, int64_t C, bool max_pool, cudaStream_t s);
// LayerNormalization over rows of C (gamma, beta may be null); stats [rows, 2]: mean, 1/sqrt(var + eps).
// Backward writes dx and, where gterm is not null, gterm [rows, C] = dy * xhat (gamma's gradient, summed over rows).
void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y, float* stats, int64_t rows,
                        int64_t C, float eps, cudaStream_t s);
void layer_norm_backward(const float* x, const float* gamma, const float* stats, const float* dy, float* dx,
                         float* gterm, int64_t rows, int64_t C, cudaStream_t s);

// ---- generic recurrent cells (kernels_rnn.cu), time-major [T, B, .] in processing order ----
// xp[s, b, :] = x[b, t(s), :] * in_drop[b, :]; step[s, b] = mask[b, t(s)] (1 without a mask).
void rnn_gather(const float* x, const float* in_drop, const uint8_t* mask, float* xp, uint8_t* step, int64_t B,
                int64_t T, int64_t I, bool backwards, cudaStream_t s);
// dx[b, t(s), :] (+)= dxp[s, b, :] * in_drop[b, :].
void rnn_scatter_dx(const float* dxp, const float* in_drop, float* dx, int64_t B, int64_t T, int64_t I, bool backwards,
                    bool accumulate, cudaStream_t s);
// h: [T+1, B, H] -> y: [B, T, H] (processing order; 0 at unused steps with zero_masked) or [B, H] = h[T].
void rnn_outputs(const float* h, const uint8_t* step, float* y, int64_t B, int64_t T, int64_t H, bool sequences,
                 bool zero_masked, cudaStream_t s);
void rnn_output_grads(const float* dy, const uint8_t* step, float* dyp, int64_t B, int64_t T, int64_t H,
                      bool sequences, bool zero_masked, cudaStream_t s);
struct CellStep {
  int64_t B = 0, H = 0;
  Activation act = Activation::Tanh, ract = Activation::Sigmoid;
  const uint8_t* step = nullptr;  // [B] this step's used flags
};
// z: [B, 4H] x@W + b + h@U on entry, the activated gates on exit; aux: act(c) [B, H].
void lstm_fwd(const CellStep& c, float* z, const float* hprev, const float* cprev, float* hnext, float* cnext,
              float* aux, cudaStream_t s);
// dh, dc: [B, H] running gradients (dh += dy first); writes dz: [B, 4H]; dc becomes d c_{t-1}.
void lstm_bwd(const CellStep& c, const float* z, const float* aux, const float* cprev, const float* dy, float* dh,
              float* dc, float* dz, cudaStream_t s);
// reset_after: rec = h@U + b_rec [B, 3H]; aux keeps rec_h.
void gru_fwd_after(const CellStep& c, float* z, const float* rec, float* aux, const float* hprev, float* hnext,
                   cudaStream_t s);
// reset before: (a) z,r = ract(z + rec), rh = r * hin; (b) after rec_h = rh@U_h: hh = act(z_h + rec_h), h.
void gru_fwd_before_a(const CellStep& c, float* z, const float* rec, const float* hin, float* rh, cudaStream_t s);
void gru_fwd_before_b(const CellStep& c, float* z, const float* rec, const float* hprev, float* hnext, cudaStream_t s);
// dh += dy; dz (z: pre-ract' for reset before), dz_h; reset_after also dz r and dzr: [B, 3H].
void gru_bwd_a(const CellStep& c, bool reset_after, const float* z, const float* aux, const float* hprev,
               const float* dy, float* dh, float* dz, float* dzr, cudaStream_t s);
// reset before: drh = d(r*hin) [B, H] -> dz_r; drh *= r; both z and r through ract'.
void gru_bwd_before_b(const CellStep& c, const float* z, const float* hin, float* drh, float* dz, cudaStream_t s);
// dh = dh * z + dhr * rec_drop at used rows.
void gru_carry(const CellStep& c, const float* z, const float* dhr, const float* rec_drop, float* dh, cudaStream_t s);
void simple_fwd(const CellStep& c, float* z, const float* hprev, float* hnext, cudaStream_t s);
void simple_bwd(const CellStep& c, const float* z, const float* dy, float* dh, float* dz, cudaStream_t s);
// LSTM and SimpleRNN: dh = dhr * rec_drop at used rows (rec_drop may be null).
void rnn_carry(const CellStep& c, const float* dhr, const float* rec_drop, float* dh, cudaStream_t s);

// ---- losses and optimizers (kernels_train.cu) ----
struct LossArgs {
  LossKind kind = LossKind::MSE;
  LossParams params{false, 1.0, 0.0};
  const float* pred = nullptr;    // [n, k]
  const float* target = nullptr;  // [n, k], or labels [n] when sparse
  bool sparse = false;
  const uint8_t* mask = nullptr;  // [n] or null
  int64_t n = 0, k = 0;
  double gscale = 0.0;     // 1 / unmasked positions
  const double* gscale_dev = nullptr;  // the same on the device, used instead when set (inverse_count)
  float* grad = nullptr;   // [n, k] d(mean)/d(pred), or null
  const float* gmul = nullptr;  // one float on the device multiplying grad (the loss scale), or null
  double* sum = nullptr;   // one double: += the per-position losses
  const float* weight = nullptr;  // loss weights (Batch::w), one per weight_per positions, or null
  int64_t weight_per = 1;
};
void loss(const LossArgs& a, cudaStream_t s);
// out = 1 / (the number of nonzero mask[i], i < n), or 0 when there are none: a masked step's loss
// scale, computed on the device so that a captured step does not depend on the host's count.
void inverse_count(const uint8_t* mask, int64_t n, double* out, cudaStream_t s);
// The data-parallel form in two halves, the ranks' sum of counts taken between them:
// count_positions sets *out to the nonzero mask[i] (all n when mask is null), invert_count sets
// *out = 1 / *count (0 when it is 0).
void count_positions(const uint8_t* mask, int64_t n, double* out, cudaStream_t s);
void invert_count(const double* count, double* out, cudaStream_t s);
// Keras' accuracies as the metric sums: sum += per-position hits (binary: the share of the k outputs
// thresholded right; categorical: argmax of target == argmax of pred; sparse: label == argmax).
struct AccuracyArgs {
  AccuracyRule rule = AccuracyRule::Binary;  // resolved: never ByLoss
  float threshold = 0.5f;
  int64_t top_k = 1;
  const float* pred = nullptr;    // [n, k]
  const float* target = nullptr;  // [n, k], or labels [n] when sparse
  const uint8_t* mask = nullptr;  // [n] or null
  int64_t n = 0, k = 0;
  double* sum = nullptr;
};
void accuracy(const AccuracyArgs& a, cudaStream_t s);
// Keras' confusion metrics: adds the unmasked positions' units into the histograms at hist (width
// doubles: the positives', then the negatives'), by spec/confusion.h's rule.
struct ConfusionArgs {
  ConfusionRule rule;
  const float* pred = nullptr;    // [n, k]
  const float* target = nullptr;  // [n, k]
  const uint8_t* mask = nullptr;  // [n] or null
  int64_t n = 0, k = 0;
  double* hist = nullptr;
  int64_t width = 0;
};
void confusion(const ConfusionArgs& a, cudaStream_t s);
// R2Score's sums (MetricForm::Moments): for each unmasked position and unit j, sums[j] += t,
// sums[k + j] += t^2, sums[2k + j] += (t - p)^2.
struct MomentsArgs {
  const float* pred = nullptr;    // [n, k]
  const float* target = nullptr;  // [n, k]
  const uint8_t* mask = nullptr;  // [n] or null
  int64_t n = 0, k = 0;
  double* sums = nullptr;         // [3, k]
};
void moments(const MomentsArgs& a, cudaStream_t s);
// sums[var[i]] += g[i]^2 for var[i] >= 0.
void sum_squares_by_var(const float* g, const int32_t* var, int64_t n, double* sums, cudaStream_t s);
// Keras' weight regularizers: for each element i of variable v = var[i] >= 0 with factors
// l1 = regs[2v], l2 = regs[2v+1]: g[i] += l1 * sign(w) + l2 * (2 * w) (g null: not added) and
// *penalty += l1 * |w| + l2 * w^2 (penalty null: not summed).
void weight_penalty(const float* w, float* g, const int32_t* var, int64_t n, const float* regs, double* penalty,
                    cudaStream_t s);
// Keras' activity regularizers on a layer output y[n] of a batch of b = 1 / inv_b: dy += inv_b * (l1 *
// sign(y) + l2 * (2 * y)), times *gmul when given (the loss scale dy carries) (dy null: not added);
// *sum += inv_b * (l1 * sum|y| + l2 * sum y^2) (sum null: not summed).
void activity_regularizer(const float* y, float* dy, int64_t n, double l1, double l2, double inv_b, const float* gmul,
                          double* sum, cudaStream_t s);
// Keras' weight constraints: w[i] = rules[s](w[i], sqrt(sums[s])) for s = slice[i] >= 0 (sums: each
// slice's sum of squares); nothing when *skip (an fp16 step whose gradients were not finite).
void constrain(float* w, const int32_t* slice, int64_t n, const ConstraintRule* rules, const double* sums,
               const int* skip, cudaStream_t s);
constexpr int kSchedFloats = 6;
// How the optimizer clips a gradient: not, by its variable's factor (clipnorm and global_clipnorm,
// from clip_factors), or to [-clipvalue, clipvalue].
enum class GradClip { None, Factors, Value };
struct OptArgs {
  float* p = nullptr;
  float* g = nullptr;
  const uint32_t* trained = nullptr;  // bit i of word i / 32: element i is trained (not a frozen bias or gap)
  const int32_t* var = nullptr;       // [n] variable ids, for GradClip::Factors only
  float* s[SlotKinds::kMax] = {};  // the slots, in the order of the kind's descriptor, then its scratch
  unsigned copy_slots = 0;         // bit k: slot k starts as the parameter (copied before decay at step 1)
  int64_t n = 0;
  GradClip clip = GradClip::None;
  const float* factors = nullptr;  // per variable (GradClip::Factors)
  float clipvalue = 0.0f;          // GradClip::Value
  // On the device, so that a captured step reads each step's values: the descriptor's StepScalars
  // (lr, k[0..2]), lr * weight_decay (0: none) and 1 at the first step, kSchedFloats floats.
  const float* sched = nullptr;
  const int* skip = nullptr;  // one int on the device: non-zero skips the update (non-finite fp16 grads)
  double* nonfinite = nullptr;  // set to 1 when an updated parameter is inf or NaN (null: not checked)
};
// One update with the rule of spec.kind's descriptor (spec/optimizers/*.h): a kernel per kind.
void optimizer_step(const OptArgs& a, const OptimizerSpec& spec, cudaStream_t s);
// ---- per-tensor optimizers in Keras layout (kernels_per_tensor_optimizers.cu; per_tensor_optimizers.h) ----
struct TensorVar {
  int64_t off = 0, n = 0;        // its elements in the Keras-layout buffers
  int64_t rows = 1, cols = 0;    // a matrix [rows, cols] when factored (Adafactor) or not adamw (Muon)
  int64_t r_off = 0, c_off = 0;  // Adafactor: its row and column moments
  int factored = 0;              // Adafactor: factored moments
  int adamw = 0;                 // Muon: AdamW, not Muon, updates it
  float wd = 0.0f;               // its weight decay (times the learning rate, sched[0])
};
// g[j] = clipped G[pos[j]]; p[j] = P[pos[j]] less its weight decay (a.clip, a.factors by var[j], lr * vars[v].wd).
void tensor_gather(const OptArgs& a, const TensorVar* vars, const int64_t* pos, const int32_t* var, int64_t n, float* g,
                   float* p, cudaStream_t s);
// out[v] = sum of x^2 over variable v's elements, in a fixed order (deterministic, unlike sum_squares_by_var).
void tensor_squares(const float* x, const TensorVar* vars, int64_t nv, double* out, const int* skip, cudaStream_t s);
// Adafactor over variable v (h: its host copy) of the Keras-layout buffers: row and column moments
// (factored) and its sum of r into sums[2 nv + v]; then, for all variables, u into g, velocity into vel.
void adafactor_moments(const TensorVar& h, int v, int64_t nv, const float* g, float* r, float* c, double* sums,
                       float eps1, const float* sched, const int* skip, cudaStream_t s);
void adafactor_velocity(const TensorVar* vars, const int32_t* var, int64_t n, int64_t nv, float* g, const float* r,
                        const float* c, float* vel, const double* sums, float eps1, const float* sched, const int* skip,
                        cudaStream_t s);
// P[pos[j]] = p[j] - max(eps2, rms_v(p)) rho u[j] / max(1, rms_v(u) / clip) (sums: p^2 then u^2 per variable).
void adafactor_apply(const TensorVar* vars, const int32_t* var, const int64_t* pos, int64_t n, int64_t nv,
                     const float* p, const float* u, const double* sums, float eps2, float clip, const float* sched,
                     const int* skip, float* P, double* nonfinite, cudaStream_t s);

// Muon, over all variables: AdamW ones update m, v and write P[pos[j]]; Muon ones update m and leave
// nesterov ? g + momentum m : m in g (sched[1]: AdamW's alpha).
void muon_moments(const TensorVar* vars, const int32_t* var, const int64_t* pos, int64_t n, float* g, const float* p,
                  float* m, float* v, float c1, float c2, float eps, float mu, bool nesterov, const float* sched,
                  const int* skip, float* P, double* nonfinite, cudaStream_t s);
// x[j] /= sqrt(sums[var[j]]) + 1e-7 for the Muon variables (Newton-Schulz's start).
void muon_normalize(const TensorVar* vars, const int32_t* var, int64_t n, float* x, const double* sums, const int* skip,
                    cudaStream_t s);
// P[pos[j]] = p[j] - lr * x[j] * sqrt(max(rows, cols)) * rms_rate for the Muon variables.
void muon_apply(const TensorVar* vars, const int32_t* var, const int64_t* pos, int64_t n, const float* p,
                const float* x, float rms_rate, const float* sched, const int* skip, float* P, double* nonfinite,
                cudaStream_t s);

// Lamb's trust ratio (SlotKinds::trust_ratio): sums[v] and sums[nv + v] hold variable v's sums of p^2 and
// u^2; ratios[v] = sqrt(p2) / sqrt(u2), or 1 when either is 0.
void trust_ratios(const double* sums, int64_t nv, float* ratios, cudaStream_t s);
// p[i] -= ratios[var[i]] * lr * u[i] for var[i] >= 0 (lr: sched[0]); nothing when *skip; *nonfinite = 1
// when an updated value is inf or NaN (null: not checked).
void trust_update(float* p, const float* u, const int32_t* var, int64_t n, const float* ratios, const float* sched,
                  const int* skip, double* nonfinite, cudaStream_t s);

// ---- mixed precision and step control (kernels_mixed.cu) ----
enum ElemType : int { kF32 = 0, kF16 = 1, kBF16 = 2 };
// in [A, C, F] -> out [C, A, F] (batch-major <-> time-major), converting from or to fp32.
void swap01_from_f32(const float* in, void* out, int out_type, int64_t A, int64_t C, int64_t F, cudaStream_t s);
void swap01_to_f32(const void* in, int in_type, float* out, int64_t A, int64_t C, int64_t F, cudaStream_t s);
// out (fp16, or bf16 when bf16) = in; out (fp32) = in, or += in when accumulate.
void to_half(const float* in, void* out, int64_t n, bool bf16, cudaStream_t s);
void from_half(const void* in, float* out, int64_t n, bool bf16, bool accumulate, cudaStream_t s);
// g /= *scale where trained (bits as OptArgs::trained); *found |= 1 when any result is not finite.
void unscale_check(float* g, const uint32_t* trained, int64_t n, const float* scale, int* found, cudaStream_t s);
// The dynamic loss scale after a step: halve on *found, double after `interval` good steps; clears *found.
void update_scale(float* scale, int* good, int* found, int interval, cudaStream_t s);
// factors[nv] from per-variable sums of squares: clipnorm per variable, else global_clipnorm.
void clip_factors(const double* sums, int64_t nv, bool per_variable, double c, float* factors, cudaStream_t s);

}  // namespace rnntrain::cuda::k
