#include "images/image_config.h"

#include <sys/utsname.h>

#include <algorithm>
#include <boost/json.hpp>

#include "base/env_var.h"

namespace vessel::images {

namespace json = boost::json;

namespace {

constexpr size_t kMaxEntries = 4096;     // layers, platforms, env entries, argv words
constexpr size_t kMaxString = 64 << 10;  // one env entry, one argv word

Error bad(const std::string& what, const std::string& why) {
  return Error(Code::kInvalidArgument, what + ": " + why);
}

bool validDigest(std::string_view d) {
  if (d.size() != 7 + 64 || d.substr(0, 7) != "sha256:") return false;
  return std::all_of(d.begin() + 7, d.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

Result<json::object> parseObject(std::string_view body, size_t max, const std::string& what) {
  if (body.size() > max) return bad(what, "larger than " + std::to_string(max >> 20) + " MiB");
  boost::system::error_code ec;
  json::parse_options po;
  po.max_depth = 32;
  json::value v = json::parse(body, ec, {}, po);
  if (ec || !v.is_object()) return bad(what, "not a JSON object");
  return std::move(v.as_object());
}

// An optional string field; absent and null are "".
Result<std::string> optString(const json::object& o, const char* k, const std::string& what) {
  const auto* x = o.if_contains(k);
  if (!x || x->is_null()) return std::string();
  if (!x->is_string()) return bad(what, std::string(k) + " must be a string");
  if (x->get_string().size() > kMaxString) return bad(what, std::string(k) + " too long");
  return std::string(x->get_string());
}

Result<std::vector<std::string>> optStrings(const json::object& o, const char* k,
                                            const std::string& what) {
  std::vector<std::string> out;
  const auto* x = o.if_contains(k);
  if (!x || x->is_null()) return out;
  if (!x->is_array()) return bad(what, std::string(k) + " must be a list of strings");
  if (x->get_array().size() > kMaxEntries)
    return bad(what, std::string(k) + " has too many entries");
  for (const auto& e : x->get_array()) {
    if (!e.is_string() || e.get_string().size() > kMaxString)
      return bad(what, std::string(k) + " must be a list of strings");
    out.emplace_back(e.get_string());
  }
  return out;
}

Result<Descriptor> descriptor(const json::value& v, const std::string& what) {
  if (!v.is_object()) return bad(what, "a descriptor is not an object");
  const auto& o = v.as_object();
  Descriptor d;
  VESSEL_ASSIGN_OR_RETURN(d.media_type, optString(o, "mediaType", what));
  VESSEL_ASSIGN_OR_RETURN(d.digest, optString(o, "digest", what));
  if (!validDigest(d.digest)) return bad(what, "a digest is not sha256:<64 hex>");
  const auto* size = o.if_contains("size");
  if (!size || !(size->is_int64() || size->is_uint64()) ||
      (size->is_int64() && size->get_int64() < 0))
    return bad(what, "a descriptor has no size");
  d.size = size->is_int64() ? static_cast<uint64_t>(size->get_int64()) : size->get_uint64();
  if (d.size > (uint64_t{1} << 44)) return bad(what, "a descriptor's size is absurd");
  return d;
}

}  // namespace

uint64_t ImageManifest::totalBytes() const {
  uint64_t n = config.size;
  for (const auto& l : layers) n += l.size;
  return n;
}

// Long because both shapes (an index and an image manifest, in their OCI
// and Docker spellings) are read in one place, every field checked.
Result<ImageManifest> parseManifest(std::string_view body) {
  const std::string what = "image manifest";
  VESSEL_ASSIGN_OR_RETURN(json::object o, parseObject(body, kMaxManifestBytes, what));
  const auto* version = o.if_contains("schemaVersion");
  if (!version || !version->is_int64() || version->get_int64() != 2)
    return bad(what, "schemaVersion is not 2 (Docker schema 1 images are not supported)");
  VESSEL_ASSIGN_OR_RETURN(std::string media_type, optString(o, "mediaType", what));
  ImageManifest m;
  if (const auto* ms = o.if_contains("manifests")) {
    m.index = true;
    if (!ms->is_array()) return bad(what, "manifests must be a list");
    if (ms->get_array().size() > kMaxEntries) return bad(what, "too many manifests");
    for (const auto& e : ms->get_array()) {
      VESSEL_ASSIGN_OR_RETURN(Descriptor d, descriptor(e, what));
      Platform p;
      p.digest = d.digest;
      if (const auto* pl = e.as_object().if_contains("platform"); pl && pl->is_object()) {
        VESSEL_ASSIGN_OR_RETURN(p.architecture, optString(pl->as_object(), "architecture", what));
        VESSEL_ASSIGN_OR_RETURN(p.os, optString(pl->as_object(), "os", what));
        VESSEL_ASSIGN_OR_RETURN(p.variant, optString(pl->as_object(), "variant", what));
      }
      m.platforms.push_back(std::move(p));
    }
    return m;
  }
  const auto* cfg = o.if_contains("config");
  if (!cfg) return bad(what, "neither manifests nor config");
  VESSEL_ASSIGN_OR_RETURN(m.config, descriptor(*cfg, what));
  const auto* layers = o.if_contains("layers");
  if (!layers || !layers->is_array()) return bad(what, "layers must be a list");
  if (layers->get_array().size() > kMaxEntries) return bad(what, "too many layers");
  for (const auto& l : layers->get_array()) {
    VESSEL_ASSIGN_OR_RETURN(Descriptor d, descriptor(l, what));
    m.layers.push_back(std::move(d));
  }
  return m;
}

// Long because it reads every field Vessel keeps of an image's config,
// each bounded and typed where it is read.
Result<ImageConfig> parseImageConfig(std::string_view body) {
  const std::string what = "image config";
  VESSEL_ASSIGN_OR_RETURN(json::object o, parseObject(body, kMaxConfigBytes, what));
  ImageConfig c;
  VESSEL_ASSIGN_OR_RETURN(c.architecture, optString(o, "architecture", what));
  VESSEL_ASSIGN_OR_RETURN(c.os, optString(o, "os", what));
  VESSEL_ASSIGN_OR_RETURN(c.variant, optString(o, "variant", what));
  if (c.architecture.empty()) return bad(what, "no architecture");
  const auto* config = o.if_contains("config");
  if (!config || config->is_null()) return c;  // an image with no defaults at all
  if (!config->is_object()) return bad(what, "config must be an object");
  const auto& k = config->as_object();
  VESSEL_ASSIGN_OR_RETURN(c.env, optStrings(k, "Env", what));
  for (const auto& e : c.env)
    if (!envEntry(e)) return bad(what, "an Env entry is not KEY=VALUE");
  VESSEL_ASSIGN_OR_RETURN(c.entrypoint, optStrings(k, "Entrypoint", what));
  VESSEL_ASSIGN_OR_RETURN(c.cmd, optStrings(k, "Cmd", what));
  VESSEL_ASSIGN_OR_RETURN(c.working_dir, optString(k, "WorkingDir", what));
  if (!c.working_dir.empty() && c.working_dir.front() != '/')
    return bad(what, "WorkingDir is not an absolute path");
  VESSEL_ASSIGN_OR_RETURN(c.user, optString(k, "User", what));
  if (c.user.size() > 64) return bad(what, "User too long");
  if (const auto* ports = k.if_contains("ExposedPorts"); ports && !ports->is_null()) {
    if (!ports->is_object()) return bad(what, "ExposedPorts must be an object");
    if (ports->as_object().size() > kMaxEntries) return bad(what, "too many ExposedPorts");
    for (const auto& kv : ports->as_object()) {
      std::string p(kv.key());
      auto slash = p.find('/');
      std::string num = p.substr(0, slash);
      std::string proto = slash == std::string::npos ? "tcp" : p.substr(slash + 1);
      if (num.empty() || num.size() > 5 ||
          !std::all_of(num.begin(), num.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) ||
          std::stoul(num) < 1 || std::stoul(num) > 65535 ||
          (proto != "tcp" && proto != "udp" && proto != "sctp"))
        return bad(what, "an ExposedPorts key is not PORT[/tcp|udp|sctp]");
      c.exposed_ports.push_back(num + "/" + proto);
    }
    std::sort(c.exposed_ports.begin(), c.exposed_ports.end());
  }
  return c;
}

std::string hostArchitecture() {
  utsname u{};
  if (::uname(&u) != 0) return "amd64";
  std::string m = u.machine;
  if (m == "x86_64") return "amd64";
  if (m == "aarch64") return "arm64";
  if (m == "i686" || m == "i386") return "386";
  if (m == "armv7l") return "arm";
  return m;  // ppc64le, s390x, riscv64 are spelled alike
}

Result<Platform> choosePlatform(const ImageManifest& index, const std::string& arch) {
  std::string offered;
  for (const auto& p : index.platforms) {
    if (p.os == "linux" && p.architecture == arch) return p;
    if (p.architecture.empty() || p.architecture == "unknown") continue;  // attestations
    if (!offered.empty()) offered += ", ";
    offered += p.os + "/" + p.architecture + (p.variant.empty() ? "" : "/" + p.variant);
  }
  return Error(Code::kFailedPrecondition,
               "the image has no linux/" + arch +
                   " variant (it offers: " + (offered.empty() ? "none" : offered) +
                   "); Vessel runs images of this host's "
                   "architecture only");
}

}  // namespace vessel::images
