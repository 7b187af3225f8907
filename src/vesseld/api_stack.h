#pragma once
// The API stack: the lifecycle over an ops::Node (this machine's LocalNode
// for --role=all, the cluster's nodes for --role=api), the control plane,
// sessions, the E2B REST API and the E2B envd listener, with their metrics.
// Built by one function for both roles, from apiSettings(cfg).
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/object.hpp>
#include <functional>
#include <memory>
#include <utility>

#include "api/control_plane.h"
#include "api/sessions.h"
#include "api/volumes_api.h"
#include "e2b/access_token.h"
#include "e2b/envd/envd.h"
#include "e2b/rest.h"
#include "http/server.h"
#include "ingress/proxy.h"
#include "ingress/tls.h"
#include "metrics/registry.h"
#include "ops/lifecycle.h"
#include "store/store.h"
#include "templates/store.h"
#include "vesseld/envd_forward.h"
#include "vesseld/listener_tls.h"
#include "vesseld/live_index.h"
#include "vesseld/probes.h"
#include "vesseld/settings.h"
#include "vesseld/volume_stack.h"

namespace vessel::vesseld {

// An API replica's volumes: kept by the nodes, reached over the node API
// (cluster/cluster_volumes.h). One machine builds its own (volume_stack.h).
struct RemoteVolumes {
  ops::VolumeKeeper* keeper = nullptr;
  ops::VolumeMounter* mounter = nullptr;
};

class ApiStack {
 public:
  static Result<std::unique_ptr<ApiStack>> build(boost::asio::io_context& io, ApiSettings s,
                                                 store::Store& store, ops::Node& node,
                                                 templates::TemplateStore& templates,
                                                 RemoteVolumes volumes = {});
  ~ApiStack();

  ops::Lifecycle& lifecycle() { return *lifecycle_; }
  api::ControlPlane& control() { return *control_; }
  api::Sessions& sessions() { return *sessions_; }
  metrics::Registry& metrics() { return metrics_; }
  const ApiSettings& settings() const { return s_; }

  // What /healthz answers: the object and whether it is healthy.
  using Health = std::function<std::pair<boost::json::object, bool>()>;
  // Opens the listeners: control (with /metrics, /healthz, /livez,
  // /readyz), E2B REST and envd, as configured. `before_scrape` runs
  // before /metrics renders (the gateway's counters).
  // `tls`: TLS on every listener when enabled (listener_tls.h); its
  // threads run the sandbox ports' handshakes in any case.
  Status serve(Health health, ReadyCheck ready,
               std::function<boost::asio::awaitable<void>()> before_scrape, ListenerTls& tls);
  // Stops taking requests.
  void close();

 private:
  ApiStack(boost::asio::io_context& io, ApiSettings s) : io_(io), s_(std::move(s)) {}
  // A replica's envd listener forwards each sandbox's requests to its node.
  Status forwardEnvd();

  boost::asio::io_context& io_;
  ApiSettings s_;
  metrics::Registry metrics_;
  std::unique_ptr<ops::Lifecycle> lifecycle_;
  // One machine's volumes (docs/volumes.md); a replica keeps none.
  std::unique_ptr<VolumeStack> local_volumes_;
  std::unique_ptr<api::VolumesApi> volumes_;
  std::unique_ptr<api::ControlPlane> control_;
  std::unique_ptr<api::Sessions> sessions_;
  std::unique_ptr<e2b::AccessTokens> tokens_;
  std::unique_ptr<e2b::RestApi> e2b_rest_;
  std::unique_ptr<e2b::envd::Envd> envd_;
  // Held while envd_ lives: frees a sandbox's envd state when it ends.
  std::shared_ptr<ops::OperationLog::SandboxStateFn> envd_frees_;
  std::unique_ptr<EnvdForwarder> envd_forward_;  // API replicas
  LiveIndex live_;                               // one machine
  std::shared_ptr<ops::OperationLog::SandboxStateFn> live_hook_;
  std::unique_ptr<ingress::Proxy> ports_;  // one machine: sandbox ports
  std::unique_ptr<ingress::TlsFront> ports_tls_;
  std::unique_ptr<http::HttpServer> server_, e2b_server_, envd_server_;
};

}  // namespace vessel::vesseld
