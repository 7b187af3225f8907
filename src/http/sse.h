#pragma once
// Writing Server-Sent Events on a connection the handler owns (both planes):
// a head with no length (the body is the rest of the connection), frames,
// keepalive comments, every write bounded so a client that stops reading is
// dropped rather than holding the server.
#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <string>
#include <string_view>

#include "http/server.h"

namespace vessel::http {

// A comment line this often keeps proxies and clients seeing a live stream.
constexpr std::chrono::seconds kSseKeepalive{15};
// A write that does not finish in this long drops the client.
constexpr std::chrono::seconds kSseWriteTimeout{30};
// The keepalive comment.
inline constexpr std::string_view kSsePing = ": keepalive\n\n";

// 200, text/event-stream, no-cache, Connection: close. False if the client is gone.
boost::asio::awaitable<bool> writeSseHead(boost::beast::tcp_stream& stream, const Request& req);
// One bounded write. False if the client is gone.
boost::asio::awaitable<bool> writeAll(boost::beast::tcp_stream& stream, std::string data);
// "id: <id>\n" (if id >= 0) "event: <type>\ndata: <data_json>\n\n".
std::string sseFrame(std::string_view type, std::string_view data_json, int64_t id = -1);
// Half-closes: the client reads the end of the stream.
void endStream(boost::beast::tcp_stream& stream);

}  // namespace vessel::http
