#pragma once
// RFC 3339 times as the APIs take them (E2B's startedAfter, the sandbox
// log's since=): "2026-01-02T03:04:05Z", "...05.123Z", "...05+02:00".
#include <cstdint>
#include <string_view>

#include "base/result.h"

namespace vessel {

// Milliseconds since the epoch, or kInvalidArgument saying what is wrong.
Result<int64_t> parseRfc3339(std::string_view s);

}  // namespace vessel
