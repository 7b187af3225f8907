#include "gateway/tls/client_hello.h"

#include <set>

#include "base/byte_reader.h"

namespace vessel::gateway::tls {

namespace {
constexpr uint8_t kContentHandshake = 22;
constexpr uint8_t kHandshakeClientHello = 1;
constexpr size_t kRecordHeader = 5;
// RFC 8446 5.1: plaintext records carry at most 2^14 bytes.
constexpr size_t kMaxRecordPayload = 16384;
constexpr uint16_t kExtServerName = 0;
constexpr uint16_t kExtAlpn = 16;
constexpr uint16_t kExtEarlyData = 42;
constexpr uint16_t kExtEch = 0xfe0d;
}  // namespace

ClientHelloParser::State ClientHelloParser::fail(std::string why) {
  state_ = State::kError;
  error_ = "client hello: " + std::move(why);
  pending_.clear();
  handshake_.clear();
  return state_;
}

ClientHelloParser::State ClientHelloParser::feed(std::string_view bytes) {
  if (state_ != State::kNeedMore) return state_;
  if (pending_.size() + bytes.size() > kMaxHelloBytes + kMaxRecordPayload) {
    return fail("client hello over size cap");
  }
  pending_.append(bytes);
  // Consume complete records until the hello is whole. Records after it (0-RTT
  // early data) are not ours to parse: the proxy forwards the raw stream.
  while (pending_.size() >= kRecordHeader) {
    ByteReader r(pending_);
    uint8_t type = 0;
    uint16_t version = 0, len = 0;
    r.readU8(&type);
    r.readU16be(&version);
    r.readU16be(&len);
    if (type != kContentHandshake) return fail("record type is not handshake");
    if ((version >> 8) != 3) return fail("record version is not TLS");
    if (len == 0) return fail("empty handshake record");
    if (len > kMaxRecordPayload) return fail("record longer than 2^14");
    if (pending_.size() < kRecordHeader + len) break;
    handshake_.append(pending_, kRecordHeader, len);
    pending_.erase(0, kRecordHeader + len);
    if (checkHandshake() != State::kNeedMore) return state_;
  }
  // Before a full record arrives, check what we can of its header so garbage
  // fails on the first byte instead of after a timeout.
  if (!pending_.empty() && static_cast<uint8_t>(pending_[0]) != kContentHandshake) {
    return fail("record type is not handshake");
  }
  if (pending_.size() >= 2 && static_cast<uint8_t>(pending_[1]) != 3) {
    return fail("record version is not TLS");
  }
  return state_;
}

ClientHelloParser::State ClientHelloParser::checkHandshake() {
  if (handshake_.size() < 4) return state_;
  ByteReader r(handshake_);
  uint8_t msg_type = 0;
  uint32_t msg_len = 0;
  r.readU8(&msg_type);
  r.readU24be(&msg_len);
  if (msg_type != kHandshakeClientHello) return fail("first handshake message is not hello");
  if (msg_len > kMaxHelloBytes) return fail("client hello over size cap");
  if (handshake_.size() < 4 + msg_len) return state_;
  // A client sends nothing else in the handshake before the server answers.
  if (handshake_.size() != 4 + msg_len) return fail("handshake data after client hello");
  return parseBody();
}

// Long because it reads the ClientHello's fields in their wire order
// (RFC 8446, 4.1.2), each length bounded, in one pass over one reader.
ClientHelloParser::State ClientHelloParser::parseBody() {
  ByteReader r(std::string_view(handshake_).substr(4));
  std::string_view random, session_id, suites, compression;
  uint8_t sid_len = 0, comp_len = 0;
  uint16_t suites_len = 0;
  if (!r.readU16be(&hello_.legacy_version) || !r.readBytes(32, &random)) {
    return fail("truncated header");
  }
  if (!r.readU8(&sid_len) || sid_len > 32 || !r.readBytes(sid_len, &session_id)) {
    return fail("bad session id");
  }
  if (!r.readU16be(&suites_len) || suites_len < 2 || suites_len % 2 != 0 ||
      !r.readBytes(suites_len, &suites)) {
    return fail("bad cipher suites");
  }
  if (!r.readU8(&comp_len) || comp_len < 1 || !r.readBytes(comp_len, &compression)) {
    return fail("bad compression methods");
  }
  if (r.empty()) {
    state_ = State::kDone;  // no extensions at all: no SNI
    return state_;
  }
  uint16_t ext_total = 0;
  std::string_view ext_block;
  if (!r.readU16be(&ext_total) || !r.readBytes(ext_total, &ext_block) || !r.empty()) {
    return fail("bad extensions length");
  }
  ByteReader ext(ext_block);
  std::set<uint16_t> seen;
  while (!ext.empty()) {
    uint16_t type = 0, len = 0;
    std::string_view data;
    if (!ext.readU16be(&type) || !ext.readU16be(&len) || !ext.readBytes(len, &data)) {
      return fail("truncated extension");
    }
    if (!seen.insert(type).second) return fail("duplicate extension");
    if (seen.size() > 512) return fail("too many extensions");
    ByteReader d(data);
    if (type == kExtServerName) {
      hello_.has_server_name_ext = true;
      uint16_t list_len = 0;
      std::string_view list;
      if (!d.readU16be(&list_len) || !d.readBytes(list_len, &list) || !d.empty()) {
        return fail("bad server_name list");
      }
      ByteReader l(list);
      while (!l.empty()) {
        uint8_t name_type = 0;
        uint16_t name_len = 0;
        std::string_view name;
        if (!l.readU8(&name_type) || !l.readU16be(&name_len) || !l.readBytes(name_len, &name)) {
          return fail("bad server_name entry");
        }
        if (name_type != 0) return fail("unknown server_name type");
        if (hello_.server_names.size() >= 8) return fail("too many server names");
        hello_.server_names.emplace_back(name);
      }
    } else if (type == kExtAlpn) {
      uint16_t list_len = 0;
      std::string_view list;
      if (!d.readU16be(&list_len) || !d.readBytes(list_len, &list) || !d.empty()) {
        return fail("bad alpn list");
      }
      ByteReader l(list);
      while (!l.empty()) {
        uint8_t n = 0;
        std::string_view proto;
        if (!l.readU8(&n) || n == 0 || !l.readBytes(n, &proto)) return fail("bad alpn entry");
        if (hello_.alpn.size() < 16) hello_.alpn.emplace_back(proto);
      }
    } else if (type == kExtEarlyData) {
      hello_.has_early_data = true;
    } else if (type == kExtEch || type == 0xffce || type == 0xff02 || type == 0xfd00 ||
               (type >= 0xfe08 && type <= 0xfe0c)) {
      // ECH (0xfe0d) and its drafts: ESNI (0xffce), draft-07 (0xff02),
      // drafts 08-12 (0xfe08-0xfe0c), ech_outer_extensions (0xfd00). The
      // name inside is hidden from the gateway either way.
      hello_.has_ech = true;
    }
  }
  state_ = State::kDone;
  return state_;
}

}  // namespace vessel::gateway::tls
