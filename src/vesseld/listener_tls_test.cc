// vesseld's listener TLS (listener_tls.h) with real files and the real
// client (src/client, as the CLI uses it): a pair from --tls-cert and
// --tls-key re-read on SIGHUP through runUntilStopped (new connections get
// the new pair; a bad one keeps the old), and --tls-self-signed's CA made
// once in the state dir, reused on restart and written for clients.
#include "vesseld/listener_tls.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/signal_set.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/fd.h"
#include "client/client.h"
#include "http/testing/test_pki.h"
#include "vesseld/daemon_internal.h"

namespace vessel::vesseld {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ListenerTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/listener-tls-" + std::to_string(::getpid());
    fs::remove_all(dir_);
    ASSERT_TRUE(http::testing::makeTestPki(dir_ + "/a", "ca-a", "a", "IP:127.0.0.1", &a_));
    ASSERT_TRUE(http::testing::makeTestPki(dir_ + "/b", "ca-b", "b", "IP:127.0.0.1", &b_));
    server_.route(http::verb::get, "/v1/ok",
                  [](const http::Request& r) -> asio::awaitable<http::Response> {
                    co_return http::jsonResponse(r, http::status::ok, "{}");
                  });
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A GET over https:// trusting `ca`.
  Status get(const std::string& ca) {
    client::ClientOptions o;
    o.url = "https://127.0.0.1:" + std::to_string(server_.port());
    o.ca_file = ca;
    o.timeout = std::chrono::seconds(30);
    auto r = client::Client(o).get("/v1/ok");
    if (!r.ok()) return std::move(r).error();
    return okStatus();
  }
  Config config() {
    Config c;
    c.state_dir = dir_ + "/state";
    fs::create_directories(c.state_dir);
    return c;
  }
  static void copy(const std::string& from, const std::string& to) {
    fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  }

  std::string dir_;
  http::testing::TestPki a_, b_;
  asio::io_context io_;
  http::HttpServer server_{io_};
};

TEST_F(ListenerTlsTest, SighupServesTheNewPairAndABadOneKeepsTheOld) {
  // The files vesseld is pointed at; the test swaps their contents.
  std::string cert = dir_ + "/served.crt", key = dir_ + "/served.key";
  copy(a_.cert, cert);
  copy(a_.key, key);
  Config c = config();
  c.tls_cert = cert;
  c.tls_key = key;
  auto tls = ListenerTls::create(c);
  ASSERT_TRUE(tls.ok()) << tls.error().message();
  ASSERT_TRUE((*tls)->enabled("api"));
  EXPECT_STREQ((*tls)->scheme("api"), "https");
  ASSERT_TRUE((*tls)->serve(server_, "api").ok());
  ASSERT_TRUE(server_.listen({"127.0.0.1", 0}).ok());
  // SIGHUP and SIGTERM never end this test process while vesseld's own
  // signal sets are not armed yet (each signal set hears every signal).
  asio::io_context guard_io;
  asio::signal_set guard(guard_io, SIGHUP, SIGTERM);
  std::thread daemon([&] {
    runUntilStopped(
        io_, std::chrono::seconds(10), [&] { server_.close(); },
        []() -> asio::awaitable<void> { co_return; }, tls->get());
  });
  auto first = get(a_.ca);
  EXPECT_TRUE(first.ok()) << first.error().message();
  EXPECT_FALSE(get(b_.ca).ok());

  copy(b_.cert, cert);
  copy(b_.key, key);
  // SIGHUP until a new connection gets the new pair (the first may come
  // before runUntilStopped armed its signal set).
  bool swapped = false;
  for (int i = 0; i < 300 && !swapped; ++i) {
    ::kill(::getpid(), SIGHUP);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    swapped = get(b_.ca).ok();
  }
  EXPECT_TRUE(swapped) << "SIGHUP did not bring in the new certificate";
  auto stale = get(a_.ca);
  ASSERT_FALSE(stale.ok());
  EXPECT_THAT(stale.error().message(), HasSubstr("not trusted"));

  // A broken pair (a key that is not the certificate's) keeps the old one.
  copy(a_.key, key);
  EXPECT_FALSE((*tls)->reload().ok());
  ::kill(::getpid(), SIGHUP);
  auto still = get(b_.ca);
  EXPECT_TRUE(still.ok()) << still.error().message();

  ::kill(::getpid(), SIGTERM);
  daemon.join();
}

