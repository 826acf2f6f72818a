// write_predictions: a model's outputs as .npy (float32), .h5 (dataset "predictions") or .csv (a
// header p0,p1,... then one row per sample, flattened), written to <path>.tmp and renamed so that a
// reader never sees half a file.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "data/dataset.h"
#include "data/npy.h"
#include "io/h5.h"

namespace rnntrain {

namespace fs = std::filesystem;

static void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw RuntimeError(fmt::format("{}: cannot write (disk full or no permission?).", path));
}

static std::string csv_text(const Tensor& pred) {
  const int64_t N = pred.shape.empty() ? 1 : pred.shape[0];
  const int64_t row = N ? pred.numel() / N : 0;
  fmt::memory_buffer out;
  for (int64_t j = 0; j < row; ++j) fmt::format_to(std::back_inserter(out), "{}p{}", j ? "," : "", j);
  out.push_back('\n');
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t j = 0; j < row; ++j) fmt::format_to(std::back_inserter(out), "{}{}", j ? "," : "", pred[n * row + j]);
    out.push_back('\n');
  }
  return fmt::to_string(out);
}

void write_predictions(const std::string& path, const Tensor& pred) {
  const std::string ext = fs::path(path).extension().string();
  if (ext != ".npy" && ext != ".h5" && ext != ".hdf5" && ext != ".csv")
    throw UsageError(fmt::format("{}: unknown predictions format '{}'. Use a path ending in .npy, .h5 or .csv.", path,
                                 ext));
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  const std::string tmp = path + ".tmp";
  try {
    if (ext == ".npy") {
      write_bytes(tmp, npy_bytes(pred));
    } else if (ext == ".csv") {
      write_bytes(tmp, csv_text(pred));
    } else {
      h5::File f = h5::File::create(tmp);
      f.root().write("predictions", pred);
    }
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw RuntimeError(fmt::format("{}: cannot move {} into place ({}).", path, tmp, ec.message()));
  }
}

}  // namespace rnntrain
