#include "vesseld/egress_policies.h"

#include <algorithm>
#include <boost/json.hpp>
#include <utility>
#include <vector>

#include "base/log.h"
#include "gateway/policy/policy.h"
#include "gateway/policy/public_suffix.h"

namespace vessel::vesseld {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

Logger netLog(const std::string& id = "-") { return Logger("node", id); }

Error bad(const std::string& what) { return Error(Code::kInvalidArgument, what); }

}  // namespace

Status checkWildcards(const ops::NetworkSpec& s) {
  for (const auto* list : {&s.allow, &s.inspect}) {
    for (const std::string& text : *list) {
      if (gateway::policy::looksLikeAddress(text)) continue;  // IP/CIDR rules have no suffix
      auto r = gateway::policy::parseRule(text);
      if (!r.ok()) return bad("'" + text + "': " + r.error().message());
      if (r->wildcard && gateway::policy::isPublicSuffix(r->name))
        return bad("'" + text + "': a wildcard on the public suffix '" + r->name +
                   "' would reach every name registered under it (vesseld "
                   "--allow-public-suffix-wildcards permits it)");
    }
  }
  return okStatus();
}

ops::NetworkSpec EgressPolicies::defaults() const {
  ops::NetworkSpec s;
  s.mode = egress_ ? default_mode_ : "none";
  return s;
}

Result<json::object> EgressPolicies::policyFor(const std::string& tenant,
                                               const std::string& sandbox_id,
                                               const ops::NetworkSpec& s, bool strict) {
  json::object p{{"mode", s.mode}};
  json::array allow, creds;
  for (const auto& a : s.allow) allow.emplace_back(a);
  for (const auto& name : s.credentials) {
    VESSEL_ASSIGN_OR_RETURN(auto c, read_credential_(tenant, sandbox_id, name));
    if (!c) {
      if (strict) return Error(Code::kNotFound, "credential '" + name + "' does not exist");
      netLog().warn("credential '{}' no longer exists; left out of the policy", name);
      continue;
    }
    json::array hosts;
    for (const auto& h : c->hosts) hosts.emplace_back(h);
    creds.push_back(json::object{
        {"name", c->name}, {"hosts", hosts}, {"header", c->header}, {"value", c->value}});
  }
  p["allow"] = std::move(allow);
  p["credentials"] = std::move(creds);
  json::array inspect;
  for (const auto& i : s.inspect) inspect.emplace_back(i);
  p["inspect"] = std::move(inspect);
  json::array deny;
  for (const auto& d : s.deny) deny.emplace_back(d);
  p["deny"] = std::move(deny);
  // What the gateway will accept, checked before anything depends on it.
  json::object check = p;
  check["generation"] = 1;  // Egress gives the real one
  if (auto v = gateway::policy::Policy::fromJson(check); !v.ok())
    return Error(Code::kInvalidArgument, "network policy: " + v.error().message());
  return p;
}

Result<node::GuestNetwork> EgressPolicies::prepare(const std::string& tenant,
                                                   const std::string& sandbox_id,
                                                   const ops::NetworkSpec& given) {
  ops::NetworkSpec s = given;
  if (s.mode.empty()) s.mode = defaults().mode;  // credentials alone: the node's default
  if (!egress_ && s.mode != "none")
    return Error(Code::kFailedPrecondition,
                 "this node runs without egress (vesseld --no-egress): only network mode none");
  if (!allow_public_suffix_wildcards_) VESSEL_TRY(checkWildcards(s));
  VESSEL_TRY(policyFor(tenant, sandbox_id, s));
  VESSEL_TRY(store_.setSandboxNetwork(sandbox_id, s));
  node::GuestNetwork g;
  g.route = s.mode != "none";
  if (g.route) g.ca_pem = egress_->caPem();
  return g;
}

Status EgressPolicies::inherit(const std::string& parent, const std::string& child) {
  VESSEL_ASSIGN_OR_RETURN(auto s, store_.getSandboxNetwork(parent));
  if (!s) return okStatus();
  return store_.setSandboxNetwork(child, *s);
}

