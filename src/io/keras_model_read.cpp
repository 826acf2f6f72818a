// Keras model JSON -> ModelSpec: Sequential, or a Functional model that is a single chain. Every
// argument rnntrain cannot honour is refused by layer name (stateful, return_state, other
// activations); what does not change the predictions (regularizers and constraints, which change
// training; initializers rnntrain lacks) is dropped with a warning saying what rnntrain does instead.
// Lambda and custom classes are refused: nothing from a file is run.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "core/error.h"
#include "core/log.h"
#include "io/keras_model.h"
#include "spec/cells.h"
#include "spec/sections.h"

namespace rnntrain {

namespace {

// The cell a Keras class name is (its own class, or Keras 2's CuDNN class for it), or null.
const CellTraits* cell_of_class(const std::string& cls) {
  for (const CellTraits& c : cells())
    if (cls == c.keras_class || (c.cudnn_class && cls == c.cudnn_class)) return &c;
  return nullptr;
}

// The Keras classes rnntrain reads, for messages.
std::string known_classes() {
  std::string out = "InputLayer";
  for (const spec::Choice<LayerKind>& k : spec::layer_kinds())
    if (!k.alias && k.value != LayerKind::Input) out += fmt::format(", {}", k.name);
  for (const CellTraits& c : cells())
    if (c.cudnn_class) out += fmt::format(", {}", c.cudnn_class);
  return out;
}

using nlohmann::json;

struct Reader {
  const KerasOrigin& origin;
  std::vector<std::string> refused;  // "'name' (Class): why", all reported together

  [[noreturn]] void fail(const std::string& what) const { throw DataError(fmt::format("{}: {}", origin.file, what)); }

  static const json& config_of(const json& layer) {
    static const json empty = json::object();
    auto it = layer.find("config");
    return it != layer.end() && it->is_object() ? *it : empty;
  }
  static std::string str(const json& j, const char* key, const std::string& def = "") {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : def;
  }
  static bool flag(const json& j, const char* key, bool def) {
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() ? it->get<bool>() : def;
  }
  static double num(const json& j, const char* key, double def) {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : def;
  }
  // A class given by name ("l1_l2") or as {class_name: "L1L2", ...}, lowercase without underscores.
  static std::string class_key(const json& v) {
    std::string name;
    for (char ch : v.is_string() ? v.get<std::string>() : str(v, "class_name"))
      if (ch != '_') name += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return name;
  }
  static bool set_non_null(const json& c, const char* key) {
    auto it = c.find(key);
    return it != c.end() && !it->is_null();
  }

  Activation activation(const json& c, const char* key, const std::string& who, Activation def, bool dense) {
    auto it = c.find(key);
    if (it == c.end() || it->is_null()) return def;
    std::string name;
    if (it->is_string()) name = it->get<std::string>();
    else if (it->is_object()) name = it->contains("config") && (*it)["config"].is_string() ? (*it)["config"].get<std::string>()
                                                                                          : str(*it, "class_name");
    if (name == "None") return Activation::Linear;
    if (name == "hard_sigmoid") return origin.keras2() ? Activation::HardSigmoidKeras2 : Activation::HardSigmoid;
    // Keras' names are the config's (spec/choices.cpp), but for rnntrain's own two.
    const auto& all = spec::activations();
    const auto known = std::find_if(all.begin(), all.end(), [&](const auto& choice) {
      return name == choice.name && choice.value != Activation::HardSigmoidKeras2 &&
             choice.value != Activation::GeluApproximate;
    });
    if (known != all.end()) {
      const Activation a = known->value;
      if (dense || (a != Activation::Softmax && !act_grad_from_input(a))) return a;
    }
    refused.push_back(fmt::format("{}: {} '{}' is not supported (rnntrain has linear, tanh, sigmoid, hard_sigmoid, relu{})",
                                  who, key, name,
                                  dense ? ", softmax, gelu, elu, selu, softplus, softsign, silu (swish)" : ""));
    return def;
  }

