#pragma once
// Turns an OCI image into a Vessel base root filesystem: an ext4 image
// with the image's files and the agent as /sbin/vessel-agent (PID 1, as
// guest/templates/minimal/build.sh makes the minimal one). Debian's
// well-kept tools do the work, each a child process with an argv (never a
// shell): skopeo reads the registry and checks every blob against its
// digest, umoci unpacks the layers in order (whiteouts, opaque
// directories), mkfs.ext4 -d writes the sparse image. Converted bases are
// cached by manifest digest: a second build from the same image neither
// pulls nor converts. docs/templates.md, "From an OCI image", says what is
// kept of the image and where the host trusts these tools.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "images/image_config.h"
#include "templates/image_ref.h"

namespace vessel::images {

struct ConverterOptions {
  // Converted bases: <cache_dir>/<manifest digest hex>-<agent hash>/.
  std::string cache_dir;
  // The agent installed in every base: `agent_binary` if set, else
  // /sbin/vessel-agent read out of `agent_image` (the minimal template's
  // ext4 image, whose agent matches this vesseld) with debugfs.
  std::string agent_binary;
  std::string agent_image;
  // Refused above this: the registry's (compressed) bytes before the pull,
  // the unpacked files after it (--max-image-mib).
  uint64_t max_image_mib = 4096;
  // HOST:PORT registries that may speak plain HTTP besides loopback ones
  // (--insecure-registry).
  std::vector<std::string> insecure_registries;
  std::string architecture;  // "" = this host's (hostArchitecture())
  std::chrono::seconds pull_timeout{900};
  // Pulls with a credential: its bases are cached under `cache_scope` (the
  // tenant whose credential it is), never served to a pull without it or
  // with another tenant's. Without `auth`, pulls are anonymous and shared.
  // Handed to skopeo in an auth file in the scratch directory (mode 0600),
  // never on a command line.
  templates::RegistryAuth auth;
  std::string cache_scope;
  std::string skopeo = "skopeo", umoci = "umoci", mkfs = "mkfs.ext4", debugfs = "debugfs";
};

struct ConvertedImage {
  std::string rootfs;  // the ext4 image, in the cache (read it, never write it)
  std::string digest;  // the platform manifest's digest, sha256:…
  ImageConfig config;
  bool cached = false;  // found in the cache: nothing was pulled
};

using ConvertProgress = std::function<void(const std::string& step, int percent)>;

// Blocking (minutes for a large image): run it off any io thread.
Result<ConvertedImage> convertImage(const ConverterOptions& o, const templates::ImageRef& ref,
                                    const ConvertProgress& progress = nullptr);

// Whether `ref`'s registry may be spoken to over plain HTTP.
bool plainHttpAllowed(const ConverterOptions& o, const templates::ImageRef& ref);

}  // namespace vessel::images
