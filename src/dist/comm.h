// The processes of a data-parallel run (issue 14): this process's rank among `size`, and the
// collective operations the trainer and the engines need. Launched by mpirun or srun it is MPI's
// world (one process per GPU or CPU socket, as Marian and Horovod run); otherwise, or in a build
// without MPI, a world of one process, where every operation leaves its data as it is.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rnntrain {

class Comm {
 public:
  // The world, set up on first use (MPI_Init only when a launcher started this process). Throws a
  // UsageError, on every call, when the launcher started processes that cannot form one world.
  static Comm& world();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // the rank among this machine's processes
  int local_size() const { return local_size_; }  // this machine's processes of the run
  bool root() const { return rank_ == 0; }
  bool distributed() const { return size_ > 1; }
  // Started by a launcher (mpirun, srun), even as one rank: a training run takes the data-parallel
  // path (on a GPU, NCCL's all-reduce), which mpirun -np 1 checks against a plain run.
  bool launched() const { return launched_; }
  // "rank 1 of 4 (local 1, host gpu07)" for logs; "" in a world of one.
  std::string describe() const;

  // In place, across every process: each ends with the elementwise sum. Blocks until all call it.
  void allreduce_sum(double* data, int64_t n);
  void allreduce_sum(float* data, int64_t n);
  // The largest of every process' v (a world of one: v). Blocks until all call it.
  int max(int v);
  // Root's `bytes` bytes into every other process' `data`. Blocks until all call it.
  void broadcast(void* data, int64_t bytes, int root = 0);
  // Whether every process passed the same v. Blocks until all call it.
  bool same(int64_t v);
  // Every process' `bytes` bytes, in rank order. Blocks until all call it.
  std::vector<uint8_t> allgather(const void* mine, int bytes);
  // Ends every process of the run: a failure in one rank must not leave the others waiting in a
  // collective forever. In a world of one, returns (the caller exits as usual).
  void abort(int code);

 private:
  Comm();
  void connect();
  std::string error_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  bool launched_ = false;
  std::string host_;
};

// This rank's part of n items split into size() contiguous parts as evenly as possible (the first
// n % size parts one larger): [first, first + count).
struct Share {
  int64_t first = 0, count = 0;
};
Share share_of(int64_t n, int rank, int size);

}  // namespace rnntrain
