#pragma once
// The control plane of the public API (api/openapi.yaml): sandboxes and
// their lifecycle operations, operation polling and Server-Sent Events.
// Every request is authenticated to a tenant, every store query is scoped
// to it, and every lifecycle change is an operation whose state is stored
// before the request is answered and which runs afterwards on the io thread.
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>
#include <set>
#include <variant>

#include "api/http_server.h"
#include "api/live_sandboxes.h"
#include "api/network_api.h"
#include "api/sessions.h"
#include "api/template_worker.h"
#include "metrics/registry.h"
#include "node/runtime.h"
#include "ops/state_machine.h"
#include "store/store.h"
#include "templates/store.h"

namespace vessel::api {

// Lifetimes and quotas (vesseld's flags); a tenant's own limits in the
// store win over the tenant_* defaults.
struct Policy {
  int64_t default_idle_timeout_s = 600;
  int64_t default_lifetime_s = 24 * 3600;
  int64_t max_lifetime_s = 7 * 24 * 3600;
  int64_t tenant_max_sandboxes = 20;
  int64_t tenant_max_memory_mib = 16384;
  std::chrono::milliseconds reap_interval{1000};
};

class ControlPlane : public LiveSandboxes {
 public:
  // network: the egress endpoints and hooks (null: sandboxes get no network).
  ControlPlane(asio::io_context& io, store::Store& store, node::Runtime& runtime,
               templates::TemplateStore& templates, NetworkApi* network = nullptr);
  ~ControlPlane() override;
  // Serves POST /v1/sandboxes/{id}/sessions through `sessions`.
  void setSessions(Sessions* sessions) { sessions_ = sessions; }
  std::shared_ptr<node::AgentClient> agentOf(const std::string& sandbox_id) override;
  // Serves everything under /v1/.
  void install(HttpServer& server);
  // Operation latencies and failures, and sandboxes by state at scrape
  // time, go to `r` (which must outlive this object).
  void setMetrics(metrics::Registry& r);
  void setPolicy(const Policy& p) { policy_ = p; }
  // Starts the reaper: every reap_interval, sandboxes past their lifetime
  // or idle past their timeout are deleted, each as a delete operation
  // after a `sandbox.expired` event saying why. Stopped by shutdown().
  void startReaper();
  // Something used the sandbox (an exec, a file transfer, an API action):
  // its idle clock starts again. For the data plane too.
  void noteActivity(const std::string& sandbox_id);
  // Before serving, after a restart (clean or kill -9): takes over every
  // sandbox the store says is alive. Running VMs are re-adopted with their
  // network slots and their policies registered with the gateway again,
  // paused ones stay paused, the rest are marked failed with the reason
  // (a VM whose slot or policy cannot be taken over is stopped); every
  // unfinished operation is resumed (pause, resume and delete run again
  // on the adopted sandbox) or ended (done if what it asked for happened,
  // else failed). Nothing stays pending. Leftover files and QEMU processes
  // no sandbox owns are removed.
  // Returns how many sandboxes were taken over.
  asio::awaitable<int> recover();
  // A clean stop. By default running VMs are left running for the next
  // vesseld to re-adopt (an upgrade or restart must not kill users' work);
  // with `stop_vms` they are stopped and recorded as failed, as an
  // operator retiring the node expects. Paused sandboxes stay resumable.
  asio::awaitable<void> shutdown(bool stop_vms = false);
  // The running sandbox `id` of `tenant` on this node, or null.
  std::shared_ptr<node::Sandbox> liveSandbox(const std::string& tenant, const std::string& id);
  // Lets POST /v1/templates build templates (without it that answers 503).
  void enableTemplateBuilds(TemplateBuildEnv env);

 private:
  // Streams waiting for new events; shared with their coroutines, which
  // may outlive this object when the io_context is torn down.
  using Waiters = std::set<asio::steady_timer*>;

