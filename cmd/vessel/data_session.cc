#include "cmd/vessel/data_session.h"

#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>

namespace vessel::cli {

namespace json = boost::json;

Result<DataSession> openSession(const std::string& sandbox_id, int ttl_seconds,
                                size_t max_response_bytes) {
  client::Client control(client::optionsFromEnv());
  json::object body;
  if (ttl_seconds > 0) body["ttl_seconds"] = ttl_seconds;
  auto s = control.post("/v1/sandboxes/" + sandbox_id + "/sessions", body);
  if (!s.ok()) return std::move(s).error().withContext("open a session on " + sandbox_id);
  client::ClientOptions o;
  o.url = client::str(*s, "data_url");
  o.ca_file = control.options().ca_file;  // the data plane's certificate is the API's
  if (const char* u = std::getenv("VESSEL_DATA_URL"); u && *u) o.url = u;
  o.token = client::str(*s, "token");
  o.max_response_bytes = max_response_bytes;
  if (o.url.empty() || o.token.empty())
    return Error(Code::kProtocol, "session on " + sandbox_id + ": no data_url or token");
  return DataSession{sandbox_id, client::Client(std::move(o))};
}

std::string queryEscape(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '/' ||
        c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

int report(const Error& e, int code) {
  std::fprintf(stderr, "vessel: %s\n", e.message().c_str());
  return code;
}

}  // namespace vessel::cli
