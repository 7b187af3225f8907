// vessel-gateway: flags -> GatewayConfig -> Gateway::create -> run.
#include <signal.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <thread>

#include "base/fd.h"
#include "base/log.h"
#include "gateway/gateway.h"

namespace {

// The first "nameserver" of /etc/resolv.conf, for when no resolver is given.
std::string systemResolver() {
  auto conf = vessel::readFile("/etc/resolv.conf");
  if (!conf.ok()) return "127.0.0.1:53";
  size_t at = conf->find("\nnameserver ");
  if (conf->rfind("nameserver ", 0) == 0)
    at = 0;
  else if (at != std::string::npos)
    ++at;
  if (at == std::string::npos) return "127.0.0.1:53";
  std::string rest = conf->substr(at + 11);
  return rest.substr(0, rest.find_first_of(" \t\n"));
}

}  // namespace

int main(int argc, char** argv) {
  vessel::gateway::GatewayConfig cfg;
  std::string log_level = "info";
  int classify_ms = static_cast<int>(cfg.classify_timeout.count());
  CLI::App app{"vessel-gateway: egress gateway for Vessel sandboxes"};
  app.add_option("--listen-address", cfg.listen_address, "address of the proxy and DNS listeners");
  app.add_option("--proxy-port", cfg.proxy_port, "TCP port nftables redirects sandbox TCP to");
  app.add_option("--dns-port", cfg.dns_port, "UDP/TCP port for sandbox DNS");
  app.add_option("--control-socket", cfg.control_socket, "unix socket vesseld drives");
  app.add_option("--state-dir", cfg.state_dir, "where the CA is kept (created 0700)");
  app.add_option("--egress-upstream-netns", cfg.upstream_netns,
                 "network namespace (name or path) for upstream DNS and connections");
  app.add_option("--egress-resolver", cfg.resolver, "trusted upstream resolver IP[:PORT]");
  app.add_option("--egress-ca-bundle", cfg.ca_bundle, "CA bundle for verifying upstreams");
  app.add_option("--deny-cidr", cfg.deny_cidrs, "extra refused destination range (repeatable)");
  app.add_option("--classify-timeout-ms", classify_ms,
                 "how long a guest may take to send SNI/Host");
  app.add_option("--log-level", log_level, "debug, info, warn, error");
  app.add_option("--max-flows-per-sandbox", cfg.max_flows_per_sandbox,
                 "open TCP flows one sandbox may have")
      ->capture_default_str();
  app.add_option("--new-flows-per-second", cfg.new_flows_per_second,
                 "new TCP flows per second one sandbox may open (bursts of twice that)")
      ->capture_default_str();
  app.add_option("--max-dns-inflight-per-sandbox", cfg.max_dns_inflight_per_sandbox,
                 "DNS queries of one sandbox being answered at once")
      ->capture_default_str();
  int idle_s = static_cast<int>(cfg.relay_idle_timeout.count());
  app.add_option("--relay-idle-timeout-s", idle_s,
                 "seconds a relayed connection may pass no byte before it is reset")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  cfg.relay_idle_timeout = std::chrono::seconds(idle_s);
  if (app.count("--egress-resolver") == 0) cfg.resolver = systemResolver();
  cfg.classify_timeout = std::chrono::milliseconds(classify_ms);
  vessel::initLogging(log_level);
  ::signal(SIGPIPE, SIG_IGN);
  // Every flow is two descriptors; the default soft limit (1024) would let
  // a few hundred connections starve every sandbox. Take the hard limit.
  if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0)
      vessel::Logger("gateway").warn("raising RLIMIT_NOFILE failed");
  }

  auto gw = vessel::gateway::Gateway::create(cfg);
  if (!gw.ok()) {
    vessel::Logger("gateway").error("start: {}", gw.error().message());
    return 1;
  }
  // SIGTERM/SIGINT end run() through stop(); a watcher thread waits for them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread watcher([&] {
    int sig = 0;
    sigwait(&set, &sig);
    (*gw)->stop();
  });
  watcher.detach();
  vessel::Status s = (*gw)->run();
  if (!s.ok()) {
    vessel::Logger("gateway").error("run: {}", s.error().message());
    return 1;
  }
  return 0;
}
