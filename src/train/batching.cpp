// Epoch batches, with and without length bucketing (batching.h).
#include "train/batching.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace rnntrain {

namespace {

template <typename T>
void shuffle(std::vector<T>& v, Rng& rng) {
  for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i)
    std::swap(v[i], v[rng.below(static_cast<uint64_t>(i) + 1)]);
}

// The layer right after the Input, when it decides the mask from the data.
const LayerSpec* masking_layer(const ModelSpec& m) {
  if (m.layers.size() < 2) return nullptr;
  const LayerSpec& l = m.layers[1];
  if ((l.kind == LayerKind::Embedding && l.mask_zero) || l.kind == LayerKind::Masking) return &l;
  return nullptr;
}

}  // namespace

std::vector<int32_t> sample_lengths(const Dataset& d, const ModelSpec& model) {
  if (!d.lengths.empty()) return d.lengths;
  const LayerSpec* l = masking_layer(model);
  if (!l || d.x.shape.size() < 2) return {};
  const int64_t n = d.size(), T = d.x.shape[1], F = d.x.shape.size() > 2 ? d.x.shape[2] : 1;
  const float pad = l->kind == LayerKind::Embedding ? 0.0f : static_cast<float>(l->mask_value);
  std::vector<int32_t> out(static_cast<size_t>(n), 0);
  for (int64_t b = 0; b < n; ++b) {
    const float* row = d.x.data.data() + b * T * F;
    for (int64_t t = T - 1; t >= 0 && !out[b]; --t)
      for (int64_t f = 0; f < F; ++f)
        if (row[t * F + f] != pad) {
          out[b] = static_cast<int32_t>(t + 1);
          break;
        }
  }
  return out;
}

std::string bucketing_blocker(const Config& cfg, const std::vector<int32_t>& lengths) {
  if (!cfg.train.bucketing || !lengths.empty()) return "";
  return fmt::format("{}: train.bucketing groups sequences by length, but this data has no lengths dataset and the "
                     "model no Embedding with mask_zero: true or Masking layer right after its Input; add lengths "
                     "(data.*.lengths) or set train.bucketing: false",
                     cfg.path);
}

int64_t bucket_steps(int64_t longest) {
  int64_t q = 1;  // ends as the power of two in (longest / 16, longest / 8]
  while (q * 16 <= longest) q *= 2;
  return (std::max<int64_t>(longest, 1) + q - 1) / q * q;
}

std::vector<EpochBatch> plan_epoch(const TrainSpec& t, int64_t n, const std::vector<int32_t>& lengths, bool trim,
                                   Rng& rng) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (t.shuffle) shuffle(order, rng);
  const int64_t bs = t.batch_size;
  const bool bucket = t.bucketing && !lengths.empty();
  if (bucket) {
    const int64_t window = t.bucket_window * bs;
    for (int64_t w = 0; w < n; w += window)
      std::stable_sort(order.begin() + w, order.begin() + std::min(n, w + window),
                       [&](int64_t a, int64_t b) { return lengths[a] < lengths[b]; });
  }
  std::vector<EpochBatch> out;
  for (int64_t b = 0; b < n; b += bs) {
    EpochBatch e;
    e.rows.assign(order.begin() + b, order.begin() + std::min(n, b + bs));
    if (bucket && trim) {
      int64_t longest = 0;
      for (int64_t r : e.rows) longest = std::max<int64_t>(longest, lengths[r]);
      e.steps = bucket_steps(longest);
    }
    out.push_back(std::move(e));
  }
  if (bucket && t.shuffle) shuffle(out, rng);
  if (bucket && trim && !out.empty()) {  // the batch with the most steps first: buffers reach their size in step one
    auto cost = [](const EpochBatch& e) { return e.steps * static_cast<int64_t>(e.rows.size()); };
    std::swap(out.front(), *std::max_element(out.begin(), out.end(), [&](const EpochBatch& a, const EpochBatch& b) {
      return cost(a) < cost(b);
    }));
  }
  return out;
}

