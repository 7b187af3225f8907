#include "base/byte_reader.h"

namespace vessel {

namespace {
inline uint8_t at(std::string_view d, size_t i) { return static_cast<uint8_t>(d[i]); }
}  // namespace

bool ByteReader::readU8(uint8_t* out) {
  if (data_.size() < 1) return false;
  *out = at(data_, 0);
  data_.remove_prefix(1);
  return true;
}

bool ByteReader::readU16le(uint16_t* out) {
  if (data_.size() < 2) return false;
  *out = static_cast<uint16_t>(at(data_, 0) | (at(data_, 1) << 8));
  data_.remove_prefix(2);
  return true;
}

bool ByteReader::readU32le(uint32_t* out) {
  if (data_.size() < 4) return false;
  *out = static_cast<uint32_t>(at(data_, 0)) | (static_cast<uint32_t>(at(data_, 1)) << 8) |
         (static_cast<uint32_t>(at(data_, 2)) << 16) | (static_cast<uint32_t>(at(data_, 3)) << 24);
  data_.remove_prefix(4);
  return true;
}

bool ByteReader::readU64le(uint64_t* out) {
  uint32_t lo, hi;
  if (data_.size() < 8) return false;
  readU32le(&lo);
  readU32le(&hi);
  *out = (static_cast<uint64_t>(hi) << 32) | lo;
  return true;
}

bool ByteReader::readU16be(uint16_t* out) {
  if (data_.size() < 2) return false;
  *out = static_cast<uint16_t>((at(data_, 0) << 8) | at(data_, 1));
  data_.remove_prefix(2);
  return true;
}

bool ByteReader::readU24be(uint32_t* out) {
  if (data_.size() < 3) return false;
  *out = (static_cast<uint32_t>(at(data_, 0)) << 16) | (static_cast<uint32_t>(at(data_, 1)) << 8) |
         at(data_, 2);
  data_.remove_prefix(3);
  return true;
}

bool ByteReader::readU32be(uint32_t* out) {
  if (data_.size() < 4) return false;
  *out = (static_cast<uint32_t>(at(data_, 0)) << 24) | (static_cast<uint32_t>(at(data_, 1)) << 16) |
         (static_cast<uint32_t>(at(data_, 2)) << 8) | at(data_, 3);
  data_.remove_prefix(4);
  return true;
}

bool ByteReader::readBytes(size_t n, std::string_view* out) {
  if (data_.size() < n) return false;
  *out = data_.substr(0, n);
  data_.remove_prefix(n);
  return true;
}

bool ByteReader::readLenPrefixed32(size_t max_len, std::string_view* out) {
  ByteReader copy = *this;
  uint32_t len;
  if (!copy.readU32le(&len) || len > max_len || !copy.readBytes(len, out)) return false;
  *this = copy;
  return true;
}

bool ByteReader::skip(size_t n) {
  if (data_.size() < n) return false;
  data_.remove_prefix(n);
  return true;
}

void ByteWriter::u16le(uint16_t v) {
  u8(static_cast<uint8_t>(v));
  u8(static_cast<uint8_t>(v >> 8));
}
void ByteWriter::u32le(uint32_t v) {
  u16le(static_cast<uint16_t>(v));
  u16le(static_cast<uint16_t>(v >> 16));
}
void ByteWriter::u64le(uint64_t v) {
  u32le(static_cast<uint32_t>(v));
  u32le(static_cast<uint32_t>(v >> 32));
}
void ByteWriter::lenPrefixed32(std::string_view b) {
  u32le(static_cast<uint32_t>(b.size()));
  bytes(b);
}

}  // namespace vessel
