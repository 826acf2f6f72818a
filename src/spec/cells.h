// The recurrent cells: one row of traits per cell (spec/cells.cpp), read by shapes and parameters,
// the config parser and emitter, the planner, the weight layouts, the Keras reader and writer and
// both backends, so that none of them switches on LSTM / GRU / SimpleRNN for a fact of the cell.
// Only the cells' math (the CPU loops, backend/cpu/recurrent.cpp; the CUDA kernels,
// backend/cuda/generic_rnn.cpp and kernels_rnn.cu) is written per cell. Adding a cell:
// docs/contributing.md.
#pragma once
#include <span>
#include <string>

#include "spec/config.h"

namespace rnntrain {

// A yes/no setting only some cells have (unit_forget_bias, reset_after): its name in configs and in
// Keras' layer config (the same), the LayerSpec field it sets, and, when the fused engines (cuDNN
// and oneDNN) run only one of its values, that value and why.
struct CellFlag {
  const char* name;
  bool LayerSpec::*field;
  bool fused_value;       // the value cuDNN and oneDNN can run (Keras 2's CuDNN layers have it),
  const char* fused_why;  // or null when they run both; else the reason, for `rnntrain plan`
  bool keras2_value;      // what a Keras 2 config without the key means (2.2 and older wrote none)
  bool keras_last;        // Keras' get_config writes it last (else after bias_initializer)
};

struct CellTraits {
  LayerKind kind;
  const char* keras_class;  // the config `type` and Keras' class name: "LSTM"
  const char* snake;        // default layer names and Keras 3 paths: "lstm"
  const char* keras_cell;   // the cell's scope in Keras' variable names: "lstm_cell"
  const char* cudnn_class;  // Keras 2's CuDNN layer read as this cell ("CuDNNLSTM"), or null
  int gates;                // blocks of `units` columns in kernel, recurrent_kernel and bias
  const char* gate_names;   // in Keras' order (its kernel's column blocks): "i f c o"
  int cudnn_gate[4];        // cuDNN's linear-layer index of each Keras gate (GRU: z r h -> r z h)
  int forget_gate;          // the gate whose bias unit_forget_bias starts at 1 (LSTM's f), or -1
  bool cell_state;          // a state c besides h (LSTM)
  bool recurrent_activation;  // has a recurrent_activation (the gates'); SimpleRNN has not
  std::span<const CellFlag> flags;
  bool LayerSpec::*two_biases;  // the flag that gives the bias two rows, [2, gates*units] (GRU reset_after), or null
  std::span<const Activation> fused_activations;  // the activations cuDNN (and oneDNN, if `onednn`) run it with; none: cuDNN has no such cell
  bool onednn;     // the CPU's oneDNN stacks run it (tanh, sigmoid gates, flags at fused_value)
  bool wavefront;  // the GPU's wavefront kernels run it
};

// Every cell, in the order configs and messages list them.
std::span<const CellTraits> cells();
// The traits of a recurrent kind, or null (Dense, Bidirectional, ...).
const CellTraits* find_cell(LayerKind k);
// The traits of a recurrent kind; an internal error for any other.
const CellTraits& cell_traits(LayerKind k);

// The cells' class names for messages: "an LSTM, GRU or SimpleRNN" ("LSTM, GRU or SimpleRNN" without
// the article).
std::string cell_names(bool article = false);

// Rows of a recurrent layer's bias: 0 without one, 2 for a GRU with reset_after, else 1.
int bias_rows(const LayerSpec& cell);
// Why cuDNN (engine "cuDNN") or oneDNN ("oneDNN") cannot run the cell's math, or "": its
// activations and the flags the fused engines fix. Options outside the cell (dropout, use_bias,
// go_backwards) are each engine's own rules.
std::string fused_cell_refusal(const LayerSpec& cell, const char* engine);

}  // namespace rnntrain
