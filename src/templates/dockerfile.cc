#include "templates/dockerfile.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <filesystem>
#include <set>

#include "base/env_var.h"
#include "base/split.h"
#include "templates/dockerfile_words.h"
#include "templates/image_ref.h"

namespace vessel::templates {

namespace {

using namespace dockerfile_words;

// Everything the plan holds, counted: `ENV A=$A$A` doubles per line, and
// each step keeps the environment in effect, so the text's bound alone
// does not bound the plan.
constexpr size_t kMaxPlanBytes = 16 << 20;
constexpr size_t kMaxEnvBytes = 32 << 10;  // = the manifest's bound on a template's env

bool userSpec(std::string_view u) {
  if (u.empty() || u.size() > 64) return false;
  size_t colons = 0;
  for (char c : u) {
    if (c == ':') {
      ++colons;
      continue;
    }
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
      return false;
  }
  return colons <= 1 && u.front() != ':' && u.back() != ':';
}

std::string joinPath(const std::string& dir, std::string_view p) {
  std::filesystem::path out = !p.empty() && p[0] == '/' ? std::filesystem::path(std::string(p))
                                                        : std::filesystem::path(dir) / p;
  std::string s = out.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s.empty() ? "/" : s;
}

// Joins argv for showing (progress lines, errors).
std::string shown(std::string_view keyword, std::string_view args) {
  std::string s = std::string(keyword) + " " + std::string(args);
  return s.size() > 200 ? s.substr(0, 197) + "..." : s;
}

class Planner {
 public:
  Planner(char escape, const std::map<std::string, std::string>& build_args)
      : esc_(escape), build_args_(build_args) {}

  Status instruction(const Logical& l) {
    std::string_view text = l.text;
    size_t sp = text.find_first_of(" \t");
    std::string kw = lower(text.substr(0, sp));
    std::string_view args = sp == std::string_view::npos ? "" : trim(text.substr(sp));
    line_ = l.line;
    if (!seen_from_ && kw != "from" && kw != "arg")
      return err("FROM must come first (only ARG may stand before it)");
    if (kw == "from") return from(args);
    if (kw == "arg") return arg(args);
    if (kw == "env") return env(args);
    if (kw == "run") return run(kw, args);
    if (kw == "copy" || kw == "add") return copy(kw == "add", kw, args);
    if (kw == "workdir") return workdir(args);
    if (kw == "user") return user(args);
    if (kw == "cmd" || kw == "entrypoint") return command(kw, args);
    if (kw == "shell") return shell(args);
    if (kw == "expose") return expose(args);
    if (kw == "label" || kw == "maintainer") {
      plan_.warnings.push_back("line " + std::to_string(line_) + ": " + upper(kw) +
                               " is accepted and not kept");
      return okStatus();
    }
    if (kw == "onbuild" || kw == "healthcheck" || kw == "stopsignal")
      return err(upper(kw) + " is not supported by Vessel templates");
    if (kw == "volume")
      return err("VOLUME is not supported: mount a Vessel volume when creating a sandbox");
    return err("unknown instruction '" + std::string(text.substr(0, std::min<size_t>(sp, 32))) +
               "'");
  }

  Result<DockerPlan> finish() {
    if (!seen_from_) return Error(Code::kInvalidArgument, "Dockerfile: no FROM");
    for (const auto& [k, v] : build_args_)
      if (!declared_.contains(k))
        plan_.warnings.push_back("--build-arg " + k + " is not declared by any ARG");
    plan_.env.clear();
    for (const auto& [k, v] : scope_.env) plan_.env.push_back(k + "=" + v);
    if (!entrypoint_.empty()) {
      plan_.start = entrypoint_;
      if (entrypoint_exec_) plan_.start.insert(plan_.start.end(), cmd_.begin(), cmd_.end());
    } else {
      plan_.start = cmd_;
    }
    plan_.user = user_;
    plan_.workdir = workdir_;
    return std::move(plan_);
  }

 private:
  Error err(const std::string& msg) const { return lineError(line_, msg); }
  // Before FROM only the global ARGs expand.
  const Scope& scope() const { return seen_from_ ? scope_ : global_; }
  Result<std::string> word(std::string_view s) const { return expandWord(s, esc_, scope(), line_); }
  Result<std::vector<std::string>> words(std::string_view s, bool split) const {
    return expandWords(s, split, esc_, scope(), line_);
  }
  Status count(size_t bytes) {
    plan_bytes_ += bytes;
    if (plan_bytes_ > kMaxPlanBytes) return err("the build grows past 16 MiB of steps");
    return okStatus();
  }

