#pragma once
// A real vesseld for tests and benchmarks: its own state dir, free ports
// for both planes, its log; reached over real HTTP, stopped cleanly or
// killed with SIGKILL. Every read is bounded, so a hung daemon fails the
// caller. The one way the end-to-end tests and bench/api run vesseld.
#include <boost/json.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/child_process.h"
#include "guest_env.h"
#include "http_client.h"
#include "openapi_validator.h"

namespace vessel::testing {

struct VesseldOptions {
  std::string binary, kernel, minimal_image;
  std::string root;  // state/, cache/ and vesseld.log go here
  std::vector<std::string> extra_args;
};

class Vesseld {
 public:
  explicit Vesseld(VesseldOptions o);
  // `binary` with the kernel and image `make test` exports, in a scratch
  // directory removed with this object.
  explicit Vesseld(const std::string& binary, std::vector<std::string> extra_args = {});
  ~Vesseld();  // stops the daemon if it still runs
  // Starts (again) on the same state dir and ports, appending to the log;
  // true once /healthz answers. The first start builds the minimal
  // template (one guest boot) and writes the dev key, read here.
  bool start();
  void kill9();
  // SIGTERM, then SIGKILL after `grace`.
  ExitStatus stop(std::chrono::seconds grace = std::chrono::seconds(40));
  bool running() { return proc_.running() && !proc_.tryWait(); }
  pid_t pid() const { return proc_.pid(); }

  // One request on its own connection. key "-" is the dev key, "" none.
  // Reads until the server closes or `enough` says the body suffices.
  Reply call(const std::string& method, const std::string& target, const std::string& body = "",
             const std::string& key = "-", const std::vector<std::string>& headers = {},
             const std::function<bool(const std::string&)>& enough = nullptr) const;
  // Follows an operation's events to its end; its final state or "<...>".
  std::string finish(const std::string& op, const std::string& key = "-") const;

  // The common steps, through the public API. Failures come back as "" or
  // false; `why` (if given) says what went wrong, for the test's message.
  std::string createSandbox(const std::string& body = "{}", std::string* why = nullptr) const;
  bool deleteSandbox(const std::string& id) const;
  // A data-plane session token for the sandbox ("" on failure).
  std::string session(const std::string& id, const std::string& key = "-") const;
  // A request to the data plane with a session token.
  Reply data(const std::string& token, const std::string& method, const std::string& target,
             const std::string& body = "", bool json = true) const;

  struct ExecOutput {
    std::string out, err;
    int exit_code = -1;
    int signal = 0;
    std::vector<std::string> types;  // the SSE event types in order
  };
  // Runs POST /v1/exec with `body` to the end.
  ExecOutput exec(const std::string& token, const std::string& body) const;
  // A shell command as `user` in the sandbox (a session per sandbox is
  // opened on first use and kept): stdout then stderr.
  std::string sh(const std::string& id, const std::string& cmd,
                 const std::string& user = "root") const;

  // Checks every later reply of either plane against `spec` (nullptr:
  // none): a reply api/openapi.yaml does not allow is a test failure
  // (ADD_FAILURE). Event streams and downloads are checked by status and
  // Content-Type only; a request outside the spec (unknown path or method)
  // and a 413 or 431 of the HTTP layer must still carry a JSON Error.
  void setContract(const OpenApi* spec) { contract_ = spec; }

  // Flags for the next start().
  std::vector<std::string>& extraArgs() { return opts_.extra_args; }
  // From the next start(), a clean stop leaves running VMs (and their
  // network slots) for the next vesseld, as vesseld does by default. Off
  // by default here: the daemon gets --stop-vms-on-exit, so no VM outlives
  // a test.
  void keepVmsOnStop(bool keep) { keep_vms_on_stop_ = keep; }
  const std::string& key() const { return key_; }
  uint16_t port() const { return port_; }
  uint16_t dataPort() const { return data_port_; }
  uint16_t e2bPort() const { return e2b_port_; }
  uint16_t envdPort() const { return envd_port_; }  // E2B envd
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string root() const { return opts_.root; }
  std::string stateDir() const { return opts_.root + "/state"; }
  std::string cacheDir() const { return opts_.root + "/cache"; }
  std::string log() const;
  // QEMU processes whose command line names this daemon's state dir.
  std::vector<int> qemuPids() const;

 private:
  std::unique_ptr<ScratchDir> own_root_;
  VesseldOptions opts_;
  ChildProcess proc_;
  uint16_t port_ = 0, data_port_ = 0, e2b_port_ = 0, envd_port_ = 0;
  std::string key_;
  mutable std::map<std::string, std::string> sessions_;  // sandbox id -> token
  const OpenApi* contract_ = nullptr;
  bool keep_vms_on_stop_ = false;
  void checkContract(const std::string& method, const std::string& target, const Reply& r) const;
};

// The end of a test suite's daemon: whatever a failed test left is deleted
// (so no VM outlives the suite), the daemon is stopped and must exit
// cleanly, and no QEMU of it may remain (any left is killed, and the
// suite fails). Deletes `d` and sets it to null.
void endSuite(Vesseld*& d);

// api/openapi.yaml, loaded once for the process; nullptr (and a test
// failure) if it cannot be loaded.
const OpenApi* apiContract();

// Exec output from the SSE body of POST /v1/exec.
Vesseld::ExecOutput collectExec(const std::string& sse_body);

// What one run of the `vessel` CLI printed, and its exit code (-1 when it
// could not be started or did not exit in time).
struct CliRun {
  int code = -1;
  std::string out, err;
  std::vector<std::string> lines() const;  // of out
  std::string last() const;                // out's last line, or ""
};

struct CliCall {
  std::string key = "-";  // VESSEL_API_KEY; "-": the daemon's dev key
  std::string url;        // VESSEL_API_URL; "": the daemon's
  std::chrono::seconds timeout{300};
};

// Runs `cli ARGS...` against `d` with VESSEL_API_URL, VESSEL_API_KEY and
// VESSEL_STATE_DIR and nothing else from our environment; stdout and stderr
// are files, never a terminal, so the CLI must be quiet and scriptable.
CliRun runCli(const std::string& cli, const Vesseld& d, const std::vector<std::string>& args,
              const CliCall& call = {});

}  // namespace vessel::testing
