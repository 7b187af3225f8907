// After a restart: sandboxes an earlier vesseld left are taken over, and
// what nobody owns is removed; and the clean hand-over before one.
#include <fcntl.h>

#include <filesystem>

#include "base/log.h"
#include "base/scope_exit.h"
#include "base/sha256.h"
#include "node/runtime.h"
#include "node/runtime_internal.h"

namespace vessel::node {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using internal::validId;

void Runtime::release(Sandbox& sb) {
  if (sb.agent_) sb.agent_->close();
  sb.agent_.reset();
  if (sb.vm_) sb.vm_->release();
  sb.vm_.reset();
  if (sb.slot_ && opts_.slots) opts_.slots->handOver(std::move(sb.slot_));
  sb.slot_.reset();
  store_.release(sb.template_id_);
}

asio::awaitable<Result<std::shared_ptr<Sandbox>>> Runtime::adopt(const std::string& id) {
  std::string ctx = "adopt sandbox " + id;
  if (!validId(id)) co_return Error(Code::kInvalidArgument, ctx + ": bad id");
  SandboxFile file;
  auto rec = readRecord(id, file);
  if (!rec.ok()) {
    if (rec.error().code() == Code::kNotFound)
      co_return Error(Code::kNotFound,
                      ctx + ": the VM never finished starting: " + rec.error().message());
    co_return std::move(rec).error().withContext(ctx);
  }
  std::shared_ptr<Sandbox> sb = std::move(*rec);
  std::string dir = sb->dir_;
  pid_t pid = file.vm_pid;
  uint64_t ticks = file.vm_start_ticks;
  bool paused = file.paused;
  std::optional<uint32_t> slot_index = file.network_slot;
  std::error_code ec;
  if (paused) {
    sb->disk_only_ = file.disk_only;
    if (!file.disk_only && !fs::exists(dir + "/pause.state", ec))
      co_return Error(Code::kNotFound, ctx + ": paused, but its saved state is missing");
    sb->state_ = Sandbox::State::kPaused;
    store_.acquire(sb->template_id_);
    co_return sb;
  }
  if (pid <= 0) co_return Error(Code::kNotFound, ctx + ": no VM process recorded");
  // A running VM: nothing is opened anew, so no backing to name.
  hypervisor::MachineSpec s = machineSpec(sb->vm_dir_, sb->vcpus_, sb->memory_mib_, "", "");
  auto vm = co_await hv_.adopt(s, pid, ticks, Clock::now() + 10s);
  if (vm.ok() && slot_index) {
    // Its tap is in a slot the old vesseld handed over; without the slot
    // (no egress now, or it is incomplete) the guest's network would be
    // dead or unpoliced: stop the VM instead. A slot of a VM that is gone
    // is removed with the other leftovers (SlotPool::dropLeftovers).
    Result<std::unique_ptr<network::Slot>> sl =
        opts_.slots ? opts_.slots->adopt(*slot_index)
                    : Result<std::unique_ptr<network::Slot>>(
                          Error(Code::kFailedPrecondition,
                                "it has a network slot and this vesseld runs without egress"));
    if (!sl.ok()) {
      (void)co_await (*vm)->stop();
      co_return Error(sl.error().code(),
                      ctx + ": " + sl.error().message() + "; its VM was stopped");
    }
    sb->slot_ = std::move(*sl);
  }
  if (!vm.ok()) co_return std::move(vm).error().withContext(ctx);
  sb->vm_ = std::move(*vm);
  // A pause that was saving when the old vesseld died left the vCPUs
  // stopped; the sandbox is still running as far as anyone knows.
  // (g++ 12: named result, see CONTRIBUTING.md "Coroutines under g++ 12" rule 3.)
  Status st = co_await sb->vm_->resumeVcpus();
  if (st.ok()) {
    auto c = co_await agentclient::AgentClient::reconnect(std::move(sb->vm_->agentChannel()), id,
                                                          Clock::now() + opts_.ready_timeout);
    if (c.ok()) {
      sb->agent_ = std::move(*c);
      sb->agent_->setReplyTimeout(opts_.agent_reply_timeout);
    } else {
      st = std::move(c).error();
    }
  }
  if (!st.ok()) {
    std::string diag = sb->vm_->diagnostics();
    (void)co_await sb->vm_->stop();
    co_await releaseSlot(sb->slot_);
    std::string msg = st.error().message();
    if (!diag.empty()) msg += "; " + diag;
    co_return Error(st.error().code(), ctx + ": " + msg);
  }
  sb->state_ = Sandbox::State::kRunning;
  fs::remove(dir + "/pause.state", ec);  // from a pause that did not finish
  store_.acquire(sb->template_id_);
  co_return sb;
}

asio::awaitable<int> Runtime::discardOrphans(std::set<std::string> keep) {
  int n = 0;
  std::set<std::string> vm_dirs_in_use;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(opts_.root + "/sandboxes", ec)) {
    std::string id = e.path().filename().string();
    if (keep.count(id)) {
      auto text = readFile(e.path().string() + "/sandbox.json");
      auto f = text.ok() ? decodeSandboxFile(*text) : Result<SandboxFile>(text.error());
      if (f.ok()) vm_dirs_in_use.insert(f->vm_dir);
      continue;
    }
    std::error_code rec;
    fs::remove_all(e.path(), rec);
    ++n;
  }
  std::vector<std::string> orphans;
  for (auto& e : fs::directory_iterator(opts_.root + "/vms", ec))
    if (!vm_dirs_in_use.count(e.path().string())) orphans.push_back(e.path().string());
  for (auto& d : orphans) {
    auto s = co_await hv_.stopOrphan(d + "/run");
    if (!s.ok()) Logger("runtime").warn("orphan VM in {}: {}", d, s.error().message());
    std::error_code rec;
    fs::remove_all(d, rec);
    ++n;
  }
  co_return n;
}

}  // namespace vessel::node
