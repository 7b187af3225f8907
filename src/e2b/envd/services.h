#pragma once
// envd's internals shared by its routes: the resolved target of a request,
// the Connect stream writer, protobuf-JSON field access and user defaults.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "agentclient/agent_client.h"
#include "api/http_server.h"
#include "base/base64.h"
#include "e2b/access_token.h"
#include "e2b/envd/envd.h"
#include "e2b/envd/process_table.h"

namespace vessel::e2b::envd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace json = boost::json;
using api::Request;
using api::Response;

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
Result<UserInfo> userInfo(const std::string& name);
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

// Guest errors in envd's terms (ENOENT -> not_found, EEXIST -> already_exists...).
Error fromGuest(const Error& e);

// A unary Connect answer.
Response unaryOk(const Request& req, const json::object& msg);
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
  ConnectStream(beast::tcp_stream& s, const Request& req) : s_(s), req_(req) {}
  asio::awaitable<bool> head();
  asio::awaitable<bool> send(const json::object& msg);
  asio::awaitable<void> end(const Error* error);
  // Drops the connection without an end: a sandbox that died mid-stream.
  void cut();

 private:
  asio::awaitable<bool> chunk(std::string data);
  beast::tcp_stream& s_;
  const Request& req_;
};

// Connect-Timeout-Ms, if sent (bounded); Keepalive-Ping-Interval in seconds.
Result<std::optional<std::chrono::milliseconds>> connectTimeout(const Request& req);
std::optional<std::chrono::seconds> keepaliveInterval(const Request& req);

struct Services {
  Services(asio::io_context& io, Sandboxes sb, const AccessTokens& tokens)
      : io(io), sandboxes(std::move(sb)), tokens(tokens), processes(io) {}
  asio::io_context& io;
  Sandboxes sandboxes;
  const AccessTokens& tokens;
  ProcessTable processes;
  std::map<std::string, std::shared_ptr<struct Watcher>> watchers;
  uint64_t next_watcher = 1;

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
  asio::awaitable<Response> health(const Request& req);
};

}  // namespace vessel::e2b::envd