  Initializer initializer(const json& c, const char* key, const std::string& who, Initializer def) {
    auto it = c.find(key);
    if (it == c.end() || it->is_null()) return def;
    std::string name = it->is_string() ? it->get<std::string>() : str(*it, "class_name");
    const json& cfg = it->is_object() ? config_of(*it) : json::object();
    std::string key_name;
    for (char ch : name)
      if (ch != '_') key_name += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (key_name == "zeros" || key_name == "zero") return {InitKind::Zeros};
    if (key_name == "ones" || key_name == "one") return {InitKind::Ones};
    if (key_name == "constant") return {InitKind::Constant, num(cfg, "value", 0.0)};
    if (key_name == "glorotuniform") return {InitKind::GlorotUniform};
    if (key_name == "glorotnormal") return {InitKind::GlorotNormal};
    if (key_name == "heuniform") return {InitKind::HeUniform};
    if (key_name == "henormal") return {InitKind::HeNormal};
    if (key_name == "lecununiform") return {InitKind::LecunUniform};
    if (key_name == "orthogonal" || key_name == "orthogonalinitializer") return {InitKind::Orthogonal, num(cfg, "gain", 1.0)};
    if (key_name == "randomuniform") return {InitKind::RandomUniform, num(cfg, "minval", -0.05), num(cfg, "maxval", 0.05)};
    if (key_name == "randomnormal") return {InitKind::RandomNormal, num(cfg, "mean", 0.0), num(cfg, "stddev", 0.05)};
    log_warn("{}: {}: {} '{}' has no rnntrain equivalent; the config uses rnntrain's default (only fresh "
             "initialisation is affected, not the imported weights)", origin.file, who, key, name);
    return def;
  }

  // Keras' L1, L2 and L1L2 (their classes or the names l1, l2, l1_l2 with Keras 3's defaults);
  // other regularizers are dropped with drop_set's warning, bad factors refused.
  Regularizer regularizer(const json& c, const char* key, const std::string& who) {
    if (!set_non_null(c, key)) return {};
    const json& v = c.at(key);
    const std::string name = class_key(v);
    if (name != "l1" && name != "l2" && name != "l1l2") {
      drop_set(c, who, {key});
      return {};
    }
    const json& cfg = v.is_object() ? config_of(v) : json::object();
    auto factor = [&](const char* k, double def) {
      if (name.find(k) == std::string::npos || !set_non_null(cfg, k)) return name == k ? def : 0.0;
      const json& f = cfg.at(k);
      if (f.is_number() && std::isfinite(f.get<double>()) && f.get<double>() >= 0.0) return f.get<double>();
      refused.push_back(fmt::format("{}: {} {} is {}; it must be a number >= 0", who, key, k, printable(f.dump())));
      return 0.0;
    };
    return {factor("l1", 0.01), factor("l2", 0.01)};  // L1L2's factors default to 0, L1's and L2's to 0.01
  }

  // Keras' MaxNorm, NonNeg, UnitNorm and MinMaxNorm (their classes or snake_case names, Keras'
  // defaults); other constraints are dropped with drop_set's warning, bad settings refused.
  Constraint constraint(const json& c, const char* key, const std::string& who) {
    if (!set_non_null(c, key)) return {};
    const json& v = c.at(key);
    const std::string name = class_key(v);
    Constraint out;
    if (name == "maxnorm") out.kind = ConstraintKind::MaxNorm;
    else if (name == "nonneg") out.kind = ConstraintKind::NonNeg;
    else if (name == "unitnorm") out.kind = ConstraintKind::UnitNorm;
    else if (name == "minmaxnorm") out.kind = ConstraintKind::MinMaxNorm, out.max_value = 1.0;
    if (!out.active()) {
      drop_set(c, who, {key});
      return {};
    }
    const json& cfg = v.is_object() ? config_of(v) : json::object();
    auto number = [&](const char* k, double& field, double hi) {
      if (!set_non_null(cfg, k)) return;
      const json& f = cfg.at(k);
      if (f.is_number() && f.get<double>() >= 0.0 && f.get<double>() <= hi) field = f.get<double>();
      else refused.push_back(fmt::format("{}: {} {} is {}; it must be a number from 0 to {}", who, key, k,
                                         printable(f.dump()), hi));
    };
    const double big = std::numeric_limits<float>::max();
    number("max_value", out.max_value, big);
    number("min_value", out.min_value, big);
    number("rate", out.rate, 1.0);
    if (set_non_null(cfg, "axis")) {
      const json& a = cfg.at("axis");
      const json list = a.is_array() ? a : json::array({a});
      const bool ok = !list.empty() && list.size() <= 3 && std::all_of(list.begin(), list.end(), [](const json& x) {
        return x.is_number_integer() && x.get<int64_t>() >= -3 && x.get<int64_t>() <= 2;
      });
      if (ok) out.axis = list.get<std::vector<int>>();
      else refused.push_back(fmt::format("{}: {} axis {} is not supported (rnntrain's weights have at most 3 "
                                         "dimensions: one to three axes from -3 to 2)", who, key, printable(a.dump())));
    }
    return out;
  }

