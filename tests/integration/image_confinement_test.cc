// A taken-over QEMU rewrites its sandbox's overlay (issue 24, item 3): a
// real vesseld (jailed, TCG) runs a sandbox; a probe that takes on
// everything the sandbox's QEMU has (its uid, mount namespace, cgroups, no
// capabilities, no_new_privs) rewrites the overlay's qcow2 header to name
//   (a) a host file outside the cache dir, planted by the test;
//   (b) a file under the cache dir that is not this sandbox's template's
//       image (another tenant's template disk, as far as the old rule knew);
//   (c) a `json:{...}` pseudo-protocol name for that host file;
//   (d) an external data file (the host file), backing left as it was.
// Then a fork into a template, a fork and a pause and resume are each
// refused with a clear error, and no byte of the named file reaches a
// template, a sandbox's disk or state.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "base/child_process.h"
#include "base/fd.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string str(const boost::json::value& v, const char* key) {
  if (!v.is_object() || !v.as_object().contains(key) || !v.at(key).is_string()) return "";
  return std::string(v.at(key).as_string());
}

void put32(std::string& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>(v >> (24 - 8 * i));
}
void put64(std::string& b, size_t at, uint64_t v) {
  put32(b, at, static_cast<uint32_t>(v >> 32));
  put32(b, at + 4, static_cast<uint32_t>(v));
}
uint32_t get32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(b[at + i]);
  return v;
}
uint64_t get64(const std::string& b, size_t at) {
  return (uint64_t{get32(b, at)} << 32) | get32(b, at + 4);
}

std::string readPrefix(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string b(n, '\0');
  in.read(b.data(), static_cast<std::streamsize>(n));
  b.resize(static_cast<size_t>(in.gcount()));
  return b;
}

// The overlay's first 4 KiB as a rewriting QEMU would leave them: the
// real header's fixed fields, a backing format extension "raw", a data
// file extension if asked, the end marker, and the backing name at 4096
// (all inside the first cluster).
std::string craftHeader(const std::string& real, const std::string& backing,
                        const std::string& data_file) {
  const uint32_t header_len = get32(real, 100);
  std::string b = real.substr(0, header_len);
  auto ext = [&](uint32_t type, const std::string& data) {
    std::string e(8, '\0');
    put32(e, 0, type);
    put32(e, 4, static_cast<uint32_t>(data.size()));
    e += data;
    e.resize((e.size() + 7) & ~size_t{7}, '\0');
    b += e;
  };
  ext(0xe2792aca, "raw");
  if (!data_file.empty()) {
    put64(b, 72, get64(b, 72) | 4);  // incompatible: external data file
    put64(b, 88, get64(b, 88) | 2);  // autoclear: it is raw (read 1:1)
    ext(0x44415441, data_file);
  }
  b += std::string(8, '\0');  // end of extensions
  b.resize(4096, '\0');
  put64(b, 8, 4096);
  put32(b, 16, static_cast<uint32_t>(backing.size()));
  b += backing;
  return b;
}

// One QEMU as the host sees it: pid, uid, disk, cgroups.
struct Qemu {
  pid_t pid = 0;
  uint32_t uid = 0;
  std::string disk;
  std::vector<std::string> procs;  // its cgroups' cgroup.procs
};

