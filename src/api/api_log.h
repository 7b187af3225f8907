#pragma once
// The log component every file of the API writes to.
#include "base/log.h"

namespace vessel::api {

inline const Logger& log() {
  static const Logger l("api");
  return l;
}

}  // namespace vessel::api