  // Arguments that change the numbers and that rnntrain does not have.
  void refuse_true(const json& c, const std::string& who, std::initializer_list<const char*> keys) {
    for (const char* k : keys)
      if (flag(c, k, false)) refused.push_back(fmt::format("{}: {}=true is not supported", who, k));
  }
  // Regularizers and constraints, which change training in Keras and which rnntrain does not have:
  // dropped, each with a warning that names it and says what rnntrain does instead.
  void drop_set(const json& c, const std::string& who, std::initializer_list<const char*> keys) {
    for (const char* k : keys) {
      if (!set_non_null(c, k)) continue;
      const json& v = c.at(k);
      const std::string what = v.is_object() ? str(v, "class_name") + " " + config_of(v).dump() : v.dump();
      const bool constraint = std::string_view(k).ends_with("_constraint");
      log_warn("{}: {}: {} {} is not imported: rnntrain trains without it ({}), so training from this model differs "
               "from Keras'; predictions from the imported weights are the same", origin.file, who, k,
               what.substr(0, 120),
               constraint ? "no projection of the weights after each step" : "no penalty added to the loss");
    }
  }
  void check_dtype(const json& c, const std::string& who) {
    auto it = c.find("dtype");
    if (it == c.end() || it->is_null()) return;
    std::string d = it->is_string() ? it->get<std::string>() : str(config_of(*it), "name");
    if (!d.empty() && d != "float32")
      log_warn("{}: {}: dtype '{}': its weights are converted to float32 (rnntrain computes and saves in float32)",
               origin.file, who, d);
  }

  // A size (units, input_dim, output_dim): a whole number in [1, kMaxDim], else refused (0 returned).
  int64_t dim(const json& c, const char* key, const std::string& who) {
    const double v = num(c, key, 0);
    if (v >= 1 && v <= static_cast<double>(kMaxDim) && v == static_cast<int64_t>(v)) return static_cast<int64_t>(v);
    refused.push_back(fmt::format("{}: '{}' is missing or not a whole number from 1 to {}", who, key, kMaxDim));
    return 0;
  }
  // A rate (dropout, recurrent_dropout, rate): absent or null is 0, else a number in [0, 1).
  double fraction(const json& c, const char* key, const std::string& who) {
    auto it = c.find(key);
    if (it == c.end() || it->is_null()) return 0.0;
    const double v = it->is_number() ? it->get<double>() : -1.0;
    if (v >= 0.0 && v < 1.0) return v;
    refused.push_back(fmt::format("{}: '{}' is {}; it must be a number in [0, 1)", who, key, printable(it->dump())));
    return 0.0;
  }
  // "5", "\"nan\"": a value from the file inside a message, at most 40 characters.
  static std::string printable(const std::string& text) {
    return text.size() > 40 ? text.substr(0, 40) + "..." : text;
  }

  // The dimensions after the batch one: null (timesteps only) -> -1; sizes in [0, kMaxDim].
  Shape shape_from(const json& batch_shape, const std::string& who) {
    Shape s;
    for (size_t i = 1; i < batch_shape.size(); ++i) {
      const json& d = batch_shape[i];
      const bool ok = d.is_null() || (d.is_number_integer() && d.get<int64_t>() >= 0 && d.get<int64_t>() <= kMaxDim);
      if (!ok) refused.push_back(fmt::format("{}: input dimension {} is {}; it must be null or a whole number from 0 to {}",
                                             who, i, printable(d.dump()), kMaxDim));
      s.push_back(ok && !d.is_null() ? d.get<int64_t>() : -1);
    }
    return s;
  }

