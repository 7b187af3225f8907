#include "e2b/envd/route.h"

#include <ctime>

#include "e2b/envd/signature.h"
#include "http/json_fields.h"
#include "http/names.h"

namespace vessel::e2b::envd {

std::optional<std::string> sandboxFromHost(std::string_view host) {
  constexpr std::string_view kPort = "49983-";
  if (host.substr(0, kPort.size()) != kPort) return std::nullopt;
  host.remove_prefix(kPort.size());
  auto dot = host.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  return std::string(host.substr(0, dot));
}

namespace {

// A /files request's signature, if it carries one.
std::optional<SignedRequest> signedRequest(const http::request_header<>& head) {
  std::string_view target = head.target();
  std::string_view path = target.substr(0, target.find('?'));
  if (path != "/files") return std::nullopt;
  auto q = http::parseQuery(target, {"path", "username", "signature", "signature_expiration"});
  if (!q.ok()) return std::nullopt;
  auto sig = q->find("signature");
  if (sig == q->end()) return std::nullopt;
  SignedRequest sr;
  sr.path = q->count("path") ? q->at("path") : "";
  sr.operation = head.method() == http::verb::post ? "write" : "read";
  sr.user = q->count("username") ? q->at("username") : "";
  sr.signature = sig->second;
  if (auto e = q->find("signature_expiration"); e != q->end()) {
    auto exp = parseExpiration(e->second);
    if (!exp.ok()) return std::nullopt;
    sr.expiration = *exp;
  }
  return sr;
}

}  // namespace

std::optional<std::string> sandboxOfRequest(const http::request_header<>& head) {
  if (auto it = head.find("E2b-Sandbox-Id"); it != head.end() && !it->value().empty())
    return std::string(it->value());
  return sandboxFromHost(head[http::field::host]);
}

bool authenticated(const http::request_header<>& head, const AccessTokens& tokens,
                   const std::string& sandbox_id) {
  if (!tokens.hasKey()) return false;
  if (auto sr = signedRequest(head))
    return checkFileSignature(*sr, tokens.forSandbox(sandbox_id),
                              static_cast<int64_t>(std::time(nullptr)))
        .ok();
  auto tok = head.find("X-Access-Token");
  return tok != head.end() && tokens.check(sandbox_id, tok->value());
}

}  // namespace vessel::e2b::envd