Result<ops::NetworkSpec> EgressPolicies::stored(const std::string& sandbox_id) {
  VESSEL_ASSIGN_OR_RETURN(auto s, store_.getSandboxNetwork(sandbox_id));
  if (!s) {
    ops::NetworkSpec none;  // a sandbox from before egress: no network
    none.mode = "none";
    return none;
  }
  return std::move(*s);
}

asio::awaitable<Status> EgressPolicies::attach(std::string tenant,
                                               std::shared_ptr<node::Sandbox> sb) {
  if (!egress_) co_return okStatus();
  auto s = stored(sb->id());
  if (!s.ok()) co_return std::move(s).error();
  if (!sb->slot()) {
    // A VM from a run without egress (mode none) needs nothing.
    if (s->mode == "none") co_return okStatus();
    co_return Error(Code::kFailedPrecondition,
                    "sandbox " + sb->id() + " has no network slot; its template has no NIC");
  }
  auto policy = policyFor(tenant, sb->id(), *s, false);
  if (!policy.ok()) co_return std::move(policy).error();
  std::string id = sb->id(), source = sb->slot()->sourceAddress();
  Status set = co_await egress_->setSandbox(id, source, std::move(*policy));
  if (!set.ok()) {
    // No registration may outlive a sandbox that does not run with it.
    if (set.error().code() != Code::kInvalidArgument) egress_->forget(id);
    co_return std::move(set).error();
  }
  attached_[id] = {std::move(tenant), std::move(source)};
  co_return okStatus();
}

asio::awaitable<void> EgressPolicies::credentialChanged(std::string tenant,
                                                        std::string credential) {
  if (!egress_) co_return;
  // A copy: attached_ may change while the gateway is waited for.
  std::vector<std::pair<std::string, std::string>> mine;  // id, source
  for (const auto& [id, a] : attached_)
    if (a.tenant == tenant) mine.emplace_back(id, a.source);
  for (const auto& [id, source] : mine) {
    auto s = stored(id);
    if (!s.ok()) continue;
    if (std::find(s->credentials.begin(), s->credentials.end(), credential) == s->credentials.end())
      continue;
    auto policy = policyFor(tenant, id, *s, false);
    Status st = okStatus();
    if (policy.ok())
      st = co_await egress_->setSandbox(id, source, std::move(*policy));
    else
      st = policy.error();
    if (!st.ok())
      netLog(id).error("credential '{}' change not applied: {}", credential, st.error().message());
  }
}

asio::awaitable<void> EgressPolicies::detach(std::string sandbox_id) {
  if (!egress_ || !attached_.erase(sandbox_id)) co_return;
  if (auto s = co_await egress_->removeSandbox(sandbox_id); !s.ok())
    netLog(sandbox_id).warn("{}", s.error().message());
}

asio::awaitable<Result<ops::NetworkSpec>> EgressPolicies::update(std::string tenant, std::string id,
                                                                 ops::NetworkSpec s, bool paused) {
  if (s.mode.empty()) s.mode = defaults().mode;
  if (!egress_ && s.mode != "none")
    co_return Error(Code::kFailedPrecondition,
                    "this node runs without egress: only network mode none");
  if (!allow_public_suffix_wildcards_) VESSEL_CO_TRY(checkWildcards(s));
  auto policy = policyFor(tenant, id, s);
  if (!policy.ok()) co_return std::move(policy).error();
  auto old = stored(id);
  if (old.ok() && (old->mode == "none") != (s.mode == "none") && !paused)
    // The guest's route is set up once per restore; switching between none
    // and the others needs its interface reconfigured. Pause/resume does it.
    netLog(id).info("network mode {} -> {}: the guest's route changes on next resume", old->mode,
                    s.mode);
  VESSEL_CO_TRY(store_.setSandboxNetwork(id, s));
  if (auto it = attached_.find(id); it != attached_.end()) {
    // Live: the gateway resets open connections the new policy refuses
    // before it answers.
    std::string source = it->second.source;
    if (auto st = co_await egress_->setSandbox(id, source, std::move(*policy)); !st.ok()) {
      netLog(id).error("live network change: {}", st.error().message());
      co_return Error(Code::kUnavailable, st.error().message());
    }
  }
  co_return s;
}

}  // namespace vessel::vesseld
