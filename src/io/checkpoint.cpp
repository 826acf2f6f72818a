// Checkpoints as Keras legacy full-model .h5 files (see checkpoint.h); weights from any format go
// through keras_file.h.
#include "io/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "core/log.h"
#include "io/h5.h"
#include "io/keras_file.h"
#include "io/keras_model.h"
#include "io/keras_train.h"
#include "io/keras_weights.h"
#include "spec/cells.h"
#include "spec/parse.h"

namespace rnntrain {

namespace {

// The training settings of the run, from the effective config the trainer stores in the state.
std::optional<TrainSpec> train_of(const ResumeState& st) {
  if (st.config_yaml.empty()) return std::nullopt;
  try {
    return parse_config(st.config_yaml, "<checkpoint config>").train;
  } catch (const std::exception& e) {
    log_debug("checkpoint: no training_config ({})", e.what());
    return std::nullopt;
  }
}

// Restores optimizer slots from /optimizer_weights: positional in Keras' order after the iteration
// counter and (when present) the learning rate, which goes to *lr; rnntrain's older "<slot>/<i>:0"
// names by name. Returns the iteration count.
int64_t read_optimizer(const h5::Group& og, const OptimizerSlots& slots, const std::string& path,
                       std::optional<double>* lr) {
  if (og.has_dataset("iteration:0")) {
    for (const auto& [name, t] : slots) {
      const std::string ds = name + ":0";
      if (!og.has_dataset(ds))
        throw DataError(fmt::format("{}: optimizer state '{}' is missing; was the checkpoint written with another optimizer?", path, name));
      Tensor v = og.read_weight(ds);
      if (v.shape != t->shape)
        throw DataError(fmt::format("{}: optimizer state '{}' has shape {}, expected {}", path, name, shape_str(v.shape), shape_str(t->shape)));
      *t = std::move(v);
    }
    return og.read_int64("iteration:0").at(0);
  }
  const std::vector<std::string> names = read_name_list(og, "weight_names");
  if (names.empty()) throw DataError(fmt::format("{}: /optimizer_weights lists no variables", path));
  // iteration, learning_rate (a scalar, unless a schedule gives it), the slots (never scalars), and
  // the scalar some kinds keep after them (Nadam's u_product, which rnntrain derives from the step).
  const auto scalar = [&](const std::string& n) { return og.has_dataset(n) && og.shape(n).empty(); };
  const size_t first = names.size() > 1 && scalar(names[1]) ? 2 : 1;
  const size_t after = names.size() == first + slots.size() + 1 && scalar(names.back()) ? 1 : 0;
  if (names.size() != first + slots.size() + after)
    throw DataError(fmt::format("{}: the file's optimizer has {} variables; the configured optimizer needs the iteration "
                                "counter, optionally the learning rate, and {} slots. Was it written with another "
                                "optimizer (or amsgrad, momentum, centered set differently)? Set train.optimizer to match",
                                path, names.size(), slots.size()));
  std::vector<std::string> slot_names;
  for (const auto& s : slots) slot_names.push_back(s.first);
  const std::vector<size_t> order = keras_slot_order(slot_names);
  std::vector<Tensor> values(slots.size());
  for (size_t q = 0; q < order.size(); ++q) {
    const std::string& ds = names[first + q];
    if (!og.has_dataset(ds)) throw DataError(fmt::format("{}: optimizer variable '{}' is listed but missing", path, ds));
    Tensor v = og.read_weight(ds);
    const auto& [slot, t] = slots[order[q]];
    if (v.shape != t->shape)
      throw DataError(fmt::format("{}: optimizer variable '{}' has shape {}, rnntrain's slot '{}' expects {}; the file "
                                  "was written for another model or optimizer", path, ds, shape_str(v.shape), slot,
                                  shape_str(t->shape)));
    values[order[q]] = std::move(v);
  }
  for (size_t i = 0; i < slots.size(); ++i) *slots[i].second = std::move(values[i]);
  if (first == 2 && og.has_dataset(names[1])) {
    const Tensor v = og.read_weight(names[1]);
    if (v.numel() == 1 && std::isfinite(v.data[0]) && v.data[0] > 0) *lr = v.data[0];
  }
  if (!og.has_dataset(names[0])) throw DataError(fmt::format("{}: optimizer variable '{}' is listed but missing", path, names[0]));
  return og.read_int64(names[0]).at(0);
}

// The one string of a /rnntrain dataset; DataError naming the file when it holds none or several.
std::string one_string(const h5::Group& rg, const std::string& name, const std::string& path) {
  const std::vector<std::string> v = rg.read_strings(name);
  if (v.size() != 1)
    throw DataError(fmt::format("{}: /rnntrain/{} holds {} strings, expected one: the resume state is damaged. Start a "
                                "new run from its weights with --weights instead of --resume", path, name, v.size()));
  return v[0];
}

// The history's layout as History::to_json writes it: {"epoch": [...], "loss": [...], ...}, every
// entry a list of the same length. DataError naming the file otherwise.
void check_history(const std::string& text, const std::string& path) {
  if (text.empty()) return;
  auto damaged = [&](const std::string& why) {
    return DataError(fmt::format("{}: the training history in /rnntrain/history is damaged ({}). Start a new run from "
                                 "its weights with --weights instead of --resume", path, why));
  };
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw damaged("not valid JSON");
  if (!j.is_object() || !j.contains("epoch") || !j["epoch"].is_array()) throw damaged("no list of epochs");
  for (const auto& [key, v] : j.items())
    if (!v.is_array() || v.size() != j["epoch"].size())
      throw damaged(fmt::format("'{}' is not a list of {} values", key.substr(0, 40), j["epoch"].size()));
}

}  // namespace

void save_checkpoint(const std::string& path, const ModelSpec& model, const Params& params,
                     const OptimizerSlots& slots, const ResumeState& st) {
  const std::optional<TrainSpec> train = train_of(st);
  KerasTraining kt{train.value_or(TrainSpec{}), 0.0, st.iterations, slots};
  kt.learning_rate = st.learning_rate.value_or(kt.train.optimizer.learning_rate);
  const std::string version = keras_version_for(model);
  write_atomically(path, [&](const std::string& tmp) {
    h5::File f = h5::File::create(tmp);
    h5::Group root = f.root();
    root.set_attr("keras_version", version);
    root.set_attr("backend", std::string("tensorflow"));
    root.set_attr("model_config", model_to_keras_json(model, KerasJsonStyle::Legacy).dump());
    if (train && legacy_h5_compiles(train->optimizer.kind))  // else it loads uncompiled (keras_train.h)
      root.set_attr("training_config", training_config_json(kt).dump());
    write_legacy_weights(root.create_group("model_weights"), model, params, version);
    h5::Group rg = root.create_group("rnntrain");
    write_legacy_optimizer(rg, model, params, kt);
    rg.set_attr("epoch", st.epoch);
    rg.set_attr("iterations", st.iterations);
    rg.set_attr_u64("rng", std::vector<uint64_t>(st.rng.begin(), st.rng.end()));
    rg.set_attr("schedule", st.schedule);
    rg.set_attr("early_stopping", st.early_stopping);
    rg.set_attr("checkpoint", st.checkpoint);
    rg.write_strings("history", {st.history_json});
    rg.write_strings("config", {st.config_yaml});
    if (st.step > 0) {
      rg.set_attr("step", st.step);
      rg.set_attr_u64("epoch_rng", std::vector<uint64_t>(st.epoch_rng.begin(), st.epoch_rng.end()));
      rg.set_attr("partial", st.partial);
      const ResumeState::Drawn& d = st.drawn;
      rg.set_attr_u64("epoch_plan", {static_cast<uint64_t>(d.batch_size), d.shuffle, d.bucketing,
                                     static_cast<uint64_t>(d.bucket_window), static_cast<uint64_t>(d.samples)});
    }
    if (st.data_rows > 0) rg.set_attr_u64("data", {st.data_rows, st.data_hash});
    f.close();
  });
}

void load_weights(const std::string& path, const ModelSpec& model, Params& params) {
  load_keras_weights(path, model, params);
}

// Where a file keeps its optimizer variables: rnntrain's files in /rnntrain, Keras' (and rnntrain's
// before 2026-12) at the root.
std::optional<h5::Group> optimizer_group(const h5::Group& root) {
  if (root.has_group("rnntrain") && root.group("rnntrain").has_group("optimizer_weights"))
    return root.group("rnntrain").group("optimizer_weights");
  if (root.has_group("optimizer_weights")) return root.group("optimizer_weights");
  return std::nullopt;
}

bool has_optimizer_state(const std::string& path) {
  if (!h5::is_hdf5(path)) return false;
  h5::File f = h5::File::open(path);
  return optimizer_group(f.root()).has_value();
}

ResumeState load_checkpoint(const std::string& path, const ModelSpec& model, Params& params,
                            const OptimizerSlots& slots) {
  load_weights(path, model, params);
  h5::File f = h5::File::open(path);
  h5::Group root = f.root();
  const std::optional<h5::Group> og = optimizer_group(root);
  if (!og)
    throw DataError(fmt::format("{}: no /optimizer_weights: not a training checkpoint (a Keras model saved with its "
                                "optimizer, or rnntrain's last.h5); use --weights to start from its weights instead "
                                "of --resume", path));
  ResumeState st;
  const int64_t iterations = read_optimizer(*og, slots, path, &st.learning_rate);
  // Written by Keras, or an rnntrain export (whose /rnntrain holds the optimizer alone): no run state.
  const auto run_state = [](const h5::Group& rg) {
    return rg.has_attr("epoch") || rg.has_attr("iterations") || rg.has_dataset("history") || rg.has_dataset("config");
  };
  if (!root.has_group("rnntrain") || !run_state(root.group("rnntrain"))) {
    st.keras = true;
    st.iterations = iterations;
    st.rng = Rng(0).state();
    // The states of a fresh run, in the layouts of Schedule::state() and BestTracker::state()
    // (train/schedule.cpp, train/callbacks.cpp); early stopping starts fresh from an empty state.
    st.schedule = {1.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    st.checkpoint = {0.0, 0.0};
    return st;
  }
  h5::Group rg = root.group("rnntrain");
  st.epoch = rg.attr_int64("epoch");
  st.iterations = rg.attr_int64("iterations");
  auto rng = rg.attr_u64("rng");
  if (rng.size() != 4) throw DataError(fmt::format("{}: /rnntrain@rng must hold 4 words", path));
  std::copy(rng.begin(), rng.end(), st.rng.begin());
  st.schedule = rg.attr_doubles("schedule");
  st.early_stopping = rg.attr_doubles("early_stopping");
  st.checkpoint = rg.attr_doubles("checkpoint");
  st.history_json = one_string(rg, "history", path);
  st.config_yaml = one_string(rg, "config", path);
  check_history(st.history_json, path);
  if (rg.has_attr("step")) {  // stopped inside an epoch
    st.step = rg.attr_int64("step");
    auto erng = rg.attr_u64("epoch_rng");
    if (erng.size() != 4) throw DataError(fmt::format("{}: /rnntrain@epoch_rng must hold 4 words", path));
    std::copy(erng.begin(), erng.end(), st.epoch_rng.begin());
    st.partial = rg.attr_doubles("partial");
    if (rg.has_attr("epoch_plan")) {
      const auto p = rg.attr_u64("epoch_plan");
      constexpr uint64_t kMax = uint64_t{1} << 40;  // far above any batch size or sample count
      if (p.size() != 5 || p[0] == 0 || p[0] > kMax || p[1] > 1 || p[2] > 1 || p[3] > kMax || p[4] > kMax)
        throw DataError(fmt::format("{}: /rnntrain@epoch_plan must hold 5 words (batch size, shuffle, bucketing, "
                                    "bucket window, samples) in range: the file is damaged",
                                    path));
      st.drawn = {static_cast<int64_t>(p[0]), static_cast<int64_t>(p[3]), static_cast<int64_t>(p[4]), p[1] != 0,
                  p[2] != 0};
    }
  }
  if (rg.has_attr("data")) {
    const auto d = rg.attr_u64("data");
    if (d.size() != 2) throw DataError(fmt::format("{}: /rnntrain@data must hold 2 words (rows, fingerprint)", path));
    st.data_rows = d[0], st.data_hash = d[1];
  }
  return st;
}

}  // namespace rnntrain
