// Logging to stderr: the only place that knows spdlog. One grep-able line per event, e.g.
// log_info("epoch={} loss={:.4f}", 3, 0.41). Machine-readable output goes to stdout, never here.
#pragma once
#include <fmt/format.h>

#include <string>

namespace rnntrain {

enum class LogLevel { Debug, Info, Warn, Error, Off };
void set_log_level(LogLevel level);
void log_line(LogLevel level, const std::string& msg);

// While alive, every log line of Info and above (whatever set_log_level says for stderr; Debug
// too when that is on) is also appended to `path`, with the time: a run's train.log. One at a time.
class LogFile {
 public:
  explicit LogFile(const std::string& path);
  // Holds the lines in memory until open(path) appends them there and goes on as LogFile(path):
  // for a start that must leave its directory untouched until it is sure to run.
  LogFile();
  void open(const std::string& path);
  ~LogFile();
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;
};

// To the LogFile only: what a terminal already shows in another form (the progress line).
void log_to_file(LogLevel level, const std::string& msg);

template <typename... A>
void log_debug(fmt::format_string<A...> f, A&&... a) { log_line(LogLevel::Debug, fmt::format(f, std::forward<A>(a)...)); }
template <typename... A>
void log_info(fmt::format_string<A...> f, A&&... a) { log_line(LogLevel::Info, fmt::format(f, std::forward<A>(a)...)); }
template <typename... A>
void log_warn(fmt::format_string<A...> f, A&&... a) { log_line(LogLevel::Warn, fmt::format(f, std::forward<A>(a)...)); }
template <typename... A>
void log_error(fmt::format_string<A...> f, A&&... a) { log_line(LogLevel::Error, fmt::format(f, std::forward<A>(a)...)); }

}  // namespace rnntrain
