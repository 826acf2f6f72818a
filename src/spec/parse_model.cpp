// The `model:` section: layers with their Keras arguments and defaults, wrapper rules, and
// Keras-style layer names. Shapes are not checked here: parse.cpp runs infer_shapes afterwards.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

#include "spec/cells.h"
#include "spec/layers.h"
#include "spec/sections.h"

namespace rnntrain::spec {

namespace {

using Keys = std::span<const char* const>;

// A cell's keys: these, its recurrent_activation if it has one and its flags (spec/cells.h) after go_backwards.
constexpr const char* kCellKeys[] = {"type", "name", "units", "activation", "use_bias", "return_sequences",
                                     "go_backwards", "dropout", "recurrent_dropout", "kernel_initializer",
                                     "recurrent_initializer", "bias_initializer", "kernel_regularizer",
                                     "recurrent_regularizer", "bias_regularizer", "activity_regularizer",
                                     "kernel_constraint", "recurrent_constraint", "bias_constraint"};

// Every layer kind's keys, cells included, in the order configs list the kinds.
const std::vector<std::pair<LayerKind, std::vector<const char*>>>& all_keys() {
  static const auto all = [] {
    std::vector<std::pair<LayerKind, std::vector<const char*>>> v;
    for (const Choice<LayerKind>& c : layer_kinds()) {
      if (c.alias) continue;
      std::vector<const char*> keys;
      if (const CellTraits* t = find_cell(c.value)) {
        keys.assign(std::begin(kCellKeys), std::end(kCellKeys));
        if (t->recurrent_activation) keys.insert(keys.begin() + 4, "recurrent_activation");
        auto at = std::find_if(keys.begin(), keys.end(), [](const char* k) { return std::string_view(k) == "go_backwards"; });
        for (const CellFlag& f : t->flags) at = keys.insert(at + 1, f.name);
      } else if (const LayerTraits* l = find_layer(c.value)) {
        keys.assign(l->keys.begin(), l->keys.end());
      }
      v.emplace_back(c.value, std::move(keys));
    }
    return v;
  }();
  return all;
}

// The keys any cell takes (besides type and name), for a key put on a Bidirectional.
const std::vector<const char*>& any_cell_keys() {
  static const auto keys = [] {
    std::vector<const char*> v;
    for (const auto& [kind, ks] : all_keys())
      if (is_recurrent(kind))
        for (const char* k : ks)
          if (std::string_view(k) != "type" && std::string_view(k) != "name" &&
              std::find_if(v.begin(), v.end(), [&](const char* o) { return std::string_view(o) == k; }) == v.end())
            v.push_back(k);
    return v;
  }();
  return keys;
}

Keys keys_of(LayerKind k) {
  for (const auto& [kind, keys] : all_keys())
    if (kind == k) return keys;
  return {};
}

// Other layer types that have a key, for "LSTM has no key 'rate' (it is a key of Dropout)".
std::vector<Value::Sibling> siblings_of(LayerKind k) {
  if (k == LayerKind::Bidirectional) return {{"the wrapped layer: put it inside layer: {...}", any_cell_keys()}};
  if (k == LayerKind::TimeDistributed)
    return {{"the wrapped Dense: put it inside layer: {...}", find_layer(LayerKind::Dense)->keys}};
  std::vector<Value::Sibling> out;
  for (const auto& [kind, keys] : all_keys())
    if (kind != k) out.push_back({layer_kind_name(kind), keys});
  return out;
}

constexpr const char* kInitKeys[] = {"type"};
constexpr const char* kUniformKeys[] = {"type", "minval", "maxval"};
constexpr const char* kNormalKeys[] = {"type", "mean", "stddev"};
constexpr const char* kOrthogonalKeys[] = {"type", "gain"};
constexpr const char* kConstantKeys[] = {"type", "value"};

Initializer read_initializer(const Value& v) {
  const bool is_map = v.is_map();
  if (!is_map && !v.is_scalar())
    v.fail(fmt::format("expected an initializer name or a map like {{type: random_uniform, minval: -0.1, maxval: 0.1}}, got {}", v.describe()));
  const Value tv = is_map ? v.need("type", "; e.g. {type: orthogonal, gain: 1.0}") : v;
  Initializer init{read_enum(tv, init_kinds(), "initializer")};
  Keys keys = kInitKeys;
  switch (init.kind) {
    case InitKind::RandomUniform: init.a = -0.05, init.b = 0.05, keys = kUniformKeys; break;
    case InitKind::RandomNormal: init.a = 0.0, init.b = 0.05, keys = kNormalKeys; break;
    case InitKind::Orthogonal: init.a = 1.0, keys = kOrthogonalKeys; break;
    case InitKind::Constant: keys = kConstantKeys; break;
    default: break;
  }
  if (!is_map) return init;
  const Value::Sibling others[] = {{"random_uniform", kUniformKeys}, {"random_normal", kNormalKeys},
                                   {"orthogonal", kOrthogonalKeys}, {"constant", kConstantKeys}};
  v.check_keys(keys, tv.as_string(), others);
  const double inf = std::numeric_limits<double>::infinity();
  if (auto x = v.get("minval")) init.a = x->as_finite();
  if (auto x = v.get("maxval")) init.b = x->as_finite();
  if (auto x = v.get("mean")) init.a = x->as_finite();
  if (auto x = v.get("stddev")) init.b = x->as_double(0, inf, false, false);
  if (auto x = v.get("gain")) init.a = x->as_finite();
  if (auto x = v.get("value")) init.a = x->as_finite();
  if (init.kind == InitKind::RandomUniform && init.b < init.a)
    v.fail(fmt::format("minval ({}) is larger than maxval ({}); swap them", init.a, init.b));
  return init;
}

constexpr const char* kRegularizerKeys[] = {"l1", "l2"};

// l1 or l2 (Keras' names: a factor of 0.01), or {l1: 0.001, l2: 0.0001} (either or both).
Regularizer read_regularizer(const Value& v) {
  const double inf = std::numeric_limits<double>::infinity();
  if (v.is_scalar()) {
    const std::string name = v.as_string();
    if (name == "l1") return {0.01, 0.0};
    if (name == "l2") return {0.0, 0.01};
    v.fail(fmt::format("expected l1, l2 (a factor of 0.01, as Keras) or a map like {{l1: 0.001, l2: 0.0001}}, got {}",
                       v.describe()));
  }
  v.require_map(" like {l2: 0.0001} or {l1: 0.001, l2: 0.0001}");
  v.check_keys(kRegularizerKeys, "regularizer");
  Regularizer r;
  if (auto x = v.get("l1")) r.l1 = x->as_double(0, inf, false, true);
  if (auto x = v.get("l2")) r.l2 = x->as_double(0, inf, false, true);
  return r;
}

constexpr const char* kConstraintKeys[] = {"type", "max_value", "min_value", "rate", "axis"};

// non_neg, unit_norm, max_norm (Keras' defaults), or a map like {type: max_norm, max_value: 3, axis: 0};
// axis: an integer or a list of them, within the weight's `rank` (2; Conv1D's kernel 3).
Constraint read_constraint(const Value& v, int rank) {
  if (!v.is_map() && !v.is_scalar())
    v.fail(fmt::format("expected a constraint name or a map like {{type: max_norm, max_value: 3}}, got {}", v.describe()));
  const Value tv = v.is_map() ? v.need("type", "; e.g. {type: max_norm, max_value: 3, axis: 0}") : v;
  Constraint c;
  c.kind = read_enum(tv, constraint_kinds(), "constraint");
  if (c.kind == ConstraintKind::MinMaxNorm) c.max_value = 1.0;
  if (!v.is_map()) return c;
  v.check_keys(kConstraintKeys, tv.as_string());
  const double inf = std::numeric_limits<double>::infinity();
  const bool norm = c.kind != ConstraintKind::NonNeg;
  auto only = [&](const char* key, bool allowed) {
    if (v.has(key) && !allowed)
      v.get(key)->fail(fmt::format("{} has no {}", tv.as_string(), key));
    return v.get(key);
  };
  if (auto x = only("max_value", c.kind == ConstraintKind::MaxNorm || c.kind == ConstraintKind::MinMaxNorm))
    c.max_value = x->as_double(0, inf, false, true);
  if (auto x = only("min_value", c.kind == ConstraintKind::MinMaxNorm)) c.min_value = x->as_double(0, inf, false, true);
  if (auto x = only("rate", c.kind == ConstraintKind::MinMaxNorm)) c.rate = x->as_double(0, 1, false, false);
  if (c.min_value > c.max_value)
    v.fail(fmt::format("min_value ({}) is larger than max_value ({}); swap them", c.min_value, c.max_value));
  if (auto x = only("axis", norm)) {
    c.axis.clear();
    if (x->is_seq()) {
      const std::vector<Value> axes = x->items();
      if (axes.empty() || axes.size() > static_cast<size_t>(rank))
        x->fail(fmt::format("expected one to {} axes (the weight has {} dimensions)", rank, rank));
      for (const Value& a : axes) c.axis.push_back(static_cast<int>(a.as_int(-rank, rank - 1)));
    } else {
      c.axis.push_back(static_cast<int>(x->as_int(-rank, rank - 1)));
    }
  }
  return c;
}

// dense: a Dense, Conv1D or Activation layer's; else a recurrent cell's,
// which keeps only its outputs: the activations whose derivative needs the input are not for it.
Activation read_activation(const Value& v, bool dense) {
  const Activation a = read_enum(v, activations(), "activation");
  if (!dense && (a == Activation::Softmax || act_grad_from_input(a)))
    v.fail(fmt::format("{} is only available on Dense, Conv1D and Activation layers; recurrent layers take tanh, "
                       "sigmoid, relu, linear, "
                       "hard_sigmoid", activation_name(a)));
  return a;
}

Shape read_input_shape(const Value& v) {
  const char* hint = ": [timesteps, features] for feature vectors or [timesteps] for token ids; timesteps may be null";
  v.require_seq(hint);
  const std::vector<Value> dims = v.items();
  if (dims.empty() || dims.size() > 2) v.fail(fmt::format("expected 1 or 2 entries{}, got {} entries", hint, dims.size()));
  Shape s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].is_null() && i == 0) {
      s.push_back(-1);
    } else if (dims[i].is_null()) {
      dims[i].fail("the number of features must be given; only timesteps (the first entry) may be null");
    } else {
      s.push_back(dims[i].as_int(1, kMaxDim));
    }
  }
  return s;
}

