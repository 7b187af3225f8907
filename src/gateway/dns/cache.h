#pragma once
// The resolver's answer cache, shared fairly between sandboxes. Every entry
// belongs to the sandbox whose query filled it; a sandbox may own at most
// `per_owner` entries (its own oldest go first), and when the whole cache is
// full the sandbox owning the most gives one up. So a sandbox resolving
// thousands of random names (a flood, or DNS tunnelling in full mode)
// churns only its own share, never the entries others rely on. Hits are
// shared: any sandbox may read any entry.
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gateway/dns/message.h"

namespace vessel::gateway::dns {

class Cache {
 public:
  using Clock = std::chrono::steady_clock;
  Cache(size_t capacity, size_t per_owner) : capacity_(capacity), per_owner_(per_owner) {}

  // The records for `name` unless missing or expired at `now`.
  std::optional<std::vector<Record>> find(const std::string& name, Clock::time_point now);
  // Stores `records` for `ttl` from `now`, owned by `owner` (a sandbox id).
  void insert(const std::string& name, std::vector<Record> records, std::chrono::seconds ttl,
              const std::string& owner, Clock::time_point now);

  size_t size() const { return entries_.size(); }
  size_t ownedBy(const std::string& owner) const;

 private:
  struct Entry {
    std::vector<Record> records;
    Clock::time_point expires, stored;
    std::string owner;
  };
  void erase(std::map<std::string, Entry>::iterator it);
  // Drops `owner`'s entry stored first (expired ones go first anyway).
  void evictOldestOf(const std::string& owner);
  void dropExpired(Clock::time_point now);

  size_t capacity_, per_owner_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, size_t> owned_;
};

}  // namespace vessel::gateway::dns
