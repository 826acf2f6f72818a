// Host tensors: a dense, row-major float32 array with a shape. Token ids and labels are stored as
// floats too (exact below 2^24). Not a device tensor and not a view: it owns its data.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rnntrain {

using Shape = std::vector<int64_t>;  // -1 stands for an unknown dimension (None) in specs only

int64_t shape_numel(const Shape& s);  // -1 counts as 0; DataError when the count overflows int64
std::string shape_str(const Shape& s);  // "(None, 20, 8)" style, Keras-like

struct Tensor {
  Shape shape;
  std::vector<float> data;

  Tensor() = default;
  explicit Tensor(Shape s, float fill = 0.0f) : shape(std::move(s)), data(shape_numel(shape), fill) {}

  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
  float* ptr() { return data.data(); }
  const float* ptr() const { return data.data(); }
  float& operator[](int64_t i) { return data[i]; }
  float operator[](int64_t i) const { return data[i]; }
  void zero() { std::fill(data.begin(), data.end(), 0.0f); }
  bool empty() const { return data.empty() && shape.empty(); }
};

}  // namespace rnntrain
