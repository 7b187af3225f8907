#include "store/testing/postgres_server.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <pqxx/pqxx>
#include <sstream>
#include <thread>

#include "base/fd.h"

namespace vessel::store::testing {

namespace fs = std::filesystem;

namespace {
// The socket's name is .s.PGSQL.<port> in the private directory, so the
// number is free to be PostgreSQL's usual one (5432) unless the server also listens on TCP.

constexpr const char* kSuperuser = "vessel";
}  // namespace

Result<std::unique_ptr<PostgresServer>> PostgresServer::start(PostgresServerOptions o) {
  std::unique_ptr<PostgresServer> s(new PostgresServer(std::move(o)));
  std::string tmpl = "/tmp/vessel-pg-XXXXXX";
  if (!::mkdtemp(tmpl.data())) return Error::fromErrno("postgres test server: mkdtemp");
  s->dir_ = tmpl;
  if (::geteuid() == 0) {
    // PostgreSQL refuses to run as root: the server and its files belong to
    // the `postgres` user Debian's package creates.
    struct passwd* pw = ::getpwnam("postgres");
    if (!pw)
      return Error(Code::kFailedPrecondition,
                   "postgres test server: no user 'postgres' (scripts/setup.sh installs "
                   "postgresql-15)");
    if (::chown(s->dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0)
      return Error::fromErrno("postgres test server: chown " + s->dir_);
    s->as_postgres_ = true;
  }
  ::chmod(s->dir_.c_str(), 0700);

  VESSEL_ASSIGN_OR_RETURN(Fd log,
                          Fd::open(s->dir_ + "/postgres.log", O_WRONLY | O_CREAT | O_APPEND, 0644));
  SpawnOptions init;
  init.argv = s->asServerUser({s->opts_.bin_dir + "/initdb", "-D", s->dir_ + "/data", "-U",
                               kSuperuser, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync",
                               "--no-instructions"});
  init.fds = {{log.get(), 1}, {log.get(), 2}};
  init.die_with_parent = true;
  VESSEL_ASSIGN_OR_RETURN(ChildProcess p, ChildProcess::spawn(init));
  auto st = p.waitFor(s->opts_.timeout);
  if (!st.ok() || !st->success())
    return Error(Code::kUnavailable, "postgres test server: initdb failed (" +
                                         (st.ok() ? st->describe() : st.error().message()) +
                                         "): " + s->log());
  VESSEL_TRY(s->run());
  return s;
}

PostgresServer::~PostgresServer() {
  (void)stop();
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

std::vector<std::string> PostgresServer::asServerUser(std::vector<std::string> argv) const {
  if (!as_postgres_) return argv;
  // setpriv execs the program (same pid: the ChildProcess is the server)
  // and sets the death signal after the user change, which would clear it.
  std::vector<std::string> out = {"setpriv",        "--reuid=postgres", "--regid=postgres",
                                  "--clear-groups", "--pdeathsig=KILL", "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

Status PostgresServer::run() {
  VESSEL_ASSIGN_OR_RETURN(Fd log,
                          Fd::open(dir_ + "/postgres.log", O_WRONLY | O_CREAT | O_APPEND, 0644));
  SpawnOptions o;
  // Only the Unix socket in the private directory; durability settings off
  // (a test database is thrown away).
  if (!opts_.tcp_address.empty()) {
    // Any address may connect, without a password: a private test cluster.
    std::ofstream hba(dir_ + "/data/pg_hba.conf", std::ios::app);
    hba << "host all all 0.0.0.0/0 trust\n";
  }
  o.argv =
      asServerUser({opts_.bin_dir + "/postgres", "-D", dir_ + "/data", "-k", dir_, "-p",
                    std::to_string(port()), "-c", "listen_addresses=" + opts_.tcp_address, "-c",
                    "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c",
                    "max_connections=100", "-c", "shared_buffers=32MB"});
  o.fds = {{log.get(), 1}, {log.get(), 2}};
  o.die_with_parent = true;
  VESSEL_ASSIGN_OR_RETURN(proc_, ChildProcess::spawn(o));
  return waitReady();
}

Status PostgresServer::waitReady() {
  // PostgreSQL has no readiness signal here but accepting a connection;
  // bounded polling, failing early if the server exits.
  auto deadline = std::chrono::steady_clock::now() + opts_.timeout;
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto st = proc_.tryWait())
      return Error(Code::kUnavailable,
                   "postgres test server exited (" + st->describe() + "): " + log());
    try {
      pqxx::connection c(url("postgres"));
      return okStatus();
    } catch (const std::exception& e) {
      last = e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Error(Code::kDeadlineExceeded, "postgres test server not ready: " + last + log());
}

Status PostgresServer::stop() {
  if (!proc_.running()) return okStatus();
  // SIGINT: fast shutdown (clients are disconnected; SIGTERM would wait
  // for them). SIGKILL if that does not end it in time.
  (void)proc_.signal(SIGINT);
  auto st = proc_.waitFor(opts_.timeout);
  if (st.ok()) return okStatus();
  (void)proc_.signal(SIGKILL);
  (void)proc_.waitFor(std::chrono::seconds(10));
  return Error(Code::kDeadlineExceeded, "postgres test server did not stop; killed");
}

Status PostgresServer::restart() {
  VESSEL_TRY(stop());
  return run();
}

std::string PostgresServer::url(const std::string& db) const {
  return "postgresql://" + std::string(kSuperuser) + "@/" + db + "?host=" + dir_ +
         "&port=" + std::to_string(port());
}

std::string PostgresServer::tcpUrl(const std::string& db) const {
  return "postgresql://" + std::string(kSuperuser) + "@" + opts_.tcp_address + ":" +
         std::to_string(port()) + "/" + db;
}

Status PostgresServer::exec(const std::string& db, const std::string& sql) {
  try {
    pqxx::connection c(url(db));
    pqxx::nontransaction(c).exec(sql);
    return okStatus();
  } catch (const std::exception& e) {
    return Error(Code::kUnavailable, "postgres test server: " + sql + ": " + e.what());
  }
}

Result<std::string> PostgresServer::createDatabase(const std::string& name) {
  std::string quoted;
  try {
    pqxx::connection c(url("postgres"));
    quoted = c.quote_name(name);
  } catch (const std::exception& e) {
    return Error(Code::kUnavailable, std::string("postgres test server: ") + e.what());
  }
  VESSEL_TRY(exec("postgres", "CREATE DATABASE " + quoted));
  return url(name);
}

std::string PostgresServer::log() const {
  std::ifstream f(dir_ + "/postgres.log");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  return s.size() > 4000 ? "..." + s.substr(s.size() - 4000) : s;
}

}  // namespace vessel::store::testing
