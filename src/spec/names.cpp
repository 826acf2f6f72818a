// Names of enum values as they appear in configs and in Keras, and SourceLoc formatting.
#include <fmt/format.h>

#include <cctype>

#include "spec/cells.h"
#include "spec/layers.h"
#include "spec/sections.h"

namespace rnntrain {

std::string SourceLoc::str() const {
  if (line == 0) return file.empty() ? "<config>" : file;
  return fmt::format("{}:{}:{}", file, line, col);
}

const char* layer_kind_name(LayerKind k) { return spec::enum_name(spec::layer_kinds(), k); }

const char* precision_name(Precision p) { return spec::enum_name(spec::precisions(), p); }
const char* rnn_algo_name(RnnAlgo a) { return spec::enum_name(spec::rnn_algos(), a); }
const char* fuse_mode_name(FuseMode f) { return spec::enum_name(spec::fuse_modes(), f); }
const char* merge_mode_name(MergeMode m) { return spec::enum_name(spec::merge_modes(), m); }

const char* layer_snake_name(LayerKind k) {
  if (const CellTraits* c = find_cell(k)) return c->snake;
  if (const LayerTraits* l = find_layer(k)) return l->snake;
  return "layer";
}

bool is_recurrent(LayerKind k) { return find_cell(k) != nullptr; }

const Regularizer& activity_regularizer_of(const LayerSpec& l) {
  return l.kind == LayerKind::Bidirectional && l.inner ? l.inner->activity_regularizer : l.activity_regularizer;
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::Linear: return "linear";
    case Activation::Tanh: return "tanh";
    case Activation::Sigmoid: return "sigmoid";
    case Activation::HardSigmoid: return "hard_sigmoid";
    case Activation::HardSigmoidKeras2: return "hard_sigmoid_keras2";
    case Activation::Relu: return "relu";
    case Activation::Softmax: return "softmax";
    case Activation::Gelu: return "gelu";
    case Activation::GeluApproximate: return "gelu_approximate";
    case Activation::Elu: return "elu";
    case Activation::Selu: return "selu";
    case Activation::Softplus: return "softplus";
    case Activation::Softsign: return "softsign";
    case Activation::Silu: return "silu";
  }
  return "?";
}

}  // namespace rnntrain

namespace rnntrain {

bool data_format_takes(DataFormat f, const std::string& path) {
  std::string lower = path;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* const* s = data_format_info(f).suffixes; *s; ++s)
    if (lower.ends_with(*s)) return true;
  return false;
}

std::optional<DataFormat> data_format_from_path(const std::string& path) {
  for (const DataFormatInfo& f : kDataFormats)
    if (data_format_takes(f.kind, path)) return f.kind;
  return std::nullopt;
}

std::string data_suffixes() {
  std::string out;
  for (const DataFormatInfo& f : kDataFormats)
    for (const char* const* s = f.suffixes; *s; ++s)
      if (data_format_from_path(*s) == f.kind) {  // once each: the format it implies lists it
        if (!out.empty()) out += ' ';
        out += *s;
      }
  return out;
}

}  // namespace rnntrain
