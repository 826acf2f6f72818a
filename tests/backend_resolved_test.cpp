// A model resolved once (plan/plan.h: ResolvedModel): its weight offsets index the parameters the
// model is initialised with, layer by layer, and the engines refuse parameters made for another
// model with a message naming the layer instead of reading past its weights.
#include <gtest/gtest.h>

#include <string>

#include "backend/cpu/cpu_model.h"
#include "core/error.h"
#include "core/rng.h"
#include "model/params.h"
#include "plan/plan.h"
#include "spec/parse.h"

namespace rnntrain {
namespace {

const char* kModel = R"(model:
  layers:
    - {type: Input, shape: [12]}
    - {type: Embedding, input_dim: 30, output_dim: 5, mask_zero: true}
    - {type: Bidirectional, layer: {type: LSTM, units: 4, return_sequences: true, use_bias: false}}
    - {type: Dropout, rate: 0.1}
    - {type: GRU, units: 3, return_sequences: true}
    - {type: SimpleRNN, units: 2, return_sequences: true}
    - {type: TimeDistributed, layer: {type: Dense, units: 6}}
    - {type: Dense, units: 2, use_bias: false}
)";

TEST(ResolvedModel, WeightOffsetsIndexEveryLayersParameters) {
  const Config cfg = parse_config(kModel, "m.yaml");
  const ResolvedModel m = resolve_model(cfg.model, FuseMode::Auto);
  Rng rng(1);
  Params params = init_params(cfg.model, rng);
  const std::vector<Param*> all = params.all();
  ASSERT_EQ(m.first_weight.size(), cfg.model.layers.size() + 1);
  EXPECT_EQ(m.first_weight.back(), all.size());
  for (size_t i = 0; i < cfg.model.layers.size(); ++i) {
    SCOPED_TRACE(cfg.model.layers[i].name);
    const std::vector<Param>& own = params.layers[i].params;
    EXPECT_EQ(m.first_weight[i + 1] - m.first_weight[i], own.size());
    EXPECT_EQ(m.shapes[i].weights, own.size());
    if (!own.empty()) EXPECT_EQ(all[m.first_weight[i]], &own[0]);
  }
  EXPECT_EQ(m.plan.stages.size(), make_plan(cfg.model, FuseMode::Auto).stages.size());
}

TEST(ResolvedModel, ParametersOfAnotherModelAreRefusedNamingTheLayer) {
  const Config cfg = parse_config(kModel, "m.yaml");
  // 3 weights per direction instead of 2
  const Config with_bias = parse_config(kModel, "m.yaml", {"model.layers.2.layer.use_bias=true"});
  Rng rng(1);
  Params other = init_params(with_bias.model, rng);
  try {
    CpuModel model(cfg.model, other);
    FAIL() << "parameters of another model were taken";
  } catch (const RuntimeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("layer 2 ('bidirectional') are 6 tensors, the model's layer has 4"), std::string::npos) << what;
    EXPECT_NE(what.find("not made for this model"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace rnntrain
