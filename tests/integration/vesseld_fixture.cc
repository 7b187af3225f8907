#include "vesseld_fixture.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <fstream>
#include <thread>

namespace vessel::testing {

namespace asio = boost::asio;
using namespace std::chrono_literals;

Vesseld::Vesseld(std::string vesseld) : binary_(std::move(vesseld)) {
  asio::io_context io;
  asio::ip::tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
  port_ = a.local_endpoint().port();
}

Vesseld::~Vesseld() {
  if (proc_.running()) (void)stop();
}

bool healthy(uint16_t port) {
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  boost::system::error_code ec;
  s.connect({asio::ip::make_address("127.0.0.1"), port}, ec);
  if (ec) return false;
  timeval tv{10, 0};
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string req = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  asio::write(s, asio::buffer(req), ec);
  if (ec) return false;
  char buf[64];
  ssize_t n = ::read(s.native_handle(), buf, sizeof buf);
  return n >= 12 && std::string(buf, 12) == "HTTP/1.1 200";
}

bool Vesseld::start() {
  auto out = Fd::open(dir_.path() + "/vesseld.log", O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (!out.ok()) return false;
  SpawnOptions so;
  so.argv = {binary_,
             "--state-dir",
             stateDir(),
             "--cache-dir",
             cacheDir(),
             "--listen",
             "127.0.0.1:" + std::to_string(port_),
             "--data-listen",
             "127.0.0.1:" + std::to_string(testing::freePort()),
             "--accel",
             "tcg",
             "--kernel",
             kernelPath(),
             "--minimal-image",
             minimalImage()};
  so.fds = {{out->get(), 1}, {out->get(), 2}};
  so.die_with_parent = true;
  auto p = ChildProcess::spawn(so);
  if (!p.ok()) return false;
  proc_ = std::move(*p);
  for (int i = 0; i < 3000; ++i) {
    if (healthy(port_)) return true;
    if (proc_.tryWait()) return false;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

ExitStatus Vesseld::stop(std::chrono::seconds grace) { return proc_.terminate(grace); }

std::string Vesseld::devKey() const {
  std::ifstream f(stateDir() + "/dev-api-key");
  std::string k;
  std::getline(f, k);
  return k;
}

std::string Vesseld::log() const {
  std::ifstream f(dir_.path() + "/vesseld.log");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace vessel::testing
