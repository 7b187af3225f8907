#include "http/relay.h"

#include <algorithm>
#include <boost/beast/core/string.hpp>

namespace vessel::http {

namespace {

// Body bytes are relayed from the input as they were framed, not from the
// parser's copy: this scratch only gives the parser somewhere to put them.
constexpr size_t kScratch = 16 * 1024;

// Whether the comma-separated `list` holds `token` (case-insensitive).
bool hasToken(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    auto comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (boost::beast::iequals(item, token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

Error protocol(const std::string& what) {
  return Error(Code::kProtocol, "response relay: " + what);
}

}  // namespace

bool wellFormedUpgrade(const request_header<>& h) {
  if (h.version() != 11 || h.method() == verb::connect) return false;
  std::string_view upgrade = h[field::upgrade];
  if (upgrade.empty()) return false;
  for (const auto& f : h)
    if (f.name() == field::connection && hasToken(f.value(), "upgrade")) return true;
  return false;
}

ResponseKind classifyResponse(unsigned status, bool upgrade_asked) {
  if (status == 101) return upgrade_asked ? ResponseKind::kSwitch : ResponseKind::kBadSwitch;
  if (status >= 100 && status < 200) return ResponseKind::kInterim;
  return ResponseKind::kFinal;
}

Result<ResponseRelay::State> ResponseRelay::feed(std::string_view in, std::string& out) {
  if (opaque_) {
    out.append(in);
    return State::kOpaque;
  }
  pending_.append(in);
  // Each step consumes a head, a piece of body, or ends a message; the
  // loop ends when a step can make no progress without more bytes.
  for (;;) {
    bool progressed = false;
    VESSEL_TRY(step(out, progressed));
    if (opaque_) {
      out.append(pending_);
      pending_.clear();
      return State::kOpaque;
    }
    if (!progressed) return State::kFramed;
  }
}

Status ResponseRelay::step(std::string& out, bool& progressed) {
  if (pending_.empty()) return okStatus();
  if (!parser_) {
    if (asked_.empty()) return protocol("the server sent a response nobody asked for");
    parser_.emplace();
    parser_->header_limit(max_head_);
    parser_->body_limit(boost::none);  // streamed, never held
    parser_->eager(true);
    if (asked_.front().head) parser_->skip(true);
  }
  if (!parser_->is_header_done()) {
    // Checked here as well as by Beast, which judges a start line only once
    // it holds the whole head: a refusal must not depend on how the bytes
    // were split into reads (tests/fuzz/response_relay).
    static constexpr std::string_view kStart = "HTTP/1.";
    size_t n = std::min(pending_.size(), kStart.size());
    if (std::string_view(pending_).substr(0, n) != kStart.substr(0, n))
      return protocol("bad response from the server: bad version");
    // And Beast is handed a head only whole, for the same reason: what it
    // checks of a partial head depends on where the reads were cut.
    if (pending_.find("\r\n\r\n") == std::string::npos) {
      if (pending_.size() > max_head_) return protocol("the server's response head is too large");
      return okStatus();  // no progress until the head is whole
    }
  }
  char scratch[kScratch];
  parser_->get().body().data = scratch;
  parser_->get().body().size = sizeof scratch;
  const bool had_head = parser_->is_header_done();
  const size_t out_before = out.size();
  boost::system::error_code ec;
  size_t used = parser_->put(boost::asio::buffer(pending_.data(), pending_.size()), ec);
  if (ec == error::need_buffer || ec == error::need_more) ec = {};
  if (ec) return protocol("bad response from the server: " + ec.message());
  out.append(pending_, 0, used);
  pending_.erase(0, used);
  progressed = used > 0;
  if (!had_head && parser_->is_header_done()) {
    const Asked asked = asked_.front();
    switch (classifyResponse(parser_->get().result_int(), asked.upgrade)) {
      case ResponseKind::kBadSwitch:
        // The client must not see a switch its request did not ask for.
        out.resize(out_before);
        return protocol("101 Switching Protocols to a request that asked for no upgrade");
      case ResponseKind::kSwitch:
        asked_.pop_front();
        ++answered_;
        parser_.reset();
        opaque_ = true;
        return okStatus();
      case ResponseKind::kInterim:
      case ResponseKind::kFinal: break;
    }
  }
  if (parser_->is_done()) {
    unsigned status = parser_->get().result_int();
    parser_.reset();
    progressed = true;
    if (classifyResponse(status, false) == ResponseKind::kInterim) {
      interim_ = true;
      return okStatus();
    }
    interim_ = false;
    asked_.pop_front();
    ++answered_;
  }
  return okStatus();
}

Status ResponseRelay::end() {
  if (opaque_) return okStatus();
  if (!parser_) {
    if (!pending_.empty()) return protocol("the server closed in the middle of a response head");
    // After a 1xx the client waits for the final response: it was cut.
    if (interim_) return protocol("the server closed after an interim response");
    return okStatus();
  }
  boost::system::error_code ec;
  parser_->put_eof(ec);
  if (ec || !parser_->is_done())
    return protocol("the server closed in the middle of a response" +
                    (ec ? ": " + ec.message() : std::string()));
  parser_.reset();
  asked_.pop_front();
  ++answered_;
  return okStatus();
}

}  // namespace vessel::http
