// libFuzzer target: the YAML config reader (spec/parse.h) and shape inference on what it accepts.
#include "fuzz_util.h"
#include "spec/parse.h"
#include "spec/shapes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::quiet();
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_typed_errors([&] {
    const rnntrain::Config cfg = rnntrain::parse_config(text, "fuzz.yaml");
    rnntrain::infer_shapes(cfg.model);
  });
  return 0;
}
