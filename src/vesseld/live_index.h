#pragma once
// The live sandboxes of this machine, in memory: their tenant and state,
// read from the store once at start and kept current by the operation
// log's sandbox-state hook (on the io thread, as states are set). What a
// front end asks per request (envd's tenant of a sandbox, the ports'
// "is it paused") is answered here, never by a store scan.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/store.h"

namespace vessel::vesseld {

class LiveIndex {
 public:
  struct Entry {
    std::string tenant;
    store::SandboxState state;
  };
  // Seeds it from the store's live sandboxes (at start, once).
  void seed(store::Store& store) {
    if (auto live = store.listLiveSandboxes(); live.ok())
      for (const auto& sb : *live) by_id_[sb.id] = {sb.tenant_id, sb.state};
  }
  // The operation log's hook (ops::OperationLog::onSandboxState).
  void set(const std::string& tenant, const std::string& id, store::SandboxState st) {
    if (st == store::SandboxState::kDeleted || st == store::SandboxState::kFailed) {
      by_id_.erase(id);
      return;
    }
    by_id_[id] = {tenant, st};
  }
  std::optional<Entry> find(const std::string& id) const {
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::string> running() const {
    std::vector<std::string> ids;
    for (const auto& [id, e] : by_id_)
      if (e.state == store::SandboxState::kRunning) ids.push_back(id);
    return ids;
  }

 private:
  std::map<std::string, Entry> by_id_;
};

}  // namespace vessel::vesseld
