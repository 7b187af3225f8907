#pragma once
// The one translation of a guest's errors into host error codes, used by
// every front end that reaches a sandbox's agent (the native data plane,
// envd). The agent reports an Error with the guest's errno; its code came
// from the guest's own generic mapping (base/result.cc), which leaves many
// errnos that are the caller's doing as kInternal. Mapping them here, once,
// keeps the front ends from disagreeing: each only renders the code in its
// own wire format (an HTTP status, a Connect code).
#include "base/result.h"

namespace vessel::agentclient {

// `e` with the code its errno means (ENOTEMPTY: kFailedPrecondition, as
// gRPC's codes name "deleting a non-empty directory"); errnos not in the
// table, and errors without one, keep the code they came with.
Error guestError(const Error& e);

}  // namespace vessel::agentclient
