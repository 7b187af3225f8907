#pragma once
// The jail a hypervisor process runs in, in the manner of Firecracker's
// jailer: its own unprivileged uid and gid (leased from a host-wide range),
// no capabilities, no_new_privs, a private mount namespace whose root is an
// empty tmpfs holding only bind mounts of the files that VM needs (at the
// same paths as on the host, so command lines, qcow2 backing names and the
// sockets vesseld connects to stay valid), device nodes of its own (/dev/kvm
// owned by its uid, so it needs no host group), its own empty network, IPC
// and UTS namespaces, a PID namespace in which it is PID 1 (Jail::spawn),
// and its own cgroup.
//
// The mounts exist only in the VM's namespace: when the process dies they
// go with it. What stays on the host (the cgroup, the empty mount-point
// directory, the uid lease, files lent to the uid) is undone by ~Jail.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/child_process.h"
#include "base/result.h"
#include "os/cgroup.h"

namespace vessel::os {

// The VM uid range vesseld leases from unless told (--vm-uid-range):
// 0x70000000-0x7000ffff, above every range useradd grants in /etc/subuid
// (SUB_UID_MAX 600100000) and systemd's container ranges (up to
// 1879048191), below its foreign range (2147352576) and 2^31.
inline constexpr std::string_view kDefaultVmUidRange = "1879048192-1879113727";

struct UidRange {
  uint32_t first = 0;
  uint32_t last = 0;
};
// "1879048192-1879113727"; both ends above 0 and at most 2^31.
Result<UidRange> parseUidRange(std::string_view s);

// The host's own users of ids: /etc/passwd and /etc/group (accounts) and
// /etc/subuid and /etc/subgid (ranges granted to users for their user
// namespaces). A VM uid (used as its gid too) that is also one of these
// would own that account's files or share a container's ids.
struct HostIdFiles {
  std::string passwd = "/etc/passwd";
  std::string group = "/etc/group";
  std::string subuid = "/etc/subuid";
  std::string subgid = "/etc/subgid";
};
// One id range a host file claims, with where it came from for the error.
struct ClaimedIds {
  UidRange range;
  std::string source;  // "/etc/subuid:3 (alice)"
};
// Parses the id ranges named by the text of a passwd/group file (`sub`
// false: field 3 is one id) or a subuid/subgid file (`sub` true:
// name:first:count). Bounded: at most 65536 lines of at most 4096 bytes;
// lines it cannot read are errors (a range that cannot be read cannot be
// shown not to overlap). Empty lines and '#' comments are skipped.
Result<std::vector<ClaimedIds>> parseIdFile(std::string_view text, bool sub,
                                            const std::string& name);
// Refuses `range` when any id in it is claimed by the files (a missing file
// claims nothing).
Status checkUidRangeFree(UidRange range, const HostIdFiles& files = {});

// Leases uids (each used as uid and gid) to VMs. Leases are files in a
// host-wide directory, created with O_EXCL: two vesselds on one host never
// hand out the same uid, and a lease outlives a vesseld restart (the
// adopted VM keeps its uid).
class UidPool {
 public:
  // Refuses a range that overlaps the host's ids (checkUidRangeFree).
  static Result<std::shared_ptr<UidPool>> open(UidRange range, std::string lease_dir,
                                               std::string owner, const HostIdFiles& host = {});
  Result<uint32_t> allocate(const std::string& vm);
  // Takes the lease of a running VM found after a restart.
  Status claim(uint32_t uid, const std::string& vm);
  void free(uint32_t uid);
  // Drops this owner's leases whose uid no process runs as any more.
  size_t sweep();
  bool contains(uint32_t uid) const { return uid >= range_.first && uid <= range_.last; }
  size_t inUse() const;

