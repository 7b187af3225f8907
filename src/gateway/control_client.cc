#include "gateway/control_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstring>

namespace vessel::gateway {

namespace json = boost::json;

Result<ControlClient> ControlClient::connect(const std::string& path,
                                             std::chrono::milliseconds timeout) {
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return Error::fromErrno("control socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    return Error(Code::kInvalidArgument, "control socket path too long: " + path);
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  // SAFETY: sockaddr_un is a sockaddr for connect().
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Error::fromErrno("connect gateway control " + path);
  }
  return ControlClient(std::move(fd));
}

Result<json::object> ControlClient::call(const json::object& request) {
  std::string line = json::serialize(request) + "\n";
  for (size_t off = 0; off < line.size();) {
    ssize_t n = ::send(fd_.get(), line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0) return Error::fromErrno("gateway control write");
    off += static_cast<size_t>(n);
  }
  size_t nl;
  while ((nl = pending_.find('\n')) == std::string::npos) {
    char buf[4096];
    ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n < 0) return Error::fromErrno("gateway control read");
    if (n == 0) return Error(Code::kUnavailable, "gateway control closed");
    pending_.append(buf, static_cast<size_t>(n));
    if (pending_.size() > (4u << 20)) return Error(Code::kProtocol, "gateway reply too long");
  }
  std::string reply = pending_.substr(0, nl);
  pending_.erase(0, nl + 1);
  boost::system::error_code ec;
  json::value v = json::parse(reply, ec);
  if (ec || !v.is_object()) return Error(Code::kProtocol, "gateway reply is not JSON");
  json::object o = v.as_object();
  if (auto* ok = o.if_contains("ok"); !ok || !ok->is_bool() || !ok->as_bool()) {
    auto* msg = o.if_contains("error");
    std::string m = msg && msg->is_string() ? std::string(msg->as_string()) : "gateway error";
    auto* code = o.if_contains("code");
    Code c = Code::kInternal;
    if (code && code->is_string()) {
      for (Code k : {Code::kInvalidArgument, Code::kNotFound, Code::kAlreadyExists,
                     Code::kFailedPrecondition, Code::kPermissionDenied}) {
        if (codeName(k) == std::string_view(code->as_string())) c = k;
      }
    }
    return Error(c, "gateway: " + m);
  }
  return o;
}

Status ControlClient::setSandbox(const std::string& sandbox, const std::string& source,
                                 const json::value& policy) {
  VESSEL_TRY(
      call({{"op", "set_sandbox"}, {"sandbox", sandbox}, {"source", source}, {"policy", policy}}));
  return okStatus();
}

Status ControlClient::removeSandbox(const std::string& sandbox) {
  VESSEL_TRY(call({{"op", "remove_sandbox"}, {"sandbox", sandbox}}));
  return okStatus();
}

}  // namespace vessel::gateway
