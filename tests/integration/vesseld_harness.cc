#include "vesseld_harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/fd.h"

namespace vessel::testing {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;

Vesseld::Vesseld(VesseldOptions o)
    : opts_(std::move(o)),
      port_(freePort()),
      data_port_(freePort()),
      e2b_port_(freePort()),
      envd_port_(freePort()) {}

Vesseld::Vesseld(const std::string& binary, std::vector<std::string> extra_args)
    : own_root_(std::make_unique<ScratchDir>()),
      opts_{binary, kernelPath(), minimalImage(), own_root_->path(), std::move(extra_args)},
      port_(freePort()),
      data_port_(freePort()),
      e2b_port_(freePort()),
      envd_port_(freePort()) {}

Vesseld::~Vesseld() {
  if (proc_.running()) (void)stop();
}

bool Vesseld::start() {
  auto out = Fd::open(opts_.root + "/vesseld.log", O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (!out.ok()) return false;
  SpawnOptions so;
  so.argv = {opts_.binary, "--state-dir", stateDir(), "--cache-dir", opts_.root + "/cache",
             "--listen", "127.0.0.1:" + std::to_string(port_), "--data-listen",
             "127.0.0.1:" + std::to_string(data_port_),
             // Never E2B's default port: tests run beside `make up` and each other.
             "--e2b-listen", "127.0.0.1:" + std::to_string(e2b_port_), "--e2b-envd-listen",
             "127.0.0.1:" + std::to_string(envd_port_), "--accel", "tcg", "--kernel", opts_.kernel,
             "--minimal-image", opts_.minimal_image};
  // A test's daemon stops its VMs at a clean stop unless the test is about
  // VMs outliving it: a VM left behind would outlive the test.
  if (!keep_vms_on_stop_) so.argv.push_back("--stop-vms-on-exit");
  for (auto& a : opts_.extra_args) so.argv.push_back(a);
  so.fds = {{out->get(), 1}, {out->get(), 2}};
  so.die_with_parent = true;
  auto p = ChildProcess::spawn(so);
  if (!p.ok()) return false;
  proc_ = std::move(*p);
  for (int i = 0; i < 3000; ++i) {
    if (call("GET", "/healthz", "", "").status == 200) {
      if (key_.empty()) {
        std::ifstream kf(stateDir() + "/dev-api-key");
        std::getline(kf, key_);
      }
      return true;
    }
    if (proc_.tryWait()) return false;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

void Vesseld::kill9() {
  (void)proc_.signal(SIGKILL);
  (void)proc_.waitFor(10s);
}

ExitStatus Vesseld::stop(std::chrono::seconds grace) { return proc_.terminate(grace); }

std::string Vesseld::log() const {
  std::ifstream f(opts_.root + "/vesseld.log");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

Reply Vesseld::call(const std::string& method, const std::string& target, const std::string& body,
                    const std::string& key, const std::vector<std::string>& headers,
                    const std::function<bool(const std::string&)>& enough) const {
  Request r;
  r.method = method;
  r.target = target;
  r.body = body;
  r.bearer = key == "-" ? key_ : key;
  r.headers = headers;
  auto s = HttpStream::open(port_, r);
  if (!s) return {};
  if (enough)
    s->readUntil(enough);
  else
    s->readAll();
  checkContract(method, target, s->reply());
  return s->reply();
}

void Vesseld::checkContract(const std::string& method, const std::string& target,
                            const Reply& r) const {
  // Status 0: no answer at all, which the caller sees and reports.
  if (!contract_ || r.status == 0) return;
  std::string what =
      method + " " + target + " answered " + std::to_string(r.status) + " " + r.body.substr(0, 300);
  auto st = contract_->checkRawResponse(method, target, r.status, r.header("Content-Type"), r.body);
  if (st.ok()) return;
  // Refusals of the HTTP layer, before any operation (the spec's
  // description lists them), and requests outside the spec on purpose (an
  // unknown path, verb or method): still the one error shape of every failure.
  bool transport = r.status == 413 || r.status == 431;
  bool outside = st.error().code() == Code::kNotFound &&
                 (r.status == 400 || r.status == 404 || r.status == 405);
  if (transport || outside) {
    auto e = contract_->checkSchema("Error", r.js());
    if (!e.ok()) ADD_FAILURE() << "contract: " << e.error().message() << "\n  " << what;
    return;
  }
  ADD_FAILURE() << "contract (api/openapi.yaml): " << st.error().message() << "\n  " << what;
}

void endSuite(Vesseld*& d) {
  using namespace std::chrono_literals;
  if (d && d->running()) {
    auto list = d->call("GET", "/v1/sandboxes?page_size=100").js();
    if (list.is_object())
      for (auto& s : list.at("sandboxes").as_array())
        d->call("DELETE", "/v1/sandboxes/" + str(s, "id"));
    for (int i = 0; i < 300 && !d->qemuPids().empty(); ++i) std::this_thread::sleep_for(100ms);
    auto e = d->stop();
    EXPECT_TRUE(e.exited && e.code == 0) << e.describe();
  }
  if (d) {
    auto left = d->qemuPids();
    EXPECT_TRUE(left.empty()) << left.size() << " QEMU process(es) left\n" << d->log();
    for (int pid : left) ::kill(pid, SIGKILL);
  }
  delete d;
  d = nullptr;
}

const OpenApi* apiContract() {
  static const OpenApi* spec = [] {
    auto s = OpenApi::load(VESSEL_OPENAPI_SPEC);
    if (!s.ok()) {
      ADD_FAILURE() << s.error().message();
      return static_cast<OpenApi*>(nullptr);
    }
    return new OpenApi(std::move(*s));  // lives as long as the process
  }();
  if (!spec) ADD_FAILURE() << "api/openapi.yaml could not be loaded";
  return spec;
}

std::string Vesseld::finish(const std::string& op, const std::string& key) const {
  Reply r = call("GET", "/v1/operations/" + op + "/events", "", key);
  if (r.status != 200) return "<status " + std::to_string(r.status) + ">";
  auto ev = parseSse(r.body);
  if (ev.empty()) return "<no events>";
  return str(ev.back().data, "state");
}

std::string Vesseld::createSandbox(const std::string& body, std::string* why) const {
  Reply r = call("POST", "/v1/sandboxes", body);
  auto v = r.js();
  if (r.status != 202 || !v.is_object()) {
    if (why) *why = "create answered " + std::to_string(r.status) + ": " + r.body;
    return "";
  }
  std::string op = str(v.at("operation"), "id");
  std::string st = finish(op);
  if (st != "done") {
    if (why) *why = "create " + st + ": " + call("GET", "/v1/operations/" + op).body;
    return "";
  }
  return str(v.at("sandbox"), "id");
}

bool Vesseld::deleteSandbox(const std::string& id) const {
  sessions_.erase(id);
  Reply r = call("DELETE", "/v1/sandboxes/" + id);
  if (r.status != 202) return false;
  return finish(str(r.js().at("operation"), "id")) == "done";
}

std::string Vesseld::session(const std::string& id, const std::string& key) const {
  Reply r = call("POST", "/v1/sandboxes/" + id + "/sessions", "", key);
  if (r.status != 201) return "";
  std::string t = str(r.js(), "token");
  return t == "<missing>" ? "" : t;
}

Reply Vesseld::data(const std::string& token, const std::string& method, const std::string& target,
                    const std::string& body, bool json) const {
  Request r;
  r.method = method;
  r.target = target;
  r.body = body;
  r.bearer = token;
  r.json = json;
  Reply reply = testing::call(data_port_, r);
  checkContract(method, target, reply);
  return reply;
}

Vesseld::ExecOutput collectExec(const std::string& sse_body) {
  Vesseld::ExecOutput o;
  for (const auto& e : parseSse(sse_body)) {
    o.types.push_back(e.type);
    if (e.type == "stdout") o.out += unbase64(str(e.data, "data"));
    if (e.type == "stderr") o.err += unbase64(str(e.data, "data"));
    if (e.type == "exit" && e.data.is_object()) {
      o.exit_code = static_cast<int>(e.data.at("exit_code").to_number<int64_t>());
      o.signal = static_cast<int>(e.data.at("signal").to_number<int64_t>());
    }
  }
  return o;
}

Vesseld::ExecOutput Vesseld::exec(const std::string& token, const std::string& body) const {
  Reply r = data(token, "POST", "/v1/exec", body);
  if (r.status != 200) {
    ExecOutput o;
    o.err = "exec answered " + std::to_string(r.status) + ": " + r.body;
    return o;
  }
  return collectExec(r.body);
}

std::string Vesseld::sh(const std::string& id, const std::string& cmd,
                        const std::string& user) const {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    std::string t = session(id);
    if (t.empty()) return "NO SESSION for " + id;
    it = sessions_.emplace(id, t).first;
  }
  json::object o{{"shell", cmd}, {"user", user}};
  ExecOutput x = exec(it->second, json::serialize(o));
  return x.out + x.err;
}

std::vector<int> Vesseld::qemuPids() const { return qemuProcessesUsing(stateDir() + "/"); }

std::vector<std::string> CliRun::lines() const {
  std::vector<std::string> v;
  std::istringstream s(out);
  for (std::string l; std::getline(s, l);) v.push_back(l);
  return v;
}

std::string CliRun::last() const {
  auto v = lines();
  return v.empty() ? "" : v.back();
}

CliRun runCli(const std::string& cli, const Vesseld& d, const std::vector<std::string>& args,
              const CliCall& call) {
  ScratchDir io;
  CliRun r;
  auto out = Fd::open(io.path() + "/out", O_WRONLY | O_CREAT | O_TRUNC, 0600);
  auto err = Fd::open(io.path() + "/err", O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (!out.ok() || !err.ok()) return r;
  SpawnOptions so;
  so.argv = {cli};
  so.argv.insert(so.argv.end(), args.begin(), args.end());
  so.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
            "VESSEL_API_URL=" + (call.url.empty() ? d.url() : call.url),
            "VESSEL_API_KEY=" + (call.key == "-" ? d.key() : call.key),
            "VESSEL_STATE_DIR=" + d.stateDir()};
  so.fds = {{out->get(), 1}, {err->get(), 2}};
  so.die_with_parent = true;
  auto p = ChildProcess::spawn(so);
  if (!p.ok()) return r;
  auto e = p->waitFor(call.timeout);
  if (e.ok() && e->exited) r.code = e->code;
  auto slurp = [](const std::string& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  r.out = slurp(io.path() + "/out");
  r.err = slurp(io.path() + "/err");
  return r;
}

}  // namespace vessel::testing
