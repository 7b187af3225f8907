// This machine's volumes (local_volumes.h): each call resolves the volume
// on volumes::VolumeHost and runs on a worker thread. A read hands out the
// open file in 256 KiB pieces; a write goes to a temporary file beside the
// target, renamed over it only at commit, so a write dropped unfinished
// changes nothing.
#include "api/local_volumes.h"

#include <unistd.h>

#include <set>

#include "base/disk_space.h"
#include "base/log.h"
#include "base/offload.h"

namespace vessel::api {

using volumes::VolumeFiles;

namespace {

constexpr size_t kReadChunk = 256 * 1024;

const Logger& log() {
  static const Logger l("volumes");
  return l;
}

class LocalReader final : public ops::VolumeReader {
 public:
  LocalReader(asio::thread_pool& pool, Fd file)
      : pool_(pool), file_(std::make_shared<Fd>(std::move(file))) {}
  asio::awaitable<Result<std::optional<std::string>>> next() override {
    auto piece = [file = file_]() -> Result<std::optional<std::string>> {
      std::string buf(kReadChunk, '\0');
      ssize_t n = ::read(file->get(), buf.data(), buf.size());
      if (n < 0) return Error::fromErrno("read the volume's file");
      if (n == 0) return std::optional<std::string>();
      buf.resize(static_cast<size_t>(n));
      return std::optional<std::string>(std::move(buf));
    };
    co_return co_await offload(pool_, std::move(piece));
  }

 private:
  asio::thread_pool& pool_;
  std::shared_ptr<Fd> file_;  // shared with a piece in flight
};

class LocalWriter final : public ops::VolumeWriter {
 public:
  LocalWriter(asio::thread_pool& pool, VolumeFiles::Write w)
      : pool_(pool), w_(std::make_shared<VolumeFiles::Write>(std::move(w))) {}
  asio::awaitable<Status> append(std::string data) override {
    auto run = [w = w_, data = std::move(data)] { return w->append(data); };
    co_return co_await offload(pool_, std::move(run));
  }
  asio::awaitable<Result<ops::VolumeFileInfo>> commit() override {
    auto run = [w = w_]() -> Result<ops::VolumeFileInfo> {
      VESSEL_ASSIGN_OR_RETURN(auto info, w->commit());
      return toVolumeFileInfo(info);
    };
    co_return co_await offload(pool_, std::move(run));
  }

