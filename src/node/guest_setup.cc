// Guest setup after every restore: identity (entropy, clock, hostname,
// env) and the guest's network, each call bounded by a host-side deadline.
#include <sys/random.h>

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "node/guest_deadline.h"
#include "node/runtime.h"
#include "node/runtime_internal.h"

namespace vessel::node {

using namespace std::chrono_literals;
using internal::kGuestCaBundle;
using internal::kGuestCaCert;

asio::awaitable<Status> Runtime::applyIdentity(Sandbox& sb,
                                               const std::optional<GuestNetwork>& net_done) {
  auto agent = sb.agent_;
  auto calls = identityCalls(sb, net_done);
  co_return co_await withGuestDeadline(agent, opts_.guest_call_timeout, "identity of " + sb.id_,
                                       std::move(calls));
}

asio::awaitable<Status> Runtime::identityCalls(Sandbox& sb,
                                               const std::optional<GuestNetwork>& net_done) {
  auto& a = sb.agent_;
  // Fresh entropy first: two clones of one snapshot share the guest CRNG.
  std::string seed(64, '\0');
  if (::getrandom(seed.data(), seed.size(), 0) != static_cast<ssize_t>(seed.size()))
    co_return Error::fromErrno("getrandom");
  std::vector<std::string> env = sb.env_;
  env.push_back("VESSEL_SANDBOX_ID=" + sb.id_);
  if (!sb.net_.ca_pem.empty()) {
    // Where TLS clients look when told by environment (docs/gateway.md).
    for (const char* k : {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"})
      env.push_back(std::string(k) + "=" + kGuestCaBundle);
    env.push_back(std::string("NODE_EXTRA_CA_CERTS=") + kGuestCaCert);
  }
  std::string hostname = sb.hostname_;
  auto now = std::chrono::system_clock::now();
  // All four in flight at once: one round trip instead of four. The agent
  // handles them in the order sent, entropy first, and the sandbox is not
  // handed to anyone before every one of them has succeeded.
  using namespace asio::experimental::awaitable_operators;
  auto [e, c, h, v] =
      co_await (a->addEntropy(std::move(seed)) && a->setClock(now) &&
                a->setHostname(std::move(hostname)) && a->setDefaultEnv(std::move(env)));
  for (Status* st : {&e, &c, &h, &v})
    if (!st->ok()) co_return std::move(*st).error().withContext("identity of " + sb.id_);
  if (net_done && *net_done == sb.net_) co_return okStatus();
  co_return co_await configureGuestNetwork(*a, sb.slot_.get(), sb.net_, net_done);
}

asio::awaitable<Status> Runtime::growDisk(Sandbox& sb, uint64_t grown_mib) {
  if (!opts_.grow_disks || sb.disk_mib_ == 0 || sb.disk_mib_ == grown_mib) co_return okStatus();
  co_return co_await growDiskTo(*sb.vm_, sb.agent_, sb.disk_mib_, sb.id_);
}

asio::awaitable<Status> Runtime::growDiskTo(hypervisor::Vm& vm,
                                            std::shared_ptr<agentclient::AgentClient> agent,
                                            uint64_t mib, const std::string& name) {
  uint64_t bytes = mib << 20;
  if (Status r = co_await vm.resizeDisk(0, bytes); !r.ok())
    co_return std::move(r).error().withContext("grow disk of " + name);
  auto call = agent->growRootFs(bytes);
  co_return co_await withGuestDeadline(agent, opts_.guest_call_timeout, "grow disk of " + name,
                                       std::move(call));
}

asio::awaitable<Status> Runtime::configureGuestNetwork(agentclient::AgentClient& agent,
                                                       const network::Slot* slot,
                                                       const GuestNetwork& want,
                                                       const std::optional<GuestNetwork>& was) {
  // The address, route and resolver when the sandbox may reach out (the
  // same in every slot, so this is idempotent across pause/resume and
  // forks); none when it may not. One agent call (SetNetwork): a shell
  // running `ip` cost hundreds of milliseconds under TCG, on every create
  // whose network differed from its warm VM's.
  std::string script;
  std::optional<agentproto::SetNetworkMsg> set;
  if (want.route) {
    if (!slot || !opts_.slots)
      co_return Error(Code::kFailedPrecondition,
                      "no network slot for the guest's route (template without a NIC?)");
    const auto& l = opts_.slots->layout();
    set = agentproto::SetNetworkMsg{agentproto::SetNetworkMsg::kUp, "eth0", l.guest_ip + "/30",
                                    l.gateway_ip, l.gateway_ip};
    // What an agent without SetNetwork (a tenant template built by an older
    // vesseld) runs instead. flush + add: busybox's ip lacks `addr replace`.
    script += "ip link set eth0 up\nip addr flush dev eth0\nip addr add " + l.guest_ip +
              "/30 dev eth0\nip route replace default via " + l.gateway_ip +
              "\nprintf 'nameserver " + l.gateway_ip + "\\n' > /etc/resolv.conf\n";
  } else if (was && was->route) {
    // A warm VM set up for egress, claimed by a sandbox without network:
    // its guest gets no route (the gateway refuses it everything anyway).
    // (Down, the link loses its routes too.)
    set = agentproto::SetNetworkMsg{0, "eth0", "", "", ""};
    script += "ip addr flush dev eth0\nip link set eth0 down\n: > /etc/resolv.conf\n";
  }
  if (set) {
    Status st = co_await agent.setNetwork(*set);
    bool unsupported = !st.ok() && st.error().code() == Code::kInvalidArgument &&
                       st.error().message().find("unsupported request type") != std::string::npos;
    if (!st.ok() && !unsupported)
      co_return std::move(st).error().withContext("guest network setup");
    if (st.ok()) script.clear();
  }
  agentclient::ExecSpec e;
  e.user = "root";
  e.timeout = 20s;
  if (!want.ca_pem.empty() && (!was || was->ca_pem != want.ca_pem)) {
    e.env.push_back("VESSEL_CA_PEM=" + want.ca_pem);
    script += std::string("mkdir -p /etc/vessel\nprintf '%s\\n' \"$VESSEL_CA_PEM\" > ") +
              kGuestCaCert +
              "\nsys=/etc/ssl/certs/ca-certificates.crt\n"
              "if [ -f $sys ]; then\n"
              "  grep -q 'Vessel egress' $sys 2>/dev/null || cat " +
              kGuestCaCert + " >> $sys\n  cat $sys > " + kGuestCaBundle + "\nelse cp " +
              kGuestCaCert + " " + kGuestCaBundle + "; fi\n";
  }
  if (script.empty()) co_return okStatus();
  e.shell = "set -e\n" + script;
  auto r = co_await agent.run(std::move(e));
  if (!r.ok()) co_return std::move(r).error().withContext("guest network setup");
  if (!r->exit.exited || r->exit.code != 0)
    co_return Error(Code::kInternal, "guest network setup failed: " + r->err);
  co_return okStatus();
}

}  // namespace vessel::node
