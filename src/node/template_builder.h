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
#include "images/converter.h"
#include "templates/build_log.h"
#include "templates/build_spec.h"
#include "templates/store.h"

namespace vessel::node {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct BuildInputs {
  std::string base_image;  // rootfs the `base` names, resolved by the caller
  std::string kernel;
  std::string kernel_sha256;
  std::string qemu_version;
  hypervisor::Accel accel = hypervisor::Accel::kTcg;
  std::string work_dir;  // scratch space for the build VM
  std::chrono::seconds timeout{300};
  // A from_image build (the caller converted the image, images/converter.h):
  // its config's defaults. Env comes before the spec's env and applies to
  // the build's commands too; `image_start` (Entrypoint then Cmd) is the
  // start command when the spec sets image_cmd, run as image_user in
  // image_workdir.
  bool from_image = false;
  std::vector<std::string> image_env;
  std::vector<std::string> image_start;
  std::string image_user, image_workdir;
  // The Dockerfile step cache (node/build_cache.h): each instruction's
  // disk is kept there, and a build with steps starts from the longest
  // prefix it finds. "": no step cache.
  std::string step_cache_dir;
  uint64_t step_cache_max_mib = 8192;
};

// A from_image build's inputs from its converted image: its root
// filesystem as the base, and its config's defaults (Env, Entrypoint then
// Cmd, User, WorkingDir). The one place both builders (the node's worker,
// `vessel template build --local`) take them from.
void useConvertedImage(BuildInputs& in, const images::ConvertedImage& image);

// Progress: a step description and a percentage (0-100).
using Progress = std::function<void(const std::string& step, int percent)>;

using BuildLogEntry = templates::BuildLogEntry;  // templates/build_log.h
using BuildLog = std::function<void(const BuildLogEntry&)>;

asio::awaitable<Result<std::shared_ptr<const templates::Template>>> buildTemplate(
    hypervisor::Hypervisor& hv, templates::TemplateStore& store, const templates::BuildSpec& spec,
    const BuildInputs& in, Progress progress = nullptr, BuildLog log = nullptr);

}  // namespace vessel::node
