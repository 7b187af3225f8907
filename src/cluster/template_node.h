#pragma once
// The ops::Node a node of a cluster (vesseld --role=node) serves over its
// node API: its LocalNode, plus what the cluster's template catalogue
// needs of it. A create of a template this node lacks first copies the
// template from another node and checks it (cluster/template_transfer.h);
// a template built here or forked into here is registered in the
// catalogue (with its owner) before the call answers, so every API replica
// can create from it as soon as it hears. Everything else is passed on.
// Used from the io thread only.
#include <memory>
#include <string>

#include "cluster/template_transfer.h"
#include "ops/node.h"
#include "store/store.h"
#include "templates/catalogue.h"
#include "templates/store.h"

namespace vessel::cluster {

class TemplateNode final : public ops::Node {
 public:
  TemplateNode(ops::Node& inner, templates::TemplateStore& templates,
               templates::Catalogue& catalogue, store::Store& registry, TemplateFetcher& fetcher,
               std::string self)
      : inner_(inner),
        templates_(templates),
        catalogue_(catalogue),
        registry_(registry),
        fetcher_(fetcher),
        self_(std::move(self)) {}

  asio::awaitable<Status> create(ops::NodeCreate c) override;
  asio::awaitable<Result<templates::Manifest>> forkToTemplate(std::string id,
                                                              std::string stored_name) override;
  Status build(ops::BuildRequest req, ops::BuildCallbacks cb) override;

  // Passed on.
  void onLost(LostHandler h) override { inner_.onLost(std::move(h)); }
  Status prepareNetwork(const std::string& tenant, const std::string& id,
                        const std::optional<ops::NetworkSpec>& spec) override {
    return inner_.prepareNetwork(tenant, id, spec);
  }
  Status inheritNetwork(const std::string& parent, const std::string& child) override {
    return inner_.inheritNetwork(parent, child);
  }
  asio::awaitable<Result<ops::NetworkSpec>> updateNetwork(std::string tenant, std::string id,
                                                          ops::NetworkSpec spec) override {
    return inner_.updateNetwork(std::move(tenant), std::move(id), std::move(spec));
  }
  Result<ops::NetworkSpec> network(const std::string& id) override { return inner_.network(id); }
  asio::awaitable<void> credentialChanged(std::string tenant, std::string name) override {
    return inner_.credentialChanged(std::move(tenant), std::move(name));
  }
  asio::awaitable<Status> pause(std::string id, bool keep_memory) override {
    return inner_.pause(std::move(id), keep_memory);
  }
  asio::awaitable<Status> resume(std::string tenant, std::string id) override {
    return inner_.resume(std::move(tenant), std::move(id));
  }
  asio::awaitable<Result<std::vector<Status>>> fork(std::string tenant, std::string id,
                                                    std::vector<std::string> copies) override {
    return inner_.fork(std::move(tenant), std::move(id), std::move(copies));
  }
  asio::awaitable<Status> destroy(std::string id) override { return inner_.destroy(std::move(id)); }
  void abort(const std::string& id) override { inner_.abort(id); }
  ops::Holding holding(const std::string& id) const override { return inner_.holding(id); }
  asio::awaitable<Result<ops::Usage>> usage(std::string id) override {
    return inner_.usage(std::move(id));
  }
  std::shared_ptr<agentclient::AgentClient> agent(const std::string& id) override {
    return inner_.agent(id);
  }
  asio::awaitable<Result<ops::Holding>> adopt(std::string tenant, std::string id) override {
    return inner_.adopt(std::move(tenant), std::move(id));
  }
  asio::awaitable<int> discardOrphans(std::set<std::string> keep) override {
    return inner_.discardOrphans(std::move(keep));
  }
  asio::awaitable<std::vector<std::string>> shutdown(bool stop_vms) override {
    return inner_.shutdown(stop_vms);
  }

  // Removes this node's files of template versions the catalogue has
  // deleted and no sandbox here uses; returns how many went.
  int dropDeleted(const std::vector<std::pair<std::string, std::string>>& deleted);

 private:
  // Registers a template just made here (revived if it was deleted).
  Status registerMade(const templates::Manifest& m, const std::string& owner);

  ops::Node& inner_;
  templates::TemplateStore& templates_;
  templates::Catalogue& catalogue_;
  store::Store& registry_;
  TemplateFetcher& fetcher_;
  std::string self_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace vessel::cluster
