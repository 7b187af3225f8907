#include "openapi_validator.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <vector>

#include "openapi_schema.h"

namespace vessel::testing {

namespace json = boost::json;

namespace {

using namespace openapi_detail;  // NOLINT: the schema half, same library

struct Media {
  bool json = false;       // application/json: the body is checked
  bool streaming = false;  // text/event-stream
  const Schema* schema = nullptr;
};

struct Response {
  bool has_content = false;
  std::vector<std::string> media_types;
  Media media;
};

struct Operation {
  std::map<std::string, const Response*> responses;  // "200" or "default"
};

// One path segment: a literal, or "{param}" with an optional literal suffix
// (the ":verb" form, "{id}:pause").
struct Segment {
  bool param = false;
  std::string literal;  // the whole segment, or the suffix after the param
};

struct PathItem {
  std::string tmpl;
  std::vector<Segment> segments;
  std::map<std::string, Operation> ops;  // upper-case method
};

std::vector<std::string_view> splitPath(std::string_view p) {
  std::vector<std::string_view> out;
  if (!p.empty() && p.front() == '/') p.remove_prefix(1);
  while (true) {
    size_t slash = p.find('/');
    out.push_back(p.substr(0, slash));
    if (slash == std::string_view::npos) break;
    p.remove_prefix(slash + 1);
  }
  return out;
}

std::string upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

}  // namespace

struct OpenApi::Impl {
  json::value doc;
  std::map<std::string, std::unique_ptr<Schema>> schemas;  // #/components/schemas
  std::map<std::string, std::unique_ptr<Response>> responses;
  std::vector<std::unique_ptr<Schema>> inline_schemas;
  std::vector<std::unique_ptr<Response>> inline_responses;
  std::vector<PathItem> paths;

  Result<const json::object*> objectAt(const json::value& v, const std::string& where) {
    if (!v.is_object()) return invalid(where + ": want an object");
    return &v.get_object();
  }

  Result<uint64_t> count(const json::value& v, const std::string& where) {
    if (!v.is_int64() || v.get_int64() < 0) return invalid(where + ": want a count");
    return static_cast<uint64_t>(v.get_int64());
  }

  // Turns one schema object into a Schema, refusing keywords it cannot check.
  Status compile(const json::value& v, Schema& s, const std::string& where) {
    VESSEL_ASSIGN_OR_RETURN(const json::object* o, objectAt(v, where));
    if (auto* r = o->if_contains("$ref")) {
      for (const auto& kv : *o)
        if (kv.key() != "$ref" && !kDescriptive.count(kv.key()))
          return invalid(where + ": \"" + std::string(kv.key()) + "\" beside $ref is ignored");
      VESSEL_ASSIGN_OR_RETURN(s.ref, schemaRef(*r, where));
      return okStatus();
    }
    for (const auto& kv : *o) {
      std::string k(kv.key());
      const json::value& x = kv.value();
      std::string at = where + "." + k;
      if (kDescriptive.count(k)) continue;
      if (k == "type") {
        static const std::set<std::string> kTypes = {"object",  "array",  "string",
                                                     "integer", "number", "boolean"};
        if (!x.is_string() || !kTypes.count(std::string(x.get_string())))
          return invalid(at + ": unknown type " + shortJson(x));
        s.type = x.get_string();
      } else if (k == "nullable") {
        if (!x.is_bool()) return invalid(at + ": want a boolean");
        s.nullable = x.get_bool();
      } else if (k == "required") {
        if (!x.is_array()) return invalid(at + ": want an array");
        for (const auto& e : x.get_array()) {
          if (!e.is_string()) return invalid(at + ": want strings");
          s.required.emplace_back(e.get_string());
        }
      } else if (k == "properties") {
        VESSEL_ASSIGN_OR_RETURN(const json::object* props, objectAt(x, at));
        for (const auto& p : *props) {
          auto sub = std::make_unique<Schema>();
          VESSEL_TRY(compile(p.value(), *sub, at + "." + std::string(p.key())));
          s.properties[std::string(p.key())] = std::move(sub);
        }
      } else if (k == "additionalProperties") {
        if (x.is_bool()) {
          s.additional_allowed = x.get_bool();
        } else {
          s.additional = std::make_unique<Schema>();
          VESSEL_TRY(compile(x, *s.additional, at));
        }
      } else if (k == "enum") {
        if (!x.is_array() || x.get_array().empty()) return invalid(at + ": want a list");
        s.enum_values = x.get_array();
      } else if (k == "items") {
        s.items = std::make_unique<Schema>();
        VESSEL_TRY(compile(x, *s.items, at));
      } else if (k == "minItems") {
        VESSEL_ASSIGN_OR_RETURN(s.min_items, count(x, at));
      } else if (k == "maxItems") {
        VESSEL_ASSIGN_OR_RETURN(s.max_items, count(x, at));
      } else if (k == "minProperties") {
        VESSEL_ASSIGN_OR_RETURN(s.min_properties, count(x, at));
      } else if (k == "maxProperties") {
        VESSEL_ASSIGN_OR_RETURN(s.max_properties, count(x, at));
      } else if (k == "minLength") {
        VESSEL_ASSIGN_OR_RETURN(s.min_length, count(x, at));
      } else if (k == "maxLength") {
        VESSEL_ASSIGN_OR_RETURN(s.max_length, count(x, at));
      } else if (k == "minimum" || k == "maximum") {
        if (!x.is_number()) return invalid(at + ": want a number");
        (k == "minimum" ? s.minimum : s.maximum) = number(x);
      } else if (k == "pattern") {
        if (!x.is_string()) return invalid(at + ": want a string");
        s.pattern_text = x.get_string();
        try {
          s.pattern.emplace(s.pattern_text, std::regex::ECMAScript);
        } catch (const std::regex_error& e) {
          return invalid(at + ": bad pattern " + s.pattern_text + ": " + e.what());
        }
      } else if (k == "format") {
        // Only date-time is checked; binary, int64 and the like say nothing
        // a JSON response could break.
        if (!x.is_string()) return invalid(at + ": want a string");
        s.date_time = x.get_string() == "date-time";
      } else if (k == "allOf" || k == "oneOf" || k == "anyOf") {
        if (!x.is_array() || x.get_array().empty()) return invalid(at + ": want a list");
        auto& list = k == "allOf" ? s.all_of : k == "oneOf" ? s.one_of : s.any_of;
        for (size_t i = 0; i < x.get_array().size(); ++i) {
          auto sub = std::make_unique<Schema>();
          VESSEL_TRY(compile(x.get_array()[i], *sub, at + "[" + std::to_string(i) + "]"));
          list.push_back(std::move(sub));
        }
      } else {
        return invalid(at + ": schema keyword not supported by the validator");
      }
    }
    return okStatus();
  }

