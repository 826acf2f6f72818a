// libFuzzer target: the .npy parser (data/npy.h) on the bytes as they are, and the .npz loader
// (a zip of .npy members, through load_source) on the same bytes written to a scratch file.
#include "data/dataset.h"
#include "data/npy.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::quiet();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  fuzz::expect_typed_errors([&] { rnntrain::parse_npy(bytes, "fuzz.npy"); });
  if (size >= 4 && data[0] == 'P' && data[1] == 'K') {
    rnntrain::DataSource src;
    src.format = rnntrain::DataFormat::Npz;
    src.path = fuzz::scratch_file(data, size, ".npz");
    src.lengths = "len";
    fuzz::expect_typed_errors([&] {
      rnntrain::DataMeta meta;
      rnntrain::load_source(src, "", meta);
    });
  }
  return 0;
}
