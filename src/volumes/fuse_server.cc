#include "volumes/fuse_server.h"

#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "volumes/fuse_fs.h"

namespace vessel::volumes {

namespace {

bool parseUint(std::string_view s, uint32_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

int fail(const char* what) {
  std::fprintf(stderr, "vessel-volume-server: %s: %s\n", what, std::strerror(errno));
  return 1;
}

// Of the lock calls, only OFD locks that never wait and flock with LOCK_NB
// (a wait is the loop's, fuse_fs_locks.cc): no process-owned locks, no
// leases (which would stall other sandboxes' opens), directory notices or
// fd signals. The kernel reads fcntl's command as 32 bits: compared as such.
bool denyLockCalls(scmp_filter_ctx ctx) {
  static const int kDeniedFcntl[] = {F_SETLK,    F_SETLKW, F_GETLK,  F_OFD_SETLKW, F_SETLEASE,
                                     F_GETLEASE, F_NOTIFY, F_SETOWN, F_SETOWN_EX,  F_SETSIG};
  bool ok = true;
  for (const char* name : {"fcntl", "fcntl64"}) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    for (int cmd : kDeniedFcntl)
      ok = ok && seccomp_rule_add(
                     ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
                     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, static_cast<scmp_datum_t>(cmd))) == 0;
  }
  // flock(fd, LOCK_SH or LOCK_EX) without LOCK_NB would block the loop.
  return ok && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(flock), 1,
                                SCMP_A1(SCMP_CMP_MASKED_EQ, LOCK_NB | LOCK_UN, 0)) == 0;
}

// The calls a file server never makes: refused with EPERM, the rest
// allowed (a deny-list: libfuse and libc need many ordinary calls).
int installSeccomp() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return errno = ENOMEM, -1;
  static const char* const kDenied[] = {"socket",
                                        "socketpair",
                                        "connect",
                                        "bind",
                                        "listen",
                                        "accept",
                                        "accept4",
                                        "execve",
                                        "execveat",
                                        "ptrace",
                                        "mount",
                                        "umount2",
                                        "unshare",
                                        "setns",
                                        "chroot",
                                        "pivot_root",
                                        "kexec_load",
                                        "kexec_file_load",
                                        "init_module",
                                        "finit_module",
                                        "delete_module",
                                        "bpf",
                                        "perf_event_open",
                                        "keyctl",
                                        "add_key",
                                        "request_key",
                                        "userfaultfd",
                                        "process_vm_readv",
                                        "process_vm_writev",
                                        "open_by_handle_at",
                                        "fsopen",
                                        "fsmount",
                                        "fsconfig",
                                        "move_mount",
                                        "open_tree",
                                        "mount_setattr",
                                        "setuid",
                                        "setgid",
                                        "setreuid",
                                        "setregid",
                                        "setresuid",
                                        "setresgid",
                                        "setgroups",
                                        "capset",
                                        "mknod",
                                        "quotactl",
                                        "swapon",
                                        "swapoff",
                                        "reboot",
                                        "settimeofday",
                                        "clock_settime",
                                        "sethostname"};
  bool ok = true;
  for (const char* name : kDenied) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0) == 0;
  }
  ok = ok && denyLockCalls(ctx);
  if (!ok) {
    seccomp_release(ctx);
    return errno = EINVAL, -1;
  }
  int r = seccomp_load(ctx);
  seccomp_release(ctx);
  if (r != 0) return errno = -r, -1;
  return 0;
}

// Namespaces and the chroot: nothing outside the volume's directory is
// reachable by path, and there is no network to reach.
int enterRoot(const std::string& root) {
  if (::unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) != 0)
    return fail("unshare");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return fail("make mounts private");
  if (::chdir(root.c_str()) != 0) return fail("chdir to the volume");
  if (::chroot(".") != 0) return fail("chroot");
  if (::chdir("/") != 0) return fail("chdir /");
  return 0;
}

// The uid and the four capabilities a passthrough needs to give files the
// guest's owners; nothing else, in any set.
int dropPrivileges(uint32_t uid) {
  capng_clear(CAPNG_SELECT_BOTH);
  if (capng_updatev(CAPNG_ADD, static_cast<capng_type_t>(CAPNG_EFFECTIVE | CAPNG_PERMITTED),
                    CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, -1) != 0)
    return errno = EINVAL, fail("capabilities");
  int r = capng_change_id(static_cast<int>(uid), static_cast<int>(uid),
                          static_cast<capng_flags_t>(CAPNG_DROP_SUPP_GRP | CAPNG_CLEAR_BOUNDING));
  if (r != 0) return errno = r < 0 ? -r : EPERM, fail("change uid");
  if (::getuid() != uid || ::geteuid() != uid) return errno = EPERM, fail("uid not changed");
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return fail("no_new_privs");
  return 0;
}

