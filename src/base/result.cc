#include "base/result.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace vessel {

std::string_view codeName(Code c) {
  switch (c) {
    case Code::kInvalidArgument: return "invalid_argument";
    case Code::kNotFound: return "not_found";
    case Code::kAlreadyExists: return "already_exists";
    case Code::kFailedPrecondition: return "failed_precondition";
    case Code::kResourceExhausted: return "resource_exhausted";
    case Code::kDeadlineExceeded: return "deadline_exceeded";
    case Code::kUnavailable: return "unavailable";
    case Code::kProtocol: return "protocol";
    case Code::kPermissionDenied: return "permission_denied";
    case Code::kUnauthenticated: return "unauthenticated";
    case Code::kInternal: return "internal";
  }
  return "unknown";
}

Error Error::fromErrno(std::string context, int e) {
  Code code = Code::kInternal;
  switch (e) {
    case ENOENT: code = Code::kNotFound; break;
    case EEXIST: code = Code::kAlreadyExists; break;
    case EACCES:
    case EPERM: code = Code::kPermissionDenied; break;
    case EINVAL: code = Code::kInvalidArgument; break;
    case ENOMEM:
    case ENOSPC:
    case EMFILE:
    case ENFILE: code = Code::kResourceExhausted; break;
    case ETIMEDOUT: code = Code::kDeadlineExceeded; break;
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE: code = Code::kUnavailable; break;
    default: break;
  }
  return Error(code, std::move(context), e);
}

Error&& Error::withContext(std::string_view what) && {
  context_ = std::string(what) + ": " + context_;
  return std::move(*this);
}

Error Error::withContext(std::string_view what) const& {
  Error copy = *this;
  return std::move(copy).withContext(what);
}

std::string Error::message() const {
  if (sys_errno_ == 0) return context_;
  return context_ + ": " + std::strerror(sys_errno_);
}

void checkFailed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "VESSEL_CHECK failed: %s at %s:%d\n", cond, file, line);
  std::abort();
}

}  // namespace vessel
