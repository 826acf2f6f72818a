// Helpers for the command-line tests: run the rnntrain binary and capture its exit code, stdout
// and stderr; make a scratch folder.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace rnntrain::test {

struct CmdResult {
  int code = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::filesystem::path scratch(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("rnntrain_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

// Runs a shell command from the source tree (so configs/ and data/ resolve).
inline CmdResult run_command(const std::string& command, const std::filesystem::path& tmp) {
  const std::string out = (tmp / "stdout.txt").string(), err = (tmp / "stderr.txt").string();
  const std::string cmd = std::string("cd ") + RNNTRAIN_SOURCE_DIR + " && " + command + " >" + out + " 2>" + err;
  CmdResult r;
  const int status = std::system(cmd.c_str());
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// Runs `rnntrain <args>` from the source tree.
inline CmdResult run_rnntrain(const std::string& args, const std::filesystem::path& tmp) {
  return run_command(std::string(RNNTRAIN_BINARY) + " " + args, tmp);
}

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

}  // namespace rnntrain::test
