// TensorBoard event files (train/tensorboard.h) below what tests/keras/test_tensorboard.py checks with
// TensorBoard's reader: the TFRecord framing's CRC-32C, and that a run directory where the event
// files cannot go costs a warning, not the run.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "train/tensorboard.h"

using namespace rnntrain;
namespace fs = std::filesystem;

namespace {
uint32_t mask(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }
uint32_t le32(const unsigned char* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }
}  // namespace

TEST(TensorBoard, RecordsAreFramedWithMaskedCrc32c) {
  if (!tensorboard_available()) GTEST_SKIP() << "built without protobuf: no event files";
  // CRC-32C's check value (RFC 3720): "123456789" -> 0xE3069283.
  EXPECT_EQ(tfrecord_masked_crc("123456789", 9), mask(0xE3069283u));
  const fs::path dir = fs::temp_directory_path() / "rnntrain_tb_frame";
  fs::remove_all(dir);
  std::string path;
  {
    EventFile f(dir.string());
    ASSERT_TRUE(f.scalars(3, {{"epoch_loss", 0.25}}));
    path = f.path();
  }
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = 0, records = 0;
  while (at < bytes.size()) {  // length, its CRC, the data, its CRC
    ASSERT_LE(at + 12, bytes.size());
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + at);
    const uint64_t n = le32(p) | static_cast<uint64_t>(le32(p + 4)) << 32;
    EXPECT_EQ(le32(p + 8), tfrecord_masked_crc(p, 8));
    ASSERT_LE(at + 16 + n, bytes.size());
    EXPECT_EQ(le32(p + 12 + n), tfrecord_masked_crc(p + 12, n));
    at += 16 + n, ++records;
  }
  EXPECT_EQ(records, 2u) << "the file version, then the scalars";
  fs::remove_all(dir);
}

TEST(TensorBoard, EventFilesThatCannotBeWrittenCostAWarningNotTheRun) {
  const fs::path run = fs::temp_directory_path() / "rnntrain_tb_blocked";
  fs::remove_all(run);
  fs::create_directories(run);
  std::ofstream(run / "tensorboard") << "a file where the directory would go";
  TensorBoardObserver tb(run.string(), 1);
  bool stop = false;
  EXPECT_NO_THROW(tb.on_epoch_end(0, {{"loss", 1.0}, {"val_loss", 2.0}}, &stop));
  EXPECT_NO_THROW(tb.on_step(1, {{"loss", 1.0}}, 0.1));
  EXPECT_FALSE(stop);
  EXPECT_TRUE(fs::is_regular_file(run / "tensorboard")) << "left as it was";
  fs::remove_all(run);
}
