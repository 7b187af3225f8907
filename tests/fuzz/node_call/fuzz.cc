// The node API's request bodies (cluster/node_protocol.h), the one parser at
// a node's edge: any body parses to a call within its bounds or to an
// Error, and what parses serializes and parses back to the same call (the
// volume calls' fields too, and through volume_write's header). The reply
// parser (an API replica reading a node) never crashes either.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cluster/node_protocol.h"

using namespace vessel::cluster;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // SAFETY: libFuzzer guarantees `data` points at `size` readable bytes.
  std::string_view body(reinterpret_cast<const char*>(data), size);
  if (auto c = parseNodeCall(body); c.ok()) {
    if (c->id.size() > 128 || c->tenant.size() > 128 || c->copies.size() > 16 ||
        c->env.size() > 256)
      __builtin_trap();
    auto again = parseNodeCall(serializeNodeCall(*c));
    if (!again.ok() || again->id != c->id || again->env != c->env || again->copies != c->copies ||
        again->disk_mib != c->disk_mib || again->network.has_value() != c->network.has_value() ||
        again->registry_username != c->registry_username ||
        again->registry_password != c->registry_password || c->registry_password.size() > 4096)
      __builtin_trap();
    // The volume calls' fields: bounded, and the same after a round trip
    // (also through the header a volume_write carries).
    if (c->path.size() > 4096 || c->mounts.size() > 16 || c->mode > 07777) __builtin_trap();
    auto header = parseNodeCallHeader(encodeNodeCallHeader(*c));
    for (const auto* a : {&again, &header})
      if (!a->ok() || (*a)->volume != c->volume || (*a)->volume_to != c->volume_to ||
          (*a)->path != c->path || (*a)->mode != c->mode || (*a)->size_mib != c->size_mib ||
          (*a)->mounts.size() != c->mounts.size() || (*a)->read_only != c->read_only)
        __builtin_trap();
  }
  // A reply that parses serializes and parses back with the same network
  // settings (the network call's answer) and usage.
  if (auto r = parseNodeReply(body); r.ok()) {
    auto again = parseNodeReply(serializeNodeReply(*r));
    if (!again.ok() || again->network.has_value() != r->network.has_value() ||
        again->usage.has_value() != r->usage.has_value() || r->entries.size() > 10000 ||
        again->entries.size() != r->entries.size() ||
        again->file.has_value() != r->file.has_value() ||
        again->volume_usage.has_value() != r->volume_usage.has_value() ||
        (r->network &&
         (again->network->allow != r->network->allow || again->network->mode != r->network->mode ||
          again->network->deny != r->network->deny)))
      __builtin_trap();
  }
  return 0;
}