// The settings a layer's map may hold, read into l: each one present is checked as it is read.
struct LayerReader {
  const Value& v;
  LayerSpec& l;
  std::string kind;  // the layer's type, for messages

  int64_t need_dim(const char* key, const char* example) const {
    return v.need(key, fmt::format("; {} needs {}, e.g. {}", kind, key, example)).as_int(1, kMaxDim);
  }
  void fraction(const char* key, double& out) const {
    if (auto x = v.get(key)) out = x->as_double(0.0, 1.0, false, true);
  }
  void flag(const char* key, bool& out) const {
    if (auto x = v.get(key)) out = x->as_bool();
  }
  void init(const char* key, Initializer& out) const {
    if (auto x = v.get(key)) out = read_initializer(*x);
  }
  void reg(const char* key, Regularizer& out) const {
    if (auto x = v.get(key)) out = read_regularizer(*x);
  }
  void constraint(const char* key, Constraint& out) const {
    const int rank = l.kind == LayerKind::Conv1D && std::string_view(key) == "kernel_constraint" ? 3 : 2;
    if (auto x = v.get(key)) out = read_constraint(*x, rank);
  }

  void embedding() const {
    l.input_dim = need_dim("input_dim", "input_dim: 1000 (the vocabulary size)");
    l.output_dim = need_dim("output_dim", "output_dim: 64");
    flag("mask_zero", l.mask_zero);
    init("embeddings_initializer", l.embeddings_initializer);
    reg("embeddings_regularizer", l.embeddings_regularizer);
    reg("activity_regularizer", l.activity_regularizer);
    constraint("embeddings_constraint", l.embeddings_constraint);
  }
  // The recurrent cells (spec/cells.h).
  void cell() const {
    l.units = need_dim("units", "units: 64");
    if (auto x = v.get("activation")) l.activation = read_activation(*x, false);
    if (auto x = v.get("recurrent_activation")) l.recurrent_activation = read_activation(*x, false);
    flag("use_bias", l.use_bias);
    flag("return_sequences", l.return_sequences);
    flag("go_backwards", l.go_backwards);
    for (const CellFlag& f : cell_traits(l.kind).flags) flag(f.name, l.*f.field);
    fraction("dropout", l.dropout);
    fraction("recurrent_dropout", l.recurrent_dropout);
    init("kernel_initializer", l.kernel_initializer);
    init("recurrent_initializer", l.recurrent_initializer);
    init("bias_initializer", l.bias_initializer);
    reg("kernel_regularizer", l.kernel_regularizer);
    reg("recurrent_regularizer", l.recurrent_regularizer);
    reg("bias_regularizer", l.bias_regularizer);
    reg("activity_regularizer", l.activity_regularizer);
    constraint("kernel_constraint", l.kernel_constraint);
    constraint("recurrent_constraint", l.recurrent_constraint);
    constraint("bias_constraint", l.bias_constraint);
  }
  // A window's size or step: an integer, or a list of one (as Keras' configs write it: [3]).
  int64_t window(const Value& x) const {
    if (!x.is_seq()) return x.as_int(1, kMaxDim);
    const std::vector<Value> items = x.items();
    if (items.size() != 1) x.fail("expected one integer (a 1D window), e.g. 3 or [3]");
    return items[0].as_int(1, kMaxDim);
  }
  int64_t window(const char* key, int64_t def) const {
    auto x = v.get(key);
    return x ? window(*x) : def;
  }
  Padding padding(bool causal) const {
    auto x = v.get("padding");
    if (!x) return Padding::Valid;
    const Padding p = read_enum(*x, paddings(), "padding");
    if (p == Padding::Causal && !causal) x->fail("causal padding is Conv1D's; poolings take valid or same");
    return p;
  }
  void kernel_and_bias() const {
    flag("use_bias", l.use_bias);
    init("kernel_initializer", l.kernel_initializer);
    init("bias_initializer", l.bias_initializer);
    reg("kernel_regularizer", l.kernel_regularizer);
    reg("bias_regularizer", l.bias_regularizer);
    reg("activity_regularizer", l.activity_regularizer);
    constraint("kernel_constraint", l.kernel_constraint);
    constraint("bias_constraint", l.bias_constraint);
  }
  void conv1d() const {
    l.filters = need_dim("filters", "filters: 32");
    l.kernel_size = window(v.need("kernel_size", "; Conv1D needs kernel_size, e.g. kernel_size: 3"));
    l.strides = window("strides", 1);
    l.dilation_rate = window("dilation_rate", 1);
    l.padding = padding(true);
    if (auto x = v.get("groups"); x && x->as_int(1, kMaxDim) != 1)
      x->fail("rnntrain's Conv1D has groups: 1 (every filter sees every input channel); split the channels "
              "into several Conv1D layers instead");
    if (l.strides > 1 && l.dilation_rate > 1)
      v.get("dilation_rate")->fail("strides > 1 with dilation_rate > 1 is refused, as Keras refuses it; use one of them");
    l.activation = Activation::Linear;
    if (auto x = v.get("activation")) l.activation = read_activation(*x, true);
    kernel_and_bias();
  }
  void pooling() const {
    if (l.kind == LayerKind::AveragePooling1D)
      l.pool_size = window(v.need("pool_size", "; AveragePooling1D needs pool_size (Keras has no default), e.g. pool_size: 2"));
    else
      l.pool_size = window("pool_size", 2);
    l.strides = window("strides", l.pool_size);
    l.padding = padding(false);
  }
  void layer_normalization() const {
    if (auto x = v.get("axis")) {
      const bool last = x->is_seq() ? x->items().size() == 1 && x->items()[0].as_int(-1, -1) == -1
                                    : x->as_int(-1, -1) == -1;
      if (!last) x->fail("rnntrain normalizes over the last axis: axis -1 (or [-1])");
    }
    if (auto x = v.get("epsilon")) l.epsilon = x->as_double(0.0, 1.0, false, false);  // [0, 1], as the Keras import
    flag("center", l.center);
    flag("scale", l.scale);
    init("beta_initializer", l.beta_initializer);
    init("gamma_initializer", l.gamma_initializer);
    reg("beta_regularizer", l.beta_regularizer);
    reg("gamma_regularizer", l.gamma_regularizer);
    constraint("beta_constraint", l.beta_constraint);
    constraint("gamma_constraint", l.gamma_constraint);
  }
  void dense(bool wrapped) const {
    l.units = need_dim("units", "units: 10");
    l.activation = Activation::Linear;
    if (auto x = v.get("activation")) l.activation = read_activation(*x, true);
    kernel_and_bias();
    if (wrapped && l.activity_regularizer.active())
      v.get("activity_regularizer")->fail("Keras 3's TimeDistributed runs its Dense without the activity regularizer, "
                                          "so rnntrain does too: remove it (or use a Dense on the sequence, which "
                                          "acts on every step)");
  }
};

