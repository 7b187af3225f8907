#include "node/network/egress.h"

#include <signal.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <thread>

#include "base/log.h"
#include "base/offload.h"
#include "os/command.h"
#include "os/netns.h"

namespace vessel::node::network {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

const Logger& log() {
  static const Logger l("egress");
  return l;
}

Error stopped() { return Error(Code::kUnavailable, "egress is stopping"); }

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
  auto ca = e->callNow({{"op", "ca_certificate"}});
  if (!ca.ok()) return std::move(ca).error().withContext("gateway CA");
  if (auto* pem = ca->if_contains("pem"); pem && pem->is_string())
    e->ca_pem_ = std::string(pem->get_string());
  if (e->ca_pem_.empty()) return Error(Code::kInternal, "gateway returned no CA certificate");
  auto pool = SlotPool::create(e->opts_.layout, e->opts_.ready_slots);
  if (!pool.ok()) return std::move(pool).error().withContext("network slot pool");
  e->slots_ = std::move(*pool);
  asio::co_spawn(io, e->supervise(), asio::detached);
  log().info("vessel-gateway running (pid {}), slots {}-<i> attached to {}", e->gateway_.pid(),
             e->opts_.layout.prefix,
             e->opts_.gateway_netns.empty() ? std::string("this namespace")
                                            : "netns " + e->opts_.gateway_netns);
  return e;
}

Egress::~Egress() {
  stop();
  *alive_ = false;
}

void Egress::stop() {
  if (stopping_) return;
  stopping_ = true;
  timer_.cancel();
  // Slots handed over to the next vesseld (their VMs run on) keep their
  // gateway side in the gateway namespace, and so the namespace.
  bool keep = slots_ && slots_->handedOver() > 0;
  // Slots go before the gateway's namespace table they are elements of.
  slots_.reset();
  if (gateway_.running()) gateway_.terminate(2s);
  // A call in flight ends now that the gateway's socket is closed; queued
  // ones find no gateway. Nothing runs there afterwards: calls made after
  // stop() fail at once.
  control_thread_->join();
  control_.reset();
  control_up_ = false;
  if (keep)
    private_gw_.release();
  else
    private_gw_.destroy();
}

Status Egress::spawn() {
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
  return okStatus();
}

