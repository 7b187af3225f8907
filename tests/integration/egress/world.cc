#include "tests/integration/egress/world.h"

#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/fd.h"
#include "os/command.h"

namespace vessel::egress_test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Status ipIn(const os::Netns& ns, std::vector<std::string> args) {
  std::vector<std::string> argv{"ip", "-n", ns.name()};
  argv.insert(argv.end(), args.begin(), args.end());
  VESSEL_TRY(os::runCommand(argv));
  return okStatus();
}

}  // namespace

boost::json::value allowlist(uint64_t generation, std::vector<std::string> names) {
  boost::json::array a;
  for (auto& n : names) a.emplace_back(n);
  return boost::json::object{{"generation", generation}, {"mode", "allowlist"}, {"allow", a}};
}
boost::json::value fullMode(uint64_t g) {
  return boost::json::object{{"generation", g}, {"mode", "full"}};
}
boost::json::value noneMode(uint64_t g) {
  return boost::json::object{{"generation", g}, {"mode", "none"}};
}

Result<std::unique_ptr<EgressWorld>> EgressWorld::create(std::vector<std::string> gateway_args,
                                                         bool start_gateway, bool bulk) {
  std::unique_ptr<EgressWorld> w(new EgressWorld());
  w->gateway_args_ = std::move(gateway_args);
  w->bulk_ = bulk;
  if (bulk) {
    w->gateway_args_.insert(w->gateway_args_.end(), {"--max-flows-per-sandbox", "1000000",
                                                     "--new-flows-per-second", "1000000"});
  }
  // Unique per world, short enough for interface names ("v12345h0").
  static int worlds = 0;
  w->prefix_ = "v" + std::to_string(::getpid() % 10000) + std::to_string(worlds++ % 10);
  char tmpl[] = "/tmp/vessel-egress-XXXXXX";
  if (!::mkdtemp(tmpl)) return Error::fromErrno("mkdtemp");
  w->dir_ = tmpl;
  VESSEL_TRY_CTX(w->makeCertificates(), "test certificates");
  VESSEL_TRY_CTX(w->buildNetwork(), "fake internet network");
  VESSEL_TRY_CTX(w->startFakeInternet(), "fake internet servers");
  if (start_gateway) VESSEL_TRY_CTX(w->startGateway(), "gateway");
  return w;
}

EgressWorld::~EgressWorld() {
  control_.reset();
  if (gateway_.running()) gateway_.terminate(2s);
  if (internet_.running()) internet_.terminate(2s);
  for (auto& g : guests_) {
    if (pool_ && g->slot) pool_->release(std::move(g->slot));
    std::error_code ec;
    if (g->netns.valid()) fs::remove_all("/etc/netns/" + g->netns.name(), ec);
  }
  guests_.clear();
  // Only removes the directory if no other namespace has a file there.
  ::rmdir("/etc/netns");
  pool_.reset();
  inet_.destroy();
  gw_.destroy();
  up_.destroy();
  std::error_code ec;
  if (!dir_.empty() && !::getenv("VESSEL_KEEP_EGRESS_DIR")) fs::remove_all(dir_, ec);
}

Status EgressWorld::makeCertificates() {
  auto run = [&](std::vector<std::string> argv) -> Status {
    VESSEL_TRY(os::runCommand(argv));
    return okStatus();
  };
  const std::string d = dir_ + "/";
  VESSEL_TRY(run({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                  "-nodes", "-keyout", d + "ca.key", "-out", d + "ca.crt", "-subj",
                  "/CN=Vessel egress test root", "-days", "2", "-addext",
                  "basicConstraints=critical,CA:TRUE"}));
  const std::pair<const char*, const char*> leaves[] = {{"a", "DNS:a.test,DNS:api.a.test"},
                                                        {"cdn", "DNS:a2.test,DNS:x2.test"}};
  for (auto& [name, san] : leaves) {
    std::string n = name;
    {
      std::ofstream ext(d + n + ".ext");
      ext << "subjectAltName=" << san << "\nbasicConstraints=CA:FALSE\n";
    }
    VESSEL_TRY(
        run({"openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", d + n + ".key", "-out", d + n + ".csr", "-subj", "/CN=" + n}));
    VESSEL_TRY(run({"openssl", "x509", "-req", "-in", d + n + ".csr", "-CA", d + "ca.crt", "-CAkey",
                    d + "ca.key", "-CAcreateserial", "-out", d + n + ".crt", "-days", "2",
                    "-extfile", d + n + ".ext"}));
  }
  return okStatus();
}

