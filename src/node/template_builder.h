#pragma once
// Builds a template: boots its base image once, applies the build spec
// (files, commands, env, a process started before the snapshot so it is
// already warm, a readiness check), and snapshots the running guest into an
// immutable template directory. Builds are cached by the spec's hash: the
// same spec on the same inputs is the same version and is not rebuilt.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hypervisor/hypervisor.h"
#include "templates/store.h"

namespace vessel::node {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct BuildSpec {
  std::string name;
  std::string base = "minimal";              // a base image name or another template
  std::map<std::string, std::string> files;  // guest path -> content
  std::vector<std::string> commands;         // run as root with /bin/sh -c, in order
  std::vector<std::string> env;              // KEY=VALUE defaults for every process
  std::string start;                         // started as `user`, left running
  std::string ready;                         // polled until it exits 0
  unsigned vcpus = 1;
  uint64_t memory_mib = 256;
  // Its sandboxes' default disk (MiB); 0: templates::kDefaultDiskMib.
  uint64_t disk_mib = 0;
};

// Parses a JSON build spec (`vessel template build -f spec.json`). Bounded.
Result<BuildSpec> parseBuildSpec(std::string_view json);
// The canonical text hashed into the version.
std::string canonicalSpec(const BuildSpec& s);

struct BuildInputs {
  std::string base_image;  // rootfs the `base` names, resolved by the caller
  std::string kernel;
  std::string kernel_sha256;
  std::string qemu_version;
  hypervisor::Accel accel = hypervisor::Accel::kTcg;
  std::string work_dir;  // scratch space for the build VM
  std::chrono::seconds timeout{300};
};

// Progress: a step description and a percentage (0-100).
using Progress = std::function<void(const std::string& step, int percent)>;

asio::awaitable<Result<std::shared_ptr<const templates::Template>>> buildTemplate(
    hypervisor::Hypervisor& hv, templates::TemplateStore& store, const BuildSpec& spec,
    const BuildInputs& in, Progress progress = nullptr);

}  // namespace vessel::node
