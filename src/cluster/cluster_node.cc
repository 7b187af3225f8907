#include "cluster/cluster_node.h"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "base/log.h"
#include "cluster/credential_share.h"
#include "cluster/template_transfer.h"

namespace vessel::cluster {

namespace json = boost::json;

namespace {

Logger clusterLog() { return Logger("cluster"); }

}  // namespace

std::vector<std::string> rankNodes(const std::vector<store::NodeRecord>& nodes,
                                   const std::string& template_name, uint64_t memory_mib,
                                   int64_t now_ms, std::chrono::milliseconds lost_after,
                                   const std::map<std::string, uint64_t>& placed) {
  struct Key {
    bool no_room, no_template;
    int64_t neg_free, sandboxes;
    std::string name;
    auto tie() const { return std::tie(no_room, no_template, neg_free, sandboxes, name); }
  };
  std::vector<Key> keys;
  for (const auto& n : nodes) {
    if (n.lost || n.heartbeat_ms < now_ms - lost_after.count()) continue;
    auto p = placed.find(n.name);
    uint64_t used = p == placed.end() ? 0 : p->second;
    int64_t free = static_cast<int64_t>(n.memory_free_mib) - static_cast<int64_t>(used);
    keys.push_back({free < static_cast<int64_t>(memory_mib), !nodeHasTemplate(n, template_name),
                    -free, n.sandboxes, n.name});
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) { return a.tie() < b.tie(); });
  std::vector<std::string> out;
  for (const auto& k : keys) out.push_back(k.name);
  return out;
}

std::map<std::string, uint64_t> ClusterNode::placedSinceHeartbeat(
    const std::vector<store::NodeRecord>& nodes) {
  std::map<std::string, uint64_t> out;
  for (const auto& n : nodes) {
    auto& mine = placements_[n.name];
    std::erase_if(mine, [&](const auto& e) {
      return e.second.answered_ms != 0 && e.second.answered_ms < n.heartbeat_ms;
    });
    for (const auto& [id, p] : mine) out[n.name] += p.memory_mib;
  }
  return out;
}

ClusterNode::~ClusterNode() {
  alive_.reset();
  if (timer_) timer_->cancel();
}

void ClusterNode::start() {
  timer_ = std::make_shared<asio::steady_timer>(io_);
  asio::co_spawn(io_, sweepLoop(), asio::detached);
}

asio::awaitable<void> ClusterNode::sweepLoop() {
  auto timer = timer_;
  auto alive = std::weak_ptr<bool>(alive_);
  for (;;) {
    timer->expires_after(opts_.sweep_every);
    boost::system::error_code ec;
    co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || alive.expired() || !timer_) co_return;
    sweepOnce();
  }
}

bool ClusterNode::stale(const store::NodeRecord& n, int64_t now_ms) const {
  return n.lost || n.heartbeat_ms < now_ms - opts_.lost_after.count();
}

std::vector<std::string> ClusterNode::sweepOnce() {
  std::vector<std::string> marked;
  auto nodes = store_.listNodes();
  if (!nodes.ok()) {
    clusterLog().warn("node sweep: {}", nodes.error().message());
    return marked;
  }
  int64_t now = store::nowMs();
  for (const auto& n : *nodes) {
    nodes_[n.name] = n;
    if (auto it = remotes_.find(n.name);
        it != remotes_.end() && it->second->url() != n.advertise_url)
      it->second->setUrl(n.advertise_url);
    if (!stale(n, now)) continue;
    const std::string why = "node " + n.name + " lost";
    // This replica's calls to it end now, whoever marks it.
    if (auto it = remotes_.find(n.name); it != remotes_.end() && it->second->inFlight() > 0)
      it->second->cancelAll(why);
    if (n.lost) continue;
    auto did = store_.markNodeLost(n.name, now - opts_.lost_after.count());
    if (!did.ok() || !*did) continue;
    nodes_[n.name].lost = true;
    marked.push_back(n.name);
    auto sbs = store_.listNodeSandboxes(n.name);
    clusterLog().warn("node {} lost: no heartbeat for {} ms; {} sandbox(es) on it fail", n.name,
                      now - n.heartbeat_ms, sbs.ok() ? sbs->size() : 0);
    if (!sbs.ok()) continue;
    for (const auto& sb : *sbs) {
      holding_.erase(sb.id);
      if (lost_) lost_(sb.tenant_id, sb.id, why);
    }
  }
  return marked;
}