Status EgressWorld::buildNetwork() {
  VESSEL_ASSIGN_OR_RETURN(inet_, os::Netns::create(prefix_ + "-inet"));
  VESSEL_ASSIGN_OR_RETURN(gw_, os::Netns::create(prefix_ + "-gw"));
  VESSEL_ASSIGN_OR_RETURN(up_, os::Netns::create(prefix_ + "-up"));
  // Links die with their namespaces; the Link objects are released.
  VESSEL_ASSIGN_OR_RETURN(auto gi, os::createVeth(gw_.name(), "gw-inet", inet_.name(), "inet-gw"));
  gi.release();
  VESSEL_ASSIGN_OR_RETURN(auto ui, os::createVeth(up_.name(), "up-inet", inet_.name(), "inet-up"));
  ui.release();
  VESSEL_TRY(ipIn(gw_, {"addr", "add", "10.98.0.1/30", "dev", "gw-inet"}));
  VESSEL_TRY(ipIn(gw_, {"link", "set", "gw-inet", "up"}));
  VESSEL_TRY(ipIn(gw_, {"route", "add", "default", "via", "10.98.0.2"}));
  VESSEL_TRY(gw_.sysctl("net.ipv4.ip_forward", "1"));
  VESSEL_TRY(ipIn(up_, {"addr", "add", "10.99.0.1/30", "dev", "up-inet"}));
  VESSEL_TRY(ipIn(up_, {"link", "set", "up-inet", "up"}));
  VESSEL_TRY(ipIn(up_, {"route", "add", "default", "via", "10.99.0.2"}));
  VESSEL_TRY(ipIn(inet_, {"addr", "add", "10.98.0.2/30", "dev", "inet-gw"}));
  VESSEL_TRY(ipIn(inet_, {"link", "set", "inet-gw", "up"}));
  VESSEL_TRY(ipIn(inet_, {"addr", "add", "10.99.0.2/30", "dev", "inet-up"}));
  VESSEL_TRY(ipIn(inet_, {"link", "set", "inet-up", "up"}));
  // Return route for anything that might leak out of a slot via gw.
  VESSEL_TRY(ipIn(inet_, {"route", "add", "10.200.0.0/16", "via", "10.98.0.1"}));
  VESSEL_TRY(ipIn(inet_, {"route", "add", "172.16.0.0/12", "via", "10.98.0.1"}));
  // The public addresses live on loopback (no dummy module needed): traffic
  // from either veth is delivered locally.
  for (const char* a : {kResolver, kA, kCdn, kX, kHold, "169.254.169.254", "10.1.2.3"}) {
    VESSEL_TRY(ipIn(inet_, {"addr", "add", std::string(a) + "/32", "dev", "lo"}));
  }
  node::network::NetworkLayout layout;
  layout.gateway_netns = gw_.name();
  layout.prefix = prefix_;
  if (bulk_) layout.max_tcp_connections = layout.new_tcp_per_second = 1000000;
  VESSEL_ASSIGN_OR_RETURN(pool_, node::network::SlotPool::create(layout, 0));
  return okStatus();
}

Status EgressWorld::startFakeInternet() {
  std::string ready = dir_ + "/internet.ready";
  VESSEL_ASSIGN_OR_RETURN(Fd log, Fd::open(dir_ + "/internet.log", O_WRONLY | O_CREAT | O_TRUNC));
  VESSEL_ASSIGN_OR_RETURN(
      internet_, ChildProcess::spawn(
                     {.argv = inet_.wrap({"python3", VESSEL_EGRESS_DIR "/fake_internet.py", "--dir",
                                          dir_, "--attacker-log", dir_ + "/attacker.log",
                                          "--api-log", dir_ + "/api.log", "--ready", ready}),
                      .fds = {{log.get(), 1}, {log.get(), 2}},
                      .die_with_parent = true}));
  for (int i = 0; i < 200 && !fs::exists(ready); ++i) {
    if (!internet_.running() || internet_.tryWait()) {
      return Error(Code::kUnavailable, "fake internet exited: " + slurp(dir_ + "/internet.log"));
    }
    std::this_thread::sleep_for(50ms);
  }
  if (!fs::exists(ready)) return Error(Code::kDeadlineExceeded, "fake internet not ready");
  return okStatus();
}

