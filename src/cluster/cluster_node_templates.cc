// ClusterNode's template calls: a build goes to a node chosen as a create
// is placed (the base template's nodes first, then free memory), a fork
// into a template to the sandbox's node. The node registers the new
// template in the catalogue before it answers (cluster/template_node.h).
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "base/log.h"
#include "cluster/cluster_node.h"
#include "templates/build_spec.h"

namespace vessel::cluster {

namespace {

// A build queues on its node and boots a guest (the builder bounds it at
// 5 minutes); this bounds the wait for the node's answer.
constexpr auto kBuildCall = std::chrono::minutes(30);

Logger clusterBuildLog() { return Logger("cluster"); }

Result<templates::Manifest> manifestOf(const NodeReply& r, const std::string& node) {
  if (!r.status.ok()) return r.status.error();
  auto m = templates::parseManifest(r.manifest);
  if (!m.ok()) return std::move(m).error().withContext("node " + node + "'s answer");
  return m;
}

}  // namespace

asio::awaitable<Result<templates::Manifest>> ClusterNode::forkToTemplate(std::string id,
                                                                         std::string stored_name) {
  NodeCall c;
  c.id = id;
  c.template_name = stored_name;
  auto r = co_await callFor(id, "fork_template", c, opts_.long_call);
  if (!r.ok()) co_return std::move(r).error();
  auto sb = store_.findSandbox(id);
  if (!sb.ok())
    co_return std::move(sb).error().withContext("fork sandbox " + id + " into a template");
  if (!*sb) co_return Error(Code::kNotFound, "sandbox " + id + " is gone");
  co_return signedManifest(*r, node_of_[id], (*sb)->tenant_id);
}

Result<templates::Manifest> ClusterNode::signedManifest(const NodeReply& r, const std::string& node,
                                                        const std::string& tenant) {
  auto m = manifestOf(r, node);
  if (!m.ok() || !opts_.signer) return m;
  auto s = signAnswered(store_, *opts_.signer, tenant, m->name, m->version, r.manifest);
  if (!s.ok()) return std::move(s).error().withContext("node " + node + "'s template");
  return m;
}

Status ClusterNode::build(ops::BuildRequest req, ops::BuildCallbacks cb) {
  auto nodes = store_.listNodes();
  if (!nodes.ok()) return std::move(nodes).error().withContext("place template build");
  for (const auto& n : *nodes) nodes_[n.name] = n;
  auto order = withToken(rankNodes(*nodes, req.base, req.spec.memory_mib, store::nowMs(),
                                   opts_.lost_after, placedSinceHeartbeat(*nodes)));
  if (order.empty())
    return Error(Code::kUnavailable, "no node is available to build template " + req.spec.name);
  NodeCall c;
  c.tenant = req.tenant;
  c.template_name = req.spec.name;
  c.base = req.base;
  templates::BuildSpec spec = req.spec;
  spec.name = "build";  // a placeholder: the stored name is longer than a spec's names
  c.spec = templates::specJson(spec);
  c.registry_username = req.registry_auth.username;
  c.registry_password = req.registry_auth.password;
  std::weak_ptr<bool> alive = alive_;
  asio::co_spawn(
      io_,
      [this, alive, order, c, cb = std::move(cb)]() -> asio::awaitable<void> {
        Error last(Code::kUnavailable, "no node could be reached to build " + c.template_name);
        for (const auto& name : order) {
          if (cb.progress) cb.progress("building on node " + name, 1);
          bool connected = false;
          auto reply = co_await remote(nodes_[name]).call("build", c, kBuildCall, &connected);
          if (alive.expired()) co_return;  // the replica is stopping: nobody to tell
          if (reply.ok()) {
            if (cb.done) cb.done(signedManifest(*reply, name, c.tenant));
            co_return;
          }
          if (connected) {
            if (cb.done) cb.done(std::move(reply).error());
            co_return;
          }
          clusterBuildLog().warn("template build {}: {}; trying another node", c.template_name,
                                 reply.error().message());
          last = std::move(reply).error();
        }
        if (cb.done) cb.done(std::move(last));
      },
      asio::detached);
  return okStatus();
}

}  // namespace vessel::cluster
