#include "images/converter.h"

#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>

#include "base/base64.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/new_id.h"
#include "base/scope_exit.h"
#include "base/sha256.h"
#include "images/rootfs.h"
#include "os/command.h"

namespace vessel::images {

namespace fs = std::filesystem;
using templates::ImageRef;

namespace {

constexpr const char* kRootfsName = "rootfs.ext4";
constexpr const char* kConfigName = "config.json";

// What every tool runs with: no host credentials (HOME is the scratch
// directory, so ~/.docker/config.json and containers' auth.json are not
// read), temporary files in the scratch directory, not /var/tmp.
std::vector<std::string> toolEnv(const std::string& work) {
  return {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + work,
          "TMPDIR=" + work, "XDG_RUNTIME_DIR=" + work, "LC_ALL=C"};
}

struct Registry {
  const ConverterOptions& o;
  const ImageRef& ref;
  std::string work;
  bool plain_http;

  std::vector<std::string> inspectArgv(const std::string& target, bool config) const {
    std::vector<std::string> a = {o.skopeo, "--policy", work + "/policy.json", "inspect", "--raw"};
    if (o.auth.empty()) {
      a.push_back("--no-creds");
    } else {
      a.push_back("--authfile");
      a.push_back(authFile(work));
    }
    a.push_back("--retry-times");
    a.push_back("1");
    if (config) a.push_back("--config");
    if (plain_http) a.push_back("--tls-verify=false");
    a.push_back("docker://" + target);
    return a;
  }

  static std::string authFile(const std::string& work) { return work + "/auth.json"; }

  // skopeo's own words for why, with what that means for the tenant.
  Error failed(Error e, const std::string& target) const {
    const std::string& m = e.context();
    if (m.find("unauthorized") != std::string::npos ||
        m.find("authentication required") != std::string::npos)
      return Error(Code::kPermissionDenied,
                   "registry " + ref.registry + " refused " +
                       (o.auth.empty() ? std::string("an anonymous pull")
                                       : "the credential's username and password") +
                       " for " + target + ": " + m);
    if (m.find("manifest unknown") != std::string::npos ||
        m.find("name unknown") != std::string::npos || m.find("not found") != std::string::npos)
      return Error(Code::kNotFound, "image " + target + " not found: " + m);
    if (e.code() == Code::kDeadlineExceeded)
      return Error(Code::kDeadlineExceeded, "registry " + ref.registry + " did not answer: " + m);
    return Error(Code::kUnavailable, "registry " + ref.registry + " cannot be reached: " + m);
  }

