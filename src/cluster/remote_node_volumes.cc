// A volume's file streamed between an API replica and the node that keeps
// it (remote_node.h): volume_read's answer is the file as a chunked body,
// read here in pieces of at most 256 KiB as the replica's client takes
// them; volume_write's request is the file as a chunked body, each piece
// sent as the replica's client uploads it, after the node said it can
// write the file (100 Continue). Memory stays bounded by one piece either
// way, and cancelAll (the node lost) cuts an open stream as it cuts a call.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "cluster/remote_node_internal.h"

namespace vessel::cluster {

namespace beast = boost::beast;
namespace http = beast::http;

namespace {

constexpr size_t kPiece = 256 * 1024;
constexpr size_t kMaxAnswer = 1 << 20;  // a refusal's or commit's reply
// How long a failed send waits for the refusal that may have caused it.
constexpr std::chrono::milliseconds kEarlyAnswer{2000};

// g++ 12: no co_await in a conditional expression (CONTRIBUTING.md rule 3):
// each step on the flight's stream, plain or TLS, in an if.
template <class Op>
asio::awaitable<beast::error_code> onStream(RemoteNode::Flight& f, Op op) {
  beast::error_code ec;
  if (f.tls)
    ec = co_await op(*f.tls);
  else
    ec = co_await op(f.stream);
  co_return ec;
}

// Reads up to out.size() bytes of the body `p` parses into `out`;
// returns how many (0 with p.is_done() at its end).
asio::awaitable<Result<size_t>> readPiece(RemoteNode::Flight& f, beast::flat_buffer& buf,
                                          http::response_parser<http::buffer_body>& p,
                                          std::string& out) {
  p.get().body().data = out.data();
  p.get().body().size = out.size();
  auto op = [&buf, &p](auto& s) -> asio::awaitable<beast::error_code> {
    auto [ec, n] = co_await http::async_read(s, buf, p, asio::as_tuple(asio::use_awaitable));
    co_return ec;
  };
  beast::error_code ec = co_await onStream(f, op);
  if (ec == http::error::need_buffer) ec = {};
  if (ec) co_return Error(Code::kUnavailable, f.cancelled.empty() ? ec.message() : f.cancelled);
  co_return out.size() - p.get().body().size;
}

// A whole small body (a refusal) through `p`, at most kMaxAnswer bytes.
asio::awaitable<Result<std::string>> readAll(RemoteNode::Flight& f, beast::flat_buffer& buf,
                                             http::response_parser<http::buffer_body>& p) {
  std::string all;
  std::string piece(64 * 1024, '\0');
  while (!p.is_done()) {
    auto n = co_await readPiece(f, buf, p, piece);
    if (!n.ok()) co_return std::move(n).error();
    all.append(piece, 0, *n);
    if (all.size() > kMaxAnswer) co_return Error(Code::kProtocol, "an answer over 1 MiB");
  }
  co_return all;
}

// What a node answered instead of what was asked: its reply's failure,
// or the HTTP error.
Error refusal(unsigned status, const std::string& body) {
  if (status != 200) return client::errorFromResponse(client::HttpResponse{status, "", body});
  auto r = parseNodeReply(body);
  if (!r.ok()) return std::move(r).error();
  if (!r->status.ok()) return std::move(r->status).error();
  return Error(Code::kProtocol, "the node answered without the file");
}

class RemoteReader final : public ops::VolumeReader {
 public:
  RemoteReader(RemoteNode& node, std::shared_ptr<RemoteNode::Flight> f,
               std::unique_ptr<beast::flat_buffer> buf,
               std::unique_ptr<http::response_parser<http::buffer_body>> p,
               std::chrono::milliseconds timeout)
      : node_(node), f_(std::move(f)), buf_(std::move(buf)), p_(std::move(p)), timeout_(timeout) {}
  ~RemoteReader() override { node_.land(f_); }

  asio::awaitable<Result<std::optional<std::string>>> next() override {
    for (;;) {
      if (p_->is_done()) co_return std::optional<std::string>();
      std::string out(kPiece, '\0');
      f_->stream.expires_after(timeout_);
      auto n = co_await readPiece(*f_, *buf_, *p_, out);
      if (!n.ok())
        co_return std::move(n).error().withContext("node " + node_.name() + ": volume_read");
      if (*n == 0) continue;  // a chunk's framing, no data yet
      out.resize(*n);
      co_return std::optional<std::string>(std::move(out));
    }
  }

