#pragma once
// envd's internals shared by its routes: the resolved target of a request,
// the Connect stream writer, protobuf-JSON field access and user defaults.
#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentclient/agent_client.h"
#include "base/base64.h"
#include "e2b/access_token.h"
#include "e2b/envd/envd.h"
#include "e2b/envd/process_table.h"
#include "http/render_thread.h"
#include "http/server.h"
#include "http/stream.h"

namespace vessel::e2b::envd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace json = boost::json;
using http::Request;
using http::Response;

// The sandbox a request is for, its agent, and who the call runs as.
struct Target {
  std::string sandbox_id;
  std::shared_ptr<agentclient::AgentClient> agent;
  std::string user;  // "user" unless the request names another
};

// A user's uid, gid and home (envd's defaults: `user` is uid 1000 with home
// /home/user; root is 0 with /root).
struct UserInfo {
  std::string name;
  uint32_t uid = 0, gid = 0;
  std::string home;
};
// The guest user `name`: root and `user` as every E2B template has them,
// any other from the guest's /etc/passwd (unauthenticated when it has no
// such user, as envd answers).
asio::awaitable<Result<UserInfo>> lookupUser(agentclient::AgentClient& agent,
                                             const std::string& name);
// The entry of `name` in a passwd file's text, if any (bounded by the caller).
inline constexpr size_t kMaxPasswdBytes = 1 << 20;
std::optional<UserInfo> userFromPasswd(std::string_view passwd, std::string_view name);
// Makes `dir` and its missing parents as envd does: as root, each new one
// owned by `u`; an existing non-directory on the way is invalid_argument.
asio::awaitable<Status> ensureDirs(agentclient::AgentClient& agent, const std::string& dir,
                                   const UserInfo& u);
// A path as envd takes it: relative ones (and "~/...") are under the user's home.
Result<std::string> resolvePath(const std::string& path, const UserInfo& u);

// The user named by `Authorization: Basic base64("<user>:")`, if any.
Result<std::optional<std::string>> basicAuthUser(const Request& req);

// A field of a protobuf-JSON object under its JSON name or its proto name.
const json::value* field(const json::object& o, std::string_view json_name,
                         std::string_view proto_name = {});
Result<std::string> stringField(const json::object& o, std::string_view json_name,
                                std::string_view proto_name = {});
Result<json::object> parseObject(std::string_view body);
// protobuf-JSON bytes fields: either alphabet, padding optional, at most
// an upload's size (base/base64.h).
inline Result<std::string> base64Decode(std::string_view in) {
  return vessel::base64Decode(in, 64u << 20);
}

// E2B's file metadata: xattrs under this prefix (filesystem.proto).
inline constexpr const char* kMetadataPrefix = "user.e2b.";
// The metadata of `path` as an EntryInfo `metadata` object; empty when it
// has none or the guest cannot say (an agent without xattrs).
asio::awaitable<json::object> metadataOf(agentclient::AgentClient& agent, const std::string& path);

// Guest errors as every front end maps them (agentclient/guest_errors.h);
// envd renders the code as a Connect code.
Error fromGuest(const Error& e);

// A unary Connect answer.
Response unaryOk(const Request& req, const json::object& msg);
// The same with the message already serialized (rendered off the io thread).
Response unaryOkBody(const Request& req, std::string body);
Response unaryError(const Request& req, const Error& e);
// A server stream that fails before it starts: 200 and only the
// end-of-stream envelope with the error, as Connect streams carry errors
// (a bare HTTP status would lose the code: 404 means unimplemented).
Response streamError(const Request& req, const Error& e);

// A server stream's response on a connection the handler owns: chunked, so
// that a cut connection is visibly incomplete (the SDK reports the sandbox
// gone) while end() finishes it cleanly with the end-of-stream envelope.
class ConnectStream {
 public:
  ConnectStream(beast::tcp_stream& s, const Request& req) : s_(s), req_(req), out_(s) {}
  asio::awaitable<bool> head();
  asio::awaitable<bool> send(const json::object& msg);
  // The end-of-stream envelope and the last chunk; false if the write failed.
  asio::awaitable<bool> end(const Error* error);
  // Drops the connection without an end: a sandbox that died mid-stream.
  void cut();

 private:
  beast::tcp_stream& s_;
  const Request& req_;
  http::ChunkedWriter out_;
};

// One step of a server stream's source: messages to send, then whether
// the stream goes on, ends (with the end-of-stream envelope and `error`, if
// any) or is cut (the sandbox went away: the client must see a failure).
struct StreamStep {
  enum class Kind { kMore, kEnd, kCut } kind = Kind::kMore;
  std::vector<json::object> messages;
  std::optional<Error> error;
};
using StreamSource = std::function<asio::awaitable<StreamStep>()>;
struct StreamSpec {
  json::object first;      // sent right after the head
  json::object keepalive;  // sent every keepalive_interval
  std::optional<std::chrono::seconds> keepalive_interval;
  std::optional<std::chrono::milliseconds> deadline;  // then deadline_exceeded
  std::string deadline_message = "stream deadline exceeded";
};
// Serves a server stream on the handler's connection: the head and
// `first`, then what `next` yields, keepalives and the deadline, until the
// source ends or cuts it or the client goes away (the source is simply no
// longer read: what it stands for, a process or a watch, is the caller's).
// Returns what a StreamHandler returns: writtenKeepAlive() after a clean
// end on a keep-alive connection, else nullopt (the connection closes).
asio::awaitable<std::optional<Response>> serveStream(asio::io_context& io, const Request& req,
                                                     beast::tcp_stream& stream,
                                                     const StreamSpec& spec,
                                                     const StreamSource& next);

