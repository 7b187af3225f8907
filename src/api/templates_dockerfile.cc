// POST /v1/templates:dockerfile (issue 26): a Dockerfile build whose
// context arrives as a tar, streamed. The body goes to a file under the
// state directory as it arrives, counted, and is refused with 413 once it
// passes --max-build-context-mib (a declared length at once, a chunked
// body as it comes); then, on the control plane's worker thread, the tar
// is unpacked (templates/context_archive.h: it is the tenant's, untrusted),
// the Dockerfile parsed and the context read as the CLI reads a local one
// (templates/build_context.h), and the spec goes to the lifecycle as POST
// /v1/templates's does. The file and the tree go with the request, on
// every path.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <charconv>
#include <filesystem>

#include "api/auth.h"
#include "api/control_plane.h"
#include "api/resources.h"
#include "base/fd.h"
#include "base/offload.h"
#include "http/json_fields.h"
#include "templates/build_context.h"
#include "templates/context_archive.h"
#include "templates/dockerfile.h"

namespace vessel::api {

namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxDockerfile = 1 << 20;

// A directory removed, with all it holds, when it goes out of scope.
class TempTree {
 public:
  explicit TempTree(std::string path) : path_(std::move(path)) {}
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;
  ~TempTree() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct DockerfileQuery {
  std::string name;
  std::string dockerfile = "Dockerfile";
  std::map<std::string, std::string> build_args;
  bool no_cache = false;
  std::string registry_credential;
};

Result<DockerfileQuery> parseDockerfileQuery(std::string_view target) {
  VESSEL_ASSIGN_OR_RETURN(auto q, http::parseQuery(target, {"name", "dockerfile", "build_arg.",
                                                            "no_cache", "registry_credential"}));
  DockerfileQuery out;
  for (auto& [k, v] : q) {
    if (k == "name") {
      out.name = std::move(v);
    } else if (k == "dockerfile") {
      out.dockerfile = std::move(v);
    } else if (k == "no_cache") {
      if (v != "true" && v != "false")
        return Error(Code::kInvalidArgument, "no_cache must be true or false");
      out.no_cache = v == "true";
    } else if (k == "registry_credential") {
      out.registry_credential = std::move(v);
    } else {
      out.build_args[k.substr(std::string_view("build_arg.").size())] = std::move(v);
    }
  }
  if (out.name.empty()) return Error(Code::kInvalidArgument, "a Dockerfile build needs ?name=");
  return out;
}

Status writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::fromErrno("build context: write the tar");
    data.remove_prefix(static_cast<size_t>(n));
  }
  return okStatus();
}

// The spec of the Dockerfile build in the tar at `tar`, unpacked into
// `tree`. Blocking: runs on the worker thread.
Result<templates::BuildSpec> dockerfileSpec(const std::string& tar, const std::string& tree,
                                            const DockerfileQuery& q, uint64_t max_bytes) {
  templates::UnpackLimits ul;
  ul.max_bytes = max_bytes;
  VESSEL_TRY(templates::unpackContextTar(tar, tree, ul));
  VESSEL_ASSIGN_OR_RETURN(std::string text,
                          templates::readContextFile(tree, q.dockerfile, kMaxDockerfile));
  // A Dockerfile from outside the context is not part of it.
  if (q.dockerfile == templates::kOutsideDockerfile)
    fs::remove(tree + "/" + std::string(templates::kOutsideDockerfile));
  auto plan = templates::parseDockerfile(text, q.build_args);
  if (!plan.ok()) return std::move(plan).error().withContext(q.dockerfile);
  // The inline spec's 600 KiB does not apply (nothing travels as JSON
  // here); the flag's cap does, and the entries' bound.
  templates::ContextLimits cl;
  cl.max_bytes = max_bytes;
  VESSEL_ASSIGN_OR_RETURN(auto ctx, templates::BuildContext::open(tree, cl));
  VESSEL_ASSIGN_OR_RETURN(auto spec, ctx.spec(*plan, q.name));
  spec.no_cache = q.no_cache;
  if (!q.registry_credential.empty()) {
    if (spec.from_image.empty())
      return Error(Code::kInvalidArgument,
                   "registry_credential needs a FROM image (this Dockerfile starts from a "
                   "Vessel template)");
    spec.from_image_credential = q.registry_credential;
  }
  return spec;
}

