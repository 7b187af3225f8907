#pragma once
// Where volumes' images live and how their files are reached, as the
// volumes API sees it (docs/design.md, "Volumes"). Names, tenants and the
// quota are the store's, checked by the API before it asks; a keeper makes,
// copies and removes a volume's image and reaches its files, given the
// volume's record. One machine keeps its own (api/local_volumes.h); an API
// replica's keeper asks the node holding each volume over the node API
// (cluster/cluster_volumes.h), and that node serves the call from its own
// local keeper: one implementation of the volume logic, reached locally or
// over the network. Called on the io thread; what blocks runs elsewhere.
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "store/store.h"

namespace vessel::ops {

// A file, directory or link in a volume (volumes::FileInfo as the API and
// the node API carry it).
struct VolumeFileInfo {
  std::string name;  // the last component ("" for the root)
  std::string path;  // "/"-led, within the volume
  std::string type;  // file | dir | symlink | other
  uint64_t size = 0;
  uint32_t mode = 0;
  uint32_t uid = 0, gid = 0;
  int64_t mtime_ms = 0;
  std::string target;  // a symlink's, as stored (never followed)
};

// A mounted volume's filesystem, as statfs sees it.
struct VolumeUsage {
  uint64_t used_bytes = 0, free_bytes = 0;
};

// A file being read: its next piece, nullopt at its end.
class VolumeReader {
 public:
  virtual ~VolumeReader() = default;
  virtual boost::asio::awaitable<Result<std::optional<std::string>>> next() = 0;
};

// An atomic write: dropped before commit(), it changes nothing.
class VolumeWriter {
 public:
  virtual ~VolumeWriter() = default;
  virtual boost::asio::awaitable<Status> append(std::string data) = 0;
  virtual boost::asio::awaitable<Result<VolumeFileInfo>> commit() = 0;
};

// Every call takes the volume's record (its id, node, size, read_only) by
// value: g++ 12 needs named arguments (CONTRIBUTING.md, "Coroutines under
// g++ 12", rule 1).
class VolumeKeeper {
 public:
  virtual ~VolumeKeeper() = default;

  // The node a new volume of `size_mib` goes to ("" on one machine);
  // kUnavailable when no node can keep it.
  virtual Result<std::string> place(uint64_t size_mib) = 0;
  // An empty volume `v` (its record stored first), mounted on its node.
  virtual boost::asio::awaitable<Status> create(store::VolumeRecord v) = 0;
  // `to` a point-in-time copy of `from` (on from's node; `to.read_only`
  // for a snapshot).
  virtual boost::asio::awaitable<Status> copy(store::VolumeRecord from, store::VolumeRecord to) = 0;
  // Whether the volume's node is up (kUnavailable naming it when not): a
  // delete is refused then, rather than leave the image behind.
  virtual Status reachable(const store::VolumeRecord&) { return okStatus(); }
  // The volume's record is gone: its mounts in sandboxes end and its image
  // goes.
  virtual boost::asio::awaitable<Status> remove(store::VolumeRecord v) = 0;
  virtual boost::asio::awaitable<Result<VolumeUsage>> usage(store::VolumeRecord v) = 0;

  // Its files, paths as volumes/files.h reads them (a snapshot's refuse
  // every change).
  virtual boost::asio::awaitable<Result<std::vector<VolumeFileInfo>>> list(store::VolumeRecord v,
                                                                           std::string path) = 0;
  virtual boost::asio::awaitable<Status> mkdir(store::VolumeRecord v, std::string path,
                                               uint32_t mode, bool parents) = 0;
  virtual boost::asio::awaitable<Status> removePath(store::VolumeRecord v, std::string path,
                                                    bool recursive) = 0;
  virtual boost::asio::awaitable<Result<std::unique_ptr<VolumeReader>>> read(store::VolumeRecord v,
                                                                             std::string path) = 0;
  virtual boost::asio::awaitable<Result<std::unique_ptr<VolumeWriter>>> write(store::VolumeRecord v,
                                                                              std::string path,
                                                                              uint32_t mode) = 0;
};

}  // namespace vessel::ops