TEST_F(ListenerTlsTest, SelfSignedCaIsMadeOnceAndWrittenForClients) {
  Config c = config();
  c.tls_self_signed = true;
  c.tls_names = {"vessel.test", "127.0.0.1"};
  c.tls_ca_out = dir_ + "/clients/tls-ca.pem";
  fs::create_directories(dir_ + "/clients");
  std::string first_ca;
  {
    auto tls = ListenerTls::create(c);
    ASSERT_TRUE(tls.ok()) << tls.error().message();
    EXPECT_EQ((*tls)->caPath(), c.tls_ca_out);
    auto pem = readFile(c.tls_ca_out);
    ASSERT_TRUE(pem.ok());
    first_ca = *pem;
    EXPECT_TRUE(fs::exists(c.state_dir + "/tls-ca/ca.key"));
    EXPECT_EQ(fs::status(c.tls_ca_out).permissions() & fs::perms::others_read,
              fs::perms::others_read);
  }
  // A restart finds the same CA: clients keep trusting it.
  auto tls = ListenerTls::create(c);
  ASSERT_TRUE(tls.ok()) << tls.error().message();
  auto again = readFile(c.tls_ca_out);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, first_ca);
  ASSERT_TRUE((*tls)->serve(server_, "api").ok());
  ASSERT_TRUE(server_.listen({"127.0.0.1", 0}).ok());
  std::thread t([&] { io_.run_for(std::chrono::seconds(120)); });
  auto ok = get(c.tls_ca_out);
  EXPECT_TRUE(ok.ok()) << ok.error().message();
  auto wrong = get(a_.ca);
  EXPECT_FALSE(wrong.ok());
  asio::post(io_, [&] {
    server_.close();
    io_.stop();
  });
  t.join();
}

