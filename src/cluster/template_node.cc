#include "cluster/template_node.h"

#include "base/log.h"

namespace vessel::cluster {

asio::awaitable<Status> TemplateNode::create(ops::NodeCreate c) {
  // The create fails with the copy's error: nothing of a refused copy is
  // installed, so the runtime would only say the template does not exist.
  if (auto s = co_await fetcher_.ensure(c.template_name); !s.ok())
    co_return std::move(s).error().withContext("sandbox " + c.id);
  co_return co_await inner_.create(std::move(c));
}

Status TemplateNode::registerMade(const templates::Manifest& m, const std::string& owner) {
  auto t = templates_.open(m.name, m.version);
  if (!t.ok()) return std::move(t).error().withContext("register template");
  VESSEL_ASSIGN_OR_RETURN(auto e, templates::TemplateStore::entryOf(**t, owner));
  return catalogue_.put(e, true);
}

asio::awaitable<Result<templates::Manifest>> TemplateNode::forkToTemplate(std::string id,
                                                                          std::string stored_name) {
  // The owner: the tenant of the sandbox it is made from.
  std::string owner;
  if (auto sbs = registry_.listNodeSandboxes(self_); sbs.ok())
    for (const auto& sb : *sbs)
      if (sb.id == id) owner = sb.tenant_id;
  auto m = co_await inner_.forkToTemplate(std::move(id), std::move(stored_name));
  if (!m.ok()) co_return m;
  if (auto s = registerMade(*m, owner); !s.ok())
    co_return std::move(s).error().withContext("template " + m->name + " was made on node " +
                                               self_ + " but not registered");
  co_return m;
}

Status TemplateNode::build(ops::BuildRequest req, ops::BuildCallbacks cb) {
  std::weak_ptr<bool> alive = alive_;
  auto done = std::move(cb.done);
  cb.done = [this, alive, owner = req.tenant, done](Result<templates::Manifest> m) {
    if (!alive.expired() && m.ok()) {
      std::string made = m->name;
      if (auto s = registerMade(*m, owner); !s.ok())
        m = std::move(s).error().withContext("template " + made + " was built on node " + self_ +
                                             " but not registered");
    }
    if (done) done(std::move(m));
  };
  return inner_.build(std::move(req), std::move(cb));
}

int TemplateNode::dropDeleted(const std::vector<std::pair<std::string, std::string>>& deleted) {
  int n = 0;
  for (const auto& [name, version] : deleted) {
    if (templates_.inUse(name + "@" + version)) continue;
    if (templates_.remove(name, version).ok()) {
      Logger("catalogue")
          .info("template {}@{} was deleted: its files here are removed", name, version);
      ++n;
    }
  }
  return n;
}

}  // namespace vessel::cluster
