// Operator commands that work on a node's store directly, beside a running
// vesseld (SQLite in WAL mode allows it; PostgreSQL with --store or
// $VESSEL_STORE, as vesseld takes it): `vessel tenant create NAME` and
// `vessel key create TENANT`. The key is printed once; only its SHA-256 is
// stored, so it cannot be shown again. `vessel node token NAME` makes a
// node's token (issue 24: each node its own), a line of the API replicas'
// --node-tokens-file. `vessel catalogue key FILE` makes the replicas'
// catalogue signing key and prints the public key nodes are given.
#include <fcntl.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "api/auth.h"
#include "base/fd.h"
#include "base/hex.h"
#include "base/sha256.h"
#include "cluster/catalogue_signature.h"
#include "cluster/node_tokens.h"
#include "cmd/vessel/api_common.h"
#include "cmd/vessel/commands.h"
#include "store/node_roles.h"
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

std::string defaultStore() {
  const char* s = std::getenv("VESSEL_STORE");
  return s && *s ? s : "sqlite";
}

struct StoreArgs {
  std::string state_dir = defaultStateDir();
  std::string store = defaultStore();
};

// Opens the store only where one exists: a typo in --state-dir must not
// create an empty deployment.
Result<std::unique_ptr<store::Store>> openStore(const StoreArgs& a) {
  if (a.store != "sqlite") return store::openPostgres(a.store);
  const std::string& state_dir = a.state_dir;
  std::string db = state_dir + "/vessel.db";
  std::error_code ec;
  if (!std::filesystem::exists(db, ec))
    return Error(Code::kNotFound, "no Vessel store at " + db +
                                      " (has vesseld run with --state-dir " + state_dir + "?)");
  return store::openSqlite(db);
}

int runTenantCreate(const StoreArgs& where, const std::string& name) {
  if (!tenantName(name))
    return fail("tenant name must be 1-32 of a-z, 0-9 and -, not starting with -");
  auto st = openStore(where);
  if (!st.ok()) return fail(st.error());
  if (auto s = (*st)->createTenant(name, name); !s.ok()) {
    if (s.error().code() == Code::kAlreadyExists)
      return fail("tenant '" + name + "' already exists");
    return fail(s.error());
  }
  std::printf("%s\n", name.c_str());
  return 0;
}

int runKeyCreate(const StoreArgs& where, const std::string& tenant) {
  if (!tenantName(tenant)) return fail("tenant '" + tenant + "' does not exist");
  auto st = openStore(where);
  if (!st.ok()) return fail(st.error());
  auto key = api::newApiKey();
  if (!key.ok()) return fail(key.error());
  if (auto s = (*st)->addApiKey(tenant, sha256Hex(*key)); !s.ok()) {
    // SQLite names the foreign key; PostgreSQL's store says precondition.
    if (s.error().message().find("FOREIGN KEY") != std::string::npos ||
        s.error().code() == Code::kFailedPrecondition)
      return fail("tenant '" + tenant + "' does not exist");
    return fail(s.error());
  }
  std::printf("%s\n", key->c_str());
  if (::isatty(1))
    std::fprintf(stderr,
                 "vessel: store this key now: only its hash is kept, it is not shown again\n");
  return 0;
}

// "NAME TOKEN": the line for the replicas' --node-tokens-file; the token
// alone goes in that node's --node-token-file. Checked as the replicas
// will read it, so a name they would refuse is refused here.
int runNodeToken(const std::string& name) {
  auto token = cluster::newNodeToken();
  if (!token.ok()) return fail(token.error());
  std::string line = name + " " + *token;
  if (auto t = cluster::NodeTokens::parse(line); !t.ok()) return fail(t.error());
  std::printf("%s\n", line.c_str());
  return 0;
}