Status EgressWorld::startGateway() {
  VESSEL_ASSIGN_OR_RETURN(Fd log, Fd::open(dir_ + "/gateway.log", O_WRONLY | O_CREAT | O_TRUNC));
  std::string sock = dir_ + "/gateway.sock";
  // VESSEL_TEST_GATEWAY runs another build of the gateway against the same
  // cases (how a fix's tests are shown to fail without it).
  const char* bin = ::getenv("VESSEL_TEST_GATEWAY");
  std::vector<std::string> argv{bin && *bin ? bin : VESSEL_GATEWAY_BINARY,
                                "--egress-upstream-netns",
                                up_.name(),
                                "--egress-resolver",
                                kResolver,
                                "--egress-ca-bundle",
                                testCa(),
                                "--control-socket",
                                sock,
                                "--state-dir",
                                dir_ + "/state"};
  argv.insert(argv.end(), gateway_args_.begin(), gateway_args_.end());
  VESSEL_ASSIGN_OR_RETURN(gateway_, ChildProcess::spawn({.argv = gw_.wrap(argv),
                                                         .fds = {{log.get(), 1}, {log.get(), 2}},
                                                         .die_with_parent = true}));
  for (int i = 0; i < 200; ++i) {
    if (gateway_.tryWait()) {
      return Error(Code::kUnavailable, "gateway exited: " + gatewayLog());
    }
    auto c = gateway::ControlClient::connect(sock);
    if (c.ok() && c->call({{"op", "ping"}}).ok()) {
      control_.emplace(std::move(*c));
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  if (!control_) return Error(Code::kDeadlineExceeded, "gateway control socket not ready");
  VESSEL_ASSIGN_OR_RETURN(auto ca, control_->call({{"op", "ca_certificate"}}));
  std::string pem(ca["pem"].as_string());
  VESSEL_TRY(writeFileAtomic(dir_ + "/gateway-ca.crt", pem));
  VESSEL_TRY(writeFileAtomic(guestTrust(), slurp(testCa()) + pem));
  return okStatus();
}

std::string EgressWorld::gatewayLog() const { return slurp(dir_ + "/gateway.log"); }

Result<Guest*> EgressWorld::addGuest(const std::string& sandbox, const boost::json::value& policy) {
  auto g = std::make_unique<Guest>();
  g->sandbox = sandbox;
  VESSEL_ASSIGN_OR_RETURN(g->netns,
                          os::Netns::create(prefix_ + "-g" + std::to_string(guests_.size())));
  // `ip netns exec` bind-mounts this over /etc/resolv.conf: the guest's
  // resolver is the gateway address, as in a real template.
  fs::create_directories("/etc/netns/" + g->netns.name());
  VESSEL_TRY(
      writeFileAtomic("/etc/netns/" + g->netns.name() + "/resolv.conf", "nameserver 172.16.0.1\n"));
  node::network::GuestLink link{node::network::GuestLink::Kind::kVeth, g->netns.name(), "eth0"};
  VESSEL_ASSIGN_OR_RETURN(g->slot, pool_->acquire(link));
  const auto& l = pool_->layout();
  VESSEL_TRY(ipIn(g->netns, {"link", "set", "eth0", "address", l.guest_mac}));
  VESSEL_TRY(ipIn(g->netns, {"addr", "add", l.guest_ip + "/30", "dev", "eth0"}));
  VESSEL_TRY(ipIn(g->netns, {"link", "set", "eth0", "up"}));
  VESSEL_TRY(ipIn(g->netns, {"route", "add", "default", "via", l.gateway_ip}));
  VESSEL_TRY(control_->setSandbox(sandbox, g->slot->sourceAddress(), policy));
  guests_.push_back(std::move(g));
  return guests_.back().get();
}

Result<Guest*> EgressWorld::addVmGuest(const std::string& sandbox,
                                       const boost::json::value& policy) {
  auto g = std::make_unique<Guest>();
  g->sandbox = sandbox;
  VESSEL_ASSIGN_OR_RETURN(g->slot, pool_->acquire());
  VESSEL_TRY(control_->setSandbox(sandbox, g->slot->sourceAddress(), policy));
  guests_.push_back(std::move(g));
  return guests_.back().get();
}

Status EgressWorld::setPolicy(const Guest& g, const boost::json::value& policy) {
  return control_->setSandbox(g.sandbox, g.slot->sourceAddress(), policy);
}

std::string EgressWorld::guestRun(const Guest& g, std::vector<std::string> argv,
                                  std::chrono::seconds timeout) {
  auto r = os::runCommand(g.netns.wrap(std::move(argv)), {}, timeout);
  return r.ok() ? r->out + r->err : "FAILED " + r.error().message();
}

std::string EgressWorld::runIn(const std::string& netns, std::vector<std::string> argv) {
  auto r = os::runCommand(os::inNetns(netns, std::move(argv)), {}, std::chrono::seconds(20));
  return r.ok() ? r->out + r->err : "FAILED " + r.error().message();
}

std::string EgressWorld::guestTool(const Guest& g, std::vector<std::string> args) {
  args.insert(args.begin(), {"python3", VESSEL_EGRESS_DIR "/guest_tool.py"});
  return guestRun(g, std::move(args));
}

std::string EgressWorld::curl(const Guest& g, std::vector<std::string> args) {
  args.insert(args.begin(), {"curl", "-sS", "-m", "5", "--cacert", guestTrust()});
  return guestRun(g, std::move(args));
}

std::string EgressWorld::attackerLog() {
  // Absence cannot be awaited; give packets already sent time to land.
  std::this_thread::sleep_for(300ms);
  return slurp(dir_ + "/attacker.log");
}

std::string EgressWorld::apiLog() { return slurp(dir_ + "/api.log"); }

void EgressWorld::clearLogs() {
  std::ofstream(dir_ + "/attacker.log", std::ios::trunc);
  std::ofstream(dir_ + "/api.log", std::ios::trunc);
}

Result<Fd> EgressWorld::guestSocket(const Guest& g, int type) {
  return socketIn(g.netns.path(), type);
}

Result<Fd> EgressWorld::socketIn(const std::string& netns_path, int type) {
  // The socket belongs to the namespace it was created in; only a helper
  // thread enters the guest's namespace.
  Result<Fd> out = Error(Code::kInternal, "socket thread did not run");
  std::thread t([&] {
    auto ns = Fd::open(netns_path, O_RDONLY | O_CLOEXEC);
    if (!ns.ok()) {
      out = std::move(ns).error();
      return;
    }
    if (::setns(ns->get(), CLONE_NEWNET) != 0) {
      out = Error::fromErrno("setns " + netns_path);
      return;
    }
    Fd s(::socket(AF_INET, type | SOCK_CLOEXEC, 0));
    if (!s) {
      out = Error::fromErrno("socket");
      return;
    }
    out = std::move(s);
  });
  t.join();
  return out;
}

Result<boost::json::object> EgressWorld::stats() { return control_->call({{"op", "stats"}}); }

int64_t EgressWorld::counter(const std::string& name) {
  auto s = stats();
  if (!s.ok()) return -1;
  const auto* c = s->if_contains("counters");
  if (!c || !c->is_object()) return -1;
  const auto* v = c->as_object().if_contains(name);
  return v && v->is_int64() ? v->as_int64() : (v && v->is_uint64() ? int64_t(v->as_uint64()) : 0);
}

bool EgressWorld::waitForCounter(const std::string& name, int64_t base,
                                 std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (counter(name) > base) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

std::string EgressWorld::attackerLogNow() { return slurp(dir_ + "/attacker.log"); }

}  // namespace vessel::egress_test
