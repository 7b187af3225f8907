#include "node/runtime.h"

#include <fcntl.h>
#include <sys/random.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <random>

#include "base/child_process_async.h"
#include "base/log.h"
#include "base/scope_exit.h"
#include "base/sha256.h"

namespace vessel::node {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;

std::string newId(const std::string& prefix) {
  unsigned char b[6];
  if (::getrandom(b, sizeof b, 0) != sizeof b) {
    std::random_device rd;
    for (auto& x : b) x = static_cast<unsigned char>(rd());
  }
  static const char* k = "0123456789abcdef";
  std::string s = prefix + "-";
  for (unsigned char x : b) {
    s.push_back(k[x >> 4]);
    s.push_back(k[x & 15]);
  }
  return s;
}

namespace {

constexpr const char* kGuestCaCert = "/etc/vessel/egress-ca.crt";
constexpr const char* kGuestCaBundle = "/etc/vessel/ca-bundle.crt";

// Waits for qemu-img without blocking the io thread (other sandboxes' I/O
// and the API run on it).
asio::awaitable<Status> makeOverlay(std::string path, std::string backing, std::string fmt) {
  SpawnOptions so;
  so.argv = {"qemu-img", "create", "-q", "-f", "qcow2", "-F", fmt, "-b", backing, path};
  auto p = ChildProcess::spawn(so);
  if (!p.ok()) co_return std::move(p).error().withContext("qemu-img create " + path);
  const std::chrono::milliseconds limit = 30s;
  auto st = co_await waitAsync(*p, limit);
  if (!st.ok()) co_return std::move(st).error().withContext("qemu-img create " + path);
  if (!st->success())
    co_return Error(Code::kInternal, "qemu-img create " + path + ": " + st->describe());
  co_return okStatus();
}

bool validId(const std::string& id) {
  if (id.empty() || id.size() > 48) return false;
  for (char c : id)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  return true;
}

}  // namespace

Runtime::Runtime(asio::io_context& io, hypervisor::Hypervisor& hv, templates::TemplateStore& store,
                 RuntimeOptions opts)
    : io_(io),
      hv_(hv),
      store_(store),
      opts_(std::move(opts)),
      pool_(io, store, *this, opts_.pool_size) {
  std::error_code ec;
  fs::create_directories(opts_.root + "/vms", ec);
  fs::create_directories(opts_.root + "/sandboxes", ec);
}

Runtime::~Runtime() = default;

hypervisor::MachineSpec Runtime::machineSpec(const std::string& vm_dir, unsigned vcpus,
                                             uint64_t memory_mib,
                                             const std::string& cmdline) const {
  hypervisor::MachineSpec s;
  s.id = fs::path(vm_dir).filename().string();
  s.vcpus = vcpus;
  s.memory_mib = memory_mib;
  s.accel = opts_.accel;
  s.kernel = opts_.kernel;
  s.cmdline = cmdline;
  s.disks = {{vm_dir + "/disk.qcow2", false, "qcow2"}};
  s.run_dir = vm_dir + "/run";
  s.console_log = vm_dir + "/console.log";
  return s;
}

asio::awaitable<Result<Runtime::Prepared>> Runtime::prepareRestore(
    std::shared_ptr<const templates::Template> t, const std::string& state_file,
    const std::string& base_disk, const std::string& base_format, bool template_memory) {
  Prepared p;
  p.vm_id = newId("vm");
  p.vm_dir = opts_.root + "/vms/" + p.vm_id;
  p.tmpl = t;
  std::error_code ec;
  fs::create_directories(p.vm_dir, ec);
  if (ec) co_return Error(Code::kInternal, "create " + p.vm_dir + ": " + ec.message());
  ScopeExit cleanup([&] { fs::remove_all(p.vm_dir, ec); });
  if (base_format == "qcow2") {
    // A sandbox's own overlay (fork): each child gets a private copy.
    fs::copy_file(base_disk, p.vm_dir + "/disk.qcow2", ec);
    if (ec) co_return Error(Code::kInternal, "copy disk " + base_disk + ": " + ec.message());
  } else {
    VESSEL_CO_TRY(co_await makeOverlay(p.vm_dir + "/disk.qcow2", base_disk, base_format));
  }
  auto state = Fd::open(state_file, O_RDONLY);
  if (!state.ok()) co_return std::move(state).error().withContext("restore " + t->id());

  hypervisor::MachineSpec s =
      machineSpec(p.vm_dir, t->manifest.vcpus, t->manifest.memory_mib, t->manifest.cmdline);
  VESSEL_CO_TRY(co_await attachNetwork(s, t->manifest, p.slot));
  if (template_memory) {
    // Copy-on-write view of the template's RAM: pages are shared with every
    // other clone until written, and nothing is written back to the file.
    s.memory_file = t->path(templates::kMemoryFile);
    s.memory_shared = false;
  }
  s.incoming = true;
  s.incoming_state_fd = state->get();
  auto vm = co_await hv_.start(s, Clock::now() + 30s);
  if (!vm.ok()) {
    releaseSlot(p.slot);
    co_return std::move(vm).error().withContext("restore " + t->id());
  }
  p.vm = std::move(*vm);
  cleanup.dismiss();
  co_return p;
}

asio::awaitable<Status> Runtime::applyIdentity(Sandbox& sb,
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

asio::awaitable<Status> Runtime::attachNetwork(hypervisor::MachineSpec& s,
                                               const templates::Manifest& m,
                                               std::unique_ptr<network::Slot>& slot) {
  if (!m.network) co_return okStatus();  // an old template: restoring it must not add a device
  s.network_device = true;
  if (!opts_.slots) co_return okStatus();
  auto sl = co_await opts_.slots->acquireAsync();
  if (!sl.ok()) co_return std::move(sl).error().withContext("network slot");
  slot = std::move(*sl);
  s.tap_fd = slot->tapFd();
  co_return okStatus();
}

void Runtime::releaseSlot(std::unique_ptr<network::Slot>& slot) {
  if (slot && opts_.slots) opts_.slots->release(std::move(slot));
  slot.reset();
}

asio::awaitable<Status> Runtime::configureGuestNetwork(AgentClient& agent,
                                                       const network::Slot* slot,
                                                       const GuestNetwork& want,
                                                       const std::optional<GuestNetwork>& was) {
  // One round trip: the address, route and resolver when the sandbox may
  // reach out (the same in every slot, so this is idempotent across
  // pause/resume and forks), and the egress CA in the trust store.
  std::string script = "set -e\n";
  ExecSpec e;
  e.user = "root";
  e.timeout = 20s;
  if (want.route) {
    if (!slot || !opts_.slots)
      co_return Error(Code::kFailedPrecondition,
                      "no network slot for the guest's route (template without a NIC?)");
    const auto& l = opts_.slots->layout();
    // flush + add rather than `addr replace`, which busybox's ip lacks.
    script += "ip link set eth0 up\nip addr flush dev eth0\nip addr add " + l.guest_ip +
              "/30 dev eth0\nip route replace default via " + l.gateway_ip +
              "\nprintf 'nameserver " + l.gateway_ip + "\\n' > /etc/resolv.conf\n";
  } else if (was && was->route) {
    // A warm VM set up for egress, claimed by a sandbox without network:
    // its guest gets no route (the gateway refuses it everything anyway).
    // (Down, the link loses its routes too.)
    script += "ip addr flush dev eth0\nip link set eth0 down\n: > /etc/resolv.conf\n";
  }
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
  if (script == "set -e\n") co_return okStatus();
  e.shell = script;
  auto r = co_await agent.run(std::move(e));
  if (!r.ok()) co_return std::move(r).error().withContext("guest network setup");
  if (!r->exit.exited || r->exit.code != 0)
    co_return Error(Code::kInternal, "guest network setup failed: " + r->err);
  co_return okStatus();
}

namespace {
// Records the time since the last mark as phase `name`.
class PhaseClock {
 public:
  explicit PhaseClock(std::vector<std::pair<std::string, double>>& out) : out_(out) {}
  void mark(const char* name) {
    auto now = Clock::now();
    out_.emplace_back(name, std::chrono::duration<double, std::milli>(now - last_).count());
    last_ = now;
  }

 private:
  std::vector<std::pair<std::string, double>>& out_;
  Clock::time_point last_ = Clock::now();
};
}  // namespace

asio::awaitable<Result<std::shared_ptr<AgentClient>>> Runtime::restoreVm(
    hypervisor::Vm& vm, bool from_template, std::string name,
    std::vector<std::pair<std::string, double>>& phases) {
  PhaseClock pc(phases);
  VESSEL_CO_TRY(co_await vm.loadState(from_template));
  pc.mark("load_state");
  VESSEL_CO_TRY(co_await vm.resumeVcpus());
  pc.mark("cont");
  // The agent still believes in the session it had at snapshot time:
  // reconnect() resynchronises it (docs/agent-protocol.md, Resync). A
  // template snapshot is taken with the channel idle, so its agent's
  // decoder is known to be in step; a paused or forked one may not be.
  auto c = co_await AgentClient::reconnect(std::move(vm.agentChannel()), name,
                                           Clock::now() + opts_.ready_timeout, from_template);
  if (!c.ok()) {
    std::string diag = vm.diagnostics();
    std::string msg = c.error().context();
    if (!diag.empty()) msg += "; " + diag;
    co_return Error(c.error().code(), std::move(msg));
  }
  pc.mark("agent_reconnect");
  co_return std::move(*c);
}

asio::awaitable<Status> Runtime::finishRestore(Sandbox& sb, bool ignore_shared) {
  auto c = co_await restoreVm(*sb.vm_, ignore_shared, sb.id_, sb.phases_ms_);
  if (!c.ok()) co_return std::move(c).error();
  sb.agent_ = std::move(*c);
  PhaseClock pc(sb.phases_ms_);
  auto id = co_await applyIdentity(sb);
  pc.mark("identity");
  co_return id;
}

asio::awaitable<Result<Runtime::Prepared>> Runtime::prepare(
    std::shared_ptr<const templates::Template> t) {
  co_return co_await prepareRestore(t, t->path(templates::kStateFile),
                                    t->path(templates::kRootfsFile), "raw", true);
}

asio::awaitable<Status> Runtime::warm(Prepared& p) {
  if (opts_.pool_mode != RuntimeOptions::PoolMode::kWarm) co_return okStatus();
  std::vector<std::pair<std::string, double>> phases;
  auto c = co_await restoreVm(*p.vm, true, p.vm_id, phases);
  if (!c.ok()) co_return std::move(c).error().withContext("warm " + p.vm_id);
  // One command through the agent's exec path (fork, exec, wait, exit
  // report): the guest code a sandbox's first command runs is translated
  // now rather than then. No user code runs before the identity is set.
  // As the template's default user: that is the path a first command takes.
  if (opts_.warm_exec) {
    ExecSpec ex;
    ex.argv = {"true"};
    auto r = co_await (*c)->run(std::move(ex));
    if (!r.ok()) co_return std::move(r).error().withContext("warm " + p.vm_id);
    if (!r->exit.exited || r->exit.code != 0)
      co_return Error(Code::kInternal, "warm " + p.vm_id + ": `true` failed in the guest");
  }
  // The network most creates ask for, set up now rather than in the
  // create (the same layout in every slot).
  if (opts_.warm_network && p.slot) {
    auto n = co_await configureGuestNetwork(**c, p.slot.get(), *opts_.warm_network, std::nullopt);
    if (!n.ok()) co_return std::move(n).error().withContext("warm " + p.vm_id);
    p.net = opts_.warm_network;
  }
  p.agent = std::move(*c);
  co_return okStatus();
}

asio::awaitable<void> Runtime::discard(Prepared p) {
  if (p.agent) p.agent->close();
  if (p.vm) (void)co_await p.vm->stop();
  releaseSlot(p.slot);
  std::error_code ec;
  fs::remove_all(p.vm_dir, ec);
}

Status Runtime::writeRecord(const Sandbox& sb) {
  json::array env;
  for (const auto& e : sb.env_) env.push_back(json::string(e));
  json::object o;
  o["id"] = sb.id_;
  o["template"] = sb.template_id_;
  o["vm_dir"] = sb.vm_dir_;
  o["hostname"] = sb.hostname_;
  o["env"] = std::move(env);
  o["network"] = json::object{{"route", sb.net_.route}, {"ca_pem", sb.net_.ca_pem}};
  // Its VM has a tap in this slot: adopt() takes the slot over with it.
  if (sb.slot_) o["network_slot"] = sb.slot_->index();
  o["vcpus"] = sb.vcpus_;
  o["memory_mib"] = sb.memory_mib_;
  o["state"] = sb.state_ == Sandbox::State::kPaused ? "paused" : "running";
  // What a later vesseld needs to take the running VM over (adopt()).
  if (sb.vm_ && sb.vm_->pid() > 0) {
    o["vm_pid"] = sb.vm_->pid();
    auto ticks = processStartTicks(sb.vm_->pid());
    if (ticks.ok()) o["vm_start_ticks"] = *ticks;
  }
  return writeFileAtomic(sb.dir_ + "/sandbox.json", json::serialize(o), 0600);
}

asio::awaitable<Result<std::shared_ptr<Sandbox>>> Runtime::create(std::string template_name,
                                                                  CreateOptions opts) {
  auto t0 = Clock::now();
  auto t = store_.open(template_name);
  if (!t.ok()) co_return std::move(t).error();
  auto sb = std::make_shared<Sandbox>();
  sb->phases_ms_.emplace_back("open_template",
                              std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  sb->id_ = opts.id.empty() ? newId("sb") : opts.id;
  if (!validId(sb->id_))
    co_return Error(Code::kInvalidArgument, "bad sandbox id '" + sb->id_ + "'");
  sb->dir_ = opts_.root + "/sandboxes/" + sb->id_;
  std::error_code ec;
  if (!fs::create_directory(sb->dir_, ec))
    co_return Error(Code::kAlreadyExists, "sandbox " + sb->id_ + " exists");
  ScopeExit remove_dir([&] { fs::remove_all(sb->dir_, ec); });
  sb->template_id_ = (*t)->id();
  sb->hostname_ = opts.hostname.empty() ? sb->id_ : opts.hostname;
  sb->env_ = opts.env;
  sb->net_ = opts.network;
  sb->vcpus_ = (*t)->manifest.vcpus;
  sb->memory_mib_ = (*t)->manifest.memory_mib;
  std::string ctx = "create sandbox " + sb->id_ + " from " + (*t)->id();

  if (opts.cold) {
    sb->vm_dir_ = opts_.root + "/vms/" + newId("vm");
    fs::create_directories(sb->vm_dir_, ec);
    ScopeExit rm_vm([&] { fs::remove_all(sb->vm_dir_, ec); });
    VESSEL_CO_TRY(co_await makeOverlay(sb->vm_dir_ + "/disk.qcow2",
                                       (*t)->path(templates::kRootfsFile), "raw"));
    hypervisor::MachineSpec s =
        machineSpec(sb->vm_dir_, sb->vcpus_, sb->memory_mib_, (*t)->manifest.cmdline);
    Status n = co_await attachNetwork(s, (*t)->manifest, sb->slot_);
    if (!n.ok()) co_return std::move(n).error().withContext(ctx);
    auto m = co_await bootMachine(hv_, s, Clock::now() + opts_.ready_timeout);
    if (!m.ok()) {
      releaseSlot(sb->slot_);
      co_return std::move(m).error().withContext(ctx);
    }
    sb->vm_ = std::move(m->vm);
    sb->agent_ =
        AgentClient::create(std::move(sb->vm_->agentChannel()), std::move(m->leftover), sb->id_);
    auto id = co_await applyIdentity(*sb);
    if (!id.ok()) {
      (void)co_await sb->vm_->stop();
      releaseSlot(sb->slot_);
      co_return std::move(id).error().withContext(ctx);
    }
    rm_vm.dismiss();
  } else {
    // A warm VM that died while it waited (it is only found out now) is
    // discarded and the create goes on with the next one.
    for (int attempt = 0;; ++attempt) {
      Prepared p;
      PhaseClock pc(sb->phases_ms_);
      auto pooled = pool_.take(template_name, (*t)->id(), attempt == 0);
      // Now, not after the create: in a burst the pool starts making what
      // the next creates will want (at a lower priority than this one).
      pool_.refillLater(template_name);
      if (pooled) {
        p = std::move(*pooled);
        pc.mark("from_pool");
      } else {
        auto r = co_await prepareRestore(*t, (*t)->path(templates::kStateFile),
                                         (*t)->path(templates::kRootfsFile), "raw", true);
        if (!r.ok()) co_return std::move(r).error().withContext(ctx);
        p = std::move(*r);
        pc.mark("start_qemu");
      }
      bool was_warm = p.agent != nullptr;
      sb->vm_dir_ = p.vm_dir;
      sb->vm_ = std::move(p.vm);
      sb->slot_ = std::move(p.slot);
      Status fin = okStatus();
      if (was_warm) {
        sb->agent_ = std::move(p.agent);
        sb->agent_->setName(sb->id_);
        fin = co_await applyIdentity(*sb, p.net);
        pc.mark("identity");
      } else {
        fin = co_await finishRestore(*sb, true);
      }
      if (fin.ok()) break;
      if (sb->agent_) sb->agent_->close();
      sb->agent_.reset();
      (void)co_await sb->vm_->stop();
      sb->vm_.reset();
      releaseSlot(sb->slot_);
      fs::remove_all(sb->vm_dir_, ec);
      if (!was_warm || attempt >= 2) {
        pool_.refillLater(template_name);
        co_return std::move(fin).error().withContext(ctx);
      }
      Logger("runtime", sb->id_)
          .warn("pooled VM {} failed, trying another: {}", p.vm_id, fin.error().message());
    }
    pool_.refillLater(template_name);  // if the one above stopped early
  }
  store_.acquire(sb->template_id_);
  auto t1 = Clock::now();
  VESSEL_CO_TRY(writeRecord(*sb));
  sb->phases_ms_.emplace_back("write_record",
                              std::chrono::duration<double, std::milli>(Clock::now() - t1).count());
  remove_dir.dismiss();
  co_return sb;
}

asio::awaitable<Status> Runtime::pause(Sandbox& sb) {
  std::string ctx = "pause sandbox " + sb.id_;
  if (sb.state_ != Sandbox::State::kRunning)
    co_return Error(Code::kFailedPrecondition, ctx + ": sandbox is not running");
  auto s = co_await sb.vm_->pauseVcpus();
  if (s.ok()) s = co_await sb.vm_->saveState(sb.dir_ + "/pause.state", false);
  if (!s.ok()) {
    (void)co_await sb.vm_->resumeVcpus();
    co_return std::move(s).error().withContext(ctx);
  }
  sb.agent_->close();
  sb.agent_.reset();
  (void)co_await sb.vm_->stop();
  sb.vm_.reset();
  releaseSlot(sb.slot_);  // resume takes a fresh one
  sb.state_ = Sandbox::State::kPaused;
  VESSEL_CO_TRY(writeRecord(sb));
  co_return okStatus();
}

Result<std::shared_ptr<Sandbox>> Runtime::readRecord(const std::string& id,
                                                     json::object& raw) const {
  std::string dir = opts_.root + "/sandboxes/" + id;
  auto text = readFile(dir + "/sandbox.json");
  if (!text.ok()) return Error(Code::kNotFound, "no sandbox record: " + text.error().message());
  boost::system::error_code jec;
  json::value v = json::parse(*text, jec);
  if (jec || !v.is_object()) return Error(Code::kInternal, "sandbox.json is corrupt");
  raw = std::move(v.as_object());
  auto sb = std::make_shared<Sandbox>();
  sb->id_ = id;
  sb->dir_ = dir;
  try {
    sb->vm_dir_ = std::string(raw.at("vm_dir").as_string());
    sb->template_id_ = std::string(raw.at("template").as_string());
    sb->hostname_ = std::string(raw.at("hostname").as_string());
    for (auto& e : raw.at("env").as_array()) sb->env_.emplace_back(e.as_string());
    if (auto* n = raw.if_contains("network")) {
      sb->net_.route = n->at("route").as_bool();
      sb->net_.ca_pem = std::string(n->at("ca_pem").as_string());
    }
    sb->vcpus_ = static_cast<unsigned>(raw.at("vcpus").to_number<uint64_t>());
    sb->memory_mib_ = raw.at("memory_mib").to_number<uint64_t>();
    (void)raw.at("state").as_string();
  } catch (const std::exception& e) {
    return Error(Code::kInternal, std::string("sandbox.json: ") + e.what());
  }
  return sb;
}

asio::awaitable<Result<std::shared_ptr<Sandbox>>> Runtime::resume(const std::string& id) {
  std::string ctx = "resume sandbox " + id;
  if (!validId(id)) co_return Error(Code::kInvalidArgument, ctx + ": bad id");
  json::object o;
  auto rec = readRecord(id, o);
  if (!rec.ok()) co_return std::move(rec).error().withContext(ctx);
  std::shared_ptr<Sandbox> sb = std::move(*rec);
  std::string dir = sb->dir_;
  if (o.at("state").as_string() != "paused")
    co_return Error(Code::kFailedPrecondition, ctx + ": sandbox is not paused");
  auto at = sb->template_id_.find('@');
  auto t = store_.open(sb->template_id_.substr(0, at), sb->template_id_.substr(at + 1));
  if (!t.ok()) co_return std::move(t).error().withContext(ctx);

  auto state = Fd::open(dir + "/pause.state", O_RDONLY);
  if (!state.ok()) co_return std::move(state).error().withContext(ctx);
  hypervisor::MachineSpec s =
      machineSpec(sb->vm_dir_, sb->vcpus_, sb->memory_mib_, (*t)->manifest.cmdline);
  s.incoming = true;
  s.incoming_state_fd = state->get();
  Status n = co_await attachNetwork(s, (*t)->manifest, sb->slot_);
  if (!n.ok()) co_return std::move(n).error().withContext(ctx);
  auto vm = co_await hv_.start(s, Clock::now() + 30s);
  if (!vm.ok()) {
    releaseSlot(sb->slot_);
    co_return std::move(vm).error().withContext(ctx);
  }
  sb->vm_ = std::move(*vm);
  auto fin = co_await finishRestore(*sb, false);
  if (!fin.ok()) {
    if (sb->agent_) sb->agent_->close();
    (void)co_await sb->vm_->stop();
    releaseSlot(sb->slot_);
    co_return std::move(fin).error().withContext(ctx);
  }
  std::error_code ec;
  fs::remove(dir + "/pause.state", ec);
  sb->state_ = Sandbox::State::kRunning;
  store_.acquire(sb->template_id_);
  VESSEL_CO_TRY(writeRecord(*sb));
  co_return sb;
}

asio::awaitable<Result<std::vector<std::shared_ptr<Sandbox>>>> Runtime::fork(Sandbox& sb,
                                                                             int count) {
  if (count < 1 || count > 64)
    co_return Error(Code::kInvalidArgument, "fork sandbox " + sb.id_ + ": count 1 to 64");
  std::vector<std::string> ids;
  for (int i = 0; i < count; ++i) ids.push_back(newId("sb"));
  co_return co_await forkAs(sb, std::move(ids));
}

asio::awaitable<Result<std::vector<std::shared_ptr<Sandbox>>>> Runtime::forkAs(
    Sandbox& sb, std::vector<std::string> ids) {
  std::string ctx = "fork sandbox " + sb.id_;
  int count = static_cast<int>(ids.size());
  if (count < 1 || count > 64) co_return Error(Code::kInvalidArgument, ctx + ": count 1 to 64");
  if (sb.state_ != Sandbox::State::kRunning)
    co_return Error(Code::kFailedPrecondition, ctx + ": sandbox is not running");
  auto at = sb.template_id_.find('@');
  auto t = store_.open(sb.template_id_.substr(0, at), sb.template_id_.substr(at + 1));
  if (!t.ok()) co_return std::move(t).error().withContext(ctx);
  // A brief pause: state and disk are captured together, then the
  // original carries on.
  std::string snap = sb.dir_ + "/fork-" + newId("s");
  std::error_code ec;
  fs::create_directories(snap, ec);
  ScopeExit rm_snap([&] { fs::remove_all(snap, ec); });
  VESSEL_CO_TRY(co_await sb.vm_->pauseVcpus());
  auto saved = co_await sb.vm_->saveState(snap + "/state", false);
  if (saved.ok()) {
    fs::copy_file(sb.vm_dir_ + "/disk.qcow2", snap + "/disk.qcow2", ec);
    if (ec) saved = Error(Code::kInternal, "copy disk: " + ec.message());
  }
  auto resumed = co_await sb.vm_->resumeVcpus();
  if (!saved.ok()) co_return std::move(saved).error().withContext(ctx);
  if (!resumed.ok()) co_return std::move(resumed).error().withContext(ctx);

  std::vector<std::shared_ptr<Sandbox>> out;
  for (int i = 0; i < count; ++i) {
    auto child = std::make_shared<Sandbox>();
    child->id_ = ids[static_cast<size_t>(i)];
    child->dir_ = opts_.root + "/sandboxes/" + child->id_;
    fs::create_directories(child->dir_, ec);
    child->template_id_ = sb.template_id_;
    child->hostname_ = child->id_;
    child->env_ = sb.env_;
    child->net_ = sb.net_;
    child->vcpus_ = sb.vcpus_;
    child->memory_mib_ = sb.memory_mib_;
    // The child's disk: a private copy of the parent's overlay.
    auto r = co_await prepareRestore(*t, snap + "/state", snap + "/disk.qcow2", "qcow2", false);
    Status st = r.ok() ? okStatus() : Status(r.error());
    if (r.ok()) {
      child->vm_dir_ = r->vm_dir;
      child->vm_ = std::move(r->vm);
      child->slot_ = std::move(r->slot);
      st = co_await finishRestore(*child, false);
    }
    if (!st.ok()) {
      if (child->agent_) child->agent_->close();
      if (child->vm_) (void)co_await child->vm_->stop();
      releaseSlot(child->slot_);
      fs::remove_all(child->dir_, ec);
      if (!child->vm_dir_.empty()) fs::remove_all(child->vm_dir_, ec);
      for (auto& c : out) (void)co_await destroy(*c);
      co_return std::move(st).error().withContext(ctx);
    }
    store_.acquire(child->template_id_);
    (void)writeRecord(*child);
    out.push_back(std::move(child));
  }
  co_return out;
}

asio::awaitable<Result<std::shared_ptr<const templates::Template>>> Runtime::forkToTemplate(
    Sandbox& sb, std::string name) {
  std::string ctx = "fork sandbox " + sb.id_ + " into template " + name;
  if (sb.state_ != Sandbox::State::kRunning)
    co_return Error(Code::kFailedPrecondition, ctx + ": sandbox is not running");
  auto at = sb.template_id_.find('@');
  auto parent = store_.open(sb.template_id_.substr(0, at), sb.template_id_.substr(at + 1));
  if (!parent.ok()) co_return std::move(parent).error().withContext(ctx);
  std::string version = newId("f").substr(2) + newId("f").substr(2).substr(0, 4);
  std::string staging = store_.root() + "/.staging-" + name + "-" + version;
  std::error_code ec;
  fs::create_directories(staging, ec);
  if (ec) co_return Error(Code::kInternal, ctx + ": create " + staging + ": " + ec.message());
  ScopeExit rm_staging([&] { fs::remove_all(staging, ec); });

  // 1. The sandbox's full state (its RAM is a private copy-on-write view
  //    of its own template's file, so it travels in the stream) and its
  //    disk, captured together while it is paused.
  VESSEL_CO_TRY(co_await sb.vm_->pauseVcpus());
  auto saved = co_await sb.vm_->saveState(staging + "/full.state", false);
  if (saved.ok()) {
    fs::copy_file(sb.vm_dir_ + "/disk.qcow2", staging + "/overlay.qcow2", ec);
    if (ec) saved = Error(Code::kInternal, "copy disk: " + ec.message());
  }
  auto resumed = co_await sb.vm_->resumeVcpus();
  if (!saved.ok()) co_return std::move(saved).error().withContext(ctx);
  if (!resumed.ok()) co_return std::move(resumed).error().withContext(ctx);

  // 2. The disk flattened into a raw base image of its own.
  {
    SpawnOptions so;
    so.argv = {"qemu-img",
               "convert",
               "-q",
               "-O",
               "raw",
               staging + "/overlay.qcow2",
               staging + "/" + templates::kRootfsFile};
    auto p = ChildProcess::spawn(so);
    if (!p.ok()) co_return std::move(p).error().withContext(ctx);
    const std::chrono::milliseconds limit = 600s;
    auto st = co_await waitAsync(*p, limit);
    if (!st.ok()) co_return std::move(st).error().withContext(ctx + ": qemu-img convert");
    if (!st->success())
      co_return Error(Code::kInternal, ctx + ": qemu-img convert: " + st->describe());
    fs::remove(staging + "/overlay.qcow2", ec);
  }

  // 3. The state loaded, never run, into a QEMU whose RAM is a shared
  //    mapping of the new template's memory file, and saved again without
  //    the RAM: the layout every template has (docs/snapshot-format.md).
  {
    auto full = Fd::open(staging + "/full.state", O_RDONLY);
    if (!full.ok()) co_return std::move(full).error().withContext(ctx);
    std::string vm_dir = opts_.root + "/vms/" + newId("vm");
    fs::create_directories(vm_dir, ec);
    ScopeExit rm_vm([&] { fs::remove_all(vm_dir, ec); });
    hypervisor::MachineSpec s =
        machineSpec(vm_dir, sb.vcpus_, sb.memory_mib_, (*parent)->manifest.cmdline);
    s.disks = {{staging + "/" + templates::kRootfsFile, false, "raw"}};
    s.memory_file = staging + "/" + templates::kMemoryFile;
    s.memory_shared = true;
    s.network_device = (*parent)->manifest.network;  // same devices as the state; no tap
    s.incoming = true;
    s.incoming_state_fd = full->get();
    auto vm = co_await hv_.start(s, Clock::now() + 30s);
    if (!vm.ok()) co_return std::move(vm).error().withContext(ctx);
    auto st = co_await (*vm)->loadState(false);
    if (st.ok()) st = co_await (*vm)->saveState(staging + "/" + templates::kStateFile, true);
    (void)co_await (*vm)->stop();
    if (!st.ok()) co_return std::move(st).error().withContext(ctx);
    fs::remove(staging + "/full.state", ec);
  }

  // 4. The manifest. The version is random: a fork is not reproducible
  //    from a spec, so its hash names its origin instead.
  templates::Manifest man;
  man.name = name;
  man.version = version;
  man.qemu_version = (*parent)->manifest.qemu_version;
  man.kernel_sha256 = (*parent)->manifest.kernel_sha256;
  man.cmdline = (*parent)->manifest.cmdline;
  man.vcpus = sb.vcpus_;
  man.memory_mib = sb.memory_mib_;
  man.network = (*parent)->manifest.network;  // the state has the parent's devices
  {
    auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    char buf[32];
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    man.created_at = buf;
  }
  for (const char* f : {templates::kRootfsFile, templates::kMemoryFile, templates::kStateFile}) {
    auto sha = sha256File(staging + "/" + f);
    if (!sha.ok()) co_return std::move(sha).error().withContext(ctx);
    man.files[f] = *sha;
  }
  man.spec_hash = sha256Hex("fork\n" + sb.template_id_ + "\n" + sb.id_ + "\n" + man.created_at +
                            "\n" + man.files[templates::kStateFile]);
  auto t = store_.install(staging, std::move(man));
  if (!t.ok()) co_return std::move(t).error().withContext(ctx);
  rm_staging.dismiss();
  Logger("runtime", sb.id_).info("forked into template {}", (*t)->id());
  co_return t;
}

asio::awaitable<Status> Runtime::destroy(Sandbox& sb) {
  if (sb.agent_) sb.agent_->close();
  if (sb.vm_) (void)co_await sb.vm_->stop();
  sb.vm_.reset();
  sb.agent_.reset();
  releaseSlot(sb.slot_);
  std::error_code ec;
  fs::remove_all(sb.vm_dir_, ec);
  fs::remove_all(sb.dir_, ec);
  store_.release(sb.template_id_);
  co_return okStatus();
}

void Runtime::release(Sandbox& sb) {
  if (sb.agent_) sb.agent_->close();
  sb.agent_.reset();
  if (sb.vm_) sb.vm_->release();
  sb.vm_.reset();
  if (sb.slot_ && opts_.slots) opts_.slots->handOver(std::move(sb.slot_));
  sb.slot_.reset();
  store_.release(sb.template_id_);
}

asio::awaitable<Result<std::shared_ptr<Sandbox>>> Runtime::adopt(const std::string& id) {
  std::string ctx = "adopt sandbox " + id;
  if (!validId(id)) co_return Error(Code::kInvalidArgument, ctx + ": bad id");
  json::object o;
  auto rec = readRecord(id, o);
  if (!rec.ok()) {
    if (rec.error().code() == Code::kNotFound)
      co_return Error(Code::kNotFound,
                      ctx + ": the VM never finished starting: " + rec.error().message());
    co_return std::move(rec).error().withContext(ctx);
  }
  std::shared_ptr<Sandbox> sb = std::move(*rec);
  std::string dir = sb->dir_;
  pid_t pid = 0;
  uint64_t ticks = 0;
  bool paused = false;
  std::optional<uint32_t> slot_index;
  try {
    if (auto* n = o.if_contains("network_slot")) slot_index = n->to_number<uint32_t>();
    paused = o.at("state").as_string() == "paused";
    if (auto* p = o.if_contains("vm_pid")) pid = static_cast<pid_t>(p->to_number<int64_t>());
    if (auto* t = o.if_contains("vm_start_ticks")) ticks = t->to_number<uint64_t>();
  } catch (const std::exception& e) {
    co_return Error(Code::kInternal, ctx + ": sandbox.json: " + e.what());
  }
  std::error_code ec;
  if (paused) {
    if (!fs::exists(dir + "/pause.state", ec))
      co_return Error(Code::kNotFound, ctx + ": paused, but its saved state is missing");
    sb->state_ = Sandbox::State::kPaused;
    store_.acquire(sb->template_id_);
    co_return sb;
  }
  if (pid <= 0) co_return Error(Code::kNotFound, ctx + ": no VM process recorded");
  hypervisor::MachineSpec s = machineSpec(sb->vm_dir_, sb->vcpus_, sb->memory_mib_, "");
  auto vm = co_await hv_.adopt(s, pid, ticks, Clock::now() + 10s);
  if (vm.ok() && slot_index) {
    // Its tap is in a slot the old vesseld handed over; without the slot
    // (no egress now, or it is incomplete) the guest's network would be
    // dead or unpoliced: stop the VM instead. A slot of a VM that is gone
    // is removed with the other leftovers (SlotPool::dropLeftovers).
    Result<std::unique_ptr<network::Slot>> sl =
        opts_.slots ? opts_.slots->adopt(*slot_index)
                    : Result<std::unique_ptr<network::Slot>>(
                          Error(Code::kFailedPrecondition,
                                "it has a network slot and this vesseld runs without egress"));
    if (!sl.ok()) {
      (void)co_await (*vm)->stop();
      co_return Error(sl.error().code(),
                      ctx + ": " + sl.error().message() + "; its VM was stopped");
    }
    sb->slot_ = std::move(*sl);
  }
  if (!vm.ok()) co_return std::move(vm).error().withContext(ctx);
  sb->vm_ = std::move(*vm);
  // A pause that was saving when the old vesseld died left the vCPUs
  // stopped; the sandbox is still running as far as anyone knows.
  // (No co_await inside a conditional expression: g++ 12 miscompiles it.)
  Status st = co_await sb->vm_->resumeVcpus();
  if (st.ok()) {
    auto c = co_await AgentClient::reconnect(std::move(sb->vm_->agentChannel()), id,
                                             Clock::now() + opts_.ready_timeout);
    if (c.ok())
      sb->agent_ = std::move(*c);
    else
      st = std::move(c).error();
  }
  if (!st.ok()) {
    std::string diag = sb->vm_->diagnostics();
    (void)co_await sb->vm_->stop();
    releaseSlot(sb->slot_);
    std::string msg = st.error().message();
    if (!diag.empty()) msg += "; " + diag;
    co_return Error(st.error().code(), ctx + ": " + msg);
  }
  sb->state_ = Sandbox::State::kRunning;
  fs::remove(dir + "/pause.state", ec);  // from a pause that did not finish
  store_.acquire(sb->template_id_);
  co_return sb;
}

asio::awaitable<int> Runtime::discardOrphans(std::set<std::string> keep) {
  int n = 0;
  std::set<std::string> vm_dirs_in_use;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(opts_.root + "/sandboxes", ec)) {
    std::string id = e.path().filename().string();
    if (keep.count(id)) {
      auto text = readFile(e.path().string() + "/sandbox.json");
      boost::system::error_code jec;
      json::value v = text.ok() ? json::parse(*text, jec) : json::value();
      if (!jec && v.is_object())
        if (auto* d = v.as_object().if_contains("vm_dir"); d && d->is_string())
          vm_dirs_in_use.insert(std::string(d->as_string()));
      continue;
    }
    std::error_code rec;
    fs::remove_all(e.path(), rec);
    ++n;
  }
  std::vector<std::string> orphans;
  for (auto& e : fs::directory_iterator(opts_.root + "/vms", ec))
    if (!vm_dirs_in_use.count(e.path().string())) orphans.push_back(e.path().string());
  for (auto& d : orphans) {
    auto s = co_await hv_.stopOrphan(d + "/run");
    if (!s.ok()) Logger("runtime").warn("orphan VM in {}: {}", d, s.error().message());
    std::error_code rec;
    fs::remove_all(d, rec);
    ++n;
  }
  co_return n;
}

}  // namespace vessel::node