  Result<const Schema*> schemaRef(const json::value& r, const std::string& where) {
    static constexpr std::string_view kPrefix = "#/components/schemas/";
    if (!r.is_string() || !r.get_string().starts_with(kPrefix))
      return invalid(where + ": $ref " + shortJson(r) + " is not a component schema");
    auto it = schemas.find(std::string(r.get_string().subview(kPrefix.size())));
    if (it == schemas.end()) return invalid(where + ": $ref " + shortJson(r) + " not found");
    return it->second.get();
  }

  Status compileResponse(const json::value& v, Response& r, const std::string& where) {
    VESSEL_ASSIGN_OR_RETURN(const json::object* o, objectAt(v, where));
    for (const auto& kv : *o) {
      std::string k(kv.key());
      if (k == "description" || k == "headers") continue;
      if (k != "content") return invalid(where + "." + k + ": not supported by the validator");
      VESSEL_ASSIGN_OR_RETURN(const json::object* content,
                              objectAt(kv.value(), where + ".content"));
      r.has_content = !content->empty();
      for (const auto& m : *content) {
        std::string type(m.key());
        std::string at = where + ".content." + type;
        r.media_types.push_back(type);
        VESSEL_ASSIGN_OR_RETURN(const json::object* mo, objectAt(m.value(), at));
        for (const auto& mk : *mo)
          if (mk.key() != "schema" && mk.key() != "example")
            return invalid(at + "." + std::string(mk.key()) + ": not supported by the validator");
        if (type == "text/event-stream") r.media.streaming = true;
        if (type != "application/json") continue;
        r.media.json = true;
        if (auto* s = mo->if_contains("schema")) {
          auto sub = std::make_unique<Schema>();
          VESSEL_TRY(compile(*s, *sub, at + ".schema"));
          r.media.schema = sub.get();
          inline_schemas.push_back(std::move(sub));
        }
      }
    }
    return okStatus();
  }

