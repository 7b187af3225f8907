// Forks: a running sandbox copied into new sandboxes, or into a template.
#include <fcntl.h>

#include <algorithm>
#include <filesystem>

#include "base/log.h"
#include "base/offload.h"
#include "base/scope_exit.h"
#include "base/sha256.h"
#include "node/runtime.h"
#include "node/runtime_internal.h"

namespace vessel::node {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using internal::validId;

asio::awaitable<Result<std::vector<std::shared_ptr<Sandbox>>>> Runtime::fork(Sandbox& sb,
                                                                             int count) {
  if (count < 1 || count > 64)
    co_return Error(Code::kInvalidArgument, "fork sandbox " + sb.id_ + ": count 1 to 64");
  std::vector<std::string> ids;
  for (int i = 0; i < count; ++i) ids.push_back(newId("sb"));
  co_return co_await forkAs(sb, std::move(ids));
}

asio::awaitable<Result<std::vector<std::shared_ptr<Sandbox>>>> Runtime::forkAs(
    Sandbox& sb, std::vector<std::string> ids) {
  std::string ctx = "fork sandbox " + sb.id_;
  int count = static_cast<int>(ids.size());
  if (count < 1 || count > 64) co_return Error(Code::kInvalidArgument, ctx + ": count 1 to 64");
  if (sb.state_ != Sandbox::State::kRunning)
    co_return Error(Code::kFailedPrecondition, ctx + ": sandbox is not running");
  auto at = sb.template_id_.find('@');
  auto t = store_.open(sb.template_id_.substr(0, at), sb.template_id_.substr(at + 1));
  if (!t.ok()) co_return std::move(t).error().withContext(ctx);
  for (const auto& id : ids) making_[id] = nullptr;
  ScopeExit unmark([this, ids] {
    for (const auto& id : ids) {
      making_.erase(id);
      aborted_.erase(id);
    }
  });
  // A brief pause: state and disk are captured together, then the
  // original carries on.
  std::string snap = sb.dir_ + "/fork-" + newId("s");
  std::error_code ec;
  fs::create_directories(snap, ec);
  ScopeExit rm_snap([&] { fs::remove_all(snap, ec); });
  VESSEL_CO_TRY(co_await sb.vm_->pauseVcpus());
  auto saved = co_await sb.vm_->saveState(snap + "/state", false);
  if (saved.ok()) saved = co_await hv_.copyDisk(sb.vm_dir_ + "/disk.qcow2", snap + "/disk.qcow2");
  auto resumed = co_await sb.vm_->resumeVcpus();
  if (!saved.ok()) co_return std::move(saved).error().withContext(ctx);
  if (!resumed.ok()) co_return std::move(resumed).error().withContext(ctx);

  std::vector<std::shared_ptr<Sandbox>> out;
  for (int i = 0; i < count; ++i) {
    auto child = std::make_shared<Sandbox>();
    child->id_ = ids[static_cast<size_t>(i)];
    child->dir_ = opts_.root + "/sandboxes/" + child->id_;
    fs::create_directories(child->dir_, ec);
    child->template_id_ = sb.template_id_;
    child->start_pid_ = sb.start_pid_;
    child->hostname_ = child->id_;
    child->env_ = sb.env_;
    child->net_ = sb.net_;
    child->vcpus_ = sb.vcpus_;
    child->memory_mib_ = sb.memory_mib_;
    child->disk_mib_ = sb.disk_mib_;  // its overlay is a copy of the parent's, size and all
    // The child's disk: a private copy of the parent's overlay.
    auto r = co_await prepareRestore(*t, snap + "/state", snap + "/disk.qcow2", "qcow2", false);
    Status st = r.ok() ? okStatus() : Status(r.error());
    if (r.ok()) {
      child->vm_dir_ = r->vm_dir;
      child->vm_ = std::move(r->vm);
      child->slot_ = std::move(r->slot);
      making_[child->id_] = child->vm_.get();
      st = checkAborted(child->id_);
      if (st.ok()) st = co_await finishRestore(*child, false);
      making_[child->id_] = nullptr;
    }
    if (!st.ok()) {
      if (child->agent_) child->agent_->close();
      if (child->vm_) (void)co_await child->vm_->stop();
      co_await releaseSlot(child->slot_);
      fs::remove_all(child->dir_, ec);
      if (!child->vm_dir_.empty()) fs::remove_all(child->vm_dir_, ec);
      for (auto& c : out) (void)co_await destroy(*c);
      co_return std::move(st).error().withContext(ctx);
    }
    store_.acquire(child->template_id_);
    out.push_back(child);
    // Without its record the copy could not be taken over after a restart:
    // it is not a sandbox yet.
    if (auto w = writeRecord(*child); !w.ok()) {
      for (auto& c : out) (void)co_await destroy(*c);
      co_return std::move(w).error().withContext(ctx + ": record of " + child->id_);
    }
  }
  co_return out;
}

// Long because it is four numbered steps over one staging directory
// (state, flattened disk, RAM-less save, manifest); the comments number them.
asio::awaitable<Result<std::shared_ptr<const templates::Template>>> Runtime::forkToTemplate(
    Sandbox& sb, std::string name) {
  std::string ctx = "fork sandbox " + sb.id_ + " into template " + name;
  if (sb.state_ != Sandbox::State::kRunning)
    co_return Error(Code::kFailedPrecondition, ctx + ": sandbox is not running");
  auto at = sb.template_id_.find('@');
  auto parent = store_.open(sb.template_id_.substr(0, at), sb.template_id_.substr(at + 1));
  if (!parent.ok()) co_return std::move(parent).error().withContext(ctx);
  std::string version = newId("f").substr(2) + newId("f").substr(2).substr(0, 4);
  VESSEL_CO_TRY(store_.checkSpace(ctx));
  std::string staging = store_.root() + "/.staging-" + name + "-" + version;
  std::error_code ec;
  fs::create_directories(staging, ec);
  if (ec) co_return Error(Code::kInternal, ctx + ": create " + staging + ": " + ec.message());
  ScopeExit rm_staging([&] { fs::remove_all(staging, ec); });

  // 1. The sandbox's full state (its RAM is a private copy-on-write view
  //    of its own template's file, so it travels in the stream) and its
  //    disk, captured together while it is paused.
  VESSEL_CO_TRY(co_await sb.vm_->pauseVcpus());
  auto saved = co_await sb.vm_->saveState(staging + "/full.state", false);
  if (saved.ok())
    saved = co_await hv_.copyDisk(sb.vm_dir_ + "/disk.qcow2", staging + "/overlay.qcow2");
  auto resumed = co_await sb.vm_->resumeVcpus();
  if (!saved.ok()) co_return std::move(saved).error().withContext(ctx);
  if (!resumed.ok()) co_return std::move(resumed).error().withContext(ctx);

  // 2. The disk flattened into a raw base image of its own. The copy is
  //    of a file the sandbox's QEMU can rewrite: it may be backed by its
  //    template's image alone (the record's template, not its header's
  //    say) and be no larger than the sandbox's disk can be.
  {
    hypervisor::Disk overlay{staging + "/overlay.qcow2", true, "qcow2",
                             (*parent)->path(templates::kRootfsFile), "raw"};
    uint64_t max_mib =
        std::max({sb.disk_mib_, (*parent)->defaultDiskMib(), (*parent)->baseDiskMib()});
    auto flat = co_await hv_.flattenDisk(std::move(overlay), staging + "/" + templates::kRootfsFile,
                                         max_mib << 20);
    if (!flat.ok()) co_return std::move(flat).error().withContext(ctx);
    fs::remove(staging + "/overlay.qcow2", ec);
  }

  // 3. The state loaded, never run, into a QEMU whose RAM is a shared
  //    mapping of the new template's memory file, and saved again without
  //    the RAM: the layout every template has (docs/snapshot-format.md).
  {
    auto full = Fd::open(staging + "/full.state", O_RDONLY);
    if (!full.ok()) co_return std::move(full).error().withContext(ctx);
    std::string vm_dir = opts_.root + "/vms/" + newId("vm");
    fs::create_directories(vm_dir, ec);
    ScopeExit rm_vm([&] { fs::remove_all(vm_dir, ec); });
    hypervisor::MachineSpec s =
        machineSpec(vm_dir, sb.vcpus_, sb.memory_mib_, (*parent)->manifest.cmdline, "");
    s.disks = {{staging + "/" + templates::kRootfsFile, false, "raw"}};
    s.memory_file = staging + "/" + templates::kMemoryFile;
    s.memory_shared = true;
    s.network_device = (*parent)->manifest.network;  // same devices as the state; no tap
    s.incoming = true;
    s.incoming_state_fd = full->get();
    auto vm = co_await hv_.start(s, Clock::now() + 30s);
    if (!vm.ok()) co_return std::move(vm).error().withContext(ctx);
    auto st = co_await (*vm)->loadState(false);
    if (st.ok()) st = co_await (*vm)->saveState(staging + "/" + templates::kStateFile, true);
    (void)co_await (*vm)->stop();
    if (!st.ok()) co_return std::move(st).error().withContext(ctx);
    fs::remove(staging + "/full.state", ec);
  }

  // 4. The manifest. The version is random: a fork is not reproducible
  //    from a spec, so its hash names its origin instead.
  templates::Manifest man;
  man.name = name;
  man.version = version;
  man.qemu_version = (*parent)->manifest.qemu_version;
  man.kernel_sha256 = (*parent)->manifest.kernel_sha256;
  man.cmdline = (*parent)->manifest.cmdline;
  man.vcpus = sb.vcpus_;
  man.memory_mib = sb.memory_mib_;
  // The flattened image is the sandbox's whole disk (sparse).
  man.disk_mib = sb.disk_mib_;
  man.network = (*parent)->manifest.network;  // the state has the parent's devices
  // Its start command, if still running, runs on in the new snapshot.
  man.start_pid = sb.start_pid_;
  {
    auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    char buf[32];
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    man.created_at = buf;
  }
  // Hashed on a worker thread; install() then trusts these sums for files
  // whose stamps have not changed, instead of hashing them on this thread.
  std::map<std::string, templates::TemplateStore::HashedFile> hashed;
  for (const char* f : {templates::kRootfsFile, templates::kMemoryFile, templates::kStateFile}) {
    // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
    auto hash = [p = staging + "/" + f] { return templates::TemplateStore::hashFile(p); };
    auto h = co_await offload(*hashing_, std::move(hash));
    if (!h.ok()) co_return std::move(h).error().withContext(ctx);
    man.files[f] = h->sha256;
    hashed[f] = std::move(*h);
  }
  man.spec_hash = sha256Hex("fork\n" + sb.template_id_ + "\n" + sb.id_ + "\n" + man.created_at +
                            "\n" + man.files[templates::kStateFile]);
  auto t = store_.install(staging, std::move(man), hashed);
  if (!t.ok()) co_return std::move(t).error().withContext(ctx);
  rm_staging.dismiss();
  Logger("runtime", sb.id_).info("forked into template {}", (*t)->id());
  co_return t;
}

}  // namespace vessel::node
