#include "volumes/file_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

namespace vessel::volumes {

FileServer::~FileServer() {
  if (proc_.running()) (void)proc_.terminate(std::chrono::milliseconds(500));
  // The uid is free once no process runs as it.
  if (uids_ && uid_) uids_->free(uid_);
}

Result<std::unique_ptr<FileServer>> FileServer::start(const FileServerOptions& o,
                                                      const std::string& root, bool read_only,
                                                      const std::string& name) {
  if (!o.uids)
    return Error(Code::kFailedPrecondition,
                 "volume file servers need the VM uid range (vesseld as root, with the jail)");
  std::unique_ptr<FileServer> s(new FileServer());
  VESSEL_ASSIGN_OR_RETURN(s->uid_, o.uids->allocate(name));
  s->uids_ = o.uids;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return Error::fromErrno("volume file server: socketpair");
  s->sock_.reset(sv[0]);
  Fd theirs(sv[1]);
  SpawnOptions so;
  so.argv = {o.binary, "--root", root, "--fd", "3", "--uid", std::to_string(s->uid_)};
  if (read_only) so.argv.push_back("--read-only");
  so.fds = {{theirs.get(), 3}, {STDERR_FILENO, STDERR_FILENO}};
  VESSEL_ASSIGN_OR_RETURN(s->proc_, ChildProcess::spawn(so));
  return s;
}

}  // namespace vessel::volumes
