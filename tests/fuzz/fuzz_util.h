// Shared by the libFuzzer targets of tests/fuzz: run a reader and swallow rnntrain's typed errors
// (the ones cli/ maps to exit codes 1 and 2). Any other exception escapes, std::terminate aborts,
// and libFuzzer reports the input. Not a test framework: one helper and a scratch file.
#pragma once
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/log.h"

namespace fuzz {

// Runs f; rnntrain's own error types are the expected outcome for bad input.
template <typename F>
void expect_typed_errors(F&& f) {
  try {
    f();
  } catch (const rnntrain::UsageError&) {
  } catch (const rnntrain::DataError&) {
  } catch (const rnntrain::RuntimeError&) {
  }
}

// Also caps the HDF5 structure probe at 1 s: a file that loops libhdf5 is refused well within the
// fuzzer's 10 s per input (src/io/h5_probe.cpp).
inline void quiet() {
  static const bool once = (rnntrain::set_log_level(rnntrain::LogLevel::Off),
                            setenv("RNNTRAIN_H5_PROBE_SECONDS", "1", 0), true);
  (void)once;
}

// Writes the input to a per-process scratch file ending in `suffix` (the readers take paths) and
// returns its path; the same path is reused for every input.
inline std::string scratch_file(const uint8_t* data, size_t size, const std::string& suffix) {
  const char* dir = getenv("TMPDIR");
  const std::string path = std::string(dir && *dir ? dir : "/tmp") + "/rnntrain_fuzz_" + std::to_string(getpid()) + suffix;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
  return path;
}

}  // namespace fuzz
