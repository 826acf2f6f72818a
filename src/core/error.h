// Typed errors. Every failure a user can cause is one of these, with a message that names the file,
// line, key or layer and says what to do. cli/ catches them once and maps them to exit codes.
#pragma once
#include <stdexcept>
#include <string>

namespace rnntrain {

// Exit code 2: the command line or the config is wrong.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct ConfigError : UsageError {
  using UsageError::UsageError;
};
// Exit code 1: a data or weights file is bad, or something failed while running.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace rnntrain
