#include "gateway/registry.h"

#include "gateway/policy/decision.h"

namespace vessel::gateway {

Status Registry::setSandbox(const std::string& id, boost::asio::ip::address source,
                            policy::Policy p) {
  auto owner = by_source_.find(source);
  if (owner != by_source_.end() && owner->second != id) {
    return Error(Code::kAlreadyExists,
                 "source " + source.to_string() + " already belongs to " + owner->second);
  }
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) {
    Sandbox sb;
    sb.id = id;
    sb.source = source;
    sb.policy = std::move(p);
    by_source_[source] = id;
    sandboxes_.emplace(id, std::move(sb));
    counters_["policy_updates"]++;
    log_.forSandbox(id).info("policy generation {} mode {} source {}",
                             sandboxes_[id].policy.generation,
                             policy::modeName(sandboxes_[id].policy.mode), source.to_string());
    return okStatus();
  }
  Sandbox& sb = it->second;
  if (p.generation < sb.policy.generation) {
    return Error(Code::kFailedPrecondition, "policy generation " + std::to_string(p.generation) +
                                                " older than held " +
                                                std::to_string(sb.policy.generation));
  }
  if (sb.source != source) {
    by_source_.erase(sb.source);
    by_source_[source] = id;
    sb.source = source;
  }
  sb.policy = std::move(p);
  counters_["policy_updates"]++;
  log_.forSandbox(id).info("policy generation {} mode {}", sb.policy.generation,
                           policy::modeName(sb.policy.mode));
  enforce(sb);
  return okStatus();
}

Status Registry::removeSandbox(const std::string& id) {
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return Error(Code::kNotFound, "sandbox " + id);
  // Reset everything: a removed sandbox keeps no connection, and its source
  // address may be handed to the next sandbox in the slot.
  it->second.policy = policy::Policy{};
  enforce(it->second);
  by_source_.erase(it->second.source);
  sandboxes_.erase(it);
  return okStatus();
}

Sandbox* Registry::bySource(const boost::asio::ip::address& source) {
  auto it = by_source_.find(source);
  if (it == by_source_.end()) return nullptr;
  return &sandboxes_.at(it->second);
}

Sandbox* Registry::byId(const std::string& id) {
  auto it = sandboxes_.find(id);
  return it == sandboxes_.end() ? nullptr : &it->second;
}

void Registry::track(Sandbox& sb, const std::shared_ptr<ConnHandle>& c) {
  // Prune closed connections every so often so the list stays proportional
  // to live flows without a walk on every accept.
  if (++tracked_ % 64 == 0) sb.conns.remove_if([](const auto& w) { return w.expired(); });
  sb.conns.push_back(c);
}

void Registry::enforce(Sandbox& sb) {
  const policy::Policy& p = sb.policy;
  for (auto it = sb.conns.begin(); it != sb.conns.end();) {
    auto c = it->lock();
    if (!c) {
      it = sb.conns.erase(it);
      continue;
    }
    // A terminated connection injects the value it started with: if that
    // value is no longer the policy's (changed or revoked), it goes too.
    const policy::Credential* cred = c->name.empty() ? nullptr : p.credentialFor(c->name);
    bool same_secret = c->credential.empty() ? cred == nullptr || !c->terminated
                                             : cred != nullptr && cred->value == c->credential;
    bool still = policy::permits(p, c->name, c->address, c->port, c->by_address) && same_secret &&
                 (p.mode == policy::Mode::kFull || !c->terminated || cred != nullptr ||
                  p.inspects(c->name, c->port));
    if (!still) {
      record({"tcp", sb.id, c->name, "", c->port, false, "policy-changed"});
      if (c->reset) c->reset();
      it = sb.conns.erase(it);
      continue;
    }
    ++it;
  }
}

void Registry::record(const FlowEvent& e) {
  const char* verdict = e.allowed ? "allow" : "deny";
  log_.forSandbox(std::string(e.sandbox))
      .info("{} name={} address={} port={} verdict={} reason={}", e.kind,
            e.name.empty() ? "-" : e.name, e.address.empty() ? "-" : e.address, e.port, verdict,
            e.reason);
  counters_[std::string(e.kind) + "_" + verdict]++;
  // Reasons are a small fixed vocabulary (see docs/gateway.md); the part
  // after ':' carries detail and is not a counter key.
  std::string_view reason = e.reason.substr(0, e.reason.find(':'));
  counters_[std::string(e.kind) + "_" + verdict + "_" + std::string(reason)]++;
  // Kept for its sandbox's log; a flow of no known sandbox ("?<source>") is not.
  if (e.sandbox.empty() || e.sandbox.front() == '?') return;
  Decision d;
  d.seq = next_decision_++;
  d.at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
  d.kind = e.kind;
  d.sandbox = e.sandbox;
  d.name = e.name;
  d.address = e.address;
  d.port = e.port;
  d.allowed = e.allowed;
  d.reason = e.reason;
  decisions_.push_back(std::move(d));
  if (decisions_.size() > kMaxKeptDecisions) decisions_.pop_front();
}

std::vector<Decision> Registry::decisionsAfter(uint64_t after, size_t limit) const {
  std::vector<Decision> out;
  if (decisions_.empty() || after >= decisions_.back().seq) return out;
  // Numbered without gaps: the first one after `after` is found by index.
  uint64_t first = decisions_.front().seq;
  size_t i = after < first ? 0 : static_cast<size_t>(after + 1 - first);
  for (; i < decisions_.size() && out.size() < limit; ++i) out.push_back(decisions_[i]);
  return out;
}

size_t Registry::resetIdle(std::chrono::steady_clock::time_point before) {
  size_t n = 0;
  for (auto& [id, sb] : sandboxes_) {
    for (auto it = sb.conns.begin(); it != sb.conns.end();) {
      auto c = it->lock();
      if (!c || c->last_active < before) {
        if (c) {
          record({"tcp", sb.id, c->name, "", c->port, false, "idle-timeout"});
          if (c->reset) c->reset();
          ++n;
        }
        it = sb.conns.erase(it);
        continue;
      }
      ++it;
    }
  }
  return n;
}

size_t Registry::liveConnections() {
  size_t n = 0;
  for (auto& [id, sb] : sandboxes_) {
    for (auto& w : sb.conns) n += !w.expired();
  }
  return n;
}

}  // namespace vessel::gateway
