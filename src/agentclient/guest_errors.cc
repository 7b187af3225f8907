#include "agentclient/guest_errors.h"

#include <cerrno>
#include <optional>

namespace vessel::agentclient {

namespace {

std::optional<Code> codeOfErrno(int e) {
  switch (e) {
    case ENOENT: return Code::kNotFound;
    case EEXIST: return Code::kAlreadyExists;
    // The target's state is wrong for the call, not its name.
    case ENOTEMPTY:
    case EBUSY:
    case ETXTBSY:
    case EXDEV: return Code::kFailedPrecondition;
    // The path itself cannot name what the call needs.
    case ENOTDIR:
    case EISDIR:
    case ENAMETOOLONG:
    case ELOOP:
    case EINVAL: return Code::kInvalidArgument;
    case EACCES:
    case EPERM:
    case EROFS: return Code::kPermissionDenied;
    // The sandbox's disk or its quota is full.
    case ENOSPC:
    case EDQUOT:
    case EFBIG: return Code::kResourceExhausted;
    default: return std::nullopt;
  }
}

}  // namespace

Error guestError(const Error& e) {
  if (e.sysErrno() == 0) return e;
  auto code = codeOfErrno(e.sysErrno());
  if (!code || *code == e.code()) return e;
  return Error(*code, e.context(), e.sysErrno());
}

}  // namespace vessel::agentclient
