// `vessel template build -f SPEC` and `vessel template list`, through the
// API (the build is an operation; progress on a terminal), or with --local
// on a template store directly, without vesseld: scripts/build.sh builds
// the built-in templates that way. Builds are cached by the spec's hash.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>

#include "base/fd.h"
#include "base/log.h"
#include "base/run_blocking.h"
#include "base/scope_exit.h"
#include "base/sha256.h"
#include "cmd/vessel/api_common.h"
#include "cmd/vessel/commands.h"
#include "cmd/vessel/data_session.h"
#include "hypervisor/qemu/qemu.h"
#include "images/converter.h"
#include "node/template_builder.h"
#include "templates/build_context.h"
#include "templates/build_spec.h"
#include "templates/context_archive.h"
#include "templates/dockerfile.h"

namespace vessel::cli {

namespace {

struct TemplateOptions {
  std::string spec_file, store, kernel, minimal_image, accel = "tcg";
  std::string from_image, name;         // --from-image REF --name NAME
  std::string registry_credential;      // --registry-credential NAME
  std::string context;                  // a Dockerfile's; default: its directory
  std::vector<std::string> build_args;  // --build-arg K=V
  bool local = false, async = false, image_cmd = false;
  bool no_cache = false;  // --no-cache: every step built again
};

// A JSON build spec starts with '{'; anything else -f names is a Dockerfile.
bool isDockerfile(std::string_view text) {
  size_t p = text.find_first_not_of(" \t\r\n");
  return p == std::string_view::npos || text[p] != '{';
}

// --build-arg NAME=VALUE, or NAME: its value from the environment, as
// docker takes it.
std::map<std::string, std::string> buildArgs(const TemplateOptions& o) {
  std::map<std::string, std::string> args;
  for (const auto& a : o.build_args) {
    auto eq = a.find('=');
    if (eq == std::string::npos) {
      const char* v = std::getenv(a.c_str());
      if (v) args[a] = v;
      continue;
    }
    args[a.substr(0, eq)] = a.substr(eq + 1);
  }
  return args;
}

// The Dockerfile parsed here too, before anything is sent: its errors and
// warnings at once, on the caller's terminal.
Result<templates::DockerPlan> dockerfilePlan(const TemplateOptions& o, const std::string& text) {
  if (o.name.empty()) return Error(Code::kInvalidArgument, "a Dockerfile build needs --name");
  if (!o.from_image.empty() || o.image_cmd)
    return Error(Code::kInvalidArgument,
                 "--from-image and --image-cmd do not apply to a Dockerfile (its FROM and CMD do)");
  auto plan = templates::parseDockerfile(text, buildArgs(o));
  if (!plan.ok()) return std::move(plan).error().withContext(o.spec_file);
  for (const auto& w : plan->warnings) std::fprintf(stderr, "vessel: warning: %s\n", w.c_str());
  if (!o.registry_credential.empty() && plan->from_image.empty())
    return Error(Code::kInvalidArgument,
                 "--registry-credential needs a FROM image (this Dockerfile starts from a "
                 "Vessel template)");
  return plan;
}

std::string contextDir(const TemplateOptions& o) {
  return o.context.empty() ? std::filesystem::absolute(o.spec_file).parent_path().string()
                           : o.context;
}

// --local: a Dockerfile and its context as a build spec, the files inline
// (read here; a build spec holds at most 1 MiB).
Result<std::string> dockerfileSpec(const TemplateOptions& o, const std::string& text) {
  VESSEL_ASSIGN_OR_RETURN(auto plan, dockerfilePlan(o, text));
  VESSEL_ASSIGN_OR_RETURN(auto ctx, templates::BuildContext::open(contextDir(o)));
  VESSEL_ASSIGN_OR_RETURN(auto spec, ctx.spec(plan, o.name));
  spec.no_cache = o.no_cache;
  spec.from_image_credential = o.registry_credential;
  std::string text_spec = templates::specJson(spec);
  if (text_spec.size() > (1 << 20))
    return Error(Code::kInvalidArgument, o.spec_file +
                                             ": the build (its context's files inline) comes to " +
                                             std::to_string(text_spec.size() >> 10) +
                                             " KiB; a build spec holds at most 1024 KiB");
  return text_spec;
}

// The spec to build: -f's file, with --from-image, --name and --image-cmd
// laid over it (or alone: `--from-image REF --name NAME` needs no file).
Result<std::string> specText(const TemplateOptions& o) {
  boost::json::object spec;
  if (!o.spec_file.empty()) {
    VESSEL_ASSIGN_OR_RETURN(std::string text, readFile(o.spec_file));
    if (isDockerfile(text)) return dockerfileSpec(o, text);
    boost::system::error_code ec;
    auto v = boost::json::parse(text, ec);
    if (ec || !v.is_object())
      return Error(Code::kInvalidArgument, o.spec_file + ": not a JSON object");
    if (o.from_image.empty() && o.name.empty() && !o.image_cmd && !o.no_cache &&
        o.registry_credential.empty())
      return text;
    spec = std::move(v.as_object());
  }
  if (!o.from_image.empty()) {
    spec.erase("base");
    spec["from_image"] = o.from_image;
  }
  if (!o.name.empty()) spec["name"] = o.name;
  if (o.image_cmd) spec["image_cmd"] = true;
  if (o.no_cache) spec["no_cache"] = true;
  if (!o.registry_credential.empty()) spec["from_image_credential"] = o.registry_credential;
  return boost::json::serialize(spec);
}

std::string defaultStore() {
  const char* c = std::getenv("VESSEL_CACHE_DIR");
  return std::string(c && *c ? c : "/var/cache/vessel") + "/templates";
}

Result<templates::TemplateStore> openStore(const TemplateOptions& o) {
  VESSEL_ASSIGN_OR_RETURN(std::string qv, hypervisor::qemu::qemuVersion("qemu-system-x86_64"));
  VESSEL_ASSIGN_OR_RETURN(std::string ks, sha256File(o.kernel));
  std::error_code ec;
  std::filesystem::create_directories(o.store, ec);
  return templates::TemplateStore(o.store, qv, ks);
}

// --local with from_image: converted as vesseld converts them, into the
// cache beside the store; the image's defaults go into `in`.
Result<std::string> convertLocally(const TemplateOptions& o, const std::string& from_image,
                                   node::BuildInputs& in) {
  images::ConverterOptions io;
  io.cache_dir = std::filesystem::path(o.store).parent_path().string() + "/images/oci";
  io.agent_image = o.minimal_image;
  VESSEL_ASSIGN_OR_RETURN(templates::ImageRef ref, templates::parseImageRef(from_image));
  VESSEL_ASSIGN_OR_RETURN(images::ConvertedImage image,
                          images::convertImage(io, ref, [](const std::string& step, int) {
                            std::fprintf(stderr, "[  0%%] %s\n", step.c_str());
                          }));
  node::useConvertedImage(in, image);
  return image.rootfs;
}

// What a --local build builds: the spec, or why there is none (exit 2).
Result<templates::BuildSpec> localSpec(const TemplateOptions& o) {
  if (o.kernel.empty() || o.minimal_image.empty())
    return Error(Code::kInvalidArgument,
                 "--local builds need --kernel and --minimal-image "
                 "(or VESSEL_KERNEL and VESSEL_MINIMAL_IMAGE)");
  VESSEL_ASSIGN_OR_RETURN(std::string text, specText(o));
  auto spec = templates::parseBuildSpec(text);
  if (!spec.ok()) return std::move(spec).error().withContext(o.spec_file);
  if (!spec->from_image_credential.empty())
    return Error(Code::kInvalidArgument,
                 "a registry credential is a tenant's, kept by vesseld: build through the API "
                 "(without --local)");
  return spec;
}

int runLocalBuild(const TemplateOptions& o) {
  initLogging("warn");
  auto spec = localSpec(o);
  if (!spec.ok()) {
    std::fprintf(stderr, "vessel: %s\n", spec.error().message().c_str());
    return 2;
  }
  // Built-in bases are images setup built: minimal from --minimal-image,
  // any other NAME from $VESSEL_<NAME>_IMAGE (e.g. VESSEL_DEBIAN_IMAGE).
  std::string base_image = o.minimal_image;
  node::BuildInputs in;
  if (!spec->from_image.empty()) {
    auto image = convertLocally(o, spec->from_image, in);
    if (!image.ok()) {
      std::fprintf(stderr, "vessel: %s\n", image.error().message().c_str());
      return 1;
    }
    base_image = *image;
  } else if (spec->base != "minimal") {
    std::string var = "VESSEL_";
    for (char c : spec->base) var += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    var += "_IMAGE";
    const char* v = std::getenv(var.c_str());
    if (!v || !*v) {
      std::fprintf(stderr, "vessel: base '%s' is not available (set %s)\n", spec->base.c_str(),
                   var.c_str());
      return 2;
    }
    base_image = v;
  }
  auto store = openStore(o);
  if (!store.ok()) {
    std::fprintf(stderr, "vessel: %s\n", store.error().message().c_str());
    return 1;
  }
  std::string work = o.store + "/.work-" + std::to_string(::getpid());
  std::filesystem::create_directories(work);
  in.base_image = base_image;
  in.kernel = o.kernel;
  in.kernel_sha256 = *sha256File(o.kernel);
  in.qemu_version = *hypervisor::qemu::qemuVersion("qemu-system-x86_64");
  in.accel = o.accel == "kvm" ? hypervisor::Accel::kKvm : hypervisor::Accel::kTcg;
  in.work_dir = work;
  // Dockerfile steps cached beside the store, as vesseld keeps them.
  in.step_cache_dir = std::filesystem::path(o.store).parent_path().string() + "/build-steps";
  boost::asio::io_context io;
  hypervisor::qemu::QemuHypervisor hv({});
  bool tty = ::isatty(2);
  auto log = [tty](const node::BuildLogEntry& e) {
    if (tty) std::fprintf(stderr, "\r\033[K");
    for (const auto& l : buildLogLines(e.step, e.line, e.kind, e.text, e.lines, e.seconds))
      std::fprintf(stderr, "%s\n", l.c_str());
  };
  auto t = runBlocking(io, node::buildTemplate(
                               hv, *store, *spec, in,
                               [tty](const std::string& step, int pct) {
                                 std::fprintf(stderr, tty ? "\r[%3d%%] %-60.60s" : "[%3d%%] %s\n",
                                              pct, step.c_str());
                               },
                               log));
  if (tty) std::fprintf(stderr, "\n");
  std::filesystem::remove_all(work);
  if (!t.ok()) {
    std::fprintf(stderr, "vessel: %s\n", t.error().message().c_str());
    return 1;
  }
  std::printf("%s\n", (*t)->id().c_str());
  return 0;
}

// A Dockerfile build through the API: the context (minus .dockerignore's
// exclusions) as a tar in a temporary file, streamed to POST
// /v1/templates:dockerfile, which unpacks and reads it (nothing inline, so
// no 1 MiB spec bound; the server's --max-build-context-mib instead).
Result<client::HttpResponse> sendDockerfile(client::Client& c, const TemplateOptions& o,
                                            const std::string& text) {
  if (auto plan = dockerfilePlan(o, text); !plan.ok()) return std::move(plan).error();
  namespace fs = std::filesystem;
  std::string dir = contextDir(o);
  std::error_code ec;
  // The Dockerfile by its place in the context, or (outside it, or a
  // link) its text as a member of its own that is not part of the context.
  std::string rel = fs::absolute(o.spec_file)
                        .lexically_normal()
                        .lexically_relative(fs::absolute(dir).lexically_normal())
                        .string();
  bool inside = !rel.empty() && rel != "." && rel.rfind("..", 0) != 0 &&
                !fs::is_symlink(fs::symlink_status(o.spec_file, ec));
  std::map<std::string, std::string> extra;
  if (!inside) {
    rel = std::string(templates::kOutsideDockerfile);
    extra[rel] = text;
  }
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tar = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/vessel-context-XXXXXX";
  Fd fd(::mkostemp(tar.data(), O_CLOEXEC));
  if (!fd) return Error::fromErrno("make a temporary file for the build context");
  ScopeExit gone([&] { ::unlink(tar.c_str()); });
  VESSEL_ASSIGN_OR_RETURN(auto stats,
                          templates::writeContextTar(dir, fd.get(), {rel, ".dockerignore"}, extra));
  fd.reset();
  std::string path =
      "/v1/templates:dockerfile?name=" + queryEscape(o.name) + "&dockerfile=" + queryEscape(rel);
  for (const auto& [k, v] : buildArgs(o))
    path += "&build_arg." + queryEscape(k) + "=" + queryEscape(v);
  if (o.no_cache) path += "&no_cache=true";
  if (!o.registry_credential.empty())
    path += "&registry_credential=" + queryEscape(o.registry_credential);
  // A minute, and a second per MiB beyond it.
  auto timeout = std::chrono::seconds(60 + (stats.bytes >> 20));
  return c.sendFile("POST", path, tar, "application/x-tar", timeout);
}

int runApiBuild(const TemplateOptions& o) {
  auto c = apiClient();
  Result<client::HttpResponse> r = Error(Code::kInternal, "no request");
  std::string dockerfile;
  if (!o.spec_file.empty()) {
    auto text = readFile(o.spec_file);
    if (!text.ok()) return fail(text.error());
    if (isDockerfile(*text)) dockerfile = std::move(*text);
  }
  if (!dockerfile.empty()) {
    r = sendDockerfile(c, o, dockerfile);
  } else {
    auto text = specText(o);
    if (!text.ok()) return fail(text.error());
    r = c.request("POST", "/v1/templates", *text, "application/json");
  }
  if (!r.ok()) return fail(r.error());
  if (r->status != 202)
    return fail(client::errorFromResponse(*r).withContext(o.spec_file.empty() ? o.from_image
                                                                              : o.spec_file));
  auto v = client::parseJson(r->body);
  if (!v.ok()) return fail(v.error());
  std::string op = client::str(*client::field(*v, "operation"), "id");
  std::string name = client::str(*client::field(*v, "template"), "name");
  if (o.async) {
    std::printf("%s\n", op.c_str());
    return 0;
  }
  auto done = waitOperation(c, op, progressFor(Progress::kNone));
  if (!done.ok()) return fail(done.error().withContext("build " + name));
  if (client::str(*done, "state") != "done")
    return fail("build " + name + " failed: " + operationError(*done));
  auto list = c.get("/v1/templates");
  if (!list.ok()) return fail(list.error());
  std::string version;
  if (const auto* ts = client::field(*list, "templates"); ts && ts->is_array())
    for (const auto& t : ts->as_array())
      if (client::str(t, "name") == name) version = client::str(t, "version");
  std::printf("%s\n", (version.empty() ? name : name + "@" + version).c_str());
  return 0;
}

int runApiList() {
  auto c = apiClient();
  auto r = c.get("/v1/templates");
  if (!r.ok()) return fail(r.error());
  std::printf("%-20s %-18s %-6s %-8s %-8s %s\n", "NAME", "VERSION", "VCPUS", "MEMORY", "BUILTIN",
              "CREATED");
  if (const auto* ts = client::field(*r, "templates"); ts && ts->is_array())
    for (const auto& t : ts->as_array()) {
      const auto* b = client::field(t, "builtin");
      std::printf(
          "%-20s %-18s %-6lld %-8s %-8s %s\n", client::str(t, "name").c_str(),
          client::str(t, "version").c_str(), static_cast<long long>(client::num(t, "vcpus")),
          (std::to_string(client::num(t, "memory_mib")) + "M").c_str(),
          b && b->is_bool() && b->as_bool() ? "yes" : "no", client::str(t, "created_at").c_str());
    }
  return 0;
}

// DELETE /v1/templates/{name}: sandboxes made from it run on.
int runApiDelete(const std::string& name) {
  auto c = apiClient();
  auto r = c.del("/v1/templates/" + name);
  if (!r.ok()) return fail(r.error());
  std::printf("deleted %s\n", name.c_str());
  return 0;
}

int runLocalList(const TemplateOptions& o) {
  templates::TemplateStore store(o.store, "", "");
  std::printf("%-20s %-18s %-6s %-8s %s\n", "NAME", "VERSION", "VCPUS", "MEMORY", "CREATED");
  for (const auto& m : store.list())
    std::printf("%-20s %-18s %-6u %-8s %s\n", m.name.c_str(), m.version.c_str(), m.vcpus,
                (std::to_string(m.memory_mib) + "M").c_str(), m.created_at.c_str());
  return 0;
}

}  // namespace

void addTemplate(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<TemplateOptions>();
  o->store = defaultStore();
  auto* t = app.add_subcommand("template", "build, list and delete templates");
  t->require_subcommand(1);
  auto* b = t->add_subcommand(
      "build",
      "build a template from a JSON build spec, a Dockerfile or an OCI image through the "
      "API; print NAME@VERSION");
  auto* file = b->add_option("-f,--file", o->spec_file, "a build spec (JSON) or a Dockerfile");
  b->add_option("--context", o->context,
                "a Dockerfile's build context (default: the Dockerfile's directory)")
      ->needs(file);
  b->add_option("--build-arg", o->build_args, "a Dockerfile ARG's value, NAME=VALUE")->needs(file);
  auto* image = b->add_option("--from-image", o->from_image,
                              "an OCI image (e.g. ubuntu:22.04, 127.0.0.1:5000/app:1) whose "
                              "filesystem the template runs in (the spec's from_image)");
  b->add_option("--name", o->name, "the template's name (the spec's name)");
  b->add_option("--registry-credential", o->registry_credential,
                "pull the image with this credential of yours (vessel credential create NAME "
                "--host REGISTRY --header Authorization, value 'Basic base64(user:password)')");
  b->add_flag("--image-cmd", o->image_cmd,
              "start the image's Entrypoint and Cmd before the snapshot (image_cmd)")
      ->needs(image);

  b->add_flag("--no-cache", o->no_cache,
              "build every step again, reusing no cached step or template (a new version)");
  b->add_flag("--async", o->async, "print the operation id and return");
  auto* local =
      b->add_flag("--local", o->local, "build into a local template store, without vesseld");
  // A store without --local would silently go to the API instead.
  b->add_option("--store", o->store, "--local: template store directory")
      ->capture_default_str()
      ->needs(local);
  b->add_option("--kernel", o->kernel, "--local: guest kernel")->envname("VESSEL_KERNEL");
  b->add_option("--minimal-image", o->minimal_image, "--local: the minimal base image")
      ->envname("VESSEL_MINIMAL_IMAGE");
  b->add_option("--accel", o->accel, "--local: tcg or kvm")->check(CLI::IsMember({"tcg", "kvm"}));
  b->callback([o, run, file, image] {
    if (file->count() == 0 && image->count() == 0) throw CLI::RequiredError("-f or --from-image");
    *run = [o] { return o->local ? runLocalBuild(*o) : runApiBuild(*o); };
  });
  auto* l = t->add_subcommand("list", "list the templates you can use")->alias("ls");
  auto* list_local = l->add_flag("--local", o->local, "list a local template store instead");
  l->add_option("--store", o->store, "--local: template store directory")
      ->capture_default_str()
      ->needs(list_local);
  l->callback([o, run] { *run = [o] { return o->local ? runLocalList(*o) : runApiList(); }; });
  auto* d = t->add_subcommand("delete",
                              "delete one of your templates, every version (its sandboxes run on)");
  d->alias("rm");
  d->add_option("name", o->name, "the template")->required();
  d->callback([o, run] { *run = [o] { return runApiDelete(o->name); }; });
}

}  // namespace vessel::cli
