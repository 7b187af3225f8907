#pragma once
// A stopgap for tests and operators until the data plane's sessions exist:
// `POST /debug/sandboxes/{id}/exec` runs one shell command in a running
// sandbox through its agent and returns its exit code and output. Off unless
// vesseld runs with --debug-exec; authenticated and tenant-scoped like /v1/.
#include "api/control_plane.h"
#include "api/http_server.h"
#include "store/store.h"

namespace vessel::api {

void installDebugExec(HttpServer& server, store::Store& store, ControlPlane& control);

}  // namespace vessel::api
