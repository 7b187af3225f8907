#include "vesseld_harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <fstream>
#include <thread>

#include "base/fd.h"

namespace vessel::testing {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;

json::value HttpReply::js() const {
  boost::system::error_code ec;
  auto v = json::parse(body, ec);
  return ec ? json::value() : v;
}

std::string str(const json::value& v, const char* k) {
  if (!v.is_object() || !v.as_object().contains(k) || !v.at(k).is_string()) return "<missing>";
  return std::string(v.at(k).as_string());
}

std::vector<SseEvent> parseSse(const std::string& body) {
  std::vector<SseEvent> out;
  size_t pos = 0;
  for (;;) {
    auto end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string block = body.substr(pos, end - pos);
    pos = end + 2;
    SseEvent e;
    bool any = false;
    size_t lp = 0;
    while (lp < block.size()) {
      auto nl = block.find('\n', lp);
      std::string line = block.substr(lp, nl == std::string::npos ? std::string::npos : nl - lp);
      lp = nl == std::string::npos ? block.size() : nl + 1;
      if (line.rfind("id: ", 0) == 0) e.id = std::stoll(line.substr(4)), any = true;
      if (line.rfind("event: ", 0) == 0) e.type = line.substr(7);
      if (line.rfind("data: ", 0) == 0) {
        boost::system::error_code ec;
        e.data = json::parse(line.substr(6), ec);
      }
    }
    if (any) out.push_back(std::move(e));
  }
  return out;
}

Vesseld::Vesseld(VesseldOptions o) : opts_(std::move(o)) {
  asio::io_context io;
  asio::ip::tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
  port_ = a.local_endpoint().port();
}

Vesseld::~Vesseld() {
  if (proc_.running()) stop();
}

bool Vesseld::start() {
  auto out = Fd::open(opts_.root + "/vesseld.log", O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (!out.ok()) return false;
  SpawnOptions so;
  so.argv = {opts_.binary,
             "--state-dir",
             stateDir(),
             "--cache-dir",
             opts_.root + "/cache",
             "--listen",
             "127.0.0.1:" + std::to_string(port_),
             "--accel",
             "tcg",
             "--kernel",
             opts_.kernel,
             "--minimal-image",
             opts_.minimal_image};
  for (auto& a : opts_.extra_args) so.argv.push_back(a);
  so.fds = {{out->get(), 1}, {out->get(), 2}};
  so.die_with_parent = true;
  auto p = ChildProcess::spawn(so);
  if (!p.ok()) return false;
  proc_ = std::move(*p);
  for (int i = 0; i < 3000; ++i) {
    if (call("GET", "/healthz", "", "").status == 200) {
      if (key_.empty()) {
        std::ifstream kf(stateDir() + "/dev-api-key");
        std::getline(kf, key_);
      }
      return true;
    }
    if (proc_.tryWait()) return false;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

void Vesseld::kill9() {
  (void)proc_.signal(SIGKILL);
  (void)proc_.waitFor(10s);
}

ExitStatus Vesseld::stop() { return proc_.terminate(40s); }

std::string Vesseld::log() const {
  std::ifstream f(opts_.root + "/vesseld.log");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

HttpReply Vesseld::call(const std::string& method, const std::string& target,
                        const std::string& body, const std::string& key,
                        const std::vector<std::string>& headers,
                        const std::function<bool(const std::string&)>& enough) const {
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  boost::system::error_code ec;
  s.connect({asio::ip::make_address("127.0.0.1"), port_}, ec);
  if (ec) return {};
  timeval tv{120, 0};
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  std::string k = key == "-" ? key_ : key;
  if (!k.empty()) req += "Authorization: Bearer " + k + "\r\n";
  for (auto& h : headers) req += h + "\r\n";
  if (!body.empty() || method == "POST")
    req +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  asio::write(s, asio::buffer(req), ec);
  std::string all;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(s.native_handle(), buf, sizeof buf);
    if (n <= 0) break;
    all.append(buf, static_cast<size_t>(n));
    auto hdr = all.find("\r\n\r\n");
    if (enough && hdr != std::string::npos && enough(all.substr(hdr + 4))) break;
  }
  HttpReply r;
  auto hdr = all.find("\r\n\r\n");
  if (all.size() < 12 || hdr == std::string::npos) return r;
  r.status = std::stoi(all.substr(9, 3));
  r.head = all.substr(0, hdr);
  r.body = all.substr(hdr + 4);
  return r;
}

std::string Vesseld::finish(const std::string& op, const std::string& key) const {
  HttpReply r = call("GET", "/v1/operations/" + op + "/events", "", key);
  if (r.status != 200) return "<status " + std::to_string(r.status) + ">";
  auto ev = parseSse(r.body);
  if (ev.empty()) return "<no events>";
  return str(ev.back().data, "state");
}

std::vector<int> Vesseld::qemuPids() const {
  std::vector<int> pids;
  DIR* d = ::opendir("/proc");
  if (!d) return pids;
  while (dirent* e = ::readdir(d)) {
    int pid = ::atoi(e->d_name);
    if (pid <= 0) continue;
    auto cmd = readFile(std::string("/proc/") + e->d_name + "/cmdline", 1 << 20);
    if (!cmd.ok()) continue;
    if (cmd->find("qemu-system") != std::string::npos &&
        cmd->find(stateDir() + "/") != std::string::npos)
      pids.push_back(pid);
  }
  ::closedir(d);
  return pids;
}

}  // namespace vessel::testing