LayerSpec read_layer(const Value& v, LayerKind wrapper, bool wrapped) {
  v.require_map(" like {type: LSTM, units: 64}");
  const Value tv = v.need("type", "; every layer needs a type, e.g. {type: LSTM, units: 64}");
  LayerSpec l;
  l.kind = read_enum(tv, layer_kinds(), "layer type");
  l.loc = v.loc();
  if (wrapped && wrapper == LayerKind::Bidirectional && !is_recurrent(l.kind))
    tv.fail(fmt::format("Bidirectional wraps {}, got {}", cell_names(true), layer_kind_name(l.kind)));
  if (wrapped && wrapper == LayerKind::TimeDistributed && l.kind != LayerKind::Dense && l.kind != LayerKind::Dropout)
    tv.fail(fmt::format("TimeDistributed wraps a Dense or a Dropout layer, got {}", layer_kind_name(l.kind)));
  const std::vector<Value::Sibling> others = siblings_of(l.kind);
  v.check_keys(keys_of(l.kind), layer_kind_name(l.kind), others);
  const LayerReader r{v, l, layer_kind_name(l.kind)};
  if (auto x = v.get("name")) l.name = x->as_string();

  switch (l.kind) {
    case LayerKind::Input:
      l.shape = read_input_shape(v.need("shape", "; e.g. {type: Input, shape: [null, 8]}"));
      break;
    case LayerKind::Embedding:
      r.embedding();
      break;
    case LayerKind::Masking:
      if (auto x = v.get("mask_value")) l.mask_value = x->as_finite();
      break;
    default:
      r.cell();
      break;
    case LayerKind::Dense:
      r.dense(wrapped);
      break;
    case LayerKind::Dropout:
    case LayerKind::SpatialDropout1D:
      l.rate = v.need("rate", fmt::format("; e.g. {{type: {}, rate: 0.2}}", r.kind)).as_double(0.0, 1.0, false, true);
      break;
    case LayerKind::Conv1D:
      r.conv1d();
      break;
    case LayerKind::MaxPooling1D:
    case LayerKind::AveragePooling1D:
      r.pooling();
      break;
    case LayerKind::GlobalAveragePooling1D:
    case LayerKind::GlobalMaxPooling1D:
      r.flag("keepdims", l.keepdims);
      break;
    case LayerKind::LayerNormalization:
      r.layer_normalization();
      break;
    case LayerKind::Flatten:
      break;
    case LayerKind::Activation:
      l.activation = read_activation(v.need("activation", "; e.g. {type: Activation, activation: relu}"), true);
      break;
    case LayerKind::Bidirectional:
      if (auto x = v.get("merge_mode")) l.merge_mode = read_enum(*x, merge_modes(), "merge_mode");
      [[fallthrough]];
    case LayerKind::TimeDistributed: {
      const char* example = l.kind == LayerKind::Bidirectional ? "layer: {type: LSTM, units: 32}" : "layer: {type: Dense, units: 10}";
      const Value inner = v.need("layer", fmt::format("; {} needs the layer it wraps, e.g. {}", r.kind, example));
      l.inner = std::make_shared<LayerSpec>(read_layer(inner, l.kind, true));
      if (l.kind == LayerKind::Bidirectional && l.merge_mode != MergeMode::Concat && l.inner->activity_regularizer.active())
        inner.get("activity_regularizer")->fail(fmt::format(
            "Keras regularizes each direction's output before merging; rnntrain does that with merge_mode concat, "
            "not {}", merge_mode_name(l.merge_mode)));
      break;
    }
  }
  return l;
}