ResumedEpoch resume_epoch(std::vector<EpochBatch> drawn, int64_t samples, int64_t batch_size, bool same,
                          const std::vector<int32_t>& lengths, bool trim) {
  int64_t k = 0, whole = 0;  // the drawn batches trained whole, and their rows
  while (k < static_cast<int64_t>(drawn.size()) && whole + static_cast<int64_t>(drawn[k].rows.size()) <= samples)
    whole += static_cast<int64_t>(drawn[k++].rows.size());
  if (same && whole == samples) return {std::move(drawn), k, false};
  std::vector<int64_t> rest;  // the rows after the whole batches, in batch order
  for (size_t b = static_cast<size_t>(k); b < drawn.size(); ++b)
    rest.insert(rest.end(), drawn[b].rows.begin(), drawn[b].rows.end());
  drawn.resize(static_cast<size_t>(k));
  auto cut = [&](int64_t from, int64_t to) {
    for (int64_t b = from; b < to; b += batch_size) {
      EpochBatch e;
      e.rows.assign(rest.begin() + b, rest.begin() + std::min(to, b + batch_size));
      if (trim && !lengths.empty()) {
        int64_t longest = 0;
        for (int64_t r : e.rows) longest = std::max<int64_t>(longest, lengths[r]);
        e.steps = bucket_steps(longest);
      }
      drawn.push_back(std::move(e));
    }
  };
  const int64_t trained = std::min(samples - whole, static_cast<int64_t>(rest.size()));
  cut(0, trained);  // rows trained in batches cut anew by an earlier resume: counted, not trained again
  const auto done = static_cast<int64_t>(drawn.size());
  cut(trained, static_cast<int64_t>(rest.size()));
  return {std::move(drawn), done, true};
}

int64_t rows_of(const std::vector<EpochBatch>& batches, int64_t steps) {
  int64_t n = 0;
  for (int64_t s = 0; s < steps && s < static_cast<int64_t>(batches.size()); ++s)
    n += static_cast<int64_t>(batches[s].rows.size());
  return n;
}

uint64_t data_fingerprint(const Dataset& d) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](const void* p, size_t bytes) {  // a word at a time: a few GB/s
    const auto* c = static_cast<const unsigned char*>(p);
    size_t i = 0;
    for (uint64_t w; i + 8 <= bytes; i += 8) {
      std::memcpy(&w, c + i, 8);
      h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < bytes; ++i) h = (h ^ c[i]) * 0x100000001b3ull;
  };
  for (const Tensor* t : {&d.x, &d.y}) {
    for (int64_t s : t->shape) mix(&s, sizeof s);
    mix(t->data.data(), t->data.size() * sizeof(float));
  }
  mix(d.lengths.data(), d.lengths.size() * sizeof(int32_t));
  return h;
}

double padding_share(const std::vector<EpochBatch>& batches, const std::vector<int32_t>& lengths, int64_t T) {
  if (lengths.empty()) return 0.0;
  double used = 0.0, computed = 0.0;
  for (const EpochBatch& b : batches) {
    computed += static_cast<double>(b.rows.size()) * static_cast<double>(b.steps > 0 ? std::min(b.steps, T) : T);
    for (int64_t r : b.rows) used += lengths[r];
  }
  return computed > 0 ? 1.0 - used / computed : 0.0;
}

Batch gather_batch(const Dataset& d, const EpochBatch& e, bool y_has_time) {
  Batch b = d.gather(e.rows);
  const int64_t T = b.x.shape.size() > 1 ? b.x.shape[1] : 0;
  if (e.steps <= 0 || e.steps >= T) return b;
  // Keeps the first `steps` of axis 1 of a [B, T, ...] tensor.
  auto trim = [&](Tensor& t) {
    const int64_t B = t.shape[0];
    if (B == 0) {  // a data-parallel rank's empty share of a small batch
      t.shape[1] = e.steps;
      return;
    }
    const int64_t inner = t.numel() / (B * T), keep = e.steps * inner;
    for (int64_t i = 0; i < B; ++i)
      std::copy(t.data.begin() + i * T * inner, t.data.begin() + i * T * inner + keep, t.data.begin() + i * keep);
    t.data.resize(static_cast<size_t>(B * keep));
    t.shape[1] = e.steps;
  };
  trim(b.x);
  if (y_has_time && b.y.shape.size() > 1 && b.y.shape[1] == T) trim(b.y);
  if (y_has_time && b.w.shape.size() > 1 && b.w.shape[1] == T) trim(b.w);
  return b;
}

void weigh_classes(Batch& b, const std::map<int64_t, double>& weights, bool sparse, int64_t units) {
  const int64_t per = sparse || units < 1 ? 1 : units, n = b.y.numel() / per, B = b.size();
  b.w = Tensor(n == B || B == 0 ? Shape{n} : Shape{B, n / B});
  for (int64_t i = 0; i < n; ++i) {
    const float* t = b.y.ptr() + i * per;
    int64_t c = 0;
    if (per > 1) {
      for (int64_t j = 1; j < per; ++j)
        if (t[j] > t[c]) c = j;
    } else {
      c = static_cast<int64_t>(std::lround(t[0]));
    }
    const auto it = weights.find(c);
    b.w[i] = it == weights.end() ? 1.0f : static_cast<float>(it->second);
  }
}

}  // namespace rnntrain