// A node this replica holds no token for (per-node tokens, and the node
// is not in the file yet) is never placed on: its every call would be 401.
std::vector<std::string> ClusterNode::withToken(std::vector<std::string> order) const {
  std::erase_if(order, [this](const std::string& n) { return opts_.tokens.forNode(n).empty(); });
  return order;
}

RemoteNode& ClusterNode::remote(const store::NodeRecord& n) {
  auto& r = remotes_[n.name];
  if (!r)
    r = std::make_unique<RemoteNode>(io_, n.name, n.advertise_url, opts_.tokens.forNode(n.name),
                                     opts_.tls);
  else if (r->url() != n.advertise_url)
    r->setUrl(n.advertise_url);
  return *r;
}

Result<RemoteNode*> ClusterNode::route(const std::string& id) {
  std::string name;
  if (auto it = node_of_.find(id); it != node_of_.end()) {
    name = it->second;
  } else {
    VESSEL_ASSIGN_OR_RETURN(name, store_.sandboxNode(id));
    if (name.empty()) return Error(Code::kNotFound, "sandbox " + id + " is on no node");
    node_of_[id] = name;
  }
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    VESSEL_ASSIGN_OR_RETURN(auto nodes, store_.listNodes());
    for (const auto& n : nodes) nodes_[n.name] = n;
    it = nodes_.find(name);
    if (it == nodes_.end()) return Error(Code::kUnavailable, "node " + name + " is not registered");
  }
  if (stale(it->second, store::nowMs())) return Error(Code::kUnavailable, "node " + name + " lost");
  return &remote(it->second);
}

asio::awaitable<Result<NodeReply>> ClusterNode::callFor(const std::string& id, std::string call,
                                                        NodeCall c,
                                                        std::chrono::milliseconds timeout) {
  auto r = route(id);
  if (!r.ok()) co_return std::move(r).error();
  auto alive = std::weak_ptr<bool>(alive_);
  auto reply = co_await (*r)->call(std::move(call), std::move(c), timeout);
  if (alive.expired()) co_return Error(Code::kUnavailable, "the API replica is stopping");
  if (reply.ok()) holding_[id] = reply->holding;
  co_return reply;
}

Status ClusterNode::prepareNetwork(const std::string&, const std::string& id,
                                   const std::optional<ops::NetworkSpec>& spec) {
  // Checked by the node that runs it, with the create.
  pending_net_[id] = spec;
  return okStatus();
}

Status ClusterNode::inheritNetwork(const std::string&, const std::string&) {
  return okStatus();  // the node copies the parent's settings with the fork
}

asio::awaitable<Result<ops::NetworkSpec>> ClusterNode::updateNetwork(std::string tenant,
                                                                     std::string id,
                                                                     ops::NetworkSpec spec) {
  // The node checks the settings against its gateway and the tenant's
  // credentials, stores them and registers them at once when the sandbox
  // runs there: the answer is what it stored.
  // Until the node answers, it may run either settings: it gets the
  // credentials of both, then only those of what it stored.
  auto where = route(id);
  if (!where.ok()) co_return std::move(where).error();
  std::string node = (*where)->name();
  std::vector<std::string> both = credentialsOf(id);
  both.insert(both.end(), spec.credentials.begin(), spec.credentials.end());
  VESSEL_CO_TRY(share(tenant, id, node, both));
  NodeCall c;
  c.id = id;
  c.tenant = tenant;
  c.network = std::move(spec);
  auto r = co_await callFor(id, "network", c, opts_.short_call);
  if (!r.ok()) co_return std::move(r).error();
  if (!r->status.ok()) co_return std::move(r->status).error();
  if (!r->network) co_return Error(Code::kProtocol, "node reply: no network settings");
  VESSEL_CO_TRY(share(tenant, id, node, r->network->credentials));
  co_return std::move(*r->network);
}

Status ClusterNode::share(const std::string& tenant, const std::string& id, const std::string& node,
                          const std::vector<std::string>& names) {
  if (auto s = shareCredentials(store_, tenant, id, names, opts_.tokens.forNode(node)); !s.ok())
    return std::move(s).error().withContext("credentials of sandbox " + id + " for node " + node);
  return okStatus();
}

std::vector<std::string> ClusterNode::credentialsOf(const std::string& id) {
  auto n = network(id);
  return n.ok() ? n->credentials : std::vector<std::string>{};
}

Result<ops::NetworkSpec> ClusterNode::network(const std::string& id) {
  if (opts_.network_of) return opts_.network_of(id);
  return ops::NetworkSpec{"none", {}, {}, {}};
}

