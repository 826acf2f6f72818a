// libFuzzer target: the zip reader (io/zip.h) behind .npz and .keras: open, list, size and read
// every member.
#include "fuzz_util.h"
#include "io/zip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::quiet();
  const std::string path = fuzz::scratch_file(data, size, ".zip");
  fuzz::expect_typed_errors([&] {
    rnntrain::ZipReader z(path);
    for (const std::string& name : z.names()) {
      z.has(name);
      z.size(name);
      fuzz::expect_typed_errors([&] { z.read(name); });
    }
  });
  return 0;
}
