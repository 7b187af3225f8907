#pragma once
// Logging: every line names the component that wrote it and, where there is
// one, the sandbox it concerns, so an operator can grep one sandbox's life
// across the daemon. Backed by spdlog; format strings are fmt's.
//
// Two formats (vesseld --log-format): text, "<time> <level> <component>
// <sandbox> <message> [k=v ...]", and json, one object per line:
// {"time", "level", "component", "sandbox"?, "message", ...fields}.
#include <spdlog/spdlog.h>

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace vessel {

// Named values of one line (a request's id, route, status, ...).
using LogFields = std::initializer_list<std::pair<std::string_view, std::string_view>>;

class Logger {
 public:
  explicit Logger(std::string component, std::string sandbox = "-")
      : component_(std::move(component)), sandbox_(std::move(sandbox)) {}

  Logger forSandbox(std::string sandbox) const { return Logger(component_, std::move(sandbox)); }
  const std::string& component() const { return component_; }
  const std::string& sandbox() const { return sandbox_; }

  template <typename... A>
  void debug(fmt::format_string<A...> f, A&&... a) const {
    if (!spdlog::should_log(spdlog::level::debug)) return;
    write(spdlog::level::debug, fmt::format(f, std::forward<A>(a)...));
  }
  template <typename... A>
  void info(fmt::format_string<A...> f, A&&... a) const {
    write(spdlog::level::info, fmt::format(f, std::forward<A>(a)...));
  }
  template <typename... A>
  void warn(fmt::format_string<A...> f, A&&... a) const {
    write(spdlog::level::warn, fmt::format(f, std::forward<A>(a)...));
  }
  template <typename... A>
  void error(fmt::format_string<A...> f, A&&... a) const {
    write(spdlog::level::err, fmt::format(f, std::forward<A>(a)...));
  }
  // A line with named fields: in JSON each is a member of its own.
  void infoWith(std::string_view message, LogFields fields) const {
    write(spdlog::level::info, message, fields);
  }

 private:
  void write(spdlog::level::level_enum lvl, std::string_view msg, LogFields fields = {}) const;
  std::string component_;
  std::string sandbox_;
};

enum class LogFormat { kText, kJson };

// Sets the process-wide format and level ("debug", "info", "warn",
// "error"). Call once from main.
void initLogging(const std::string& level, LogFormat format = LogFormat::kText);

// `s` as the inside of a JSON string (quotes, backslashes and control
// characters escaped).
std::string jsonEscape(std::string_view s);

}  // namespace vessel
