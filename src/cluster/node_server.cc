#include "cluster/node_server.h"

#include "base/log.h"
#include "templates/build_spec.h"

namespace vessel::cluster {

namespace {

constexpr std::string_view kPrefix = "/node/v1/";

Logger nodeLog() { return Logger("node-api"); }

}  // namespace

http::ServerLimits nodeServerLimits() {
  http::ServerLimits l;
  l.max_body_bytes = 2 * 1024 * 1024;  // a build spec may be 1 MiB
  // A create can take as long as a guest boot; the API replica bounds it.
  l.idle_timeout = std::chrono::seconds(300);
  // volume_write's call rides in a header (node_protocol.h): a path of
  // 4 KiB, JSON-escaped and in base64.
  l.max_header_bytes = 48 * 1024;
  return l;
}

// The node API's route table: one POST route per call, each behind this
// node's token (as are the router's own 404 and 405: the guard). With
// per-node tokens (node_tokens.h) no other node's token opens it.
void NodeServer::install(http::HttpServer& server) {
  http::Router& r = server.router();
  auto refused = [this](const http::Request& req) -> std::optional<http::Response> {
    auto auth = req[http::field::authorization];
    constexpr std::string_view kBearer = "Bearer ";
    if (auth.size() <= kBearer.size() || auth.substr(0, kBearer.size()) != kBearer ||
        !tokenMatches(auth.substr(kBearer.size()), token_))
      return http::errorResponse(
          req, Error(Code::kUnauthenticated, "the node API needs this node's token"));
    return std::nullopt;
  };
  r.guardUnder(std::string(kPrefix), refused);
  std::vector<std::string> names = {"create",  "pause",      "resume",       "destroy",
                                    "abort",   "holding",    "usage",        "fork",
                                    "network", "credential", "fork_template"};
  for (const char* v : {"volume_create", "volume_copy", "volume_remove", "volume_usage",
                        "volume_list", "volume_mkdir", "volume_remove_path", "volume_mount",
                        "volume_release", "volume_quiesce", "volume_unquiesce"})
    names.emplace_back(v);
  for (const auto& name : names) {
    r.post(std::string(kPrefix) + name,
           [this, refused, name](const http::Request& req,
                                 const http::Params&) -> asio::awaitable<http::Response> {
             if (auto no = refused(req)) co_return std::move(*no);
             auto c = parseNodeCall(req.body());
             if (!c.ok()) co_return http::errorResponse(req, c.error());
             auto r = co_await call(name, std::move(*c));
             if (!r.ok()) co_return http::errorResponse(req, r.error());
             co_return http::jsonResponse(req, http::status::ok, serializeNodeReply(*r));
           });
  }
  installVolumeStreams(r, refused);
  // A build carries a Dockerfile context's files inline (up to
  // templates::kMaxNodeSpecBytes of spec): its body streams past the
  // server's 2 MiB limit, read only once the token is checked.
  r.addUpload(http::verb::post, std::string(kPrefix) + "build",
              templates::kMaxNodeSpecBytes + (1 << 20),
              [this, refused](const http::Request& req, const http::Params&,
                              http::BodyReader& body) -> asio::awaitable<http::Response> {
                if (auto no = refused(req)) co_return std::move(*no);
                std::string text;
                for (;;) {
                  auto chunk = co_await body.next();
                  if (!chunk.ok()) co_return http::errorResponse(req, chunk.error());
                  if (!*chunk) break;
                  text += **chunk;
                }
                auto c = parseNodeCall(text);
                if (!c.ok()) co_return http::errorResponse(req, c.error());
                auto r = co_await call("build", std::move(*c));
                if (!r.ok()) co_return http::errorResponse(req, r.error());
                co_return http::jsonResponse(req, http::status::ok, serializeNodeReply(*r));
              });
}

asio::awaitable<Result<NodeReply>> NodeServer::call(std::string name, NodeCall c) {
  NodeReply r;
  auto needId = [&]() -> Status {
    if (c.id.empty()) return Error(Code::kInvalidArgument, "node call " + name + ": no id");
    return okStatus();
  };
  if (name == "credential") {
    if (c.tenant.empty() || c.credential.empty())
      co_return Error(Code::kInvalidArgument, "node call credential: tenant and credential");
    co_await node_.credentialChanged(c.tenant, c.credential);
    co_return r;
  }
  if (name == "build" || name == "fork_template") co_return co_await templateCall(name, c);
  if (isVolumeCall(name)) co_return co_await volumeCall(name, std::move(c));
  if (auto s = needId(); !s.ok()) co_return std::move(s).error();
  if (name == "create") {
    if (c.tenant.empty() || c.template_name.empty())
      co_return Error(Code::kInvalidArgument, "node call create: tenant and template");
    r.status = node_.prepareNetwork(c.tenant, c.id, c.network);
    if (r.status.ok()) {
      ops::NodeCreate nc;
      nc.id = c.id;
      nc.tenant = c.tenant;
      nc.template_name = c.template_name;
      nc.env = c.env;
      nc.cold = c.cold;
      nc.disk_mib = c.disk_mib;
      r.status = co_await node_.create(std::move(nc));
    }
    if (!r.status.ok()) nodeLog().warn("create {}: {}", c.id, r.status.error().message());
  } else if (name == "pause") {
    r.status = co_await node_.pause(c.id, c.memory);
  } else if (name == "resume") {
    r.status = co_await node_.resume(c.tenant, c.id);
  } else if (name == "destroy") {
    r.status = co_await node_.destroy(c.id);
  } else if (name == "abort") {
    node_.abort(c.id);
  } else if (name == "holding") {
    // what holding() below answers
  } else if (name == "usage") {
    auto u = co_await node_.usage(c.id);
    if (u.ok())
      r.usage = *u;
    else
      r.status = std::move(u).error();
  } else if (name == "fork") {
    if (c.copies.empty()) co_return Error(Code::kInvalidArgument, "node call fork: copies");
    for (const auto& child : c.copies)
      if (auto s = node_.inheritNetwork(c.id, child); !s.ok()) r.status = s;
    if (r.status.ok()) {
      auto f = co_await node_.fork(c.tenant, c.id, c.copies);
      if (f.ok())
        r.copies = std::move(*f);
      else
        r.status = std::move(f).error();
    }
  } else if (name == "network") {
    if (c.tenant.empty() || !c.network)
      co_return Error(Code::kInvalidArgument, "node call network: tenant and network");
    auto n = co_await node_.updateNetwork(c.tenant, c.id, *c.network);
    if (n.ok())
      r.network = std::move(*n);
    else
      r.status = std::move(n).error();
  } else {
    co_return Error(Code::kNotFound, "the node API has no call " + name);
  }
  r.holding = node_.holding(c.id);
  co_return r;
}

}  // namespace vessel::cluster
