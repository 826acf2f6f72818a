// Comm over MPI (RNNTRAIN_WITH_MPI), or a world of one.
#include "dist/comm.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "core/error.h"

#ifdef RNNTRAIN_WITH_MPI
#include <mpi.h>
#endif

namespace rnntrain {

namespace {

// Whether a launcher (Open MPI's mpirun, MPICH's Hydra, Slurm's srun with PMI or PMIx) started us.
// A plain run never initializes MPI, so it behaves exactly as in a build without it.
bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

// How many processes a launcher says it started with this one (1 when none says): mpirun's, Hydra's
// and srun's own counts, whether or not MPI can connect the processes.
int launched_processes() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"})
    if (const char* n = std::getenv(v); n && std::atoi(n) > 1) return std::atoi(n);
  return 1;
}

#ifdef RNNTRAIN_WITH_MPI
void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(fmt::format("{}: {}", what, msg));
}
#endif

}  // namespace

Comm::Comm() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) host_ = host;
  try {
    connect();
  } catch (const std::exception& e) {  // world() reports it; MPI must not be initialized twice
    error_ = e.what();
    rank_ = 0, size_ = 1;
  }
}

void Comm::connect() {
  const int started = launched_processes();
#ifdef RNNTRAIN_WITH_MPI
  if (!launched_by_mpi() && started == 1) return;
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  launched_ = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  MPI_Comm local;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local), "MPI_Comm_split_type");
  check(MPI_Comm_rank(local, &local_rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(local, &local_size_), "MPI_Comm_size");
  MPI_Comm_free(&local);
  std::atexit([] {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
  });
#else
  if (started > 1)
    throw UsageError(fmt::format("a launcher started {} rnntrain processes, but this rnntrain was built without MPI "
                                 "(RNNTRAIN_MPI=OFF or no libopenmpi-dev at build time), so they cannot train "
                                 "together; rebuild with MPI or run one process", started));
#endif
  // Processes that cannot reach each other would each train alone and write the same files.
  if (started > 1 && size_ != started)
    throw UsageError(fmt::format("a launcher started {} rnntrain processes but MPI connects {} of them; under "
                                 "srun give --mpi=pmix (or pmi2) so that MPI can reach the others, or start them "
                                 "with mpirun", started, size_));
}

Comm& Comm::world() {
  static Comm c;
  if (!c.error_.empty()) throw UsageError(c.error_);
  return c;
}

std::string Comm::describe() const {
  if (size_ == 1) return "";
  return fmt::format("rank {} of {} (local {}, host {})", rank_, size_, local_rank_, host_);
}

#ifdef RNNTRAIN_WITH_MPI
namespace {
// MPI counts are int: larger buffers go in parts.
template <typename T>
void sum_in_place(T* data, int64_t n, MPI_Datatype type) {
  constexpr int64_t kPart = int64_t{1} << 30;
  for (int64_t at = 0; at < n; at += kPart)
    check(MPI_Allreduce(MPI_IN_PLACE, data + at, static_cast<int>(std::min(kPart, n - at)), type, MPI_SUM,
                        MPI_COMM_WORLD), "MPI_Allreduce");
}
}  // namespace
#endif

void Comm::allreduce_sum(double* data, int64_t n) {
#ifdef RNNTRAIN_WITH_MPI
  if (size_ > 1) sum_in_place(data, n, MPI_DOUBLE);
#else
  (void)data, (void)n;
#endif
}

void Comm::allreduce_sum(float* data, int64_t n) {
#ifdef RNNTRAIN_WITH_MPI
  if (size_ > 1) sum_in_place(data, n, MPI_FLOAT);
#else
  (void)data, (void)n;
#endif
}

int Comm::max(int v) {
#ifdef RNNTRAIN_WITH_MPI
  if (size_ > 1) check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
#endif
  return v;
}

void Comm::broadcast(void* data, int64_t bytes, int root) {
#ifdef RNNTRAIN_WITH_MPI
  constexpr int64_t kPart = int64_t{1} << 30;
  auto* p = static_cast<char*>(data);
  for (int64_t at = 0; size_ > 1 && at < bytes; at += kPart)
    check(MPI_Bcast(p + at, static_cast<int>(std::min(kPart, bytes - at)), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
#else
  (void)data, (void)bytes, (void)root;
#endif
}

bool Comm::same(int64_t v) {
  int64_t both[2] = {v, -v};  // the largest v and minus the smallest
#ifdef RNNTRAIN_WITH_MPI
  if (size_ > 1) check(MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
#endif
  return both[0] == -both[1];
}

std::vector<uint8_t> Comm::allgather(const void* mine, int bytes) {
  std::vector<uint8_t> all(static_cast<size_t>(bytes) * size_);
  std::copy_n(static_cast<const uint8_t*>(mine), bytes, all.begin() + static_cast<int64_t>(rank_) * bytes);
#ifdef RNNTRAIN_WITH_MPI
  if (size_ > 1)
    check(MPI_Allgather(mine, bytes, MPI_BYTE, all.data(), bytes, MPI_BYTE, MPI_COMM_WORLD), "MPI_Allgather");
#endif
  return all;
}

void Comm::abort(int code) {
#ifdef RNNTRAIN_WITH_MPI
  if (size_ > 1) MPI_Abort(MPI_COMM_WORLD, code);
#else
  (void)code;
#endif
}

Share share_of(int64_t n, int rank, int size) {
  const int64_t base = n / size, extra = n % size;
  Share s;
  s.count = base + (rank < extra ? 1 : 0);
  s.first = rank * base + std::min<int64_t>(rank, extra);
  return s;
}

}  // namespace rnntrain
