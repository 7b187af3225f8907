// Egress from the command line (docs/gateway.md): the --network and
// --credential flags of `vessel sandbox create`, `vessel sandbox network`
// to read or change a sandbox's policy live, and `vessel credential
// create|list|delete`. A secret is taken from the command line or, better
// (it stays out of shell history and `ps`), from stdin.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <cstdio>
#include <iostream>
#include <iterator>

#include "cmd/vessel/api_common.h"
#include "cmd/vessel/commands.h"

namespace vessel::cli {

namespace json = boost::json;

Result<json::object> networkFlag(const std::string& spec) {
  if (spec == "none" || spec == "full") return json::object{{"mode", spec}};
  constexpr std::string_view kAllow = "allow:";
  if (spec.rfind(kAllow, 0) == 0) {
    json::array names;
    std::string_view rest = std::string_view(spec).substr(kAllow.size());
    while (!rest.empty()) {
      auto comma = rest.find(',');
      std::string_view name = rest.substr(0, comma);
      if (!name.empty()) names.emplace_back(name);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    if (names.empty())
      return Error(Code::kInvalidArgument, "--network allow: needs at least one name");
    return json::object{{"mode", "allowlist"}, {"allow", std::move(names)}};
  }
  return Error(Code::kInvalidArgument, "--network '" + spec +
                                           "': expected none, full or allow:NAME[,NAME...] "
                                           "(e.g. allow:pypi.org,*.github.com:443)");
}

namespace {

void printNetwork(const json::value& v) {
  auto joined = [&](const char* key) {
    std::string out;
    if (const json::value* a = client::field(v, key); a && a->is_array())
      for (const auto& x : a->as_array())
        out += (out.empty() ? "" : ",") + std::string(x.is_string() ? x.as_string() : "?");
    return out;
  };
  std::string allow = joined("allow"), inspect = joined("inspect"), creds;
  if (const json::value* c = client::field(v, "credentials"); c && c->is_array())
    for (const auto& x : c->as_array())
      creds += (creds.empty() ? "" : ",") + std::string(x.is_string() ? x.as_string() : "?");
  std::printf("mode:        %s\n", client::str(v, "mode").c_str());
  if (!allow.empty()) std::printf("allow:       %s\n", allow.c_str());
  if (!inspect.empty()) std::printf("inspect:     %s\n", inspect.c_str());
  std::printf("credentials: %s\n", creds.empty() ? "-" : creds.c_str());
}

struct NetworkOptions {
  std::string id, spec;
  std::vector<std::string> credentials, inspect;
  bool clear_credentials = false, clear_inspect = false;
};

int runNetwork(const NetworkOptions& o) {
  auto c = apiClient();
  std::string path = "/v1/sandboxes/" + o.id + "/network";
  auto now = c.get(path);
  if (!now.ok()) return fail(now.error());
  if (o.spec.empty() && o.credentials.empty() && !o.clear_credentials && o.inspect.empty() &&
      !o.clear_inspect) {
    printNetwork(*now);
    return 0;
  }
  json::object body;
  if (o.spec.empty()) {
    // Only the credentials change: the mode and names stay.
    std::string mode = client::str(*now, "mode");
    body["mode"] = mode;
    if (const json::value* a = client::field(*now, "allow"); a && mode == "allowlist")
      body["allow"] = *a;
  } else {
    auto net = networkFlag(o.spec);
    if (!net.ok()) return fail(net.error());
    body = std::move(*net);
  }
  // PUT replaces the whole policy; inspected names and credentials stay
  // unless changed here.
  if (!o.inspect.empty()) {
    body["inspect"] = json::value_from(o.inspect);
  } else if (!o.clear_inspect && body.at("mode") != "none") {
    if (const json::value* i = client::field(*now, "inspect"); i && i->is_array())
      body["inspect"] = *i;
  }
  if (!o.credentials.empty()) {
    body["credentials"] = json::value_from(o.credentials);
  } else if (!o.clear_credentials) {
    if (const json::value* cr = client::field(*now, "credentials"); cr && cr->is_array())
      body["credentials"] = *cr;
  }
  auto r = c.put(path, body);
  if (!r.ok()) return fail(r.error());
  printNetwork(*r);
  return 0;
}

struct CredentialOptions {
  std::string name, header;
  std::vector<std::string> hosts;
};

int runCredentialCreate(const CredentialOptions& o) {
  std::string field = o.header, value;
  auto colon = o.header.find(':');
  if (colon != std::string::npos) {
    field = o.header.substr(0, colon);
    value = o.header.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
  } else {
    // `--header NAME`: the value is stdin, so the secret is in neither the
    // shell history nor the process list.
    if (::isatty(0)) std::fprintf(stderr, "value for %s (end with Ctrl-D): ", field.c_str());
    value.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) value.pop_back();
  }
  if (field.empty() || value.empty())
    return fail(Error(Code::kInvalidArgument,
                      "--header needs 'Name: value' (or a name, with the value on stdin)"));
  json::object body{
      {"name", o.name}, {"hosts", json::value_from(o.hosts)}, {"header", field}, {"value", value}};
  auto c = apiClient();
  auto r = c.post("/v1/credentials", body);
  if (!r.ok()) return fail(r.error());
  std::printf("%s\n", client::str(*r, "name").c_str());
  return 0;
}

int runCredentialList() {
  auto c = apiClient();
  auto r = c.get("/v1/credentials");
  if (!r.ok()) return fail(r.error());
  std::printf("%-24s %-16s %-24s %s\n", "NAME", "HEADER", "CREATED", "HOSTS");
  if (const json::value* l = client::field(*r, "credentials"); l && l->is_array())
    for (const auto& x : l->as_array()) {
      std::string hosts;
      if (const json::value* h = client::field(x, "hosts"); h && h->is_array())
        for (const auto& n : h->as_array())
          hosts += (hosts.empty() ? "" : ",") + std::string(n.is_string() ? n.as_string() : "?");
      std::printf("%-24s %-16s %-24s %s\n", client::str(x, "name").c_str(),
                  client::str(x, "header").c_str(), client::str(x, "created_at").c_str(),
                  hosts.c_str());
    }
  return 0;
}

int runCredentialDelete(const std::string& name) {
  auto c = apiClient();
  auto r = c.del("/v1/credentials/" + name);
  if (!r.ok()) return fail(r.error());
  std::printf("%s\n", name.c_str());
  return 0;
}

}  // namespace

void addSandboxNetwork(CLI::App& sandbox, std::function<int()>* run) {
  auto o = std::make_shared<NetworkOptions>();
  auto* n = sandbox.add_subcommand(
      "network",
      "show a sandbox's egress policy, or change it live (open connections it no "
      "longer allows are reset)");
  n->add_option("id", o->id, "sandbox id")->required();
  n->add_option("policy", o->spec,
                "none | full | allow:NAME[,NAME...] (names: a.com, *.a.com:443)");
  n->add_option("--credential", o->credentials, "credential the gateway injects, repeatable");
  n->add_flag("--clear-credentials", o->clear_credentials, "inject no credential any more");
  n->add_option("--inspect", o->inspect,
                "NAME[:PORT] whose TLS the gateway terminates to check every request's Host, "
                "repeatable (replaces the list)");
  n->add_flag("--clear-inspect", o->clear_inspect, "terminate no name's TLS for inspection");
  n->callback([o, run] { *run = [o] { return runNetwork(*o); }; });
}

void addCredential(CLI::App& app, std::function<int()>* run) {
  auto* c = app.add_subcommand(
      "credential",
      "secrets the egress gateway injects as a header for some hosts (through the API)");
  c->require_subcommand(1);
  auto o = std::make_shared<CredentialOptions>();
  auto* create = c->add_subcommand("create", "store (or replace) a credential; print its name");
  create->add_option("name", o->name, "credential name")->required();
  create->add_option("--host", o->hosts, "host it is for (TLS, port 443), repeatable")->required();
  create
      ->add_option("--header", o->header,
                   "'Name: value' to inject, or just the name to read the value from stdin")
      ->required();
  create->callback([o, run] { *run = [o] { return runCredentialCreate(*o); }; });
  auto* list = c->add_subcommand("list", "the tenant's credentials (never their values)");
  list->alias("ls");
  list->callback([run] { *run = [] { return runCredentialList(); }; });
  auto name = std::make_shared<std::string>();
  auto* del = c->add_subcommand("delete", "delete a credential")->alias("rm");
  del->add_option("name", *name, "credential name")->required();
  del->callback([name, run] { *run = [name] { return runCredentialDelete(*name); }; });
}

}  // namespace vessel::cli