// The CLI (`vessel`, as a user runs it): --ca-file before or after the
// subcommand, or VESSEL_CA_FILE; another CA is refused, saying so.
TEST_F(ListenerTlsTest, CliVerifiesWithItsCaFileAndRefusesAnotherCa) {
  Config c = config();
  c.tls_cert = a_.cert;
  c.tls_key = a_.key;
  auto tls = ListenerTls::create(c);
  ASSERT_TRUE(tls.ok()) << tls.error().message();
  server_.route(http::verb::get, "/healthz",
                [](const http::Request& r) -> asio::awaitable<http::Response> {
                  co_return http::jsonResponse(r, http::status::ok, R"({"status":"tls-ok"})");
                });
  ASSERT_TRUE((*tls)->serve(server_, "api").ok());
  ASSERT_TRUE(server_.listen({"127.0.0.1", 0}).ok());
  std::thread t([&] { io_.run_for(std::chrono::seconds(120)); });
  auto vessel = [&](const std::string& env, const std::string& args, int* status) {
    std::string cmd = "env VESSEL_API_URL=https://127.0.0.1:" + std::to_string(server_.port()) +
                      " VESSEL_API_KEY=vsk_x " + env + " " + VESSEL_CLI_PATH + " " + args + " 2>&1";
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while (p && (n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int st = p ? ::pclose(p) : -1;
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
  };
  int st = -1;
  std::string out = vessel("", "--ca-file " + a_.ca + " status --json", &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_THAT(out, HasSubstr("tls-ok"));
  out = vessel("", "status --json --ca-file " + a_.ca, &st);
  EXPECT_EQ(st, 0) << out;
  out = vessel("VESSEL_CA_FILE=" + a_.ca, "status --json", &st);
  EXPECT_EQ(st, 0) << out;
  out = vessel("", "status --json --ca-file " + b_.ca, &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_THAT(out, HasSubstr("is not trusted"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("tls-ok")));
  out = vessel("", "status --json", &st);  // the system's store knows no test CA
  EXPECT_NE(st, 0) << out;
  EXPECT_THAT(out, HasSubstr("--ca-file or VESSEL_CA_FILE"));
  asio::post(io_, [&] {
    server_.close();
    io_.stop();
  });
  t.join();
}

// --tls-pair: a listener with its own pair presents it, the others the
// default pair; SIGHUP re-reads it as it re-reads the default (a broken
// one keeps what it served).
TEST_F(ListenerTlsTest, AListenersOwnPairIsServedAndReloaded) {
  std::string cert = dir_ + "/data.crt", key = dir_ + "/data.key";
  copy(b_.cert, cert);
  copy(b_.key, key);
  Config c = config();
  c.tls_cert = a_.cert;
  c.tls_key = a_.key;
  c.tls_pair_of["data"] = {cert, key};
  auto tls = ListenerTls::create(c);
  ASSERT_TRUE(tls.ok()) << tls.error().message();
  http::HttpServer data(io_);
  data.route(http::verb::get, "/v1/ok",
             [](const http::Request& r) -> asio::awaitable<http::Response> {
               co_return http::jsonResponse(r, http::status::ok, "{}");
             });
  ASSERT_TRUE((*tls)->serve(server_, "api").ok());
  ASSERT_TRUE((*tls)->serve(data, "data").ok());
  ASSERT_TRUE(server_.listen({"127.0.0.1", 0}).ok());
  ASSERT_TRUE(data.listen({"127.0.0.1", 0}).ok());
  std::thread t([&] { io_.run_for(std::chrono::seconds(120)); });
  auto getData = [&](const std::string& ca) {
    client::ClientOptions o;
    o.url = "https://127.0.0.1:" + std::to_string(data.port());
    o.ca_file = ca;
    o.timeout = std::chrono::seconds(30);
    return client::Client(o).get("/v1/ok").ok();
  };
  EXPECT_TRUE(get(a_.ca).ok()) << "the api listener: the default pair";
  EXPECT_FALSE(get(b_.ca).ok());
  EXPECT_TRUE(getData(b_.ca)) << "the data listener: its own pair";
  EXPECT_FALSE(getData(a_.ca));

  // The data listener's files now hold ca-a's pair: SIGHUP's reload.
  copy(a_.cert, cert);
  copy(a_.key, key);
  ASSERT_TRUE((*tls)->reload().ok());
  EXPECT_TRUE(getData(a_.ca));
  EXPECT_FALSE(getData(b_.ca));
  // A broken pair: the reload says so, the listener keeps what it served.
  copy(b_.key, key);
  auto bad = (*tls)->reload();
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message(), HasSubstr("the data listener"));
  EXPECT_TRUE(getData(a_.ca));
  EXPECT_TRUE(get(a_.ca).ok());
  asio::post(io_, [&] {
    server_.close();
    data.close();
    io_.stop();
  });
  t.join();
}

// The self-signed listener CA is name-constrained to the --tls-name names:
// `openssl verify`, trusting only it, takes a leaf its key signed for one
// of those names and refuses one for any other name or address.
TEST_F(ListenerTlsTest, SelfSignedCaVouchesForItsNamesOnlyAsOpensslSees) {
  Config c = config();
  c.tls_self_signed = true;
  c.tls_names = {"vessel.test", "192.0.2.10"};
  c.tls_ca_out = dir_ + "/tls-ca.pem";
  auto tls = ListenerTls::create(c);
  ASSERT_TRUE(tls.ok()) << tls.error().message();
  const std::string ca_dir = c.state_dir + "/tls-ca";
  // A leaf for `san`, signed by the CA's own key with the openssl CLI;
  // `openssl verify` against the CA written for clients.
  auto verify = [&](const std::string& name, const std::string& san) {
    std::string d = dir_ + "/leaf-" + name;
    fs::create_directories(d);
    std::ofstream(d + "/ext.cnf") << "subjectAltName=" << san
                                  << "\nbasicConstraints=critical,CA:FALSE\n";
    std::string cmd = "cd '" + d +
                      "' && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
                      "-keyout leaf.key -out leaf.csr -subj '/CN=" +
                      name + "' 2>/dev/null && openssl x509 -req -in leaf.csr -CA '" + ca_dir +
                      "/ca.crt' -CAkey '" + ca_dir +
                      "/ca.key' -CAcreateserial -days 1 -extfile ext.cnf -out leaf.crt "
                      "2>/dev/null && openssl verify -CAfile '" +
                      c.tls_ca_out + "' leaf.crt > verify.out 2>&1";
    int st = std::system(cmd.c_str());
    auto out = readFile(d + "/verify.out");
    return std::pair{st == 0, out.ok() ? *out : std::string()};
  };
  auto ok = verify("vessel.test", "DNS:vessel.test,IP:192.0.2.10");
  EXPECT_TRUE(ok.first) << ok.second;
  auto sub = verify("api.vessel.test", "DNS:api.vessel.test");
  EXPECT_TRUE(sub.first) << sub.second;
  for (auto [name, san] :
       {std::pair{"github.com", "DNS:github.com"}, std::pair{"other-ip", "IP:192.0.2.11"},
        std::pair{"v6", "IP:::1"}, std::pair{"mixed", "DNS:vessel.test,DNS:evil.test"}}) {
    auto r = verify(name, san);
    EXPECT_FALSE(r.first) << name << ": " << r.second;
    EXPECT_THAT(r.second, HasSubstr("permitted subtree violation")) << name;
  }
}

TEST_F(ListenerTlsTest, WithoutTlsFlagsListenersStayPlain) {
  auto tls = ListenerTls::create(config());
  ASSERT_TRUE(tls.ok());
  EXPECT_FALSE((*tls)->enabled("api"));
  EXPECT_STREQ((*tls)->scheme("api"), "http");
  ASSERT_TRUE((*tls)->serve(server_, "api").ok());
  EXPECT_FALSE(server_.tlsOnly());
}

}  // namespace
}  // namespace vessel::vesseld
