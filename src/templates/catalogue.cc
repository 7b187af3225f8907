#include "templates/catalogue.h"

#include <boost/json.hpp>

namespace vessel::templates {

namespace json = boost::json;

namespace {

constexpr uint64_t kMaxFileBytes = uint64_t{1} << 40;
constexpr size_t kMaxFiles = 16;

bool fileName(std::string_view n) {
  if (n.empty() || n.size() > 64 || n[0] == '.') return false;
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  return true;
}

}  // namespace

uint64_t CatalogueEntry::totalBytes() const {
  uint64_t n = 0;
  for (const auto& [f, b] : sizes) n += b;
  return n;
}

std::string sizesJson(const std::map<std::string, uint64_t>& sizes) {
  json::object o;
  for (const auto& [f, b] : sizes) o[f] = b;
  return json::serialize(o);
}

Result<std::map<std::string, uint64_t>> parseSizes(std::string_view text) {
  if (text.size() > 4096) return Error(Code::kInvalidArgument, "template sizes: too long");
  boost::system::error_code ec;
  json::parse_options po;
  po.max_depth = 2;
  json::value v = json::parse(text, ec, {}, po);
  if (ec || !v.is_object()) return Error(Code::kInvalidArgument, "template sizes: not an object");
  const auto& o = v.as_object();
  if (o.size() > kMaxFiles) return Error(Code::kInvalidArgument, "template sizes: too many files");
  std::map<std::string, uint64_t> out;
  for (const auto& kv : o) {
    if (!fileName(kv.key())) return Error(Code::kInvalidArgument, "template sizes: bad file name");
    uint64_t b = 0;
    if (kv.value().is_uint64())
      b = kv.value().as_uint64();
    else if (kv.value().is_int64() && kv.value().as_int64() >= 0)
      b = static_cast<uint64_t>(kv.value().as_int64());
    else
      return Error(Code::kInvalidArgument, "template sizes: a size is not a count");
    if (b >= kMaxFileBytes) return Error(Code::kInvalidArgument, "template sizes: file too large");
    out[std::string(kv.key())] = b;
  }
  return out;
}

Status checkSizes(const Manifest& m, const std::map<std::string, uint64_t>& sizes) {
  if (sizes.size() != m.files.size())
    return Error(Code::kInvalidArgument, "template " + m.name + "@" + m.version +
                                             ": sizes and checksums name different files");
  for (const auto& [f, sha] : m.files)
    if (!sizes.count(f))
      return Error(Code::kInvalidArgument,
                   "template " + m.name + "@" + m.version + ": no size for " + f);
  return okStatus();
}

}  // namespace vessel::templates