 private:
  UidPool(UidRange r, std::string dir, std::string owner)
      : range_(r), dir_(std::move(dir)), owner_(std::move(owner)), next_(r.first) {}
  std::string leasePath(uint32_t uid) const { return dir_ + "/" + std::to_string(uid); }
  UidRange range_;
  std::string dir_;
  std::string owner_;
  mutable std::mutex mu_;
  uint32_t next_;
  std::set<uint32_t> mine_;
};

struct JailerConfig {
  std::shared_ptr<UidPool> uids;
  CgroupConfig cgroups;
  // Host directory holding one empty mount-point directory per VM.
  std::string jail_root;
  // Prefix of every cgroup and jail directory name: unique per vesseld.
  std::string name_prefix;
  // false: a mount namespace alone, as the jail was before issue 24 (no
  // network, IPC, UTS or PID namespace of its own). Only for
  // `bench_create --jail-overhead`, which measures what they cost; no flag
  // of vesseld turns them off.
  bool own_namespaces = true;
};

// A device node made for the VM alone, at the host device's path: the same
// type and number, owned by the VM's uid, mode 0600, on a tmpfs of its own
// (read-only once made) in the VM's mount namespace. The VM reaches the
// device without a host group that other files may be shared with.
struct DeviceNode {
  std::string path;  // e.g. /dev/kvm; not directly in /
};

struct BindMount {
  std::string path;  // absolute host path, mounted at the same path inside
  bool writable = false;
  bool device = false;  // a device node: keep its dev semantics
  bool exec = false;    // binaries and libraries (/usr)
};

struct JailSpec {
  std::string id;  // names the cgroup and the jail directory
  std::vector<BindMount> mounts;
  // Symlinks at the root of the jail (/lib -> usr/lib on merged-/usr hosts).
  std::vector<std::pair<std::string, std::string>> symlinks;
  // Host paths lent to the VM's uid for its life (chown; chowned back to
  // root after): its own writable files and its socket directory.
  std::vector<std::string> owned;
  std::vector<DeviceNode> devices;
  CgroupLimits limits;
};

class Jail {
 public:
  ~Jail();
  Jail(const Jail&) = delete;
  Jail& operator=(const Jail&) = delete;

  static Result<std::unique_ptr<Jail>> create(const JailerConfig& cfg, JailSpec spec);
  // The jail of a VM a previous vesseld started: `pid` runs as its uid.
  static Result<std::unique_ptr<Jail>> adopt(const JailerConfig& cfg, JailSpec spec, pid_t pid);

  uint32_t uid() const { return uid_; }
  const std::string& dir() const { return dir_; }
  const Cgroup& cgroup() const { return cgroup_; }
  // For removing it once the process has exited (Cgroup::removeAsync)
  // before the Jail goes.
  Cgroup& cgroup() { return cgroup_; }

  // Starts `opts` in the jail: as PID 1 of a PID namespace of its own
  // (it sees no host process, and when it dies the kernel kills whatever
  // it left in there), with preExec() below run before opts.pre_exec. The
  // ChildProcess is the jailed process itself: its pid (the host's),
  // pidfd and exit status are the usual ones.
  Result<ChildProcess> spawn(SpawnOptions opts) const;

  // For SpawnOptions::pre_exec: joins the cgroup, unshares the mount,
  // network, IPC and UTS namespaces, builds the mount view, pivots into it
  // and drops to the VM's uid. Everything but the PID namespace (which
  // only spawn() above can give). Only async-signal-safe calls; the Jail
  // must outlive the spawn.
  std::function<int()> preExec() const {
    return [this] { return enter(); };
  }

  // Lets go of everything without undoing it (the VM outlives vesseld).
  void release();

 private:
  explicit Jail(const JailerConfig& cfg) : cfg_(cfg) {}
  Status plan();
  int enter() const noexcept;

  struct Step {
    enum Kind { kMkdir, kTouch, kBind, kSymlink, kDevTmpfs, kMknod, kSeal } kind;
    std::string target;  // inside the new root (jail dir + path)
    std::string source;
    unsigned long remount_flags = 0;
    dev_t rdev = 0;   // kMknod
    mode_t mode = 0;  // kMknod: S_IFCHR or S_IFBLK
  };
  JailerConfig cfg_;
  JailSpec spec_;
  uint32_t uid_ = 0;
  bool leased_ = false;
  std::string dir_;
  Cgroup cgroup_;
  std::vector<std::string> procs_;
  std::vector<Step> steps_;
  struct Lent {
    std::string path;
    uid_t uid;
    gid_t gid;
    mode_t mode;
  };
  std::vector<Lent> lent_;  // owned paths as they were, to give back
  bool released_ = false;
};

}  // namespace vessel::os
