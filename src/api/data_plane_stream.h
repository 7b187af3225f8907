#pragma once
// What the data plane's exec and file routes share (data_plane_exec.cc,
// data_plane_files.cc): error mapping and the SSE event writer. The pump
// from the agent's event source and the wait for its next event are every
// front end's (agentclient/event_pump.h, http/stream.h); what stays here is
// the data plane's wire format. Internal to src/api.
#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <cerrno>

#include "agentclient/agent_client.h"
#include "agentclient/event_pump.h"
#include "agentclient/guest_errors.h"
#include "api/http_names.h"
#include "base/log.h"
#include "http/server.h"
#include "http/sse.h"
#include "http/stream.h"

namespace vessel::api::data_plane {

namespace beast = boost::beast;
namespace json = boost::json;

constexpr auto kKeepalive = kSseKeepalive;
constexpr auto kWriteTimeout = kSseWriteTimeout;
constexpr size_t kChannelDepth = 8;  // events buffered between the agent and a slow client

inline const Logger& log() {
  static const Logger l("data");
  return l;
}

inline std::string sseEvent(std::string_view type, const json::object& data) {
  return sseFrame(type, json::serialize(data));
}

// The guest's errno decides the code, in the one table envd uses too
// (agentclient/guest_errors.h).
inline Error fromGuest(const Error& e) { return agentclient::guestError(e); }

inline Response fail(const Request& req, const Error& e) {
  return errorResponse(req, fromGuest(e));
}

inline Response refuse(const Request& req, const Error& e, const std::string& state = "") {
  if (!state.empty()) {
    json::object details{{"state", state}};
    return errorResponse(req, e, details);
  }
  return errorResponse(req, e);
}

inline Response noContent(const Request& req) {
  Response res{http::status::no_content, req.version()};
  res.set(http::field::server, "vessel");
  res.keep_alive(req.keep_alive());
  return res;
}

inline std::string pathOnly(std::string_view target) {
  std::string p(target);
  if (auto q = p.find('?'); q != std::string::npos) p.resize(q);
  return p;
}

inline std::string parentOf(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The next event of `events` (agentclient/event_pump.h), the client going
// away or the keepalive (http/stream.h); the data plane's streams have no
// deadline of their own.
template <typename T>
asio::awaitable<Wakeup<agentclient::StreamItem<T>>> nextEvent(agentclient::EventStream<T>& events,
                                                              beast::tcp_stream& stream,
                                                              asio::steady_timer& keepalive,
                                                              asio::steady_timer& never) {
  auto next = events.next();
  co_return co_await http::nextOrGone(std::move(next), stream, keepalive, kKeepalive, never);
}

inline json::object exitJson(const agentclient::ExitInfo& e) {
  return {{"exit_code", e.exited ? e.code : 128 + e.signal},
          {"exited", e.exited},
          {"signal", e.signal},
          {"timed_out", e.timed_out}};
}

inline json::object errorJson(const Error& e) {
  return {{"code", std::string(codeName(e.code()))}, {"message", e.message()}};
}

}  // namespace vessel::api::data_plane
