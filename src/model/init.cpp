// Keras 3 weight initialisers on host tensors (fill_init), drawing from the one seeded Rng.
// Includes the orthogonal initialiser's Householder QR in double. Not the per-layer layout: params.cpp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "model/params.h"

namespace rnntrain {
namespace {

// Keras' compute_fans: scalar 1/1, vector n/n, matrix rows/cols, higher ranks times the receptive field.
void compute_fans(const Shape& s, double& fan_in, double& fan_out) {
  if (s.empty()) {
    fan_in = fan_out = 1.0;
  } else if (s.size() == 1) {
    fan_in = fan_out = static_cast<double>(s[0]);
  } else if (s.size() == 2) {
    fan_in = static_cast<double>(s[0]);
    fan_out = static_cast<double>(s[1]);
  } else {
    double rf = 1.0;
    for (size_t i = 0; i + 2 < s.size(); ++i) rf *= static_cast<double>(s[i]);
    fan_in = static_cast<double>(s[s.size() - 2]) * rf;
    fan_out = static_cast<double>(s.back()) * rf;
  }
}

void fill_uniform(Tensor& t, double lo, double hi, Rng& rng) {
  for (float& v : t.data) v = static_cast<float>(rng.uniform(lo, hi));
}

// Keras' truncated normal: values more than two standard deviations from the mean are redrawn.
void fill_truncated_normal(Tensor& t, double stddev, Rng& rng) {
  for (float& v : t.data) {
    double z = rng.normal();
    while (std::fabs(z) > 2.0) z = rng.normal();
    v = static_cast<float>(z * stddev);
  }
}

// Dot product with eight partial sums: vectorises (SIMD lanes = partial sums) without reassociation flags.
double dot(const double* a, const double* b, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  for (; i < n; ++i) acc[0] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// x -= (2 v.x) v for a unit vector v of length n: one Householder reflection of one column.
void reflect(const double* v, double* x, int64_t n) {
  const double w = 2.0 * dot(v, x, n);
  for (int64_t i = 0; i < n; ++i) x[i] -= w * v[i];
}

// Reduced Householder QR of a: [m, n] column-major (column j at a[j*m]), m >= n. Returns q: [m, n]
// row-major with columns sign-fixed so that diag(R) >= 0 (Keras: q *= sign(diag(r))). Working on
// whole columns keeps each reflection in cache: about 4 m n^2 flops (~0.5 s for (2048, 512)).
std::vector<double> orthonormal_columns(std::vector<double> a, int64_t m, int64_t n) {
  std::vector<double> rdiag(n, 0.0);
  std::vector<uint8_t> has_reflector(n, 0);
  for (int64_t k = 0; k < n; ++k) {
    double* v = &a[k * m + k];  // column k, rows k..m-1: becomes the unit reflector v_k
    const int64_t len = m - k;
    const double norm = std::sqrt(dot(v, v, len));
    if (norm == 0.0) continue;
    const double alpha = v[0] >= 0.0 ? -norm : norm;  // R[k, k]
    v[0] -= alpha;
    const double vn = std::sqrt(dot(v, v, len));
    for (int64_t i = 0; i < len; ++i) v[i] /= vn;
    for (int64_t j = k + 1; j < n; ++j) reflect(v, &a[j * m + k], len);
    rdiag[k] = alpha;
    has_reflector[k] = 1;
  }
  // Q = H_0 H_1 ... H_{n-1} I[:, :n], column by column; H_k leaves columns j < k untouched.
  std::vector<double> q(m * n, 0.0);  // column-major
  for (int64_t j = 0; j < n; ++j) q[j * m + j] = 1.0;
  for (int64_t k = n - 1; k >= 0; --k) {
    if (!has_reflector[k]) continue;
    for (int64_t j = k; j < n; ++j) reflect(&a[k * m + k], &q[j * m + k], m - k);
  }
  std::vector<double> out(m * n);
  for (int64_t j = 0; j < n; ++j) {
    const double sign = rdiag[j] < 0.0 ? -1.0 : 1.0;  // sign(0) taken as +1 (a measure-zero event)
    for (int64_t i = 0; i < m; ++i) out[i * n + j] = sign * q[j * m + i];
  }
  return out;
}

// Keras' Orthogonal: QR of a normal (max, min) matrix, transposed when rows < cols, times gain.
void fill_orthogonal(Tensor& t, double gain, Rng& rng) {
  if (t.rank() < 2)
    throw ConfigError(fmt::format("the orthogonal initializer needs a weight of rank 2 or more, not shape {}; "
                                  "use another initializer for it (e.g. zeros or glorot_uniform)",
                                  shape_str(t.shape)));
  int64_t rows = 1;
  for (int i = 0; i + 1 < t.rank(); ++i) rows *= t.shape[i];
  const int64_t cols = t.shape.back();
  const int64_t m = std::max(rows, cols), n = std::min(rows, cols);
  std::vector<double> a(m * n);  // column-major; drawn in row-major order of the (m, n) matrix
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) a[j * m + i] = rng.normal();
  const std::vector<double> q = orthonormal_columns(std::move(a), m, n);  // [m, n] row-major
  if (rows >= cols) {
    for (int64_t i = 0; i < m * n; ++i) t.data[i] = static_cast<float>(gain * q[i]);
  } else {
    // t: [rows = n, cols = m] = q^T
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < m; ++c) t.data[r * m + c] = static_cast<float>(gain * q[c * n + r]);
  }
}

}  // namespace

void fill_init(Tensor& t, const Initializer& init, Rng& rng) {
  constexpr double kTruncatedStd = 0.87962566103423978;  // stddev of a unit normal truncated at +-2
  double fan_in = 1.0, fan_out = 1.0;
  compute_fans(t.shape, fan_in, fan_out);
  const double fan_avg = std::max(1.0, (fan_in + fan_out) / 2.0);
  fan_in = std::max(1.0, fan_in);
  switch (init.kind) {
    case InitKind::Zeros: std::fill(t.data.begin(), t.data.end(), 0.0f); break;
    case InitKind::Ones: std::fill(t.data.begin(), t.data.end(), 1.0f); break;
    case InitKind::Constant: std::fill(t.data.begin(), t.data.end(), static_cast<float>(init.a)); break;
    case InitKind::GlorotUniform: {
      const double limit = std::sqrt(3.0 / fan_avg);  // = sqrt(6 / (fan_in + fan_out))
      fill_uniform(t, -limit, limit, rng);
      break;
    }
    case InitKind::GlorotNormal: fill_truncated_normal(t, std::sqrt(1.0 / fan_avg) / kTruncatedStd, rng); break;
    case InitKind::HeUniform: {
      const double limit = std::sqrt(6.0 / fan_in);
      fill_uniform(t, -limit, limit, rng);
      break;
    }
    case InitKind::HeNormal: fill_truncated_normal(t, std::sqrt(2.0 / fan_in) / kTruncatedStd, rng); break;
    case InitKind::LecunUniform: {
      const double limit = std::sqrt(3.0 / fan_in);
      fill_uniform(t, -limit, limit, rng);
      break;
    }
    case InitKind::Orthogonal: fill_orthogonal(t, init.a, rng); break;
    case InitKind::RandomUniform: fill_uniform(t, init.a, init.b, rng); break;
    case InitKind::RandomNormal:
      for (float& v : t.data) v = static_cast<float>(init.a + init.b * rng.normal());
      break;
  }
}

}  // namespace rnntrain
