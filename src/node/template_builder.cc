#include "node/template_builder.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <ctime>
#include <filesystem>

#include "agentclient/agent_client.h"
#include "base/log.h"
#include "base/new_id.h"
#include "base/scope_exit.h"
#include "base/sha256.h"
#include "base/sparse_copy.h"
#include "node/build_cache.h"
#include "node/build_steps.h"
#include "node/machine.h"
#include "templates/naming.h"

namespace vessel::node {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

std::string nowRfc3339() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  char buf[64];
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[80];
  std::snprintf(out, sizeof out, "%s.%03lldZ", buf, static_cast<long long>(ms));
  return out;
}

// The template's default env: the image's, then the spec's (later wins).
std::vector<std::string> templateEnv(const templates::BuildSpec& spec, const BuildInputs& in) {
  std::vector<std::string> env = in.image_env;
  env.insert(env.end(), spec.env.begin(), spec.env.end());
  return env;
}

// An image's User ("name", "uid", "name:group") as the agent looks users
// up (by name; groups come from the account).
std::string imageUser(const std::string& u) {
  std::string name = u.substr(0, u.find(':'));
  return name.empty() || name == "0" ? "root" : name;
}

// Vessel's processes run as `user` unless told: an image that has no such
// account gets one (in the guest, where the image's files are the guest's
// own business). Images without a shell keep what they have.
constexpr const char* kAddUser =
    "grep -q '^user:' /etc/passwd 2>/dev/null || { mkdir -p /home/user /etc && "
    "echo 'user:x:1000:1000:user:/home/user:/bin/sh' >> /etc/passwd && "
    "{ grep -q '^user:' /etc/group 2>/dev/null || echo 'user:x:1000:' >> /etc/group; } && "
    "chown 1000:1000 /home/user; }";

asio::awaitable<Status> prepareImage(agentclient::AgentClient& a, const templates::BuildSpec& spec,
                                     const BuildInputs& in, const Progress& progress) {
  progress("prepare image", 25);
  agentclient::ExecSpec e;
  e.argv = {"/bin/sh", "-c", kAddUser};
  e.user = "root";
  auto r = co_await a.run(e);
  if (!r.ok())
    Logger("templates")
        .warn("build {}: no `user` account added: {}", spec.name, r.error().message());
  // A Dockerfile's steps carry the ENV in effect where each stands: until
  // they have run, only the image's own is the default.
  std::vector<std::string> env = spec.steps.empty() ? templateEnv(spec, in) : in.image_env;
  if (!env.empty()) VESSEL_CO_TRY(co_await a.setDefaultEnv(env));
  co_return okStatus();
}

// Starts the image's Entrypoint and Cmd; its guest pid.
asio::awaitable<Result<uint32_t>> startImageCmd(agentclient::AgentClient& a, const BuildInputs& in,
                                                const Progress& progress) {
  if (in.image_start.empty())
    co_return Error(Code::kFailedPrecondition,
                    "image_cmd: the image has neither Entrypoint nor Cmd");
  std::string shown;
  for (const auto& w : in.image_start) shown += (shown.empty() ? "" : " ") + w;
  progress("start: " + shown, 70);
  agentclient::ExecSpec e;
  e.argv = in.image_start;
  e.user = imageUser(in.image_user);
  e.cwd = in.image_workdir;
  auto p = co_await a.exec(e);
  if (!p.ok())
    co_return std::move(p).error().withContext("start the image's command '" + shown + "'");
  uint32_t pid = (*p)->pid();
  (*p)->detach();  // keeps running inside the snapshot
  co_return pid;
}

