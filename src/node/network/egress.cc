#include "node/network/egress.h"

#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <thread>

#include "base/log.h"
#include "os/command.h"
#include "os/netns.h"

namespace vessel::node::network {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

const Logger& log() {
  static const Logger l("egress");
  return l;
}

}  // namespace

Result<std::unique_ptr<Egress>> Egress::start(boost::asio::io_context& io, EgressOptions opts) {
  std::unique_ptr<Egress> e(new Egress(io));
  e->opts_ = std::move(opts);
  e->socket_ = e->opts_.state_dir + "/control.sock";
  if (e->opts_.gateway_netns.empty()) {
    // One an earlier run left holds the gateway side of slots whose VMs
    // this run may take over (SlotPool::adopt): keep it.
    std::string name = e->opts_.layout.prefix + "-gw";
    auto ns = os::Netns::exists(name) ? os::Netns::adopt(name) : os::Netns::create(name);
    if (!ns.ok()) return std::move(ns).error().withContext("gateway namespace");
    e->private_gw_ = std::move(*ns);
    e->opts_.gateway_netns = e->private_gw_.name();
  }
  if (e->opts_.upstream_netns.empty())
    e->opts_.upstream_netns = "/proc/" + std::to_string(::getpid()) + "/ns/net";
  e->opts_.layout.gateway_netns = e->opts_.gateway_netns;
  // Generations only grow, also across vesseld restarts.
  e->generation_ = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count()) *
                   1000;
  std::error_code ec;
  fs::create_directories(e->opts_.state_dir, ec);
  if (ec) return Error(Code::kInternal, "create " + e->opts_.state_dir + ": " + ec.message());
  fs::permissions(e->opts_.state_dir, fs::perms::owner_all, ec);
  VESSEL_TRY_CTX(e->spawnGateway(), "start vessel-gateway");
  auto ca = e->call({{"op", "ca_certificate"}});
  if (!ca.ok()) return std::move(ca).error().withContext("gateway CA");
  if (auto* pem = ca->if_contains("pem"); pem && pem->is_string())
    e->ca_pem_ = std::string(pem->get_string());
  if (e->ca_pem_.empty()) return Error(Code::kInternal, "gateway returned no CA certificate");
  auto pool = SlotPool::create(e->opts_.layout, e->opts_.ready_slots);
  if (!pool.ok()) return std::move(pool).error().withContext("network slot pool");
  e->slots_ = std::move(*pool);
  e->supervise();
  log().info("vessel-gateway running (pid {}), slots {}-<i> attached to {}", e->gateway_.pid(),
             e->opts_.layout.prefix,
             e->opts_.gateway_netns.empty() ? std::string("this namespace")
                                            : "netns " + e->opts_.gateway_netns);
  return e;
}

Egress::~Egress() { stop(); }

void Egress::stop() {
  stopping_ = true;
  timer_.cancel();
  control_.reset();
  // Slots handed over to the next vesseld (their VMs run on) keep their
  // gateway side in the gateway namespace, and so the namespace.
  bool keep = slots_ && slots_->handedOver() > 0;
  // Slots go before the gateway's namespace table they are elements of.
  slots_.reset();
  if (gateway_.running()) gateway_.terminate(2s);
  if (keep)
    private_gw_.release();
  else
    private_gw_.destroy();
}

