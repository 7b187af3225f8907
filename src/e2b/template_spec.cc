// An E2B template build as Vessel's build spec: the steps the node runs
// for a Dockerfile (templates/build_spec.h), so E2B's builder and
// `vessel template build -f Dockerfile` share one builder and its log.
#include <map>

#include "e2b/template_build.h"

namespace vessel::e2b {

namespace {

using templates::BuildSpec;
using templates::BuildStep;

// E2B's builds run as `user` in its home unless a USER or WORKDIR says
// otherwise, and so does the start command (E2B's template defaults).
constexpr const char* kDefaultUser = "user";

// What each step runs with: the USER, WORKDIR and ENV in effect.
struct State {
  std::string user = kDefaultUser;
  std::string workdir;
  std::map<std::string, std::string> env;
  std::vector<std::string> envList() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : env) out.push_back(k + "=" + v);
    return out;
  }
  std::string resolve(const std::string& p) const {
    if (p.empty() || p[0] == '/') return p;
    std::string base = workdir.empty() ? std::string("/home/user") : workdir;
    return base + (base.back() == '/' ? "" : "/") + p;
  }
};

std::string stepText(const TemplateStep& s) {
  static const char* names[] = {"COPY", "ENV", "RUN", "WORKDIR", "USER"};
  std::string t = names[static_cast<int>(s.kind)];
  for (const auto& a : s.args) t += " " + a;
  return t.size() > 512 ? t.substr(0, 509) + "..." : t;
}

// The copy from the unpacked archive as docker's COPY does it: a
// directory's contents into `dest`; a file into `dest` when it is a
// directory (ends in '/', exists, or several sources match), else as
// `dest`. Then the owner and mode the step names.
std::string copyScript(const std::string& scratch, const std::string& src, const std::string& dest,
                       const std::string& owner, const std::string& mode) {
  std::string s = "set -e\ncd " + shellQuote(scratch) + "\nd=" + shellQuote(dest) +
                  "\nn=0\nfor f in " + shellQuote(src, true) +
                  "; do [ -e \"$f\" ] || [ -L \"$f\" ] || continue; n=$((n+1)); done\n"
                  "[ \"$n\" -gt 0 ] || { echo 'COPY: nothing matches' " +
                  shellQuote(src) +
                  " >&2; exit 1; }\n"
                  "dir=0; case \"$d\" in */) dir=1;; esac\n"
                  "if [ \"$n\" -gt 1 ] || [ -d \"$d\" ]; then dir=1; fi\n"
                  "for f in " +
                  shellQuote(src, true) +
                  "; do\n"
                  "  [ -e \"$f\" ] || [ -L \"$f\" ] || continue\n"
                  "  if [ -d \"$f\" ] && [ ! -L \"$f\" ]; then mkdir -p \"$d\"; cp -a \"$f/.\" "
                  "\"$d/\"; t=\"$d\"\n"
                  "  elif [ \"$dir\" = 1 ]; then mkdir -p \"$d\"; cp -a \"$f\" \"$d/\"; "
                  "t=\"${d%/}/${f##*/}\"\n"
                  "  else mkdir -p \"$(dirname \"$d\")\"; cp -a \"$f\" \"$d\"; t=\"$d\"; fi\n";
  if (!owner.empty()) s += "  chown -R " + shellQuote(owner) + " \"$t\"\n";
  if (!mode.empty()) s += "  chmod " + shellQuote(mode) + " \"$t\"\n";
  return s + "done\ncd /\nrm -rf " + shellQuote(scratch) + "\n";
}

