// NCCL behind Nccl (nccl.h); without RNNTRAIN_WITH_NCCL every call says that this build has none.
#include "backend/cuda/nccl.h"

#include <fmt/format.h>

#include "backend/cuda/api_errors.h"
#include "core/error.h"
#include "dist/comm.h"

#ifdef RNNTRAIN_WITH_NCCL
#include <nccl.h>
#endif

namespace rnntrain::cuda {

#ifdef RNNTRAIN_WITH_NCCL

#define NCCL_CHECK(call)                                                                                \
  do {                                                                                                  \
    const ncclResult_t rnntrain_r_ = (call);                                                            \
    if (rnntrain_r_ != ncclSuccess)                                                                     \
      throw RuntimeError(fmt::format("NCCL: {} failed: {} ({}:{})", #call, ncclGetErrorString(rnntrain_r_), \
                                     __FILE__, __LINE__));                                              \
  } while (0)

std::string nccl_unavailable_reason() { return ""; }

struct Nccl::Impl {
  ncclComm_t comm = nullptr;
};

Nccl::Nccl(Comm& comm) : impl_(std::make_unique<Impl>()), ranks_(comm.size()) {
  ncclUniqueId id{};
  if (comm.root()) NCCL_CHECK(ncclGetUniqueId(&id));
  comm.broadcast(&id, sizeof id);
  NCCL_CHECK(ncclCommInitRank(&impl_->comm, comm.size(), id, comm.rank()));
}

Nccl::~Nccl() {
  if (impl_->comm) (void)ncclCommDestroy(impl_->comm);
}

void Nccl::sum(float* data, int64_t n, cudaStream_t s) {
  NCCL_CHECK(ncclAllReduce(data, data, static_cast<size_t>(n), ncclFloat32, ncclSum, impl_->comm, s));
}

void Nccl::sum(double* data, int64_t n, cudaStream_t s) {
  NCCL_CHECK(ncclAllReduce(data, data, static_cast<size_t>(n), ncclFloat64, ncclSum, impl_->comm, s));
}

void Nccl::broadcast(float* data, int64_t n, cudaStream_t s) {
  NCCL_CHECK(ncclBroadcast(data, data, static_cast<size_t>(n), ncclFloat32, 0, impl_->comm, s));
}

void Nccl::begin() { NCCL_CHECK(ncclGroupStart()); }
void Nccl::end() { NCCL_CHECK(ncclGroupEnd()); }

std::string Nccl::version() const {
  int v = 0;
  NCCL_CHECK(ncclGetVersion(&v));
  return fmt::format("NCCL {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

#else

std::string nccl_unavailable_reason() {
  return "this rnntrain was built without NCCL (CMake found no nccl.h and libnccl), so its GPU processes cannot "
         "train together; rebuild where NCCL is installed, or train with device: cpu under mpirun";
}

struct Nccl::Impl {};
Nccl::Nccl(Comm&) { throw UsageError(nccl_unavailable_reason()); }
Nccl::~Nccl() = default;
void Nccl::sum(float*, int64_t, cudaStream_t) {}
void Nccl::sum(double*, int64_t, cudaStream_t) {}
void Nccl::broadcast(float*, int64_t, cudaStream_t) {}
void Nccl::begin() {}
void Nccl::end() {}
std::string Nccl::version() const { return ""; }

#endif

}  // namespace rnntrain::cuda
