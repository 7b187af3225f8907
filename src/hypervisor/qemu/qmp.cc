#include "hypervisor/qemu/qmp.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace vessel::hypervisor::qemu {

Result<QmpMessage> parseQmpMessage(std::string_view line) {
  if (line.size() > kMaxQmpLine) return Error(Code::kProtocol, "qmp: line too long");
  boost::system::error_code ec;
  json::parse_options opt;
  opt.max_depth = 64;
  json::value v = json::parse(line, ec, {}, opt);
  if (ec) return Error(Code::kProtocol, "qmp: invalid JSON: " + ec.message());
  const json::object* o = v.if_object();
  if (!o) return Error(Code::kProtocol, "qmp: message is not an object");
  QmpMessage m;
  if (const json::value* id = o->if_contains("id")) {
    if (const auto* u = id->if_uint64())
      m.id = *u;
    else if (const auto* i = id->if_int64(); i && *i >= 0)
      m.id = static_cast<uint64_t>(*i);
  }
  if (const json::value* g = o->if_contains("QMP")) {
    m.kind = QmpMessage::Kind::kGreeting;
    m.value = *g;
  } else if (const json::value* r = o->if_contains("return")) {
    m.kind = QmpMessage::Kind::kReturn;
    m.value = *r;
  } else if (const json::value* e = o->if_contains("error")) {
    m.kind = QmpMessage::Kind::kError;
    const json::object* eo = e->if_object();
    if (!eo) return Error(Code::kProtocol, "qmp: error is not an object");
    auto str = [&](const char* k) -> std::string {
      const json::value* x = eo->if_contains(k);
      return x && x->is_string() ? std::string(x->get_string()) : std::string();
    };
    m.error_class = str("class");
    m.error_desc = str("desc");
  } else if (const json::value* ev = o->if_contains("event")) {
    if (!ev->is_string()) return Error(Code::kProtocol, "qmp: event name is not a string");
    m.kind = QmpMessage::Kind::kEvent;
    m.event = std::string(ev->get_string());
    if (const json::value* d = o->if_contains("data")) m.value = *d;
  } else {
    return Error(Code::kProtocol, "qmp: message of unknown kind");
  }
  return m;
}

QmpClient::QmpClient(Socket socket) : socket_(std::move(socket)) {}

asio::awaitable<Result<std::shared_ptr<QmpClient>>> QmpClient::handshake(
    Socket socket, Clock::time_point deadline) {
  auto c = std::make_shared<QmpClient>(std::move(socket));
  c->greeting_ = std::make_shared<Pending>(c->socket_.get_executor());
  asio::co_spawn(c->socket_.get_executor(), c->readLoop(), asio::detached);
  auto g = co_await c->await(c->greeting_, deadline, "qmp greeting");
  if (!g.ok()) {
    c->close();
    co_return std::move(g).error();
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  auto caps =
      co_await c->execute("qmp_capabilities", {}, std::max(left, std::chrono::milliseconds(1)));
  if (!caps.ok()) {
    c->close();
    co_return std::move(caps).error();
  }
  co_return c;
}

asio::awaitable<Result<json::value>> QmpClient::execute(std::string command, json::object args,
                                                        std::chrono::milliseconds timeout) {
  if (failed_) co_return failed_->withContext("qmp " + command);
  uint64_t id = next_id_++;
  json::object msg;
  msg["execute"] = command;
  if (!args.empty()) msg["arguments"] = std::move(args);
  msg["id"] = id;
  auto p = std::make_shared<Pending>(socket_.get_executor());
  pending_[id] = p;
  outq_.push_back(json::serialize(msg) + "\n");
  if (!writing_) {
    writing_ = true;
    asio::co_spawn(socket_.get_executor(), writeLoop(), asio::detached);
  }
  auto r = co_await await(p, Clock::now() + timeout, "qmp " + command);
  pending_.erase(id);
  co_return r;
}

asio::awaitable<Result<json::value>> QmpClient::await(std::shared_ptr<Pending> p,
                                                      Clock::time_point deadline,
                                                      const std::string& what) {
  // Single-threaded executor: the result can only be set while we are
  // suspended, so checking before waiting cannot miss a wake-up.
  if (!p->result) {
    p->timer.expires_at(deadline);
    boost::system::error_code ec;
    co_await p->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (p->result) co_return std::move(*p->result);
  if (failed_) co_return failed_->withContext(what);
  co_return Error(Code::kDeadlineExceeded, what + ": no answer from QEMU before the deadline");
}

asio::awaitable<void> QmpClient::writeLoop() {
  auto self = shared_from_this();
  while (!outq_.empty() && !failed_) {
    std::string msg = std::move(outq_.front());
    outq_.pop_front();
    boost::system::error_code ec;
    co_await asio::async_write(socket_, asio::buffer(msg),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      failAll(Error(Code::kUnavailable, "qmp: write failed: " + ec.message()));
      break;
    }
  }
  writing_ = false;
}

asio::awaitable<void> QmpClient::readLoop() {
  auto self = shared_from_this();
  for (;;) {
    boost::system::error_code ec;
    size_t n = co_await asio::async_read_until(socket_, asio::dynamic_buffer(rbuf_, kMaxQmpLine),
                                               '\n', asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      failAll(Error(Code::kUnavailable, ec == asio::error::not_found
                                            ? "qmp: line longer than the limit"
                                            : "qmp: connection closed: " + ec.message()));
      co_return;
    }
    std::string_view line(rbuf_.data(), n - 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    auto msg = parseQmpMessage(line);
    rbuf_.erase(0, n);
    if (!msg.ok()) {
      failAll(msg.error());
      socket_.close(ec);
      co_return;
    }
    dispatch(std::move(*msg));
  }
}

void QmpClient::dispatch(QmpMessage msg) {
  using K = QmpMessage::Kind;
  if (msg.kind == K::kGreeting) {
    if (greeting_ && !greeting_->result) {
      greeting_->result = Result<json::value>(std::move(msg.value));
      greeting_->timer.cancel();
    }
    return;
  }
  if (msg.kind == K::kEvent) {
    if (on_event_) on_event_(msg.event, msg.value);
    return;
  }
  if (!msg.id) return;  // a reply to no command of ours
  auto it = pending_.find(*msg.id);
  if (it == pending_.end()) return;  // its waiter already timed out
  if (msg.kind == K::kReturn)
    it->second->result = Result<json::value>(std::move(msg.value));
  else
    it->second->result = Result<json::value>(Error(
        Code::kFailedPrecondition, "qemu refused: " + msg.error_class + ": " + msg.error_desc));
  it->second->timer.cancel();
}

void QmpClient::failAll(const Error& e) {
  if (!failed_) failed_ = e;
  if (greeting_ && !greeting_->result) {
    greeting_->result = Result<json::value>(e);
    greeting_->timer.cancel();
  }
  for (auto& [id, p] : pending_) {
    if (!p->result) p->result = Result<json::value>(e);
    p->timer.cancel();
  }
}

void QmpClient::close() {
  boost::system::error_code ec;
  socket_.close(ec);
  failAll(Error(Code::kUnavailable, "qmp: closed"));
}

}  // namespace vessel::hypervisor::qemu
