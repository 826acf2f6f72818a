// Checkpoints in Keras' legacy full-model .h5 layout (see checkpoint.h), and the weights reader.
#include "io/checkpoint.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "io/h5.h"

namespace rnntrain {

namespace {

const char* kKerasVersion = "2.15.0";

// Keras' cell scope inside a recurrent layer's variable names.
std::string cell_scope(LayerKind k) {
  switch (k) {
    case LayerKind::LSTM: return "lstm_cell";
    case LayerKind::GRU: return "gru_cell";
    default: return "simple_rnn_cell";
  }
}

// "lstm/lstm_cell/kernel:0", "bidirectional/forward_lstm/lstm_cell/kernel:0", "dense/kernel:0".
std::string keras_weight_name(const LayerSpec& l, const std::string& param) {
  if (is_recurrent(l.kind)) return fmt::format("{}/{}/{}:0", l.name, cell_scope(l.kind), param);
  if (l.kind == LayerKind::Bidirectional) {
    const auto slash = param.find('/');
    const std::string dir = param.substr(0, slash), w = param.substr(slash + 1);
    return fmt::format("{}/{}_{}/{}/{}:0", l.name, dir, l.inner->name, cell_scope(l.inner->kind), w);
  }
  return fmt::format("{}/{}:0", l.name, param);
}

// Reads a possibly chunked string-list attribute (name, or name0, name1, ... as Keras writes).
std::vector<std::string> read_name_list(const h5::Group& g, const std::string& name) {
  if (g.has_attr(name)) return g.attr_strings(name);
  std::vector<std::string> out;
  for (int i = 0; g.has_attr(name + std::to_string(i)); ++i) {
    auto part = g.attr_strings(name + std::to_string(i));
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

const LayerParams* find_layer(const Params& params, const std::string& name) {
  for (const auto& lp : params.layers)
    if (lp.layer == name) return &lp;
  return nullptr;
}

void write_weights(const h5::Group& g, const ModelSpec& model, const Params& params) {
  std::vector<std::string> names;
  for (size_t i = 1; i < model.layers.size(); ++i) names.push_back(model.layers[i].name);
  g.set_attr("layer_names", names);
  g.set_attr("backend", std::string("tensorflow"));
  g.set_attr("keras_version", std::string(kKerasVersion));
  for (size_t i = 1; i < model.layers.size(); ++i) {
    const LayerSpec& l = model.layers[i];
    h5::Group lg = g.create_group(l.name);
    std::vector<std::string> wnames;
    if (const LayerParams* lp = find_layer(params, l.name)) {
      for (const Param& p : lp->params) {
        wnames.push_back(keras_weight_name(l, p.name));
        lg.write(wnames.back(), p.value);
      }
    }
    lg.set_attr("weight_names", wnames);
  }
  h5::Group top = g.create_group("top_level_model_weights");
  top.set_attr("weight_names", std::vector<std::string>{});
}

}  // namespace

void rename_into_place(const std::string& tmp, const std::string& path) {
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw RuntimeError(fmt::format("cannot rename {} to {}: {}; check that the folder is writable", tmp, path, ec.message()));
  }
}

void save_checkpoint(const std::string& path, const ModelSpec& model, const Params& params,
                     const OptimizerSlots& slots, const ResumeState& st) {
  write_atomically(path, [&](const std::string& tmp) {
    h5::File f = h5::File::create(tmp);
    h5::Group root = f.root();
    root.set_attr("keras_version", std::string(kKerasVersion));
    root.set_attr("backend", std::string("tensorflow"));
    write_weights(root.create_group("model_weights"), model, params);

    h5::Group og = root.create_group("optimizer_weights");
    std::vector<std::string> onames{"iteration:0"};
    og.write_int64("iteration:0", {st.iterations}, true);
    for (const auto& [name, t] : slots) {
      onames.push_back(name + ":0");
      og.write(onames.back(), *t);
    }
    og.set_attr("weight_names", onames);

    h5::Group rg = root.create_group("rnntrain");
    rg.set_attr("epoch", st.epoch);
    rg.set_attr("iterations", st.iterations);
    rg.set_attr_u64("rng", std::vector<uint64_t>(st.rng.begin(), st.rng.end()));
    rg.set_attr("schedule", st.schedule);
    rg.set_attr("early_stopping", st.early_stopping);
    rg.set_attr("checkpoint", st.checkpoint);
    rg.write_strings("history", {st.history_json});
    rg.write_strings("config", {st.config_yaml});
    f.flush();
  });
}

void load_weights(const std::string& path, const ModelSpec& model, Params& params) {
  h5::File f = h5::File::open(path);
  h5::Group root = f.root();
  const bool full = !root.has_attr("layer_names") && root.has_group("model_weights");
  h5::Group g = full ? root.group("model_weights") : f.root();
  if (!g.has_attr("layer_names") && !g.has_attr("layer_names0"))
    throw DataError(fmt::format("{}: not a Keras weights file (no layer_names attribute at / or /model_weights); "
                                "pass a checkpoint written by rnntrain or a Keras .h5 file", path));
  // Saved layers that carry weights, in file order.
  std::vector<std::pair<std::string, std::vector<std::string>>> saved;
  for (const std::string& name : read_name_list(g, "layer_names")) {
    if (!g.has_group(name)) throw DataError(fmt::format("{}: layer '{}' is listed in layer_names but has no group", path, name));
    h5::Group lg = g.group(name);
    auto wn = read_name_list(lg, "weight_names");
    if (!wn.empty()) saved.emplace_back(name, std::move(wn));
  }
  std::vector<LayerParams*> mine;
  for (auto& lp : params.layers)
    if (!lp.params.empty()) mine.push_back(&lp);
  if (saved.size() != mine.size())
    throw DataError(fmt::format("{}: layer count mismatch: the model has {} layers with weights, the file has {}; "
                                "the file was written for a different model", path, mine.size(), saved.size()));
  for (size_t k = 0; k < mine.size(); ++k) {
    LayerParams& lp = *mine[k];
    const auto& [fname, wnames] = saved[k];
    if (wnames.size() != lp.params.size())
      throw DataError(fmt::format("{}: layer '{}' (file layer '{}') has {} weights in the file, the model expects {}",
                                  path, lp.layer, fname, wnames.size(), lp.params.size()));
    h5::Group lg = g.group(fname);
    for (size_t j = 0; j < wnames.size(); ++j) {
      Param& p = lp.params[j];
      Tensor t = lg.read(wnames[j]);
      if (t.shape != p.value.shape)
        throw DataError(fmt::format("{}: layer '{}' weight '{}': the file has shape {}, the model expects {}",
                                    path, lp.layer, p.name, shape_str(t.shape), shape_str(p.value.shape)));
      p.value = std::move(t);
    }
  }
}

ResumeState load_checkpoint(const std::string& path, const ModelSpec& model, Params& params,
                            const OptimizerSlots& slots) {
  load_weights(path, model, params);
  h5::File f = h5::File::open(path);
  h5::Group root = f.root();
  if (!root.has_group("rnntrain") || !root.has_group("optimizer_weights"))
    throw DataError(fmt::format("{}: not an rnntrain training checkpoint (no /rnntrain or /optimizer_weights); "
                                "use --weights to start from its weights instead of --resume", path));
  ResumeState st;
  h5::Group rg = root.group("rnntrain");
  st.epoch = rg.attr_int64("epoch");
  st.iterations = rg.attr_int64("iterations");
  auto rng = rg.attr_u64("rng");
  if (rng.size() != 4) throw DataError(fmt::format("{}: /rnntrain@rng must hold 4 words", path));
  std::copy(rng.begin(), rng.end(), st.rng.begin());
  st.schedule = rg.attr_doubles("schedule");
  st.early_stopping = rg.attr_doubles("early_stopping");
  st.checkpoint = rg.attr_doubles("checkpoint");
  st.history_json = rg.read_strings("history").at(0);
  st.config_yaml = rg.read_strings("config").at(0);

  h5::Group og = root.group("optimizer_weights");
  for (const auto& [name, t] : slots) {
    const std::string ds = name + ":0";
    if (!og.has_dataset(ds))
      throw DataError(fmt::format("{}: optimizer state '{}' is missing; was the checkpoint written with another optimizer?", path, name));
    Tensor v = og.read(ds);
    if (v.shape != t->shape)
      throw DataError(fmt::format("{}: optimizer state '{}' has shape {}, expected {}", path, name, shape_str(v.shape), shape_str(t->shape)));
    *t = std::move(v);
  }
  return st;
}

}  // namespace rnntrain
