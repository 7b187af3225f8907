#pragma once
// Starting a volume mount's file server (vessel-volume-server, see
// fuse_server.h) from vesseld: a SOCK_SEQPACKET socketpair, the server on
// one end (confining itself as it starts, under a uid leased from the VM
// range), vesseld's relay to the sandbox's agent on the other.
#include <cstdint>
#include <memory>
#include <string>

#include "base/child_process.h"
#include "base/fd.h"
#include "base/result.h"
#include "os/jail.h"

namespace vessel::volumes {

struct FileServerOptions {
  std::string binary;                 // vessel-volume-server
  std::shared_ptr<os::UidPool> uids;  // the VM range's leases
};

// One running server. Destroying it kills it and gives back its uid.
class FileServer {
 public:
  ~FileServer();
  FileServer(const FileServer&) = delete;
  FileServer& operator=(const FileServer&) = delete;

  // Starts a server for the directory `root` (a mounted volume's); `name`
  // names its uid lease (the sandbox and the mount).
  static Result<std::unique_ptr<FileServer>> start(const FileServerOptions& o,
                                                   const std::string& root, bool read_only,
                                                   const std::string& name);
  // vesseld's end of the socketpair: one FUSE message per packet.
  Fd& socket() { return sock_; }
  uint32_t uid() const { return uid_; }
  ChildProcess& process() { return proc_; }

 private:
  FileServer() = default;
  ChildProcess proc_;
  Fd sock_;
  uint32_t uid_ = 0;
  std::shared_ptr<os::UidPool> uids_;
};

}  // namespace vessel::volumes
