#pragma once
// vessel-volume-server (docs/design.md, "Volumes"): one process per mount
// of a volume in a sandbox, serving that sandbox's FUSE session from the
// volume's host directory. Started by vesseld as root with one end of a
// SOCK_SEQPACKET socketpair (one FUSE message per packet, as /dev/fuse
// gives them); vesseld relays the other end to the sandbox's agent.
//
// Before it reads a byte from the guest it confines itself: its own mount,
// network, IPC and UTS namespaces (no network at all), chrooted into the
// volume's directory, its uid a non-root one from the VM range with only
// the capabilities a file server needs to keep the guest's owners and
// modes (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID; none in its
// bounding set beyond them), no_new_privs, and a seccomp filter refusing
// the calls it never makes (sockets, exec, mounts, namespaces, ptrace,
// modules, BPF, handles).
#include <cstdint>
#include <string>

#include "base/result.h"

namespace vessel::volumes {

struct ServerOptions {
  std::string root;  // the volume's host directory (VolumeHost::root)
  int fd = -1;       // the session's socket
  bool read_only = false;
  uint32_t uid = 0;  // and gid; not 0
};

// Parses argv: --root DIR --fd N --uid U [--read-only].
Result<ServerOptions> parseServerArgs(int argc, char** argv);

// Confines the process and serves until the session ends (the socket's
// peer closed, or the guest unmounted). Returns the exit code.
int runFileServer(const ServerOptions& o);

}  // namespace vessel::volumes
