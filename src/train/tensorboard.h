// TensorBoard event files in the run directory, laid out as Keras' TensorBoard callback lays them:
// RUN/tensorboard/train holds epoch_loss, epoch_<metric>, epoch_learning_rate and epoch_seconds at
// step = epoch (from 0, as Keras), and with output.tensorboard: N also batch_loss, batch_<metric>
// (running means of the epoch, as Keras logs them), batch_learning_rate and batch_step_ms every N
// steps at the global step; RUN/tensorboard/validation holds epoch_loss and epoch_<metric> of the
// validation. Records are TFRecord-framed Event protos (protobuf; CRC-32C by Boost.CRC). A write that
// fails (a full disk) warns once and stops the event files; training goes on.
#pragma once
#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "train/observers.h"

namespace rnntrain {

// Whether this build writes event files (protobuf and Boost were found).
bool tensorboard_available();
// TFRecord's masked CRC-32C of n bytes.
uint32_t tfrecord_masked_crc(const void* data, size_t n);

// One events.out.tfevents.* file in `dir` (created), opened with its file_version record.
class EventFile {
 public:
  explicit EventFile(const std::string& dir);
  // One Event at `step` with a scalar per (tag, value); false when the write failed.
  bool scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  const std::string& path() const { return path_; }

 private:
  bool record(const std::string& bytes);
  std::string path_;
  std::ofstream out_;
};

class TensorBoardObserver final : public EpochObserver {
 public:
  // every: also log every `every` steps (0: epochs only).
  TensorBoardObserver(const std::string& run_dir, int64_t every);
  void on_epoch_end(int64_t epoch, const Logs& logs, bool* stop) override;
  // After training step `step` (1-based, over all epochs) with the values the progress line shows
  // ("loss" and the metrics: running means of the epoch) and the learning rate it took.
  void on_step(int64_t step, const std::vector<std::pair<std::string, double>>& shown, double lr);

 private:
  bool write(std::unique_ptr<EventFile>& f, const char* sub, int64_t step,
             const std::vector<std::pair<std::string, double>>& values);
  std::string dir_;
  std::unique_ptr<EventFile> train_, val_;  // dir_/train, dir_/validation
  int64_t every_;
  std::chrono::steady_clock::time_point epoch_start_, last_step_time_;
  int64_t last_step_ = 0;
  bool failed_ = false;
};

}  // namespace rnntrain
