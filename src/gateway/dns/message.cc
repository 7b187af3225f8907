#include "gateway/dns/message.h"

#include "base/byte_reader.h"

namespace vessel::gateway::dns {

namespace {

constexpr size_t kHeaderBytes = 12;
constexpr int kMaxPointers = 16;
constexpr size_t kMaxName = 255;

Error proto(std::string what) { return Error(Code::kProtocol, "dns: " + std::move(what)); }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Reads a (possibly compressed) name at r, which views into `packet`.
// Labels are kept as bytes; the caller decides which names it accepts.
bool readName(std::string_view packet, ByteReader& r, bool allow_pointers, std::string* out) {
  out->clear();
  ByteReader cur = r;
  bool jumped = false;
  int pointers = 0;
  for (;;) {
    uint8_t len = 0;
    if (!cur.readU8(&len)) return false;
    if (len == 0) break;
    if ((len & 0xc0) == 0xc0) {
      uint8_t lo = 0;
      if (!allow_pointers || !cur.readU8(&lo) || ++pointers > kMaxPointers) return false;
      size_t off = (static_cast<size_t>(len & 0x3f) << 8) | lo;
      if (off >= packet.size()) return false;
      if (!jumped) r = cur;  // the caller continues after the first pointer
      jumped = true;
      cur = ByteReader(packet.substr(off));
      continue;
    }
    if (len > 63) return false;
    std::string_view label;
    if (!cur.readBytes(len, &label)) return false;
    if (!out->empty()) out->push_back('.');
    out->append(label);
    if (out->size() > kMaxName) return false;
  }
  if (!jumped) r = cur;
  return true;
}

void writeName(std::string& out, std::string_view name) {
  while (!name.empty()) {
    size_t dot = name.find('.');
    std::string_view label = name.substr(0, dot);
    out.push_back(static_cast<char>(label.size()));
    out.append(label);
    if (dot == std::string_view::npos) break;
    name.remove_prefix(dot + 1);
  }
  out.push_back(0);
}

void u16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v & 0xff));
}

void u32(std::string& out, uint32_t v) {
  u16(out, static_cast<uint16_t>(v >> 16));
  u16(out, static_cast<uint16_t>(v & 0xffff));
}

}  // namespace

Result<Question> parseQuery(std::string_view packet) {
  ByteReader r(packet);
  uint16_t id = 0, flags = 0, qd = 0, an = 0, ns = 0, ar = 0;
  if (!r.readU16be(&id) || !r.readU16be(&flags) || !r.readU16be(&qd) || !r.readU16be(&an) ||
      !r.readU16be(&ns) || !r.readU16be(&ar)) {
    return proto("short header");
  }
  if (flags & 0x8000) return proto("not a query");
  if (((flags >> 11) & 0xf) != 0) return proto("opcode not QUERY");
  if (qd != 1 || an != 0 || ns != 0 || ar > 1) return proto("not exactly one question");
  Question q;
  q.id = id;
  q.recursion_desired = flags & 0x0100;
  // Queries have no reason to compress their only name.
  if (!readName(packet, r, /*allow_pointers=*/false, &q.name)) return proto("bad question name");
  if (!r.readU16be(&q.qtype) || !r.readU16be(&q.qclass)) return proto("short question");
  // An EDNS OPT record may follow; it is ignored (answers stay under 512 bytes).
  return q;
}

