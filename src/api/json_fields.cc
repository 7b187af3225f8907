#include "api/json_fields.h"

#include <boost/json/parse.hpp>

namespace vessel::api {

namespace json = boost::json;

Error badRequest(const std::string& what) { return Error(Code::kInvalidArgument, what); }

Result<json::object> parseObject(std::string_view body, int depth) {
  json::parse_options po;
  po.max_depth = static_cast<size_t>(depth);
  boost::system::error_code ec;
  json::value v = json::parse(body, ec, {}, po);
  if (ec) return badRequest("body is not valid JSON: " + ec.message());
  if (!v.is_object()) return badRequest("body must be a JSON object");
  return std::move(v.as_object());
}

Result<int64_t> intField(const json::value& v, std::string_view name, int64_t lo, int64_t hi) {
  std::string n(name);
  if (!v.is_int64() && !v.is_uint64()) return badRequest(n + " must be an integer");
  if (v.is_uint64() && v.as_uint64() > static_cast<uint64_t>(hi))
    return badRequest(n + " is too big");
  int64_t x = v.is_int64() ? v.as_int64() : static_cast<int64_t>(v.as_uint64());
  if (x < lo || x > hi)
    return badRequest(n + " must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return x;
}

Result<std::string> strField(const json::value& v, std::string_view name, size_t max) {
  std::string n(name);
  if (!v.is_string()) return badRequest(n + " must be a string");
  if (v.as_string().size() > max)
    return badRequest(n + " is longer than " + std::to_string(max) + " bytes");
  return std::string(v.as_string());
}

bool envKey(std::string_view k, size_t max) {
  if (k.empty() || k.size() > max || (k[0] >= '0' && k[0] <= '9')) return false;
  for (char c : k)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  return true;
}

}  // namespace vessel::api
