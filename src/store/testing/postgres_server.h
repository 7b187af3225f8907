#pragma once
// A real PostgreSQL server for tests: initdb into a fresh private directory
// and a postmaster that listens only on a Unix socket in that directory
// (no TCP port, so it cannot collide with the system's cluster or another
// test's). Never the system instance, never a mock. Run as the `postgres`
// user when this process is root (postgres refuses root), with the parent
// death signal set, so even a test killed with SIGKILL leaves no server.
// The destructor stops the server (fast shutdown, then SIGKILL) and
// removes the directory.
//
// Tests of the store, vesseld's integration tests and (later) several API
// replicas share one server per test binary and take a fresh database each.
#include <chrono>
#include <memory>
#include <string>

#include "base/child_process.h"
#include "base/result.h"

namespace vessel::store::testing {

struct PostgresServerOptions {
  // Debian's postgresql-15 (scripts/setup.sh installs it; its own cluster
  // is neither needed nor started).
  std::string bin_dir = "/usr/lib/postgresql/15/bin";
  // Bounds initdb, start and stop.
  std::chrono::seconds timeout{60};
  // Also listen on TCP at this IPv4 address and port, trusting every
  // client: tests of several "hosts" in network namespaces, whose link to
  // the store a test can cut ("" = the Unix socket only).
  std::string tcp_address;
  uint16_t tcp_port = 0;
};

class PostgresServer {
 public:
  // Call from a thread that outlives the server: the death signal is tied
  // to the thread that started it (the main thread, in practice).
  static Result<std::unique_ptr<PostgresServer>> start(PostgresServerOptions o = {});
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // Creates an empty database and returns its URL.
  Result<std::string> createDatabase(const std::string& name);
  // The libpq URL of database `db` on this server.
  std::string url(const std::string& db) const;
  // The same over TCP (tcp_address must be set).
  std::string tcpUrl(const std::string& db) const;
  // Runs SQL as the superuser (tests that tamper with a database).
  Status exec(const std::string& db, const std::string& sql);

  // Stops the server, keeping its data; restart() brings it back on the
  // same socket (tests of reconnecting clients).
  Status stop();
  Status restart();

  const std::string& dir() const { return dir_; }
  // The server's log (stderr), for a failing test's message.
  std::string log() const;

 private:
  explicit PostgresServer(PostgresServerOptions o) : opts_(std::move(o)) {}
  Status run();
  Status waitReady();
  int port() const { return opts_.tcp_port ? opts_.tcp_port : 5432; }
  // argv run as the server's user (through setpriv when root).
  std::vector<std::string> asServerUser(std::vector<std::string> argv) const;

  PostgresServerOptions opts_;
  std::string dir_;  // data/, the socket and postgres.log
  bool as_postgres_ = false;
  ChildProcess proc_;
};

}  // namespace vessel::store::testing
