// `vessel status`: the node's /healthz for people, with what stands between
// a guest and the host said first. Creates print the same warning (stderr)
// when the node runs sandboxes under TCG.
#include <boost/json.hpp>
#include <cstdio>
#include <memory>

#include "cmd/vessel/api_common.h"
#include "cmd/vessel/commands.h"

namespace vessel::cli {

namespace json = boost::json;

namespace {

int runStatus(bool as_json) {
  auto c = apiClient();
  auto r = c.get("/healthz");
  if (!r.ok()) return fail(r.error());
  if (as_json) {
    std::printf("%s\n", prettyJson(*r).c_str());
    return 0;
  }
  std::printf("status       %s\n", client::str(*r, "status").c_str());
  std::printf("version      %s\n", client::str(*r, "version").c_str());
  std::printf("hypervisor   %s %s\n", client::str(*r, "hypervisor").c_str(),
              client::str(*r, "hypervisor_version").c_str());
  std::printf("accel        %s (%s)\n", client::str(*r, "accel").c_str(),
              client::str(*r, "accel_reason").c_str());
  if (const json::value* iso = client::field(*r, "isolation"); iso && iso->is_object()) {
    const auto& o = iso->as_object();
    bool boundary =
        o.contains("boundary") && o.at("boundary").is_bool() && o.at("boundary").as_bool();
    bool jail = o.contains("jail") && o.at("jail").is_bool() && o.at("jail").as_bool();
    std::printf("isolation    %s, %s\n", boundary ? "KVM (hardware boundary)" : "NONE (TCG)",
                jail ? "QEMU jailed" : "QEMU not jailed");
  }
  warnIsolation(*r);
  return 0;
}

}  // namespace

void warnIsolation(const json::value& health) {
  const json::value* iso = client::field(health, "isolation");
  if (!iso || !iso->is_object()) return;
  std::string w = client::str(*iso, "warning");
  if (!w.empty()) std::fprintf(stderr, "vessel: WARNING: %s\n", w.c_str());
}

void addStatus(CLI::App& app, std::function<int()>* run) {
  auto as_json = std::make_shared<bool>(false);
  auto* s = app.add_subcommand("status", "the node's health, acceleration and isolation");
  s->add_flag("--json", *as_json, "print /healthz as JSON");
  s->callback([as_json, run] { *run = [as_json] { return runStatus(*as_json); }; });
}

}  // namespace vessel::cli
