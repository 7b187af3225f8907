#include "templates/dockerfile_words.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>

namespace vessel::templates::dockerfile_words {

namespace {

bool nameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Docker's word rules for the instructions that expand (ENV, ARG, COPY,
// ADD, WORKDIR, USER, EXPOSE, FROM, LABEL): quotes group and are removed,
// the escape character takes the next one literally, `$` expands except
// inside single quotes. `split` false: the whole text is one word.
class Expander {
 public:
  Expander(char escape, const Scope& scope, unsigned line)
      : esc_(escape), scope_(scope), line_(line) {}

  Result<std::vector<std::string>> words(std::string_view s, bool split) {
    std::vector<std::string> out;
    std::string cur;
    bool have = false, single = false, dbl = false;
    for (size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      if (single) {
        if (c == '\'')
          single = false;
        else
          cur += c;
      } else if (dbl) {
        if (c == '"') {
          dbl = false;
        } else if (c == esc_ && i + 1 < s.size() &&
                   (s[i + 1] == '"' || s[i + 1] == esc_ || s[i + 1] == '$')) {
          cur += s[++i];
        } else if (c == '$') {
          VESSEL_TRY(expand(s, &i, cur));
        } else {
          cur += c;
        }
      } else if (split && (c == ' ' || c == '\t')) {
        if (have || !cur.empty()) out.push_back(std::move(cur));
        cur.clear();
        have = false;
      } else if (c == esc_) {
        if (i + 1 < s.size())
          cur += s[++i];
        else
          cur += c;
      } else if (c == '\'') {
        single = have = true;
      } else if (c == '"') {
        dbl = have = true;
      } else if (c == '$') {
        VESSEL_TRY(expand(s, &i, cur));  // an empty expansion is no word, as in a shell
      } else {
        cur += c;
      }
      if (cur.size() > kMaxWordBytes) return lineError(line_, "a word expands to more than 64 KiB");
    }
    if (single || dbl) return lineError(line_, "a quote is not closed");
    if (!split || have || !cur.empty()) out.push_back(std::move(cur));
    return out;
  }

  Result<std::string> word(std::string_view s) {
    VESSEL_ASSIGN_OR_RETURN(auto w, words(s, false));
    return std::move(w[0]);
  }

 private:
  // s[*i] is '$': appends the expansion and leaves *i on its last byte.
  Status expand(std::string_view s, size_t* i, std::string& out) {
    size_t p = *i + 1;
    if (p < s.size() && s[p] == '{') {
      size_t q = p + 1, name_end = q;
      while (name_end < s.size() && nameChar(s[name_end])) ++name_end;
      if (name_end == q || !nameStart(s[q])) return lineError(line_, "bad variable name after ${");
      std::string_view name = s.substr(q, name_end - q);
      const std::string* v = scope_.find(name);
      if (name_end < s.size() && s[name_end] == '}') {
        if (v) out += *v;
        *i = name_end;
        return okStatus();
      }
      if (name_end + 1 >= s.size() || s[name_end] != ':' ||
          (s[name_end + 1] != '-' && s[name_end + 1] != '+'))
        return lineError(line_, "unsupported expansion in ${" + std::string(name) +
                                    "...}: only ${NAME}, ${NAME:-word} and ${NAME:+word}");
      bool dflt = s[name_end + 1] == '-';
      size_t w = name_end + 2, depth = 1, e = w;
      for (; e < s.size(); ++e) {
        if (s[e] == '{') ++depth;
        if (s[e] == '}' && --depth == 0) break;
      }
      if (e >= s.size()) return lineError(line_, "${ is not closed");
      if (++depth_ > 16) return lineError(line_, "expansions nest deeper than 16");
      auto word = Expander(esc_, scope_, line_).withDepth(depth_).word(s.substr(w, e - w));
      --depth_;
      if (!word.ok()) return std::move(word).error();
      bool set = v && !v->empty();
      if (dflt)
        out += set ? *v : *word;
      else if (set)
        out += *word;
      *i = e;
      return okStatus();
    }
    if (p < s.size() && nameStart(s[p])) {
      size_t e = p;
      while (e < s.size() && nameChar(s[e])) ++e;
      if (const std::string* v = scope_.find(s.substr(p, e - p))) out += *v;
      *i = e - 1;
      return okStatus();
    }
    out += '$';
    return okStatus();
  }
  Expander& withDepth(int d) {
    depth_ = d;
    return *this;
  }

