// ModelSpec -> Keras model JSON, in the two dialects that Keras files carry: the legacy `model_config`
// (what both Keras 3 and tf-keras accept) and Keras 3's `config.json`. Reading is keras_model_read.cpp.
#include <fmt/format.h>

#include <tuple>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "io/keras_model.h"
#include "spec/cells.h"

namespace rnntrain {

std::string keras_version_for(const ModelSpec& model) {
  bool k2 = false, k3 = false;
  auto scan = [&](const LayerSpec& l) {
    for (Activation a : {l.activation, l.recurrent_activation}) {
      k2 |= a == Activation::HardSigmoidKeras2;
      k3 |= a == Activation::HardSigmoid;
    }
  };
  for (const LayerSpec& l : model.layers) {
    scan(l);
    if (l.inner) scan(*l.inner);
  }
  if (k2 && k3)
    log_warn("the model uses both hard_sigmoid (Keras 3) and hard_sigmoid_keras2: a Keras file can hold only one "
             "meaning of 'hard_sigmoid'; it is written for Keras 2, so Keras 3 readers will compute the Keras 3 "
             "layers' gates with 0.2x+0.5");
  return k2 ? kKeras2Version : kKeras3Version;
}

const char* keras_class_name(LayerKind k) {
  return k == LayerKind::Input ? "InputLayer" : layer_kind_name(k);
}

namespace {

// Layer l's activation a by its Keras name; gelu_approximate has none (a Keras config cannot name
// keras.activations.gelu with approximate=True), so a model with it is not exported.
const char* activation_json(const LayerSpec& l, Activation a) {
  if (a == Activation::GeluApproximate)
    throw ConfigError(fmt::format("layer '{}' ({}): a Keras model config cannot name the activation gelu_approximate "
                                  "(Keras' 'gelu' is the exact erf form); train with activation: gelu to export it",
                                  l.name, layer_kind_name(l.kind)));
  return a == Activation::HardSigmoidKeras2 ? "hard_sigmoid" : activation_name(a);
}

// A Keras object as a config holds it: {class_name, config}, with Keras 3's module and registered_name.
Json keras_object(const char* module, const char* cls, Json cfg, KerasJsonStyle style) {
  Json j;
  if (style == KerasJsonStyle::Keras3) j["module"] = module;
  j["class_name"] = cls;
  j["config"] = std::move(cfg);
  if (style == KerasJsonStyle::Keras3) j["registered_name"] = nullptr;
  return j;
}

// Parameterless initialisers as their snake_case names (accepted by every Keras); the others as
// {class_name, config} maps.
Json initializer_json(const Initializer& i, KerasJsonStyle style) {
  const char* cls = nullptr;
  Json cfg = Json::object();
  switch (i.kind) {
    case InitKind::Zeros: return "zeros";
    case InitKind::Ones: return "ones";
    case InitKind::GlorotUniform: return "glorot_uniform";
    case InitKind::GlorotNormal: return "glorot_normal";
    case InitKind::HeUniform: return "he_uniform";
    case InitKind::HeNormal: return "he_normal";
    case InitKind::LecunUniform: return "lecun_uniform";
    case InitKind::Orthogonal:
      if (i.a == 1.0) return "orthogonal";
      cls = "Orthogonal", cfg["gain"] = i.a, cfg["seed"] = nullptr;
      break;
    case InitKind::Constant: cls = "Constant", cfg["value"] = i.a; break;
    case InitKind::RandomUniform: cls = "RandomUniform", cfg["minval"] = i.a, cfg["maxval"] = i.b, cfg["seed"] = nullptr; break;
    case InitKind::RandomNormal: cls = "RandomNormal", cfg["mean"] = i.a, cfg["stddev"] = i.b, cfg["seed"] = nullptr; break;
  }
  return keras_object("keras.initializers", cls, cfg, style);
}

// null, or Keras' L1, L2 or L1L2 with its factors.
Json regularizer_json(const Regularizer& r, KerasJsonStyle style) {
  if (!r.active()) return nullptr;
  Json cfg = Json::object();
  if (r.l1 != 0.0) cfg["l1"] = r.l1;
  if (r.l2 != 0.0) cfg["l2"] = r.l2;
  return keras_object("keras.regularizers", r.l1 == 0.0 ? "L2" : r.l2 == 0.0 ? "L1" : "L1L2", cfg, style);
}

// null, or Keras' MaxNorm, NonNeg, UnitNorm or MinMaxNorm with its settings.
Json constraint_json(const Constraint& c, KerasJsonStyle style) {
  const Json axis = c.axis.size() == 1 ? Json(c.axis[0]) : Json(c.axis);
  switch (c.kind) {
    case ConstraintKind::None: return nullptr;
    case ConstraintKind::MaxNorm:
      return keras_object("keras.constraints", "MaxNorm", {{"max_value", c.max_value}, {"axis", axis}}, style);
    case ConstraintKind::NonNeg: return keras_object("keras.constraints", "NonNeg", Json::object(), style);
    case ConstraintKind::UnitNorm: return keras_object("keras.constraints", "UnitNorm", {{"axis", axis}}, style);
    case ConstraintKind::MinMaxNorm:
      break;
  }
  return keras_object("keras.constraints", "MinMaxNorm",
                      {{"min_value", c.min_value}, {"max_value", c.max_value}, {"rate", c.rate}, {"axis", axis}}, style);
}

Json base_config(const std::string& name) {
  Json c;
  c["name"] = name;
  c["trainable"] = true;
  c["dtype"] = "float32";
  return c;
}

Json recurrent_config(const LayerSpec& l, KerasJsonStyle style) {
  Json c = base_config(l.name);
  c["return_sequences"] = l.return_sequences;
  c["return_state"] = false;
  c["go_backwards"] = l.go_backwards;
  c["stateful"] = false;
  c["unroll"] = false;
  c["units"] = l.units;
  c["activation"] = activation_json(l, l.activation);
  const CellTraits& cell = cell_traits(l.kind);
  if (cell.recurrent_activation) c["recurrent_activation"] = activation_json(l, l.recurrent_activation);
  c["use_bias"] = l.use_bias;
  c["kernel_initializer"] = initializer_json(l.kernel_initializer, style);
  c["recurrent_initializer"] = initializer_json(l.recurrent_initializer, style);
  c["bias_initializer"] = initializer_json(l.bias_initializer, style);
  // The flags where Keras' get_config puts them (CellFlag::keras_last), so files read as Keras writes them.
  const auto put_flags = [&](bool last) {
    for (const CellFlag& f : cell.flags)
      if (f.keras_last == last) c[f.name] = l.*f.field;
  };
  put_flags(false);
  c["kernel_regularizer"] = regularizer_json(l.kernel_regularizer, style);
  c["recurrent_regularizer"] = regularizer_json(l.recurrent_regularizer, style);
  c["bias_regularizer"] = regularizer_json(l.bias_regularizer, style);
  c["activity_regularizer"] = regularizer_json(l.activity_regularizer, style);
  c["kernel_constraint"] = constraint_json(l.kernel_constraint, style);
  c["recurrent_constraint"] = constraint_json(l.recurrent_constraint, style);
  c["bias_constraint"] = constraint_json(l.bias_constraint, style);
  c["dropout"] = l.dropout;
  c["recurrent_dropout"] = l.recurrent_dropout;
  put_flags(true);
  return c;
}

Json dense_config(const LayerSpec& l, KerasJsonStyle style) {
  Json c = base_config(l.name);
  c["units"] = l.units;
  c["activation"] = activation_json(l, l.activation);
  c["use_bias"] = l.use_bias;
  c["kernel_initializer"] = initializer_json(l.kernel_initializer, style);
  c["bias_initializer"] = initializer_json(l.bias_initializer, style);
  c["kernel_regularizer"] = regularizer_json(l.kernel_regularizer, style);
  c["bias_regularizer"] = regularizer_json(l.bias_regularizer, style);
  c["activity_regularizer"] = regularizer_json(l.activity_regularizer, style);
  c["kernel_constraint"] = constraint_json(l.kernel_constraint, style);
  c["bias_constraint"] = constraint_json(l.bias_constraint, style);
  return c;
}

const char* padding_name(Padding p) { return p == Padding::Same ? "same" : p == Padding::Causal ? "causal" : "valid"; }

Json shape_json(const Shape& s) {
  Json j = Json::array({nullptr});
  for (int64_t d : s) j.push_back(d < 0 ? Json(nullptr) : Json(d));
  return j;
}

Json layer_json(const LayerSpec& l, KerasJsonStyle style, bool nested);

Json layer_config(const LayerSpec& l, KerasJsonStyle style) {
  switch (l.kind) {
    case LayerKind::Input: {
      Json c;
      c[style == KerasJsonStyle::Legacy ? "batch_input_shape" : "batch_shape"] = shape_json(l.shape);
      c["dtype"] = l.shape.size() == 1 ? "int32" : "float32";
      c["sparse"] = false;
      c["name"] = l.name;
      return c;
    }
    case LayerKind::Embedding: {
      Json c = base_config(l.name);
      c["input_dim"] = l.input_dim;
      c["output_dim"] = l.output_dim;
      c["embeddings_initializer"] = initializer_json(l.embeddings_initializer, style);
      c["embeddings_regularizer"] = regularizer_json(l.embeddings_regularizer, style);
      c["activity_regularizer"] = regularizer_json(l.activity_regularizer, style);
      c["embeddings_constraint"] = constraint_json(l.embeddings_constraint, style);
      c["mask_zero"] = l.mask_zero;
      return c;
    }
    case LayerKind::Masking: {
      Json c = base_config(l.name);
      c["mask_value"] = l.mask_value;
      return c;
    }
    default:  // the recurrent cells (spec/cells.h)
      return recurrent_config(l, style);
    case LayerKind::Dropout: {
      Json c = base_config(l.name);
      c["rate"] = l.rate;
      c["noise_shape"] = nullptr;
      c["seed"] = nullptr;
      return c;
    }
    case LayerKind::Dense: return dense_config(l, style);
    case LayerKind::Conv1D: {
      Json c = base_config(l.name);
      c["filters"] = l.filters;
      c["kernel_size"] = Json::array({l.kernel_size});
      c["strides"] = Json::array({l.strides});
      c["padding"] = padding_name(l.padding);
      c["data_format"] = "channels_last";
      c["dilation_rate"] = Json::array({l.dilation_rate});
      c["groups"] = 1;
      c.update(dense_config(l, style));  // activation, use_bias, the kernel's and bias' settings
      c.erase("units");
      return c;
    }
    case LayerKind::MaxPooling1D:
    case LayerKind::AveragePooling1D: {
      Json c = base_config(l.name);
      c["pool_size"] = Json::array({l.pool_size});
      c["padding"] = padding_name(l.padding);
      c["strides"] = Json::array({l.strides});
      c["data_format"] = "channels_last";
      return c;
    }
    case LayerKind::GlobalAveragePooling1D:
    case LayerKind::GlobalMaxPooling1D: {
      Json c = base_config(l.name);
      c["data_format"] = "channels_last";
      c["keepdims"] = l.keepdims;
      return c;
    }
    case LayerKind::LayerNormalization: {
      Json c = base_config(l.name);
      c["axis"] = -1;
      c["epsilon"] = l.epsilon;
      c["center"] = l.center;
      c["scale"] = l.scale;
      for (auto [w, init, reg, con] : {std::tuple{"beta", &l.beta_initializer, &l.beta_regularizer, &l.beta_constraint},
                                       std::tuple{"gamma", &l.gamma_initializer, &l.gamma_regularizer, &l.gamma_constraint}}) {
        c[fmt::format("{}_initializer", w)] = initializer_json(*init, style);
        c[fmt::format("{}_regularizer", w)] = regularizer_json(*reg, style);
        c[fmt::format("{}_constraint", w)] = constraint_json(*con, style);
      }
      return c;
    }
    case LayerKind::Flatten: {
      Json c = base_config(l.name);
      c["data_format"] = "channels_last";
      return c;
    }
    case LayerKind::SpatialDropout1D: {  // Keras 3's constructor takes these alone (no trainable)
      Json c;
      c["name"] = l.name;
      c["dtype"] = "float32";
      c["rate"] = l.rate;
      c["seed"] = nullptr;
      return c;
    }
    case LayerKind::Activation: {
      Json c = base_config(l.name);
      c["activation"] = activation_json(l, l.activation);
      return c;
    }
    case LayerKind::Bidirectional:
    case LayerKind::TimeDistributed: {
      Json c = base_config(l.name);
      if (l.kind == LayerKind::Bidirectional) c["merge_mode"] = merge_mode_name(l.merge_mode);
      // Keras 3 resolves a wrapped layer only through its "module" key, in either dialect.
      c["layer"] = layer_json(*l.inner, style, true);
      if (l.kind == LayerKind::Bidirectional) {
        // As Keras 3 writes it: both directions, the backward one with go_backwards flipped. Without
        // it Keras derives the backward layer from the forward one's config, which has failed to
        // load ("should have different go_backwards value").
        c["layer"]["config"]["name"] = "forward_" + l.inner->name;
        c["backward_layer"] = layer_json(*l.inner, style, true);
        c["backward_layer"]["config"]["name"] = "backward_" + l.inner->name;
        c["backward_layer"]["config"]["go_backwards"] = !l.inner->go_backwards;
      }
      return c;
    }
  }
  return Json::object();
}

// {"class_name", "config"} (legacy top level) or {"module", "class_name", "config", "registered_name"}.
Json layer_json(const LayerSpec& l, KerasJsonStyle style, bool nested) {
  Json j;
  const bool module = style == KerasJsonStyle::Keras3 || nested;
  if (module) j["module"] = "keras.layers";
  j["class_name"] = keras_class_name(l.kind);
  j["config"] = layer_config(l, style);
  if (module) j["registered_name"] = nullptr;
  return j;
}

}  // namespace

Json model_to_keras_json(const ModelSpec& model, KerasJsonStyle style) {
  Json layers = Json::array();
  for (const LayerSpec& l : model.layers) layers.push_back(layer_json(l, style, false));
  Json cfg;
  cfg["name"] = "sequential";
  cfg["trainable"] = true;
  if (style == KerasJsonStyle::Keras3) cfg["dtype"] = "float32";
  cfg["layers"] = std::move(layers);
  Json j;
  if (style == KerasJsonStyle::Keras3) j["module"] = "keras";
  j["class_name"] = "Sequential";
  j["config"] = std::move(cfg);
  if (style == KerasJsonStyle::Keras3) j["registered_name"] = nullptr;
  return j;
}

}  // namespace rnntrain
