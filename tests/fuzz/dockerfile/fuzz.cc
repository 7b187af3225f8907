// A Dockerfile (`vessel template build -f Dockerfile`): any bytes parse to
// a plan within its bounds or to an Error; a plan's steps name lines of the
// text, its destinations and directories are absolute, and what it passes
// to the guest as an environment is NAME=VALUE without NUL.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/env_var.h"
#include "templates/dockerfile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto p = vessel::templates::parseDockerfile(in, {{"A", "1"}});
  if (!p.ok()) return 0;
  size_t lines = 1;
  for (char c : in) lines += c == '\n';
  if (p->from_image.empty() == p->from_template.empty()) __builtin_trap();
  if (p->workdir.empty() || p->workdir[0] != '/') __builtin_trap();
  for (const auto& s : p->steps) {
    if (s.line == 0 || s.line > lines) __builtin_trap();
    if (s.run.has_value() == s.copy.has_value()) __builtin_trap();
    if (s.workdir.empty() || s.workdir[0] != '/') __builtin_trap();
    // A command names its program and holds nothing execve cannot pass.
    if (s.run && (s.run->argv.empty() || s.run->argv[0].empty())) __builtin_trap();
    if (s.run)
      for (const auto& a : s.run->argv)
        if (a.find('\0') != std::string::npos) __builtin_trap();
    if (s.copy && (s.copy->dest.empty() || s.copy->dest[0] != '/' || s.copy->sources.empty()))
      __builtin_trap();
    for (const auto& e : s.env)
      if (!vessel::envEntry(e)) __builtin_trap();
  }
  for (const auto& e : p->env)
    if (!vessel::envEntry(e)) __builtin_trap();
  if (!p->start.empty() && p->start[0].empty()) __builtin_trap();
  for (const auto& a : p->start)
    if (a.find('\0') != std::string::npos) __builtin_trap();
  return 0;
}
