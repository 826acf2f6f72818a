// The structure probe run before a file is opened for reading (detail::probe_structure). libhdf5
// 1.10 trusts the metadata of the files it reads: a damaged or forged file can make it read through
// a null pointer or allocate sizes taken from the file (tests/fuzz/findings). So a child process
// walks the file first, every link, object header and attribute, the metadata the reader will
// touch; if HDF5 kills the child, this process never opens the file. Raw data is not read here.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/h5_detail.h"

namespace rnntrain::h5::detail {

// The sanitizers' runtime, where the build has one (null otherwise).
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace {

herr_t read_attribute(hid_t obj, const char* name, const H5A_info_t*, void*) {
  const hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  if (a < 0) return 0;
  const hid_t type = H5Aget_type(a), space = H5Aget_space(a);
  const hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
  const size_t size = type >= 0 ? H5Tget_size(type) : 0;
  if (n > 0 && size > 0 && H5Tget_class(type) != H5T_STRING && static_cast<size_t>(n) <= (size_t{1} << 26) / size) {
    std::vector<char> buf(static_cast<size_t>(n) * size);
    H5Aread(a, type, buf.data());
  }
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  H5Aclose(a);
  return 0;
}

herr_t collect_name(hid_t, const char* name, const H5L_info_t* info, void* out) {
  auto* links = static_cast<std::vector<std::pair<std::string, H5L_type_t>>*>(out);
  links->emplace_back(name, info->type);
  return 0;
}

// seen: object addresses, as a file may link a group into itself.
void walk(hid_t obj, int depth, std::set<haddr_t>& seen) {
  H5O_info_t info;
  if (H5Oget_info2(obj, &info, H5O_INFO_BASIC) < 0 || !seen.insert(info.addr).second) return;
  H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, read_attribute, nullptr);
  if (info.type == H5O_TYPE_DATASET) {  // what reading it first asks for: type, shape, layout
    for (hid_t id : {H5Dget_type(obj), H5Dget_space(obj), H5Dget_create_plist(obj)})
      if (id >= 0) H5Idec_ref(id);
    return;
  }
  if (info.type != H5O_TYPE_GROUP || depth > 64) return;
  // Iterating a group and looking a name up in it take different paths through its index: look up
  // every child, a name just after each and one before all (every branch of the search), and the
  // names readers ask for, whether or not they are there. A child that fails is skipped, not the rest.
  std::vector<std::pair<std::string, H5L_type_t>> links;
  H5Literate(obj, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_name, &links);
  for (const char* name : {"\x01", "\x7f", "layers", "vars", "model_weights", "optimizer_weights", "rnntrain", "x", "y"})
    H5Lexists(obj, name, H5P_DEFAULT);
  for (const auto& [name, type] : links) {
    H5Lexists(obj, (name + "\x01").c_str(), H5P_DEFAULT);
    if (type != H5L_TYPE_HARD || H5Lexists(obj, name.c_str(), H5P_DEFAULT) <= 0) continue;
    const hid_t child = H5Oopen(obj, name.c_str(), H5P_DEFAULT);
    if (child < 0) continue;
    walk(child, depth + 1, seen);
    H5Oclose(child);
  }
}

[[noreturn]] void probe_in_child(const std::string& path) {
  // A crash here should just end this process: no handler of the parent's (a sanitizer's, a
  // fuzzer's) reports it or writes files, and nothing is printed; the parent reports the file. A
  // sanitizer's own report (of libhdf5's reads) ends through its death callback, where libFuzzer
  // writes a reproducer of a crash the parent survives: the child has none.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(nullptr);
  if (const int null = ::open("/dev/null", O_WRONLY); null >= 0) ::dup2(null, STDERR_FILENO);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) ::_exit(0);  // the reader reports why, with its own message
  std::set<haddr_t> seen;
  const hid_t root = H5Gopen2(f, "/", H5P_DEFAULT);
  if (root >= 0) walk(root, 0, seen);
  ::_exit(0);
}

}  // namespace

void probe_structure(const std::string& path) {
  // One probe per file and version: readers open the same file several times.
  static std::set<std::tuple<std::string, off_t, int64_t, int64_t>> probed;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // the reader says why it cannot open it
  const auto key = std::make_tuple(path, st.st_size, static_cast<int64_t>(st.st_mtim.tv_sec),
                                   static_cast<int64_t>(st.st_mtim.tv_nsec));
  if (probed.count(key)) return;
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t pid = ::fork();
  if (pid < 0) return;  // no process to spare: the reader goes ahead unprotected
  if (pid == 0) probe_in_child(path);
  int status = 0;
  // Some forged files send libhdf5 round a loop for ever (tests/fuzz/findings: timeout-*). A real
  // file's structure takes milliseconds; RNNTRAIN_H5_PROBE_SECONDS shortens the wait (the fuzzers).
  long limit = 120;
  if (const char* env = std::getenv("RNNTRAIN_H5_PROBE_SECONDS"); env && std::atol(env) > 0) limit = std::atol(env);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit);
  for (pid_t r; (r = ::waitpid(pid, &status, WNOHANG)) == 0;) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      throw DataError(fmt::format("{}: reading this HDF5 file's structure did not finish in {} s; it is damaged or "
                                  "not what it claims to be. Re-create it (for a checkpoint, use the previous one).",
                                  path, limit));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // The child exits 0 by itself, whatever HDF5 says of the file; anything else is a crash (under a
  // sanitizer or libFuzzer a crash is an exit status, not a signal).
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw DataError(fmt::format("{}: this HDF5 file is damaged: reading its structure crashed the HDF5 library ({}, "
                                "in a separate process). Re-create it (for a checkpoint, use the previous one).",
                                path, WIFSIGNALED(status) ? strsignal(WTERMSIG(status))
                                                          : fmt::format("exit status {}", WEXITSTATUS(status))));
  probed.insert(key);
}

}  // namespace rnntrain::h5::detail
