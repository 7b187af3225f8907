#pragma once
// gzip for /files, a bounded step at a time so that each step can run off
// the io thread: Gzip compresses a download chunk by chunk, Inflater
// inflates an upload into pieces of at most a given size (the whole never
// held), refusing bytes that are not gzip.
#include <zlib.h>

#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::e2b::envd {

class Gzip {
 public:
  Gzip();
  ~Gzip();
  Gzip(const Gzip&) = delete;
  Gzip& operator=(const Gzip&) = delete;
  bool ok() const { return ok_; }
  // The compressed bytes for `in`; `finish` ends the stream.
  std::string feed(std::string_view in, bool finish);

 private:
  z_stream z_{};
  bool ok_ = false;
};

class Inflater {
 public:
  // `in` (gzip or zlib) must outlive the Inflater.
  explicit Inflater(std::string_view in);
  ~Inflater();
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;
  // The next at most `max` inflated bytes; empty once done(). Invalid or
  // truncated input is kInvalidArgument.
  Result<std::string> next(size_t max);
  bool done() const { return done_; }

 private:
  z_stream z_{};
  bool ok_ = false;
  bool done_ = false;
};

}  // namespace vessel::e2b::envd
