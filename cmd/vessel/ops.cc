// `vessel ops watch OP` follows an operation's events to its end (a
// progress bar on a terminal, one line per event otherwise) and exits
// non-zero when it failed; `vessel ops get OP` prints it as JSON.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cmd/vessel/api_common.h"
#include "cmd/vessel/commands.h"

namespace vessel::cli {

namespace {

int runWatch(const std::string& op) {
  auto c = apiClient();
  auto done = waitOperation(c, op, progressFor(Progress::kLines));
  if (!done.ok()) return fail(done.error());
  if (client::str(*done, "state") != "done")
    return fail("operation " + op + " failed: " + operationError(*done));
  return 0;
}

int runGet(const std::string& op) {
  auto c = apiClient();
  auto r = c.get("/v1/operations/" + op);
  if (!r.ok()) return fail(r.error());
  std::printf("%s\n", prettyJson(*r).c_str());
  return 0;
}

}  // namespace

void addOps(CLI::App& app, std::function<int()>* run) {
  auto* o = app.add_subcommand("ops", "follow operations (through the API)");
  o->require_subcommand(1);
  auto id = std::make_shared<std::string>();
  auto* watch =
      o->add_subcommand("watch", "follow an operation until it ends; exit non-zero if it failed");
  watch->add_option("id", *id, "operation id")->required();
  watch->callback([id, run] { *run = [id] { return runWatch(*id); }; });
  auto* get = o->add_subcommand("get", "show an operation as JSON");
  get->add_option("id", *id, "operation id")->required();
  get->callback([id, run] { *run = [id] { return runGet(*id); }; });
}

}  // namespace vessel::cli
