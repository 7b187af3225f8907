#pragma once
// A real vesseld for an integration test binary: scratch state and cache
// directories, a free loopback port, its log, and the development key it
// writes on first start. Shared by the API and CLI end-to-end tests.
#include <chrono>
#include <string>
#include <vector>

#include "base/child_process.h"
#include "guest_env.h"

namespace vessel::testing {

class Vesseld {
 public:
  // Picks a free port; `vesseld` is the binary to run.
  explicit Vesseld(std::string vesseld);
  ~Vesseld();  // stops the daemon if it still runs (the scratch dir goes too)

  // Starts vesseld (appending to its log) and waits, bounded, until
  // /healthz answers. The first start builds the minimal template (one
  // guest boot) and writes the dev key.
  bool start();
  // SIGTERM, then SIGKILL after `grace`.
  ExitStatus stop(std::chrono::seconds grace = std::chrono::seconds(40));
  bool running() { return proc_.running() && !proc_.tryWait(); }
  ChildProcess& process() { return proc_; }

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string root() const { return dir_.path(); }
  std::string stateDir() const { return dir_.path() + "/state"; }
  std::string cacheDir() const { return dir_.path() + "/cache"; }
  // The development key from <state>/dev-api-key (empty before the first start).
  std::string devKey() const;
  std::string log() const;

 private:
  std::string binary_;
  ScratchDir dir_;
  uint16_t port_ = 0;
  ChildProcess proc_;
};

// GET /healthz answers 200 on 127.0.0.1:port.
bool healthy(uint16_t port);

}  // namespace vessel::testing
