#pragma once
// Wall-clock time as an injectable dependency. Lifetimes, session expiry,
// the reaper and the store's timestamps read it through WallClock, so tests
// move time forward instead of sleeping.
#include <atomic>
#include <chrono>
#include <cstdint>

namespace vessel {

class WallClock {
 public:
  virtual ~WallClock() = default;
  // Milliseconds since the Unix epoch.
  virtual int64_t nowMs() const = 0;
};

class SystemWallClock final : public WallClock {
 public:
  int64_t nowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// The process's real clock (a function-local static: no global constructor).
inline const WallClock& systemWallClock() {
  static const SystemWallClock c;
  return c;
}

// A clock that moves only when told to (tests).
class FakeWallClock final : public WallClock {
 public:
  explicit FakeWallClock(int64_t start_ms = 1'800'000'000'000) : now_(start_ms) {}
  int64_t nowMs() const override { return now_.load(); }
  void advance(std::chrono::milliseconds d) { now_ += d.count(); }
  void set(int64_t ms) { now_ = ms; }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace vessel
