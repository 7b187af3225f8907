#pragma once
// The one pump from an agent's event stream (a Process's output and exit, a
// Watch's changes) to whatever serves it: the native data plane's SSE
// streams, envd's Connect streams, its polled watchers and its process
// table's fan-out. Each front end keeps only its wire format.
//
// pumpEvents() reads a source until its last event (a process's exit) or
// its failure and hands every event to a sink; EventStream runs one into a
// bounded channel, so that a request can wait for the next event, the
// client going away and its timers at once without losing an event.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <optional>

#include "agentclient/agent_client.h"
#include "base/result.h"

namespace vessel::agentclient {

// One event of a source, or why it ended.
template <typename T>
struct StreamItem {
  std::optional<Error> error;
  T value{};
};

// The event after which a source has nothing more: a process's exit. A
// watch ends only by failing (or being dropped).
inline bool isLastEvent(const ProcessEvent& e) { return e.kind == ProcessEvent::Kind::kExit; }
inline bool isLastEvent(const WatchEvent&) { return false; }
template <typename T>
bool endsStream(const StreamItem<T>& item) {
  return item.error.has_value() || isLastEvent(item.value);
}

// Reads `source` (a Process or a Watch: `next()` yields Result<T>) until
// its last event or its failure, handing each item to `sink`, a callable
// `asio::awaitable<bool>(StreamItem<T>)` that answers whether to go on.
// The flow control is the sink's: the next event is read only once it
// has taken this one, and the agent's window does the rest.
template <typename T, typename Source, typename Sink>
asio::awaitable<void> pumpEvents(std::shared_ptr<Source> source, Sink sink) {
  for (;;) {
    auto next = source->next();
    auto r = co_await std::move(next);
    StreamItem<T> item;
    if (r.ok())
      item.value = std::move(*r);
    else
      item.error = std::move(r).error();
    bool last = endsStream(item);
    bool more = co_await sink(std::move(item));
    if (!more || last) co_return;
  }
}

template <typename T>
using EventChannel = asio::experimental::channel<void(boost::system::error_code, StreamItem<T>)>;

// A source pumped into a channel of `depth` items (what is buffered between
// the agent and a slow client). The pump stops, and with it the source's
// last owner here, when this is destroyed or stop() is called: a quiet
// watch would otherwise hold the agent's stream until its sandbox ends.
template <typename T>
class EventStream {
 public:
  template <typename Source>
  EventStream(asio::io_context& io, std::shared_ptr<Source> source, size_t depth)
      : ch_(std::make_shared<EventChannel<T>>(io, depth)),
        stop_(std::make_shared<asio::cancellation_signal>()) {
    // The sink holds the signal: the slot the pump runs under lives in it.
    auto send = [ch = ch_, stop = stop_](StreamItem<T> item) -> asio::awaitable<bool> {
      (void)stop;
      if (!ch->is_open()) co_return false;
      auto [ec] = co_await ch->async_send(boost::system::error_code(), std::move(item),
                                          asio::as_tuple(asio::use_awaitable));
      co_return !ec;
    };
    asio::co_spawn(io, pumpEvents<T>(std::move(source), std::move(send)),
                   asio::bind_cancellation_slot(stop_->slot(), asio::detached));
  }
  EventStream(const EventStream&) = delete;
  EventStream& operator=(const EventStream&) = delete;
  ~EventStream() { stop(); }

  // The next item; a channel closed under the reader is kUnavailable.
  // Cancelling the wait (a timer or the client won a race) loses nothing.
  asio::awaitable<StreamItem<T>> next() {
    auto ch = ch_;
    auto [ec, item] = co_await ch->async_receive(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      StreamItem<T> gone;
      gone.error = Error(Code::kUnavailable, "event source ended");
      co_return gone;
    }
    co_return std::move(item);
  }

  void stop() {
    if (stopped_) return;
    stopped_ = true;
    stop_->emit(asio::cancellation_type::terminal);
    ch_->close();
  }

 private:
  std::shared_ptr<EventChannel<T>> ch_;
  std::shared_ptr<asio::cancellation_signal> stop_;
  bool stopped_ = false;
};

}  // namespace vessel::agentclient