  char esc_;
  const Scope& scope_;
  unsigned line_;
  int depth_ = 0;
};

}  // namespace

Result<std::vector<std::string>> expandWords(std::string_view s, bool split, char escape,
                                             const Scope& scope, unsigned line) {
  return Expander(escape, scope, line).words(s, split);
}

Result<std::string> expandWord(std::string_view s, char escape, const Scope& scope, unsigned line) {
  return Expander(escape, scope, line).word(s);
}

Error lineError(unsigned line, const std::string& msg) {
  return Error(Code::kInvalidArgument, "Dockerfile line " + std::to_string(line) + ": " + msg);
}

std::string_view trimLeft(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}
std::string_view trimRight(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}
std::string_view trim(std::string_view s) { return trimRight(trimLeft(s)); }

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// `# name=value` at the very top; the first other line ends them.
Result<char> readDirectives(const std::vector<std::string_view>& lines, size_t* first) {
  char escape = '\\';
  size_t i = 0;
  for (; i < lines.size(); ++i) {
    std::string_view s = trim(lines[i]);
    if (s.empty() || s[0] != '#') break;
    s = trimLeft(s.substr(1));
    size_t eq = s.find('=');
    if (eq == std::string_view::npos) break;
    std::string name = lower(trim(s.substr(0, eq)));
    bool word = !name.empty();
    for (char c : name) word &= std::isalpha(static_cast<unsigned char>(c)) != 0;
    if (!word) break;
    std::string_view value = trim(s.substr(eq + 1));
    if (name == "escape") {
      if (value != "\\" && value != "`")
        return lineError(static_cast<unsigned>(i + 1), "escape must be \\ or `");
      escape = value[0];
    } else if (name != "syntax" && name != "check") {
      break;  // an unknown directive is a comment, as docker reads it
    }
  }
  *first = i;
  return escape;
}

// Lines joined where they end in the escape character; comments and blank
// lines dropped (inside a continuation too, as docker does).
std::vector<Logical> logicalLines(const std::vector<std::string_view>& lines, size_t first,
                                  char escape) {
  std::vector<Logical> out;
  std::string cur;
  unsigned start = 0;
  bool cont = false;
  for (size_t i = first; i < lines.size(); ++i) {
    std::string_view left = trimLeft(lines[i]);
    std::string_view s = trimRight(lines[i]);
    if (trimRight(left).empty() || left[0] == '#') continue;
    if (!cont) {
      start = static_cast<unsigned>(i + 1);
      cur.clear();
      s = trimRight(left);
    }
    if (!s.empty() && s.back() == escape) {
      s.remove_suffix(1);
      cur += s;
      cont = true;
      continue;
    }
    cur += s;
    out.push_back({start, std::string(trim(cur))});
    cont = false;
  }
  if (cont && !trim(cur).empty()) out.push_back({start, std::string(trim(cur))});
  return out;
}

bool nameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }

// Words as written (quotes and escapes kept), split where unquoted
// whitespace is: ENV's and ARG's pairs before each value expands.
std::vector<std::string> rawWords(std::string_view s, char esc) {
  std::vector<std::string> out;
  std::string cur;
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (!quote && (c == ' ' || c == '\t')) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
      continue;
    }
    cur += c;
    if (c == esc && i + 1 < s.size() && quote != '\'') {
      cur += s[++i];
    } else if (quote && c == quote) {
      quote = 0;
    } else if (!quote && (c == '"' || c == '\'')) {
      quote = c;
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

// An exec form (a JSON array of strings), or nullopt for a shell form.
std::optional<std::vector<std::string>> execForm(std::string_view args) {
  if (args.empty() || args[0] != '[') return std::nullopt;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(args, ec);
  if (ec || !v.is_array()) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& e : v.as_array()) {
    if (!e.is_string()) return std::nullopt;
    out.emplace_back(e.get_string());
  }
  return out;
}

Flags leadingFlags(std::string_view args) {
  Flags f;
  for (;;) {
    args = trimLeft(args);
    if (args.substr(0, 2) != "--") break;
    size_t end = args.find_first_of(" \t");
    std::string_view tok = args.substr(0, end);
    size_t eq = tok.find('=');
    f.list.emplace_back(
        std::string(tok.substr(2, eq == std::string_view::npos ? tok.npos : eq - 2)),
        eq == std::string_view::npos ? "" : std::string(tok.substr(eq + 1)));
    if (end == std::string_view::npos) {
      args = {};
      break;
    }
    args = args.substr(end);
  }
  f.rest = trim(args);
  return f;
}

}  // namespace vessel::templates::dockerfile_words
