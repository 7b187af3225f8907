#include "vesseld/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/ip/address.hpp>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>

#include "http/tls.h"
#include "http/tls_client.h"

namespace vessel::vesseld {

namespace {
Status requireFile(const std::string& what, const std::string& path) {
  if (path.empty()) return Error(Code::kInvalidArgument, what + " is not set");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Error::fromErrno(what + " " + path);
  if (!S_ISREG(st.st_mode))
    return Error(Code::kInvalidArgument, what + " " + path + " is not a file");
  return okStatus();
}
// --log-format, --log-retention, --log-max-entries (docs/logs.md).
Status checkLogFlags(const Config& c) {
  if (c.log_format != "text" && c.log_format != "json")
    return Error(Code::kInvalidArgument, "--log-format must be text or json");
  if (c.log_retention_s < 0 || c.log_max_entries < 1 || c.log_max_entries > 1'000'000)
    return Error(Code::kInvalidArgument,
                 "--log-retention must not be negative, --log-max-entries 1 to 1000000");
  return okStatus();
}
}  // namespace

Result<std::map<std::string, size_t>> parseWarmPool(std::string_view s) {
  std::map<std::string, size_t> out;
  constexpr size_t kMaxPerTemplate = 64;
  if (s == "none") return out;
  while (!s.empty()) {
    auto comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    if (item.empty()) continue;
    auto eq = item.find('=');
    std::string_view name = item.substr(0, eq);
    bool name_ok = !name.empty() && name.size() <= 64;
    for (char c : name)
      name_ok = name_ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '_' || c == '.');
    size_t n = 0;
    std::string_view num = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), n);
    if (!name_ok || num.empty() || ec != std::errc() || p != num.data() + num.size() ||
        n > kMaxPerTemplate)
      return Error(Code::kInvalidArgument, "'" + std::string(item) +
                                               "' is not TEMPLATE=N (N from 0 to " +
                                               std::to_string(kMaxPerTemplate) + ")");
    out[std::string(name)] = n;
  }
  return out;
}

Result<WarmPoolBudget> parseWarmPoolBudget(std::string_view s) {
  WarmPoolBudget out;
  constexpr uint64_t kMaxMib = uint64_t{1} << 20;  // 1 TiB
  if (s == "none") return out;
  while (!s.empty()) {
    auto comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    if (item.empty()) continue;
    auto eq = item.find('=');
    std::string_view name = eq == std::string_view::npos ? "" : item.substr(0, eq);
    std::string_view num = eq == std::string_view::npos ? item : item.substr(eq + 1);
    bool name_ok = eq == std::string_view::npos || (!name.empty() && name.size() <= 64);
    for (char c : name)
      name_ok = name_ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '_' || c == '.');
    uint64_t mib = 0;
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), mib);
    if (!name_ok || num.empty() || ec != std::errc() || p != num.data() + num.size() ||
        mib > kMaxMib)
      return Error(Code::kInvalidArgument, "'" + std::string(item) +
                                               "' is not MIB or TEMPLATE=MIB (MIB from 0 to " +
                                               std::to_string(kMaxMib) + ")");
    if (name.empty())
      out.every_mib = mib;
    else
      out.per_mib[std::string(name)] = mib;
  }
  return out;
}

Result<Role> parseRole(std::string_view s) {
  if (s == "all") return Role::kAll;
  if (s == "api") return Role::kApi;
  if (s == "node") return Role::kNode;
  return Error(Code::kInvalidArgument,
               "--role must be all, api or node, not '" + std::string(s) + "'");
}

std::string_view roleName(Role r) {
  switch (r) {
    case Role::kApi: return "api";
    case Role::kNode: return "node";
    case Role::kAll: break;
  }
  return "all";
}