// An error about the context with this server's paths left out.
Error withoutPath(const Error& e, const std::string& tree) {
  std::string m = e.message();
  for (size_t at; (at = m.find(tree)) != std::string::npos;)
    m.replace(at, tree.size(), "the build context");
  return Error(e.code(), m);
}

}  // namespace

Response ControlPlane::contextTooLarge(const Request& req) const {
  Response res = errorResponse(
      req, Error(Code::kResourceExhausted,
                 "the build context is larger than the " + std::to_string(max_context_ >> 20) +
                     " MiB this server takes (vesseld --max-build-context-mib); list what the "
                     "build does not need in .dockerignore"));
  res.result(http::status::payload_too_large);
  return res;
}

// The head checked, the body to disk, the spec (off the loop), the build.
asio::awaitable<Response> ControlPlane::buildFromDockerfile(const Request& req,
                                                            http::BodyReader& body) {
  auto tenant = authenticate(req, store_);
  if (!tenant.ok()) co_return errorResponse(req, tenant.error());
  auto q = parseDockerfileQuery(req.target());
  if (!q.ok()) co_return errorResponse(req, q.error());
  std::string_view type = req[http::field::content_type];
  if (type.substr(0, type.find(';')) != "application/x-tar")
    co_return errorResponse(
        req, Error(Code::kInvalidArgument,
                   "the body is the build context as a tar: Content-Type: application/x-tar"));
  // A declared length is judged before a byte is read; a chunked body as
  // it arrives (below, and BodyReader stops at the same cap).
  if (auto len = req.find(http::field::content_length); len != req.end()) {
    uint64_t n = 0;
    std::string_view v = len->value();
    auto [end, err] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (err == std::errc::result_out_of_range || (err == std::errc() && n > max_context_))
      co_return contextTooLarge(req);
  }
  std::error_code ec;
  fs::create_directories(uploads_dir_, ec);
  std::string tmpl = uploads_dir_ + "/ctx-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    co_return errorResponse(
        req, Error::fromErrno("build context: make a directory under " + uploads_dir_));
  TempTree temp(tmpl);
  const std::string tar = temp.path() + "/context.tar", tree = temp.path() + "/tree";
  {
    auto out = Fd::open(tar, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (!out.ok()) co_return errorResponse(req, out.error());
    for (;;) {
      auto chunk = co_await body.next();
      if (!chunk.ok() && chunk.error().code() == Code::kResourceExhausted)
        co_return contextTooLarge(req);
      if (!chunk.ok()) co_return errorResponse(req, chunk.error().withContext("build context"));
      if (!*chunk) break;
      if (body.received() > max_context_) co_return contextTooLarge(req);
      if (auto w = writeAll(out->get(), **chunk); !w.ok()) co_return errorResponse(req, w.error());
    }
  }
  if (::mkdir(tree.c_str(), 0700) != 0)
    co_return errorResponse(req, Error::fromErrno("build context: make its tree"));
  // A named callable, moved in: g++ 12 destroys a lambda temporary of a
  // co_await's full-expression twice.
  auto read = [tar, tree, query = std::move(*q), cap = max_context_] {
    return dockerfileSpec(tar, tree, query, cap);
  };
  auto spec = co_await offload(*workers_, std::move(read));
  if (!spec.ok()) {
    Error e = withoutPath(spec.error(), tree);
    if (e.code() == Code::kResourceExhausted) {
      Response res = errorResponse(req, e);
      res.result(http::status::payload_too_large);
      co_return res;
    }
    co_return errorResponse(req, e);
  }
  std::string name = spec->name;
  auto op = lifecycle_.operations().forRequest(std::string(req["X-Request-Id"]), [&] {
    return lifecycle_.buildTemplate(*tenant, std::move(*spec));
  });
  if (!op.ok()) co_return errorResponse(req, op.error());
  json::object o{{"operation", operationJson(*op)}, {"template", json::object{{"name", name}}}};
  co_return jsonResponse(req, http::status::accepted, json::serialize(o));
}

}  // namespace vessel::api
