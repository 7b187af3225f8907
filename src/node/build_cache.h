#pragma once
// The build cache of Dockerfile steps, as BuildKit keeps one: after each
// instruction that ran, the build VM's disk as it stands, under a key
// chained from its parent's key, the instruction and its inputs (a COPY's
// files' contents travel in its steps, so they are hashed too). A rebuild
// boots the disk of the longest prefix of instructions it finds and runs
// only the rest: changing the last line reruns the last line.
//
// The disks are raw images the build's guest wrote. They are copied as
// bytes and only ever booted as raw disks of later build VMs; the host
// parses nothing in them. Keys are chained from the tenant's prefix, so
// one tenant's cached steps never serve another's build.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "node/build_steps.h"
#include "templates/build_spec.h"

namespace vessel::node {

struct CachedInstruction {
  InstructionRange steps;
  std::string key;  // hex sha256
};

// Each instruction's key: key(i) = H(key(i-1), instruction i's steps),
// key(-1) = root. A step's Dockerfile line is not hashed (a comment added
// above it keeps its cache), everything it does is.
std::vector<CachedInstruction> instructionKeys(const std::string& root,
                                               const std::vector<templates::BuildStep>& steps);

// What the disk before the first instruction depends on: whose build it
// is (the stored name's tenant prefix; "" for built-in templates), the
// base image's checksum, the kernel and QEMU, and what a build does before
// its steps (the image's env, the spec's files and commands).
struct StepsRoot {
  std::string owner;
  std::string base_sha256, kernel_sha256, qemu_version;
  bool from_image = false;
  std::vector<std::string> image_env;
  const templates::BuildSpec* spec = nullptr;
};
std::string stepsRootKey(const StepsRoot& r);

// A directory of cached disks, `<key>.img`, bounded in bytes allocated: the
// least recently used go first.
class BuildCache {
 public:
  BuildCache(std::string dir, uint64_t max_mib) : dir_(std::move(dir)), max_mib_(max_mib) {}

  // The cached disk's path, marked used now; nullopt when there is none.
  std::optional<std::string> find(const std::string& key);
  // Copies `disk` in under `key` (atomically: a reader sees all or
  // nothing), then evicts beyond the bound. A disk larger than the whole
  // bound is not kept.
  Status put(const std::string& key, const std::string& disk);
  // Bytes the cache's disks take on the host.
  uint64_t allocatedBytes() const;
  const std::string& dir() const { return dir_; }

 private:
  void evict();

  std::string dir_;
  uint64_t max_mib_;
};

}  // namespace vessel::node
