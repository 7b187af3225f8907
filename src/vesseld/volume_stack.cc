#include "vesseld/volume_stack.h"

#include <unistd.h>

#include <filesystem>

#include "base/log.h"
#include "os/jail.h"

namespace vessel::vesseld {

namespace fs = std::filesystem;

namespace {

// vessel-volume-server: next to vesseld (the build tree), else
// <prefix>/lib/vessel (installed); "" when neither has it.
std::string volumeServerBinary() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (auto p : {self.parent_path() / "vessel-volume-server",
                 self.parent_path().parent_path() / "lib/vessel/vessel-volume-server"})
    if (fs::exists(p, ec)) return p.string();
  return "";
}

// Volumes in sandboxes on this machine, or null (then a create naming
// volumes is refused, saying why): the file servers need root to confine
// themselves and a uid range to run as.
std::unique_ptr<api::VolumeMounts> volumeMounts(const VolumeStackSettings& cfg,
                                                volumes::VolumeHost& host) {
  Logger log("volumes");
  volumes::FileServerOptions o;
  o.binary = volumeServerBinary();
  auto range = os::parseUidRange(cfg.vm_uid_range);
  if (::geteuid() != 0 || o.binary.empty() || !range.ok()) {
    log.warn("volumes cannot be mounted in sandboxes here: {}",
             ::geteuid() != 0 ? "vesseld is not root"
             : o.binary.empty()
                 ? "vessel-volume-server is neither next to vesseld nor in <prefix>/lib/vessel"
                 : range.error().message());
    return nullptr;
  }
  auto uids = os::UidPool::open(*range, cfg.uid_lease_dir, cfg.state_dir + "/volume-servers");
  if (!uids.ok()) {
    log.warn("volumes cannot be mounted in sandboxes here: {}", uids.error().message());
    return nullptr;
  }
  (*uids)->sweep();  // the leases of servers a killed vesseld left
  o.uids = *uids;
  return std::make_unique<api::VolumeMounts>(host, std::move(o));
}

}  // namespace

Result<std::unique_ptr<VolumeStack>> VolumeStack::build(const VolumeStackSettings& s,
                                                        store::Store& store) {
  std::unique_ptr<VolumeStack> v(new VolumeStack());
  VESSEL_ASSIGN_OR_RETURN(v->host_, volumes::VolumeHost::open({s.state_dir + "/volumes"}));
  v->mounts_ = volumeMounts(s, *v->host_);
  v->keeper_ = std::make_unique<api::LocalVolumes>(*v->host_, s.node);
  v->keeper_->setMounts(v->mounts_.get());
  // Mounted again (or adopted) before anything is served.
  VESSEL_TRY(v->keeper_->restore(store));
  return v;
}

VolumeStack::~VolumeStack() = default;

uint64_t VolumeStack::freeMib() const {
  if (!mounts_) return 0;
  return keeper_->freeMib().value_or(0);
}

}  // namespace vessel::vesseld
