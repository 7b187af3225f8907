#include "http/headers.h"

#include <boost/beast/core/string.hpp>

namespace vessel::http {

namespace beast = boost::beast;

std::string contentDisposition(std::string_view disposition, std::string_view file_name) {
  std::string ascii;
  bool lossy = false;
  for (unsigned char c : file_name) {
    if (c < 0x20 || c >= 0x7f) {
      ascii += '_';
      lossy = true;
    } else if (c == '"' || c == '\\') {
      ascii += '\\';
      ascii += static_cast<char>(c);
    } else {
      ascii += static_cast<char>(c);
    }
  }
  std::string out(disposition);
  out += "; filename=\"" + ascii + "\"";
  if (lossy) {
    // RFC 8187 attr-char: ALPHA / DIGIT / "!#$&+-.^_`|~"; anything else %XX.
    static constexpr std::string_view kAttr = "!#$&+-.^_`|~";
    static constexpr char kHex[] = "0123456789ABCDEF";
    out += "; filename*=UTF-8''";
    for (unsigned char c : file_name) {
      bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   kAttr.find(static_cast<char>(c)) != std::string_view::npos;
      if (plain) {
        out += static_cast<char>(c);
      } else {
        out += '%';
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
      }
    }
  }
  return out;
}

void setDownloadHeaders(beast::http::fields& head, std::string_view disposition,
                        std::string_view file_name) {
  head.set(beast::http::field::content_disposition, contentDisposition(disposition, file_name));
  head.set("X-Content-Type-Options", "nosniff");
}

Result<std::string> requestAuthority(const beast::http::request_header<>& head) {
  if (head.count(beast::http::field::host) > 1)
    return Error(Code::kInvalidArgument, "bad request: more than one Host header");
  std::string_view target = head.target();
  if (!target.empty() && target.front() != '/' && target != "*" &&
      head.method() != beast::http::verb::connect) {
    // Absolute form: scheme "://" authority [path-abempty] ["?" query].
    std::string_view rest;
    if (beast::iequals(target.substr(0, 7), "http://"))
      rest = target.substr(7);
    else if (beast::iequals(target.substr(0, 8), "https://"))
      rest = target.substr(8);
    else
      return Error(Code::kInvalidArgument, "bad request: a target that is no path nor http URL");
    std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
    if (authority.empty() || authority.find('@') != std::string_view::npos)
      return Error(Code::kInvalidArgument, "bad request: an absolute target without a host");
    return std::string(authority);
  }
  return std::string(head[beast::http::field::host]);
}

}  // namespace vessel::http
