#pragma once
// Environment variables as every front end takes them (a create's env, an
// exec's env, E2B's envVars and envs, a build spec's env, an image's Env).
// The guest's agent joins a name and a value with '=' and execve splits the
// entry at its first '=': a name holding '=' or NUL would be read back as
// another variable than the one the caller named (a build spec's
// {"A=B": "c"} and {"A": "B=c"} are one entry), so no parser lets one in.
#include <cstddef>
#include <string_view>

namespace vessel {

inline constexpr size_t kMaxEnvName = 255;

// A name every shell can export: [A-Za-z_][A-Za-z0-9_]*, 1 to `max` bytes.
bool portableEnvName(std::string_view name, size_t max = kMaxEnvName);

// "NAME=VALUE" as execve reads it: a name that is not empty, then '=', and
// no NUL anywhere. Looser than portableEnvName on purpose: an OCI image's Env
// may name variables such as "JAVA.HOME" that docker passes through.
bool envEntry(std::string_view entry);

// A value that survives the trip through execve unchanged: no NUL.
inline bool envValue(std::string_view value) { return value.find('\0') == std::string_view::npos; }

}  // namespace vessel
