#pragma once
// A blocking client for the gateway's control socket (newline-delimited
// JSON, docs/gateway.md), for vesseld, the node's network slots and tests.
#include <boost/json/value.hpp>
#include <chrono>
#include <string>

#include "base/fd.h"
#include "base/result.h"

namespace vessel::gateway {

class ControlClient {
 public:
  static Result<ControlClient> connect(const std::string& path,
                                       std::chrono::milliseconds timeout = std::chrono::seconds(5));

  // Sends one request, returns the reply object; a reply with "ok": false
  // becomes an Error carrying the gateway's message.
  Result<boost::json::object> call(const boost::json::object& request);

  Status setSandbox(const std::string& sandbox, const std::string& source,
                    const boost::json::value& policy);
  Status removeSandbox(const std::string& sandbox);

 private:
  explicit ControlClient(Fd fd) : fd_(std::move(fd)) {}
  Fd fd_;
  std::string pending_;
};

}  // namespace vessel::gateway
