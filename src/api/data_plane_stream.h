#pragma once
// What the data plane's exec and file routes share (data_plane_exec.cc,
// data_plane_files.cc): error mapping, the SSE event writer, and the pump
// that reads an agent's event source into a channel so that a request can
// wait for its next event, the client going away and its keepalive at once.
// Internal to src/api.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <cerrno>

#include "agentclient/agent_client.h"
#include "agentclient/guest_errors.h"
#include "api/http_names.h"
#include "base/log.h"
#include "http/server.h"
#include "http/sse.h"

namespace vessel::api::data_plane {

namespace beast = boost::beast;
namespace json = boost::json;
using namespace asio::experimental::awaitable_operators;

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

// What a pump hands to the request's coroutine: an event, or why it ended.
template <typename T>
struct Item {
  std::optional<Error> error;
  T value{};
};
template <typename T>
using Channel = asio::experimental::channel<void(boost::system::error_code, Item<T>)>;

// Reads `source` (a Process or a Watch) into `ch` until its last event, so
// that the request's coroutine can wait for the next event, the client
// going away and its keepalive timer at once without losing an event. The
// channel's depth bounds what is buffered; the agent's flow control does
// the rest. Cancelled through its slot when the request ends first.
template <typename T, typename Source>
asio::awaitable<void> pump(std::shared_ptr<Source> source, std::shared_ptr<Channel<T>> ch,
                           std::shared_ptr<asio::cancellation_signal> keep_alive_signal) {
  (void)keep_alive_signal;  // the slot we run under lives in it
  for (;;) {
    auto next = source->next();
    auto r = co_await std::move(next);
    Item<T> item;
    bool last = !r.ok();
    if (r.ok()) {
      if constexpr (std::is_same_v<T, agentclient::ProcessEvent>)
        last = r->kind == agentclient::ProcessEvent::Kind::kExit;
      item.value = std::move(*r);
    } else {
      item.error = std::move(r).error();
    }
    boost::system::error_code none;
    auto [ec] = co_await ch->async_send(none, std::move(item), asio::as_tuple(asio::use_awaitable));
    if (ec || last) co_return;
  }
}

// Waits for the next item of `ch`, the client closing its side (it should
// send nothing after its request) or the keepalive timer.
enum class Woke { kItem, kClientGone, kKeepalive };
template <typename T>
asio::awaitable<std::pair<Woke, Item<T>>> nextOrGone(Channel<T>& ch, beast::tcp_stream& stream,
                                                     asio::steady_timer& keepalive) {
  char probe[64];
  keepalive.expires_after(kKeepalive);
  auto r = co_await (
      ch.async_receive(asio::as_tuple(asio::use_awaitable)) ||
      stream.socket().async_read_some(asio::buffer(probe), asio::as_tuple(asio::use_awaitable)) ||
      keepalive.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (r.index() == 0) {
    auto [ec, item] = std::move(std::get<0>(r));
    if (ec) {
      Item<T> gone;
      gone.error = Error(Code::kUnavailable, "event source ended");
      co_return std::make_pair(Woke::kItem, std::move(gone));
    }
    co_return std::make_pair(Woke::kItem, std::move(item));
  }
  if (r.index() == 1) co_return std::make_pair(Woke::kClientGone, Item<T>{});
  co_return std::make_pair(Woke::kKeepalive, Item<T>{});
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
