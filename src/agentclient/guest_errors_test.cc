// The one guest-errno table: what each errno becomes, and what it leaves alone.
#include "agentclient/guest_errors.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace vessel::agentclient {
namespace {

struct Row {
  int sys_errno;
  Code from;  // the code the guest reported with it
  Code want;
};

TEST(AgentGuestErrors, EachErrnoMapsToOneCode) {
  const Row rows[] = {
      {ENOENT, Code::kNotFound, Code::kNotFound},
      {ENOENT, Code::kInternal, Code::kNotFound},
      {EEXIST, Code::kInternal, Code::kAlreadyExists},
      {ENOTEMPTY, Code::kInternal, Code::kFailedPrecondition},
      {ENOTEMPTY, Code::kInvalidArgument, Code::kFailedPrecondition},
      {EBUSY, Code::kInternal, Code::kFailedPrecondition},
      {ETXTBSY, Code::kInternal, Code::kFailedPrecondition},
      {EXDEV, Code::kInternal, Code::kFailedPrecondition},
      {ENOTDIR, Code::kInternal, Code::kInvalidArgument},
      {EISDIR, Code::kInternal, Code::kInvalidArgument},
      {ENAMETOOLONG, Code::kInternal, Code::kInvalidArgument},
      {ELOOP, Code::kInternal, Code::kInvalidArgument},
      {EINVAL, Code::kInternal, Code::kInvalidArgument},
      {EACCES, Code::kInternal, Code::kPermissionDenied},
      {EPERM, Code::kPermissionDenied, Code::kPermissionDenied},
      {EROFS, Code::kInternal, Code::kPermissionDenied},
      {ENOSPC, Code::kInternal, Code::kResourceExhausted},
      {EDQUOT, Code::kInternal, Code::kResourceExhausted},
      {EFBIG, Code::kInternal, Code::kResourceExhausted},
      // Not in the table: the code the guest gave stays.
      {EIO, Code::kInternal, Code::kInternal},
      {ECONNREFUSED, Code::kUnavailable, Code::kUnavailable},
      {ETIMEDOUT, Code::kDeadlineExceeded, Code::kDeadlineExceeded},
      {ESRCH, Code::kNotFound, Code::kNotFound},
      // No errno: nothing to map.
      {0, Code::kInternal, Code::kInternal},
      {0, Code::kProtocol, Code::kProtocol},
  };
  for (const auto& r : rows) {
    Error in(r.from, "agent: rename /a /b", r.sys_errno);
    Error out = guestError(in);
    EXPECT_EQ(out.code(), r.want) << "errno " << r.sys_errno << " reported as " << codeName(r.from);
    EXPECT_EQ(out.sysErrno(), r.sys_errno);
    EXPECT_EQ(out.context(), in.context()) << "the guest's words are kept";
  }
}

}  // namespace
}  // namespace vessel::agentclient