// A node's own token (--node-token-file, else VESSEL_NODE_TOKEN) and, on an
// API replica, every node's (--node-tokens-file) or else that one token as
// the shared one: a replica given neither is refused rather than left
// unable to reach any node.
Status Config::readNodeTokens(const std::string& flag) {
  if (!node_token_file.empty()) {
    std::ifstream in(node_token_file);
    if (!in)
      return Error(Code::kInvalidArgument,
                   "--node-token-file " + node_token_file + ": cannot read it");
    std::getline(in, node_token);
  } else if (const char* env = std::getenv("VESSEL_NODE_TOKEN")) {
    node_token = env;
  }
  while (!node_token.empty() && std::isspace(static_cast<unsigned char>(node_token.back())))
    node_token.pop_back();
  if (role == Role::kApi && !node_tokens_file.empty()) {
    auto t = cluster::NodeTokens::readFile(node_tokens_file);
    if (!t.ok()) return std::move(t).error().withContext("--node-tokens-file");
    node_tokens = std::move(*t);
    return okStatus();
  }
  if (role == Role::kNode && !node_tokens_file.empty())
    return Error(Code::kInvalidArgument,
                 "--node-tokens-file is the API replicas' (every node's token); a node holds "
                 "only its own, in --node-token-file");
  if (node_token.size() < cluster::kMinNodeTokenSize)
    return Error(
        Code::kInvalidArgument,
        flag + (role == Role::kNode ? " needs this node's token (at least 16 characters) in "
                                      "--node-token-file or VESSEL_NODE_TOKEN"
                                    : " needs every node's token in --node-tokens-file (or, for a "
                                      "cluster that keeps one shared token, --node-token-file or "
                                      "VESSEL_NODE_TOKEN, at least 16 characters)"));
  if (role == Role::kApi) node_tokens = cluster::NodeTokens::shared(node_token);
  return okStatus();
}

Status Config::validateRole() {
  if (role == Role::kAll) return okStatus();
  const std::string flag = "--role=" + std::string(roleName(role));
  // Replicas and nodes share state only through the store: an embedded
  // SQLite file cannot be that.
  if (store == "sqlite")
    return Error(Code::kInvalidArgument,
                 flag +
                     " needs a shared store: --store=postgres://... (or VESSEL_STORE); "
                     "SQLite serves one machine only (--role=all)");
  VESSEL_TRY(readNodeTokens(flag));
  auto nl = parseHostPort(node_listen);
  if (!nl.ok()) return std::move(nl).error().withContext("--node-listen");
  node_listen_addr = *nl;
  if (node_name.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) != 0 || !host[0])
      return Error(Code::kInvalidArgument, "--node-name: the host name is unknown; name the node");
    node_name = host;
  }
  for (char c : node_name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return Error(Code::kInvalidArgument, "--node-name may hold letters, digits, '-', '_', '.'");
  if (node_name.size() > 63) return Error(Code::kInvalidArgument, "--node-name is too long");
  if (node_advertise.empty())
    node_advertise = (tlsOn("node") ? "https://" : "http://") + node_listen;
  if (node_advertise.rfind("http://", 0) != 0 && node_advertise.rfind("https://", 0) != 0)
    return Error(Code::kInvalidArgument, "--node-advertise must be an http:// or https:// URL");
  if (node_lost_after_s < 2) return Error(Code::kInvalidArgument, "--node-lost-after must be >= 2");
  if (!node_ca_file.empty()) {
    // Read once here: a missing or empty bundle stops the start with the
    // file named, not the first call to a node.
    auto ctx = http::clientContext(node_ca_file);
    if (!ctx.ok()) return std::move(ctx).error().withContext("--node-ca-file");
  }
  return okStatus();
}

namespace {

bool isLoopback(const std::string& host) {
  boost::system::error_code ec;
  auto ip = boost::asio::ip::make_address(host, ec);
  return !ec && ip.is_loopback();
}

// A --tls-name: a DNS name or an IP literal (it becomes a subjectAltName).
bool validTlsName(const std::string& n) {
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(n, ec);
  if (!ec) return true;
  if (n.empty() || n.size() > 253) return false;
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '*')
      return false;
  return true;
}

