// Keras 3 losses with their gradients: per position the descriptor's value (spec/losses/*.h: the
// mean over the last axis of a per-element loss, or a per-row loss over classes); then the mean over
// unmasked positions ("sum_over_batch_size" with Keras 3's mask normalisation). Not the metrics.
#include "model/loss.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "model/targets.h"

namespace rnntrain {

int64_t positions_per_weight(const Tensor& w, int64_t n) {
  if (w.numel() == 0 || n % w.numel() != 0)
    throw DataError(fmt::format("sample weights of shape {} do not fit {} output positions: give one weight per sample "
                                "or per sample and timestep", shape_str(w.shape), n));
  return n / w.numel();
}

LossValue compute_loss(const LossSpec& spec, const Tensor& pred, const Tensor& target, const Tensor* mask,
                       Tensor* dpred, const Tensor* weight, const ChunkRunner* chunks) {
  const char* who = loss_name(spec.kind);
  const bool sparse = loss_info(spec.kind).targets == Targets::Labels;
  const TargetView v = sparse ? check_sparse_targets(who, pred, target, mask)
                              : check_dense_targets(who, pred, target, mask);
  if (dpred) {
    dpred->shape = pred.shape;
    dpred->data.assign(pred.data.size(), 0.0f);
  }
  // The mean over unmasked positions. No valid position (everything masked) gives a zero loss and
  // gradient, as Keras' divide_no_nan.
  double count = 0.0;
  for (int64_t i = 0; i < v.n; ++i) count += mask_weight(mask, i);
  const double gscale = count > 0 ? 1.0 / count : 0.0;
  const LossParams params = loss_params(spec);
  const int64_t K = v.k;
  const double inv_k = 1.0 / static_cast<double>(K);
  const int64_t per = weight ? positions_per_weight(*weight, v.n) : 1;

  // pred: [N, K]; target: [N, K] or labels [N]; mask: [N]. Masked positions keep a zero gradient.
  std::vector<double> sums(static_cast<size_t>((v.n + kLossChunk - 1) / kLossChunk), 0.0);
  auto run = [&](int64_t c0, int64_t c1) {
    with_loss(spec.kind, [&](auto d) {
      using D = decltype(d);
      for (int64_t i = c0 * kLossChunk; i < std::min(v.n, c1 * kLossChunk); ++i) {
        if (mask_weight(mask, i) == 0.0) continue;
        const double w = weight ? static_cast<double>((*weight)[i / per]) : 1.0;
        const float* p = pred.ptr() + i * K;
        float* g = dpred ? dpred->ptr() + i * K : nullptr;
        double& sum = sums[static_cast<size_t>(i / kLossChunk)];
        if constexpr (D::kRows) {
          const float* t = sparse ? nullptr : target.ptr() + i * K;
          const int64_t label = sparse ? checked_label(who, pred, target, i, K) : -1;
          sum += w * D::row(p, t, label, K, params, g, gscale * w);
        } else {
          const float* t = target.ptr() + i * K;
          double row = 0.0;
          for (int64_t j = 0; j < K; ++j) {
            double l = 0.0, dl = 0.0;
            D::element(static_cast<double>(p[j]), static_cast<double>(t[j]), params, l, dl);
            row += l;
            if (g) g[j] = static_cast<float>(dl * inv_k * gscale * w);
          }
          sum += w * row * inv_k;
        }
      }
    });
  };
  run_chunks(v.n * K >= kLossWide ? chunks : nullptr, static_cast<int64_t>(sums.size()), run);
  LossValue out;
  for (double s : sums) out.sum += s;
  out.count = count;
  return out;
}

}  // namespace rnntrain