  // A cell of class `cls`: its Keras class or Keras 2's CuDNN class (cuDNN's fixed cell).
  LayerSpec recurrent(const CellTraits& cell, const std::string& cls, const json& c, const std::string& who) {
    LayerSpec l;
    const bool cudnn = cell.cudnn_class && cls == cell.cudnn_class;
    l.kind = cell.kind;
    l.units = dim(c, "units", who);
    refuse_true(c, who, {"stateful", "return_state", "time_major"});
    l.kernel_constraint = constraint(c, "kernel_constraint", who);
    l.recurrent_constraint = constraint(c, "recurrent_constraint", who);
    l.bias_constraint = constraint(c, "bias_constraint", who);
    l.activity_regularizer = regularizer(c, "activity_regularizer", who);
    l.kernel_regularizer = regularizer(c, "kernel_regularizer", who);
    l.recurrent_regularizer = regularizer(c, "recurrent_regularizer", who);
    l.bias_regularizer = regularizer(c, "bias_regularizer", who);
    check_dtype(c, who);
    l.return_sequences = flag(c, "return_sequences", false);
    l.go_backwards = flag(c, "go_backwards", false);
    l.kernel_initializer = initializer(c, "kernel_initializer", who, l.kernel_initializer);
    l.recurrent_initializer = initializer(c, "recurrent_initializer", who, l.recurrent_initializer);
    l.bias_initializer = initializer(c, "bias_initializer", who, l.bias_initializer);
    for (const CellFlag& f : cell.flags) {
      const bool fallback = origin.keras2() ? f.keras2_value : l.*f.field;
      l.*f.field = cudnn && f.fused_why ? f.fused_value : flag(c, f.name, fallback);
    }
    if (cudnn) {  // cuDNN's fixed cell: tanh, sigmoid, biases, the flags at their fused values
      l.activation = Activation::Tanh, l.recurrent_activation = Activation::Sigmoid;
      l.use_bias = true;
      return l;
    }
    l.activation = activation(c, "activation", who, Activation::Tanh, false);
    if (cell.recurrent_activation)
      l.recurrent_activation = activation(c, "recurrent_activation", who, Activation::Sigmoid, false);
    l.use_bias = flag(c, "use_bias", true);
    l.dropout = fraction(c, "dropout", who);
    l.recurrent_dropout = fraction(c, "recurrent_dropout", who);
    return l;
  }

  // Dense's and Conv1D's: the activation, use_bias, and the kernel's and bias' settings.
  void kernel_and_bias(const json& c, const std::string& who, LayerSpec& l) {
    l.activation = activation(c, "activation", who, Activation::Linear, true);
    l.use_bias = flag(c, "use_bias", true);
    l.kernel_initializer = initializer(c, "kernel_initializer", who, l.kernel_initializer);
    l.bias_initializer = initializer(c, "bias_initializer", who, l.bias_initializer);
    l.kernel_constraint = constraint(c, "kernel_constraint", who);
    l.bias_constraint = constraint(c, "bias_constraint", who);
    l.activity_regularizer = regularizer(c, "activity_regularizer", who);
    l.kernel_regularizer = regularizer(c, "kernel_regularizer", who);
    l.bias_regularizer = regularizer(c, "bias_regularizer", who);
    check_dtype(c, who);
  }

  LayerSpec dense(const json& c, const std::string& who) {
    LayerSpec l;
    l.kind = LayerKind::Dense;
    l.units = dim(c, "units", who);
    kernel_and_bias(c, who, l);
    if (set_non_null(c, "quantization_config") || num(c, "lora_rank", 0) > 0)
      refused.push_back(fmt::format("{}: quantized or LoRA Dense layers are not supported", who));
    return l;
  }

  // A 1D window's size or step: a whole number or a list of one ([3], as Keras writes it); absent or
  // null is def; else refused.
  int64_t window(const json& c, const char* key, const std::string& who, int64_t def) {
    auto it = c.find(key);
    if (it == c.end() || it->is_null()) return def;
    const json& v = it->is_array() && it->size() == 1 ? it->front() : *it;
    if (v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= kMaxDim) return v.get<int64_t>();
    refused.push_back(fmt::format("{}: '{}' is {}; rnntrain takes a whole number from 1 to {} (1D layers)", who, key,
                                  printable(it->dump()), kMaxDim));
    return def;
  }
  Padding padding(const json& c, const std::string& who, bool causal) {
    std::string p = str(c, "padding", "valid");
    for (char& ch : p) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (p == "valid") return Padding::Valid;
    if (p == "same") return Padding::Same;
    if (p == "causal" && causal) return Padding::Causal;
    refused.push_back(fmt::format("{}: padding '{}' is not supported (valid, same{})", who, printable(p),
                                  causal ? ", causal" : ""));
    return Padding::Valid;
  }
  // channels_first (Keras' data_format) is not what rnntrain's [batch, steps, features] holds.
  void channels_last(const json& c, const std::string& who) {
    const std::string f = str(c, "data_format", "channels_last");
    if (f != "channels_last")
      refused.push_back(fmt::format("{}: data_format '{}' is not supported (rnntrain's sequences are channels_last: "
                                    "[batch, steps, features])", who, printable(f)));
  }

