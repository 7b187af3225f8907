#include "http/json_fields.h"

#include <boost/json/parse.hpp>
#include <cctype>

namespace vessel::http {

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

namespace {

constexpr size_t kMaxParams = 16;   // query parameters per request
constexpr size_t kMaxParam = 8192;  // bytes of one, encoded

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool injectableHeader(std::string_view h) {
  if (h.empty() || h.size() > 64) return false;
  std::string lower;
  for (char c : h) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_')) return false;
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  for (const char* f : {"host", "content-length", "transfer-encoding", "connection", "upgrade",
                        "te", "trailer", "keep-alive", "expect"})
    if (lower == f) return false;
  return lower.rfind("proxy-", 0) != 0;
}

Result<std::string> percentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%') {
      if (i + 2 >= s.size()) return badRequest("bad percent-encoding");
      int hi = hexDigit(s[i + 1]), lo = hexDigit(s[i + 2]);
      if (hi < 0 || lo < 0) return badRequest("bad percent-encoding");
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

Result<std::map<std::string, std::string>> parseQuery(
    std::string_view target, std::initializer_list<std::string_view> allowed) {
  std::map<std::string, std::string> out;
  auto qm = target.find('?');
  if (qm == std::string_view::npos) return out;
  std::string_view rest = target.substr(qm + 1);
  while (!rest.empty()) {
    auto amp = rest.find('&');
    std::string_view kv = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (kv.empty()) continue;
    if (kv.size() > kMaxParam) return badRequest("query parameter too long");
    if (out.size() >= kMaxParams) return badRequest("too many query parameters");
    auto eq = kv.find('=');
    VESSEL_ASSIGN_OR_RETURN(std::string k, percentDecode(kv.substr(0, eq)));
    VESSEL_ASSIGN_OR_RETURN(
        std::string v,
        percentDecode(eq == std::string_view::npos ? std::string_view() : kv.substr(eq + 1)));
    bool known = false;
    for (auto a : allowed)
      known =
          known || (!a.empty() && a.back() == '.'
                        ? k.size() > a.size() && k.rfind(a, 0) == 0  // a prefix: a name after it
                        : a == k);
    if (!known) return badRequest("unknown query parameter '" + k.substr(0, 64) + "'");
    if (!out.emplace(k, std::move(v)).second)
      return badRequest("query parameter '" + k.substr(0, 64) + "' repeated");
  }
  return out;
}

}  // namespace vessel::http
