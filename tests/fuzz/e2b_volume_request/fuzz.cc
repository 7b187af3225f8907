// E2B's Volume API requests (e2b/volume_requests.h): any bytes as a
// /volumecontent request target (every route's parameters), a PATCH
// metadata body and a POST /volumes body parse to bounded values or an
// Error, never a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "e2b/volume_requests.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace e2b = vessel::e2b;
  std::string_view in(reinterpret_cast<const char*>(data), size);  // SAFETY: read-only bytes
  for (auto route :
       {e2b::ContentRoute::kPath, e2b::ContentRoute::kListDir, e2b::ContentRoute::kMakeDir,
        e2b::ContentRoute::kFile, e2b::ContentRoute::kWriteFile}) {
    auto q = e2b::parseContentQuery(in, route);
    if (q.ok() && (q->path.empty() || q->depth < 1 || q->depth > e2b::kMaxContentDepth ||
                   (q->meta.mode && *q->meta.mode > 07777)))
      __builtin_trap();
  }
  auto m = e2b::parseMetadataPatch(in);
  if (m.ok() && m->mode && *m->mode > 07777) __builtin_trap();
  auto n = e2b::parseNewVolume(in);
  if (n.ok() && !e2b::e2bVolumeName(*n)) __builtin_trap();
  return 0;
}
