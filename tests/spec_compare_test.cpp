// Models compared setting by setting (what --resume refuses, and what it names), and autotuning's
// cache key: equal for the same settings however they were written, different when anything the
// measured choice depends on changes.
#include <gtest/gtest.h>

#include <string>

#include "spec/compare.h"
#include "spec/parse.h"

namespace rnntrain {
namespace {

const char* kModel = R"(model:
  layers:
    - {type: Input, shape: [null, 4]}
    - {type: Bidirectional, layer: {type: LSTM, units: 8, return_sequences: true}}
    - {type: GRU, units: 6}
    - {type: Dense, units: 2}
)";

Config cfg(std::vector<std::string> overrides = {}) { return parse_config(kModel, "m.yaml", std::move(overrides)); }

TEST(ModelDifference, TheSameModelWrittenDifferentlyIsTheSame) {
  const Config a = cfg();
  // The same settings spelled out, in another order, with the defaults written: positions differ.
  const Config b = parse_config(R"(model:
  layers:
    - {shape: [null, 4], type: Input}
    - {type: Bidirectional, merge_mode: concat, layer: {units: 8, type: LSTM, return_sequences: true, unit_forget_bias: true}}

    - {type: GRU, units: 6, reset_after: true, activation: tanh}
    - {type: Dense, units: 2, activation: linear}
)", "other.yaml");
  EXPECT_EQ(model_difference(a.model, b.model), "");
  Config c = a;
  c.model.init_from = "weights.h5";
  EXPECT_EQ(model_difference(a.model, c.model), "") << "init_from is where weights come from, not the model";
}

TEST(ModelDifference, NamesTheLayerTheSettingAndBothValues) {
  const Config a = cfg();
  EXPECT_EQ(model_difference(a.model, cfg({"model.layers.2.units=7"}).model), "layer 2 ('gru'): units is 7, was 6");
  EXPECT_EQ(model_difference(a.model, cfg({"model.layers.1.layer.go_backwards=true"}).model),
            "layer 1 ('bidirectional'): layer.go_backwards is true, was false");
  EXPECT_EQ(model_difference(a.model, cfg({"model.layers.2.reset_after=false"}).model),
            "layer 2 ('gru'): reset_after is false, was true");
  EXPECT_EQ(model_difference(a.model, cfg({"model.layers.2={type: LSTM, units: 6}"}).model),
            "layer 2 ('lstm_1'): type is LSTM, was GRU");
  Config shorter = a;
  shorter.model.layers.pop_back();
  EXPECT_EQ(model_difference(a.model, shorter.model), "3 layers, was 4");
}

AutotuneKey key_of(const Config& c, int64_t T = 50) {
  return {c.model, c.train.optimizer, c.train.loss, c.plan, 32, T, "NVIDIA H200, driver 580, cuDNN 9.14"};
}

TEST(AutotuneKey, EqualForEqualSettingsAndDifferentForAnythingTheChoiceDependsOn) {
  const Config a = cfg();
  const std::string h = key_of(a).hash();
  EXPECT_EQ(h.size(), 16u);
  Config renamed_cache = a;
  renamed_cache.plan.cache = "/tmp/elsewhere.json";
  renamed_cache.output.dir = "runs/other";
  EXPECT_EQ(key_of(renamed_cache).hash(), h) << "where the cache and the run are does not change the choice";
  for (const char* o : {"model.layers.2.units=7", "train.optimizer.type=sgd", "train.optimizer.clipnorm=1",
                        "train.loss=mae", "plan.precision=bf16", "plan.fuse=never", "plan.graphs=false",
                        "model.layers.1.layer.units=9"}) {
    SCOPED_TRACE(o);
    EXPECT_NE(key_of(cfg({o})).hash(), h) << key_of(cfg({o})).text();
  }
  EXPECT_NE(key_of(a, 60).hash(), h);
  AutotuneKey other_gpu = key_of(a);
  other_gpu.gpu = "NVIDIA H100";
  EXPECT_NE(other_gpu.hash(), h);
  AutotuneKey inference = key_of(a);  // eval and predict time forward-only steps: their own choice
  inference.inference = true;
  EXPECT_NE(inference.hash(), h);
  // A cache written before inference keys existed still holds this model's training choice.
  EXPECT_EQ(key_of(a).text().find("workload"), std::string::npos);
}

}  // namespace
}  // namespace rnntrain
