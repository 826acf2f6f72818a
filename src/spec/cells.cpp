// The cell traits table (spec/cells.h): every fact about LSTM, GRU and SimpleRNN that is not math.
#include "spec/cells.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace rnntrain {

namespace {

constexpr CellFlag kLstmFlags[] = {{.name = "unit_forget_bias",
                                    .field = &LayerSpec::unit_forget_bias,
                                    .fused_value = true,
                                    .fused_why = nullptr,
                                    .keras2_value = true,
                                    .keras_last = false}};
constexpr CellFlag kGruFlags[] = {{.name = "reset_after",
                                   .field = &LayerSpec::reset_after,
                                   .fused_value = true,
                                   .fused_why = "GRU reset_after: false ({}'s GRU is reset_after: true)",
                                   .keras2_value = false,  // Keras 2.2's GRU
                                   .keras_last = true}};
constexpr Activation kTanh[] = {Activation::Tanh};
constexpr Activation kTanhRelu[] = {Activation::Tanh, Activation::Relu};

constexpr CellTraits kCells[] = {
    {.kind = LayerKind::LSTM,
     .keras_class = "LSTM",
     .snake = "lstm",
     .keras_cell = "lstm_cell",
     .cudnn_class = "CuDNNLSTM",
     .gates = 4,
     .gate_names = "i f c o",
     .cudnn_gate = {0, 1, 2, 3},
     .forget_gate = 1,
     .cell_state = true,
     .recurrent_activation = true,
     .flags = kLstmFlags,
     .two_biases = nullptr,
     .fused_activations = kTanh,
     .onednn = true,
     .wavefront = true},
    {.kind = LayerKind::GRU,
     .keras_class = "GRU",
     .snake = "gru",
     .keras_cell = "gru_cell",
     .cudnn_class = "CuDNNGRU",
     .gates = 3,
     .gate_names = "z r h",
     .cudnn_gate = {1, 0, 2},  // cuDNN: r z h
     .forget_gate = -1,
     .cell_state = false,
     .recurrent_activation = true,
     .flags = kGruFlags,
     .two_biases = &LayerSpec::reset_after,
     .fused_activations = kTanh,
     .onednn = true,
     .wavefront = true},
    {.kind = LayerKind::SimpleRNN,
     .keras_class = "SimpleRNN",
     .snake = "simple_rnn",
     .keras_cell = "simple_rnn_cell",
     .cudnn_class = nullptr,
     .gates = 1,
     .gate_names = "h",
     .cudnn_gate = {0},
     .forget_gate = -1,
     .cell_state = false,
     .recurrent_activation = false,
     .flags = {},
     .two_biases = nullptr,
     .fused_activations = kTanhRelu,
     .onednn = false,
     .wavefront = false},
};

}  // namespace

std::span<const CellTraits> cells() { return kCells; }

const CellTraits* find_cell(LayerKind k) {
  for (const CellTraits& c : kCells)
    if (c.kind == k) return &c;
  return nullptr;
}

const CellTraits& cell_traits(LayerKind k) {
  if (const CellTraits* c = find_cell(k)) return *c;
  throw RuntimeError(fmt::format("internal: {} is not a recurrent cell", layer_kind_name(k)));
}

std::string cell_names(bool article) {
  std::string out;
  for (size_t i = 0; i < std::size(kCells); ++i)
    out += fmt::format("{}{}", i == 0 ? "" : i + 1 == std::size(kCells) ? " or " : ", ", kCells[i].keras_class);
  if (!article) return out;
  const bool vowel_sound = out[0] == 'A' || out[0] == 'E' || out[0] == 'I' || out[0] == 'L' || out[0] == 'O';
  return (vowel_sound ? "an " : "a ") + out;  // "an LSTM": letters read as names
}

int bias_rows(const LayerSpec& cell) {
  const CellTraits& t = cell_traits(cell.kind);
  if (!cell.use_bias) return 0;
  return t.two_biases && cell.*t.two_biases ? 2 : 1;
}

std::string fused_cell_refusal(const LayerSpec& c, const char* engine) {
  const CellTraits& t = cell_traits(c.kind);
  const auto& acts = t.fused_activations;
  if (acts.empty()) return fmt::format("{} has no {} cell", engine, t.keras_class);
  if (std::find(acts.begin(), acts.end(), c.activation) == acts.end()) {
    std::string have;
    for (size_t i = 0; i < acts.size(); ++i)
      have += fmt::format("{}{}", i == 0 ? "" : i + 1 == acts.size() ? " and " : ", ", activation_name(acts[i]));
    return fmt::format("activation {} ({}'s {} has {})", activation_name(c.activation), engine, t.keras_class, have);
  }
  if (t.recurrent_activation && c.recurrent_activation != Activation::Sigmoid)
    return fmt::format("recurrent_activation {} ({} has sigmoid)", activation_name(c.recurrent_activation), engine);
  for (const CellFlag& f : t.flags)
    if (f.fused_why && c.*f.field != f.fused_value) return fmt::format(fmt::runtime(f.fused_why), engine);
  return "";
}

}  // namespace rnntrain
