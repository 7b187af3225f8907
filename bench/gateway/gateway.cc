// bench/gateway: what the egress gateway adds. The same client code runs
// against the same fake-internet servers twice in one run: directly from
// the gateway's upstream namespace, and from a sandbox guest through its slot
// and the gateway. Prints a table; writes bench/results/gateway.json.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>

#include "bench_util.h"
#include "tests/integration/egress/world.h"

namespace vessel::bench {
namespace {

using Clock = std::chrono::steady_clock;
using egress_test::EgressWorld;

bool connectTo(int fd, const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip, &a.sin_addr);
  // SAFETY: sockaddr_in is a sockaddr for connect().
  return ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
}

// One plaintext request on a fresh connection; true on a 200 response.
bool httpGet(int fd, const char* ip) {
  if (!connectTo(fd, ip, 80)) return false;
  const char req[] = "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";
  if (::send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != sizeof req - 1) return false;
  char buf[512];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  if (n <= 12) return false;
  std::string_view status(buf, 12);
  return status == "HTTP/1.0 200" || status == "HTTP/1.1 200";
}

// TCP connect + full TLS handshake with SNI a.test, verified against `ca`.
bool tlsHandshake(int fd, SSL_CTX* ctx, const char* ip) {
  if (!connectTo(fd, ip, 443)) return false;
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, "a.test");
  SSL_set1_host(ssl, "a.test");
  bool ok = SSL_connect(ssl) == 1;
  SSL_free(ssl);
  return ok;
}

struct PathResult {
  Stats http_ms, tls_ms;
  double conns_per_s = 0;
  double upload_mib_s = 0;
};

PathResult measure(const std::function<Result<Fd>()>& sock, SSL_CTX* ctx, int rounds) {
  PathResult r;
  std::vector<double> http, tls;
  for (int i = 0; i < rounds; ++i) {
    auto s = sock();
    if (!s.ok()) continue;
    auto t = Clock::now();
    if (httpGet(s->get(), egress_test::kA)) http.push_back(msSince(t));
  }
  for (int i = 0; i < rounds; ++i) {
    auto s = sock();
    if (!s.ok()) continue;
    auto t = Clock::now();
    if (tlsHandshake(s->get(), ctx, egress_test::kA)) tls.push_back(msSince(t));
  }
  r.http_ms = stats(http);
  r.tls_ms = stats(tls);
  // Connections per second: sequential fresh connections, each an HTTP
  // request answered by the upstream server. (Counting connections whose
  // first byte was merely sent counted the gateway's accept backlog, which
  // it then drained while the upload below was being timed.)
  auto t = Clock::now();
  int done = 0;
  while (msSince(t) < 2000) {
    auto s = sock();
    if (s.ok() && httpGet(s->get(), egress_test::kA)) ++done;
  }
  r.conns_per_s = done / (msSince(t) / 1000);
  // Throughput: 256 MiB uploaded to the hold server on one connection.
  auto s = sock();
  if (s.ok() && connectTo(s->get(), egress_test::kHold, 7000)) {
    std::string chunk(1 << 20, 'z');
    auto t2 = Clock::now();
    size_t sent = 0;
    for (int i = 0; i < 256; ++i) {
      ssize_t n = ::send(s->get(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    ::shutdown(s->get(), SHUT_WR);
    char b;
    (void)::recv(s->get(), &b, 1, 0);  // the upload is through once the hold server closes
    r.upload_mib_s = static_cast<double>(sent) / (1 << 20) / (msSince(t2) / 1000);
  }
  return r;
}

int run() {
  auto w = EgressWorld::create({}, true, /*bulk=*/true);  // measures the relay, not the budgets
  if (!w.ok()) {
    std::fprintf(stderr, "bench gateway: %s\n", w.error().message().c_str());
    return 1;
  }
  auto guest = (*w)->addGuest("bench-full", egress_test::fullMode(1));
  if (!guest.ok()) {
    std::fprintf(stderr, "bench gateway: %s\n", guest.error().message().c_str());
    return 1;
  }
  // Full mode: the hold server is reached by address; a.test flows are
  // still decided by their name (SNI/Host) and dialled to the gateway's answer.
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_load_verify_locations(ctx, (*w)->testCa().c_str(), nullptr);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  const int rounds = 200;
  std::string up = (*w)->upNetnsPath();
  PathResult direct = measure([&] { return (*w)->socketIn(up, SOCK_STREAM); }, ctx, rounds);
  PathResult via = measure([&] { return (*w)->guestSocket(**guest, SOCK_STREAM); }, ctx, rounds);
  SSL_CTX_free(ctx);

  std::printf("%-34s %12s %12s %12s\n", "gateway (same run, same servers)", "direct", "gateway",
              "added");
  auto row = [](const char* what, double a, double b) {
    std::printf("%-34s %12.3f %12.3f %12.3f\n", what, a, b, b - a);
  };
  row("HTTP connect+GET p50 (ms)", direct.http_ms.p50, via.http_ms.p50);
  row("HTTP connect+GET p99 (ms)", direct.http_ms.p99, via.http_ms.p99);
  row("TLS connect+handshake p50 (ms)", direct.tls_ms.p50, via.tls_ms.p50);
  row("TLS connect+handshake p99 (ms)", direct.tls_ms.p99, via.tls_ms.p99);
  row("connections/s (sequential)", direct.conns_per_s, via.conns_per_s);
  row("upload throughput (MiB/s)", direct.upload_mib_s, via.upload_mib_s);
  auto json = [](const PathResult& p) {
    return boost::json::object{{"http_get_ms", toJson(p.http_ms)},
                               {"tls_handshake_ms", toJson(p.tls_ms)},
                               {"connections_per_s", p.conns_per_s},
                               {"upload_mib_per_s", p.upload_mib_s}};
  };
  writeResults("gateway", {{"direct", json(direct)}, {"gateway", json(via)}});
  return 0;
}

}  // namespace
}  // namespace vessel::bench

int main() { return vessel::bench::run(); }
