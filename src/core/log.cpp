// spdlog behind log.h: a stderr sink with a short "[level] message" pattern, and while a LogFile
// lives a file sink with the time. The logger passes what either sink wants; each sink filters.
#include "core/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
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

LogFile::LogFile(const std::string& path) {
  try {
    auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, false);  // appends
    sink->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
    logger().sinks().push_back(sink);
    logger().flush_on(spdlog::level::debug);  // a killed run keeps its log
    update_levels();
  } catch (const spdlog::spdlog_ex& e) {
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
