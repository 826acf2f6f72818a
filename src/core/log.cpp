// spdlog behind log.h: a stderr sink with a short "[level] message" pattern.
#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

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

void set_log_level(LogLevel level) {
  static const spdlog::level::level_enum map[] = {spdlog::level::debug, spdlog::level::info,
                                                  spdlog::level::warn, spdlog::level::err,
                                                  spdlog::level::off};
  logger().set_level(map[static_cast<int>(level)]);
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
