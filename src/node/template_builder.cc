#include "node/template_builder.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <ctime>
#include <filesystem>

#include "agentclient/agent_client.h"
#include "base/log.h"
#include "base/scope_exit.h"
#include "base/sha256.h"
#include "node/machine.h"

namespace vessel::node {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;

Result<BuildSpec> parseBuildSpec(std::string_view text) {
  if (text.size() > (1 << 20)) return Error(Code::kInvalidArgument, "build spec larger than 1 MiB");
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return Error(Code::kInvalidArgument, "build spec: not a JSON object");
  const auto& o = v.as_object();
  BuildSpec s;
  auto str = [&](const char* k, std::string& out) -> Status {
    if (const auto* x = o.if_contains(k)) {
      if (!x->is_string())
        return Error(Code::kInvalidArgument, std::string("build spec: ") + k + " must be a string");
      out = std::string(x->get_string());
    }
    return okStatus();
  };
  auto strs = [&](const char* k, std::vector<std::string>& out) -> Status {
    if (const auto* x = o.if_contains(k)) {
      if (!x->is_array())
        return Error(Code::kInvalidArgument, std::string("build spec: ") + k + " must be a list");
      for (const auto& e : x->get_array()) {
        if (!e.is_string())
          return Error(Code::kInvalidArgument,
                       std::string("build spec: ") + k + " holds a non-string");
        out.emplace_back(e.get_string());
      }
    }
    return okStatus();
  };
  for (const auto& kv : o) {
    static const char* known[] = {"name",  "base",  "files", "commands",   "env",
                                  "start", "ready", "vcpus", "memory_mib", "disk_mib"};
    bool ok = false;
    for (const char* k : known) ok |= kv.key() == k;
    if (!ok)
      return Error(Code::kInvalidArgument,
                   "build spec: unknown field '" + std::string(kv.key()) + "'");
  }
  VESSEL_TRY(str("name", s.name));
  VESSEL_TRY(str("base", s.base));
  VESSEL_TRY(str("start", s.start));
  VESSEL_TRY(str("ready", s.ready));
  VESSEL_TRY(strs("commands", s.commands));
  if (const auto* e = o.if_contains("env")) {
    if (!e->is_object()) return Error(Code::kInvalidArgument, "build spec: env must be an object");
    for (const auto& kv : e->get_object()) {
      if (!kv.value().is_string())
        return Error(Code::kInvalidArgument, "build spec: env values must be strings");
      s.env.push_back(std::string(kv.key()) + "=" + std::string(kv.value().get_string()));
    }
  }
  if (const auto* f = o.if_contains("files")) {
    if (!f->is_object())
      return Error(Code::kInvalidArgument, "build spec: files must be an object");
    for (const auto& kv : f->get_object()) {
      if (kv.key().empty() || kv.key()[0] != '/' || !kv.value().is_string())
        return Error(Code::kInvalidArgument, "build spec: files maps absolute paths to strings");
      s.files[std::string(kv.key())] = std::string(kv.value().get_string());
    }
  }
  if (const auto* x = o.if_contains("vcpus")) {
    if (!x->is_int64() || x->get_int64() < 1 || x->get_int64() > 64)
      return Error(Code::kInvalidArgument, "build spec: vcpus must be 1 to 64");
    s.vcpus = static_cast<unsigned>(x->get_int64());
  }
  if (const auto* x = o.if_contains("memory_mib")) {
    if (!x->is_int64() || x->get_int64() < 64 || x->get_int64() > 65536)
      return Error(Code::kInvalidArgument, "build spec: memory_mib must be 64 to 65536");
    s.memory_mib = static_cast<uint64_t>(x->get_int64());
  }
  if (const auto* x = o.if_contains("disk_mib")) {
    if (!x->is_int64() || x->get_int64() < 64 || x->get_int64() > (int64_t{1} << 24))
      return Error(Code::kInvalidArgument, "build spec: disk_mib must be 64 to 16777216");
    s.disk_mib = static_cast<uint64_t>(x->get_int64());
  }
  if (s.name.empty() || s.name.size() > 64)
    return Error(Code::kInvalidArgument, "build spec: name is required (at most 64 characters)");
  for (char c : s.name)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
      return Error(Code::kInvalidArgument, "build spec: name may hold letters, digits, - and _");
  return s;
}

std::string canonicalSpec(const BuildSpec& s) {
  json::object o;
  o["name"] = s.name;
  o["base"] = s.base;
  json::object files;
  for (const auto& [k, v] : s.files) files[k] = v;
  o["files"] = std::move(files);
  json::array cmds, env;
  for (const auto& c : s.commands) cmds.push_back(json::string(c));
  for (const auto& e : s.env) env.push_back(json::string(e));
  o["commands"] = std::move(cmds);
  o["env"] = std::move(env);
  o["start"] = s.start;
  o["ready"] = s.ready;
  o["vcpus"] = s.vcpus;
  o["memory_mib"] = s.memory_mib;
  // Only when set: specs from before disk sizes keep their versions.
  if (s.disk_mib) o["disk_mib"] = s.disk_mib;
  return json::serialize(o);  // std::map and fixed insertion order: stable
}

namespace {

std::string nowRfc3339() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  char buf[64];
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[80];
  std::snprintf(out, sizeof out, "%s.%03lldZ", buf, static_cast<long long>(ms));
  return out;
}

asio::awaitable<Status> applySpec(agentclient::AgentClient& a, const BuildSpec& spec,
                                  const Progress& progress, Clock::time_point deadline) {
  for (const auto& [path, content] : spec.files) {
    progress("write " + path, 30);
    auto dir = fs::path(path).parent_path().string();
    VESSEL_CO_TRY(co_await a.mkdir(dir, 0755, true));
    agentclient::WriteFileOptions wo;
    wo.path = path;
    auto w = co_await a.writeFile(wo);
    if (!w.ok()) co_return std::move(w).error().withContext("write " + path);
    VESSEL_CO_TRY(co_await (*w)->write(content));
    VESSEL_CO_TRY(co_await (*w)->finish());
  }
  int i = 0;
  for (const auto& cmd : spec.commands) {
    progress("run: " + cmd,
             35 + 30 * i++ / std::max<int>(1, static_cast<int>(spec.commands.size())));
    agentclient::ExecSpec e;
    e.shell = cmd;
    e.user = "root";
    auto r = co_await a.run(e);
    if (!r.ok()) co_return std::move(r).error().withContext("build command '" + cmd + "'");
    if (!r->exit.exited || r->exit.code != 0)
      co_return Error(Code::kFailedPrecondition,
                      "build command '" + cmd + "' failed (exit " + std::to_string(r->exit.code) +
                          "): " + r->err.substr(r->err.size() > 2000 ? r->err.size() - 2000 : 0));
  }
  if (!spec.env.empty()) VESSEL_CO_TRY(co_await a.setDefaultEnv(spec.env));
  if (!spec.start.empty()) {
    progress("start: " + spec.start, 70);
    agentclient::ExecSpec e;
    e.shell = spec.start;
    auto p = co_await a.exec(e);
    if (!p.ok()) co_return std::move(p).error().withContext("start '" + spec.start + "'");
    (*p)->detach();  // keeps running inside the snapshot
  }
  if (!spec.ready.empty()) {
    progress("wait until ready: " + spec.ready, 75);
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (;;) {
      agentclient::ExecSpec e;
      e.shell = spec.ready;
      auto r = co_await a.run(e);
      if (r.ok() && r->exit.exited && r->exit.code == 0) break;
      if (Clock::now() > deadline)
        co_return Error(Code::kDeadlineExceeded,
                        "readiness check '" + spec.ready + "' never passed");
      t.expires_after(200ms);
      co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }
  agentclient::ExecSpec sync;
  sync.argv = {"sync"};
  sync.user = "root";
  auto r = co_await a.run(sync);
  if (!r.ok()) co_return std::move(r).error().withContext("sync");
  co_return okStatus();
}

}  // namespace

asio::awaitable<Result<std::shared_ptr<const templates::Template>>> buildTemplate(
    hypervisor::Hypervisor& hv, templates::TemplateStore& store, const BuildSpec& spec,
    const BuildInputs& in, Progress progress) {
  if (!progress) progress = [](const std::string&, int) {};
  Logger log("templates");
  std::string ctx = "build template " + spec.name;
  progress("hash inputs", 0);
  auto base_sha = sha256File(in.base_image);
  if (!base_sha.ok()) co_return std::move(base_sha).error().withContext(ctx + ": base image");
  // "nic": templates carry a virtio-net device (older ones did not).
  // "tsc": their guest keeps time with the TSC and is tickless when idle
  // (qemu::baseCmdline); older snapshots tick at 250 Hz forever.
  std::string hash = sha256Hex(canonicalSpec(spec) + "\n" + *base_sha + "\n" + in.kernel_sha256 +
                               "\n" + in.qemu_version + "\nnic\ntsc");
  std::string version = hash.substr(0, 16);
  if (auto cached = store.open(spec.name, version); cached.ok()) {
    progress("cached", 100);
    co_return cached;
  }
  VESSEL_CO_TRY(store.checkSpace(ctx));
  std::string staging = store.root() + "/.staging-" + spec.name + "-" + version;
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) co_return Error(Code::kInternal, ctx + ": create " + staging + ": " + ec.message());
  ScopeExit rm_staging([&] { fs::remove_all(staging, ec); });

