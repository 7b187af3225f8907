#include "http/router.h"

#include <algorithm>
#include <charconv>

#include "base/result.h"
#include "http/server.h"

namespace vessel::http {

namespace {

// More segments than any route has: the path is refused without a longer look.
constexpr size_t kMaxSegments = 16;
constexpr size_t kMaxSegmentBytes = 255;

// "/a/b:c" -> {"a", "b:c"}; empty segments are kept, so "//" fits no pattern.
std::vector<std::string_view> split(std::string_view path) {
  std::vector<std::string_view> out;
  if (path.empty() || path[0] != '/') return out;
  size_t i = 1;
  while (i <= path.size() && out.size() <= kMaxSegments) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// A segment of a path that may be a parameter: printable, no '%' (nothing
// is decoded), bounded.
bool plainSegment(std::string_view s) {
  if (s.empty() || s.size() > kMaxSegmentBytes) return false;
  for (char c : s)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '%') return false;
  return true;
}

}  // namespace

const std::string& Params::operator[](std::string_view name) const {
  for (const auto& [n, v] : values_)
    if (n == name) return v.text;
  VESSEL_CHECK(false && "route table asks for a parameter its pattern lacks");
  static const std::string kNone;
  return kNone;
}

uint64_t Params::number(std::string_view name) const {
  for (const auto& [n, v] : values_)
    if (n == name && v.number) return *v.number;
  VESSEL_CHECK(false && "route table asks for a number its pattern does not type uint");
  return 0;
}

void Params::set(std::string name, std::string value, std::optional<uint64_t> number) {
  values_.emplace_back(std::move(name), Value{std::move(value), number});
}

Router::Router() {
  types_["segment"] = [](std::string_view) { return okStatus(); };
}

void Router::paramType(std::string name, ParamCheck check) {
  types_[std::move(name)] = std::move(check);
}

void Router::errorsUnder(std::string prefix, ErrorRenderer render) {
  renderers_.emplace_back(std::move(prefix), std::move(render));
}

void Router::guardUnder(std::string prefix, Guard guard) {
  guards_.emplace_back(std::move(prefix), std::move(guard));
}

void Router::add(verb method, std::string pattern, RouteHandler h) {
  Route r{method, std::move(pattern), std::move(h), {}, {}, 0};
  insert(std::move(r));
}

void Router::addStream(verb method, std::string pattern, StreamRouteHandler h) {
  Route r{method, std::move(pattern), {}, std::move(h), {}, 0};
  insert(std::move(r));
}

void Router::addUpload(verb method, std::string pattern, uint64_t max_body, UploadRouteHandler h) {
  Route r{method, std::move(pattern), {}, {}, std::move(h), max_body};
  insert(std::move(r));
}

void Router::insert(Route r) {
  Compiled c;
  for (std::string_view s : split(r.pattern)) {
    Segment seg;
    if (!s.empty() && s[0] == '{') {
      auto close = s.find('}');
      VESSEL_CHECK(close != std::string_view::npos);
      std::string_view inner = s.substr(1, close - 1);
      auto colon = inner.find(':');
      seg.param = std::string(inner.substr(0, colon));
      seg.type = colon == std::string_view::npos ? "segment" : std::string(inner.substr(colon + 1));
      seg.literal = std::string(s.substr(close + 1));
      VESSEL_CHECK(seg.type == "uint" || types_.count(seg.type));
    } else {
      seg.literal = std::string(s);
    }
    c.segments.push_back(std::move(seg));
  }
  c.route = std::move(r);
  routes_.push_back(std::move(c));
}

Result<Params> Router::fit(const std::vector<Segment>& pattern,
                           const std::vector<std::string_view>& segs, bool& fits) const {
  fits = false;
  Error no(Code::kNotFound, "");
  if (pattern.size() != segs.size()) return no;
  // Literals first: a path fits a pattern by its literal segments, and only
  // then are its parameters judged (so "/v1/sandboxes/x!" is a bad id, not
  // a missing endpoint).
  for (size_t i = 0; i < pattern.size(); ++i) {
    const Segment& p = pattern[i];
    if (p.param.empty()) {
      if (p.literal != segs[i]) return no;
    } else if (!p.literal.empty()) {
      if (segs[i].size() < p.literal.size() || !segs[i].ends_with(p.literal)) return no;
    }
  }
  fits = true;
  Params out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const Segment& p = pattern[i];
    if (p.param.empty()) continue;
    std::string_view v = segs[i].substr(0, segs[i].size() - p.literal.size());
    if (!plainSegment(v))
      return Error(Code::kInvalidArgument,
                   "bad " + p.param + " in path: '" + std::string(v.substr(0, 64)) + "'");
    std::optional<uint64_t> number;
    if (p.type == "uint") {
      uint64_t n = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc() || end != v.data() + v.size() || v.size() > 10)
        return Error(Code::kInvalidArgument,
                     p.param + " must be a decimal number, not '" + std::string(v) + "'");
      number = n;
    } else if (auto s = types_.at(p.type)(v); !s.ok()) {
      return std::move(s).error();
    }
    out.set(p.param, std::string(v), number);
  }
  return out;
}

