// libFuzzer target: the Keras model JSON reader (io/keras_model.h), as for a .keras config.json or a
// legacy .h5 model_config, then shape inference as import does. Text that is not JSON is skipped:
// the readers parse with their own error handling (keras_file.cpp parse_json).
#include "fuzz_util.h"
#include "io/keras_model.h"
#include "spec/shapes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::quiet();
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  for (const char* version : {"3.15.1", "2.15.0"}) {
    fuzz::expect_typed_errors([&] {
      const rnntrain::ModelSpec m = rnntrain::model_from_keras_json(j, rnntrain::KerasOrigin{"fuzz.json", version});
      rnntrain::infer_shapes(m);
    });
  }
  return 0;
}
