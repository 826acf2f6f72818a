// History (JSON and CSV), EarlyStopping and the best-checkpoint tracker, with Keras 3's rules.
#include "train/callbacks.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/log.h"

namespace rnntrain {

std::string History::to_json() const {
  nlohmann::ordered_json j;
  std::vector<int64_t> idx;
  for (size_t e = 0; e < epochs.size(); ++e) idx.push_back(static_cast<int64_t>(e));
  j["epoch"] = idx;
  std::set<std::string> keys;
  for (const auto& l : epochs)
    for (const auto& [k, v] : l) keys.insert(k);
  for (const auto& k : keys) {
    std::vector<double> col;
    for (const auto& l : epochs) {
      auto it = l.find(k);
      col.push_back(it == l.end() ? std::nan("") : it->second);
    }
    j[k] = col;
  }
  return j.dump(1);
}

History History::from_json(const std::string& text) {
  History h;
  if (text.empty()) return h;
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("epoch") || !j["epoch"].is_array())
    throw DataError("the training history of the checkpoint is damaged (not a JSON object with a list of epochs); "
                    "start a new run from its weights with --weights instead of --resume");
  const size_t n = j["epoch"].size();
  h.epochs.resize(n);
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "epoch") continue;
    for (size_t e = 0; e < n && it.value().is_array() && e < it.value().size(); ++e)
      if (it.value()[e].is_number()) h.epochs[e][it.key()] = it.value()[e].get<double>();
  }
  return h;
}

std::string History::to_csv() const {
  std::set<std::string> keys;
  for (const auto& l : epochs)
    for (const auto& [k, v] : l) keys.insert(k);
  std::string out = "epoch";
  for (const auto& k : keys) out += "," + k;
  out += "\n";
  for (size_t e = 0; e < epochs.size(); ++e) {
    out += std::to_string(e);
    for (const auto& k : keys) {
      auto it = epochs[e].find(k);
      out += it == epochs[e].end() ? "," : fmt::format(",{}", it->second);
    }
    out += "\n";
  }
  return out;
}

bool monitor_is_max(const std::string& monitor, MonitorMode mode, const std::vector<MetricSpec>& metrics) {
  if (mode != MonitorMode::Auto) return mode == MonitorMode::Max;
  if (monitor.ends_with("loss")) return false;
  const std::string name = monitor.starts_with("val_") ? monitor.substr(4) : monitor;
  for (const MetricSpec& m : metrics)
    if (m.name == name) return metric_info(m.kind).rises;
  return monitor.find("acc") != std::string::npos;
}

EarlyStopping::EarlyStopping(const EarlyStoppingSpec& spec, const std::vector<MetricSpec>& metrics)
    : spec_(spec), max_(monitor_is_max(spec.monitor, spec.mode, metrics)),
      best_(max_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity()) {}

bool EarlyStopping::improved(double current, double reference) const {
  const double d = std::fabs(spec_.min_delta);
  return max_ ? current - d > reference : current + d < reference;
}

bool EarlyStopping::on_epoch_end(int64_t epoch, const Logs& logs, const Params& params) {
  auto it = logs.find(spec_.monitor);
  if (it == logs.end()) {
    if (!warned_) log_warn("early_stopping: monitor '{}' is not in the logs (have: loss{}); early stopping does nothing",
                           spec_.monitor, logs.count("val_loss") ? ", val_loss, ..." : ", no validation data");
    warned_ = true;
    return false;
  }
  if (epoch < spec_.start_from_epoch) return false;
  const double current = it->second;
  if (spec_.restore_best_weights && !best_weights_) best_weights_ = copy_weights(params);
  ++wait_;
  if (improved(current, best_)) {
    best_ = current;
    best_epoch_ = epoch;
    if (spec_.restore_best_weights) best_weights_ = copy_weights(params);
    // As Keras: the wait restarts only when the baseline is beaten too, but an improving epoch
    // never stops training.
    if (!spec_.baseline || improved(current, *spec_.baseline)) wait_ = 0;
    return false;
  }
  stopped_ = wait_ >= spec_.patience && epoch > 0;
  return stopped_;
}

std::vector<double> EarlyStopping::state() const {
  return {best_, static_cast<double>(wait_), static_cast<double>(best_epoch_), stopped_ ? 1.0 : 0.0};
}

void EarlyStopping::set_state(const std::vector<double>& s) {
  if (s.size() != 4) throw DataError("checkpoint: early-stopping state has the wrong size; was it written by another version?");
  best_ = s[0];
  wait_ = static_cast<int64_t>(s[1]);
  best_epoch_ = static_cast<int64_t>(s[2]);
  stopped_ = s[3] != 0.0;
}

BestTracker::BestTracker(std::string monitor, MonitorMode mode, const std::vector<MetricSpec>& metrics)
    : monitor_(std::move(monitor)), max_(monitor_is_max(monitor_, mode, metrics)) {}

bool BestTracker::on_epoch_end(const Logs& logs) {
  auto it = logs.find(monitor_);
  if (it == logs.end() || std::isnan(it->second)) return false;
  if (has_ && !(max_ ? it->second > best_ : it->second < best_)) return false;
  best_ = it->second;
  has_ = true;
  return true;
}

void BestTracker::set_state(const std::vector<double>& s) {
  if (s.size() != 2) throw DataError("checkpoint: best-checkpoint state has the wrong size");
  best_ = s[0];
  has_ = s[1] != 0.0;
}

std::vector<Tensor> copy_weights(const Params& params) {
  std::vector<Tensor> w;
  for (const auto& lp : params.layers)
    for (const auto& p : lp.params) w.push_back(p.value);
  return w;
}

void set_weights(Params& params, const std::vector<Tensor>& w) {
  size_t i = 0;
  for (auto& lp : params.layers)
    for (auto& p : lp.params) p.value = w.at(i++);
}

}  // namespace rnntrain
