#pragma once
// What Vessel reads of an OCI image: its manifest (or the index that
// points at one manifest per platform) and its config. Both come from a
// registry, i.e. from anyone: each is parsed once here, bounded, into a
// typed struct or an Error (fuzzed: tests/fuzz/image_config).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace vessel::images {

// Larger manifests and configs are refused (docker's own limit for a
// manifest is 4 MiB; a config with a long history stays well under).
inline constexpr size_t kMaxManifestBytes = 4 << 20;
inline constexpr size_t kMaxConfigBytes = 4 << 20;

struct Platform {
  std::string digest;  // of the platform's manifest
  std::string architecture, os, variant;
};

struct Descriptor {
  std::string media_type;
  std::string digest;  // sha256:<64 hex>
  uint64_t size = 0;
};

// An image manifest (OCI or Docker schema 2), or an index / manifest list.
struct ImageManifest {
  bool index = false;
  std::vector<Platform> platforms;  // index only
  Descriptor config;                // image manifest only
  std::vector<Descriptor> layers;   // image manifest only, in order
  // The config and every layer as the registry stores them (compressed).
  uint64_t totalBytes() const;
};

Result<ImageManifest> parseManifest(std::string_view body);

struct ImageConfig {
  std::string architecture, os, variant;
  std::vector<std::string> env;  // KEY=VALUE
  std::vector<std::string> entrypoint, cmd;
  std::string working_dir;
  std::string user;
  std::vector<std::string> exposed_ports;  // "8080/tcp", sorted
};

Result<ImageConfig> parseImageConfig(std::string_view body);

// The OCI name of this host's architecture ("amd64", "arm64", ...), from uname.
std::string hostArchitecture();

// The platform of an index that runs here (os linux, `arch`), or a
// kFailedPrecondition naming what the image offers.
Result<Platform> choosePlatform(const ImageManifest& index, const std::string& arch);

}  // namespace vessel::images
