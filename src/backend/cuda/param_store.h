// Every trainable parameter of a model in one flat device buffer: values, gradients and one bit per
// element saying whether it is trained (not one of cuDNN's frozen recurrent biases or an alignment
// gap); per-element variable ids only when clipping asks for them. cuDNN stacks get sub-ranges as their weight space, so the optimizer is
// one kernel over the whole buffer. Host Params <-> device conversion happens here, at load and save.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gpu.h"
#include "model/params.h"

namespace rnntrain::cuda {

class ParamStore {
 public:
  explicit ParamStore(Gpu& gpu) : gpu_(gpu) {}

  // 1. Reserve n floats (aligned to 256 bytes); returns their offset.
  int64_t reserve(int64_t n);
  // 2. Allocate the buffers, zeroed.
  void allocate();
  // 3. Where parameter p (Params::all() order) lives: contiguous from offset, or element k at index[k].
  void place(size_t p, int64_t offset);
  void place(size_t p, std::vector<int64_t> index);
  // 4. Check every parameter is placed (shapes from host), build the trained bits, upload the values.
  void finish(Params& host);

  float* w() const { return w_.get(); }
  float* g() const { return g_.get(); }
  const uint32_t* trained() const { return trained_.get(); }  // bit i of word i / 32
  // The Keras variable (Params::all() index) of each element, -1 where not trained: made and
  // uploaded on the first call (4 bytes per parameter, so only clipping by norm asks for them).
  const int32_t* var_ids();
  int64_t size() const { return size_; }
  size_t variables() const { return maps_.size(); }
  // Where element k of parameter p (Params::all() order, Keras layout) lives.
  int64_t position(size_t p, int64_t k) const { return maps_[p].at(k); }
  void zero_grad();

  // Values (and, when asked, gradients) between host Params and the device.
  void upload(Params& host);
  void download(Params& host, bool grads);
  // Any flat buffer parallel to w (optimizer slots): one host tensor per parameter.
  void upload_flat(float* dev, const std::vector<Tensor*>& per_param);
  void download_flat(const float* dev, const std::vector<Tensor*>& per_param);

 private:
  struct Map {
    int64_t offset = -1;         // contiguous placement
    std::vector<int64_t> index;  // or one index per element
    int64_t numel = 0;
    int64_t at(int64_t k) const { return index.empty() ? offset + k : index[k]; }
  };
  Gpu& gpu_;
  int64_t size_ = 0;
  std::vector<Map> maps_;
  DeviceBuffer<float> w_{"parameters"}, g_{"gradients"};
  DeviceBuffer<uint32_t> trained_{"trained parameter bits"};
  DeviceBuffer<int32_t> var_{"parameter ids"};
};

}  // namespace rnntrain::cuda
