// Operator commands that work on a node's store directly, beside a running
// vesseld (SQLite in WAL mode allows it): `vessel tenant create NAME` and
// `vessel key create TENANT`. The key is printed once; only its SHA-256 is
// stored, so it cannot be shown again.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "api/auth.h"
#include "base/sha256.h"
#include "cmd/vessel/api_common.h"
#include "cmd/vessel/commands.h"
#include "store/store.h"

namespace vessel::cli {

namespace {

std::string defaultStateDir() {
  const char* s = std::getenv("VESSEL_STATE_DIR");
  return s && *s ? s : "/var/lib/vessel";
}

bool tenantName(const std::string& n) {
  if (n.empty() || n.size() > 32 || n.front() == '-') return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

// Opens the store only where one exists: a typo in --state-dir must not
// create an empty deployment.
Result<std::unique_ptr<store::Store>> openStore(const std::string& state_dir) {
  std::string db = state_dir + "/vessel.db";
  std::error_code ec;
  if (!std::filesystem::exists(db, ec))
    return Error(Code::kNotFound, "no Vessel store at " + db +
                                      " (has vesseld run with --state-dir " + state_dir + "?)");
  return store::openSqlite(db);
}

int runTenantCreate(const std::string& state_dir, const std::string& name) {
  if (!tenantName(name))
    return fail("tenant name must be 1-32 of a-z, 0-9 and -, not starting with -");
  auto st = openStore(state_dir);
  if (!st.ok()) return fail(st.error());
  if (auto s = (*st)->createTenant(name, name); !s.ok()) {
    if (s.error().code() == Code::kAlreadyExists)
      return fail("tenant '" + name + "' already exists");
    return fail(s.error());
  }
  std::printf("%s\n", name.c_str());
  return 0;
}

int runKeyCreate(const std::string& state_dir, const std::string& tenant) {
  if (!tenantName(tenant)) return fail("tenant '" + tenant + "' does not exist");
  auto st = openStore(state_dir);
  if (!st.ok()) return fail(st.error());
  auto key = api::newApiKey();
  if (!key.ok()) return fail(key.error());
  if (auto s = (*st)->addApiKey(tenant, sha256Hex(*key)); !s.ok()) {
    if (s.error().message().find("FOREIGN KEY") != std::string::npos)
      return fail("tenant '" + tenant + "' does not exist");
    return fail(s.error());
  }
  std::printf("%s\n", key->c_str());
  if (::isatty(1))
    std::fprintf(stderr,
                 "vessel: store this key now: only its hash is kept, it is not shown again\n");
  return 0;
}

}  // namespace

void addAdmin(CLI::App& app, std::function<int()>* run) {
  auto state_dir = std::make_shared<std::string>(defaultStateDir());
  auto arg = std::make_shared<std::string>();

  auto* tenant = app.add_subcommand("tenant", "operator: manage tenants (on the node's store)");
  tenant->require_subcommand(1);
  auto* tc = tenant->add_subcommand("create", "add a tenant; print its name");
  tc->add_option("name", *arg, "tenant name (a-z, 0-9, -)")->required();
  tc->add_option("--state-dir", *state_dir, "vesseld's state directory ($VESSEL_STATE_DIR)")
      ->capture_default_str();
  tc->callback([=] { *run = [=] { return runTenantCreate(*state_dir, *arg); }; });

  auto* key = app.add_subcommand("key", "operator: manage API keys (on the node's store)");
  key->require_subcommand(1);
  auto* kc = key->add_subcommand("create", "add an API key to a tenant; print it (once)");
  kc->add_option("tenant", *arg, "tenant name")->required();
  kc->add_option("--state-dir", *state_dir, "vesseld's state directory ($VESSEL_STATE_DIR)")
      ->capture_default_str();
  kc->callback([=] { *run = [=] { return runKeyCreate(*state_dir, *arg); }; });
}

}  // namespace vessel::cli