 private:
  asio::thread_pool& pool_;
  // Unfinished when the last holder drops it: the temporary goes with it.
  std::shared_ptr<VolumeFiles::Write> w_;
};

}  // namespace

ops::VolumeFileInfo toVolumeFileInfo(const volumes::FileInfo& f) {
  return ops::VolumeFileInfo{f.name, f.path, f.type,     f.size,  f.mode,
                             f.uid,  f.gid,  f.mtime_ms, f.target};
}

LocalVolumes::LocalVolumes(volumes::VolumeHost& host, std::string node)
    : host_(host),
      node_(std::move(node)),
      disk_(std::make_unique<asio::thread_pool>(1)),
      files_(std::make_unique<asio::thread_pool>(2)) {}

LocalVolumes::~LocalVolumes() {
  files_->join();
  disk_->join();
}

Status LocalVolumes::restore(store::Store& store) {
  VESSEL_ASSIGN_OR_RETURN(auto records, store.listNodeVolumes(node_));
  std::set<std::string> known;
  for (const auto& v : records) {
    known.insert(v.id);
    // One volume that will not mount fails its own calls (503), not vesseld.
    if (auto s = host_.restore(v.id, v.read_only); !s.ok())
      log().error("volume {} ({} of tenant {}): {}", v.id, v.name, v.tenant_id,
                  s.error().message());
  }
  for (const auto& id : host_.imageIds()) {
    if (known.count(id)) continue;
    // Kept, not deleted: a store restored from a backup may lack a volume
    // that has data.
    log().warn("volume image {} has no record (a create or delete cut short?): moved to {}", id,
               "orphans/");
    if (auto s = host_.setAside(id); !s.ok()) log().error("{}", s.error().message());
  }
  return okStatus();
}

Result<uint64_t> LocalVolumes::freeMib() const { return freeDiskMib(host_.dir()); }

asio::awaitable<Status> LocalVolumes::create(store::VolumeRecord v) {
  auto make = [host = &host_, id = v.id, mib = v.size_mib] { return host->create(id, mib); };
  co_return co_await offload(*disk_, std::move(make));
}

asio::awaitable<Status> LocalVolumes::copy(store::VolumeRecord from, store::VolumeRecord to) {
  auto make = [host = &host_, from = from.id, id = to.id, ro = to.read_only] {
    return host->copy(from, id, ro);
  };
  co_return co_await offload(*disk_, std::move(make));
}

asio::awaitable<Status> LocalVolumes::remove(store::VolumeRecord v) {
  // Forced while sandboxes mount it: their mounts end before the image goes.
  if (mounts_) mounts_->releaseVolume(v.id);
  auto drop = [host = &host_, id = v.id] { return host->remove(id); };
  co_return co_await offload(*disk_, std::move(drop));
}

asio::awaitable<Result<ops::VolumeUsage>> LocalVolumes::usage(store::VolumeRecord v) {
  // statfs of a mounted filesystem: no disk I/O, fine on the io thread.
  auto use = host_.usage(v.id);
  if (!use.ok()) co_return std::move(use).error();
  co_return ops::VolumeUsage{use->used_bytes, use->free_bytes};
}

Result<VolumeFiles> LocalVolumes::filesOf(const store::VolumeRecord& v) const {
  VESSEL_ASSIGN_OR_RETURN(std::string root, host_.root(v.id));
  return VolumeFiles::open(root, v.read_only);
}

asio::awaitable<Result<std::vector<ops::VolumeFileInfo>>> LocalVolumes::list(store::VolumeRecord v,
                                                                             std::string path) {
  auto f = filesOf(v);
  if (!f.ok()) co_return std::move(f).error();
  auto run = [files = std::move(*f),
              path = std::move(path)]() -> Result<std::vector<ops::VolumeFileInfo>> {
    VESSEL_ASSIGN_OR_RETURN(auto entries, files.list(path));
    std::vector<ops::VolumeFileInfo> out;
    out.reserve(entries.size());
    for (const auto& e : entries) out.push_back(toVolumeFileInfo(e));
    return out;
  };
  co_return co_await offload(*files_, std::move(run));
}

asio::awaitable<Status> LocalVolumes::mkdir(store::VolumeRecord v, std::string path, uint32_t mode,
                                            bool parents) {
  auto f = filesOf(v);
  if (!f.ok()) co_return std::move(f).error();
  auto run = [files = std::move(*f), path = std::move(path), mode, parents] {
    return files.mkdir(path, mode, parents);
  };
  co_return co_await offload(*files_, std::move(run));
}

asio::awaitable<Status> LocalVolumes::removePath(store::VolumeRecord v, std::string path,
                                                 bool recursive) {
  auto f = filesOf(v);
  if (!f.ok()) co_return std::move(f).error();
  auto run = [files = std::move(*f), path = std::move(path), recursive] {
    return files.remove(path, recursive);
  };
  co_return co_await offload(*files_, std::move(run));
}

asio::awaitable<Result<std::unique_ptr<ops::VolumeReader>>> LocalVolumes::read(
    store::VolumeRecord v, std::string path) {
  auto f = filesOf(v);
  if (!f.ok()) co_return std::move(f).error();
  auto open = [files = std::move(*f), path = std::move(path)] { return files.openRead(path); };
  auto fd = co_await offload(*files_, std::move(open));
  if (!fd.ok()) co_return std::move(fd).error();
  std::unique_ptr<ops::VolumeReader> r = std::make_unique<LocalReader>(*files_, std::move(*fd));
  co_return r;
}

asio::awaitable<Result<std::unique_ptr<ops::VolumeWriter>>> LocalVolumes::write(
    store::VolumeRecord v, std::string path, uint32_t mode) {
  auto f = filesOf(v);
  if (!f.ok()) co_return std::move(f).error();
  auto begin = [files = std::move(*f), path = std::move(path), mode] {
    return files.write(path, mode);
  };
  auto opened = co_await offload(*files_, std::move(begin));
  if (!opened.ok()) co_return std::move(opened).error();
  std::unique_ptr<ops::VolumeWriter> w = std::make_unique<LocalWriter>(*files_, std::move(*opened));
  co_return w;
}

}  // namespace vessel::api
