// The node API's template calls: a build and a fork into a template, run
// by this node for an API replica (which has no template files). Each
// answers when the template is made, with its manifest; the node (its
// ops::Node, cluster/template_node.h) has registered it in the catalogue
// by then, so any replica can create from it as soon as it hears.
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "base/log.h"
#include "cluster/node_server.h"
#include "templates/build_spec.h"

namespace vessel::cluster {

namespace {

// A build waits for the node's build queue, then boots a guest: bounded
// by the builder (5 minutes a build), this only ends a wait that lost it.
constexpr auto kBuildWait = std::chrono::minutes(30);

}  // namespace

asio::awaitable<Result<NodeReply>> NodeServer::templateCall(const std::string& name,
                                                            const NodeCall& c) {
  NodeReply r;
  if (c.template_name.empty())
    co_return Error(Code::kInvalidArgument, "node call " + name + ": template");
  if (name == "fork_template") {
    if (c.id.empty()) co_return Error(Code::kInvalidArgument, "node call fork_template: id");
    auto m = co_await node_.forkToTemplate(c.id, c.template_name);
    if (m.ok())
      r.manifest = templates::toJson(*m);
    else
      r.status = std::move(m).error();
    r.holding = node_.holding(c.id);
    co_return r;
  }
  // build
  if (c.spec.empty()) co_return Error(Code::kInvalidArgument, "node call build: spec");
  auto spec = templates::parseBuildSpec(c.spec, templates::kMaxNodeSpecBytes);
  if (!spec.ok()) co_return std::move(spec).error().withContext("node call build");
  // A from_image build has no base template: the node converts the image.
  if (c.base.empty() && spec->from_image.empty())
    co_return Error(Code::kInvalidArgument, "node call build: base");
  ops::BuildRequest req;
  req.spec = std::move(*spec);
  // The spec's own name is a placeholder: stored names are longer than
  // the names a spec may carry.
  req.spec.name = c.template_name;
  req.base = c.base;
  req.tenant = c.tenant;
  req.registry_auth = {c.registry_username, c.registry_password};
  auto ex = co_await asio::this_coro::executor;
  auto timer = std::make_shared<asio::steady_timer>(ex, kBuildWait);
  auto out = std::make_shared<std::optional<Result<templates::Manifest>>>();
  ops::BuildCallbacks cb;
  cb.progress = [](const std::string&, int) {
  };  // not relayed (the replica's op ends with the result)
  cb.done = [timer, out](Result<templates::Manifest> m) {
    out->emplace(std::move(m));
    timer->cancel();
  };
  if (auto s = node_.build(std::move(req), std::move(cb)); !s.ok()) {
    r.status = s;
    co_return r;
  }
  boost::system::error_code ec;
  co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  if (!*out) {
    r.status =
        Error(Code::kDeadlineExceeded, "template build " + c.template_name + " took too long");
  } else if ((*out)->ok()) {
    r.manifest = templates::toJson(***out);
  } else {
    r.status = std::move(**out).error();
    Logger("node-api").warn("build {}: {}", c.template_name, r.status.error().message());
  }
  co_return r;
}

}  // namespace vessel::cluster
