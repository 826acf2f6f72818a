// Files written whole or not at all: every file rnntrain writes (checkpoints, exports, history, the
// run directory's config, bench results) goes to a temporary name, is flushed to the disk and renamed
// over its path, so a crash, a full disk or a signal never leaves a half-written file behind.
#pragma once
#include <cstdio>
#include <string>

namespace rnntrain {

// Writes with `write(tmp)` to path + ".tmp", then renames over path. Removes the temporary on failure.
template <typename F>
void write_atomically(const std::string& path, F&& write);
// Flushes tmp to the disk and renames it over path (then flushes the folder); removes tmp on failure.
void rename_into_place(const std::string& tmp, const std::string& path);

// What a path is when it is there but not a regular file ("a folder", "a named pipe (FIFO)", "a
// device", "a socket"): reading one could block forever or never end. "" for a regular file or
// nothing at all.
std::string special_file(const std::string& path);

// A whole file as bytes ("" when it cannot be read; DataError when it is a special_file); writes text
// to a temporary name and renames it.
std::string read_text(const std::string& path);
void write_text(const std::string& path, const std::string& text);

template <typename F>
void write_atomically(const std::string& path, F&& write) {
  const std::string tmp = path + ".tmp";
  try {
    write(tmp);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  rename_into_place(tmp, path);
}

}  // namespace rnntrain