  progress("copy base image", 5);
  fs::copy_file(in.base_image, staging + "/" + templates::kRootfsFile, ec);
  if (ec) co_return Error(Code::kInternal, ctx + ": copy base image: " + ec.message());

  hypervisor::MachineSpec m;
  m.id = "tb-" + version;
  m.vcpus = spec.vcpus;
  m.memory_mib = spec.memory_mib;
  m.accel = in.accel;
  m.kernel = in.kernel;
  m.cmdline = "init=/sbin/vessel-agent";
  m.disks = {{staging + "/" + templates::kRootfsFile, false, "raw"}};
  m.memory_file = staging + "/" + templates::kMemoryFile;
  m.memory_shared = true;   // guest RAM lands in the template's memory file
  m.network_device = true;  // unconnected while building; sandboxes get their slot's tap
  m.run_dir = in.work_dir + "/" + m.id;
  m.console_log = in.work_dir + "/" + m.id + ".console.log";
  ScopeExit rm_console([&] { fs::remove(m.console_log, ec); });
  auto deadline = Clock::now() + in.timeout;
  progress("boot base", 10);
  auto mach = co_await bootMachine(hv, m, deadline);
  if (!mach.ok()) co_return std::move(mach).error().withContext(ctx);
  auto agent = agentclient::AgentClient::create(std::move(mach->vm->agentChannel()),
                                                std::move(mach->leftover), m.id);
  auto applied = co_await applySpec(*agent, spec, progress, deadline);
  Status snap = applied;
  if (snap.ok()) {
    progress("snapshot", 85);
    snap = co_await mach->vm->pauseVcpus();
    if (snap.ok()) snap = co_await mach->vm->saveState(staging + "/" + templates::kStateFile, true);
  }
  agent->close();
  (void)co_await mach->vm->stop();
  if (!snap.ok()) co_return std::move(snap).error().withContext(ctx);

  progress("checksum", 90);
  templates::Manifest man;
  man.name = spec.name;
  man.version = version;
  man.spec_hash = hash;
  man.qemu_version = in.qemu_version;
  man.kernel_sha256 = in.kernel_sha256;
  man.cmdline = m.cmdline;
  man.vcpus = spec.vcpus;
  man.memory_mib = spec.memory_mib;
  man.disk_mib = spec.disk_mib;
  man.network = true;
  man.created_at = nowRfc3339();
  for (const char* f : {templates::kRootfsFile, templates::kMemoryFile, templates::kStateFile}) {
    auto sha = sha256File(staging + "/" + f);
    if (!sha.ok()) co_return std::move(sha).error().withContext(ctx);
    man.files[f] = *sha;
  }
  auto t = store.install(staging, std::move(man));
  if (!t.ok()) co_return std::move(t).error().withContext(ctx);
  rm_staging.dismiss();
  progress("done", 100);
  log.info("built template {}", (*t)->id());
  co_return t;
}

}  // namespace vessel::node