  Status from(std::string_view args) {
    if (seen_from_)
      return err("multi-stage builds (a second FROM) are not supported by Vessel templates");
    Flags f = leadingFlags(args);
    for (const auto& [k, v] : f.list) {
      if (k != "platform") return err("FROM --" + k + " is not supported");
      VESSEL_ASSIGN_OR_RETURN(std::string p, word(v));
      if (p != "linux/amd64" && p != "linux/x86_64")
        return err("FROM --platform=" + p + ": Vessel builds linux/amd64 only");
    }
    VESSEL_ASSIGN_OR_RETURN(auto w, words(f.rest, true));
    if (w.size() == 3 && lower(w[1]) == "as") w.resize(1);
    if (w.size() != 1 || w[0].empty()) return err("FROM takes one image (and AS name)");
    const std::string& ref = w[0];
    seen_from_ = true;
    if (ref.rfind("vessel://", 0) == 0) {
      std::string name = ref.substr(9);
      bool ok = !name.empty() && name.size() <= 64;
      for (char c : name) ok &= std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      if (!ok) return err("FROM vessel://NAME names a Vessel template: letters, digits, - and _");
      plan_.from_template = name;
      return okStatus();
    }
    if (ref == "scratch")
      return err("FROM scratch is not supported: a template needs a root filesystem to boot");
    auto r = parseImageRef(ref);
    if (!r.ok()) return err(r.error().message());
    plan_.from_image = r->canonical();
    return okStatus();
  }

  Status arg(std::string_view args) {
    auto pairs = rawWords(args, esc_);
    if (pairs.empty()) return err("ARG needs a name");
    for (const auto& w : pairs) {
      size_t eq = w.find('=');
      std::string name = w.substr(0, eq);
      if (!portableEnvName(name))
        return err("ARG: bad name '" + name.substr(0, 64) +
                   "' (letters, digits and _, not first a digit)");
      declared_.insert(name);
      std::optional<std::string> value;
      if (auto b = build_args_.find(name); b != build_args_.end()) {
        value = b->second;
      } else if (eq != std::string::npos) {
        VESSEL_ASSIGN_OR_RETURN(value, word(std::string_view(w).substr(eq + 1)));
      } else if (seen_from_) {
        if (const std::string* g = global_.find(name)) value = *g;
      }
      auto& into = seen_from_ ? scope_.args : global_.args;
      if (value) {
        VESSEL_TRY(count(value->size()));
        Scope::set(into, name, std::move(*value));
      } else {
        Scope::unset(into, name);
      }
    }
    return okStatus();
  }

  Status env(std::string_view args) {
    auto raw = rawWords(args, esc_);
    if (raw.empty()) return err("ENV needs NAME=VALUE");
    std::vector<std::pair<std::string, std::string>> pairs;
    if (raw[0].find('=') == std::string::npos) {
      // The old form: ENV NAME VALUE..., the rest of the line one value.
      std::string_view rest = trimLeft(args.substr(raw[0].size()));
      VESSEL_ASSIGN_OR_RETURN(std::string v, word(rest));
      pairs.emplace_back(raw[0], std::move(v));
    } else {
      for (const auto& w : raw) {
        size_t eq = w.find('=');
        if (eq == std::string::npos) return err("ENV: '" + w.substr(0, 64) + "' is not NAME=VALUE");
        VESSEL_ASSIGN_OR_RETURN(std::string v, word(std::string_view(w).substr(eq + 1)));
        pairs.emplace_back(w.substr(0, eq), std::move(v));
      }
    }
    for (auto& [k, v] : pairs) {
      if (!portableEnvName(k))
        return err("ENV: bad name '" + k.substr(0, 64) +
                   "' (letters, digits and _, not first a digit)");
      Scope::set(scope_.env, k, std::move(v));
    }
    size_t bytes = 0;
    for (const auto& [k, v] : scope_.env) bytes += k.size() + v.size() + 1;
    if (bytes > kMaxEnvBytes) return err("ENV holds more than 32 KiB");
    return okStatus();
  }

