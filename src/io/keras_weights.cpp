// Keras' legacy and Keras 3 weight layouts (see keras_weights.h), and the positional assignment with
// CuDNN conversion and shape checks.
#include "io/keras_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "io/keras_cudnn.h"
#include "io/keras_model.h"
#include "spec/shapes.h"

namespace rnntrain {

namespace {

constexpr size_t kHeaderLimit = 64512;  // Keras' HDF5_OBJECT_HEADER_LIMIT

// "lstm/lstm_cell/kernel:0", "bidirectional/forward_lstm/lstm_cell/kernel:0", "dense/kernel:0".
std::string legacy_weight_name(const LayerSpec& l, const std::string& param) {
  if (is_recurrent(l.kind)) return fmt::format("{}/{}/{}:0", l.name, cell_traits(l.kind).keras_cell, param);
  if (l.kind == LayerKind::Bidirectional) {
    const auto slash = param.find('/');
    const std::string dir = param.substr(0, slash), w = param.substr(slash + 1);
    return fmt::format("{}/{}_{}/{}/{}:0", l.name, dir, l.inner->name, cell_traits(l.inner->kind).keras_cell, w);
  }
  return fmt::format("{}/{}:0", l.name, param);
}


// layers/<class>[_n] for each model layer but the Input (Sequential.layers), counted per class.
std::vector<std::string> keras3_paths(const ModelSpec& model) {
  std::map<std::string, int> count;
  std::vector<std::string> out(model.layers.size());
  for (size_t i = 1; i < model.layers.size(); ++i) {
    const std::string base = layer_snake_name(model.layers[i].kind);
    const int n = count[base]++;
    out[i] = n == 0 ? "layers/" + base : fmt::format("layers/{}_{}", base, n);
  }
  return out;
}

// The vars groups that hold a layer's weights, in Keras order.
std::vector<std::string> vars_groups(const LayerSpec& l, const std::string& p) {
  if (is_recurrent(l.kind)) return {p + "/cell/vars"};
  if (l.kind == LayerKind::Bidirectional) return {p + "/forward_layer/cell/vars", p + "/backward_layer/cell/vars"};
  if (l.kind == LayerKind::TimeDistributed) return {p + "/layer/vars"};
  return {p + "/vars"};
}

// Datasets "0", "1", ... of a vars group, in numeric order.
std::vector<std::string> numbered(const h5::Group& g) {
  std::vector<std::string> names;
  for (const std::string& c : g.children())
    if (g.has_dataset(c)) names.push_back(c);
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  return names;
}

bool holds_datasets(const h5::Group& g) {
  for (const std::string& c : g.children())
    if (g.has_dataset(c) || (g.has_group(c) && holds_datasets(g.group(c)))) return true;
  return false;
}

void vars_group(const h5::Group& root, const std::string& path, const std::string& name) {
  root.require_group(path).set_attr("name", name);
}

}  // namespace

std::vector<std::string> read_name_list(const h5::Group& g, const std::string& name) {
  if (g.has_attr(name)) return g.attr_strings(name);
  std::vector<std::string> out;
  for (int i = 0; g.has_attr(name + std::to_string(i)); ++i) {
    auto part = g.attr_strings(name + std::to_string(i));
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

void write_name_list(const h5::Group& g, const std::string& name, const std::vector<std::string>& values) {
  size_t width = 1;
  for (const auto& v : values) width = std::max(width, v.size());
  size_t chunks = 1;  // as numpy.array_split: the first n % k chunks get one more entry
  while (((values.size() + chunks - 1) / chunks) * width > kHeaderLimit) ++chunks;
  if (chunks == 1) {
    g.set_attr(name, values);
    return;
  }
  size_t at = 0;
  for (size_t c = 0; c < chunks; ++c) {
    const size_t n = values.size() / chunks + (c < values.size() % chunks ? 1 : 0);
    g.set_attr(name + std::to_string(c), std::vector<std::string>(values.begin() + at, values.begin() + at + n));
    at += n;
  }
}

std::vector<StoredLayer> read_legacy_weights(const h5::Group& g) {
  std::vector<StoredLayer> out;
  for (const std::string& name : read_name_list(g, "layer_names")) {
    if (!g.has_group(name))
      throw DataError(fmt::format("{}: layer '{}' is listed in layer_names of '{}' but has no group; the file is "
                                  "incomplete", g.file(), name, g.path()));
    h5::Group lg = g.group(name);
    StoredLayer s;
    s.name = name;
    s.names = read_name_list(lg, "weight_names");
    if (s.names.empty()) continue;
    for (const std::string& w : s.names) {
      if (!lg.has_dataset(w))
        throw DataError(fmt::format("{}: layer '{}' lists weight '{}' but the file has no dataset '{}/{}'; the file "
                                    "is incomplete", g.file(), name, w, lg.path(), w));
      s.values.push_back(lg.read_weight(w));
    }
    out.push_back(std::move(s));
  }
  return out;
}

void write_legacy_weights(const h5::Group& g, const ModelSpec& model, const Params& params,
                          const std::string& keras_version) {
  std::vector<std::string> names;
  for (size_t i = 1; i < model.layers.size(); ++i) names.push_back(model.layers[i].name);
  write_name_list(g, "layer_names", names);
  g.set_attr("backend", std::string("tensorflow"));
  g.set_attr("keras_version", keras_version);
  for (size_t i = 1; i < model.layers.size(); ++i) {
    const LayerSpec& l = model.layers[i];
    h5::Group lg = g.create_group(l.name);
    std::vector<std::string> wnames;
    for (const Param& p : params.layers.at(i).params) {
      wnames.push_back(legacy_weight_name(l, p.name));
      lg.write(wnames.back(), p.value);
    }
    write_name_list(lg, "weight_names", wnames);
  }
  g.create_group("top_level_model_weights").set_attr("weight_names", std::vector<std::string>{});
}

void write_keras3_weights(const h5::Group& root, const ModelSpec& model, const Params& params) {
  vars_group(root, "vars", "sequential");
  const std::vector<std::string> paths = keras3_paths(model);
  for (size_t i = 1; i < model.layers.size(); ++i) {
    const LayerSpec& l = model.layers[i];
    const std::string& p = paths[i];
    vars_group(root, p + "/vars", l.name);
    if (is_recurrent(l.kind)) vars_group(root, p + "/cell/vars", cell_traits(l.kind).keras_cell);
    if (l.kind == LayerKind::TimeDistributed) vars_group(root, p + "/layer/vars", l.inner->name);
    if (l.kind == LayerKind::Bidirectional) {
      for (const char* dir : {"forward", "backward"}) {
        vars_group(root, fmt::format("{}/{}_layer/vars", p, dir), fmt::format("{}_{}", dir, l.inner->name));
        vars_group(root, fmt::format("{}/{}_layer/cell/vars", p, dir), cell_traits(l.inner->kind).keras_cell);
      }
    }
    const std::vector<std::string> groups = vars_groups(l, p);
    const auto& ps = params.layers.at(i).params;
    const size_t per = ps.size() / groups.size();
    for (size_t j = 0; j < ps.size(); ++j)
      root.group(groups[j / per]).write(std::to_string(j % per), ps[j].value);
  }
}

std::vector<StoredLayer> read_keras3_weights(const h5::Group& root, const ModelSpec& model) {
  const std::vector<std::string> paths = keras3_paths(model);
  const std::vector<LayerShape> shapes = infer_shapes(model);
  std::vector<StoredLayer> out;
  std::set<std::string> used;
  for (size_t i = 1; i < model.layers.size(); ++i) {
    const LayerSpec& l = model.layers[i];
    if (shapes[i].weights == 0) continue;  // Masking, Dropout, the poolings, ...: nothing to read
    StoredLayer s;
    s.name = paths[i];
    for (const std::string& gp : vars_groups(l, paths[i])) {
      if (!root.has_group(gp))
        throw DataError(fmt::format("{}: no weights for layer '{}' ({}) at '{}'. Keras 3 files name weight groups by "
                                    "layer class and position (layers/lstm, layers/lstm_1, ...): the file was written "
                                    "for a different model", root.file(), l.name, keras_class_name(l.kind), gp));
      h5::Group g = root.group(gp);
      for (const std::string& d : numbered(g)) {
        s.names.push_back(gp + "/" + d);
        s.values.push_back(g.read_weight(d));
      }
    }
    used.insert(paths[i].substr(7));  // after "layers/"
    out.push_back(std::move(s));
  }
  if (root.has_group("layers")) {
    h5::Group layers = root.group("layers");
    for (const std::string& c : layers.children())
      if (!used.count(c) && layers.has_group(c) && holds_datasets(layers.group(c)))
        throw DataError(fmt::format("{}: layer count mismatch: the file has weights at 'layers/{}' and the model has no "
                                    "such layer (the model's weighted layers are at: {}); the file was written for a "
                                    "different model", root.file(), c, [&] {
                                      std::string s;
                                      for (const auto& u : used) s += (s.empty() ? "layers/" : ", layers/") + u;
                                      return s.empty() ? std::string("none") : s;
                                    }()));
  } else if (!out.empty()) {
    throw DataError(fmt::format("{}: no 'layers' group: not a Keras 3 weights file (.weights.h5)", root.file()));
  }
  return out;
}

namespace {

// Converts one recurrent cell's stored [kernel, recurrent_kernel, bias] from the CuDNN layout when
// the bias shape says it is one; refuses GRU weights of the other reset_after convention.
void maybe_from_cudnn(std::vector<Tensor>& w, const LayerSpec& r, const std::string& file, const std::string& who) {
  if (w.size() != 3 || w[2].rank() != 1) return;
  const CellTraits& cell = cell_traits(r.kind);
  const int64_t u = r.units, g = cell.gates, n = w[2].numel();
  const bool two_biases = cell.two_biases != nullptr;  // Keras keeps both of cuDNN's biases (GRU reset_after)
  const char* flag = "";  // the flag that gives two biases
  for (const CellFlag& f : cell.flags)
    if (f.field == cell.two_biases) flag = f.name;
  if (cell.cudnn_class && n == 2 * g * u) {
    if (two_biases && !(r.*cell.two_biases))
      throw DataError(fmt::format("{}: {}: the file holds {} weights, which need {}: true", file, who, cell.cudnn_class, flag));
    w = {cudnn_compat::kernel_from_cudnn(w[0], g), cudnn_compat::recurrent_from_cudnn(w[1], g),
         two_biases ? cudnn_compat::gru_bias_from_cudnn(w[2]) : cudnn_compat::lstm_bias_from_cudnn(w[2])};
  } else if (two_biases && r.*cell.two_biases && n == g * u) {
    throw DataError(fmt::format("{}: {}: the file holds {} weights with {}=False (bias {}), the model has {}: true "
                                "(bias (2, {})); set {}: false on this layer",
                                file, who, cell.keras_class, flag, shape_str(w[2].shape), flag, g * u, flag));
  }
}

}  // namespace

void assign_weights(const std::string& file, const std::vector<StoredLayer>& stored, const ModelSpec& model,
                    Params& params) {
  std::vector<size_t> mine;
  for (size_t i = 0; i < params.layers.size(); ++i)
    if (!params.layers[i].params.empty()) mine.push_back(i);
  if (stored.size() != mine.size()) {
    std::string names;
    for (const auto& s : stored) names += (names.empty() ? "" : ", ") + s.name;
    throw DataError(fmt::format("{}: layer count mismatch: the model has {} layers with weights, the file has {} ({}); "
                                "the file was written for a different model", file, mine.size(), stored.size(),
                                names.empty() ? "none" : names));
  }
  std::vector<std::vector<Tensor>> values(mine.size());
  for (size_t k = 0; k < mine.size(); ++k) {
    const LayerSpec& l = model.layers.at(mine[k]);
    const LayerParams& lp = params.layers[mine[k]];
    const StoredLayer& s = stored[k];
    const std::string who = fmt::format("layer '{}' ({}; '{}' in the file)", l.name, keras_class_name(l.kind), s.name);
    std::vector<Tensor> w = s.values;
    if (is_recurrent(l.kind)) maybe_from_cudnn(w, l, file, who);
    if (l.kind == LayerKind::Bidirectional && w.size() == 6) {
      std::vector<Tensor> f(w.begin(), w.begin() + 3), b(w.begin() + 3, w.end());
      maybe_from_cudnn(f, *l.inner, file, who + " forward");
      maybe_from_cudnn(b, *l.inner, file, who + " backward");
      w = f;
      w.insert(w.end(), b.begin(), b.end());
    }
    if (w.size() != lp.params.size())
      throw DataError(fmt::format("{}: {}: the file has {} weights, the model expects {} ({}); check use_bias and the "
                                  "layer type", file, who, w.size(), lp.params.size(), [&] {
                                    std::string n;
                                    for (const auto& p : lp.params) n += (n.empty() ? "" : ", ") + p.name;
                                    return n;
                                  }()));
    for (size_t j = 0; j < w.size(); ++j)
      if (w[j].shape != lp.params[j].value.shape)
        throw DataError(fmt::format("{}: {}: weight '{}' ('{}' in the file) has shape {} in the file, the model expects "
                                    "{}", file, who, lp.params[j].name, s.names.at(std::min(j, s.names.size() - 1)),
                                    shape_str(w[j].shape), shape_str(lp.params[j].value.shape)));
    values[k] = std::move(w);
  }
  for (size_t k = 0; k < mine.size(); ++k)
    for (size_t j = 0; j < values[k].size(); ++j) params.layers[mine[k]].params[j].value = std::move(values[k][j]);
}

}  // namespace rnntrain