// Connect-Timeout-Ms, if sent (bounded); Keepalive-Ping-Interval in seconds.
Result<std::optional<std::chrono::milliseconds>> connectTimeout(const Request& req);
std::optional<std::chrono::seconds> keepaliveInterval(const Request& req);

// A polled watcher (CreateWatcher): events pile up, bounded, until fetched.
struct Watcher {
  std::string sandbox_id;
  std::string tenant;
  std::string dir;
  std::shared_ptr<agentclient::Watch> watch;
  std::deque<json::object> events;
  size_t bytes = 0;  // what `events` hold, roughly: names and types
  bool failed = false;
  bool dropped = false;  // removed or freed with its sandbox: the reader stops
  // Cancels the reader's wait for the next event (it owns `watch`).
  std::shared_ptr<asio::cancellation_signal> stop = std::make_shared<asio::cancellation_signal>();
};

// At most `n` holders at once; more wait their turn (a channel's buffer
// as the count).
class Slots {
 public:
  Slots(asio::io_context& io, size_t n) : ch_(io, n) {}
  asio::awaitable<void> acquire() {
    (void)co_await ch_.async_send(boost::system::error_code(), asio::as_tuple(asio::use_awaitable));
  }
  void release() {
    ch_.try_receive([](boost::system::error_code) {});
  }

 private:
  asio::experimental::channel<void(boost::system::error_code)> ch_;
};

// What envd knows of a sandbox it holds state for (sandbox_state.cc).
struct SandboxBook {
  std::string tenant;
  // Since when it has not been running (nullopt: running at the last sweep).
  std::optional<std::chrono::steady_clock::time_point> absent_since;
};

struct Services {
  Services(asio::io_context& io, Sandboxes sb, const AccessTokens& tokens, EnvdLimits lim)
      : io(io),
        sandboxes(std::move(sb)),
        tokens(tokens),
        limits(lim),
        processes(io),
        inflating(io, std::max<size_t>(1, lim.inflating_uploads)) {}
  ~Services();
  asio::io_context& io;
  Sandboxes sandboxes;
  const AccessTokens& tokens;
  const EnvdLimits limits;
  ProcessTable processes;
  std::map<std::string, std::shared_ptr<Watcher>> watchers;
  uint64_t next_watcher = 1;
  std::map<std::string, SandboxBook> books;
  std::shared_ptr<asio::steady_timer> sweeper;

  // Per-sandbox state (sandbox_state.cc). The tenant of a sandbox envd is
  // about to keep something for (its book made on first use).
  const std::string& tenantOf(const std::string& sandbox_id);
  // Whether another watcher or process entry fits the caps; else the
  // resource_exhausted to answer.
  Status roomForWatcher(const std::string& sandbox_id);
  Status roomForProcess(const std::string& sandbox_id);
  // Queues a watcher's event, dropping its oldest past the caps.
  void queueEvent(Watcher& w, json::object ev);
  // The process table's entry for `pid`, attached through the target's
  // agent; a new entry only within the caps.
  asio::awaitable<Result<std::shared_ptr<ProcEntry>>> attachProcess(const Target& t, uint32_t pid);
  void dropSandbox(const std::string& id);
  // Removes a watcher: its events freed, its reader (and the agent's
  // stream) stopped.
  void dropWatcher(std::map<std::string, std::shared_ptr<Watcher>>::iterator it);
  // Frees what sandboxes not running for keep_detached hold; runs every
  // sweep_interval while envd holds anything.
  void sweep();
  void armSweeper();
  asio::awaitable<void> sweepLoop(std::shared_ptr<asio::steady_timer> timer,
                                  std::shared_ptr<bool> still);
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
  StateUsage usage() const;
  Slots inflating;  // gzip uploads being inflated
  // ListDir's JSON is made here. Declared after what it uses: joined first.
  http::RenderThread render;
  // gzip for /files, both ways, off the io thread.
  http::RenderThread codec;

  // The sandbox the request names by header or Host; checks its token.
  Result<Target> target(const Request& req);

  // Connect methods.
  asio::awaitable<Response> processUnary(const Request& req, std::string method);
  asio::awaitable<std::optional<Response>> processStream(const Request& req,
                                                         beast::tcp_stream& stream,
                                                         std::string method);
  asio::awaitable<Response> filesystemUnary(const Request& req, std::string method);
  asio::awaitable<std::optional<Response>> watchDir(const Request& req, beast::tcp_stream& stream);
  // Plain routes.
  asio::awaitable<std::optional<Response>> getFile(const Request& req, beast::tcp_stream& stream);
  asio::awaitable<Response> postFile(const Request& req);
  // One uploaded file written from `next` (chunks until nullopt): its
  // EntryInfo, or the Error to answer.
  asio::awaitable<Result<json::object>> uploadOctets(const Target& t, const UserInfo& user,
                                                     std::string path,
                                                     const std::vector<agentproto::Xattr>& metadata,
                                                     const std::string& body, bool gzip);
  asio::awaitable<Result<json::array>> uploadMultipart(
      const Target& t, const UserInfo& user, const std::optional<std::string>& path,
      const std::vector<agentproto::Xattr>& metadata, const std::string& body,
      const std::string& ctype, bool gzip);
  using UploadSource = std::function<asio::awaitable<Result<std::optional<std::string>>>()>;
  asio::awaitable<Result<json::object>> writeUpload(const Target& t, const UserInfo& user,
                                                    std::string path,
                                                    const std::vector<agentproto::Xattr>& metadata,
                                                    const UploadSource& next);
  asio::awaitable<Response> health(const Request& req);
};

}  // namespace vessel::e2b::envd
