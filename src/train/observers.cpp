// The epoch observers: what happens after an epoch besides training (observers.h).
#include "train/observers.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/files.h"
#include "core/log.h"
#include "train/run_dir.h"

namespace fs = std::filesystem;

namespace rnntrain {

void ScheduleObserver::on_epoch_end(int64_t epoch, const Logs& logs, bool*) {
  if (const std::string msg = schedule_.on_epoch_end(epoch, logs); !msg.empty()) log_info("{}", msg);
}

void EarlyStoppingObserver::on_epoch_end(int64_t epoch, const Logs& logs, bool* stop) {
  if (early_.on_epoch_end(epoch, logs, engine_.host_params())) *stop = true;
}

void EarlyStoppingObserver::load_state(const ResumeState& st) {
  if (!st.early_stopping.empty()) early_.set_state(st.early_stopping);
}

void EarlyStoppingObserver::set_best_from(const std::string& path, const ModelSpec& model) {
  if (!early_.spec().restore_best_weights || !fs::exists(path)) return;
  Params tmp = engine_.host_params();
  load_weights(path, model, tmp);
  early_.set_best_weights(copy_weights(tmp));
}

bool EarlyStoppingObserver::restore_best() {
  // As Keras' EarlyStopping.on_train_end: the best weights whether or not training stopped early.
  if (!early_.spec().restore_best_weights || !early_.best_weights()) return false;
  set_weights(engine_.host_params(), *early_.best_weights());
  engine_.params_changed();
  log_info("restored the weights of epoch {} (restore_best_weights); final.h5 holds them", early_.best_epoch() + 1);
  return true;
}

void CheckpointObserver::on_epoch_end(int64_t epoch, const Logs& logs, bool* stop) {
  const bool new_best = best_.on_epoch_end(logs);
  const ResumeState st = run_.resume_state(epoch + 1);
  Params& params = run_.finite_params(fmt::format("epoch {}", epoch + 1));
  if (write_ && early_ && early_->best_is(epoch)) save_checkpoint(paths_.early_best, cfg_.model, params, {}, st);
  if (new_best) {
    if (write_) save_checkpoint(paths_.best, cfg_.model, params, slots_, st);
    run_.set_last_good(fmt::format("{} (epoch {})", paths_.best, epoch + 1));
  }
  if (cfg_.train.checkpoint.every_epoch || *stop || epoch + 1 == cfg_.train.epochs) {
    if (write_) save_checkpoint(paths_.last, cfg_.model, params, slots_, st);
    run_.set_last_good(fmt::format("{} (epoch {})", paths_.last, epoch + 1));
  }
}

void HistoryObserver::write() const {
  const std::pair<const char*, std::string> files[] = {{"history.json", history_.to_json()},
                                                       {"history.csv", history_.to_csv()}};
  for (const auto& [name, text] : files) {
    const std::string path = (fs::path(run_dir_) / name).string();
    std::error_code ec;
    if (fs::file_size(path, ec) == text.size() && !ec && read_text(path) == text) continue;  // resumed: as it was
    write_text(path, text);
  }
}

}  // namespace rnntrain
