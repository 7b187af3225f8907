#pragma once
// TLS for every listener of the one HTTP server (http/server.h). A
// TlsTerminator takes the connections a listener hands it, runs their
// handshakes and their encryption on TlsThreads (never the listener's io
// thread: a handshake costs a signature, a leaf may be minted in it, and a
// peer may stall in the middle of one), and relays the decrypted bytes to
// the listener's own plain side over a socket bound before it connects, so
// the plain side knows the connection for the relay it is (and the peer it
// stands for) and routing, limits and metrics exist once.
//
// Two modes: kOnly, where every connection but the relay's is TLS (a
// listener with --tls-cert or --tls-self-signed), and kDetect, where a
// connection whose first byte starts a TLS record is TLS and any other one
// plain HTTP (the envd listener without operator TLS: E2B's SDKs reach
// envd at http:// and a sandbox's ports at https:// on one port).
//
// Which certificate a handshake presents is the chooser's, asked with the
// client's server name once the ClientHello is read; handshakes start on
// one settings-only context (TLS 1.2 and up, AEAD ciphers, no
// renegotiation, no compression), so a chooser's context only supplies the
// certificate, and a context the chooser stops returning (a reload) lives
// on for the connections that use it.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"

namespace vessel::http {

class HttpServer;

// What every server context of a listener gets: TLS 1.2 and up, ECDHE with
// AEAD ciphers, no renegotiation or compression, and http/1.1 by ALPN.
void hardenServerContext(boost::asio::ssl::context& ctx);

// A server context for the PEM certificate (chain) and private key in
// these files. Unreadable files, no certificate, or a key that is not the
// certificate's is an error that names the file.
Result<std::shared_ptr<boost::asio::ssl::context>> serverContextFromFiles(const std::string& cert,
                                                                          const std::string& key);

// The certificate a handshake presents, for the client's server name
// ("" when it sent none). Runs on a TLS thread, at once for several
// connections: it must be thread-safe. nullptr fails the handshake.
using CertificateChooser =
    std::function<std::shared_ptr<boost::asio::ssl::context>(const std::string& server_name)>;

// The threads TLS connections run on, shared by every listener's
// terminator: N threads on one io_context, each connection on a strand.
class TlsThreads {
 public:
  explicit TlsThreads(size_t threads = 2);
  ~TlsThreads();  // stops and joins; connections still open are dropped
  TlsThreads(const TlsThreads&) = delete;
  TlsThreads& operator=(const TlsThreads&) = delete;
  boost::asio::io_context& io() { return io_; }

 private:
  boost::asio::io_context io_;
  // Keeps io_ running while no connection is open.
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
};

enum class TlsMode { kOnly, kDetect };

struct TlsOptions {
  // A handshake not done by then is dropped (a peer that stalls in one).
  std::chrono::milliseconds handshake_timeout{10000};
  // Handshakes in flight at once on this listener, and from one peer
  // address; more are closed at once, nothing read.
  size_t max_handshakes = 1024;
  size_t max_handshakes_per_peer = 64;
};

class TlsTerminator {
 public:
  static Result<std::unique_ptr<TlsTerminator>> create(TlsThreads& threads,
                                                       CertificateChooser choose,
                                                       TlsOptions o = {});
  ~TlsTerminator();

  // TLS on `server`'s port (before server.listen()): its connections come
  // here (kOnly: all but the relay's; kDetect: those that start with a TLS
  // record) and the relay's connections count against their peers.
  void install(HttpServer& server, TlsMode mode);
  // Handshakes in flight now (tests).
  size_t handshakes() const;

  struct Shared;  // tls.cc: the state connections on the TLS threads share

 private:
  explicit TlsTerminator(TlsThreads& threads) : threads_(threads) {}
  void serve(boost::asio::ip::tcp::socket sock, boost::asio::ip::tcp::endpoint plain);

  TlsThreads& threads_;
  std::shared_ptr<Shared> s_;
};

}  // namespace vessel::http
