#pragma once
// Test and benchmark support for AgentClient: run a coroutine with a bound,
// spawn the agent on the host over a socketpair (no VM), and a streaming
// SHA-256 for checking large transfers without holding them.
#include <openssl/evp.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "agentclient/agent_client.h"
#include "base/child_process.h"
#include "base/result.h"

namespace vessel::agentclient::testing {

namespace detail {
template <typename T>
asio::awaitable<void> capture(asio::awaitable<T> a, std::shared_ptr<std::optional<T>> out) {
  out->emplace(co_await std::move(a));
}
}  // namespace detail

// Drives `io` until the coroutine finishes or `limit` passes; T is a Result,
// and running out of time is its kDeadlineExceeded Error.
template <typename T>
T runFor(asio::io_context& io, asio::awaitable<T> a,
         std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  auto out = std::make_shared<std::optional<T>>();
  asio::co_spawn(io, detail::capture(std::move(a), out), asio::detached);
  auto deadline = std::chrono::steady_clock::now() + limit;
  io.restart();
  while (!*out && std::chrono::steady_clock::now() < deadline)
    io.run_one_for(std::chrono::milliseconds(20));
  if (!*out) return Error(Code::kDeadlineExceeded, "test step did not finish in time");
  return std::move(**out);
}

// vessel-agent --channel-fd on the host over a socketpair, handshaken, with
// its own passwd file (`user` = uid 1000, home /tmp). Processes it starts run
// on the host: tests keep to harmless commands.
class HostAgent {
 public:
  static Result<std::unique_ptr<HostAgent>> start(asio::io_context& io,
                                                  const std::string& agent_binary);
  ~HostAgent();
  std::shared_ptr<AgentClient> client() const { return client_; }
  ChildProcess& process() { return child_; }

 private:
  std::string passwd_;
  ChildProcess child_;
  std::shared_ptr<AgentClient> client_;
};

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  void update(std::string_view d) { EVP_DigestUpdate(ctx_, d.data(), d.size()); }
  std::string hex();

 private:
  EVP_MD_CTX* ctx_;
};

// Deterministic pseudo-random bytes (xorshift), for large transfers.
class PatternSource {
 public:
  explicit PatternSource(uint64_t seed) : x_(seed | 1) {}
  std::string next(size_t n);

 private:
  uint64_t x_;
};

}  // namespace vessel::agentclient::testing
