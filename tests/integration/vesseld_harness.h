#pragma once
// A real vesseld for tests and benchmarks: started on its own state dir and
// a free port, reached over real HTTP, stopped cleanly or killed with
// SIGKILL. Every read is bounded, so a hung daemon fails the caller.
#include <boost/json.hpp>
#include <functional>
#include <string>
#include <vector>

#include "base/child_process.h"

namespace vessel::testing {

struct HttpReply {
  int status = 0;
  std::string head, body;
  boost::json::value js() const;
};

struct SseEvent {
  int64_t id = 0;
  std::string type;
  boost::json::value data;
};
std::vector<SseEvent> parseSse(const std::string& body);
// v[k] as a string, or "<missing>".
std::string str(const boost::json::value& v, const char* k);

struct VesseldOptions {
  std::string binary, kernel, minimal_image;
  std::string root;  // state/, cache/ and vesseld.log go here
  std::vector<std::string> extra_args;
};

class Vesseld {
 public:
  explicit Vesseld(VesseldOptions o);
  ~Vesseld();
  // Starts (again) on the same state dir and port, appending to the log;
  // true once /healthz answers. The first start reads the dev key.
  bool start();
  void kill9();
  ExitStatus stop();
  bool running() { return proc_.running(); }

  // One request on its own connection. key "-" is the dev key, "" none.
  // Reads until the server closes or `enough` says the body suffices.
  HttpReply call(const std::string& method, const std::string& target, const std::string& body = "",
                 const std::string& key = "-", const std::vector<std::string>& headers = {},
                 const std::function<bool(const std::string&)>& enough = nullptr) const;
  // Follows an operation's events to its end; its final state or "<...>".
  std::string finish(const std::string& op, const std::string& key = "-") const;

  // Flags for the next start().
  std::vector<std::string>& extraArgs() { return opts_.extra_args; }
  const std::string& key() const { return key_; }
  uint16_t port() const { return port_; }
  std::string stateDir() const { return opts_.root + "/state"; }
  std::string log() const;
  // QEMU processes whose command line names this daemon's state dir.
  std::vector<int> qemuPids() const;

 private:
  VesseldOptions opts_;
  ChildProcess proc_;
  uint16_t port_ = 0;
  std::string key_;
};

}  // namespace vessel::testing
