#pragma once
// Logging: every line names the component that wrote it and, where there is
// one, the sandbox it concerns, so an operator can grep one sandbox's life
// across the daemon. Backed by spdlog; format strings are fmt's.
#include <spdlog/spdlog.h>

#include <string>
#include <utility>

namespace vessel {

class Logger {
 public:
  explicit Logger(std::string component, std::string sandbox = "-")
      : component_(std::move(component)), sandbox_(std::move(sandbox)) {}

  Logger forSandbox(std::string sandbox) const { return Logger(component_, std::move(sandbox)); }
  const std::string& component() const { return component_; }
  const std::string& sandbox() const { return sandbox_; }

  template <typename... A>
  void debug(fmt::format_string<A...> f, A&&... a) const {
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

 private:
  void write(spdlog::level::level_enum lvl, const std::string& msg) const;
  std::string component_;
  std::string sandbox_;
};

// Sets the process-wide format ("2026-11-30T05:00:00.123Z info qemu sb-1 msg")
// and level ("debug", "info", "warn", "error"). Call once from main.
void initLogging(const std::string& level);

}  // namespace vessel
