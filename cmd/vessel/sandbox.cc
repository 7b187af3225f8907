// `vessel sandbox create|list|get|delete|pause|resume|fork` over the public
// API. Like docker: commands that change a sandbox wait until it is done
// (progress on a terminal, quiet in scripts) and print ids on stdout, the
// created sandbox's id as the last line; --async returns at once.
#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <cstdio>

#include "cmd/vessel/api_common.h"
#include "cmd/vessel/commands.h"
#include "cmd/vessel/data_session.h"

namespace vessel::cli {

namespace {

namespace json = boost::json;

struct CreateOptions {
  std::string template_name;
  std::optional<uint64_t> memory_mib;
  std::optional<uint64_t> disk_mib;
  std::optional<unsigned> vcpus;
  std::optional<int64_t> timeout_s;
  std::optional<int64_t> lifetime_s;
  std::vector<std::string> env, metadata, credentials, inspect, volumes;
  std::string network;
  std::string on_timeout;  // "" (the default: delete), delete, pause, pause-disk
  bool async = false, cold = false, auto_resume = false;
};

// "K=V" pairs into a JSON object of strings.
Result<json::object> keyValues(const std::vector<std::string>& kvs, const char* what) {
  json::object o;
  for (const auto& kv : kvs) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return Error(Code::kInvalidArgument, std::string(what) + " '" + kv + "' is not KEY=VALUE");
    o[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return o;
}

// --volume NAME:/PATH[:ro] into the create's "volumes" (the API checks
// names and paths).
Result<json::array> volumeFlags(const std::vector<std::string>& flags) {
  json::array out;
  for (const auto& f : flags) {
    auto colon = f.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 >= f.size() || f[colon + 1] != '/')
      return Error(Code::kInvalidArgument, "--volume '" + f + "' is not NAME:/PATH[:ro]");
    std::string path = f.substr(colon + 1);
    bool ro = path.size() > 3 && path.compare(path.size() - 3, 3, ":ro") == 0;
    if (ro) path.resize(path.size() - 3);
    out.push_back(json::object{{"name", f.substr(0, colon)}, {"path", path}, {"read_only", ro}});
  }
  return out;
}

int runCreate(const CreateOptions& o) {
  json::object body;
  if (!o.template_name.empty()) body["template"] = o.template_name;
  if (o.memory_mib) body["memory_mib"] = *o.memory_mib;
  if (o.disk_mib) body["disk_mib"] = *o.disk_mib;
  if (o.vcpus) body["vcpus"] = *o.vcpus;
  if (o.timeout_s) body["timeout"] = *o.timeout_s;
  if (o.lifetime_s) body["lifetime"] = *o.lifetime_s;
  if (o.cold) body["cold"] = true;
  if (!o.on_timeout.empty()) {
    if (o.on_timeout != "delete" && o.on_timeout != "pause" && o.on_timeout != "pause-disk")
      return fail(
          Error(Code::kInvalidArgument, "--on-timeout must be delete, pause or pause-disk"));
    body["on_timeout"] = o.on_timeout == "delete" ? "delete" : "pause";
    if (o.on_timeout == "pause-disk") body["pause_memory"] = false;
  }
  if (o.auto_resume) body["auto_resume"] = true;
  if (!o.network.empty()) {
    auto net = networkFlag(o.network);
    if (!net.ok()) return fail(net.error());
    body["network"] = std::move(*net);
  }
  if (!o.inspect.empty()) {
    if (!body.contains("network")) body["network"] = json::object();
    body["network"].as_object()["inspect"] = json::value_from(o.inspect);
  }
  if (!o.credentials.empty()) body["credentials"] = json::value_from(o.credentials);
  auto env = keyValues(o.env, "--env");
  if (!env.ok()) return fail(env.error());
  if (!env->empty()) body["env"] = std::move(*env);
  auto md = keyValues(o.metadata, "--metadata");
  if (!md.ok()) return fail(md.error());
  if (!md->empty()) body["metadata"] = std::move(*md);
  auto vols = volumeFlags(o.volumes);
  if (!vols.ok()) return fail(vols.error());
  if (!vols->empty()) body["volumes"] = std::move(*vols);

  auto c = apiClient();
  auto r = c.post("/v1/sandboxes", body);
  if (!r.ok()) return fail(r.error());
  std::string id = client::str(*client::field(*r, "sandbox"), "id");
  std::string op = client::str(*client::field(*r, "operation"), "id");
  if (o.async) {
    std::printf("%s %s\n", id.c_str(), op.c_str());
    return 0;
  }
  auto done = waitOperation(c, op, progressFor(Progress::kNone));
  if (!done.ok()) return fail(done.error().withContext("sandbox " + id));
  if (client::str(*done, "state") != "done")
    return fail("sandbox " + id + " failed to start: " + operationError(*done));
  // Said on every create: under TCG the sandbox is no isolation boundary.
  if (auto h = c.get("/healthz"); h.ok()) warnIsolation(*h);
  std::printf("%s\n", id.c_str());
  return 0;
}

int runList(bool quiet, const std::vector<std::string>& filters) {
  std::string filter;
  auto md = keyValues(filters, "--metadata");
  if (!md.ok()) return fail(md.error());
  for (const auto& [k, v] : *md)
    filter += "&metadata." + queryEscape(k) + "=" + queryEscape(std::string(v.as_string()));
  auto c = apiClient();
  std::string token;
  for (int page = 0; page < 100000; ++page) {
    auto r = c.get("/v1/sandboxes?page_size=100" + filter +
                   (token.empty() ? std::string() : "&page_token=" + token));
    if (!r.ok()) return fail(r.error());
    if (page == 0 && !quiet)
      std::printf("%-16s %-12s %-10s %-5s %-7s %s\n", "ID", "TEMPLATE", "STATE", "VCPUS", "MEMORY",
                  "CREATED");
    const json::value* items = client::field(*r, "sandboxes");
    if (items && items->is_array())
      for (const auto& s : items->as_array()) {
        if (quiet) {
          std::printf("%s\n", client::str(s, "id").c_str());
          continue;
        }
        std::printf("%-16s %-12s %-10s %-5lld %-7s %s\n", client::str(s, "id").c_str(),
                    client::str(s, "template").c_str(), client::str(s, "state").c_str(),
                    static_cast<long long>(client::num(s, "vcpus")),
                    (std::to_string(client::num(s, "memory_mib")) + "M").c_str(),
                    client::str(s, "created_at").c_str());
      }
    token = client::str(*r, "next_page_token");
    if (token.empty()) break;
  }
  return 0;
}

int runGet(const std::string& id) {
  auto c = apiClient();
  auto r = c.get("/v1/sandboxes/" + id);
  if (!r.ok()) return fail(r.error());
  std::printf("%s\n", prettyJson(*r).c_str());
  return 0;
}

// DELETE /v1/sandboxes/ID or POST /v1/sandboxes/ID:VERB for each id; waits
// for each operation unless `async`. Goes on after a failure, like docker rm.
int runAction(const std::vector<std::string>& ids, const std::string& verb, bool async,
              bool disk_only) {
  auto c = apiClient();
  int rc = 0;
  json::object body;
  if (disk_only) body["memory"] = false;
  for (const auto& id : ids) {
    auto r = verb == "delete" ? c.del("/v1/sandboxes/" + id)
                              : c.post("/v1/sandboxes/" + id + ":" + verb, body);
    if (!r.ok()) {
      rc = fail(r.error());
      continue;
    }
    std::string op = client::str(*client::field(*r, "operation"), "id");
    if (async) {
      std::printf("%s %s\n", id.c_str(), op.c_str());
      continue;
    }
    auto done = waitOperation(c, op, progressFor(Progress::kNone));
    if (!done.ok()) {
      rc = fail(done.error().withContext(verb + " " + id));
      continue;
    }
    if (client::str(*done, "state") != "done") {
      rc = fail(verb + " " + id + " failed: " + operationError(*done));
      continue;
    }
    std::printf("%s\n", id.c_str());
  }
  return rc;
}

// `vessel sandbox fork ID --template NAME`: prints NAME@VERSION.
int runForkToTemplate(const std::string& id, const std::string& name, bool async) {
  auto c = apiClient();
  auto r = c.post("/v1/sandboxes/" + id + ":fork", json::object{{"template", name}});
  if (!r.ok()) return fail(r.error());
  std::string op = client::str(*client::field(*r, "operation"), "id");
  if (async) {
    std::printf("%s\n", op.c_str());
    return 0;
  }
  auto done = waitOperation(c, op, progressFor(Progress::kNone));
  if (!done.ok()) return fail(done.error().withContext("fork " + id));
  if (client::str(*done, "state") != "done")
    return fail("fork " + id + " into template " + name + " failed: " + operationError(*done));
  auto list = c.get("/v1/templates");
  if (!list.ok()) return fail(list.error());
  if (const json::value* ts = client::field(*list, "templates"); ts && ts->is_array())
    for (const auto& t : ts->as_array())
      if (client::str(t, "name") == name)
        std::printf("%s@%s\n", name.c_str(), client::str(t, "version").c_str());
  return 0;
}

int runFork(const std::string& id, int count, bool async) {
  auto c = apiClient();
  json::object body{{"count", count}};
  auto r = c.post("/v1/sandboxes/" + id + ":fork", body);
  if (!r.ok()) return fail(r.error());
  std::string op = client::str(*client::field(*r, "operation"), "id");
  std::vector<std::string> forks;
  if (const json::value* s = client::field(*r, "sandboxes"); s && s->is_array())
    for (const auto& x : s->as_array()) forks.push_back(client::str(x, "id"));
  if (!async) {
    auto done = waitOperation(c, op, progressFor(Progress::kNone));
    if (!done.ok()) return fail(done.error().withContext("fork " + id));
    if (client::str(*done, "state") != "done")
      return fail("fork " + id + " failed: " + operationError(*done));
  } else {
    std::printf("%s\n", op.c_str());
  }
  for (const auto& f : forks) std::printf("%s\n", f.c_str());
  return 0;
}

int runExtend(const std::string& id, std::optional<int64_t> timeout_s,
              std::optional<int64_t> lifetime_s) {
  json::object body;
  if (timeout_s) body["timeout"] = *timeout_s;
  if (lifetime_s) body["lifetime"] = *lifetime_s;
  if (body.empty()) return fail(Error(Code::kInvalidArgument, "give --timeout and/or --lifetime"));
  auto c = apiClient();
  auto r = c.post("/v1/sandboxes/" + id + ":extend", body);
  if (!r.ok()) return fail(r.error());
  std::printf("%s\n", prettyJson(*r).c_str());
  return 0;
}

}  // namespace

// Long because it is the table of `vessel sandbox` subcommands and their
// flags, one entry each, read in one place as `--help` shows them.
void addSandbox(CLI::App& app, std::function<int()>* run) {
  auto* s = app.add_subcommand("sandbox", "create and manage sandboxes (through the API)");
  s->require_subcommand(1);
  s->footer(
      "The API is VESSEL_API_URL (default http://127.0.0.1:8080) with the key VESSEL_API_KEY\n"
      "(default: the development key in $VESSEL_STATE_DIR/dev-api-key).");

  auto co = std::make_shared<CreateOptions>();
  auto* create = s->add_subcommand(
      "create", "create a sandbox, wait until it runs, print its id (the last line)");
  create->add_option("--template", co->template_name, "template name (default: minimal)");
  create->add_option("--memory", co->memory_mib, "memory in MiB (must match the template)");
  create->add_option("--disk", co->disk_mib,
                     "root disk in MiB (/tmp included; sparse on the host, capped at this size; "
                     "default the template's, 2048 for the built-in ones)");
  create->add_option("--vcpus", co->vcpus, "vCPUs (must match the template)");
  create->add_option("--timeout", co->timeout_s, "idle timeout in seconds (0: never)");
  create->add_option("--lifetime", co->lifetime_s, "seconds until it is deleted whatever it does");
  create->add_option("--network", co->network,
                     "egress: none, full or allow:NAME[,NAME...] (default: the node's)");
  create->add_option("--inspect", co->inspect,
                     "NAME[:PORT] whose TLS the gateway terminates to check every request's "
                     "Host (the guest trusts the deployment CA), repeatable");
  create->add_option("--credential", co->credentials,
                     "credential the gateway injects for its hosts, repeatable");
  create->add_option("-e,--env", co->env, "KEY=VALUE for every process, repeatable");
  create->add_option("-l,--metadata", co->metadata, "KEY=VALUE metadata, repeatable");
  create->add_option("--volume", co->volumes,
                     "NAME:/PATH[:ro]: mount your volume NAME at /PATH (read-only with :ro), "
                     "repeatable");
  create->add_flag("--async", co->async, "print the sandbox and operation ids and return");
  create->add_flag("--cold", co->cold, "boot the template's disk instead of its snapshot");
  create->add_option("--on-timeout", co->on_timeout,
                     "what its idle timeout or lifetime does: delete (default), pause (kept "
                     "paused until the deployment's maximum lifetime) or pause-disk (only its "
                     "disk is kept; a resume boots it again)");
  create->add_flag("--auto-resume", co->auto_resume,
                   "traffic to its ports resumes it when paused (needs --on-timeout pause)");
  create->callback([co, run] { *run = [co] { return runCreate(*co); }; });
  addSandboxNetwork(*s, run);

  struct ListOptions {
    bool quiet = false;
    std::vector<std::string> metadata;
  };
  auto lo = std::make_shared<ListOptions>();
  auto* list = s->add_subcommand("list", "list sandboxes")->alias("ls");
  list->add_flag("-q,--quiet", lo->quiet, "only ids");
  list->add_option("-l,--metadata", lo->metadata, "only those with metadata KEY=VALUE, repeatable");
  list->callback([lo, run] { *run = [lo] { return runList(lo->quiet, lo->metadata); }; });

  auto one = std::make_shared<std::string>();
  auto* get = s->add_subcommand("get", "show one sandbox as JSON")->alias("inspect");
  get->add_option("id", *one, "sandbox id")->required();
  get->callback([one, run] { *run = [one] { return runGet(*one); }; });

  for (const char* verb : {"delete", "pause", "resume"}) {
    struct ActionOptions {
      std::vector<std::string> ids;
      bool async = false, disk_only = false;
    };
    auto ao = std::make_shared<ActionOptions>();
    std::string v = verb;
    auto* c = s->add_subcommand(verb, v == "delete"  ? "destroy sandboxes"
                                      : v == "pause" ? "save sandboxes to disk and free their VMs"
                                                     : "restore paused sandboxes");
    if (v == "delete") c->alias("rm");
    c->add_option("ids", ao->ids, "sandbox ids")->required();
    c->add_flag("--async", ao->async, "print each sandbox and operation id and return");
    if (v == "pause")
      c->add_flag("--disk-only", ao->disk_only,
                  "keep only the disk, not the memory: its resume boots it again (processes "
                  "are gone, files stay)");
    c->callback([ao, v, run] {
      *run = [ao, v] { return runAction(ao->ids, v, ao->async, ao->disk_only); };
    });
  }

  struct ForkOptions {
    std::string id, template_name;
    int count = 1;
    bool async = false;
  };
  auto fo = std::make_shared<ForkOptions>();
  struct ExtendOptions {
    std::string id;
    std::optional<int64_t> timeout_s, lifetime_s;
  };
  auto eo = std::make_shared<ExtendOptions>();
  auto* extend =
      s->add_subcommand("extend", "set a new idle timeout and/or lifetime, counted from now");
  extend->add_option("id", eo->id, "sandbox id")->required();
  extend->add_option("--timeout", eo->timeout_s, "idle timeout in seconds (0: never)");
  extend->add_option("--lifetime", eo->lifetime_s, "seconds from now until it is deleted");
  extend->callback(
      [eo, run] { *run = [eo] { return runExtend(eo->id, eo->timeout_s, eo->lifetime_s); }; });

  auto* fork = s->add_subcommand("fork", "copy a running sandbox; print the new ids");
  fork->add_option("id", fo->id, "sandbox id")->required();
  fork->add_option("-n,--count", fo->count, "how many copies")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  fork->add_option("--template", fo->template_name,
                   "snapshot it into a new version of your template NAME instead; print "
                   "NAME@VERSION")
      ->excludes("--count");
  fork->add_flag("--async", fo->async, "print the operation id, then the new ids, and return");
  fork->callback([fo, run] {
    *run = [fo] {
      return fo->template_name.empty() ? runFork(fo->id, fo->count, fo->async)
                                       : runForkToTemplate(fo->id, fo->template_name, fo->async);
    };
  });
}

}  // namespace vessel::cli
