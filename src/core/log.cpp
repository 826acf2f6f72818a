// spdlog behind log.h: a stderr sink with a short "[level] message" pattern, and while a LogFile
// lives a file sink with the time. The logger passes what either sink wants; each sink filters.
#include "core/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <memory>

namespace rnntrain {

static spdlog::logger& logger() {
  static auto l = [] {
    auto lg = spdlog::stderr_color_mt("rnntrain");
    lg->set_pattern("[%^%l%$] %v");
    lg->set_level(spdlog::level::info);
    return lg;
  }();
  return *l;
}

static spdlog::level::level_enum g_stderr_level = spdlog::level::info;

// The logger lets through what the stderr sink or a file sink (Info, or Debug when stderr has it) wants.
static void update_levels() {
  auto& sinks = logger().sinks();
  sinks.front()->set_level(g_stderr_level);
  auto level = g_stderr_level;
  for (size_t i = 1; i < sinks.size(); ++i) {
    sinks[i]->set_level(std::min(g_stderr_level, spdlog::level::info));
    level = std::min(level, sinks[i]->level());
  }
  logger().set_level(level);
}

void set_log_level(LogLevel level) {
  static const spdlog::level::level_enum map[] = {spdlog::level::debug, spdlog::level::info,
                                                  spdlog::level::warn, spdlog::level::err,
                                                  spdlog::level::off};
  g_stderr_level = map[static_cast<int>(level)];
  update_levels();
}

static constexpr const char* kFilePattern = "[%Y-%m-%d %H:%M:%S.%e] [%l] %v";

LogFile::LogFile(const std::string& path) { open(path); }

LogFile::LogFile() {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(4096);  // a start's lines, the latest 4096
  sink->set_pattern(kFilePattern);
  logger().sinks().push_back(sink);
  update_levels();
}

void LogFile::open(const std::string& path) {
  std::vector<std::string> held;
  auto& sinks = logger().sinks();
  if (sinks.size() > 1)  // the memory of LogFile(): its lines go first
    if (auto* ring = dynamic_cast<spdlog::sinks::ringbuffer_sink_mt*>(sinks.back().get())) {
      held = ring->last_formatted();
      sinks.pop_back();
    }
  try {
    if (!held.empty()) {
      std::ofstream out(path, std::ios::app);
      for (const std::string& line : held) out << line;
    }
    auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, false);  // appends
    sink->set_pattern(kFilePattern);
    sinks.push_back(sink);
    logger().flush_on(spdlog::level::debug);  // a killed run keeps its log
    update_levels();
  } catch (const spdlog::spdlog_ex& e) {
    update_levels();
    log_line(LogLevel::Warn, fmt::format("{}: cannot write the log there ({}); logging to stderr only", path, e.what()));
  }
}

LogFile::~LogFile() {
  logger().flush();
  if (logger().sinks().size() > 1) logger().sinks().pop_back();
  logger().flush_on(spdlog::level::off);
  update_levels();
}

void log_to_file(LogLevel level, const std::string& msg) {
  static const spdlog::level::level_enum map[] = {spdlog::level::debug, spdlog::level::info, spdlog::level::warn,
                                                  spdlog::level::err, spdlog::level::off};
  const spdlog::details::log_msg m(logger().name(), map[static_cast<int>(level)], msg);
  auto& sinks = logger().sinks();
  for (size_t i = 1; i < sinks.size(); ++i)
    if (sinks[i]->should_log(m.level)) sinks[i]->log(m), sinks[i]->flush();
}

void log_line(LogLevel level, const std::string& msg) {
  switch (level) {
    case LogLevel::Debug: logger().debug(msg); break;
    case LogLevel::Info: logger().info(msg); break;
    case LogLevel::Warn: logger().warn(msg); break;
    case LogLevel::Error: logger().error(msg); break;
    case LogLevel::Off: break;
  }
}

}  // namespace rnntrain
