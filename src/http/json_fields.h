#pragma once
// Reading requests, shared by every parser at the API's edge: one bounded
// JSON parse of a body into an object, typed fields with ranges, and the
// query string. Every
// failure is kInvalidArgument naming the field, which the API answers 400.
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::http {

Error badRequest(const std::string& what);
// The body as one JSON object, nested at most `depth` deep.
Result<boost::json::object> parseObject(std::string_view body, int depth = 8);
// An integer in [lo, hi].
Result<int64_t> intField(const boost::json::value& v, std::string_view name, int64_t lo,
                         int64_t hi);
// A string of at most `max` bytes.
Result<std::string> strField(const boost::json::value& v, std::string_view name, size_t max);

// An HTTP field name the gateway may set: a token, and none of the fields
// that decide framing, routing or the connection (credentials, E2B rules).
bool injectableHeader(std::string_view h);

// %XX and '+' decoded.
Result<std::string> percentDecode(std::string_view s);
// "a=1&b=x%2Fy" after the '?' of `target` -> {a: "1", b: "x/y"}, percent-
// and '+'-decoded. Bounded: at most 16 parameters of 8 KiB each; a repeated
// or unknown name (not in `allowed`; an entry ending in '.' allows every
// name with that prefix) is an error.
Result<std::map<std::string, std::string>> parseQuery(
    std::string_view target, std::initializer_list<std::string_view> allowed);

}  // namespace vessel::http