Status addStep(const TemplateStep& t, size_t index, State& st, BuildSpec& spec,
               const UploadedFiles& files) {
  BuildStep b;
  b.text = stepText(t);
  switch (t.kind) {
    case TemplateStep::Kind::kCopy: {
      const std::string* archive = files ? files(t.files_hash) : nullptr;
      if (!archive)
        return Error(Code::kFailedPrecondition,
                     b.text + ": its files (" + t.files_hash +
                         ") were not uploaded (the SDK uploads them to the URL "
                         "GET /templates/{id}/files/{hash} gives)");
      std::string scratch = "/tmp/.e2b-copy-" + std::to_string(index);
      // Written, then unpacked by the copy's script rather than by an unpack
      // step: busybox's tar finds no gzip by itself, so -z is said for the
      // SDK's tar.gz (gzip: false sends a plain tar).
      BuildStep write = b;
      write.kind = BuildStep::Kind::kWrite;
      write.path = scratch + ".tar";
      write.mode = 0600;
      write.content = *archive;
      spec.steps.push_back(std::move(write));
      bool gzip = archive->size() >= 2 && static_cast<unsigned char>((*archive)[0]) == 0x1f &&
                  static_cast<unsigned char>((*archive)[1]) == 0x8b;
      std::string unpack = "set -e\nmkdir -p " + shellQuote(scratch) + "\ntar -x" +
                           (gzip ? "z" : "") + "f " + shellQuote(scratch + ".tar") + " -C " +
                           shellQuote(scratch) + "\nrm -f " + shellQuote(scratch + ".tar") + "\n";
      std::string owner = t.args.size() > 2 && !t.args[2].empty() ? t.args[2] : st.user;
      if (owner == "root") owner.clear();
      std::string mode = t.args.size() > 3 ? t.args[3] : "";
      b.argv = {"/bin/sh", "-c",
                unpack + copyScript(scratch, t.args[0], st.resolve(t.args[1]), owner, mode)};
      b.user = "root";
      spec.steps.push_back(std::move(b));
      return okStatus();
    }
    case TemplateStep::Kind::kEnv:
      for (size_t i = 0; i + 1 < t.args.size(); i += 2) st.env[t.args[i]] = t.args[i + 1];
      return okStatus();
    case TemplateStep::Kind::kRun:
      b.argv = {"/bin/sh", "-c", t.args[0]};
      b.user = t.args.size() > 1 && !t.args[1].empty() ? t.args[1] : st.user;
      b.workdir = st.workdir;
      b.env = st.envList();
      spec.steps.push_back(std::move(b));
      return okStatus();
    case TemplateStep::Kind::kWorkdir:
      st.workdir = st.resolve(t.args[0]);
      if (st.workdir == "/") return okStatus();  // fromDockerfile starts with WORKDIR /
      b.kind = BuildStep::Kind::kMkdir;
      b.path = st.workdir;
      b.mode = 0755;
      if (st.user != "root") b.owner = st.user;
      spec.steps.push_back(std::move(b));
      return okStatus();
    case TemplateStep::Kind::kUser: st.user = t.args[0]; return okStatus();
  }
  return okStatus();
}

}  // namespace

Result<BuildSpec> toBuildSpec(const TemplateBuild& b, const BuildRequest& r,
                              const UploadedFiles& files) {
  BuildSpec spec;
  spec.name = r.name;
  if (!b.from_image.empty()) {
    spec.from_image = b.from_image;
  } else {
    spec.base = b.from_template;
  }
  if (r.cpu_count) spec.vcpus = r.cpu_count;
  if (r.memory_mib) spec.memory_mib = r.memory_mib;
  State st;
  for (size_t i = 0; i < b.steps.size(); ++i)
    VESSEL_TRY_CTX(addStep(b.steps[i], i, st, spec, files), "steps[" + std::to_string(i) + "]");
  spec.env = st.envList();
  spec.start = b.start_cmd;
  if (!b.start_cmd.empty()) {
    spec.start_user = st.user;
    spec.start_cwd = st.workdir;
  }
  spec.ready = b.ready_cmd;
  // Checked as the API checks a spec, without the archives' bytes (which
  // would not fit its 1 MiB and are not what it checks).
  BuildSpec shape = spec;
  for (auto& s : shape.steps) s.content.clear();
  auto checked = templates::parseBuildSpec(templates::specJson(shape));
  if (!checked.ok()) return std::move(checked).error();
  return spec;
}

}  // namespace vessel::e2b
