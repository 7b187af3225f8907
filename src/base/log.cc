#include "base/log.h"

#include <atomic>
#include <iterator>

namespace vessel {

namespace {

std::atomic<bool> g_json{false};

}  // namespace

std::string jsonEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static const char* kHex = "0123456789abcdef";
          out += "\\u00";
          out += kHex[(c >> 4) & 0xf];
          out += kHex[c & 0xf];
        } else {
          out += c;
        }
    }
  }
  return out;
}

void Logger::write(spdlog::level::level_enum lvl, std::string_view msg, LogFields fields) const {
  if (!g_json.load(std::memory_order_relaxed)) {
    std::string line = fmt::format("{} {} {}", component_, sandbox_, msg);
    for (const auto& [k, v] : fields) fmt::format_to(std::back_inserter(line), " {}={}", k, v);
    spdlog::log(lvl, "{}", line);
    return;
  }
  // The pattern writes {"time":…,"level":…, and this the rest of the object.
  std::string line = "\"component\":\"" + jsonEscape(component_) + "\"";
  if (!sandbox_.empty() && sandbox_ != "-") line += ",\"sandbox\":\"" + jsonEscape(sandbox_) + "\"";
  line += ",\"message\":\"" + jsonEscape(msg) + "\"";
  for (const auto& [k, v] : fields) line += ",\"" + jsonEscape(k) + "\":\"" + jsonEscape(v) + "\"";
  line += "}";
  spdlog::log(lvl, "{}", line);
}

void initLogging(const std::string& level, LogFormat format) {
  g_json = format == LogFormat::kJson;
  if (format == LogFormat::kJson)
    spdlog::set_pattern("{\"time\":\"%Y-%m-%dT%H:%M:%S.%eZ\",\"level\":\"%l\",%v",
                        spdlog::pattern_time_type::utc);
  else
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);
  spdlog::set_level(spdlog::level::from_str(level));
}

}  // namespace vessel
