#pragma once
// ScopeExit runs a callable when it leaves scope unless dismissed; for cleanup
// that has no RAII type of its own (a directory removed on a failed build).
#include <utility>

namespace vessel {

template <typename F>
class ScopeExit {
 public:
  explicit ScopeExit(F f) : f_(std::move(f)) {}
  ScopeExit(const ScopeExit&) = delete;
  ScopeExit& operator=(const ScopeExit&) = delete;
  ~ScopeExit() {
    if (armed_) f_();
  }
  void dismiss() { armed_ = false; }

 private:
  F f_;
  bool armed_ = true;
};

}  // namespace vessel
