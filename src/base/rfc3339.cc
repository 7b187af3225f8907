#include "base/rfc3339.h"

#include <charconv>
#include <ctime>
#include <string>

namespace vessel {

namespace {
Error bad(std::string what) { return Error(Code::kInvalidArgument, std::move(what)); }
}  // namespace

Result<int64_t> parseRfc3339(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)
  auto num = [&](size_t at, size_t len, int& out) {
    if (at + len > s.size()) return false;
    auto [p, ec] = std::from_chars(s.data() + at, s.data() + at + len, out);
    return ec == std::errc() && p == s.data() + at + len;
  };
  std::tm tm{};
  int y, mo, d, h, mi, sec;
  if (s.size() < 20 || s.size() > 40 || s[4] != '-' || s[7] != '-' ||
      (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' || s[16] != ':' ||
      !num(0, 4, y) || !num(5, 2, mo) || !num(8, 2, d) || !num(11, 2, h) || !num(14, 2, mi) ||
      !num(17, 2, sec) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
    return bad("must be an RFC 3339 date-time");
  size_t i = 19;
  int ms = 0;
  if (s[i] == '.') {
    size_t start = ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == start || i - start > 9) return bad("bad fraction of a second");
    std::string frac(s.substr(start, std::min<size_t>(3, i - start)));
    while (frac.size() < 3) frac.push_back('0');
    ms = std::stoi(frac);
  }
  int offset_min = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z') && i + 1 == s.size()) {
  } else if (i + 6 == s.size() && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
    int oh, om;
    if (!num(i + 1, 2, oh) || !num(i + 4, 2, om) || oh > 23 || om > 59) return bad("bad offset");
    offset_min = (oh * 60 + om) * (s[i] == '+' ? 1 : -1);
  } else {
    return bad("must end in Z or an offset");
  }
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  int64_t secs = static_cast<int64_t>(::timegm(&tm)) - offset_min * 60;
  return secs * 1000 + ms;
}

}  // namespace vessel
