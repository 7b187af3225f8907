#include "openapi_schema.h"

#include <algorithm>
#include <cmath>

namespace vessel::testing::openapi_detail {

namespace {

// A plain (unquoted) scalar is typed the way YAML's core schema types it;
// a quoted one is always a string ("200", "0755").
json::value scalarValue(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() != "?") return json::value(s);
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  static const std::regex kInt("[-+]?[0-9]+");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (std::regex_match(s, kInt)) {
    try {
      return json::value(std::stoll(s));
    } catch (const std::out_of_range&) {
      return json::value(std::stod(s));
    }
  }
  if (std::regex_match(s, kFloat)) return json::value(std::stod(s));
  return json::value(s);
}

}  // namespace

json::value toJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json::object o;
      for (const auto& kv : n) o[kv.first.as<std::string>()] = toJson(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      json::array a;
      for (const auto& e : n) a.push_back(toJson(e));
      return a;
    }
    case YAML::NodeType::Scalar: return scalarValue(n);
    default: return nullptr;
  }
}

std::string shortJson(const json::value& v) {
  std::string s = json::serialize(v);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

static const char* kindName(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "null";
    case json::kind::bool_: return "boolean";
    case json::kind::int64:
    case json::kind::uint64: return "integer";
    case json::kind::double_: return "number";
    case json::kind::string: return "string";
    case json::kind::array: return "array";
    case json::kind::object: return "object";
  }
  return "?";
}

static bool isInteger(const json::value& v) {
  if (v.is_int64() || v.is_uint64()) return true;
  return v.is_double() && std::isfinite(v.get_double()) &&
         std::floor(v.get_double()) == v.get_double();
}

double number(const json::value& v) {
  if (v.is_int64()) return static_cast<double>(v.get_int64());
  if (v.is_uint64()) return static_cast<double>(v.get_uint64());
  return v.get_double();
}

static size_t utf8Length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

// RFC 3339 date-time: the shape and the ranges of its fields.
static bool isDateTime(const std::string& s) {
  static const std::regex kShape(
      R"(([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?([Zz]|[+-]([0-9]{2}):([0-9]{2})))");
  std::smatch m;
  if (!std::regex_match(s, m, kShape)) return false;
  auto f = [&](int i) { return m[i].matched ? std::stoi(m[i].str()) : 0; };
  return f(2) >= 1 && f(2) <= 12 && f(3) >= 1 && f(3) <= 31 && f(4) <= 23 && f(5) <= 59 &&
         f(6) <= 60 && f(9) <= 23 && f(10) <= 59;
}

// minItems/maxItems, minProperties/maxProperties: `n` `what` at `at`.
Status countWithin(const std::string& at, uint64_t n, const char* what, std::optional<uint64_t> min,
                   std::optional<uint64_t> max) {
  if (min && n < *min)
    return invalid(at + ": " + std::to_string(n) + " " + what + ", want at least " +
                   std::to_string(*min));
  if (max && n > *max)
    return invalid(at + ": " + std::to_string(n) + " " + what + ", want at most " +
                   std::to_string(*max));
  return okStatus();
}

// Validation: every failure names the JSON path of the offending value.
Status validate(const Schema& s, const json::value& v, const std::string& at) {
  if (s.ref) return validate(*s.ref, v, at);
  if (v.is_null() && s.nullable) return okStatus();
  if (!s.type.empty()) {
    bool ok = (s.type == "object" && v.is_object()) || (s.type == "array" && v.is_array()) ||
              (s.type == "string" && v.is_string()) || (s.type == "boolean" && v.is_bool()) ||
              (s.type == "integer" && isInteger(v)) || (s.type == "number" && v.is_number());
    if (!ok) return invalid(at + ": " + kindName(v) + " " + shortJson(v) + ", want " + s.type);
  }
  if (s.enum_values) {
    bool found = false;
    for (const auto& e : *s.enum_values) found = found || e == v;
    if (!found)
      return invalid(at + ": " + shortJson(v) + " not in enum " + json::serialize(*s.enum_values));
  }
  if (v.is_number()) {
    double x = number(v);
    if (s.minimum && x < *s.minimum)
      return invalid(at + ": " + shortJson(v) + " below minimum " + std::to_string(*s.minimum));
    if (s.maximum && x > *s.maximum)
      return invalid(at + ": " + shortJson(v) + " above maximum " + std::to_string(*s.maximum));
  }
  if (v.is_string()) {
    std::string str(v.get_string());
    size_t len = utf8Length(str);
    if (s.min_length && len < *s.min_length)
      return invalid(at + ": " + shortJson(v) + " shorter than " + std::to_string(*s.min_length));
    if (s.max_length && len > *s.max_length)
      return invalid(at + ": " + shortJson(v) + " longer than " + std::to_string(*s.max_length));
    // OpenAPI patterns are unanchored, like ECMAScript's search.
    if (s.pattern && !std::regex_search(str, *s.pattern))
      return invalid(at + ": " + shortJson(v) + " does not match " + s.pattern_text);
    if (s.date_time && !isDateTime(str))
      return invalid(at + ": " + shortJson(v) + " is not an RFC 3339 date-time");
  }
  if (v.is_array()) {
    const auto& a = v.get_array();
    VESSEL_TRY(countWithin(at, a.size(), "items", s.min_items, s.max_items));
    if (s.items)
      for (size_t i = 0; i < a.size(); ++i)
        VESSEL_TRY(validate(*s.items, a[i], at + "[" + std::to_string(i) + "]"));
  }
  if (v.is_object()) {
    const auto& o = v.get_object();
    for (const auto& r : s.required)
      if (!o.contains(r)) return invalid(at + ": missing required property \"" + r + "\"");
    VESSEL_TRY(countWithin(at, o.size(), "properties", s.min_properties, s.max_properties));
    for (const auto& kv : o) {
      std::string key(kv.key());
      std::string sub = at + "." + key;
      auto p = s.properties.find(key);
      if (p != s.properties.end()) {
        VESSEL_TRY(validate(*p->second, kv.value(), sub));
      } else if (!s.additional_allowed) {
        return invalid(at + ": property \"" + key + "\" is not allowed (additionalProperties)");
      } else if (s.additional) {
        VESSEL_TRY(validate(*s.additional, kv.value(), sub));
      }
    }
  }
  for (const auto& sub : s.all_of) VESSEL_TRY(validate(*sub, v, at));
  if (!s.one_of.empty()) {
    int matched = 0;
    std::string why;
    for (const auto& sub : s.one_of) {
      auto r = validate(*sub, v, at);
      if (r.ok())
        ++matched;
      else
        why += (why.empty() ? "" : "; ") + r.error().context();
    }
    if (matched != 1)
      return invalid(at + ": matches " + std::to_string(matched) + " of oneOf, want exactly 1" +
                     (why.empty() ? "" : " (" + why + ")"));
  }
  if (!s.any_of.empty()) {
    std::string why;
    bool any = false;
    for (const auto& sub : s.any_of) {
      auto r = validate(*sub, v, at);
      any = any || r.ok();
      if (!r.ok()) why += (why.empty() ? "" : "; ") + r.error().context();
    }
    if (!any) return invalid(at + ": matches none of anyOf (" + why + ")");
  }
  return okStatus();
}

}  // namespace vessel::testing::openapi_detail