  // RUN's, CMD's and ENTRYPOINT's exec form as written, or their shell
  // form: SHELL, then the command as written. An exec form names a program
  // (or, for CMD and ENTRYPOINT only, is [] for none) and holds no NUL,
  // which execve could not pass.
  Result<std::vector<std::string>> commandLine(const std::string& kw, std::string_view args) const {
    if (auto e = execForm(args)) {
      if (e->empty() && kw != "run") return std::move(*e);
      if (e->empty() || (*e)[0].empty())
        return err(upper(kw) + "'s exec form needs a program first");
      for (const auto& a : *e)
        if (a.find('\0') != std::string::npos) return err(upper(kw) + "'s exec form holds a NUL");
      return std::move(*e);
    }
    std::vector<std::string> argv = shell_;
    argv.emplace_back(args);
    return argv;
  }

  Status run(const std::string& kw, std::string_view args) {
    Flags f = leadingFlags(args);
    if (!f.list.empty())
      return err("RUN --" + f.list[0].first + " is not supported by Vessel templates");
    if (f.rest.empty()) return err("RUN needs a command");
    if (!execForm(f.rest)) {
      for (size_t p = f.rest.find("<<"); p != std::string_view::npos; p = f.rest.find("<<", p + 2))
        if (p + 2 < f.rest.size() && f.rest[p + 2] != '<' && (p == 0 || f.rest[p - 1] != '<') &&
            (nameStart(f.rest[p + 2]) || f.rest[p + 2] == '-' || f.rest[p + 2] == '"' ||
             f.rest[p + 2] == '\''))
          return err("RUN with a heredoc (<<) is not supported: write the file with COPY");
    }
    VESSEL_ASSIGN_OR_RETURN(auto argv, commandLine(kw, f.rest));
    DockerStep s = step(kw, args);
    s.run = RunStep{std::move(argv)};
    return push(std::move(s));
  }

  Status copy(bool add, const std::string& name, std::string_view args) {
    const std::string kw = upper(name);
    Flags f = leadingFlags(args);
    CopyStep c;
    c.add = add;
    for (const auto& [k, v] : f.list) {
      if (k == "chown") {
        VESSEL_ASSIGN_OR_RETURN(c.chown, word(v));
        if (!userSpec(c.chown)) return err(kw + " --chown takes user[:group]");
      } else if (k == "chmod") {
        uint32_t mode = 0;
        bool ok = !v.empty() && v.size() <= 4;
        for (char ch : v) {
          ok &= ch >= '0' && ch <= '7';
          mode = mode * 8 + static_cast<uint32_t>(ch - '0');
        }
        if (!ok) return err(kw + " --chmod takes an octal mode such as 0755");
        c.chmod = mode;
      } else if (k == "link") {
        // Only a cache layout hint to BuildKit: every COPY is its own step here.
      } else if (k == "from") {
        return err(kw + " --from (multi-stage builds) is not supported by Vessel templates");
      } else {
        return err(kw + " --" + k + " is not supported by Vessel templates");
      }
    }
    std::vector<std::string> args_words;
    if (auto e = execForm(f.rest)) {
      for (const auto& w : *e) {
        VESSEL_ASSIGN_OR_RETURN(std::string x, word(w));
        args_words.push_back(std::move(x));
      }
    } else {
      VESSEL_ASSIGN_OR_RETURN(args_words, words(f.rest, true));
    }
    if (args_words.size() < 2) return err(kw + " needs a source and a destination");
    std::string dest = args_words.back();
    args_words.pop_back();
    for (const auto& src : args_words) {
      if (add && (src.find("://") != std::string::npos || src.rfind("git@", 0) == 0))
        return err(
            "ADD from a URL is not supported: download it in a RUN step, under the build's "
            "egress policy");
      if (src.empty()) return err(kw + ": an empty source");
    }
    bool dir = dest.ends_with("/") || dest == "." || dest.ends_with("/.");
    c.dest = joinPath(workdir_, dest);
    if (dir && c.dest != "/") c.dest += "/";
    if (c.dest == "/") c.dest = "/";
    c.sources = std::move(args_words);
    DockerStep s = step(name, args);
    s.copy = std::move(c);
    return push(std::move(s));
  }

  Status workdir(std::string_view args) {
    VESSEL_ASSIGN_OR_RETURN(std::string w, word(args));
    if (w.empty()) return err("WORKDIR needs a directory");
    workdir_ = joinPath(workdir_, w);
    return okStatus();
  }

  Status user(std::string_view args) {
    VESSEL_ASSIGN_OR_RETURN(std::string u, word(args));
    if (!userSpec(u)) return err("USER takes user[:group] (letters, digits, _ - .)");
    user_ = u;
    return okStatus();
  }

