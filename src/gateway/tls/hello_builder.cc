#include "gateway/tls/hello_builder.h"

#include <algorithm>

namespace vessel::gateway::tls {

namespace {
void u8(std::string& s, size_t v) { s.push_back(static_cast<char>(v & 0xff)); }
void u16(std::string& s, size_t v) {
  u8(s, v >> 8);
  u8(s, v);
}
void u24(std::string& s, size_t v) {
  u8(s, v >> 16);
  u16(s, v & 0xffff);
}
void ext(std::string& out, uint16_t type, const std::string& data) {
  u16(out, type);
  u16(out, data.size());
  out += data;
}
}  // namespace

std::string buildClientHello(const HelloSpec& spec) {
  std::string exts;
  if (!spec.server_names.empty()) {
    std::string list;
    for (const std::string& n : spec.server_names) {
      u8(list, 0);
      u16(list, n.size());
      list += n;
    }
    std::string data;
    u16(data, list.size());
    data += list;
    ext(exts, 0, data);
  }
  if (!spec.alpn.empty()) {
    std::string list;
    for (const std::string& p : spec.alpn) {
      u8(list, p.size());
      list += p;
    }
    std::string data;
    u16(data, list.size());
    data += list;
    ext(exts, 16, data);
  }
  ext(exts, 43, std::string("\x02\x03\x04", 3));  // supported_versions: TLS 1.3
  if (spec.early_data) ext(exts, 42, "");
  if (spec.ech) ext(exts, spec.ech_code, std::string(32, '\x01'));
  if (spec.padding) ext(exts, 21, std::string(spec.padding, '\0'));

  std::string body;
  u16(body, 0x0303);
  body += std::string(32, '\x42');  // random
  u8(body, 32);
  body += std::string(32, '\x17');  // legacy session id
  u16(body, 2);
  u16(body, 0x1301);  // TLS_AES_128_GCM_SHA256
  u8(body, 1);
  u8(body, 0);
  u16(body, exts.size());
  body += exts;

  std::string hs;
  u8(hs, 1);
  u24(hs, body.size());
  hs += body;

  size_t chunk = spec.record_size ? spec.record_size : 16384;
  std::string out;
  for (size_t off = 0; off < hs.size(); off += chunk) {
    size_t n = std::min(chunk, hs.size() - off);
    u8(out, 22);
    u16(out, 0x0301);
    u16(out, n);
    out.append(hs, off, n);
  }
  return out;
}

}  // namespace vessel::gateway::tls
