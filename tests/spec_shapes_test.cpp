// Shape inference on parsed configs: output shapes, masks and parameter counts of every layer type,
// against numbers worked out by hand from Keras' weight shapes (commented next to each), and the
// errors that tell the user how to make two layers fit.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "spec/parse.h"
#include "spec/shapes.h"

namespace rnntrain {
namespace {

struct Model {
  Config cfg;
  std::vector<LayerShape> shapes;
};

// `layers` are YAML list entries after an Input of shape `input`.
Model build(const std::string& input, const std::string& layers) {
  Model m;
  m.cfg = parse_config("model:\n  layers:\n    - {type: Input, shape: " + input + "}\n" + layers, "m.yaml");
  m.shapes = infer_shapes(m.cfg.model);
  EXPECT_EQ(m.shapes.size(), m.cfg.model.layers.size());
  return m;
}

std::string show(const Model& m) {
  std::string s;
  for (size_t i = 0; i < m.shapes.size(); ++i)
    s += m.cfg.model.layers[i].name + " " + shape_str(m.shapes[i].out) + " params=" + std::to_string(m.shapes[i].params) +
         (m.shapes[i].mask_out ? " mask" : "") + "\n";
  return s;
}

TEST(Shapes, LstmParamsAndOutputs) {
  const Model m = build("[null, 8]", "    - {type: LSTM, units: 64, return_sequences: true}\n"
                                     "    - {type: LSTM, units: 64}\n");
  SCOPED_TRACE(show(m));
  EXPECT_EQ(m.shapes[0].out, (Shape{-1, 8}));
  EXPECT_EQ(m.shapes[1].params, 18688);  // kernel 8x256 + recurrent 64x256 + bias 256 = 4*64*(8+64) + 4*64
  EXPECT_EQ(m.shapes[1].out, (Shape{-1, 64}));
  EXPECT_EQ(m.shapes[2].params, 33024);  // 4*64*(64+64) + 4*64
  EXPECT_EQ(m.shapes[2].out, (Shape{64}));
  EXPECT_EQ(recurrent_params(m.cfg.model.layers[1], 8), 18688);
}

TEST(Shapes, LstmWithoutBias) {
  const Model m = build("[20, 8]", "    - {type: LSTM, units: 64, use_bias: false}\n");
  EXPECT_EQ(m.shapes[1].params, 18432) << show(m);  // 4*64*(8+64), no bias
  EXPECT_EQ(m.shapes[1].out, (Shape{64}));
}

TEST(Shapes, GruResetAfterHasTwoBiasRows) {
  const Model after = build("[null, 8]", "    - {type: GRU, units: 32}\n");
  const Model before = build("[null, 8]", "    - {type: GRU, units: 32, reset_after: false}\n");
  EXPECT_EQ(after.shapes[1].params, 4032) << show(after);    // 3*32*(8+32) + bias (2, 96)
  EXPECT_EQ(before.shapes[1].params, 3936) << show(before);  // 3*32*(8+32) + bias (96,)
  EXPECT_EQ(cell_traits(LayerKind::GRU).gates, 3);
  EXPECT_EQ(cell_traits(LayerKind::LSTM).gates, 4);
  EXPECT_EQ(cell_traits(LayerKind::SimpleRNN).gates, 1);
}

TEST(Shapes, SimpleRnn) {
  const Model m = build("[10, 8]", "    - {type: SimpleRNN, units: 16, return_sequences: true}\n");
  EXPECT_EQ(m.shapes[1].params, 400) << show(m);  // 16*8 + 16*16 + 16
  EXPECT_EQ(m.shapes[1].out, (Shape{10, 16}));
}

TEST(Shapes, BidirectionalConcatDoublesTheUnitsOthersKeepThem) {
  const Model m = build("[null, 8]",
                        "    - {type: Bidirectional, layer: {type: LSTM, units: 32, return_sequences: true}}\n"
                        "    - {type: Bidirectional, merge_mode: sum, layer: {type: LSTM, units: 32, return_sequences: true}}\n"
                        "    - {type: Bidirectional, merge_mode: ave, layer: {type: GRU, units: 32}}\n");
  SCOPED_TRACE(show(m));
  EXPECT_EQ(m.shapes[1].out, (Shape{-1, 64}));
  EXPECT_EQ(m.shapes[1].params, 10496);  // 2 * (4*32*(8+32) + 4*32)
  EXPECT_EQ(m.shapes[2].out, (Shape{-1, 32}));
  EXPECT_EQ(m.shapes[2].params, 24832);  // 2 * (4*32*(64+32) + 4*32): the input is the concat of 64
  EXPECT_EQ(m.shapes[3].out, (Shape{32}));
  EXPECT_EQ(m.shapes[3].params, 12672);  // 2 * (3*32*(32+32) + 2*3*32)
}

TEST(Shapes, DenseAndTimeDistributed) {
  const Model m = build("[15, 8]", "    - {type: LSTM, units: 64, return_sequences: true}\n"
                                   "    - {type: TimeDistributed, layer: {type: Dense, units: 5}}\n"
                                   "    - {type: Dense, units: 10}\n"
                                   "    - {type: Dropout, rate: 0.5}\n"
                                   "    - {type: LSTM, units: 6}\n"
                                   "    - {type: Dense, units: 1, use_bias: false}\n");
  SCOPED_TRACE(show(m));
  EXPECT_EQ(m.shapes[2].out, (Shape{15, 5}));
  EXPECT_EQ(m.shapes[2].params, 325);  // 64*5 + 5
  EXPECT_EQ(m.shapes[3].out, (Shape{15, 10}));  // Dense on a sequence acts on the last axis
  EXPECT_EQ(m.shapes[3].params, 60);  // 5*10 + 10
  EXPECT_EQ(m.shapes[4].out, (Shape{15, 10}));
  EXPECT_EQ(m.shapes[4].params, 0);
  EXPECT_EQ(m.shapes[6].out, (Shape{1}));
  EXPECT_EQ(m.shapes[6].params, 6);
}

TEST(Shapes, KerasImdbLstmTotal) {
  // keras examples imdb_lstm: Embedding(20000, 128), LSTM(128), Dense(1): 2,691,713 parameters.
  const Model m = build("[80]", "    - {type: Embedding, input_dim: 20000, output_dim: 128}\n"
                                "    - {type: LSTM, units: 128, dropout: 0.2, recurrent_dropout: 0.2}\n"
                                "    - {type: Dense, units: 1, activation: sigmoid}\n");
  int64_t total = 0;
  for (const LayerShape& s : m.shapes) total += s.params;
  EXPECT_EQ(total, 2691713) << show(m);
  EXPECT_EQ(m.shapes[1].out, (Shape{80, 128}));
  EXPECT_EQ(m.shapes[1].params, 2560000);  // 20000*128
}

TEST(Shapes, MasksFlowUntilARecurrentLayerDropsTime) {
  const Model m = build("[null, 3]", "    - {type: Masking, mask_value: 0.0}\n"
                                     "    - {type: LSTM, units: 4, return_sequences: true}\n"
                                     "    - {type: Dropout, rate: 0.1}\n"
                                     "    - {type: Bidirectional, layer: {type: GRU, units: 4, return_sequences: true}}\n"
                                     "    - {type: TimeDistributed, layer: {type: Dense, units: 2}}\n"
                                     "    - {type: Dense, units: 2}\n"
                                     "    - {type: SimpleRNN, units: 4}\n"
                                     "    - {type: Dense, units: 1}\n");
  SCOPED_TRACE(show(m));
  EXPECT_FALSE(m.shapes[0].mask_out) << "Input makes no mask";
  EXPECT_FALSE(m.shapes[1].mask_in);
  for (int i = 1; i <= 6; ++i) EXPECT_TRUE(m.shapes[i].mask_out) << "layer " << i;
  EXPECT_TRUE(m.shapes[7].mask_in);
  EXPECT_FALSE(m.shapes[7].mask_out) << "return_sequences: false consumes the mask";
  EXPECT_FALSE(m.shapes[8].mask_in);
}

TEST(Shapes, EmbeddingMasksOnlyWithMaskZero) {
  const Model on = build("[null]", "    - {type: Embedding, input_dim: 50, output_dim: 4, mask_zero: true}\n"
                                   "    - {type: GRU, units: 3}\n");
  const Model off = build("[null]", "    - {type: Embedding, input_dim: 50, output_dim: 4}\n"
                                    "    - {type: GRU, units: 3}\n");
  EXPECT_TRUE(on.shapes[1].mask_out) << show(on);
  EXPECT_TRUE(on.shapes[2].mask_in);
  EXPECT_FALSE(off.shapes[1].mask_out) << show(off);
  EXPECT_EQ(on.shapes[1].out, (Shape{-1, 4}));
  EXPECT_EQ(on.shapes[2].params, 81);  // 3*3*(4+3) + 2*3*3
}

std::string shape_error(const std::string& input, const std::string& layers) {
  try {
    build(input, layers);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for Input " << input << " then\n" << layers;
  return "";
}

TEST(ShapeErrors, RecurrentAfterRecurrentNeedsReturnSequences) {
  const std::string msg = shape_error("[null, 8]", "    - {type: LSTM, units: 64}\n    - {type: LSTM, units: 32}\n");
  EXPECT_EQ(msg.rfind("m.yaml:5:7: model.layers[2]: layer 'lstm_1' (LSTM)", 0), 0u) << msg;
  EXPECT_NE(msg.find("(None, 64)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("set return_sequences: true"), std::string::npos) << msg;
}

TEST(ShapeErrors, LayersThatDoNotFit) {
  struct Case { std::string input, layers, says; };
  const std::vector<Case> cases = {
      {"[null, 8]", "    - {type: Embedding, input_dim: 10, output_dim: 4}\n", "token ids"},
      {"[12]", "    - {type: LSTM, units: 4}\n", "expects a sequence input"},
      {"[null, 8]", "    - {type: GRU, units: 4}\n    - {type: TimeDistributed, layer: {type: Dense, units: 2}}\n", "return_sequences"},
      {"[null, 8]", "    - {type: SimpleRNN, units: 4}\n    - {type: Masking}\n", "expects a sequence input"},
      {"[null, 8]", "    - {type: GRU, units: 4}\n    - {type: Bidirectional, layer: {type: GRU, units: 2}}\n", "return_sequences"},
  };
  for (const Case& c : cases) {
    const std::string msg = shape_error(c.input, c.layers);
    EXPECT_EQ(msg.rfind("m.yaml:", 0), 0u) << msg;
    EXPECT_NE(msg.find("model.layers["), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << "\"" << c.says << "\" not in: " << msg;
  }
}

}  // namespace
}  // namespace rnntrain