// One place a layer is defined, for naming: the layer and its `name:` entry (if any).
struct Site {
  LayerSpec* layer;
  std::optional<Value> name;
  std::string path;
};

// User names must be unique HDF5-safe strings; the others get Keras' "lstm", "lstm_1", ... in
// construction order (a wrapped layer before its wrapper), skipping names the user took.
void assign_names(std::vector<LayerSpec>& layers, const std::vector<Value>& items) {
  std::vector<Site> sites;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].inner) {
      const Value inner = *items[i].get("layer");
      sites.push_back({layers[i].inner.get(), inner.get("name"), inner.path()});
    }
    sites.push_back({&layers[i], items[i].get("name"), items[i].path()});
  }
  std::map<std::string, std::string> taken;  // name -> path of the layer that has it
  for (const Site& s : sites) {
    if (!s.name) continue;
    const std::string& n = s.layer->name;
    if (n.find('/') != std::string::npos)
      s.name->fail(fmt::format("layer names may not contain '/' (they name groups in weight files), got \"{}\"", n));
    auto [it, fresh] = taken.emplace(n, s.path);
    if (!fresh) s.name->fail(fmt::format("the name '{}' is already used by {}; layer names must be unique", n, it->second));
  }
  std::map<std::string, int> counters;
  for (const Site& s : sites) {
    if (s.name) continue;
    const std::string prefix = layer_snake_name(s.layer->kind);
    std::string n;
    do {
      const int c = counters[prefix]++;
      n = c == 0 ? prefix : fmt::format("{}_{}", prefix, c);
    } while (taken.count(n));
    taken.emplace(n, s.path);
    s.layer->name = n;
  }
}

}  // namespace

