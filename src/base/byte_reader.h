#pragma once
// ByteReader: a bounds-checked cursor over untrusted bytes (in the manner of
// BoringSSL's CBS). Every read checks the remaining length first and reports
// failure instead of reading past the end; integers are decoded with an
// explicit byte order. ByteWriter is its counterpart for encoding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace vessel {

class ByteReader {
 public:
  explicit ByteReader(std::string_view data) : data_(data) {}
  size_t remaining() const { return data_.size(); }
  bool empty() const { return data_.empty(); }
  std::string_view rest() const { return data_; }

  bool readU8(uint8_t* out);
  bool readU16le(uint16_t* out);
  bool readU32le(uint32_t* out);
  bool readU64le(uint64_t* out);
  bool readU16be(uint16_t* out);
  bool readU24be(uint32_t* out);
  bool readU32be(uint32_t* out);
  // Exactly n bytes, as a view into the underlying buffer.
  bool readBytes(size_t n, std::string_view* out);
  // A u32-le length then that many bytes, refusing lengths above max_len.
  bool readLenPrefixed32(size_t max_len, std::string_view* out);
  bool skip(size_t n);

 private:
  std::string_view data_;
};

class ByteWriter {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u16le(uint16_t v);
  void u32le(uint32_t v);
  void u64le(uint64_t v);
  void bytes(std::string_view b) { out_.append(b); }
  void lenPrefixed32(std::string_view b);
  std::string& str() { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace vessel