Qemu inspect(pid_t pid) {
  Qemu q;
  q.pid = pid;
  std::string cmd = processCmdline(pid).value_or("");
  auto a = cmd.find("file=");
  if (a != std::string::npos) q.disk = cmd.substr(a + 5, cmd.find(',', a) - a - 5);
  auto st = readFile("/proc/" + std::to_string(pid) + "/status", 1 << 16);
  if (st.ok()) {
    auto at = st->find("\nUid:\t");
    if (at != std::string::npos) q.uid = std::stoul(st->substr(at + 6));
  }
  auto cg = readFile("/proc/" + std::to_string(pid) + "/cgroup", 1 << 16);
  bool v2 = fs::exists("/sys/fs/cgroup/cgroup.controllers");
  std::istringstream lines(cg.value_or(""));
  for (std::string line; std::getline(lines, line);) {
    auto c1 = line.find(':'), c2 = line.find(':', c1 + 1);
    std::string ctrl = line.substr(c1 + 1, c2 - c1 - 1), path = line.substr(c2 + 1);
    if (path.find("/vessel/") != 0) continue;
    std::string base = ctrl.empty() ? (v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified")
                                    : "/sys/fs/cgroup/" + ctrl;
    q.procs.push_back(base + path + "/cgroup.procs");
  }
  return q;
}

// Writes `bytes` at offset 0 of the QEMU's disk, from inside its jail as
// its uid: what a guest that took its QEMU over can do. 0 or an errno.
int writeAsQemu(const Qemu& q, const std::string& bytes) {
  auto mnt = Fd::open("/proc/" + std::to_string(q.pid) + "/ns/mnt", O_RDONLY);
  if (!mnt.ok()) return -1;
  pid_t child = ::fork();
  if (child == 0) {
    // The child of a multithreaded test: system calls only.
    std::string me = std::to_string(::getpid());
    for (const auto& p : q.procs) {
      int fd = ::open(p.c_str(), O_WRONLY);
      if (fd < 0 || ::write(fd, me.data(), me.size()) < 0) ::_exit(10);
      ::close(fd);
    }
    if (::setns(mnt->get(), CLONE_NEWNS) != 0 || ::chdir("/") != 0) ::_exit(11);
    if (::syscall(SYS_setgroups, 0, nullptr) != 0 ||
        ::syscall(SYS_setresgid, q.uid, q.uid, q.uid) != 0 ||
        ::syscall(SYS_setresuid, q.uid, q.uid, q.uid) != 0 ||
        ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
      ::_exit(12);
    int fd = ::open(q.disk.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) ::_exit(13);
    if (::pwrite(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size()) ||
        ::fsync(fd) != 0)
      ::_exit(14);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

// Whether any regular file under `root` (but `except`) modified since
// `since` holds `needle`.
std::string fileHolding(const std::string& root, const std::string& needle,
                        fs::file_time_type since, const std::string& except) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::end(it); it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->path() == except) continue;
    if (it->last_write_time(ec) < since) continue;
    std::ifstream in(it->path(), std::ios::binary);
    std::string buf(1 << 20, '\0'), carry;
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      std::string chunk = carry + buf.substr(0, static_cast<size_t>(in.gcount()));
      if (chunk.find(needle) != std::string::npos) return it->path().string();
      carry = chunk.size() > needle.size() ? chunk.substr(chunk.size() - needle.size()) : chunk;
    }
  }
  return "";
}

class ImageConfinementTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    // No warm pool: the sandbox's QEMU is the only one.
    d_ = new testing::Vesseld(VESSELD_PATH, std::vector<std::string>{"--warm-pool", ""});
    if (!d_->start()) ADD_FAILURE() << "vesseld did not come up; log:\n" << d_->log();
  }
  static void TearDownTestSuite() { testing::endSuite(d_); }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the jail needs root";
    ASSERT_TRUE(d_ && d_->running());
  }

  // The host file a taken-over QEMU wants: 8 MiB of a marker, so whatever
  // cluster of the disk the guest never wrote would read it.
  std::string plant(const std::string& path) {
    marker_ = "VESSEL-PLANTED-SECRET-" + std::to_string(::getpid());
    std::ofstream out(path, std::ios::binary);
    std::string line = marker_ + "\n";
    for (size_t n = 0; n < (8u << 20); n += line.size()) out << line;
    out.close();
    ::chmod(path.c_str(), 0600);
    planted_ = path;
    return path;
  }
  std::string opError(const std::string& op) {
    auto o = d_->call("GET", "/v1/operations/" + op).js();
    if (!o.is_object() || !o.as_object().contains("error")) return "";
    return str(o.at("error"), "message");
  }
  // Starts the operation `target` names and follows it: its final state,
  // and its error message.
  std::pair<std::string, std::string> run(const std::string& target, const std::string& body) {
    auto r = d_->call("POST", target, body);
    if (r.status != 202) return {"http " + std::to_string(r.status), r.body};
    std::string op = str(r.js().at("operation"), "id");
    std::string end = d_->finish(op);
    return {end, opError(op)};
  }

  // The whole attack for one rewritten header: each path that would open
  // the overlay again is refused, and the planted bytes reach nothing.
  void attack(const std::string& name,
              const std::function<std::string(const std::string&)>& craft) {
    auto since = fs::file_time_type::clock::now();
    std::string id = d_->createSandbox();
    ASSERT_FALSE(id.empty()) << d_->log();
    auto pids = d_->qemuPids();
    ASSERT_EQ(pids.size(), 1u);
    Qemu q = inspect(pids[0]);
    ASSERT_FALSE(q.disk.empty());
    ASSERT_GE(q.uid, 200000u) << "a jailed QEMU";
    std::string real = readPrefix(q.disk, 65536);
    ASSERT_EQ(real.substr(0, 4), "QFI\xfb");
    std::string evil = craft(real);
    ASSERT_EQ(writeAsQemu(q, evil), 0) << "the QEMU's uid can write its own overlay";

    // (1) A fork into a template: root used to flatten it. (QEMU itself
    // re-reads the header when it resumes after saving its state; a data
    // file it cannot open in its jail fails that resume, which fails the
    // fork too: any outcome but "done" is a refusal.)
    std::string tname = "leak-" + name;
    auto [t_end, t_err] = run("/v1/sandboxes/" + id + ":fork", R"({"template":")" + tname + "\"}");
    EXPECT_NE(t_end, "done") << name << ": fork into a template was not refused\n" << d_->log();
    if (t_end == "failed") EXPECT_THAT(t_err, HasSubstr("qcow2")) << name;
    EXPECT_THAT(d_->call("GET", "/v1/templates").body, ::testing::Not(HasSubstr(tname)));
    // (2) A fork: the copy would start on the rewritten header.
    auto [f_end, f_err] = run("/v1/sandboxes/" + id + ":fork", "{}");
    EXPECT_NE(f_end, "done") << name << ": fork was not refused\n" << d_->log();
    if (f_end == "failed") EXPECT_THAT(f_err, HasSubstr("qcow2")) << name;
    // (3) Pause (nothing opens the disk) and resume (a new QEMU would).
    auto [p_end, p_err] = run("/v1/sandboxes/" + id + ":pause", "");
    if (p_end == "done") {
      EXPECT_EQ(readPrefix(q.disk, evil.size()), evil) << "the rewritten header stayed on disk";
      auto [r_end, r_err] = run("/v1/sandboxes/" + id + ":resume", "");
      EXPECT_EQ(r_end, "failed") << name << ": resume was not refused\n" << d_->log();
      EXPECT_THAT(r_err, HasSubstr("qcow2")) << name;
      EXPECT_TRUE(d_->qemuPids().empty()) << "no QEMU runs on the rewritten disk";
    } else {
      std::printf("%s: the sandbox could not pause after the refusals (%s): %s\n", name.c_str(),
                  p_end.c_str(), p_err.c_str());
    }

    // Nothing of the named file went anywhere vesseld keeps.
    EXPECT_EQ(fileHolding(d_->cacheDir(), marker_, since, planted_), "") << name;
    EXPECT_EQ(fileHolding(d_->stateDir(), marker_, since, planted_), "") << name;
    d_->deleteSandbox(id);
    fs::remove(planted_);
  }

  static testing::Vesseld* d_;
  std::string marker_, planted_;
};

testing::Vesseld* ImageConfinementTest::d_ = nullptr;

TEST_F(ImageConfinementTest, HostFileAsBackingIsRefused) {
  std::string host = plant(d_->root() + "/host-secret");
  attack("host", [&](const std::string& real) { return craftHeader(real, host, ""); });
}

TEST_F(ImageConfinementTest, AnotherTemplatesDiskAsBackingIsRefused) {
  // Under the cache dir, where every tenant's template disks are (the old
  // rule let any file there through).
  std::string other = plant(d_->cacheDir() + "/other-tenant-rootfs.ext4");
  attack("template", [&](const std::string& real) { return craftHeader(real, other, ""); });
}

TEST_F(ImageConfinementTest, JsonPseudoProtocolBackingIsRefused) {
  std::string host = plant(d_->root() + "/host-secret");
  std::string json = R"(json:{"driver":"raw","file":{"driver":"file","filename":")" + host + "\"}}";
  attack("json", [&](const std::string& real) { return craftHeader(real, json, ""); });
}

TEST_F(ImageConfinementTest, ExternalDataFileIsRefused) {
  std::string host = plant(d_->root() + "/host-secret");
  attack("datafile", [&](const std::string& real) {
    // The backing name as it was: only the data file is new.
    uint64_t off = get64(real, 8);
    uint32_t len = get32(real, 16);
    return craftHeader(real, real.substr(off, len), host);
  });
}

}  // namespace
}  // namespace vessel
