#pragma once
// An OCI image reference as docker reads one: `ubuntu:22.04` is
// docker.io/library/ubuntu:22.04, `ghcr.io/org/app@sha256:…` names a
// registry and a digest. Parsed once at the edge (the build spec's
// `from_image`) into its parts and a canonical form, so two spellings of
// one image hash into the same template version. Bounded; any bytes give a
// reference or an Error.
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::templates {

struct ImageRef {
  std::string registry;    // "docker.io", "127.0.0.1:5000", "ghcr.io"
  std::string repository;  // "library/ubuntu", "org/app"
  std::string tag;         // "22.04"; "latest" when neither tag nor digest was given
  std::string digest;      // "sha256:<64 hex>" or ""

  // registry/repository[:tag][@digest]: what docker would print.
  std::string canonical() const;
  // registry/repository@digest when a digest is known, else canonical().
  std::string pinned(const std::string& manifest_digest) const;
  // The registry is this machine (localhost, 127.0.0.0/8, [::1]): it may
  // speak plain HTTP, as docker allows.
  bool loopback() const;
};

inline constexpr size_t kMaxImageRefLength = 512;

// Accepts an optional docker:// prefix. Refuses empty names, upper case in
// the repository, bad tags, digests other than sha256, and anything that
// could be read as a command-line option.
Result<ImageRef> parseImageRef(std::string_view s);

// A registry's username and password (docs/templates.md, "Private
// registries"): a tenant's stored credential, resolved by the API side and
// handed to the node that pulls.
struct RegistryAuth {
  std::string username, password;
  bool empty() const { return username.empty() && password.empty(); }
};

// The host a credential must name to be used for `ref`'s registry: its
// name without the port ("registry.lan:5000" -> "registry.lan").
std::string registryHost(const ImageRef& ref);

// A stored credential (header and value, as the egress gateway would
// inject them) read as a registry's basic credentials: `Authorization:
// Basic base64(username:password)`. kInvalidArgument naming what is wrong,
// never the value.
Result<RegistryAuth> registryAuthFromCredential(std::string_view header, std::string_view value);

}  // namespace vessel::templates