  Status build() {
    VESSEL_ASSIGN_OR_RETURN(const json::object* root, objectAt(doc, "$"));
    const json::value* ver = root->if_contains("openapi");
    if (!ver || !ver->is_string() || !ver->get_string().starts_with("3.0"))
      return invalid("$.openapi: want 3.0.x");
    const json::object empty;
    const json::object* components = &empty;
    if (auto* c = root->if_contains("components")) {
      VESSEL_ASSIGN_OR_RETURN(components, objectAt(*c, "$.components"));
    }
    // Every component schema exists before any is compiled, so $refs
    // (including recursive ones) resolve to stable addresses.
    const json::object* schema_defs = &empty;
    if (auto* s = components->if_contains("schemas")) {
      VESSEL_ASSIGN_OR_RETURN(schema_defs, objectAt(*s, "$.components.schemas"));
    }
    for (const auto& kv : *schema_defs) schemas[std::string(kv.key())] = std::make_unique<Schema>();
    for (const auto& kv : *schema_defs)
      VESSEL_TRY(compile(kv.value(), *schemas[std::string(kv.key())],
                         "$.components.schemas." + std::string(kv.key())));
    if (auto* rs = components->if_contains("responses")) {
      VESSEL_ASSIGN_OR_RETURN(const json::object* defs, objectAt(*rs, "$.components.responses"));
      for (const auto& kv : *defs) {
        auto r = std::make_unique<Response>();
        VESSEL_TRY(
            compileResponse(kv.value(), *r, "$.components.responses." + std::string(kv.key())));
        responses[std::string(kv.key())] = std::move(r);
      }
    }
    const json::value* paths_v = root->if_contains("paths");
    if (!paths_v) return invalid("$.paths: missing");
    VESSEL_ASSIGN_OR_RETURN(const json::object* path_defs, objectAt(*paths_v, "$.paths"));
    static const std::set<std::string> kMethods = {"get",     "put",  "post",  "delete",
                                                   "options", "head", "patch", "trace"};
    for (const auto& pkv : *path_defs) {
      PathItem item;
      item.tmpl = pkv.key();
      std::string where = "$.paths." + item.tmpl;
      if (!item.tmpl.starts_with("/")) return invalid(where + ": want a path starting with /");
      for (std::string_view seg : splitPath(item.tmpl)) {
        Segment s;
        if (seg.starts_with("{")) {
          size_t close = seg.find('}');
          if (close == std::string_view::npos) return invalid(where + ": unclosed {");
          s.param = true;
          s.literal = seg.substr(close + 1);
        } else {
          s.literal = seg;
        }
        if (s.literal.find_first_of("{}") != std::string::npos)
          return invalid(where + ": only {param} or {param}suffix segments are supported");
        item.segments.push_back(std::move(s));
      }
      VESSEL_ASSIGN_OR_RETURN(const json::object* po, objectAt(pkv.value(), where));
      for (const auto& okv : *po) {
        std::string method(okv.key());
        if (method == "parameters" || method == "summary" || method == "description") continue;
        if (!kMethods.count(method)) return invalid(where + "." + method + ": not an operation");
        std::string at = where + "." + method;
        VESSEL_ASSIGN_OR_RETURN(const json::object* oo, objectAt(okv.value(), at));
        const json::value* rv = oo->if_contains("responses");
        if (!rv) return invalid(at + ".responses: missing");
        VESSEL_ASSIGN_OR_RETURN(const json::object* ro, objectAt(*rv, at + ".responses"));
        Operation op;
        for (const auto& rkv : *ro) {
          std::string status(rkv.key());
          std::string rat = at + ".responses." + status;
          bool digits = status.size() == 3 && std::all_of(status.begin(), status.end(), [](char c) {
                          return c >= '0' && c <= '9';
                        });
          if (!digits && status != "default") return invalid(rat + ": want a status or default");
          VESSEL_ASSIGN_OR_RETURN(op.responses[status], response(rkv.value(), rat));
        }
        item.ops[upper(method)] = std::move(op);
      }
      paths.push_back(std::move(item));
    }
    return okStatus();
  }

  Result<const Response*> response(const json::value& v, const std::string& where) {
    if (v.is_object() && v.get_object().contains("$ref")) {
      static constexpr std::string_view kPrefix = "#/components/responses/";
      const json::value& r = v.get_object().at("$ref");
      if (!r.is_string() || !r.get_string().starts_with(kPrefix))
        return invalid(where + ": $ref " + shortJson(r) + " is not a component response");
      auto it = responses.find(std::string(r.get_string().subview(kPrefix.size())));
      if (it == responses.end()) return invalid(where + ": $ref " + shortJson(r) + " not found");
      return it->second.get();
    }
    auto r = std::make_unique<Response>();
    VESSEL_TRY(compileResponse(v, *r, where));
    inline_responses.push_back(std::move(r));
    return inline_responses.back().get();
  }

