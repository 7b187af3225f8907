#pragma once
// A template's manifest: what a snapshot was made from and with, and the
// sha256 of every file in the template directory. Restoring a snapshot into
// a different QEMU, kernel or machine shape gives a broken guest, so each of
// these is checked before a restore (docs/snapshot-format.md).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"

namespace vessel::templates {

constexpr int kManifestFormat = 1;
// Names of the files in a template directory.
constexpr const char* kRootfsFile = "rootfs.ext4";
constexpr const char* kMemoryFile = "memory";
constexpr const char* kStateFile = "state";
constexpr const char* kManifestFile = "manifest.json";

struct Manifest {
  int format = kManifestFormat;
  std::string name;
  std::string version;    // the build spec's hash prefix: same spec, same version
  std::string spec_hash;  // sha256 of the canonical build spec and its inputs
  std::string qemu_version;
  std::string kernel_sha256;
  std::string cmdline;
  unsigned vcpus = 1;
  uint64_t memory_mib = 256;
  // Built with a virtio-net device (its VMs must have one too). Absent in
  // older manifests: false.
  bool network = false;
  // A sandbox's root disk unless its create asks for another size (MiB);
  // 0 (older manifests): kDefaultDiskMib, or the image's size if larger.
  uint64_t disk_mib = 0;
  // KEY=VALUE defaults of every process in its sandboxes (the build
  // spec's env, after a from_image build's image Env), under the create's
  // own env. The agent's defaults are set whole at each create, so they
  // live here rather than only in the snapshot. Absent: none.
  std::vector<std::string> env;
  // The guest pid of the start command, which runs on, detached, inside the
  // snapshot (its output is kept by the agent until a client attaches:
  // vesseld's start-output log does). 0 (absent): none.
  uint32_t start_pid = 0;
  std::string created_at;                    // RFC 3339, UTC
  std::map<std::string, std::string> files;  // file name -> sha256 hex
};

// The disk size sandboxes get by default: large enough for real work
// (packages, uploads, builds). The images themselves stay small: a
// sandbox's disk is a sparse overlay that grows only as it is written.
constexpr uint64_t kDefaultDiskMib = 2048;
// A manifest's env: at most this many entries and bytes (the manifest is
// read bounded, 64 KiB).
constexpr size_t kMaxManifestEnv = 256;
constexpr size_t kMaxManifestEnvBytes = 32 * 1024;

std::string toJson(const Manifest& m);
// Bounded and strict: unknown format, missing or mistyped fields, file
// names with a '/' or more than 16 files are Errors. Fuzzed.
Result<Manifest> parseManifest(std::string_view json);

}  // namespace vessel::templates