asio::awaitable<void> ClusterNode::credentialChanged(std::string tenant, std::string name) {
  // The tenant's sandboxes that use it get it sealed again for their node
  // (or lose it, deleted); then every live node hears of it (in the
  // background); failures are the nodes' to log.
  if (auto live = store_.listLiveSandboxes(); live.ok()) {
    for (const auto& sb : *live) {
      if (sb.tenant_id != tenant || sb.node.empty()) continue;
      auto names = credentialsOf(sb.id);
      if (std::find(names.begin(), names.end(), name) == names.end()) continue;
      if (auto s = share(tenant, sb.id, sb.node, names); !s.ok())
        clusterLog().warn("credential change: {}", s.error().message());
    }
  } else {
    clusterLog().warn("credential change: {}", live.error().message());
  }
  int64_t now = store::nowMs();
  for (const auto& [node, rec] : nodes_) {
    if (stale(rec, now)) continue;
    NodeCall c;
    c.tenant = tenant;
    c.credential = name;
    asio::co_spawn(
        io_,
        [r = &remote(rec), c, t = opts_.short_call]() -> asio::awaitable<void> {
          auto res = co_await r->call("credential", c, t);
          if (!res.ok()) clusterLog().warn("credential change: {}", res.error().message());
        },
        asio::detached);
  }
  co_return;
}

asio::awaitable<Status> ClusterNode::create(ops::NodeCreate c) {
  auto alive = std::weak_ptr<bool>(alive_);
  auto nodes = store_.listNodes();
  if (!nodes.ok()) co_return std::move(nodes).error().withContext("place sandbox " + c.id);
  for (const auto& n : *nodes) nodes_[n.name] = n;
  auto order = withToken(rankNodes(*nodes, c.template_name, c.memory_mib, store::nowMs(),
                                   opts_.lost_after, placedSinceHeartbeat(*nodes)));
  if (!c.node.empty()) {
    // Its volumes are there: that node or none.
    if (std::find(order.begin(), order.end(), c.node) == order.end())
      co_return Error(Code::kUnavailable, "node " + c.node + ", which keeps the volumes sandbox " +
                                              c.id +
                                              " mounts, is down or unknown; try again when it is "
                                              "back");
    order = {c.node};
  }
  if (order.empty())
    co_return Error(Code::kUnavailable, "no node is available to run sandbox " + c.id);
  NodeCall call;
  call.id = c.id;
  call.tenant = c.tenant;
  call.template_name = c.template_name;
  call.env = c.env;
  call.cold = c.cold;
  call.disk_mib = c.disk_mib;
  if (auto it = pending_net_.find(c.id); it != pending_net_.end()) {
    call.network = it->second;
    pending_net_.erase(it);
  }
  Error last(Code::kUnavailable, "no node could be reached");
  for (const auto& name : order) {
    // Recorded before the node is asked: its VM is never one the store
    // does not place there (the node's reconcile would destroy it).
    if (auto s = store_.setSandboxNode(c.id, name); !s.ok()) co_return s;
    node_of_[c.id] = name;
    if (auto s = share(c.tenant, c.id, name,
                       call.network ? call.network->credentials : std::vector<std::string>{});
        !s.ok())
      co_return s;
    placements_[name][c.id] = Placement{c.memory_mib, 0};
    bool connected = false;
    auto reply = co_await remote(nodes_[name]).call("create", call, opts_.long_call, &connected);
    if (alive.expired()) co_return Error(Code::kUnavailable, "the API replica is stopping");
    if (reply.ok()) {
      holding_[c.id] = reply->holding;
      // A create the node refused holds nothing there: its memory is not
      // counted against the node; one it runs is, until a heartbeat
      // taken after this answer counts it.
      if (!reply->status.ok() && reply->holding == ops::Holding::kNothing)
        unplace(name, c.id);
      else
        placements_[name][c.id].answered_ms = store::nowMs();
      co_return reply->status;
    }
    holding_[c.id] = ops::Holding::kNothing;
    if (connected) co_return std::move(reply).error();
    // Never reached: another node may take it.
    unplace(name, c.id);
    clusterLog().warn("sandbox {}: {}; trying another node", c.id, reply.error().message());
    last = std::move(reply).error();
  }
  co_return last;
}

asio::awaitable<Status> ClusterNode::pause(std::string id, bool keep_memory) {
  NodeCall c;
  c.id = id;
  c.memory = keep_memory;
  auto r = co_await callFor(id, "pause", c, opts_.long_call);
  co_return r.ok() ? r->status : Status(std::move(r).error());
}

