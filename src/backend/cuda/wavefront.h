// rnntrain's own multi-layer LSTM/GRU (plan.algo: wavefront): what a cuDNN stack stage calls in
// place of cudnnRNNForward, BackwardData and BackwardWeights when the stack runs on the wavefront
// kernels (kernels_wavefront.cu). The work that does not depend on the previous step runs as cuBLAS
// GEMMs around the kernels: the first layer's input projection for all steps, the input gradient
// and every weight gradient. The weights are FP32 master copies in Keras' own layout (kernel
// [in, G*H], recurrent_kernel [H, G*H], bias), cast to the half type once per step by the stage.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gpu.h"
#include "backend/cuda/wavefront_kernels.h"
#include "plan/gpu_plan.h"
#include "spec/cells.h"

namespace rnntrain::cuda {

struct WavefrontShape {
  LayerKind cell = LayerKind::LSTM;  // LSTM or GRU
  int64_t layers = 1, dirs = 1, input = 0, hidden = 0;
  bool bf16 = true;  // else fp16
  bool reset_after = true;  // GRU: false (Keras 2's GRU) runs on the second design only
};

// Forward passes run by WavefrontRnn in this process (a counter for tests and bench), and those of
// them that ran on the second design's forward kernel; the backward passes on its backward kernel.
int64_t wavefront_passes();
int64_t wavefront2_passes();
int64_t wavefront2_backward_passes();  // backward passes (per launch group) on the second design's kernel

// The planner's question to this GPU (plan/gpu_plan.h): WavefrontRnn::unsupported at batch 1.
OwnKernelCheck own_kernel_check();

class WavefrontRnn {
 public:
  WavefrontRnn(Gpu& gpu, const WavefrontShape& shape);

  // Why the wavefront kernels cannot run this stack with batches of `batch` sequences on this GPU
  // ("" when they can): the cell, the precision, or weights that do not fit in shared memory.
  static std::string unsupported(const WavefrontShape& shape, Precision precision, int64_t batch);

  int64_t weight_elems() const { return size_; }
  struct Offsets {
    int64_t kernel = 0, recurrent = 0, bias = 0;  // in elements from the weights' start
  };
  const Offsets& offsets(int64_t layer, int64_t dir) const { return off_[layer * s_.dirs + dir]; }

  // x: [T, B, I] (half type), lens: [B] on the device (1..T); writes y: [T, B, D*H] and, when not
  // null, hy: [D, B, H], the last layer's final states. wh: the half weights, w: the FP32 ones (the
  // biases are read in FP32). Training keeps what backward needs (and x: it must stay unchanged).
  void forward(int64_t B, int64_t T, const int32_t* lens, const void* x, void* y, void* hy, const void* wh,
               const float* w, bool training);
  // dy: [T, B, D*H]; dhy: [D, B, H] or null; adds the weight gradients into g (FP32, the layout of
  // w) and writes dx: [T, B, I] (half type) unless it is null.
  void backward(const void* dy, const void* dhy, void* dx, const void* wh, float* g);

  // For benchmarks (bench/wavefront_bench.cpp): with events given, a forward pass records ev[0] before
  // its first kernel launch and ev[1] after its last, a backward pass ev[2] and ev[3] (the GEMMs
  // between launch groups fall inside, those before the first and after the last do not), and each
  // counts its wave steps: T + layers - 1 a launch (of batch slices one after the other, or, in the
  // second design, side by side).
  void time_kernels(cudaEvent_t* ev) { ev_ = ev; }
  int64_t forward_waves() const { return fwd_waves_; }
  int64_t backward_waves() const { return bwd_waves_; }

 private:
  struct Group {
    int64_t first = 0, layers = 0;  // consecutive layers run by one launch
    int64_t batch = 0;              // sequences per launch (the batch is cut into slices of this size)
    wf::Split fwd, bwd;
  };
  // A launch of the second design: layers first.. as `cl.rows` clusters for each batch slice of at
  // most 64 sequences, `cl.slices` slices side by side (kernels_wavefront2.cu; split_launches2).
  struct Group2 {
    int64_t first = 0, layers = 0;
    wf::Cluster cl;
  };
  void make_groups(int64_t B);
  std::vector<Group2> groups2(const wf::Cluster& cl, int64_t most_clusters, int64_t B) const;
  void forward2();  // forward() on the second design
  void backward2(const Group2& g2, const void* dy, const void* dhy);  // one group's launches
  void gradients(int64_t first, int64_t layers, void* dx, float* g);  // its GEMMs after them
  // The launch arguments for layers first .. first + layers - 1 and batch rows [b0, b0 + Bs).
  wf::Args args(int64_t first, int64_t layers, int64_t b0, int64_t Bs) const;
  void project_input(int64_t l);  // xproj = layer l's input times its kernel, all steps (cuBLAS)
  const void* layer_input(int64_t l) const;  // [T, B, in_l]: x or the previous layer's outputs
  void* out(int64_t l) const;
  void* hseq(int64_t l) const;
  char* gates(int64_t pr, bool dg) const;  // row pr's saved gates in gates_, or (dg) its gate gradients

  Gpu& gpu_;
  WavefrontShape s_;
  int G_ = 4;
  int64_t Hp_ = 0, GH_ = 0, GHp_ = 0, GP_ = 0, size_ = 0;
  size_t es_ = 2;
  std::vector<Offsets> off_;
  std::vector<Group> groups_;
  std::vector<Group2> groups2_;   // empty: the forward runs on the first design
  std::vector<Group2> groups2b_;  // the same for the backward
  int64_t groups_for_ = -1;  // the batch size groups_ were made for
  cudaEvent_t* ev_ = nullptr;
  int64_t fwd_waves_ = 0, bwd_waves_ = 0;
  // Before a launch of `layers` layers: ev_[first] (once a pass), the wave count; after: ev_[first + 1].
  void before_launch(int64_t layers, bool backward);
  void after_launch(bool backward);
  // per call
  int64_t B_ = 0, T_ = 0;
  bool trained_ = false;
  const int32_t* lens_ = nullptr;
  const void *x_ = nullptr, *wh_ = nullptr;
  const float* w_ = nullptr;
  void* y_ = nullptr;
  void* hy_ = nullptr;
  DeviceBuffer<float> dy32_{"wavefront output gradient"}, colsum_{"wavefront bias sums"};
  DeviceBuffer<char> xproj_{"wavefront input projection"}, out_{"wavefront layer outputs"},
      hseq_{"wavefront padded outputs"}, gates_{"wavefront saved gates and gate gradients"},
      state_{"wavefront saved states"}, dgh_{"wavefront recurrent gate gradients"},
      rh_{"wavefront saved r * h (GRU, reset_after: false)"};
  DeviceBuffer<unsigned> flags_{"wavefront step counters"};
  DeviceBuffer<char> hcore_{"wavefront2 operand copies of h"};
  DeviceBuffer<float> xring_{"wavefront2 input sums"};
  DeviceBuffer<unsigned> done_{"wavefront2 step counters"};
  DeviceBuffer<char> gcore_{"wavefront2 operand copies of dG"};
};

}  // namespace rnntrain::cuda