  LayerSpec conv1d(const json& c, const std::string& who) {
    LayerSpec l;
    l.kind = LayerKind::Conv1D;
    l.filters = dim(c, "filters", who);
    l.kernel_size = window(c, "kernel_size", who, 0);
    if (l.kernel_size == 0) refused.push_back(fmt::format("{}: no kernel_size", who));
    l.strides = window(c, "strides", who, 1);
    l.dilation_rate = window(c, "dilation_rate", who, 1);
    l.padding = padding(c, who, true);
    channels_last(c, who);
    if (num(c, "groups", 1) != 1)
      refused.push_back(fmt::format("{}: groups {} is not supported (rnntrain's Conv1D has groups 1)", who,
                                    printable(c.at("groups").dump())));
    if (l.strides > 1 && l.dilation_rate > 1)
      refused.push_back(fmt::format("{}: strides > 1 with dilation_rate > 1 (Keras refuses it too)", who));
    kernel_and_bias(c, who, l);
    return l;
  }

  LayerSpec layer_normalization(const json& c, const std::string& who) {
    LayerSpec l;
    l.kind = LayerKind::LayerNormalization;
    auto axis = c.find("axis");
    const bool last = axis == c.end() || axis->is_null() || *axis == -1 || *axis == json::array({-1});
    if (!last)
      refused.push_back(fmt::format("{}: axis {} is not supported (rnntrain normalizes over the last axis: -1)", who,
                                    printable(axis->dump())));
    refuse_true(c, who, {"rms_scaling"});
    l.epsilon = num(c, "epsilon", 1e-3);
    if (!(l.epsilon >= 0.0 && l.epsilon <= 1.0))
      refused.push_back(fmt::format("{}: epsilon {} is not in [0, 1]", who, l.epsilon));
    l.center = flag(c, "center", true);
    l.scale = flag(c, "scale", true);
    l.beta_initializer = initializer(c, "beta_initializer", who, l.beta_initializer);
    l.gamma_initializer = initializer(c, "gamma_initializer", who, l.gamma_initializer);
    l.beta_regularizer = regularizer(c, "beta_regularizer", who);
    l.gamma_regularizer = regularizer(c, "gamma_regularizer", who);
    l.beta_constraint = constraint(c, "beta_constraint", who);
    l.gamma_constraint = constraint(c, "gamma_constraint", who);
    check_dtype(c, who);
    return l;
  }

  bool is_custom(const json& layer) const {
    const std::string module = str(layer, "module");
    auto reg = layer.find("registered_name");
    const bool registered = reg != layer.end() && reg->is_string() && reg->get<std::string>() != str(layer, "class_name");
    return registered || (!module.empty() && module.rfind("keras", 0) != 0);
  }

