#pragma once
// Reading request bodies, shared by every parser at the API's edge: one
// bounded JSON parse into an object, then typed fields with ranges. Every
// failure is kInvalidArgument naming the field, which the API answers 400.
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::api {

Error badRequest(const std::string& what);
// The body as one JSON object, nested at most `depth` deep.
Result<boost::json::object> parseObject(std::string_view body, int depth = 8);
// An integer in [lo, hi].
Result<int64_t> intField(const boost::json::value& v, std::string_view name, int64_t lo,
                         int64_t hi);
// A string of at most `max` bytes.
Result<std::string> strField(const boost::json::value& v, std::string_view name, size_t max);
// A POSIX-style environment variable name of at most `max` bytes.
bool envKey(std::string_view k, size_t max);

}  // namespace vessel::api