std::string buildResponse(const Question& q, Rcode rcode, const std::vector<Record>& answers) {
  std::string out;
  u16(out, q.id);
  // QR, opcode 0, RD copied, RA set.
  uint16_t flags = 0x8000 | 0x0080 | static_cast<uint16_t>(rcode);
  if (q.recursion_desired) flags |= 0x0100;
  u16(out, flags);
  u16(out, 1);
  u16(out, static_cast<uint16_t>(answers.size()));
  u16(out, 0);
  u16(out, 0);
  writeName(out, q.name);
  u16(out, q.qtype);
  u16(out, q.qclass);
  for (const Record& rec : answers) {
    u16(out, 0xc000 | kHeaderBytes);  // pointer to the question's name
    if (rec.address.is_v4()) {
      u16(out, kTypeA);
      u16(out, kClassIn);
      u32(out, rec.ttl);
      u16(out, 4);
      auto b = rec.address.to_v4().to_bytes();
      out.append(reinterpret_cast<const char*>(b.data()), b.size());
    } else {
      u16(out, kTypeAaaa);
      u16(out, kClassIn);
      u32(out, rec.ttl);
      u16(out, 16);
      auto b = rec.address.to_v6().to_bytes();
      out.append(reinterpret_cast<const char*>(b.data()), b.size());
    }
  }
  return out;
}

std::string buildQuery(uint16_t id, std::string_view name, uint16_t qtype) {
  std::string out;
  u16(out, id);
  u16(out, 0x0100);  // RD
  u16(out, 1);
  u16(out, 0);
  u16(out, 0);
  u16(out, 0);
  writeName(out, name);
  u16(out, qtype);
  u16(out, kClassIn);
  return out;
}

Result<Answer> parseResponse(std::string_view packet, uint16_t id, std::string_view name,
                             uint16_t qtype) {
  ByteReader r(packet);
  uint16_t rid = 0, flags = 0, qd = 0, an = 0, ns = 0, ar = 0;
  if (!r.readU16be(&rid) || !r.readU16be(&flags) || !r.readU16be(&qd) || !r.readU16be(&an) ||
      !r.readU16be(&ns) || !r.readU16be(&ar)) {
    return proto("short header");
  }
  if (rid != id || !(flags & 0x8000)) return proto("response does not match query");
  if (flags & 0x0200) return proto("truncated response");
  if (qd != 1) return proto("response without our question");
  std::string qname;
  uint16_t qt = 0, qc = 0;
  if (!readName(packet, r, true, &qname) || !r.readU16be(&qt) || !r.readU16be(&qc)) {
    return proto("bad question");
  }
  if (lower(qname) != name || qt != qtype) return proto("response is for another question");
  Answer ans;
  ans.rcode = static_cast<Rcode>(flags & 0xf);
  std::string target(name);
  int hops = 0;
  for (uint16_t i = 0; i < an; ++i) {
    std::string owner, cname;
    uint16_t type = 0, cls = 0, rdlen = 0;
    uint32_t ttl = 0;
    std::string_view rdata;
    if (!readName(packet, r, true, &owner) || !r.readU16be(&type) || !r.readU16be(&cls) ||
        !r.readU32be(&ttl) || !r.readU16be(&rdlen) || !r.readBytes(rdlen, &rdata)) {
      return proto("bad answer record");
    }
    if (cls != kClassIn || lower(owner) != target) continue;
    if (type == kTypeCname) {
      // The CNAME target may point back into the packet: re-read with offset.
      size_t off = static_cast<size_t>(rdata.data() - packet.data());
      ByteReader at(packet.substr(off));
      if (!readName(packet, at, true, &cname) || ++hops > 8) return proto("bad cname");
      target = lower(cname);
    } else if (type == qtype) {
      if (type == kTypeA && rdlen == 4) {
        boost::asio::ip::address_v4::bytes_type b;
        std::copy(rdata.begin(), rdata.end(), b.begin());
        ans.records.push_back({boost::asio::ip::address_v4(b), ttl});
      } else if (type == kTypeAaaa && rdlen == 16) {
        boost::asio::ip::address_v6::bytes_type b;
        std::copy(rdata.begin(), rdata.end(), b.begin());
        ans.records.push_back({boost::asio::ip::address_v6(b), ttl});
      } else {
        return proto("bad address record length");
      }
      if (ans.records.size() > 32) break;
    }
  }
  return ans;
}

}  // namespace vessel::gateway::dns