  // Raw bytes of a manifest or config, checked against `digest` when known.
  Result<std::string> inspect(const std::string& target, bool config,
                              const std::string& digest) const {
    auto r =
        os::runCommand(inspectArgv(target, config), {}, std::chrono::seconds(120), toolEnv(work));
    if (!r.ok()) return failed(std::move(r).error(), target);
    // runCommand keeps 1 MiB of stdout: what is cut fails the digest or the parse.
    if (!digest.empty() && "sha256:" + sha256Hex(r->out) != digest)
      return Error(Code::kProtocol, "registry " + ref.registry + " sent " +
                                        (config ? "a config" : "a manifest") +
                                        " whose digest is not " + digest);
    return std::move(r->out);
  }
};

std::string cacheDir(const ConverterOptions& o, const std::string& digest,
                     const std::string& agent_sha) {
  std::string dir = o.cache_dir + "/" + digest.substr(7) + "-" + agent_sha.substr(0, 16);
  // What a credential pulled is its tenant's alone.
  if (!o.auth.empty()) dir += "-" + sha256Hex("scope:" + o.cache_scope).substr(0, 16);
  return dir;
}

// skopeo's auth file (containers-auth.json(5)): the registry's basic
// credentials, base64 of "username:password".
Status writeAuthFile(const ConverterOptions& o, const ImageRef& ref, const std::string& work) {
  if (o.auth.empty()) return okStatus();
  boost::json::object auths;
  auths[ref.registry] =
      boost::json::object{{"auth", base64Encode(o.auth.username + ":" + o.auth.password)}};
  return writeFileAtomic(work + "/auth.json",
                         boost::json::serialize(boost::json::object{{"auths", std::move(auths)}}),
                         0600);
}

Result<ConvertedImage> fromCache(const std::string& dir, const std::string& digest) {
  auto text = readFile(dir + "/" + kConfigName, kMaxConfigBytes);
  if (!text.ok() || !fs::exists(dir + "/" + kRootfsName)) return Error(Code::kNotFound, dir);
  VESSEL_ASSIGN_OR_RETURN(ImageConfig c, parseImageConfig(*text));
  return ConvertedImage{dir + "/" + kRootfsName, digest, std::move(c), true};
}

// The agent this vesseld's guests speak to, as a file in `work`.
Result<std::string> agentFile(const ConverterOptions& o, const std::string& work) {
  if (!o.agent_binary.empty()) return o.agent_binary;
  if (o.agent_image.empty())
    return Error(Code::kFailedPrecondition, "no agent to install (no minimal image configured)");
  std::string out = work + "/vessel-agent";
  // debugfs reads its request as words: paths with spaces cannot be named.
  if (out.find_first_of(" \t\n\"") != std::string::npos)
    return Error(Code::kInvalidArgument, "cache dir " + o.cache_dir + " holds a space");
  VESSEL_TRY_CTX(os::runCommand({o.debugfs, "-R", "dump /sbin/vessel-agent " + out, o.agent_image},
                                {}, std::chrono::seconds(60), toolEnv(work)),
                 "read the agent out of " + o.agent_image);
  std::error_code ec;
  if (fs::file_size(out, ec) == 0 || ec)
    return Error(Code::kFailedPrecondition, o.agent_image + " holds no /sbin/vessel-agent");
  return out;
}

// The image's platform manifest: the one named, or this host's of an index.
struct Resolved {
  std::string digest;
  ImageManifest manifest;
};

Result<Resolved> resolve(const Registry& reg, const std::string& arch) {
  const ImageRef& ref = reg.ref;
  VESSEL_ASSIGN_OR_RETURN(std::string raw, reg.inspect(ref.canonical(), false, ref.digest));
  Resolved r{"sha256:" + sha256Hex(raw), {}};
  VESSEL_ASSIGN_OR_RETURN(r.manifest, parseManifest(raw));
  if (!r.manifest.index) return r;
  VESSEL_ASSIGN_OR_RETURN(Platform p, choosePlatform(r.manifest, arch));
  VESSEL_ASSIGN_OR_RETURN(raw, reg.inspect(ref.pinned(p.digest), false, p.digest));
  r.digest = p.digest;
  VESSEL_ASSIGN_OR_RETURN(r.manifest, parseManifest(raw));
  if (r.manifest.index) return Error(Code::kProtocol, "an index names another index");
  return r;
}

}  // namespace

bool plainHttpAllowed(const ConverterOptions& o, const ImageRef& ref) {
  if (ref.loopback()) return true;
  for (const auto& r : o.insecure_registries)
    if (r == ref.registry) return true;
  return false;
}

// Long because a conversion is one sequence (agent, resolve, cache,
// config, size, pull, unpack, agent, measure, mkfs, commit) sharing one
// scratch directory; each step is a call and their order is the point.
Result<ConvertedImage> convertImage(const ConverterOptions& o, const ImageRef& ref,
                                    const ConvertProgress& progress_in) {
  ConvertProgress progress = progress_in ? progress_in : [](const std::string&, int) {};
  const std::string ctx = "image " + ref.canonical();
  const std::string arch = o.architecture.empty() ? hostArchitecture() : o.architecture;
  std::error_code ec;
  fs::create_directories(o.cache_dir, ec);
  // Its own: two builds may convert the same image at once.
  std::string work = o.cache_dir + "/.work-" + newId("w");
  fs::remove_all(work, ec);
  fs::create_directories(work, ec);
  if (ec) return Error(Code::kInternal, ctx + ": create " + work + ": " + ec.message());
  ScopeExit rm_work([&] { fs::remove_all(work, ec); });
  // Signatures are not checked (no policy asks for them); digests are,
  // by skopeo for every blob it copies and here for what it inspects.
  VESSEL_TRY(
      writeFileAtomic(work + "/policy.json", R"({"default":[{"type":"insecureAcceptAnything"}]})"));
  VESSEL_TRY_CTX(writeAuthFile(o, ref, work), ctx);

  VESSEL_ASSIGN_OR_RETURN(std::string agent, agentFile(o, work));
  VESSEL_ASSIGN_OR_RETURN(std::string agent_sha, sha256File(agent));
  // A digest names its image for good: no need to ask the registry.
  if (!ref.digest.empty())
    if (auto hit = fromCache(cacheDir(o, ref.digest, agent_sha), ref.digest); hit.ok()) {
      progress("image cached", 100);
      return hit;
    }
  Registry reg{o, ref, work, plainHttpAllowed(o, ref)};
  progress("resolve " + ref.canonical(), 1);
  auto resolved = resolve(reg, arch);
  if (!resolved.ok()) return std::move(resolved).error().withContext(ctx);
  const std::string& digest = resolved->digest;
  const std::string dir = cacheDir(o, digest, agent_sha);
  if (auto hit = fromCache(dir, digest); hit.ok()) {
    progress("image cached", 100);
    return hit;
  }
  const ImageManifest& m = resolved->manifest;
  std::string pinned = ref.pinned(digest);
  auto config_raw = reg.inspect(pinned, true, m.config.digest);
  if (!config_raw.ok()) return std::move(config_raw).error().withContext(ctx + ": config");
  auto config = parseImageConfig(*config_raw);
  if (!config.ok()) return std::move(config).error().withContext(ctx);
  if (config->os != "linux" || config->architecture != arch)
    return Error(Code::kFailedPrecondition,
                 ctx + " is for " + config->os + "/" + config->architecture + ", not linux/" +
                     arch + ": Vessel runs images of this host's architecture only");
  const uint64_t max_bytes = o.max_image_mib << 20;
  if (m.totalBytes() > max_bytes)
    return Error(Code::kResourceExhausted,
                 ctx + " is " + std::to_string(m.totalBytes() >> 20) + " MiB, more than the " +
                     std::to_string(o.max_image_mib) + " MiB this node takes (--max-image-mib)");

  progress("pull " + pinned, 5);
  std::vector<std::string> copy = {
      o.skopeo, "--policy", work + "/policy.json", "copy", "--quiet", "--retry-times", "1"};
  if (o.auth.empty()) {
    copy.push_back("--src-no-creds");
  } else {
    copy.push_back("--src-authfile");
    copy.push_back(Registry::authFile(work));
  }
  if (reg.plain_http) copy.push_back("--src-tls-verify=false");
  copy.push_back("docker://" + pinned);
  copy.push_back("oci:" + work + "/layout:image");
  if (auto r = os::runCommand(copy, {}, o.pull_timeout, toolEnv(work)); !r.ok()) {
    const std::string& msg = r.error().context();
    // skopeo: "Digest did not match, expected sha256:…, got sha256:…".
    if (msg.find("igest did not match") != std::string::npos)
      return Error(Code::kProtocol, ctx + ": a blob does not match its digest: " + msg);
    return reg.failed(std::move(r).error(), pinned).withContext(ctx + ": pull");
  }
  progress("unpack " + std::to_string(m.layers.size()) + " layers", 40);
  VESSEL_TRY_CTX(
      os::runCommand({o.umoci, "unpack", "--image", work + "/layout:image", work + "/bundle"}, {},
                     std::chrono::minutes(10), toolEnv(work)),
      ctx + ": unpack");
  const std::string rootfs = work + "/bundle/rootfs";
  VESSEL_TRY_CTX(installAgent(rootfs, agent), ctx);
  VESSEL_ASSIGN_OR_RETURN(TreeSize size, measureTree(rootfs));
  if (size.bytes > max_bytes)
    return Error(Code::kResourceExhausted,
                 ctx + " unpacks to " + std::to_string(size.bytes >> 20) + " MiB, more than the " +
                     std::to_string(o.max_image_mib) + " MiB this node takes (--max-image-mib)");
  progress("make ext4 image", 70);
  fs::create_directories(work + "/out", ec);
  VESSEL_TRY_CTX(makeExt4(o.mkfs, rootfs, size, work + "/out/" + kRootfsName), ctx);
  VESSEL_TRY(writeFileAtomic(work + "/out/" + kConfigName, *config_raw));
  // The files go into the cache in one rename: a reader sees all or none.
  fs::rename(work + "/out", dir, ec);
  if (ec && !fs::exists(dir + "/" + kRootfsName))
    return Error(Code::kInternal, ctx + ": install " + dir + ": " + ec.message());
  Logger("images").info("converted {} ({}, {} layers) into {}", ref.canonical(), digest,
                        m.layers.size(), dir);
  progress("image converted", 100);
  return ConvertedImage{dir + "/" + kRootfsName, digest, std::move(*config), false};
}

}  // namespace vessel::images
