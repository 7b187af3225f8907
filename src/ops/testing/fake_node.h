#pragma once
// A fake ops::Node for unit tests of the lifecycle: sandboxes are entries
// in a map, every call is recorded, and a test can make a call hang until
// it is aborted (a guest that stops answering) or lose a running sandbox
// (a VM that dies). Deterministic; no VM, no thread.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ops/node.h"

namespace vessel::ops::testing {

class FakeNode final : public Node {
 public:
  explicit FakeNode(asio::io_context& io) : io_(io) {}

  // What tests set.
  std::set<std::string> hang;                // ids whose next create/resume/fork copy hangs
  std::set<std::string> fail;                // ids whose next create/resume fails
  std::map<std::string, Holding> adoptable;  // what adopt() finds after a "restart"
  std::set<std::string> fail_build;          // stored template names whose build fails
  bool builds_full = false;                  // build() refuses: the queue is full
  templates::RegistryAuth last_build_auth;   // the registry credential the last build carried
  std::set<std::string> busy_ids;            // ids with a call "in flight" (NodeSupervisor)
  // What tests read.
  std::vector<std::string> calls;  // "create sb-…", "destroy sb-…", …
  std::map<std::string, Holding> held;
  std::map<std::string, std::string> tenant_of;
  std::map<std::string, std::string> placed_on;  // the node a create had to run on

  // A running sandbox dies on its own (its VM exited).
  void lose(const std::string& id, const std::string& reason) {
    held.erase(id);
    calls.push_back("lost " + id);
    if (lost_) lost_(tenant_of[id], id, reason);
  }
  bool hanging(const std::string& id) const { return hung_.count(id) > 0; }
  int count(const std::string& prefix) const {
    int n = 0;
    for (const auto& c : calls) n += c.rfind(prefix, 0) == 0;
    return n;
  }

  void onLost(LostHandler h) override { lost_ = std::move(h); }
  Status prepareNetwork(const std::string&, const std::string& id,
                        const std::optional<NetworkSpec>& spec) override {
    if (spec && spec->mode == "bogus") return Error(Code::kInvalidArgument, "bogus network");
    calls.push_back("network " + id);
    networks[id] = stored(spec.value_or(NetworkSpec{}));
    return okStatus();
  }
  // Every sandbox's settings as stored (an empty mode is this node's default, none).
  std::map<std::string, NetworkSpec> networks;
  Result<NetworkSpec> network(const std::string& id) override {
    auto it = networks.find(id);
    return it == networks.end() ? stored({}) : it->second;
  }
  asio::awaitable<void> credentialChanged(std::string tenant, std::string name) override {
    calls.push_back("credential-changed " + tenant + " " + name);
    co_return;
  }
  Status inheritNetwork(const std::string& parent, const std::string& child) override {
    if (auto it = networks.find(parent); it != networks.end()) networks[child] = it->second;
    return okStatus();
  }
  asio::awaitable<Result<Usage>> usage(std::string id) override {
    if (holding(id) != Holding::kRunning)
      co_return Error(Code::kFailedPrecondition, id + " has no VM");
    calls.push_back("usage " + id);
    co_return fake_usage;
  }
  Usage fake_usage{1, 12.5, 100 << 20, 256 << 20, 4 << 20, 1ull << 30};
  asio::awaitable<Result<NetworkSpec>> updateNetwork(std::string, std::string id,
                                                     NetworkSpec spec) override {
    if (spec.mode == "bogus") co_return Error(Code::kInvalidArgument, "bogus network");
    calls.push_back("update-network " + id + " " + spec.mode);
    co_return networks[id] = stored(spec);
  }