Router::Match Router::match(const request_header<>& head, std::string_view path) const {
  Match m;
  auto segs = split(path);
  std::vector<verb> methods;  // of the patterns that fit the path
  std::optional<Error> bad;
  const Route* found = nullptr;
  Params found_params;
  for (const auto& c : routes_) {
    bool fits = false;
    auto p = fit(c.segments, segs, fits);
    if (!fits) continue;
    if (!p.ok()) {
      // A bad parameter is the answer only when no other pattern takes the
      // path; a malformed one says more than a type's "not mine" (kNotFound).
      if (!bad || (bad->code() == Code::kNotFound && p.error().code() != Code::kNotFound))
        bad = std::move(p).error();
      continue;
    }
    if (c.route.method == head.method() && !found) {
      found = &c.route;
      found_params = std::move(*p);
    }
    if (std::find(methods.begin(), methods.end(), c.route.method) == methods.end())
      methods.push_back(c.route.method);
  }
  // Allow in one order whatever order the table declares its routes in.
  std::string allow;
  for (verb v :
       {verb::get, verb::head, verb::post, verb::put, verb::patch, verb::delete_, verb::options})
    if (std::find(methods.begin(), methods.end(), v) != methods.end())
      allow += (allow.empty() ? "" : ", ") + std::string(to_string(v));
  if (found) {
    m.route = found;
    m.params = std::move(found_params);
    return m;
  }
  Request req;
  req.base() = head;
  for (const auto& [prefix, guard] : guards_)
    if (path.starts_with(prefix))
      if (auto refused = guard(req)) {
        m.refusal = std::move(*refused);
        return m;
      }
  if (!allow.empty()) {
    Response res = render(
        req, path,
        Error(Code::kInvalidArgument, std::string(head.method_string()) + " is not allowed on " +
                                          std::string(path) + " (allowed: " + allow + ")"));
    res.result(status::method_not_allowed);
    res.set(field::allow, allow);
    m.refusal = std::move(res);
    return m;
  }
  if (bad) {
    m.refusal = render(req, path, *bad);
    return m;
  }
  m.refusal = render(req, path, Error(Code::kNotFound, "no such endpoint: " + std::string(path)));
  return m;
}

Response Router::render(const Request& req, std::string_view path, const Error& e) const {
  const ErrorRenderer* best = nullptr;
  size_t best_len = 0;
  for (const auto& [prefix, r] : renderers_)
    if (path.starts_with(prefix) && (!best || prefix.size() > best_len)) {
      best = &r;
      best_len = prefix.size();
    }
  return best ? (*best)(req, e) : errorResponse(req, e);
}

}  // namespace vessel::http
