#include "base/log.h"

namespace vessel {

void Logger::write(spdlog::level::level_enum lvl, const std::string& msg) const {
  spdlog::log(lvl, "{} {} {}", component_, sandbox_, msg);
}

void initLogging(const std::string& level) {
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);
  spdlog::set_level(spdlog::level::from_str(level));
}

}  // namespace vessel
