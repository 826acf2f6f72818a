// Keras 3 weight initialisers on host tensors (fill_init), drawing from the one seeded Rng.
// Includes the orthogonal initialiser's Householder QR in double. Not the per-layer layout: params.cpp.
#include <cmath>
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

// Reduced Householder QR of a: [m, n] row-major, m >= n. Returns q: [m, n] with columns sign-fixed
// so that diag(R) >= 0 (Keras: q *= sign(diag(r))).
std::vector<double> orthonormal_columns(std::vector<double> a, int64_t m, int64_t n) {
  std::vector<std::vector<double>> vs(n);  // reflector k acts on rows k..m-1
  std::vector<double> rdiag(n), w(n);
  for (int64_t k = 0; k < n; ++k) {
    double norm = 0.0;
    for (int64_t i = k; i < m; ++i) norm += a[i * n + k] * a[i * n + k];
    norm = std::sqrt(norm);
    if (norm == 0.0) {
      rdiag[k] = 0.0;
      continue;
    }
    const double x0 = a[k * n + k];
    const double alpha = x0 >= 0.0 ? -norm : norm;  // R[k, k]
    std::vector<double>& v = vs[k];
    v.assign(m - k, 0.0);
    for (int64_t i = k; i < m; ++i) v[i - k] = a[i * n + k];
    v[0] -= alpha;
    double vn = 0.0;
    for (double e : v) vn += e * e;
    vn = std::sqrt(vn);
    for (double& e : v) e /= vn;
    // A[k:, k:] -= 2 v (v^T A[k:, k:])
    std::fill(w.begin() + k, w.end(), 0.0);
    for (int64_t i = k; i < m; ++i) {
      const double vi = v[i - k];
      const double* row = &a[i * n];
      for (int64_t j = k; j < n; ++j) w[j] += vi * row[j];
    }
    for (int64_t i = k; i < m; ++i) {
      const double vi = 2.0 * v[i - k];
      double* row = &a[i * n];
      for (int64_t j = k; j < n; ++j) row[j] -= vi * w[j];
    }
    rdiag[k] = alpha;
  }
  // Q = H_0 H_1 ... H_{n-1} I[:, :n], applied from the last reflector to the first.
  std::vector<double> q(m * n, 0.0);
  for (int64_t j = 0; j < n; ++j) q[j * n + j] = 1.0;
  for (int64_t k = n - 1; k >= 0; --k) {
    const std::vector<double>& v = vs[k];
    if (v.empty()) continue;
    std::fill(w.begin(), w.end(), 0.0);
    for (int64_t i = k; i < m; ++i) {
      const double vi = v[i - k];
      const double* row = &q[i * n];
      for (int64_t j = 0; j < n; ++j) w[j] += vi * row[j];
    }
    for (int64_t i = k; i < m; ++i) {
      const double vi = 2.0 * v[i - k];
      double* row = &q[i * n];
      for (int64_t j = 0; j < n; ++j) row[j] -= vi * w[j];
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    if (rdiag[j] >= 0.0) continue;  // sign(0) taken as +1 (a measure-zero event)
    for (int64_t i = 0; i < m; ++i) q[i * n + j] = -q[i * n + j];
  }
  return q;
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
  std::vector<double> a(m * n);
  for (double& e : a) e = rng.normal();
  const std::vector<double> q = orthonormal_columns(std::move(a), m, n);  // [m, n]
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
