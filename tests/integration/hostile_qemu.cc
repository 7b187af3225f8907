// A taken-over QEMU, as far as vesseld sees one: it is started with QEMU's
// command line, serves QMP and the console and agent sockets at the paths
// it names, answers every command, and when asked to migrate it streams
// bytes into the migration socket far past any guest's RAM (256 MiB, for
// the test's 16 MiB guest; a real QEMU sends the guest's RAM and stops) and
// reports the migration as still active. For the test that vesseld's state files are
// capped (boot_test). Plain system calls: it is a test double, not a VMM.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int listenAt(const std::string& path) {
  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (s < 0 || path.size() >= sizeof a.sun_path) return -1;
  std::memcpy(a.sun_path, path.data(), path.size());
  ::unlink(path.c_str());
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(s, 4) != 0) return -1;
  return s;
}

// "key=VALUE," out of a QEMU option string.
std::string option(const std::string& opts, const std::string& key) {
  auto at = opts.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  return opts.substr(at, opts.find(',', at) - at);
}

// The string value after `"key":"` in a JSON line (no escapes in ours).
std::string jsonString(const std::string& line, const std::string& key) {
  auto at = line.find("\"" + key + "\":\"");
  if (at == std::string::npos) return "";
  at += key.size() + 4;
  return line.substr(at, line.find('"', at) - at);
}

void send(int fd, const std::string& s) { (void)!::write(fd, s.data(), s.size()); }

// Writes 256 MiB to the migration socket, or until the reader goes.
void flood(std::string path) {
  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.data(), std::min(path.size(), sizeof a.sun_path - 1));
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
  std::vector<char> chunk(1 << 20, 'x');
  for (int i = 0; i < 256 && ::write(s, chunk.data(), chunk.size()) > 0; ++i) {
  }
  ::close(s);
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  std::string qmp_path;
  std::vector<int> others;
  for (int i = 1; i + 1 < argc; ++i) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "-qmp" && v.rfind("unix:", 0) == 0) qmp_path = v.substr(5, v.find(',') - 5);
    if (a == "-chardev") others.push_back(listenAt(option(v, "path=")));
  }
  int qmp = listenAt(qmp_path);
  if (qmp < 0) return 1;
  int c = ::accept(qmp, nullptr, nullptr);
  send(c,
       "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 0, \"minor\": 2, \"major\": 7}}, "
       "\"capabilities\": []}}\n");
  std::string buf;
  char tmp[4096];
  for (;;) {
    ssize_t n = ::read(c, tmp, sizeof tmp);
    if (n <= 0) return 0;
    buf.append(tmp, static_cast<size_t>(n));
    for (size_t nl; (nl = buf.find('\n')) != std::string::npos; buf.erase(0, nl + 1)) {
      std::string line = buf.substr(0, nl);
      std::string cmd = jsonString(line, "execute");
      auto id_at = line.find("\"id\":");
      std::string id = id_at == std::string::npos ? "0" : line.substr(id_at + 5);
      id = id.substr(0, id.find_first_not_of("0123456789"));
      std::string ret = "{}";
      if (cmd == "migrate") {
        std::string uri = jsonString(line, "uri");
        if (uri.rfind("unix:", 0) == 0) std::thread(flood, uri.substr(5)).detach();
      } else if (cmd == "query-migrate") {
        ret = "{\"status\": \"active\"}";
      }
      send(c, "{\"return\": " + ret + ", \"id\": " + id + "}\n");
      if (cmd == "quit") return 0;
    }
  }
}