ModelSpec read_model(const Value& v) {
  v.require_map(" with layers: [...]");
  constexpr const char* keys[] = {"layers", "init_from"};
  v.check_keys(keys, "model");
  ModelSpec m;
  if (auto x = v.get("init_from")) m.init_from = x->as_string();
  const Value lv = v.need("layers", "; e.g. layers: [{type: Input, shape: [null, 8]}, {type: LSTM, units: 32}, {type: Dense, units: 1}]");
  lv.require_seq(" of layers, e.g. [{type: Input, shape: [null, 8]}, {type: LSTM, units: 32}]");
  const std::vector<Value> items = lv.items();
  if (items.empty()) lv.fail("the model has no layers; start with {type: Input, shape: [...]}");
  for (size_t i = 0; i < items.size(); ++i) {
    m.layers.push_back(read_layer(items[i], LayerKind::Input, false));
    const LayerKind k = m.layers.back().kind;
    if (i == 0 && k != LayerKind::Input)
      items[0].fail(fmt::format("the first layer must be {{type: Input, shape: [timesteps, features]}} (or [timesteps] "
                                "for token ids), got {}", layer_kind_name(k)));
    if (i > 0 && k == LayerKind::Input) items[i].fail("Input can only be the first layer");
  }
  if (items.size() == 1) lv.fail("the model has only an Input layer; add the layers that follow it");
  assign_names(m.layers, items);
  return m;
}

}  // namespace rnntrain::spec
