// The JSON Schema half of the OpenAPI validator (openapi_validator.h): a
// YAML document as JSON, the schemas it declares, and the check of a value
// against one. Internal to vessel_openapi_validator.
#pragma once

#include <yaml-cpp/yaml.h>

#include <boost/json.hpp>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "base/result.h"

namespace vessel::testing::openapi_detail {

namespace json = boost::json;

// YAML's core schema types a plain scalar; a quoted one is a string.
json::value toJson(const YAML::Node& n);

// ---- Schemas --------------------------------------------------------------

struct Schema {
  const Schema* ref = nullptr;  // a $ref schema has nothing else
  std::string type;             // empty: any
  bool nullable = false;
  std::vector<std::string> required;
  std::map<std::string, std::unique_ptr<Schema>> properties;
  bool additional_allowed = true;
  std::unique_ptr<Schema> additional;  // null: any value
  std::optional<json::array> enum_values;
  std::unique_ptr<Schema> items;
  std::optional<uint64_t> min_items, max_items, min_properties, max_properties;
  std::optional<uint64_t> min_length, max_length;
  std::optional<double> minimum, maximum;
  std::optional<std::regex> pattern;
  std::string pattern_text;
  bool date_time = false;
  std::vector<std::unique_ptr<Schema>> all_of, one_of, any_of;
};

// Keywords that only describe; everything else must be understood below.
inline const std::set<std::string, std::less<>> kDescriptive = {"description", "title", "example",
                                                                "default", "summary"};

inline Error invalid(std::string what) { return Error(Code::kInvalidArgument, std::move(what)); }

// A value as short JSON, for error messages.
std::string shortJson(const json::value& v);
double number(const json::value& v);

// `v` against `s`; the error names the place `at`.
Status validate(const Schema& s, const json::value& v, const std::string& at);

}  // namespace vessel::testing::openapi_detail
