// The flat parameter buffer: reservation, placement maps and the host <-> device conversions.
#include "backend/cuda/param_store.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace rnntrain::cuda {

int64_t ParamStore::reserve(int64_t n) {
  if (w_.get()) throw RuntimeError("internal: ParamStore::reserve after allocate");
  const int64_t off = size_;
  size_ += (n + 63) / 64 * 64;
  return off;
}

void ParamStore::allocate() {
  const int64_t n = std::max<int64_t>(size_, 1);
  w_.ensure(n);
  g_.ensure(n);
  CUDA_CHECK(cudaMemsetAsync(w_.get(), 0, sizeof(float) * n, gpu_.stream()));
  CUDA_CHECK(cudaMemsetAsync(g_.get(), 0, sizeof(float) * n, gpu_.stream()));
}

void ParamStore::place(size_t p, int64_t offset) {
  if (maps_.size() <= p) maps_.resize(p + 1);
  maps_[p].offset = offset;
  maps_[p].index.clear();
}

void ParamStore::place(size_t p, std::vector<int64_t> index) {
  if (maps_.size() <= p) maps_.resize(p + 1);
  maps_[p].offset = -1;
  maps_[p].index = std::move(index);
}

void ParamStore::finish(Params& host) {
  const std::vector<Param*> all = host.all();
  if (maps_.size() != all.size())
    throw RuntimeError(fmt::format("internal: the CUDA model placed {} parameters but the model has {}", maps_.size(),
                                   all.size()));
  std::vector<uint32_t> bits(static_cast<size_t>((size_ + 31) / 32 + 1), 0);
  for (size_t p = 0; p < all.size(); ++p) {
    Map& m = maps_[p];
    m.numel = all[p]->value.numel();
    if (m.offset < 0 && static_cast<int64_t>(m.index.size()) != m.numel)
      throw RuntimeError(fmt::format("internal: parameter {} '{}' has {} values but {} were placed", p, all[p]->name,
                                     m.numel, m.index.size()));
    for (int64_t k = 0; k < m.numel; ++k) {
      const int64_t at = m.at(k);
      if (at < 0 || at >= size_ || (bits[at >> 5] >> (at & 31) & 1u))
        throw RuntimeError(fmt::format("internal: parameter {} '{}' element {} placed at {} (size {}), taken or out of "
                                       "range",
                                       p, all[p]->name, k, at, size_));
      bits[at >> 5] |= 1u << (at & 31);
    }
  }
  copy_to_device(trained_.ensure(static_cast<int64_t>(bits.size())), bits.data(), sizeof(uint32_t) * bits.size(),
                 gpu_.stream());
  upload(host);
}

const int32_t* ParamStore::var_ids() {
  if (var_.get()) return var_.get();
  std::vector<int32_t> var(static_cast<size_t>(std::max<int64_t>(size_, 1)), -1);
  for (size_t p = 0; p < maps_.size(); ++p)
    for (int64_t k = 0; k < maps_[p].numel; ++k) var[maps_[p].at(k)] = static_cast<int32_t>(p);
  copy_to_device(var_.ensure(static_cast<int64_t>(var.size())), var.data(), sizeof(int32_t) * var.size(),
                 gpu_.stream());
  gpu_.sync();  // var is a local
  return var_.get();
}

void ParamStore::zero_grad() { CUDA_CHECK(cudaMemsetAsync(g_.get(), 0, sizeof(float) * size_, gpu_.stream())); }

void ParamStore::upload_flat(float* dev, const std::vector<Tensor*>& per_param) {
  std::vector<float> flat(static_cast<size_t>(size_), 0.0f);  // untrained elements stay zero
  for (size_t p = 0; p < maps_.size(); ++p) {
    const Map& m = maps_[p];
    const float* src = per_param[p]->ptr();
    for (int64_t k = 0; k < m.numel; ++k) flat[m.at(k)] = src[k];
  }
  copy_to_device(dev, flat.data(), sizeof(float) * flat.size(), gpu_.stream());
  gpu_.sync();
}

void ParamStore::download_flat(const float* dev, const std::vector<Tensor*>& per_param) {
  std::vector<float> flat(static_cast<size_t>(size_));
  copy_to_host(flat.data(), dev, sizeof(float) * flat.size(), gpu_.stream());
  gpu_.sync();
  for (size_t p = 0; p < maps_.size(); ++p) {
    const Map& m = maps_[p];
    float* dst = per_param[p]->ptr();
    for (int64_t k = 0; k < m.numel; ++k) dst[k] = flat[m.at(k)];
  }
}

void ParamStore::upload(Params& host) {
  std::vector<Tensor*> values;
  for (Param* p : host.all()) values.push_back(&p->value);
  upload_flat(w_.get(), values);
}

void ParamStore::download(Params& host, bool grads) {
  std::vector<Tensor*> values, gs;
  for (Param* p : host.all()) {
    values.push_back(&p->value);
    gs.push_back(&p->grad);
  }
  download_flat(w_.get(), values);
  if (grads) download_flat(g_.get(), gs);
}

}  // namespace rnntrain::cuda
