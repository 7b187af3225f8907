#include "hypervisor/qemu/qcow2_header.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "base/byte_reader.h"
#include "base/fd.h"

namespace vessel::hypervisor::qemu {

namespace {

// docs/interop/qcow2.txt of QEMU 7.2: the fields, feature bits and
// extension types this parser knows.
constexpr uint32_t kMagic = 0x514649fb;  // "QFI\xfb"
constexpr size_t kV2HeaderBytes = 72;
constexpr size_t kV3HeaderBytes = 104;

constexpr uint64_t kIncompatDirty = 1u << 0;
constexpr uint64_t kIncompatCorrupt = 1u << 1;
constexpr uint64_t kIncompatDataFile = 1u << 2;
constexpr uint64_t kIncompatCompression = 1u << 3;
constexpr uint64_t kIncompatExtendedL2 = 1u << 4;
// Dirty (lazy refcounts of a QEMU that was killed), a compression type,
// extended L2 entries: how clusters are laid out inside this one file.
constexpr uint64_t kIncompatAllowed = kIncompatDirty | kIncompatCompression | kIncompatExtendedL2;

constexpr uint64_t kAutoclearBitmaps = 1u << 0;
constexpr uint64_t kAutoclearDataFileRaw = 1u << 1;

constexpr uint32_t kExtEnd = 0;
constexpr uint32_t kExtBackingFormat = 0xe2792aca;
constexpr uint32_t kExtFeatureTable = 0x6803f857;
constexpr uint32_t kExtCrypto = 0x0537be77;
constexpr uint32_t kExtBitmaps = 0x23852875;
constexpr uint32_t kExtDataFile = 0x44415441;
// QEMU keeps a backing format name in a 16-byte buffer, NUL included.
constexpr size_t kMaxBackingFormat = 15;

Error bad(const std::string& what) { return Error(Code::kProtocol, "qcow2 header: " + what); }

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

bool readU64be(ByteReader& r, uint64_t* out) {
  uint32_t hi = 0, lo = 0;
  if (!r.readU32be(&hi) || !r.readU32be(&lo)) return false;
  *out = (uint64_t{hi} << 32) | lo;
  return true;
}

// QEMU's path_has_protocol: a ':' before the first '/' makes the name a
// protocol's (json:, nbd:, http:, ...), not a file's.
bool namesProtocol(std::string_view name) {
  size_t p = name.find_first_of(":/");
  return p != std::string_view::npos && name[p] == ':';
}

// The header extensions between `start` and `end` (QEMU's
// qcow2_read_extensions, which reads bytes past the file's end as zeros:
// running out of bytes is the end marker).
Status readExtensions(std::string_view bytes, size_t start, size_t end, Qcow2Header& h) {
  size_t off = start;
  bool seen_format = false;
  while (off < end) {
    if (bytes.size() < off + 8) return okStatus();
    if (end - off < 8) return bad("extension header runs past its region");
    ByteReader r(bytes.substr(off, 8));
    uint32_t type = 0, len = 0;
    (void)r.readU32be(&type);
    (void)r.readU32be(&len);
    off += 8;
    if (type == kExtEnd) return okStatus();
    if (len > end - off) return bad("extension " + hex(type) + " runs past its region");
    std::string_view data = bytes.substr(std::min(off, bytes.size()), len);
    switch (type) {
      case kExtBackingFormat:
        if (seen_format) return bad("two backing format extensions");
        seen_format = true;
        if (len > kMaxBackingFormat || data.size() != len) return bad("bad backing format");
        if (data.find('\0') != std::string_view::npos) return bad("backing format has a NUL");
        h.backing_format = std::string(data);
        break;
      case kExtFeatureTable:  // names of feature bits, for QEMU's messages
      case kExtBitmaps:       // persistent dirty bitmaps, clusters of this file
        break;
      case kExtCrypto: return bad("encrypted images are refused");
      case kExtDataFile: return bad("an external data file is refused");
      default: return bad("unknown header extension " + hex(type));
    }
    // Each extension's data is padded to 8 bytes.
    off += (size_t{len} + 7) & ~size_t{7};
  }
  return okStatus();
}

}  // namespace

Result<Qcow2Header> parseQcow2Header(std::string_view bytes) {
  ByteReader r(bytes);
  uint32_t magic = 0, backing_size = 0, crypt = 0, u32 = 0;
  uint64_t backing_off = 0, u64 = 0;
  Qcow2Header h;
  if (!r.readU32be(&magic) || magic != kMagic) return bad("not a qcow2 image (magic)");
  if (!r.readU32be(&h.version) || !readU64be(r, &backing_off) || !r.readU32be(&backing_size) ||
      !r.readU32be(&h.cluster_bits) || !readU64be(r, &h.virtual_size) || !r.readU32be(&crypt))
    return bad("truncated");
  if (h.version != 2 && h.version != 3) return bad("version " + std::to_string(h.version));
  if (h.cluster_bits < 9 || h.cluster_bits > 21)
    return bad("cluster bits " + std::to_string(h.cluster_bits));
  if (crypt != 0) return bad("encrypted images are refused");
  // l1_size, l1_table_offset, refcount_table_offset, refcount_table_clusters,
  // nb_snapshots, snapshots_offset: inside the image, not vesseld's concern.
  if (!r.readU32be(&u32) || !readU64be(r, &u64) || !readU64be(r, &u64) || !r.readU32be(&u32) ||
      !r.readU32be(&u32) || !readU64be(r, &u64))
    return bad("truncated");
  const size_t cluster = size_t{1} << h.cluster_bits;
  bytes = bytes.substr(0, cluster);
  size_t header_len = kV2HeaderBytes;
  if (h.version == 3) {
    uint32_t refcount_order = 0, len = 0;
    if (!readU64be(r, &h.incompatible_features) || !readU64be(r, &h.compatible_features) ||
        !readU64be(r, &h.autoclear_features) || !r.readU32be(&refcount_order) || !r.readU32be(&len))
      return bad("truncated");
    if (refcount_order > 6) return bad("refcount order " + std::to_string(refcount_order));
    if (len < kV3HeaderBytes || len > cluster || len > bytes.size())
      return bad("header length " + std::to_string(len));
    header_len = len;
    uint8_t compression = 0;
    if (len > kV3HeaderBytes) (void)r.readU8(&compression);
    if (compression > 1) return bad("compression type " + std::to_string(compression));
    if (compression != 0 && !(h.incompatible_features & kIncompatCompression))
      return bad("compression type without its feature bit");
  }
  if (h.incompatible_features & kIncompatCorrupt) return bad("the image is marked corrupt");
  if (h.incompatible_features & kIncompatDataFile) return bad("an external data file is refused");
  if (h.incompatible_features & ~kIncompatAllowed)
    return bad("unknown incompatible features " + hex(h.incompatible_features & ~kIncompatAllowed));
  // Compatible features may be ignored by definition (lazy refcounts is
  // the one there is). Autoclear bits: bitmaps only; "raw data file"
  // belongs to an external data file.
  if (h.autoclear_features & kAutoclearDataFileRaw) return bad("an external data file is refused");
  if (h.autoclear_features & ~kAutoclearBitmaps)
    return bad("unknown autoclear features " + hex(h.autoclear_features & ~kAutoclearBitmaps));

  if (backing_off > cluster) return bad("backing file offset " + hex(backing_off));
  size_t ext_end = backing_off ? static_cast<size_t>(backing_off) : cluster;
  VESSEL_TRY(readExtensions(bytes, header_len, ext_end, h));

  if (backing_off != 0 && backing_size != 0) {
    if (backing_size > kQcow2MaxBackingName || backing_size > cluster - backing_off)
      return bad("backing file name too long");
    if (backing_off + backing_size > bytes.size()) return bad("backing file name truncated");
    std::string_view name = bytes.substr(static_cast<size_t>(backing_off), backing_size);
    if (name.find('\0') != std::string_view::npos) return bad("backing file name has a NUL");
    if (namesProtocol(name))
      return bad("backing file name '" + std::string(name.substr(0, 64)) + "' names a protocol");
    h.backing_file = std::string(name);
  }
  return h;
}

Result<Qcow2Header> readQcow2Header(const std::string& path) {
  const std::string ctx = "read qcow2 header of " + path;
  // Never through a symlink: the name is vesseld's, the file is what it is.
  auto fd = Fd::open(path, O_RDONLY | O_NOFOLLOW);
  if (!fd.ok()) return std::move(fd).error().withContext(ctx);
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return Error::fromErrno(ctx + ": fstat");
  if (!S_ISREG(st.st_mode)) return Error(Code::kFailedPrecondition, ctx + ": not a regular file");
  std::string buf(kQcow2MaxClusterBytes, '\0');
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = ::pread(fd->get(), buf.data() + got, buf.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::fromErrno(ctx);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  buf.resize(got);
  auto h = parseQcow2Header(buf);
  if (!h.ok()) return std::move(h).error().withContext(ctx);
  return h;
}

Status checkQcow2Overlay(const std::string& path, const std::string& backing,
                         const std::string& backing_format, uint64_t max_virtual_bytes) {
  const std::string ctx = "overlay " + path;
  VESSEL_ASSIGN_OR_RETURN(Qcow2Header h, readQcow2Header(path));
  if (h.backing_file != backing) {
    std::string want = backing.empty() ? "none" : "'" + backing + "'";
    return Error(Code::kFailedPrecondition,
                 ctx + ": its header names backing file '" + h.backing_file.substr(0, 256) +
                     "', not its template's (" + want + "); the disk was tampered with");
  }
  if (!backing.empty() && h.backing_format != backing_format)
    return Error(Code::kFailedPrecondition, ctx + ": its header names backing format '" +
                                                h.backing_format + "', not " + backing_format);
  if (max_virtual_bytes && h.virtual_size > max_virtual_bytes)
    return Error(Code::kFailedPrecondition, ctx + ": virtual size " +
                                                std::to_string(h.virtual_size) + " above " +
                                                std::to_string(max_virtual_bytes));
  return okStatus();
}

}  // namespace vessel::hypervisor::qemu
