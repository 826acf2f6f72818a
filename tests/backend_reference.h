// Reference recurrent cells for the backend tests, written from the equations of docs keras-hdf5.md
// section 3 with plain loops in double, independent of the code under test; and a closeness check
// that prints evidence. Not a test itself.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/params.h"
#include "spec/config.h"

namespace rnntrain::testing {

inline double ref_act(Activation a, double x) {
  switch (a) {
    case Activation::Linear: return x;
    case Activation::Tanh: return std::tanh(x);
    case Activation::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Activation::HardSigmoid: return std::clamp(x / 6.0 + 0.5, 0.0, 1.0);
    case Activation::HardSigmoidKeras2: return std::clamp(0.2 * x + 0.5, 0.0, 1.0);
    case Activation::Relu: return std::max(0.0, x);
    case Activation::Softmax: break;
  }
  ADD_FAILURE() << "no elementwise reference for " << activation_name(a);
  return 0.0;
}

struct RefRnn {
  const LayerSpec* spec;
  const Param* kernel;     // [I, G*H]
  const Param* recurrent;  // [H, G*H]
  const Param* bias;       // or null
  bool go_backwards;
  bool zero_masked;
};

// One recurrent direction, batch-major output [B, T, H] (processing order) or [B, H].
inline std::vector<double> ref_rnn(const RefRnn& r, const Tensor& x, const std::vector<int>& mask) {
  const LayerSpec& l = *r.spec;
  const int64_t B = x.dim(0), T = x.dim(1), I = x.dim(2), H = l.units;
  const int G = l.kind == LayerKind::LSTM ? 4 : l.kind == LayerKind::GRU ? 3 : 1;
  const float* W = r.kernel->value.ptr();
  const float* U = r.recurrent->value.ptr();
  const bool two_rows = l.kind == LayerKind::GRU && l.reset_after;
  auto bx = [&](int64_t g) { return r.bias ? static_cast<double>(r.bias->value[g]) : 0.0; };
  auto bh = [&](int64_t g) { return (r.bias && two_rows) ? static_cast<double>(r.bias->value[G * H + g]) : 0.0; };
  std::vector<double> out(l.return_sequences ? B * T * H : B * H, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> h(H, 0.0), c(H, 0.0);
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = r.go_backwards ? T - 1 - s : s;
      const bool used = mask.empty() || mask[b * T + t];
      if (used) {
        std::vector<double> xw(G * H), hu(G * H);  // x@W + b_x, h@U + b_h
        for (int64_t g = 0; g < G * H; ++g) {
          double a = bx(g), q = bh(g);
          for (int64_t i = 0; i < I; ++i) a += x[(b * T + t) * I + i] * static_cast<double>(W[i * G * H + g]);
          for (int64_t k = 0; k < H; ++k) q += h[k] * U[k * G * H + g];
          xw[g] = a;
          hu[g] = q;
        }
        std::vector<double> hn(H);
        if (l.kind == LayerKind::LSTM) {
          for (int64_t j = 0; j < H; ++j) {
            const double ig = ref_act(l.recurrent_activation, xw[j] + hu[j]);
            const double fg = ref_act(l.recurrent_activation, xw[H + j] + hu[H + j]);
            const double gg = ref_act(l.activation, xw[2 * H + j] + hu[2 * H + j]);
            const double og = ref_act(l.recurrent_activation, xw[3 * H + j] + hu[3 * H + j]);
            c[j] = fg * c[j] + ig * gg;
            hn[j] = og * ref_act(l.activation, c[j]);
          }
        } else if (l.kind == LayerKind::GRU) {
          std::vector<double> z(H), rr(H);
          for (int64_t j = 0; j < H; ++j) {
            z[j] = ref_act(l.recurrent_activation, xw[j] + hu[j]);
            rr[j] = ref_act(l.recurrent_activation, xw[H + j] + hu[H + j]);
          }
          for (int64_t j = 0; j < H; ++j) {
            double rec;
            if (l.reset_after) {
              rec = rr[j] * hu[2 * H + j];
            } else {
              rec = 0.0;
              for (int64_t k = 0; k < H; ++k) rec += rr[k] * h[k] * U[k * G * H + 2 * H + j];
            }
            const double hh = ref_act(l.activation, xw[2 * H + j] + rec);
            hn[j] = z[j] * h[j] + (1.0 - z[j]) * hh;
          }
        } else {
          for (int64_t j = 0; j < H; ++j) hn[j] = ref_act(l.activation, xw[j] + hu[j]);
        }
        h = hn;
      }
      if (l.return_sequences)
        for (int64_t j = 0; j < H; ++j) out[(b * T + s) * H + j] = (!used && r.zero_masked) ? 0.0 : h[j];
    }
    if (!l.return_sequences)
      for (int64_t j = 0; j < H; ++j) out[b * H + j] = h[j];
  }
  return out;
}

// Fails (gtest) unless |got - want| <= atol + rtol * |want| everywhere; prints the worst entry and
// the first values.
inline void expect_close_to(const Tensor& got, const std::vector<double>& want, double atol, double rtol,
                            const std::string& what) {
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size()) << what << ": size " << shape_str(got.shape);
  int64_t worst = -1;
  double worst_excess = 0.0;
  for (size_t k = 0; k < want.size(); ++k) {
    const double excess = std::fabs(got[k] - want[k]) - (atol + rtol * std::fabs(want[k]));
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = static_cast<int64_t>(k);
    }
  }
  if (worst < 0) return;
  std::ostringstream first;
  for (size_t k = 0; k < std::min<size_t>(6, want.size()); ++k) first << " (" << got[k] << " vs " << want[k] << ")";
  ADD_FAILURE() << what << ": entry " << worst << " is " << got[worst] << ", expected " << want[worst]
                << "; first values (cpu vs reference):" << first.str();
}

}  // namespace rnntrain::testing