  // One Keras layer entry -> LayerSpec (kind Input for InputLayer). Problems go to `refused`.
  LayerSpec layer(const json& entry) {
    const std::string cls = str(entry, "class_name");
    const json& c = config_of(entry);
    const std::string name = str(c, "name", str(entry, "name", "?"));
    const std::string who = fmt::format("layer '{}' ({})", name, cls);
    LayerSpec l;
    l.kind = LayerKind::Dropout;  // placeholder for refused layers
    if (cls == "Lambda" || cls == "TFOpLambda" || cls == "SlicingOpLambda") {
      refused.push_back(fmt::format("{}: Lambda layers hold Python code, and rnntrain never runs code from a file", who));
    } else if (is_custom(entry)) {
      refused.push_back(fmt::format("{}: a custom class (module '{}', registered as '{}'); rnntrain never runs code "
                                    "from a file", who, str(entry, "module"), str(entry, "registered_name")));
    } else if (cls == "InputLayer") {
      l.kind = LayerKind::Input;
      auto it = c.find("batch_shape");
      if (it == c.end() || !it->is_array()) it = c.find("batch_input_shape");
      if (it == c.end() || !it->is_array() || it->size() < 2 || it->size() > 3)
        refused.push_back(fmt::format("{}: needs a batch_shape of rank 2 (token ids) or 3 (features)", who));
      else
        l.shape = shape_from(*it, who);
    } else if (const CellTraits* cell = cell_of_class(cls)) {
      l = recurrent(*cell, cls, c, who);
      if (cell->cudnn_class && cls == cell->cudnn_class) log_info("{}: {} is read as {} (its weights are converted)", origin.file, who, layer_kind_name(l.kind));
    } else if (cls == "Dense") {
      l = dense(c, who);
    } else if (cls == "Dropout") {
      l.rate = fraction(c, "rate", who);
      drop_set(c, who, {"noise_shape"});
    } else if (cls == "SpatialDropout1D") {
      l.kind = LayerKind::SpatialDropout1D;
      l.rate = fraction(c, "rate", who);
    } else if (cls == "Conv1D") {
      l = conv1d(c, who);
    } else if (cls == "MaxPooling1D" || cls == "AveragePooling1D") {
      l.kind = cls == "MaxPooling1D" ? LayerKind::MaxPooling1D : LayerKind::AveragePooling1D;
      l.pool_size = window(c, "pool_size", who, 2);
      l.strides = window(c, "strides", who, l.pool_size);
      l.padding = padding(c, who, false);
      channels_last(c, who);
    } else if (cls == "GlobalAveragePooling1D" || cls == "GlobalMaxPooling1D") {
      l.kind = cls == "GlobalAveragePooling1D" ? LayerKind::GlobalAveragePooling1D : LayerKind::GlobalMaxPooling1D;
      l.keepdims = flag(c, "keepdims", false);
      channels_last(c, who);
    } else if (cls == "LayerNormalization") {
      l = layer_normalization(c, who);
    } else if (cls == "Flatten") {
      l.kind = LayerKind::Flatten;
      channels_last(c, who);
    } else if (cls == "Activation") {
      l.kind = LayerKind::Activation;
      l.activation = activation(c, "activation", who, Activation::Linear, true);
    } else if (cls == "Masking") {
      l.kind = LayerKind::Masking;
      l.mask_value = num(c, "mask_value", 0.0);
    } else if (cls == "Embedding") {
      l.kind = LayerKind::Embedding;
      l.input_dim = dim(c, "input_dim", who);
      l.output_dim = dim(c, "output_dim", who);
      l.mask_zero = flag(c, "mask_zero", false);
      l.embeddings_initializer = initializer(c, "embeddings_initializer", who, l.embeddings_initializer);
      l.embeddings_constraint = constraint(c, "embeddings_constraint", who);
      l.activity_regularizer = regularizer(c, "activity_regularizer", who);
      l.embeddings_regularizer = regularizer(c, "embeddings_regularizer", who);
      if (set_non_null(c, "quantization_config") || num(c, "lora_rank", 0) > 0)
        refused.push_back(fmt::format("{}: quantized or LoRA embeddings are not supported", who));
    } else if (cls == "Bidirectional" || cls == "TimeDistributed") {
      l.kind = cls == "Bidirectional" ? LayerKind::Bidirectional : LayerKind::TimeDistributed;
      drop_set(c, who, {"activity_regularizer"});  // the wrapper's own, on the merged output
      auto inner = c.find("layer");
      const std::string inner_cls = inner != c.end() && inner->is_object() ? str(*inner, "class_name") : "";
      if (inner == c.end() || !inner->is_object()) {
        refused.push_back(fmt::format("{}: no wrapped 'layer' in its config", who));
      } else if (inner_cls == "Bidirectional" || inner_cls == "TimeDistributed") {
        // Not read: a wrapper inside a wrapper is never supported, and a file may nest them
        // thousands deep.
        refused.push_back(fmt::format("{}: wraps a {}; rnntrain's {} wraps {}", who, inner_cls, cls,
                                      l.kind == LayerKind::Bidirectional ? cell_names() : "Dense or Dropout"));
      } else {
        LayerSpec in = layer(*inner);
        const bool ok = l.kind == LayerKind::Bidirectional ? is_recurrent(in.kind)
                                                           : in.kind == LayerKind::Dense || in.kind == LayerKind::Dropout;
        if (!ok) refused.push_back(fmt::format("{}: wraps a {}; rnntrain's {} wraps {}", who, str(*inner, "class_name"),
                                               cls, l.kind == LayerKind::Bidirectional ? cell_names() : "Dense or Dropout"));
        if (l.kind == LayerKind::Bidirectional && in.name.rfind("forward_", 0) == 0) in.name = in.name.substr(8);
        if (l.kind == LayerKind::TimeDistributed && in.activity_regularizer.active()) {
          log_warn("{}: {}: the wrapped Dense's activity_regularizer is not imported: Keras 3 runs a TimeDistributed "
                   "layer's Dense without it, and so does rnntrain", origin.file, who);
          in.activity_regularizer = {};
        }
        l.inner = std::make_shared<LayerSpec>(std::move(in));
      }
      if (l.kind == LayerKind::Bidirectional) {
        const std::string mode = str(c, "merge_mode", c.contains("merge_mode") ? "" : "concat");
        constexpr MergeMode modes[] = {MergeMode::Concat, MergeMode::Sum, MergeMode::Mul, MergeMode::Ave};
        auto m = std::find_if(std::begin(modes), std::end(modes), [&](MergeMode x) { return mode == merge_mode_name(x); });
        if (m == std::end(modes))
          refused.push_back(fmt::format("{}: merge_mode '{}' is not supported (concat, sum, mul, ave)", who,
                                        mode.empty() ? "None" : mode));
        else
          l.merge_mode = *m;
        if (l.merge_mode != MergeMode::Concat && l.inner && l.inner->activity_regularizer.active()) {
          log_warn("{}: {}: the wrapped layer's activity_regularizer is not imported: Keras regularizes each "
                   "direction's output before merging, which rnntrain does with merge_mode concat only, not {}; "
                   "rnntrain trains without it (no penalty added to the loss)", origin.file, who, mode);
          l.inner->activity_regularizer = {};
        }
        auto back = c.find("backward_layer");
        if (back != c.end() && back->is_object() && l.inner &&
            (str(*back, "class_name") != str(*inner, "class_name") ||
             num(config_of(*back), "units", 0) != num(config_of(*inner), "units", 0)))
          refused.push_back(fmt::format("{}: a backward_layer that differs from the forward one is not supported", who));
      }
    } else {
      refused.push_back(fmt::format("{}: class '{}' is not supported (rnntrain has {})", who, cls, known_classes()));
    }
    l.name = name;
    l.loc.file = origin.file;  // messages about this layer name the file
    return l;
  }

