#pragma once
// GET /livez and GET /readyz on a listener (unauthenticated, JSON), for
// Kubernetes probes and service managers: live means the process serves
// requests; ready means it can do its job now (`ready` says whether, and
// adds what it checked to the object).
#include <boost/json/object.hpp>
#include <functional>
#include <string>

#include "http/server.h"

namespace vessel::vesseld {

using ReadyCheck = std::function<bool(boost::json::object& out)>;
void installProbes(http::HttpServer& server, std::string role, ReadyCheck ready);

}  // namespace vessel::vesseld
