// libFuzzer target: the HDF5 weights and checkpoint readers (io/checkpoint.h) against one small
// fixed model (Embedding, LSTM, Bidirectional GRU, Dense, so every weight layout is read) and an
// SGD-with-momentum optimizer's slots. The input is written to a scratch .h5 file.
#include "fuzz_util.h"
#include "io/checkpoint.h"
#include "spec/parse.h"

namespace {

// The model of tests/fuzz/make_seeds.py's checkpoint seeds (keep the two in step).
constexpr const char* kModel = R"(model:
  layers:
    - {type: Input, shape: [6]}
    - {type: Embedding, input_dim: 9, output_dim: 3}
    - {type: LSTM, units: 4, return_sequences: true}
    - {type: Bidirectional, layer: {type: GRU, units: 2}}
    - {type: Dense, units: 8}
data:
  train: {format: synthetic, task: classify, samples: 16, timesteps: 6, seed: 1}
train:
  epochs: 1
  batch_size: 8
  optimizer: {type: sgd, learning_rate: 0.1, momentum: 0.9}
  loss: {type: sparse_categorical_crossentropy, from_logits: true}
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::quiet();
  static const rnntrain::Config cfg = rnntrain::parse_config(kModel, "fuzz_model.yaml");
  const std::string path = fuzz::scratch_file(data, size, ".h5");
  rnntrain::Rng rng(0);
  rnntrain::Params params = rnntrain::init_params(cfg.model, rng);
  fuzz::expect_typed_errors([&] { rnntrain::load_weights(path, cfg.model, params); });
  std::vector<rnntrain::Tensor> momentum;
  for (rnntrain::Param* p : params.all()) momentum.push_back(p->value);
  rnntrain::OptimizerSlots slots;
  for (size_t i = 0; i < momentum.size(); ++i) slots.emplace_back("momentum/" + std::to_string(i), &momentum[i]);
  fuzz::expect_typed_errors([&] { rnntrain::load_checkpoint(path, cfg.model, params, slots); });
  return 0;
}