 private:
  RemoteNode& node_;
  std::shared_ptr<RemoteNode::Flight> f_;
  std::unique_ptr<beast::flat_buffer> buf_;
  std::unique_ptr<http::response_parser<http::buffer_body>> p_;
  std::chrono::milliseconds timeout_;
};

class RemoteWriter final : public ops::VolumeWriter {
 public:
  RemoteWriter(RemoteNode& node, std::shared_ptr<RemoteNode::Flight> f,
               std::unique_ptr<beast::flat_buffer> buf, std::chrono::milliseconds timeout)
      : node_(node), f_(std::move(f)), buf_(std::move(buf)), timeout_(timeout) {}
  ~RemoteWriter() override { node_.land(f_); }

  asio::awaitable<Status> append(std::string data) override {
    // The node answers early only to refuse (the volume is full, say):
    // that answer, not a broken pipe, is the error. (Over TLS the socket
    // may hold other records: there the failed send below reads it.)
    if (!f_->tls && f_->stream.socket().available() > 0) {
      auto r = co_await answer(timeout_);
      if (!r.ok()) co_return std::move(r).error();
      co_return Error(Code::kProtocol, "node " + node_.name() + ": volume_write answered early");
    }
    if (data.empty()) co_return okStatus();
    f_->stream.expires_after(timeout_);
    auto op = [&data](auto& s) -> asio::awaitable<beast::error_code> {
      auto [ec, n] = co_await asio::async_write(s, http::make_chunk(asio::buffer(data)),
                                                asio::as_tuple(asio::use_awaitable));
      co_return ec;
    };
    beast::error_code ec = co_await onStream(*f_, op);
    if (!ec) co_return okStatus();
    auto early = co_await answer(kEarlyAnswer);
    if (!early.ok() && early.error().code() != Code::kUnavailable)
      co_return std::move(early).error();
    co_return failed("send", ec);
  }

  asio::awaitable<Result<ops::VolumeFileInfo>> commit() override {
    f_->stream.expires_after(timeout_);
    auto op = [](auto& s) -> asio::awaitable<beast::error_code> {
      auto [ec, n] = co_await asio::async_write(s, http::make_chunk_last(),
                                                asio::as_tuple(asio::use_awaitable));
      co_return ec;
    };
    beast::error_code ec = co_await onStream(*f_, op);
    if (ec) co_return failed("send", ec);
    auto r = co_await answer(timeout_);
    if (!r.ok()) co_return std::move(r).error();
    if (!r->file) co_return Error(Code::kProtocol, "node " + node_.name() + ": no file written");
    co_return std::move(*r->file);
  }

 private:
  // The node's final answer: its reply, whose failure is the Error.
  asio::awaitable<Result<NodeReply>> answer(std::chrono::milliseconds bound) {
    f_->stream.expires_after(bound);
    http::response_parser<http::buffer_body> p;
    p.body_limit(kMaxAnswer);
    auto head = [this, &p](auto& s) -> asio::awaitable<beast::error_code> {
      auto [ec, n] =
          co_await http::async_read_header(s, *buf_, p, asio::as_tuple(asio::use_awaitable));
      co_return ec;
    };
    beast::error_code ec = co_await onStream(*f_, head);
    if (ec) co_return failed("receive", ec);
    auto body = co_await readAll(*f_, *buf_, p);
    if (!body.ok()) co_return std::move(body).error().withContext("node " + node_.name());
    if (p.get().result_int() != 200)
      co_return refusal(p.get().result_int(), *body).withContext("node " + node_.name());
    auto r = parseNodeReply(*body);
    if (!r.ok()) co_return std::move(r).error().withContext("node " + node_.name());
    if (!r->status.ok()) co_return std::move(r->status).error();
    co_return r;
  }
  Error failed(const std::string& step, const beast::error_code& ec) const {
    return Error(Code::kUnavailable, "node " + node_.name() + ": volume_write: " + step + ": " +
                                         (f_->cancelled.empty() ? ec.message() : f_->cancelled));
  }

