#pragma once
// The field codec under every agent message (agentproto/messages.h): a
// message's static visit() lists its fields once, and the same list runs
// against a FieldWriter to encode it and a FieldReader to decode it, so the
// two cannot drift apart. Numbers are little-endian, strings and lists
// length-prefixed (u32) and capped on both sides.
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/byte_reader.h"

namespace vessel::agentproto {

// Encodes fields into a payload; fails (returns false) on a field over its cap.
class FieldWriter {
 public:
  template <typename T>
  bool num(const T& v) {
    static_assert(std::is_integral_v<T>);
    if constexpr (sizeof(T) == 1) w_.u8(static_cast<uint8_t>(v));
    if constexpr (sizeof(T) == 2) w_.u16le(static_cast<uint16_t>(v));
    if constexpr (sizeof(T) == 4) w_.u32le(static_cast<uint32_t>(v));
    if constexpr (sizeof(T) == 8) w_.u64le(static_cast<uint64_t>(v));
    return true;
  }
  bool str(const std::string& s, size_t cap) {
    if (s.size() > cap) return false;
    w_.lenPrefixed32(s);
    return true;
  }
  bool strList(const std::vector<std::string>& l, size_t max_count, size_t cap) {
    if (l.size() > max_count) return false;
    w_.u32le(static_cast<uint32_t>(l.size()));
    for (const auto& s : l)
      if (!str(s, cap)) return false;
    return true;
  }
  template <typename E>
  bool list(const std::vector<E>& l, size_t max_count) {
    if (l.size() > max_count) return false;
    w_.u32le(static_cast<uint32_t>(l.size()));
    for (const auto& e : l)
      if (!E::visit(e, *this)) return false;
    return true;
  }
  std::string take() { return w_.take(); }

 private:
  ByteWriter w_;
};

// Decodes fields from an untrusted payload; false on any malformation.
class FieldReader {
 public:
  explicit FieldReader(std::string_view p) : r_(p) {}
  template <typename T>
  bool num(T& v) {
    static_assert(std::is_integral_v<T>);
    if constexpr (sizeof(T) == 1) {
      uint8_t x;
      if (!r_.readU8(&x)) return false;
      v = static_cast<T>(x);
    }
    if constexpr (sizeof(T) == 2) {
      uint16_t x;
      if (!r_.readU16le(&x)) return false;
      v = static_cast<T>(x);
    }
    if constexpr (sizeof(T) == 4) {
      uint32_t x;
      if (!r_.readU32le(&x)) return false;
      v = static_cast<T>(x);
    }
    if constexpr (sizeof(T) == 8) {
      uint64_t x;
      if (!r_.readU64le(&x)) return false;
      v = static_cast<T>(x);
    }
    return true;
  }
  bool str(std::string& s, size_t cap) {
    std::string_view v;
    if (!r_.readLenPrefixed32(cap, &v)) return false;
    s.assign(v);
    return true;
  }
  bool strList(std::vector<std::string>& l, size_t max_count, size_t cap) {
    uint32_t n;
    // Each element needs at least its 4-byte length: a count the rest of the
    // payload cannot hold is rejected before any allocation.
    if (!r_.readU32le(&n) || n > max_count || n > r_.remaining() / 4) return false;
    l.clear();
    l.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      l.emplace_back();
      if (!str(l.back(), cap)) return false;
    }
    return true;
  }
  template <typename E>
  bool list(std::vector<E>& l, size_t max_count) {
    uint32_t n;
    if (!r_.readU32le(&n) || n > max_count || n > r_.remaining()) return false;
    l.clear();
    for (uint32_t i = 0; i < n; ++i) {
      l.emplace_back();
      if (!E::visit(l.back(), *this)) return false;
    }
    return true;
  }
  bool done() const { return r_.empty(); }

 private:
  ByteReader r_;
};

}  // namespace vessel::agentproto