// fuse_session_loop's loop, waking every kLockRetryMs while a lock request
// waits: the lock it waits for may be another sandbox's, released in
// another server. Each request may also free one (an unlock, a close).
int serve(fuse_session* se, PassthroughFs& fs) {
  fuse_buf buf{};
  int r = 0;
  while (!fuse_session_exited(se)) {
    pollfd p{fuse_session_fd(se), POLLIN, 0};
    int n = ::poll(&p, 1, fs.lockWaiting() ? kLockRetryMs : -1);
    if (n < 0 && errno != EINTR) {
      r = -errno;
      break;
    }
    if (n > 0) {
      r = fuse_session_receive_buf(se, &buf);
      if (r == -EINTR) continue;
      if (r <= 0) break;
      fuse_session_process_buf(se, &buf);
    }
    fs.retryLocks();
  }
  std::free(buf.mem);
  fuse_session_reset(se);
  return r;
}

}  // namespace

Result<ServerOptions> parseServerArgs(int argc, char** argv) {
  ServerOptions o;
  bool have_fd = false, have_uid = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> Result<std::string_view> {
      if (i + 1 >= argc) return Error(Code::kInvalidArgument, std::string(a) + " needs a value");
      return std::string_view(argv[++i]);
    };
    if (a == "--read-only") {
      o.read_only = true;
    } else if (a == "--root") {
      VESSEL_ASSIGN_OR_RETURN(auto v, value());
      o.root = v;
    } else if (a == "--fd" || a == "--uid") {
      VESSEL_ASSIGN_OR_RETURN(auto v, value());
      uint32_t n = 0;
      if (!parseUint(v, n)) return Error(Code::kInvalidArgument, std::string(a) + ": not a number");
      if (a == "--fd") {
        o.fd = static_cast<int>(n);
        have_fd = true;
      } else {
        o.uid = n;
        have_uid = true;
      }
    } else {
      return Error(Code::kInvalidArgument, "unknown argument " + std::string(a));
    }
  }
  if (o.root.empty() || o.root[0] != '/' || !have_fd || o.fd < 3 || !have_uid || o.uid == 0)
    return Error(Code::kInvalidArgument,
                 "usage: vessel-volume-server --root /DIR --fd N (3 or more) --uid U (not 0) "
                 "[--read-only]");
  return o;
}

int runFileServer(const ServerOptions& o) {
  int type = 0;
  socklen_t len = sizeof type;
  if (::getsockopt(o.fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET)
    return errno = EINVAL, fail("--fd is not a SOCK_SEQPACKET socket");
  FsOptions fo;
  fo.read_only = o.read_only;
  fo.root.reset(::open(o.root.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fo.root) return fail("open the volume's root");
  // Kept open across the chroot: files are reopened through their own
  // fds' magic links, never by a path.
  fo.proc_self_fd.reset(::open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fo.proc_self_fd) return fail("open /proc/self/fd");
  if (enterRoot(o.root) != 0) return 1;
  PassthroughFs fs(std::move(fo));
  const char* argv0[] = {"vessel-volume-server", nullptr};
  // SAFETY: fuse_args only reads argv (libfuse copies what it keeps).
  fuse_args args = FUSE_ARGS_INIT(1, const_cast<char**>(argv0));
  fuse_session* se = fuse_session_new(&args, &PassthroughFs::ops(), sizeof(fuse_lowlevel_ops), &fs);
  if (!se) return errno = EINVAL, fail("fuse_session_new");
  // "/dev/fd/N": libfuse takes fd N as its device, here the socket.
  std::string dev = "/dev/fd/" + std::to_string(o.fd);
  if (fuse_session_mount(se, dev.c_str()) != 0) {
    fuse_session_destroy(se);
    return errno = EINVAL, fail("fuse_session_mount");
  }
  int confined = dropPrivileges(o.uid);
  if (confined == 0 && installSeccomp() != 0) confined = fail("seccomp");
  if (confined != 0) {
    fuse_session_destroy(se);
    return 1;
  }
  int r = serve(se, fs);
  fuse_session_destroy(se);
  return r < 0 ? 1 : 0;
}

}  // namespace vessel::volumes
