// Atomic file writes (files.h).
#include "core/files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace rnntrain {

// Flushes a file (or folder) to the disk, so a power loss after the rename cannot leave it empty.
static void sync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void rename_into_place(const std::string& tmp, const std::string& path) {
  sync_path(tmp);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw RuntimeError(fmt::format("cannot rename {} to {}: {}; check that the folder is writable", tmp, path, ec.message()));
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  sync_path(dir.empty() ? "." : dir);
}

std::string special_file(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  switch (st.type()) {
    case std::filesystem::file_type::regular:
    case std::filesystem::file_type::not_found:
    case std::filesystem::file_type::none: return "";
    case std::filesystem::file_type::directory: return "a folder";
    case std::filesystem::file_type::fifo: return "a named pipe (FIFO)";
    case std::filesystem::file_type::character:
    case std::filesystem::file_type::block: return "a device";
    case std::filesystem::file_type::socket: return "a socket";
    default: return ec ? "" : "not a regular file";
  }
}

std::string read_text(const std::string& path) {
  if (const std::string kind = special_file(path); !kind.empty())
    throw DataError(fmt::format("{}: is {}, not a file; rnntrain reads it only from a regular file", path, kind));
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& text) {
  write_atomically(path, [&](const std::string& tmp) {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.close();
    if (!out) throw RuntimeError(fmt::format("cannot write {}: check the disk and the folder's permissions", tmp));
  });
}

}  // namespace rnntrain