asio::awaitable<Status> ClusterNode::resume(std::string tenant, std::string id) {
  if (auto where = route(id); where.ok())
    VESSEL_CO_TRY(share(tenant, id, (*where)->name(), credentialsOf(id)));
  NodeCall c;
  c.id = id;
  c.tenant = tenant;
  auto r = co_await callFor(id, "resume", c, opts_.long_call);
  co_return r.ok() ? r->status : Status(std::move(r).error());
}

asio::awaitable<Result<std::vector<Status>>> ClusterNode::fork(std::string tenant, std::string id,
                                                               std::vector<std::string> copies) {
  auto where = route(id);
  if (!where.ok()) co_return std::move(where).error();
  // The copies live where their parent does.
  auto names = credentialsOf(id);
  for (const auto& child : copies) {
    if (auto s = store_.setSandboxNode(child, (*where)->name()); !s.ok())
      co_return std::move(s).error();
    node_of_[child] = (*where)->name();
    VESSEL_CO_TRY(share(tenant, child, (*where)->name(), names));
  }
  NodeCall c;
  c.id = id;
  c.tenant = tenant;
  c.copies = copies;
  auto r = co_await callFor(id, "fork", c, opts_.long_call);
  if (!r.ok()) co_return std::move(r).error();
  if (!r->status.ok()) co_return std::move(r->status).error();
  for (size_t i = 0; i < copies.size() && i < r->copies.size(); ++i)
    holding_[copies[i]] = r->copies[i].ok() ? ops::Holding::kRunning : ops::Holding::kNothing;
  co_return std::move(r->copies);
}

// forkToTemplate and build: cluster_node_templates.cc.

asio::awaitable<Status> ClusterNode::destroy(std::string id) {
  auto where = route(id);
  if (!where.ok()) {
    // On no node, or on a lost one: nothing here to destroy; a lost node
    // destroys it when it returns (the store no longer wants it).
    if (where.error().code() == Code::kNotFound ||
        where.error().message().find(" lost") != std::string::npos) {
      holding_.erase(id);
      co_return okStatus();
    }
    co_return std::move(where).error();
  }
  NodeCall c;
  c.id = id;
  auto r = co_await callFor(id, "destroy", c, opts_.long_call);
  if (!r.ok()) co_return std::move(r).error();
  holding_.erase(id);
  node_of_.erase(id);
  if (r->status.ok()) {
    // Its node no longer reads them (migration 15); nothing keeps them.
    if (auto s = store_.setSandboxCredentials(id, {}); !s.ok())
      clusterLog().warn("sandbox {}: {}", id, s.error().message());
  }
  co_return r->status;
}

void ClusterNode::abort(const std::string& id) {
  auto where = route(id);
  if (!where.ok()) return;
  NodeCall c;
  c.id = id;
  asio::co_spawn(
      io_,
      [r = *where, c, t = opts_.short_call]() -> asio::awaitable<void> {
        (void)co_await r->call("abort", c, t);
      },
      asio::detached);
}

ops::Holding ClusterNode::holding(const std::string& id) const {
  if (auto it = holding_.find(id); it != holding_.end()) return it->second;
  // A sandbox another replica made: the lifecycle asks only after checking
  // its stored state, so a live node is taken to hold it running.
  auto it = node_of_.find(id);
  std::string name = it != node_of_.end() ? it->second : store_.sandboxNode(id).value_or("");
  auto n = nodes_.find(name);
  if (name.empty() || (n != nodes_.end() && stale(n->second, store::nowMs())))
    return ops::Holding::kNothing;
  return ops::Holding::kRunning;
}

asio::awaitable<Result<ops::Usage>> ClusterNode::usage(std::string id) {
  NodeCall c;
  c.id = id;
  auto r = co_await callFor(id, "usage", c, opts_.short_call);
  if (!r.ok()) co_return std::move(r).error();
  if (!r->status.ok()) co_return std::move(r->status).error();
  if (!r->usage) co_return Error(Code::kProtocol, "node reply: no usage");
  co_return *r->usage;
}

asio::awaitable<Result<ops::Holding>> ClusterNode::adopt(std::string, std::string id) {
  NodeCall c;
  c.id = id;
  auto r = co_await callFor(id, "holding", c, opts_.short_call);
  if (!r.ok()) co_return std::move(r).error();
  co_return r->holding;
}

asio::awaitable<std::vector<std::string>> ClusterNode::shutdown(bool) {
  if (timer_) {
    timer_->cancel();
    timer_.reset();
  }
  for (auto& [name, r] : remotes_) r->cancelAll("the API replica is stopping");
  co_return std::vector<std::string>{};
}

}  // namespace vessel::cluster
