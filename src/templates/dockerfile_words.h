#pragma once
// The words of a Dockerfile (templates/dockerfile.h's parser, apart from
// its planner): parser directives, logical lines, docker's quoting and
// `$` expansion, exec forms and leading flags. Internal to templates.
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace vessel::templates::dockerfile_words {

inline constexpr size_t kMaxWordBytes = 64 << 10;

Error lineError(unsigned line, const std::string& msg);
std::string_view trimLeft(std::string_view s);
std::string_view trimRight(std::string_view s);
std::string_view trim(std::string_view s);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
bool nameStart(char c);

// One instruction, its continuation lines joined.
struct Logical {
  unsigned line;
  std::string text;
};

// `# name=value` at the very top (escape, syntax, check); the first other
// line ends them. The escape character; *first: the first line after them.
Result<char> readDirectives(const std::vector<std::string_view>& lines, size_t* first);
// Lines joined where they end in the escape character; comments and blank
// lines dropped (inside a continuation too, as docker does).
std::vector<Logical> logicalLines(const std::vector<std::string_view>& lines, size_t first,
                                  char escape);

// Variables an instruction expands: ENV over ARG.
struct Scope {
  std::vector<std::pair<std::string, std::string>> args;  // declared, with a value
  std::vector<std::pair<std::string, std::string>> env;

  static void set(std::vector<std::pair<std::string, std::string>>& v, const std::string& k,
                  std::string value) {
    for (auto& [name, val] : v)
      if (name == k) {
        val = std::move(value);
        return;
      }
    v.emplace_back(k, std::move(value));
  }
  static void unset(std::vector<std::pair<std::string, std::string>>& v, const std::string& k) {
    std::erase_if(v, [&](const auto& e) { return e.first == k; });
  }
  const std::string* find(std::string_view k) const {
    for (const auto& [name, val] : env)
      if (name == k) return &val;
    for (const auto& [name, val] : args)
      if (name == k) return &val;
    return nullptr;
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& a : args)
      if (!std::any_of(env.begin(), env.end(), [&](const auto& e) { return e.first == a.first; }))
        out.push_back(a.first + "=" + a.second);
    for (const auto& [k, v] : env) out.push_back(k + "=" + v);
    return out;
  }
};

// Docker's word rules for the instructions that expand (ENV, ARG, COPY,
// ADD, WORKDIR, USER, EXPOSE, FROM): quotes group and are removed, the
// escape character takes the next one literally, `$` expands except inside
// single quotes. `split` false: the whole text is one word.
Result<std::vector<std::string>> expandWords(std::string_view s, bool split, char escape,
                                             const Scope& scope, unsigned line);
Result<std::string> expandWord(std::string_view s, char escape, const Scope& scope, unsigned line);

// Words as written (quotes and escapes kept), split where unquoted
// whitespace is: ENV's and ARG's pairs before each value expands.
std::vector<std::string> rawWords(std::string_view s, char esc);
// An exec form (a JSON array of strings), or nullopt for a shell form.
std::optional<std::vector<std::string>> execForm(std::string_view args);

// Leading --name[=value] flags of FROM, RUN, COPY and ADD.
struct Flags {
  std::vector<std::pair<std::string, std::string>> list;
  std::string_view rest;
};
Flags leadingFlags(std::string_view args);

}  // namespace vessel::templates::dockerfile_words
