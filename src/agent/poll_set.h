#pragma once
// One round of the agent's poll(2) loop: components register the fds they
// want watched with a handler, and may ask to be woken by a deadline.
#include <poll.h>

#include <algorithm>
#include <functional>
#include <vector>

namespace vessel::agent {

class PollSet {
 public:
  void add(int fd, short events, std::function<void(short)> handler) {
    fds_.push_back({fd, events, 0});
    handlers_.push_back(std::move(handler));
  }
  // Wake within ms even if no fd is ready (deadlines, work that needs no fd).
  void wakeWithin(int ms) { timeout_ = timeout_ < 0 ? ms : std::min(timeout_, ms); }

  // Polls and runs the handlers of ready fds.
  void run() {
    int n = ::poll(fds_.data(), fds_.size(), timeout_);
    if (n <= 0) return;
    for (size_t i = 0; i < fds_.size(); ++i)
      if (fds_[i].revents) handlers_[i](fds_[i].revents);
  }

 private:
  std::vector<pollfd> fds_;
  std::vector<std::function<void(short)>> handlers_;
  int timeout_ = -1;
};

}  // namespace vessel::agent