  RemoteNode& node_;
  std::shared_ptr<RemoteNode::Flight> f_;
  std::unique_ptr<beast::flat_buffer> buf_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

asio::awaitable<Result<std::unique_ptr<ops::VolumeReader>>> RemoteNode::readVolume(
    NodeCall c, std::chrono::milliseconds timeout) {
  auto connecting = connect("volume_read", timeout, nullptr);
  auto made = co_await std::move(connecting);
  if (!made.ok()) co_return std::move(made).error();
  std::shared_ptr<Flight> f = std::move(*made);
  struct Land {
    RemoteNode* self;
    std::shared_ptr<Flight> f;
    ~Land() {
      if (f) self->land(f);
    }
  } landing{this, f};
  auto fail = [&](const std::string& what) {
    return Error(Code::kUnavailable, "node " + name_ + ": volume_read: " + what);
  };
  http::request<http::string_body> req{http::verb::post, f->url.base_path + "/node/v1/volume_read",
                                       11};
  req.set(http::field::host, f->url.host);
  req.set(http::field::authorization, "Bearer " + token_);
  req.set(http::field::content_type, "application/json");
  req.body() = serializeNodeCall(c);
  req.prepare_payload();
  auto send = [&req](auto& s) -> asio::awaitable<beast::error_code> {
    auto [ec, n] = co_await http::async_write(s, req, asio::as_tuple(asio::use_awaitable));
    co_return ec;
  };
  beast::error_code ec = co_await onStream(*f, send);
  if (ec) co_return fail("send: " + (f->cancelled.empty() ? ec.message() : f->cancelled));
  auto buf = std::make_unique<beast::flat_buffer>();
  auto p = std::make_unique<http::response_parser<http::buffer_body>>();
  p->body_limit(boost::none);  // a file: as long as the volume holds
  p->header_limit(64 * 1024);
  auto head = [&buf, &p](auto& s) -> asio::awaitable<beast::error_code> {
    auto [ec, n] =
        co_await http::async_read_header(s, *buf, *p, asio::as_tuple(asio::use_awaitable));
    co_return ec;
  };
  ec = co_await onStream(*f, head);
  if (ec) co_return fail("receive: " + (f->cancelled.empty() ? ec.message() : f->cancelled));
  if (p->get().result_int() != 200 ||
      p->get()[http::field::content_type] != "application/octet-stream") {
    auto body = co_await readAll(*f, *buf, *p);
    if (!body.ok()) co_return std::move(body).error().withContext("node " + name_);
    co_return refusal(p->get().result_int(), *body).withContext("node " + name_);
  }
  landing.f.reset();  // the reader's from here
  std::unique_ptr<ops::VolumeReader> r =
      std::make_unique<RemoteReader>(*this, std::move(f), std::move(buf), std::move(p), timeout);
  co_return r;
}

asio::awaitable<Result<std::unique_ptr<ops::VolumeWriter>>> RemoteNode::writeVolume(
    NodeCall c, std::chrono::milliseconds timeout) {
  auto connecting = connect("volume_write", timeout, nullptr);
  auto made = co_await std::move(connecting);
  if (!made.ok()) co_return std::move(made).error();
  std::shared_ptr<Flight> f = std::move(*made);
  struct Land {
    RemoteNode* self;
    std::shared_ptr<Flight> f;
    ~Land() {
      if (f) self->land(f);
    }
  } landing{this, f};
  auto fail = [&](const std::string& what) {
    return Error(Code::kUnavailable, "node " + name_ + ": volume_write: " + what);
  };
  http::request<http::empty_body> req{http::verb::post, f->url.base_path + "/node/v1/volume_write",
                                      11};
  req.set(http::field::host, f->url.host);
  req.set(http::field::authorization, "Bearer " + token_);
  req.set(http::field::content_type, "application/octet-stream");
  req.set(kNodeCallHeader, encodeNodeCallHeader(c));
  req.set(http::field::expect, "100-continue");
  req.chunked(true);
  http::request_serializer<http::empty_body> sr{req};
  auto send = [&sr](auto& s) -> asio::awaitable<beast::error_code> {
    auto [ec, n] = co_await http::async_write_header(s, sr, asio::as_tuple(asio::use_awaitable));
    co_return ec;
  };
  beast::error_code ec = co_await onStream(*f, send);
  if (ec) co_return fail("send: " + (f->cancelled.empty() ? ec.message() : f->cancelled));
  // 100 Continue, or the node's refusal (the file cannot be written).
  auto buf = std::make_unique<beast::flat_buffer>();
  http::response_parser<http::buffer_body> p;
  p.body_limit(kMaxAnswer);
  auto head = [&buf, &p](auto& s) -> asio::awaitable<beast::error_code> {
    auto [ec, n] =
        co_await http::async_read_header(s, *buf, p, asio::as_tuple(asio::use_awaitable));
    co_return ec;
  };
  ec = co_await onStream(*f, head);
  if (ec) co_return fail("receive: " + (f->cancelled.empty() ? ec.message() : f->cancelled));
  if (p.get().result() != http::status::continue_) {
    auto body = co_await readAll(*f, *buf, p);
    if (!body.ok()) co_return std::move(body).error().withContext("node " + name_);
    co_return refusal(p.get().result_int(), *body).withContext("node " + name_);
  }
  landing.f.reset();  // the writer's from here
  std::unique_ptr<ops::VolumeWriter> w =
      std::make_unique<RemoteWriter>(*this, std::move(f), std::move(buf), timeout);
  co_return w;
}

}  // namespace vessel::cluster