  // The path item a concrete target (or a template) names. When several
  // match ("/v1/sandboxes/{id}" and "/v1/sandboxes/{id}:pause" both take
  // "sb-1:pause"), the one with the most literal text wins.
  const PathItem* find(std::string_view target) const {
    target = target.substr(0, target.find_first_of("?#"));
    auto segs = splitPath(target);
    const PathItem* best = nullptr;
    size_t best_score = 0;
    for (const auto& p : paths) {
      if (p.tmpl == target) return &p;
      if (p.segments.size() != segs.size()) continue;
      size_t score = 0;
      bool ok = true;
      for (size_t i = 0; ok && i < segs.size(); ++i) {
        const Segment& s = p.segments[i];
        if (!s.param) {
          ok = segs[i] == s.literal;
        } else {
          ok = segs[i].size() > s.literal.size() && segs[i].ends_with(s.literal);
        }
        score += s.literal.size();
      }
      if (ok && (!best || score > best_score)) {
        best = &p;
        best_score = score;
      }
    }
    return best;
  }

  Result<const Response*> lookup(std::string_view method, std::string_view target, int status,
                                 std::string* name) const {
    const PathItem* p = find(target);
    if (!p) return Error(Code::kNotFound, "no path in the spec matches " + std::string(target));
    std::string m = upper(method);
    *name = m + " " + p->tmpl + " " + std::to_string(status);
    auto op = p->ops.find(m);
    if (op == p->ops.end()) return Error(Code::kNotFound, "the spec has no " + m + " " + p->tmpl);
    auto r = op->second.responses.find(std::to_string(status));
    if (r == op->second.responses.end()) r = op->second.responses.find("default");
    if (r == op->second.responses.end())
      return invalid(*name + ": status not declared for this operation");
    return r->second;
  }
};

OpenApi::OpenApi(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OpenApi::OpenApi(OpenApi&&) noexcept = default;
OpenApi& OpenApi::operator=(OpenApi&&) noexcept = default;
OpenApi::~OpenApi() = default;

Result<OpenApi> OpenApi::parse(std::string_view yaml) {
  auto impl = std::make_unique<Impl>();
  // yaml-cpp reports errors by throwing; they end here.
  try {
    impl->doc = toJson(YAML::Load(std::string(yaml)));
  } catch (const YAML::Exception& e) {
    return Error(Code::kInvalidArgument, std::string("parse openapi yaml: ") + e.what());
  }
  VESSEL_TRY_CTX(impl->build(), "openapi spec");
  return OpenApi(std::move(impl));
}

Result<OpenApi> OpenApi::load(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  try {
    impl->doc = toJson(YAML::LoadFile(path));
  } catch (const YAML::BadFile&) {
    return Error(Code::kNotFound, "open " + path);
  } catch (const YAML::Exception& e) {
    return Error(Code::kInvalidArgument, "parse " + path + ": " + e.what());
  }
  VESSEL_TRY_CTX(impl->build(), path);
  return OpenApi(std::move(impl));
}

Status OpenApi::checkResponse(std::string_view method, std::string_view target, int status,
                              const json::value& body) const {
  std::string name;
  VESSEL_ASSIGN_OR_RETURN(const Response* r, impl_->lookup(method, target, status, &name));
  if (!r->media.json || !r->media.schema) return okStatus();
  VESSEL_TRY_CTX(validate(*r->media.schema, body, "$"), name);
  return okStatus();
}

Status OpenApi::checkRawResponse(std::string_view method, std::string_view target, int status,
                                 std::string_view content_type, std::string_view body) const {
  std::string name;
  VESSEL_ASSIGN_OR_RETURN(const Response* r, impl_->lookup(method, target, status, &name));
  std::string_view type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
  if (!r->has_content) {
    if (!body.empty()) return invalid(name + ": a body where the spec declares none");
    return okStatus();
  }
  bool declared = false;
  for (const auto& m : r->media_types) declared = declared || m == type;
  if (!declared) {
    std::string want;
    for (const auto& m : r->media_types) want += (want.empty() ? "" : ", ") + m;
    return invalid(name + ": Content-Type \"" + std::string(content_type) + "\", want " + want);
  }
  if (type != "application/json") return okStatus();
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec) return invalid(name + ": body is not JSON: " + ec.message());
  return checkResponse(method, target, status, v);
}

Status OpenApi::checkSchema(std::string_view name, const json::value& body) const {
  auto it = impl_->schemas.find(std::string(name));
  if (it == impl_->schemas.end())
    return Error(Code::kNotFound, "no schema " + std::string(name) + " in the spec");
  VESSEL_TRY_CTX(validate(*it->second, body, "$"), "schema " + std::string(name));
  return okStatus();
}

}  // namespace vessel::testing
