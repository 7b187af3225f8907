#include "gateway/dns/cache.h"

#include <algorithm>

namespace vessel::gateway::dns {

std::optional<std::vector<Record>> Cache::find(const std::string& name, Clock::time_point now) {
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  if (it->second.expires <= now) {
    erase(it);
    return std::nullopt;
  }
  return it->second.records;
}

size_t Cache::ownedBy(const std::string& owner) const {
  auto it = owned_.find(owner);
  return it == owned_.end() ? 0 : it->second;
}

void Cache::erase(std::map<std::string, Entry>::iterator it) {
  auto o = owned_.find(it->second.owner);
  if (o != owned_.end() && --o->second == 0) owned_.erase(o);
  entries_.erase(it);
}

void Cache::evictOldestOf(const std::string& owner) {
  auto oldest = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->second.owner == owner &&
        (oldest == entries_.end() || it->second.stored < oldest->second.stored))
      oldest = it;
  if (oldest != entries_.end()) erase(oldest);
}

void Cache::dropExpired(Clock::time_point now) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->second.expires <= now) erase(it);
    it = next;
  }
}

void Cache::insert(const std::string& name, std::vector<Record> records, std::chrono::seconds ttl,
                   const std::string& owner, Clock::time_point now) {
  if (ttl.count() <= 0 || capacity_ == 0 || per_owner_ == 0) return;
  if (auto it = entries_.find(name); it != entries_.end()) erase(it);
  if (ownedBy(owner) >= per_owner_) evictOldestOf(owner);
  if (entries_.size() >= capacity_) {
    dropExpired(now);
    if (entries_.size() >= capacity_) {
      // The largest owner gives one up (the newcomer itself if it is the
      // largest): nobody under their fair share loses anything.
      auto biggest =
          std::max_element(owned_.begin(), owned_.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      if (biggest != owned_.end()) evictOldestOf(std::string(biggest->first));
    }
  }
  entries_[name] = Entry{std::move(records), now + ttl, now, owner};
  ++owned_[owner];
}

}  // namespace vessel::gateway::dns
