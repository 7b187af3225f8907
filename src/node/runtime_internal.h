#pragma once
// What the files of node::Runtime share (runtime.cc: create, pause, resume,
// destroy and the pool; runtime_fork.cc; runtime_recovery.cc;
// guest_setup.cc). Not for use outside them.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "hypervisor/hypervisor.h"
#include "node/runtime.h"

namespace vessel::node::internal {

// Where the egress CA goes in the guest.
inline constexpr const char* kGuestCaCert = "/etc/vessel/egress-ca.crt";
inline constexpr const char* kGuestCaBundle = "/etc/vessel/ca-bundle.crt";

// Sandbox and VM ids as the runtime accepts them in paths.
inline bool validId(const std::string& id) {
  if (id.empty() || id.size() > 48) return false;
  for (char c : id)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  return true;
}

// Records the time since the last mark as phase `name`.
class PhaseClock {
 public:
  explicit PhaseClock(std::vector<std::pair<std::string, double>>& out) : out_(out) {}
  void mark(const char* name) {
    auto now = hypervisor::Clock::now();
    out_.emplace_back(name, std::chrono::duration<double, std::milli>(now - last_).count());
    last_ = now;
  }

 private:
  std::vector<std::pair<std::string, double>>& out_;
  hypervisor::Clock::time_point last_ = hypervisor::Clock::now();
};

}  // namespace vessel::node::internal

namespace vessel::node {

// One create in progress. It owns what it has made of the sandbox so far
// (the sandbox directory, the "being made" mark abort() looks for, a VM
// directory, the VM, its slot and agent) and undoes all of it unless
// commit() is called: rollback() on a failure path, since stopping a VM and
// tearing a slot down need the io thread; the destructor for whatever is
// still held when the create's coroutine is destroyed half-way, and for the
// mark, which goes in every case.
class Runtime::CreateAttempt {
 public:
  CreateAttempt(Runtime& rt, std::shared_ptr<Sandbox> sb) : rt_(rt), sb_(std::move(sb)) {}
  CreateAttempt(const CreateAttempt&) = delete;
  CreateAttempt& operator=(const CreateAttempt&) = delete;
  ~CreateAttempt() {
    std::error_code ec;
    if (sb_) {  // not committed: nothing of it may stay
      if (sb_->agent_) sb_->agent_->close();
      if (sb_->vm_) sb_->vm_->kill();
      sb_->vm_.reset();
      sb_->slot_.reset();  // torn down here, on this thread
      if (own_vm_dir_) std::filesystem::remove_all(sb_->vm_dir_, ec);
      if (own_dir_) std::filesystem::remove_all(sb_->dir_, ec);
    }
    if (own_dir_ || committed_) {
      rt_.making_.erase(id_);
      rt_.aborted_.erase(id_);
    }
  }
  Sandbox& sb() { return *sb_; }

  // The sandbox's directory; kAlreadyExists if there is one (left alone).
  Status makeDir() {
    std::error_code ec;
    if (!std::filesystem::create_directory(sb_->dir_, ec))
      return Error(Code::kAlreadyExists, "sandbox " + sb_->id_ + " exists");
    own_dir_ = true;
    id_ = sb_->id_;
    rt_.making_[id_] = nullptr;
    return okStatus();
  }
  // A VM directory removed if the attempt fails.
  void ownVmDir(std::string dir) {
    sb_->vm_dir_ = std::move(dir);
    own_vm_dir_ = true;
  }
  // The VM being made: abort() kills it from now on.
  void holdVm(std::unique_ptr<hypervisor::Vm> vm) {
    sb_->vm_ = std::move(vm);
    rt_.making_[id_] = sb_->vm_.get();
  }
  // Undoes the VM half: agent closed, VM stopped, slot released, VM
  // directory removed. The sandbox directory and mark stay: the restored
  // path may try another VM.
  asio::awaitable<void> dropVm() {
    if (sb_->agent_) sb_->agent_->close();
    sb_->agent_.reset();
    if (sb_->vm_) (void)co_await sb_->vm_->stop();
    rt_.making_[id_] = nullptr;
    sb_->vm_.reset();
    co_await rt_.releaseSlot(sb_->slot_);
    std::error_code ec;
    if (own_vm_dir_) std::filesystem::remove_all(sb_->vm_dir_, ec);
    own_vm_dir_ = false;
  }
  // Undoes everything but the mark (the destructor's).
  asio::awaitable<void> rollback() {
    co_await dropVm();
    std::error_code ec;
    if (own_dir_) std::filesystem::remove_all(sb_->dir_, ec);
    sb_.reset();
  }
  std::shared_ptr<Sandbox> commit() {
    committed_ = true;
    own_vm_dir_ = own_dir_ = false;
    return std::move(sb_);
  }

 private:
  Runtime& rt_;
  std::shared_ptr<Sandbox> sb_;
  std::string id_;
  bool own_dir_ = false, own_vm_dir_ = false, committed_ = false;
};

}  // namespace vessel::node
