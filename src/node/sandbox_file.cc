#include "node/sandbox_file.h"

#include <boost/json.hpp>

namespace vessel::node {

namespace json = boost::json;

std::string encodeSandboxFile(const SandboxFile& f) {
  json::array env;
  for (const auto& e : f.env) env.push_back(json::string(e));
  json::object o;
  o["id"] = f.id;
  o["template"] = f.template_id;
  o["vm_dir"] = f.vm_dir;
  o["hostname"] = f.hostname;
  o["env"] = std::move(env);
  o["network"] = json::object{{"route", f.network.route}, {"ca_pem", f.network.ca_pem}};
  if (f.network_slot) o["network_slot"] = *f.network_slot;
  o["vcpus"] = f.vcpus;
  o["memory_mib"] = f.memory_mib;
  if (f.disk_mib) o["disk_mib"] = f.disk_mib;
  o["state"] = !f.paused ? "running" : f.disk_only ? "paused-disk" : "paused";
  if (f.start_pid) o["start_pid"] = f.start_pid;
  if (f.vm_pid > 0) {
    o["vm_pid"] = f.vm_pid;
    if (f.vm_start_ticks) o["vm_start_ticks"] = f.vm_start_ticks;
  }
  return json::serialize(o);
}

Result<SandboxFile> decodeSandboxFile(std::string_view text) {
  auto corrupt = [](const std::string& why) {
    return Error(Code::kInternal, "sandbox.json is corrupt: " + why);
  };
  if (text.size() > (1u << 20)) return corrupt("larger than 1 MiB");
  json::parse_options po;
  po.max_depth = 4;
  boost::system::error_code ec;
  json::value v = json::parse(text, ec, {}, po);
  if (ec) return corrupt(ec.message());
  if (!v.is_object()) return corrupt("not an object");
  const json::object& o = v.as_object();
  SandboxFile f;
  try {
    f.id = std::string(o.at("id").as_string());
    f.template_id = std::string(o.at("template").as_string());
    f.vm_dir = std::string(o.at("vm_dir").as_string());
    f.hostname = std::string(o.at("hostname").as_string());
    const auto& env = o.at("env").as_array();
    if (env.size() > 1024) return corrupt("too many env entries");
    for (const auto& e : env) f.env.emplace_back(e.as_string());
    if (auto* n = o.if_contains("network")) {
      f.network.route = n->at("route").as_bool();
      f.network.ca_pem = std::string(n->at("ca_pem").as_string());
    }
    if (auto* n = o.if_contains("network_slot")) f.network_slot = n->to_number<uint32_t>();
    f.vcpus = static_cast<unsigned>(o.at("vcpus").to_number<uint32_t>());
    f.memory_mib = o.at("memory_mib").to_number<uint64_t>();
    if (auto* d = o.if_contains("disk_mib")) f.disk_mib = d->to_number<uint64_t>();
    std::string_view st = o.at("state").as_string();
    if (st != "paused" && st != "paused-disk" && st != "running")
      return corrupt("state '" + std::string(st) + "'");
    f.paused = st != "running";
    f.disk_only = st == "paused-disk";
    if (auto* p = o.if_contains("start_pid")) f.start_pid = p->to_number<uint32_t>();
    if (auto* p = o.if_contains("vm_pid")) f.vm_pid = static_cast<pid_t>(p->to_number<int32_t>());
    if (auto* t = o.if_contains("vm_start_ticks")) f.vm_start_ticks = t->to_number<uint64_t>();
  } catch (const std::exception& e) {
    return corrupt(e.what());
  }
  if (f.id.empty() || f.vm_dir.empty() || f.template_id.find('@') == std::string::npos)
    return corrupt("id, vm_dir and template@version are required");
  return f;
}

}  // namespace vessel::node