// from_image builds' flags (docs/templates.md, "From an OCI image").
Status validateImageBuilds(const Config& c) {
  if (c.max_image_mib < 1 || c.max_image_mib > (int64_t{1} << 20))
    return Error(Code::kInvalidArgument, "--max-image-mib must be 1 to 1048576");
  if (c.max_build_context_mib < 1 || c.max_build_context_mib > (int64_t{1} << 20))
    return Error(Code::kInvalidArgument, "--max-build-context-mib must be 1 to 1048576");
  if (c.build_cache_mib < 0 || c.build_cache_mib > (int64_t{1} << 30))
    return Error(Code::kInvalidArgument, "--build-cache-mib must be 0 to 1073741824");
  if (c.max_concurrent_builds < 1 || c.max_concurrent_builds > 8)
    return Error(Code::kInvalidArgument,
                 "--max-concurrent-builds must be 1 to 8 (a node queues 8 builds in all)");
  for (const auto& r : c.insecure_registries)
    if (r.empty() || r.find_first_of("/ @") != std::string::npos)
      return Error(Code::kInvalidArgument, "--insecure-registry takes HOST:PORT, not '" + r + "'");
  return okStatus();
}

// --e2b-envd-listen and, for a node, the URL replicas reach it at.
Status validateEnvdListener(Config& c) {
  c.e2b_envd_listen_addr.reset();
  if (!c.e2b_envd_listen.empty()) {
    auto e = parseHostPort(c.e2b_envd_listen);
    if (!e.ok()) return std::move(e).error().withContext("--e2b-envd-listen");
    c.e2b_envd_listen_addr = *e;
  }
  if (c.e2b_envd_advertise.empty() && c.e2b_envd_listen_addr)
    c.e2b_envd_advertise = (c.tlsOn("envd") ? "https://" : "http://") + c.e2b_envd_listen;
  if (!c.e2b_envd_advertise.empty() && c.e2b_envd_advertise.rfind("http://", 0) != 0 &&
      c.e2b_envd_advertise.rfind("https://", 0) != 0)
    return Error(Code::kInvalidArgument, "--e2b-envd-advertise must be an http:// or https:// URL");
  return okStatus();
}

}  // namespace

Status Config::validateTlsPairs() {
  tls_pair_of.clear();
  for (const auto& p : tls_pairs) {
    auto eq = p.find('=');
    auto comma = p.find(',', eq == std::string::npos ? 0 : eq);
    std::string name = p.substr(0, eq);
    bool known = false;
    for (const char* l : kTlsListeners) known = known || name == l;
    if (eq == std::string::npos || comma == std::string::npos || !known || comma == eq + 1 ||
        comma + 1 == p.size())
      return Error(Code::kInvalidArgument,
                   "--tls-pair '" + p +
                       "' is not LISTENER=CERT,KEY (LISTENER: api, data, e2b, envd or node)");
    if (tls_pair_of.count(name))
      return Error(Code::kInvalidArgument, "--tls-pair names listener " + name + " twice");
    TlsPair pair{p.substr(eq + 1, comma - eq - 1), p.substr(comma + 1)};
    // Loaded once here, as --tls-cert is: a bad pair stops the start.
    auto ctx = http::serverContextFromFiles(pair.cert, pair.key);
    if (!ctx.ok()) return std::move(ctx).error().withContext("--tls-pair " + name);
    tls_pair_of[name] = std::move(pair);
  }
  return okStatus();
}