Status Egress::spawnGateway() {
  VESSEL_TRY(spawn());
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

asio::awaitable<Status> Egress::respawnGateway() {
  auto alive = alive_;
  VESSEL_CO_TRY(spawn());
  asio::steady_timer pause(io_);
  boost::system::error_code ec;
  // As at start, some 5 s; each attempt (connect and ping) on the control
  // thread, the waits between them on a timer.
  for (int i = 0; i < 200; ++i) {
    if (auto st = gateway_.tryWait())
      co_return Error(Code::kUnavailable, "vessel-gateway exited at start: " + st->describe());
    auto attempt = [this] { return connectControl(); };
    Status c = co_await offload(*control_thread_, std::move(attempt));
    if (!*alive || stopping_) co_return stopped();
    if (c.ok()) co_return okStatus();
    pause.expires_after(25ms);
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (!*alive || stopping_) co_return stopped();
  }
  // Not waited for here: the next round of supervise() reaps it and tries
  // again.
  (void)gateway_.signal(SIGKILL);
  co_return Error(Code::kDeadlineExceeded,
                  "vessel-gateway control socket " + socket_ + " not ready");
}

Status Egress::connectControl() {
  control_.reset();
  control_up_ = false;
  VESSEL_ASSIGN_OR_RETURN(auto c, gateway::ControlClient::connect(socket_));
  VESSEL_TRY(c.call({{"op", "ping"}}));
  control_.emplace(std::move(c));
  control_up_ = true;
  return okStatus();
}

Result<json::object> Egress::callNow(const json::object& req) {
  if (!control_) VESSEL_TRY_CTX(connectControl(), "gateway control socket");
  auto r = control_->call(req);
  if (!r.ok() && r.error().code() != Code::kInvalidArgument &&
      r.error().code() != Code::kFailedPrecondition) {
    // The connection may be what failed: the next call reconnects.
    control_.reset();
    control_up_ = false;
  }
  return r;
}

asio::awaitable<Result<json::object>> Egress::call(json::object req) {
  if (stopping_) co_return stopped();
  auto alive = alive_;
  auto run = [this, req = std::move(req)] { return callNow(req); };
  auto r = co_await offload(*control_thread_, std::move(run));
  if (!*alive) co_return stopped();
  co_return r;
}

asio::awaitable<void> Egress::supervise() {
  auto alive = alive_;
  for (;;) {
    timer_.expires_after(opts_.supervise_every);
    boost::system::error_code ec;
    co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (!*alive || stopping_) co_return;
    if (auto st = gateway_.tryWait()) {
      last_error_ = "vessel-gateway exited: " + st->describe();
      log().error("{}; restarting it", last_error_);
      control_up_ = false;
      Status s = co_await respawnGateway();
      if (!*alive || stopping_) co_return;
      if (!s.ok()) {
        last_error_ = "restart: " + s.error().message();
        log().error("vessel-gateway {}", last_error_);
      } else {
        ++restarts_;
        // The new process knows nothing: give every sandbox its policy
        // back, in one job, so no call made meanwhile lands between them.
        std::vector<std::pair<std::string, json::object>> again;
        for (auto& [id, r] : registered_) {
          r.policy["generation"] = ++generation_;
          again.emplace_back(id, json::object{{"op", "set_sandbox"},
                                              {"sandbox", id},
                                              {"source", r.source},
                                              {"policy", r.policy}});
        }
        auto resend = [this, again = std::move(again)] {
          std::vector<std::pair<std::string, std::string>> failed;
          for (const auto& [id, req] : again)
            if (auto res = callNow(req); !res.ok()) failed.emplace_back(id, res.error().message());
          return failed;
        };
        auto failed = co_await offload(*control_thread_, std::move(resend));
        if (!*alive) co_return;
        for (const auto& [id, why] : failed)
          log().forSandbox(id).error("re-register with gateway: {}", why);
      }
    } else if (!control_up_) {
      // A call failed (the gateway stalled, say) and none came since:
      // reconnect, so /healthz says healthy again once it answers, not
      // only at the next sandbox's call.
      auto reconnect = [this] { return control_ ? okStatus() : connectControl(); };
      (void)co_await offload(*control_thread_, std::move(reconnect));
      if (!*alive || stopping_) co_return;
    }
    // Keep slots waiting so creates do not pay for namespace and rules:
    // one at a time, made off the io thread.
    if (slots_) slots_->refillInBackground(io_);
  }
}

asio::awaitable<Status> Egress::setSandbox(std::string sandbox, std::string source,
                                           json::object policy) {
  policy["generation"] = ++generation_;
  // g++ 12: named argument, see CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
  json::object req{
      {"op", "set_sandbox"}, {"sandbox", sandbox}, {"source", source}, {"policy", policy}};
  auto r = co_await call(std::move(req));
  if (!r.ok()) co_return std::move(r).error().withContext("gateway set_sandbox " + sandbox);
  registered_[sandbox] = {std::move(source), std::move(policy)};
  co_return okStatus();
}

asio::awaitable<Status> Egress::removeSandbox(std::string sandbox) {
  registered_.erase(sandbox);
  json::object req{{"op", "remove_sandbox"}, {"sandbox", sandbox}};
  auto r = co_await call(std::move(req));
  if (!r.ok()) co_return std::move(r).error().withContext("gateway remove_sandbox " + sandbox);
  co_return okStatus();
}

void Egress::forget(const std::string& sandbox) {
  if (stopping_) return;
  registered_.erase(sandbox);
  asio::co_spawn(
      io_,
      [this, alive = alive_, sandbox]() -> asio::awaitable<void> {
        if (!*alive) co_return;
        json::object req{{"op", "remove_sandbox"}, {"sandbox", sandbox}};
        auto r = co_await call(std::move(req));
        // NotFound: the gateway never took it.
        if (!r.ok() && r.error().code() != Code::kNotFound)
          log().forSandbox(sandbox).warn("gateway remove_sandbox after a failed registration: {}",
                                         r.error().message());
      },
      asio::detached);
}

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