// After an instruction ran: the disk as it stands, kept under its key. The
// guest's writes are synced, then its vCPUs paused while the disk is
// copied (QEMU drains and flushes its block layer when it stops them), and
// resumed. A disk that could not be kept costs only the cache; vCPUs that
// do not resume end the build.
asio::awaitable<Status> checkpointDisk(hypervisor::Vm& vm, agentclient::AgentClient& a,
                                       BuildCache& cache, std::string key, std::string disk) {
  agentclient::ExecSpec sync;
  sync.argv = {"sync"};
  sync.user = "root";
  auto r = co_await a.run(sync);
  if (!r.ok() || !r->exit.exited || r->exit.code != 0) {
    Logger("templates").warn("build cache: sync before keeping a step failed; not kept");
    co_return okStatus();
  }
  // Awaited into a name, never in a condition (CONTRIBUTING's g++ 12 rules).
  Status paused = co_await vm.pauseVcpus();
  if (!paused.ok()) {
    Logger("templates").warn("build cache: pause: {}", paused.error().message());
    co_return okStatus();
  }
  Status kept = cache.put(key, disk);
  if (!kept.ok()) Logger("templates").warn("{}", kept.error().message());
  auto resumed = co_await vm.resumeVcpus();
  if (!resumed.ok()) co_return std::move(resumed).error().withContext("resume after a build step");
  co_return okStatus();
}

// Long because a spec's parts run in one order that is the point (the
// image's preparation, files, commands, steps, env, start, readiness,
// sync), each a few lines.
asio::awaitable<Status> applySpec(agentclient::AgentClient& a, const templates::BuildSpec& spec,
                                  const BuildInputs& in, const Progress& progress,
                                  const BuildLog& log, Clock::time_point deadline,
                                  const StepRun& run, uint32_t& start_pid) {
  if (in.from_image) VESSEL_CO_TRY(co_await prepareImage(a, spec, in, progress));
  // A cached disk holds the files and commands as well as its steps.
  static const std::map<std::string, std::string> kNone;
  static const std::vector<std::string> kNoCommands;
  const auto& files = run.skip ? kNone : spec.files;
  const auto& commands = run.skip ? kNoCommands : spec.commands;
  for (const auto& [path, content] : files) {
    progress("write " + path, 30);
    auto dir = fs::path(path).parent_path().string();
    VESSEL_CO_TRY(co_await a.mkdir(dir, 0755, true));
    agentclient::WriteFileOptions wo;
    wo.path = path;
    auto w = co_await a.writeFile(wo);
    if (!w.ok()) co_return std::move(w).error().withContext("write " + path);
    VESSEL_CO_TRY(co_await (*w)->write(content));
    VESSEL_CO_TRY(co_await (*w)->finish());
  }
  int i = 0;
  for (const auto& cmd : commands) {
    progress("run: " + cmd, 35 + 30 * i++ / std::max<int>(1, static_cast<int>(commands.size())));
    agentclient::ExecSpec e;
    e.shell = cmd;
    e.user = "root";
    auto r = co_await a.run(e);
    if (!r.ok()) co_return std::move(r).error().withContext("build command '" + cmd + "'");
    if (!r->exit.exited || r->exit.code != 0)
      co_return Error(Code::kFailedPrecondition,
                      "build command '" + cmd + "' failed (exit " + std::to_string(r->exit.code) +
                          "): " + r->err.substr(r->err.size() > 2000 ? r->err.size() - 2000 : 0));
  }
  VESSEL_CO_TRY(co_await runBuildSteps(a, spec.steps, progress, log, deadline, run));
  if (in.from_image && !spec.steps.empty() && !templateEnv(spec, in).empty())
    VESSEL_CO_TRY(co_await a.setDefaultEnv(templateEnv(spec, in)));
  if (!in.from_image && !spec.env.empty()) VESSEL_CO_TRY(co_await a.setDefaultEnv(spec.env));
  if (spec.image_cmd) {
    auto pid = co_await startImageCmd(a, in, progress);
    if (!pid.ok()) co_return std::move(pid).error();
    start_pid = *pid;
  }
  if (!spec.start.empty() || !spec.start_argv.empty()) {
    std::string shown = spec.start;
    for (const auto& w : spec.start_argv) shown += (shown.empty() ? "" : " ") + w;
    progress("start: " + shown, 70);
    agentclient::ExecSpec e;
    e.shell = spec.start;
    e.argv = spec.start_argv;
    // A Dockerfile's CMD runs as its last USER in its last WORKDIR.
    e.user = spec.start_user.substr(0, spec.start_user.find(':'));
    e.cwd = spec.start_cwd;
    auto p = co_await a.exec(e);
    if (!p.ok()) co_return std::move(p).error().withContext("start '" + shown + "'");
    start_pid = (*p)->pid();
    (*p)->detach();  // keeps running inside the snapshot
  }
  if (!spec.ready.empty()) {
    progress("wait until ready: " + spec.ready, 75);
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (;;) {
      agentclient::ExecSpec e;
      e.shell = spec.ready;
      auto r = co_await a.run(e);
      if (r.ok() && r->exit.exited && r->exit.code == 0) break;
      if (Clock::now() > deadline)
        co_return Error(Code::kDeadlineExceeded,
                        "readiness check '" + spec.ready + "' never passed");
      t.expires_after(200ms);
      co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }
  agentclient::ExecSpec sync;
  sync.argv = {"sync"};
  sync.user = "root";
  auto r = co_await a.run(sync);
  if (!r.ok()) co_return std::move(r).error().withContext("sync");
  co_return okStatus();
}

}  // namespace