Status Egress::spawnGateway() {
  std::error_code ec;
  fs::remove(socket_, ec);
  std::vector<std::string> argv{opts_.gateway_binary, "--control-socket", socket_,
                                "--state-dir",        opts_.state_dir,    "--log-level",
                                opts_.log_level};
  auto flag = [&](const char* name, const std::string& v) {
    if (!v.empty()) argv.insert(argv.end(), {name, v});
  };
  flag("--egress-upstream-netns", opts_.upstream_netns);
  flag("--egress-resolver", opts_.resolver);
  flag("--egress-ca-bundle", opts_.ca_bundle);
  for (const std::string& c : opts_.deny_cidrs) argv.insert(argv.end(), {"--deny-cidr", c});
  argv.insert(argv.end(), {"--proxy-port", std::to_string(opts_.layout.proxy_port), "--dns-port",
                           std::to_string(opts_.layout.dns_port)});
  SpawnOptions so;
  so.argv = os::inNetns(opts_.gateway_netns, argv);
  so.fds = {{1, 1}, {2, 2}};  // its log lines go where vesseld's go
  so.die_with_parent = true;
  VESSEL_ASSIGN_OR_RETURN(gateway_, ChildProcess::spawn(so));
  // A local process creating a socket: seconds at most.
  for (int i = 0; i < 200; ++i) {
    if (auto st = gateway_.tryWait())
      return Error(Code::kUnavailable, "vessel-gateway exited at start: " + st->describe());
    if (connectControl().ok()) return okStatus();
    std::this_thread::sleep_for(25ms);
  }
  gateway_.terminate(2s);
  return Error(Code::kDeadlineExceeded, "vessel-gateway control socket " + socket_ + " not ready");
}

Status Egress::connectControl() {
  control_.reset();
  VESSEL_ASSIGN_OR_RETURN(auto c, gateway::ControlClient::connect(socket_));
  VESSEL_TRY(c.call({{"op", "ping"}}));
  control_.emplace(std::move(c));
  return okStatus();
}

Result<json::object> Egress::call(const json::object& req) {
  if (!control_) VESSEL_TRY_CTX(connectControl(), "gateway control socket");
  auto r = control_->call(req);
  if (!r.ok() && r.error().code() != Code::kInvalidArgument &&
      r.error().code() != Code::kFailedPrecondition) {
    // The connection may be what failed: the next call reconnects.
    control_.reset();
  }
  return r;
}

void Egress::supervise() {
  timer_.expires_after(opts_.supervise_every);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || stopping_) return;
    if (auto st = gateway_.tryWait()) {
      last_error_ = "vessel-gateway exited: " + st->describe();
      log().error("{}; restarting it", last_error_);
      control_.reset();
      if (auto s = spawnGateway(); !s.ok()) {
        last_error_ = "restart: " + s.error().message();
        log().error("vessel-gateway {}", last_error_);
      } else {
        ++restarts_;
        // The new process knows nothing: give every sandbox its policy back.
        for (auto& [id, r] : registered_) {
          r.policy["generation"] = ++generation_;
          auto res = control_->call(
              {{"op", "set_sandbox"}, {"sandbox", id}, {"source", r.source}, {"policy", r.policy}});
          if (!res.ok())
            log().forSandbox(id).error("re-register with gateway: {}", res.error().message());
        }
      }
    }
    // Keep slots waiting so creates do not pay for namespace and rules:
    // one at a time, made off the io thread.
    if (slots_) slots_->refillInBackground(io_);
    supervise();
  });
}

Status Egress::setSandbox(const std::string& sandbox, const std::string& source,
                          json::object policy) {
  policy["generation"] = ++generation_;
  auto r =
      call({{"op", "set_sandbox"}, {"sandbox", sandbox}, {"source", source}, {"policy", policy}});
  if (!r.ok()) return std::move(r).error().withContext("gateway set_sandbox " + sandbox);
  registered_[sandbox] = {source, std::move(policy)};
  return okStatus();
}

Status Egress::removeSandbox(const std::string& sandbox) {
  registered_.erase(sandbox);
  auto r = call({{"op", "remove_sandbox"}, {"sandbox", sandbox}});
  if (!r.ok()) return std::move(r).error().withContext("gateway remove_sandbox " + sandbox);
  return okStatus();
}

Result<json::object> Egress::stats() { return call({{"op", "stats"}}); }

json::object Egress::health() const {
  json::object o{{"running", gateway_.running()},
                 {"pid", gateway_.running() ? gateway_.pid() : 0},
                 {"restarts", restarts_},
                 {"sandboxes", registered_.size()},
                 {"slots_ready", slots_ ? slots_->ready() : 0},
                 {"slots_attached", slots_ ? slots_->attached() : 0}};
  if (!last_error_.empty()) o["last_error"] = last_error_;
  return o;
}

}  // namespace vessel::node::network
