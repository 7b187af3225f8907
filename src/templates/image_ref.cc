#include "templates/image_ref.h"

#include <cctype>

#include "base/base64.h"

namespace vessel::templates {

namespace {

bool lowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

Error bad(std::string_view s, const std::string& why) {
  std::string shown(s.substr(0, 80));
  for (char& c : shown)
    if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
  return Error(Code::kInvalidArgument, "image reference '" + shown + "': " + why);
}

// One path component: [a-z0-9]+ joined by '.', '_', '__' or '-'s
// (the distribution spec's grammar).
bool validComponent(std::string_view c) {
  if (c.empty() || !lowerAlnum(c.front()) || !lowerAlnum(c.back())) return false;
  for (size_t i = 0; i < c.size(); ++i) {
    char x = c[i];
    if (lowerAlnum(x)) continue;
    if (x == '.' || x == '-') {
      if (x == '.' && !lowerAlnum(c[i + 1])) return false;
      continue;
    }
    if (x == '_') {
      if (i + 1 < c.size() && c[i + 1] == '_') ++i;
      if (!lowerAlnum(c[i + 1])) return false;
      continue;
    }
    return false;
  }
  return true;
}

// A registry host[:port]: letters, digits, '.', '-', or a bracketed IPv6.
bool validRegistry(std::string_view r) {
  if (r.empty() || r.size() > 255) return false;
  std::string_view host = r, port;
  if (r.front() == '[') {
    auto close = r.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (char c : r.substr(1, close - 1))
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':') return false;
    host = r.substr(0, close + 1);
    if (close + 1 < r.size()) {
      if (r[close + 1] != ':') return false;
      port = r.substr(close + 2);
      if (port.empty()) return false;
    }
  } else {
    auto colon = r.find(':');
    if (colon != std::string_view::npos) {
      host = r.substr(0, colon);
      port = r.substr(colon + 1);
      if (port.empty()) return false;
    }
    if (host.empty() || host.front() == '-' || host.front() == '.') return false;
    for (char c : host)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') return false;
  }
  if (port.size() > 5) return false;
  for (char c : port)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

bool validTag(std::string_view t) {
  if (t.empty() || t.size() > 128) return false;
  char f = t.front();
  if (!std::isalnum(static_cast<unsigned char>(f)) && f != '_') return false;
  for (char c : t)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-')
      return false;
  return true;
}

bool validDigest(std::string_view d) {
  if (d.size() != 7 + 64 || d.substr(0, 7) != "sha256:") return false;
  for (char c : d.substr(7))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

std::string ImageRef::canonical() const {
  std::string s = registry + "/" + repository;
  if (!tag.empty()) s += ":" + tag;
  if (!digest.empty()) s += "@" + digest;
  return s;
}

std::string ImageRef::pinned(const std::string& manifest_digest) const {
  if (manifest_digest.empty()) return canonical();
  return registry + "/" + repository + "@" + manifest_digest;
}

bool ImageRef::loopback() const {
  std::string_view host = registry;
  if (host.substr(0, 5) == "[::1]") return host.size() == 5 || host[5] == ':';
  host = host.substr(0, host.find(':'));
  if (host == "localhost") return true;
  if (host.substr(0, 4) != "127.") return false;
  // 127.a.b.c with digits only: a name such as 127.example.com is not loopback.
  int dots = 0;
  for (char c : host) {
    if (c == '.')
      ++dots;
    else if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  }
  return dots == 3;
}

// Long because it is docker's whole reading of a reference: prefix,
// digest, tag, registry, the library/ default, each checked where it is cut.
Result<ImageRef> parseImageRef(std::string_view s) {
  if (s.size() > kMaxImageRefLength)
    return bad(s, "longer than " + std::to_string(kMaxImageRefLength) + " characters");
  std::string_view in = s;
  if (in.substr(0, 9) == "docker://") in.remove_prefix(9);
  if (in.empty()) return bad(s, "empty");
  ImageRef r;
  if (auto at = in.find('@'); at != std::string_view::npos) {
    r.digest = std::string(in.substr(at + 1));
    in = in.substr(0, at);
    if (!validDigest(r.digest)) return bad(s, "the digest must be sha256: and 64 lower-case hex");
  }
  // A tag follows the last ':' after the last '/' (a ':' before it is a port).
  auto slash = in.rfind('/');
  auto colon = in.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    r.tag = std::string(in.substr(colon + 1));
    in = in.substr(0, colon);
    if (!validTag(r.tag)) return bad(s, "bad tag '" + r.tag + "'");
  }
  if (in.empty()) return bad(s, "no repository");
  // The first component names a registry when it looks like a host, as
  // docker decides: it has a '.' or a ':' or is localhost.
  std::string_view first = in.substr(0, in.find('/'));
  std::string_view path = in;
  if (first.size() < in.size() &&
      (first.find_first_of(".:[") != std::string_view::npos || first == "localhost")) {
    if (!validRegistry(first)) return bad(s, "bad registry '" + std::string(first) + "'");
    r.registry = std::string(first);
    path = in.substr(first.size() + 1);
  } else {
    r.registry = "docker.io";
  }
  if (r.registry == "index.docker.io" || r.registry == "registry-1.docker.io")
    r.registry = "docker.io";
  if (path.empty()) return bad(s, "no repository");
  size_t components = 0;
  for (size_t start = 0;;) {
    size_t end = path.find('/', start);
    std::string_view c = path.substr(start, end == std::string_view::npos ? end : end - start);
    if (!validComponent(c))
      return bad(s, "bad repository component '" + std::string(c) +
                        "' (lower-case letters, digits and . _ - only)");
    if (++components > 16) return bad(s, "too many path components");
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  r.repository = std::string(path);
  if (r.registry == "docker.io" && components == 1) r.repository = "library/" + r.repository;
  if (r.tag.empty() && r.digest.empty()) r.tag = "latest";
  // The bound holds for what is stored, not only for what was typed: a
  // 512-byte short name grows by "docker.io/library/" and ":latest", and
  // the stored form must parse again to itself.
  if (r.canonical().size() > kMaxImageRefLength)
    return bad(s, "longer than " + std::to_string(kMaxImageRefLength) +
                      " characters once completed as " + r.registry + "/...");
  return r;
}

std::string registryHost(const ImageRef& ref) {
  std::string_view h = ref.registry;
  if (!h.empty() && h.front() == '[') return std::string(h.substr(0, h.find(']') + 1));
  return std::string(h.substr(0, h.find(':')));
}

Result<RegistryAuth> registryAuthFromCredential(std::string_view header, std::string_view value) {
  auto bad = [](const std::string& why) {
    return Error(Code::kInvalidArgument, "a registry credential " + why +
                                             " (vessel credential create NAME --host REGISTRY "
                                             "--header Authorization, the value 'Basic "
                                             "base64(username:password)' on stdin)");
  };
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  if (lower(header) != "authorization") return bad("is an Authorization header");
  if (value.size() < 6 || lower(value.substr(0, 6)) != "basic ") return bad("is Basic");
  auto decoded = base64Decode(value.substr(6), 4096);
  if (!decoded.ok()) return bad("holds base64 after 'Basic '");
  auto colon = decoded->find(':');
  if (colon == std::string::npos || colon == 0) return bad("holds username:password");
  RegistryAuth a{decoded->substr(0, colon), decoded->substr(colon + 1)};
  for (char c : *decoded)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return bad("holds no control characters");
  return a;
}

}  // namespace vessel::templates