// Long because a build is one sequence (hash, cache, room, copy, boot,
// apply, snapshot, commit) whose steps share the staging directory and
// the deadline; each step is a call, and its order is the point.
asio::awaitable<Result<std::shared_ptr<const templates::Template>>> buildTemplate(
    hypervisor::Hypervisor& hv, templates::TemplateStore& store, const templates::BuildSpec& spec,
    const BuildInputs& in, Progress progress, BuildLog build_log) {
  if (!progress) progress = [](const std::string&, int) {};
  Logger log("templates");
  std::string ctx = "build template " + spec.name;
  progress("hash inputs", 0);
  auto base_sha = sha256File(in.base_image);
  if (!base_sha.ok()) co_return std::move(base_sha).error().withContext(ctx + ": base image");
  // "nic": templates carry a virtio-net device (older ones did not).
  // "tsc": their guest keeps time with the TSC and is tickless when idle
  // (qemu::baseCmdline); older snapshots tick at 250 Hz forever.
  std::string hash = sha256Hex(canonicalSpec(spec) + "\n" + *base_sha + "\n" + in.kernel_sha256 +
                               "\n" + in.qemu_version + "\nnic\ntsc");
  // --no-cache: built again, so another version (the newest of its name);
  // so is a spec whose version was deleted while sandboxes still use it.
  if (spec.no_cache || store.retired(spec.name, hash.substr(0, 16)))
    hash = sha256Hex(hash + "\nrebuilt " + newId("nc"));
  std::string version = hash.substr(0, 16);
  // The env goes into the manifest, which is read bounded.
  size_t env_bytes = 0;
  for (const auto& e : templateEnv(spec, in)) env_bytes += e.size();
  if (templateEnv(spec, in).size() > templates::kMaxManifestEnv ||
      env_bytes > templates::kMaxManifestEnvBytes)
    co_return Error(Code::kInvalidArgument,
                    ctx + ": env (with the image's) exceeds " +
                        std::to_string(templates::kMaxManifestEnv) + " entries or " +
                        std::to_string(templates::kMaxManifestEnvBytes / 1024) + " KiB");
  if (auto cached = store.open(spec.name, version); cached.ok() && !spec.no_cache) {
    progress("cached", 100);
    co_return cached;
  }
  // The worst case, refused now with a clear error rather than half-way:
  // the base image is copied, and the memory file is a shared mapping that
  // grows to the guest's RAM as the guest touches it - on a disk that cannot
  // hold a page, QEMU dies of SIGBUS mid-boot ("qmp: connection closed").
  std::error_code size_ec;
  uint64_t image_mib = fs::file_size(in.base_image, size_ec) >> 20;
  VESSEL_CO_TRY(store.checkSpace(ctx, spec.memory_mib + (size_ec ? 0 : image_mib) + 16));
  std::string staging = store.root() + "/.staging-" + spec.name + "-" + version;
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) co_return Error(Code::kInternal, ctx + ": create " + staging + ": " + ec.message());
  ScopeExit rm_staging([&] { fs::remove_all(staging, ec); });

  // The step cache: the disk of the longest prefix of the steps built before.
  std::optional<BuildCache> cache;
  std::vector<CachedInstruction> keys;
  StepRun run;
  std::string base_disk = in.base_image;
  if (!in.step_cache_dir.empty() && !spec.steps.empty()) {
    cache.emplace(in.step_cache_dir, in.step_cache_max_mib);
    keys = instructionKeys(
        stepsRootKey({templates::templateOwner(spec.name), *base_sha, in.kernel_sha256,
                      in.qemu_version, in.from_image, in.image_env, &spec}),
        spec.steps);
    for (size_t k = keys.size(); k-- > 0 && !spec.no_cache;)
      if (auto disk = cache->find(keys[k].key)) {
        run.skip = k + 1;
        base_disk = *disk;
        log.info("build {}: {} of {} instructions from the build cache", spec.name, run.skip,
                 keys.size());
        break;
      }
  }
  progress(run.skip ? "copy cached disk" : "copy base image", 5);
  if (auto copied = copySparse(base_disk, staging + "/" + templates::kRootfsFile, 0644);
      !copied.ok())
    co_return std::move(copied).error().withContext(ctx);

  hypervisor::MachineSpec m;
  m.id = "tb-" + version;
  m.vcpus = spec.vcpus;
  m.memory_mib = spec.memory_mib;
  m.accel = in.accel;
  m.kernel = in.kernel;
  m.cmdline = "init=/sbin/vessel-agent";
  m.disks = {{staging + "/" + templates::kRootfsFile, false, "raw"}};
  m.memory_file = staging + "/" + templates::kMemoryFile;
  m.memory_shared = true;   // guest RAM lands in the template's memory file
  m.network_device = true;  // unconnected while building; sandboxes get their slot's tap
  m.run_dir = in.work_dir + "/" + m.id;
  m.console_log = in.work_dir + "/" + m.id + ".console.log";
  ScopeExit rm_console([&] { fs::remove(m.console_log, ec); });
  auto deadline = Clock::now() + in.timeout;
  progress("boot base", 10);
  auto mach = co_await bootMachine(hv, m, deadline);
  if (!mach.ok()) co_return std::move(mach).error().withContext(ctx);
  auto agent = agentclient::AgentClient::create(std::move(mach->vm->agentChannel()),
                                                std::move(mach->leftover), m.id);
  if (cache)
    run.checkpoint = [&vm = *mach->vm, &a = *agent, &c = *cache, &keys,
                      disk = staging + "/" + templates::kRootfsFile](size_t k) {
      return checkpointDisk(vm, a, c, keys[k].key, disk);
    };
  uint32_t start_pid = 0;
  auto applied =
      co_await applySpec(*agent, spec, in, progress, build_log, deadline, run, start_pid);
  Status snap = applied;
  if (snap.ok()) {
    progress("snapshot", 85);
    snap = co_await mach->vm->pauseVcpus();
    if (snap.ok()) snap = co_await mach->vm->saveState(staging + "/" + templates::kStateFile, true);
  }
  agent->close();
  (void)co_await mach->vm->stop();
  if (!snap.ok()) co_return std::move(snap).error().withContext(ctx);

  progress("checksum", 90);
  templates::Manifest man;
  man.name = spec.name;
  man.version = version;
  man.spec_hash = hash;
  man.qemu_version = in.qemu_version;
  man.kernel_sha256 = in.kernel_sha256;
  man.cmdline = m.cmdline;
  man.vcpus = spec.vcpus;
  man.memory_mib = spec.memory_mib;
  man.disk_mib = spec.disk_mib;
  man.env = templateEnv(spec, in);
  man.start_pid = start_pid;
  man.network = true;
  man.created_at = nowRfc3339();
  for (const char* f : {templates::kRootfsFile, templates::kMemoryFile, templates::kStateFile}) {
    auto sha = sha256File(staging + "/" + f);
    if (!sha.ok()) co_return std::move(sha).error().withContext(ctx);
    man.files[f] = *sha;
  }
  auto t = store.install(staging, std::move(man));
  if (!t.ok()) co_return std::move(t).error().withContext(ctx);
  rm_staging.dismiss();
  progress("done", 100);
  log.info("built template {}", (*t)->id());
  co_return t;
}

void useConvertedImage(BuildInputs& in, const images::ConvertedImage& image) {
  in.base_image = image.rootfs;
  in.from_image = true;
  in.image_env = image.config.env;
  in.image_start = image.config.entrypoint;
  in.image_start.insert(in.image_start.end(), image.config.cmd.begin(), image.config.cmd.end());
  in.image_user = image.config.user;
  in.image_workdir = image.config.working_dir;
}

}  // namespace vessel::node