  // The layer entries of a Functional model's single chain, input first.
  std::vector<const json*> chain(const json& cfg) {
    const json& layers = cfg.at("layers");
    std::map<std::string, const json*> by_name;
    for (const json& e : layers) by_name[str(e, "name", str(config_of(e), "name"))] = &e;
    auto first_name = [](const json& refs) -> std::string {  // ["x", 0, 0] or [["x", 0, 0]]
      const json* r = &refs;
      while (r->is_array() && !r->empty() && r->front().is_array()) {
        if (r->size() != 1) return "";
        r = &r->front();
      }
      return r->is_array() && !r->empty() && r->front().is_string() ? r->front().get<std::string>() : "";
    };
    const std::string out = first_name(cfg.value("output_layers", json::array()));
    const std::string in = first_name(cfg.value("input_layers", json::array()));
    if (out.empty() || in.empty())
      fail("the Functional model must have exactly one input and one output; rnntrain imports single chains only");
    std::vector<const json*> rev;
    std::set<std::string> seen;
    for (std::string cur = out;;) {
      auto it = by_name.find(cur);
      if (it == by_name.end() || !seen.insert(cur).second) fail(fmt::format("the Functional model's graph is broken at layer '{}'", cur));
      rev.push_back(it->second);
      if (cur == in) break;
      const json nodes = it->second->value("inbound_nodes", json::array());
      if (nodes.size() != 1)
        fail(fmt::format("layer '{}' is called {} times; rnntrain imports single chains only (no shared layers)", cur, nodes.size()));
      std::vector<std::string> inputs;
      const json& node = nodes[0];
      if (node.is_object()) {  // Keras 3: {"args": [keras tensors...], "kwargs": {mask: ...}}
        for (const json& a : node.value("args", json::array())) {
          if (a.is_object() && str(a, "class_name") == "__keras_tensor__") inputs.push_back(first_name(config_of(a).value("keras_history", json::array())));
          if (a.is_array())
            for (const json& t : a)
              if (t.is_object() && str(t, "class_name") == "__keras_tensor__") inputs.push_back(first_name(config_of(t).value("keras_history", json::array())));
        }
      } else if (node.is_array()) {  // Keras 2: [["name", node, tensor, {kwargs}], ...]
        for (const json& t : node)
          if (t.is_array() && !t.empty() && t[0].is_string()) inputs.push_back(t[0].get<std::string>());
      }
      if (inputs.size() != 1)
        fail(fmt::format("layer '{}' takes {} inputs; rnntrain imports single chains only", cur, inputs.size()));
      cur = inputs[0];
    }
    // Layers off the chain: only the ops with which Keras computes the masks of Embedding(mask_zero)
    // and Masking (NotEqual, Any) for the `mask=` arguments; rnntrain derives masks itself.
    static const std::set<std::string> mask_ops{"NotEqual", "Any", "All", "Equal", "LogicalNot", "LogicalAnd", "Cast"};
    for (const json& e : layers) {
      const std::string n = str(e, "name", str(config_of(e), "name"));
      if (!seen.count(n) && !mask_ops.count(str(e, "class_name")))
        fail(fmt::format("layer '{}' ({}) is not on the chain from '{}' to '{}'; rnntrain imports single chains only",
                         n, str(e, "class_name"), in, out));
    }
    return {rev.rbegin(), rev.rend()};
  }
};

// Keras names may repeat across a wrapper and its layer, or hold '/': make them valid rnntrain names.
void fix_names(ModelSpec& m) {
  std::set<std::string> taken;
  auto fix = [&](LayerSpec& l) {
    std::replace(l.name.begin(), l.name.end(), '/', '_');
    if (l.name.empty()) l.name = "layer";
    std::string n = l.name;
    for (int k = 1; taken.count(n); ++k) n = fmt::format("{}_{}", l.name, k);
    l.name = n;
    taken.insert(n);
  };
  for (LayerSpec& l : m.layers) {
    if (l.inner) fix(*l.inner);
    fix(l);
  }
}

}  // namespace

static ModelSpec model_from_keras_json_unchecked(const nlohmann::json& top, const KerasOrigin& origin) {
  Reader r{origin, {}};
  if (!top.is_object() || !top.contains("class_name"))
    r.fail("the model config is not a Keras model (no 'class_name'); was the file written by Keras?");
  const std::string cls = Reader::str(top, "class_name");
  static const json no_config = json::object();
  const json& cfg = top.contains("config") ? top.at("config") : no_config;
  if (!cfg.is_object() && !(cls == "Sequential" && cfg.is_array()))
    r.fail(fmt::format("the model's 'config' is {}, not an object of layers; the file is damaged or was not written "
                       "by Keras", Reader::printable(cfg.dump())));
  std::vector<json> entries;
  if (cls == "Sequential") {
    static const json none = json::array();
    const json& layers = cfg.is_array() ? cfg : cfg.contains("layers") ? cfg["layers"] : none;  // Keras 2.0: a bare list
    if (!layers.is_array()) r.fail("the Sequential model's 'layers' is not a list");
    entries.assign(layers.begin(), layers.end());
  } else if (cls == "Functional" || cls == "Model") {
    if (!cfg.contains("layers") || !cfg["layers"].is_array()) r.fail("the Functional model config has no list of 'layers'");
    for (const json* e : r.chain(cfg)) entries.push_back(*e);
  } else {
    r.fail(fmt::format("the model class '{}' is not supported: rnntrain imports Sequential models and Functional "
                       "models that are a single chain", cls));
  }
  if (entries.empty()) r.fail("the model has no layers");

  ModelSpec m;
  for (const json& e : entries) {
    LayerSpec l = r.layer(e);
    if (l.kind == LayerKind::Input && !m.layers.empty()) {
      r.refused.push_back(fmt::format("layer '{}': a second InputLayer", l.name));
      continue;
    }
    if (l.kind != LayerKind::Input && m.layers.empty()) {  // Sequential without an InputLayer entry
      const json& c = Reader::config_of(e);
      json bs = c.contains("batch_input_shape") ? c["batch_input_shape"] : cfg.is_object() ? cfg.value("build_input_shape", json()) : json();
      if (!bs.is_array() || bs.size() < 2)
        r.fail("the model has no input shape (no InputLayer, batch_input_shape or build_input_shape); save it from "
               "a built model");
      LayerSpec in;
      in.kind = LayerKind::Input;
      in.name = "input_layer";
      in.shape = r.shape_from(bs, "the model's input shape");
      in.loc.file = origin.file;
      m.layers.push_back(std::move(in));
    }
    m.layers.push_back(std::move(l));
  }
  if (!r.refused.empty()) {
    std::string all;
    for (const auto& s : r.refused) all += "\n  " + s;
    throw DataError(fmt::format("{}: cannot import this model:{}", origin.file, all));
  }
  fix_names(m);
  return m;
}

// A value of an unexpected JSON type deep inside (a string where Keras writes a number, ...) is
// the file's fault: DataError naming the file, not nlohmann's exception.
ModelSpec model_from_keras_json(const nlohmann::json& top, const KerasOrigin& origin) {
  try {
    return model_from_keras_json_unchecked(top, origin);
  } catch (const nlohmann::json::exception& e) {
    std::string why = e.what();
    if (why.rfind("[json.exception.", 0) == 0 && why.find("] ") != std::string::npos) why.erase(0, why.find("] ") + 2);
    throw DataError(fmt::format("{}: the model config does not have the layout Keras writes ({}); the file is damaged "
                                "or was not written by Keras", origin.file, why.substr(0, 100)));
  }
}

}  // namespace rnntrain