Status Config::validateTls() {
  if (tls_cert.empty() != tls_key.empty())
    return Error(Code::kInvalidArgument, "--tls-cert and --tls-key go together");
  if (!tls_cert.empty() && tls_self_signed)
    return Error(Code::kInvalidArgument,
                 "--tls-self-signed makes its own certificate: drop --tls-cert/--tls-key");
  if (!tls_names.empty() && !tls_self_signed)
    return Error(Code::kInvalidArgument, "--tls-name names the --tls-self-signed certificate");
  if (!tls_ca_out.empty() && !tls_self_signed)
    return Error(Code::kInvalidArgument, "--tls-ca-out is where --tls-self-signed writes its CA");
  if (!tls_cert.empty()) {
    // Loaded once here: an unreadable or mismatched pair stops the start
    // with the file named, before anything else is set up.
    auto ctx = http::serverContextFromFiles(tls_cert, tls_key);
    if (!ctx.ok()) return std::move(ctx).error();
  }
  if (tls_self_signed) {
    if (tls_names.empty()) {
      char host[256] = {};
      if (::gethostname(host, sizeof(host) - 1) == 0 && host[0]) tls_names.emplace_back(host);
      for (const char* n : {"localhost", "127.0.0.1", "::1"}) tls_names.emplace_back(n);
    }
    for (auto& n : tls_names) {
      for (auto& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (!validTlsName(n))
        return Error(Code::kInvalidArgument,
                     "--tls-name '" + n + "' is not a DNS name or an IP address");
    }
    if (tls_ca_out.empty()) tls_ca_out = state_dir + "/tls-ca.pem";
  }
  if (allow_plain_http) return okStatus();
  // The listeners this role opens: by name, flag and address.
  struct Opened {
    const char* name;
    const char* flag;
    std::string host;
  };
  std::vector<Opened> opened;
  if (role != Role::kNode) {
    opened.push_back({"api", "--listen", listen_addr.host});
    if (e2b_listen_addr) opened.push_back({"e2b", "--e2b-listen", e2b_listen_addr->host});
  }
  if (role != Role::kApi) opened.push_back({"data", "--data-listen", data_listen_addr.host});
  if (e2b_envd_listen_addr)
    opened.push_back({"envd", "--e2b-envd-listen", e2b_envd_listen_addr->host});
  if (role == Role::kNode) opened.push_back({"node", "--node-listen", node_listen_addr.host});
  for (const auto& l : opened) {
    if (tlsOn(l.name) || isLoopback(l.host)) continue;
    return Error(Code::kInvalidArgument,
                 std::string(l.flag) + " " + l.host +
                     " is reachable from other machines in plain HTTP: serve TLS "
                     "(--tls-cert/--tls-key, --tls-self-signed or --tls-pair " +
                     l.name +
                     "=CERT,KEY) or, behind a TLS-terminating proxy or on a private network, "
                     "pass --allow-plain-http");
  }
  return okStatus();
}

Status Config::validate() {
  VESSEL_TRY(validateTlsPairs());
  auto hp = parseHostPort(listen);
  if (!hp.ok()) return std::move(hp).error().withContext("--listen");
  listen_addr = *hp;
  auto dp = parseHostPort(data_listen);
  if (!dp.ok()) return std::move(dp).error().withContext("--data-listen");
  data_listen_addr = *dp;
  if (data_url.empty()) data_url = (tlsOn("data") ? "https://" : "http://") + data_listen;
  e2b_listen_addr.reset();
  if (!e2b_listen.empty()) {
    auto e = parseHostPort(e2b_listen);
    if (!e.ok()) return std::move(e).error().withContext("--e2b-listen");
    e2b_listen_addr = *e;
  }
  VESSEL_TRY(validateEnvdListener(*this));
  if (data_url.rfind("http://", 0) != 0 && data_url.rfind("https://", 0) != 0)
    return Error(Code::kInvalidArgument, "--data-url must start with http:// or https://");
  if (state_dir.empty() || state_dir[0] != '/')
    return Error(Code::kInvalidArgument,
                 "state dir must be an absolute path, not '" + state_dir + "'");
  if (cache_dir.empty() || cache_dir[0] != '/')
    return Error(Code::kInvalidArgument,
                 "cache dir must be an absolute path, not '" + cache_dir + "'");
  if (store != "sqlite" && store.rfind("postgres://", 0) != 0 &&
      store.rfind("postgresql://", 0) != 0)
    return Error(Code::kInvalidArgument,
                 "--store must be 'sqlite' or a postgres:// or postgresql:// URL");
  // Which hypervisors there are is the binary's to say (vesseld/cli.h).
  if (hypervisor.empty()) return Error(Code::kInvalidArgument, "--hypervisor is empty");
  VESSEL_TRY(validateRole());
  // An API replica boots nothing and reads templates from the store.
  if (role != Role::kApi) {
    VESSEL_TRY(requireFile("kernel", kernel));
    VESSEL_TRY(requireFile("minimal image", minimal_image));
  }
  if (!egress_resolver.empty()) {
    std::string r =
        egress_resolver.find(':') == std::string::npos ? egress_resolver + ":53" : egress_resolver;
    auto hp = parseHostPort(r);
    if (!hp.ok()) return std::move(hp).error().withContext("--egress-resolver");
  }
  if (!egress_ca_bundle.empty()) VESSEL_TRY(requireFile("egress CA bundle", egress_ca_bundle));
  if (default_network != "none" && default_network != "full")
    return Error(Code::kInvalidArgument, "--default-network must be none or full");
  if (!gateway_binary.empty()) VESSEL_TRY(requireFile("gateway binary", gateway_binary));
  if (log_level != "debug" && log_level != "info" && log_level != "warn" && log_level != "error")
    return Error(Code::kInvalidArgument, "log level must be debug, info, warn or error");
  VESSEL_TRY(checkLogFlags(*this));
  if (require_kvm && accel == node::AccelMode::kTcg)
    return Error(Code::kInvalidArgument, "--require-kvm contradicts --accel=tcg");
  if (default_idle_timeout_s < 0 || default_lifetime_s < 1 || max_lifetime_s < 1 ||
      default_lifetime_s > max_lifetime_s)
    return Error(Code::kInvalidArgument,
                 "lifetimes: idle timeout >= 0 (0: none), 1 <= default lifetime <= max lifetime");
  if (tenant_max_sandboxes < 0 || tenant_max_memory_mib < 0 || tenant_max_vcpus < 0 ||
      tenant_max_disk_mib < 0)
    return Error(Code::kInvalidArgument, "tenant quotas must not be negative");
  VESSEL_TRY(validateImageBuilds(*this));
  if (tenant_max_volume_mib < 0 || max_volume_mib < 16 || max_volume_mib > (int64_t{1} << 24))
    return Error(Code::kInvalidArgument,
                 "--tenant-max-volume-mib must not be negative, --max-volume-mib 16 to 16777216");
  if (e2b_volume_mib != 0 && (e2b_volume_mib < 16 || e2b_volume_mib > max_volume_mib))
    return Error(Code::kInvalidArgument,
                 "--e2b-volume-mib: 16 to --max-volume-mib (0: the default)");
  if (max_disk_mib < 64 || min_free_disk_mib < 0)
    return Error(Code::kInvalidArgument,
                 "--max-disk-mib must be at least 64 and --min-free-disk-mib not negative");
  if (agent_reply_timeout_s < 0 || agent_reply_timeout_s > 24 * 3600)
    return Error(Code::kInvalidArgument, "--agent-reply-timeout must be 0 to 86400 seconds");
  auto pools = parseWarmPool(warm_pool);
  if (!pools.ok()) return std::move(pools).error().withContext("--warm-pool");
  warm_pool_sizes = std::move(*pools);
  auto budget = parseWarmPoolBudget(warm_pool_budget);
  if (!budget.ok()) return std::move(budget).error().withContext("--warm-pool-budget");
  warm_pool_budgets = std::move(*budget);
  return validateTls();
}

}  // namespace vessel::vesseld