  asio::awaitable<Status> create(NodeCreate c) override {
    calls.push_back("create " + c.id);
    tenant_of[c.id] = c.tenant;
    if (!c.node.empty()) placed_on[c.id] = c.node;
    VESSEL_CO_TRY(co_await step(c.id));
    held[c.id] = Holding::kRunning;
    co_return okStatus();
  }
  asio::awaitable<Status> pause(std::string id, bool keep_memory) override {
    calls.push_back((keep_memory ? "pause " : "pause-disk ") + id);
    if (fail.erase(id)) co_return Error(Code::kInternal, "the guest broke");
    if (held[id] != Holding::kRunning) co_return Error(Code::kUnavailable, "not running");
    held[id] = Holding::kPaused;
    co_return okStatus();
  }
  asio::awaitable<Status> resume(std::string tenant, std::string id) override {
    calls.push_back("resume " + id);
    tenant_of[id] = tenant;
    VESSEL_CO_TRY(co_await step(id));
    held[id] = Holding::kRunning;
    co_return okStatus();
  }
  asio::awaitable<Result<std::vector<Status>>> fork(std::string tenant, std::string id,
                                                    std::vector<std::string> copies) override {
    calls.push_back("fork " + id);
    if (held[id] != Holding::kRunning) co_return Error(Code::kUnavailable, "not running");
    std::vector<Status> out;
    for (const auto& c : copies) {
      tenant_of[c] = tenant;
      Status s = co_await step(c);
      if (s.ok()) held[c] = Holding::kRunning;
      out.push_back(s);
    }
    co_return out;
  }
  asio::awaitable<Result<templates::Manifest>> forkToTemplate(std::string id,
                                                              std::string name) override {
    calls.push_back("fork-template " + id);
    co_return manifestOf(name);
  }
  // A build reports one step on the next turn of the io loop and ends on
  // the one after; a failure names the template as stored, as a real
  // build's errors do.
  Status build(BuildRequest req, BuildCallbacks cb) override {
    calls.push_back("build " + req.spec.name + " from " + req.base);
    last_build_auth = req.registry_auth;
    if (builds_full) return Error(Code::kResourceExhausted, "builds are already queued");
    asio::post(io_, [this, req = std::move(req), cb = std::move(cb)] {
      cb.progress("booting " + req.base, 10);
      asio::post(io_, [this, req, cb] {
        if (fail_build.erase(req.spec.name)) {
          cb.done(Error(Code::kFailedPrecondition,
                        "build " + req.spec.name + ": the ready check never passed"));
          return;
        }
        templates::Manifest m = manifestOf(req.spec.name);
        m.memory_mib = req.spec.memory_mib;
        cb.done(m);
      });
    });
    return okStatus();
  }
  asio::awaitable<Status> destroy(std::string id) override {
    calls.push_back("destroy " + id);
    held.erase(id);
    co_return okStatus();
  }
  void abort(const std::string& id) override {
    calls.push_back("abort " + id);
    if (auto it = hung_.find(id); it != hung_.end()) it->second->cancel();
  }
  // A whole manifest (one that parses), as a node answers across the node API.
  static templates::Manifest manifestOf(const std::string& name) {
    templates::Manifest m;
    m.name = name;
    m.version = "v1";
    m.spec_hash = std::string(64, 'a');
    m.qemu_version = "fake";
    m.kernel_sha256 = "k";
    m.cmdline = "quiet";
    m.created_at = "2026-01-01T00:00:00Z";
    for (const char* f : {templates::kRootfsFile, templates::kMemoryFile, templates::kStateFile})
      m.files[f] = std::string(64, '0');
    return m;
  }
  Holding holding(const std::string& id) const override {
    auto it = held.find(id);
    return it == held.end() ? Holding::kNothing : it->second;
  }
  bool busy(const std::string& id) const { return busy_ids.count(id) > 0; }
  std::shared_ptr<agentclient::AgentClient> agent(const std::string&) override { return nullptr; }
  asio::awaitable<Result<Holding>> adopt(std::string tenant, std::string id) override {
    calls.push_back("adopt " + id);
    tenant_of[id] = tenant;
    auto it = adoptable.find(id);
    if (it == adoptable.end()) co_return Error(Code::kNotFound, "no VM left");
    held[id] = it->second;
    co_return it->second;
  }
  // What the last discardOrphans() was told to keep (leftovers are files
  // on a real node; the fake has none).
  std::optional<std::set<std::string>> kept;
  asio::awaitable<int> discardOrphans(std::set<std::string> keep) override {
    kept = std::move(keep);
    co_return 0;
  }
  asio::awaitable<std::vector<std::string>> shutdown(bool stop_vms) override {
    std::vector<std::string> out;
    if (stop_vms)
      for (auto& [id, h] : held)
        if (h == Holding::kRunning) out.push_back(id);
    held.clear();
    co_return out;
  }

 private:
  static NetworkSpec stored(NetworkSpec s) {
    if (s.mode.empty()) s.mode = "none";
    return s;
  }
  // One step of work on `id`: a turn of the io loop, or a hang until abort().
  asio::awaitable<Status> step(const std::string& id) {
    if (fail.erase(id)) co_return Error(Code::kInternal, "the guest broke");
    if (hang.erase(id)) {
      auto t = std::make_shared<asio::steady_timer>(io_, asio::steady_timer::time_point::max());
      hung_[id] = t;
      (void)co_await t->async_wait(asio::as_tuple(asio::use_awaitable));
      hung_.erase(id);
      co_return Error(Code::kUnavailable, id + ": aborted");
    }
    co_await asio::post(io_, asio::use_awaitable);
    co_return okStatus();
  }

  asio::io_context& io_;
  LostHandler lost_;
  std::map<std::string, std::shared_ptr<asio::steady_timer>> hung_;
};

}  // namespace vessel::ops::testing