// The node's own PostgreSQL role (store/node_roles.h), with a new random
// password, printed once: the node's --store URL names it as its user.
int runNodeAdd(const StoreArgs& where, const std::string& name) {
  if (where.store == "sqlite")
    return fail("vessel node add needs the cluster's PostgreSQL store (--store=postgres://...)");
  auto st = openStore(where);  // migrated first: the policies must be there
  if (!st.ok()) return fail(st.error());
  auto password = cluster::newNodeToken();
  if (!password.ok()) return fail(password.error());
  if (auto s = store::createNodeRole(where.store, name, *password); !s.ok()) return fail(s.error());
  std::printf("%s\n", password->c_str());
  if (::isatty(1))
    std::fprintf(stderr,
                 "vessel: node %s's store password (shown once); its --store URL is "
                 "postgres://%s:PASSWORD@HOST/DB\n",
                 name.c_str(), name.c_str());
  return 0;
}

// Never over an existing key: replacing it would leave every signed entry
// unverifiable on the nodes (docs/operations.md says how to rotate).
int runCatalogueKey(const std::string& path) {
  unsigned char seed[32];
  if (RAND_bytes(seed, sizeof(seed)) != 1) return fail("RAND_bytes failed");
  std::string_view raw(reinterpret_cast<const char*>(seed), sizeof(seed));
  auto signer = cluster::CatalogueSigner::fromSeed(raw);
  if (!signer.ok()) return fail(signer.error());
  auto fd = Fd::open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (!fd.ok()) return fail(fd.error());
  std::string text = hexEncode(raw) + "\n";
  if (::write(fd->get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
      ::fsync(fd->get()) != 0)
    return fail(Error::fromErrno("write " + path));
  std::printf("%s\n", signer->publicKeyHex().c_str());
  return 0;
}

}  // namespace

void addAdmin(CLI::App& app, std::function<int()>* run) {
  auto where = std::make_shared<StoreArgs>();
  auto arg = std::make_shared<std::string>();
  auto storeOptions = [&](CLI::App* c) {
    c->add_option("--state-dir", where->state_dir, "vesseld's state directory ($VESSEL_STATE_DIR)")
        ->capture_default_str();
    c->add_option("--store", where->store,
                  "the store as vesseld's --store: sqlite (in the state directory) or a "
                  "postgres:// URL ($VESSEL_STORE)")
        ->capture_default_str();
  };

  auto* tenant = app.add_subcommand("tenant", "operator: manage tenants (on the node's store)");
  tenant->require_subcommand(1);
  auto* tc = tenant->add_subcommand("create", "add a tenant; print its name");
  tc->add_option("name", *arg, "tenant name (a-z, 0-9, -)")->required();
  storeOptions(tc);
  tc->callback([=] { *run = [=] { return runTenantCreate(*where, *arg); }; });

  auto* key = app.add_subcommand("key", "operator: manage API keys (on the node's store)");
  key->require_subcommand(1);
  auto* kc = key->add_subcommand("create", "add an API key to a tenant; print it (once)");
  kc->add_option("tenant", *arg, "tenant name")->required();
  storeOptions(kc);
  kc->callback([=] { *run = [=] { return runKeyCreate(*where, *arg); }; });

  auto* node = app.add_subcommand("node", "operator: a cluster's nodes");
  node->require_subcommand(1);
  auto* nt =
      node->add_subcommand("token",
                           "make a node's token; print \"NAME TOKEN\" (a line of the replicas' "
                           "--node-tokens-file; the token alone is the node's --node-token-file)");
  nt->add_option("name", *arg, "the node's --node-name")->required();
  nt->callback([=] { *run = [=] { return runNodeToken(*arg); }; });
  auto* na = node->add_subcommand(
      "add",
      "make the node's own PostgreSQL role (row-level security: its row and the "
      "sandboxes placed on it); print its password");
  na->add_option("name", *arg, "the node's --node-name")->required();
  storeOptions(na);
  na->callback([=] { *run = [=] { return runNodeAdd(*where, *arg); }; });

  auto* cat = app.add_subcommand("catalogue", "operator: the template catalogue's signing key");
  cat->require_subcommand(1);
  auto* ck = cat->add_subcommand(
      "key",
      "make the API replicas' signing key in FILE (0600); print the public key (the "
      "nodes' --catalogue-public-key-file)");
  ck->add_option("file", *arg, "where the private key goes (never an existing file)")->required();
  ck->callback([=] { *run = [=] { return runCatalogueKey(*arg); }; });
}

}  // namespace vessel::cli
