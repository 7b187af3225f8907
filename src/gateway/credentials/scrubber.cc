#include "gateway/credentials/scrubber.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "base/base64.h"

namespace vessel::gateway::credentials {

Scrubber::Scrubber(std::vector<std::string> secrets) {
  for (auto& s : secrets) {
    if (!s.empty()) secrets_.push_back(std::move(s));
  }
}

std::string Scrubber::process(std::string_view in) {
  std::string buf = carry_;
  buf.append(in);
  carry_.clear();
  for (const std::string& s : secrets_) {
    for (size_t at = buf.find(s); at != std::string::npos; at = buf.find(s, at + s.size())) {
      std::fill_n(buf.begin() + static_cast<std::ptrdiff_t>(at), s.size(), '*');
    }
  }
  // Hold back the longest suffix that is a proper prefix of some secret.
  size_t hold = 0;
  for (const std::string& s : secrets_) {
    for (size_t k = std::min(s.size() - 1, buf.size()); k > hold; --k) {
      if (std::string_view(buf).substr(buf.size() - k) == std::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  carry_ = buf.substr(buf.size() - hold);
  buf.resize(buf.size() - hold);
  return buf;
}

std::string Scrubber::flush() { return std::exchange(carry_, std::string()); }

namespace {

std::string base64(std::string_view in, bool url) {
  std::string out = base64Encode(in);
  if (url) {
    for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  }
  return out;
}

// The part of base64(prefix + r + suffix) that depends on r alone, for r at
// byte offset `align` (0, 1, 2) of a 3-byte group: characters whose six
// bits straddle a neighbour's byte are left out, so the form matches
// whatever surrounds the secret in the encoded text.
std::string base64Core(std::string_view r, size_t align, bool url) {
  std::string padded(align, '\0');
  padded.append(r);
  padded.append(2, '\0');
  std::string enc = base64(padded, url);
  size_t first_bit = 8 * align, last_bit = 8 * (align + r.size());
  size_t from = (first_bit + 5) / 6, to = last_bit / 6;  // chars [from, to) are r's own
  return to > from ? enc.substr(from, to - from) : std::string();
}

// `plus`: form encoding, a space as '+'.
std::string percent(std::string_view r, bool all, bool lower, bool plus = false) {
  const char* hex = lower ? "0123456789abcdef" : "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : r) {
    if (plus && c == ' ') {
      out.push_back('+');
    } else if (!all && (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')) {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', hex[c >> 4], hex[c & 15]};
    }
  }
  return out;
}

// JSON string escapes: the minimal set, and the "/" and HTML-safe (Go's
// <>&) variants encoders commonly add.
std::string jsonEscape(std::string_view r, bool slash, bool html, bool upper_hex) {
  const char* hex = upper_hex ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  for (unsigned char c : r) {
    if (c == '"' || c == '\\') {
      out += {'\\', static_cast<char>(c)};
    } else if (c == '/' && slash) {
      out += "\\/";
    } else if (c < 0x20 || (html && (c == '<' || c == '>' || c == '&'))) {
      out += {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> secretForms(std::string_view value) {
  std::vector<std::string> raw{std::string(value)};
  size_t sp = value.rfind(' ');
  if (sp != std::string_view::npos && sp + 1 < value.size()) {
    raw.emplace_back(value.substr(sp + 1));
  }
  std::vector<std::string> out;
  auto add = [&](std::string f) {
    // Very short cores would mask ordinary text; the API refuses secrets
    // short enough to produce them.
    if (f.size() < 8) return;
    if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(std::move(f));
  };
  for (const std::string& r : raw) {
    add(r);
    for (bool url : {false, true}) {
      for (size_t align = 0; align < 3; ++align) add(base64Core(r, align, url));
    }
    for (bool all : {false, true}) {
      for (bool lower : {false, true}) add(percent(r, all, lower));
    }
    for (bool upper_hex : {false, true}) {
      for (bool slash : {false, true}) {
        for (bool html : {false, true}) add(jsonEscape(r, slash, html, upper_hex));
      }
    }
    add(percent(r, false, false, /*plus=*/true));
  }
  return out;
}

}  // namespace vessel::gateway::credentials