  asio::awaitable<std::optional<Response>> handle(const Request& req,
                                                  boost::beast::tcp_stream& stream);
  Response createSandbox(const Request& req, const std::string& tenant);
  Response getSandbox(const Request& req, const std::string& tenant, const std::string& id);
  Response listSandboxes(const Request& req, const std::string& tenant);
  Response requestAction(const Request& req, const std::string& tenant, const std::string& id,
                         ops::Action action);
  Response extendSandbox(const Request& req, const std::string& tenant, const std::string& id);
  // The tenant's sandbox `id` and the transition `action` takes it through,
  // or the answer refusing it (404, 409 with the current state).
  struct Legal {
    store::SandboxRecord sandbox;
    ops::Transition transition;
  };
  std::variant<Response, Legal> checkAction(const Request& req, const std::string& tenant,
                                            const std::string& id, ops::Action action);
  // 429 when `tenant` cannot have `count_new` more sandboxes using
  // `memory_mib` between them (count_new 0: only memory comes back, a resume).
  std::optional<Error> overQuota(const std::string& tenant, uint64_t memory_mib, int count_new);
  asio::awaitable<void> reapLoop();
  void reapOnce();
  Response getOperation(const Request& req, const std::string& tenant, const std::string& id);
  asio::awaitable<std::optional<Response>> streamEvents(const Request& req,
                                                        boost::beast::tcp_stream& stream,
                                                        std::string tenant, std::string op_id);

  // Operation bookkeeping: store the new state, then publish its event.
  Result<store::OperationRecord> newOperation(const std::string& tenant,
                                              const std::string& sandbox_id,
                                              const std::string& kind);
  void setOperation(store::OperationRecord& op, ops::OpState state, const Error* error);
  void setSandbox(const store::OperationRecord& op, ops::SandboxState state,
                  const std::string& error);
  void publish(store::EventRecord e);
  asio::awaitable<void> runCreate(store::OperationRecord op, std::string template_name,
                                  node::CreateOptions opts);
  asio::awaitable<void> runAction(store::OperationRecord op, ops::Transition t);
  asio::awaitable<Status> doAction(const std::string& tenant, const std::string& id,
                                   ops::Transition t);
  asio::awaitable<void> recoverSandbox(store::SandboxRecord sb,
                                       std::vector<store::OperationRecord> ops,
                                       std::set<std::string>& keep);

  // Fork (fork_api.cc).
  Response forkSandbox(const Request& req, const std::string& tenant, const std::string& id);
  asio::awaitable<void> runFork(store::OperationRecord op, std::vector<std::string> ids);
  void setSandboxOf(const store::OperationRecord& op, const std::string& id,
                    ops::SandboxState state, const std::string& error);

  // Templates (templates_api.cc), also a sandbox forked into one.
  Response forkToTemplate(const Request& req, const store::SandboxRecord& sb,
                          const std::string& name, ops::Transition t);
  asio::awaitable<void> runForkToTemplate(store::OperationRecord op, std::string name);
  // Deletes template versions that are neither the newest of their name nor
  // held by a sandbox or a pooled VM; after deletes, builds and forks.
  void collectTemplates();
  // Refuses a name a new template of `tenant` cannot have (reserved, built in).
  Status checkNewTemplateName(const std::string& name);
  Response buildTemplate(const Request& req, const std::string& tenant);
  Response listTemplates(const Request& req, const std::string& tenant);
  // The stored name of the template `tenant` calls `name`, or kNotFound.
  Result<std::string> resolveTemplate(const std::string& tenant, const std::string& name);
  // Abandons builds in flight and fails their operations.
  void stopTemplateBuilds();

  asio::io_context& io_;
  store::Store& store_;
  node::Runtime& runtime_;
  templates::TemplateStore& templates_;
  NetworkApi* network_;
  std::shared_ptr<Waiters> waiters_ = std::make_shared<Waiters>();
  std::map<std::string, std::shared_ptr<node::Sandbox>> live_;      // sandbox id -> its VM
  std::map<std::string, store::OperationRecord> builds_in_flight_;  // op id -> build op
  // Cleared first in the destructor: callbacks the build thread posted check it.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::unique_ptr<TemplateWorker> builder_;  // stopped first in the destructor
  Policy policy_;
  std::shared_ptr<asio::steady_timer> reap_timer_;
  metrics::Family<metrics::Counter>* reaped_ = nullptr;
  metrics::Family<metrics::Histogram>* op_latency_ = nullptr;
  metrics::Family<metrics::Counter>* op_errors_ = nullptr;
  Sessions* sessions_ = nullptr;
};

}  // namespace vessel::api
