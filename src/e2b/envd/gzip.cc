#include "e2b/envd/gzip.h"

namespace vessel::e2b::envd {

namespace {
// SAFETY: zlib's next_in is not const but only read from.
Bytef* input(std::string_view in) { return reinterpret_cast<Bytef*>(const_cast<char*>(in.data())); }
}  // namespace

Gzip::Gzip() {
  ok_ =
      deflateInit2(&z_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
}

Gzip::~Gzip() {
  if (ok_) deflateEnd(&z_);
}

std::string Gzip::feed(std::string_view in, bool finish) {
  std::string out;
  z_.next_in = input(in);
  z_.avail_in = static_cast<uInt>(in.size());
  char buf[65536];
  int rc;
  do {
    // SAFETY: buf is ours, sized as avail_out says.
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = sizeof buf;
    rc = deflate(&z_, finish ? Z_FINISH : Z_NO_FLUSH);
    out.append(buf, sizeof buf - z_.avail_out);
  } while (z_.avail_out == 0 || (finish && rc != Z_STREAM_END && rc != Z_STREAM_ERROR));
  return out;
}

Inflater::Inflater(std::string_view in) {
  // 15 + 32: a gzip or a zlib header, detected.
  ok_ = inflateInit2(&z_, 15 + 32) == Z_OK;
  z_.next_in = input(in);
  z_.avail_in = static_cast<uInt>(in.size());
}

Inflater::~Inflater() {
  if (ok_) inflateEnd(&z_);
}

Result<std::string> Inflater::next(size_t max) {
  if (!ok_) return Error(Code::kInternal, "inflateInit failed");
  std::string out;
  if (done_) return out;
  out.resize(max);
  size_t have = 0;
  while (have < max) {
    // SAFETY: out holds `max` bytes; zlib writes at most avail_out of them.
    z_.next_out = reinterpret_cast<Bytef*>(out.data() + have);
    z_.avail_out = static_cast<uInt>(max - have);
    int rc = inflate(&z_, Z_NO_FLUSH);
    have = max - z_.avail_out;
    if (rc == Z_STREAM_END) {
      done_ = true;
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR)
      return Error(Code::kInvalidArgument, "request body is not valid gzip");
    // Output room left but no input to fill it: the stream was cut.
    if (z_.avail_in == 0 && z_.avail_out != 0)
      return Error(Code::kInvalidArgument, "gzip body is truncated");
  }
  out.resize(have);
  return out;
}

}  // namespace vessel::e2b::envd