  Status command(const std::string& kw, std::string_view args) {
    if (args.empty()) return err(upper(kw) + " needs a command");
    VESSEL_ASSIGN_OR_RETURN(auto argv, commandLine(kw, args));
    VESSEL_TRY(count(args.size()));
    if (kw == "cmd") {
      cmd_ = std::move(argv);
    } else {
      entrypoint_ = std::move(argv);
      entrypoint_exec_ = execForm(args).has_value();
    }
    return okStatus();
  }

  Status shell(std::string_view args) {
    auto e = execForm(args);
    bool nul = e && std::any_of(e->begin(), e->end(), [](const std::string& a) {
                 return a.find('\0') != std::string::npos;
               });
    if (!e || e->empty() || (*e)[0].empty() || nul)
      return err("SHELL takes a JSON list such as [\"/bin/bash\", \"-c\"]");
    shell_ = std::move(*e);
    return okStatus();
  }

  Status expose(std::string_view args) {
    VESSEL_ASSIGN_OR_RETURN(auto ports, words(args, true));
    if (ports.empty()) return err("EXPOSE needs a port");
    for (const auto& w : ports) {
      std::string_view p = w;
      std::string_view proto = "tcp";
      if (size_t sl = p.find('/'); sl != std::string_view::npos) {
        proto = p.substr(sl + 1);
        p = p.substr(0, sl);
      }
      unsigned port = 0;
      bool ok = !p.empty() && p.size() <= 5 && (proto == "tcp" || proto == "udp");
      for (char c : p) {
        ok &= c >= '0' && c <= '9';
        port = port * 10 + static_cast<unsigned>(c - '0');
      }
      if (!ok || port == 0 || port > 65535) return err("EXPOSE takes PORT or PORT/tcp|udp");
      if (proto == "tcp" && plan_.exposed.size() < 256)
        plan_.exposed.push_back(static_cast<uint16_t>(port));
    }
    return okStatus();
  }

  DockerStep step(const std::string& kw, std::string_view args) const {
    DockerStep s;
    s.line = line_;
    s.text = shown(kw == "add" ? "ADD" : kw == "copy" ? "COPY" : "RUN", args);
    s.user = user_;
    s.workdir = workdir_;
    s.env = scope_.entries();
    return s;
  }

  Status push(DockerStep s) {
    size_t bytes = s.text.size() + s.user.size() + s.workdir.size();
    for (const auto& e : s.env) bytes += e.size();
    if (s.run)
      for (const auto& a : s.run->argv) bytes += a.size();
    if (s.copy)
      for (const auto& a : s.copy->sources) bytes += a.size();
    VESSEL_TRY(count(bytes));
    plan_.steps.push_back(std::move(s));
    return okStatus();
  }

  char esc_;
  const std::map<std::string, std::string>& build_args_;
  DockerPlan plan_;
  Scope global_, scope_;
  std::set<std::string> declared_;
  std::vector<std::string> shell_ = {"/bin/sh", "-c"};
  std::vector<std::string> cmd_, entrypoint_;
  bool entrypoint_exec_ = false;
  std::string user_ = "root", workdir_ = "/";
  bool seen_from_ = false;
  unsigned line_ = 0;
  size_t plan_bytes_ = 0;
};

}  // namespace

Result<DockerPlan> parseDockerfile(std::string_view text,
                                   const std::map<std::string, std::string>& build_args) {
  if (text.size() > kMaxDockerfileBytes)
    return Error(Code::kInvalidArgument, "Dockerfile larger than 1 MiB");
  if (text.find('\0') != std::string_view::npos)
    return Error(Code::kInvalidArgument, "Dockerfile holds a NUL byte");
  for (const auto& [k, v] : build_args)
    if (!portableEnvName(k) || !envValue(v))
      return Error(Code::kInvalidArgument,
                   "--build-arg: bad name '" + k.substr(0, 64) + "' or a NUL in its value");
  std::vector<std::string_view> lines = splitView(text, '\n');
  size_t first = 0;
  VESSEL_ASSIGN_OR_RETURN(char escape, readDirectives(lines, &first));
  auto logical = logicalLines(lines, first, escape);
  if (logical.size() > kMaxDockerfileInstructions)
    return Error(
        Code::kInvalidArgument,
        "Dockerfile: more than " + std::to_string(kMaxDockerfileInstructions) + " instructions");
  Planner p(escape, build_args);
  for (const auto& l : logical) VESSEL_TRY(p.instruction(l));
  return p.finish();
}

}  // namespace vessel::templates
