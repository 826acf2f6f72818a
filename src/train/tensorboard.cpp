// TensorBoard event files (tensorboard.h).
#include "train/tensorboard.h"

#include <unistd.h>

#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"

#if RNNTRAIN_HAVE_TENSORBOARD
#include <boost/crc.hpp>

#include "tensorboard_event.pb.h"
#endif

namespace fs = std::filesystem;

namespace rnntrain {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

#if RNNTRAIN_HAVE_TENSORBOARD
bool tensorboard_available() { return true; }

uint32_t tfrecord_masked_crc(const void* data, size_t n) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data, n);
  const uint32_t c = crc.checksum();
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

EventFile::EventFile(const std::string& dir) {
  fs::create_directories(dir);
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  path_ = (fs::path(dir) / fmt::format("events.out.tfevents.{}.{}.{}.rnntrain", static_cast<int64_t>(std::time(nullptr)),
                                       host, static_cast<int64_t>(getpid())))
              .string();
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_) throw RuntimeError(fmt::format("cannot create {}", path_));
  tensorboard::Event e;
  e.set_wall_time(now_seconds());
  e.set_file_version("brain.Event:2");
  if (!record(e.SerializeAsString())) throw RuntimeError(fmt::format("cannot write {}", path_));
}

bool EventFile::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  tensorboard::Event e;
  e.set_wall_time(now_seconds());
  e.set_step(step);
  for (const auto& [tag, v] : values) {
    tensorboard::Summary::Value* sv = e.mutable_summary()->add_value();
    sv->set_tag(tag);
    sv->set_simple_value(static_cast<float>(v));
  }
  return record(e.SerializeAsString());
}

// TFRecord: length (uint64, little-endian), its masked CRC, the bytes, their masked CRC.
bool EventFile::record(const std::string& bytes) {
  const uint64_t n = bytes.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  const uint32_t crcs[2] = {tfrecord_masked_crc(len, 8), tfrecord_masked_crc(bytes.data(), bytes.size())};
  unsigned char c[2][4];
  for (int k = 0; k < 2; ++k)
    for (int i = 0; i < 4; ++i) c[k][i] = static_cast<unsigned char>(crcs[k] >> (8 * i));
  out_.write(reinterpret_cast<const char*>(len), 8);
  out_.write(reinterpret_cast<const char*>(c[0]), 4);
  out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out_.write(reinterpret_cast<const char*>(c[1]), 4);
  out_.flush();
  return static_cast<bool>(out_);
}
#else
bool tensorboard_available() { return false; }
uint32_t tfrecord_masked_crc(const void*, size_t) { return 0; }
EventFile::EventFile(const std::string&) {
  throw RuntimeError("this rnntrain was built without protobuf: it writes no TensorBoard event files");
}
bool EventFile::scalars(int64_t, const std::vector<std::pair<std::string, double>>&) { return false; }
bool EventFile::record(const std::string&) { return false; }
#endif

TensorBoardObserver::TensorBoardObserver(const std::string& run_dir, int64_t every)
    : dir_((fs::path(run_dir) / "tensorboard").string()), every_(every) {
  epoch_start_ = last_step_time_ = std::chrono::steady_clock::now();
  if (!tensorboard_available()) {
    log_warn("this rnntrain was built without protobuf, so {} gets no TensorBoard event files (rebuild after "
             "apt-get install libprotobuf-dev protobuf-compiler libboost-dev, or set output.tensorboard: off)",
             run_dir);
    failed_ = true;
  }
}

bool TensorBoardObserver::write(std::unique_ptr<EventFile>& f, const char* sub, int64_t step,
                                const std::vector<std::pair<std::string, double>>& values) {
  if (failed_ || values.empty()) return !failed_;
  try {  // opened at the first write: a run that ends before its first epoch leaves no empty files
    if (!f) f = std::make_unique<EventFile>((fs::path(dir_) / sub).string());
  } catch (const std::exception& e) {
    log_warn("TensorBoard: {}; training goes on without event files", e.what());
    failed_ = true;
    return false;
  }
  if (!f->scalars(step, values)) {
    log_warn("TensorBoard: cannot write {} (disk full?); training goes on without event files", f->path());
    failed_ = true;
  }
  return !failed_;
}

void TensorBoardObserver::on_epoch_end(int64_t epoch, const Logs& logs, bool*) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, double>> train, val;
  for (const auto& [k, v] : logs) {
    if (k.rfind("val_", 0) == 0) val.emplace_back("epoch_" + k.substr(4), v);
    else train.emplace_back("epoch_" + k, v);
  }
  train.emplace_back("epoch_seconds", std::chrono::duration<double>(now - epoch_start_).count());
  epoch_start_ = now;
  if (write(train_, "train", epoch, train)) write(val_, "validation", epoch, val);
}

void TensorBoardObserver::on_step(int64_t step, const std::vector<std::pair<std::string, double>>& shown, double lr) {
  if (every_ <= 0 || step % every_ != 0 || failed_) return;
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, double>> values;
  for (const auto& [k, v] : shown) values.emplace_back("batch_" + k, v);
  values.emplace_back("batch_learning_rate", lr);
  if (step > last_step_)
    values.emplace_back("batch_step_ms", 1e3 * std::chrono::duration<double>(now - last_step_time_).count() /
                                             static_cast<double>(step - last_step_));
  last_step_ = step, last_step_time_ = now;
  write(train_, "train", step, values);
}

}  // namespace rnntrain
