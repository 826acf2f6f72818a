// The ranks of a data-parallel run on their GPUs (issue 14): one NCCL communicator over the MPI
// world, one GPU per rank, its unique id sent from rank 0 through MPI (as Horovod and Marian set it
// up). Every call is enqueued on a stream, so a training step's all-reduces are captured in its CUDA
// graph with the rest of the step. Built when CMake finds NCCL (RNNTRAIN_WITH_NCCL).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

namespace rnntrain {
class Comm;
}

namespace rnntrain::cuda {

// "" when this build can all-reduce across GPUs; otherwise why not, for the user.
std::string nccl_unavailable_reason();

class Nccl {
 public:
  // Collective: every rank of `comm` constructs one, after its device is selected.
  explicit Nccl(Comm& comm);
  ~Nccl();
  Nccl(const Nccl&) = delete;
  Nccl& operator=(const Nccl&) = delete;

  int ranks() const { return ranks_; }
  // In place on the device: every rank ends with the elementwise sum.
  void sum(float* data, int64_t n, cudaStream_t s);
  void sum(double* data, int64_t n, cudaStream_t s);
  // In place on the device: every rank ends with rank 0's data.
  void broadcast(float* data, int64_t n, cudaStream_t s);
  // The sums between begin() and end() are launched as one NCCL group (one kernel for all).
  void begin();
  void end();
  std::string version() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int ranks_ = 1;
};

}  // namespace rnntrain::cuda
