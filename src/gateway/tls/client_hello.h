#pragma once
// Incremental, bounded TLS ClientHello parser. The gateway feeds it the
// guest's first bytes as they arrive; it reassembles the handshake message
// across TLS records and TCP segments, refuses anything that is not a
// well-formed ClientHello, and stops at kMaxHelloBytes, so a guest cannot
// make the gateway buffer without limit or fall back to a destination-IP
// decision (the inetaf/tcpproxy#40 failure).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vessel::gateway::tls {

// Handshake message cap. Post-quantum key shares push real hellos past 4 KiB
// and padding can take them past one 16 KiB record; 64 KiB covers both.
inline constexpr size_t kMaxHelloBytes = 64 * 1024;

struct ClientHello {
  uint16_t legacy_version = 0;
  // Raw host_name entries of the server_name extension (not yet normalized).
  std::vector<std::string> server_names;
  bool has_server_name_ext = false;
  bool has_ech = false;         // encrypted_client_hello (0xfe0d)
  bool has_early_data = false;  // 0-RTT
  std::vector<std::string> alpn;
};

class ClientHelloParser {
 public:
  enum class State { kNeedMore, kDone, kError };

  // Appends bytes from the stream. Returns kDone once the whole ClientHello
  // has arrived (later bytes are ignored), kError on anything malformed or
  // over the cap (error() says what).
  State feed(std::string_view bytes);

  State state() const { return state_; }
  const ClientHello& hello() const { return hello_; }
  const std::string& error() const { return error_; }

  // True if `first` can only be the start of a TLS handshake record, so the
  // caller can choose between this parser and the HTTP one on one byte.
  static bool looksLikeTls(uint8_t first) { return first == 0x16; }

 private:
  State fail(std::string why);
  State checkHandshake();
  State parseBody();

  State state_ = State::kNeedMore;
  std::string pending_;    // bytes of an incomplete record
  std::string handshake_;  // reassembled handshake bytes across records
  ClientHello hello_;
  std::string error_;
};

}  // namespace vessel::gateway::tls
