#pragma once
// A template build spec (api/openapi.yaml BuildSpec; `vessel template build
// -f spec.json`): what a template is built from. Parsed once at the edge
// (the API, the CLI) into this typed struct; the node's builder
// (node/template_builder.h) only ever sees the struct.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace vessel::templates {

// One step of a Dockerfile's build (templates/build_context.h makes them),
// run in order after `files` and `commands`.
struct BuildStep {
  enum class Kind { kRun, kWrite, kMkdir, kUnpack };
  Kind kind = Kind::kRun;
  unsigned line = 0;  // the Dockerfile's line, named by errors; 0: none
  std::string text;   // the instruction, for progress and errors
  // kRun: argv run as `user` (a name, "root" by default) in `workdir`
  // (made if missing) with `env` on top of the image's.
  std::vector<std::string> argv;
  std::string user = "root";
  std::string workdir;
  std::vector<std::string> env;
  // kWrite: a file; kMkdir: a directory; kUnpack: a tar archive (gzip,
  // bzip2 or xz too) unpacked into the directory `path` by the guest's tar.
  std::string path;
  std::string content;
  uint32_t mode = 0644;
  std::string owner;  // kWrite, kMkdir: user[:group], names or ids; "": root
};

inline constexpr size_t kMaxBuildSteps = 20000;

struct BuildSpec {
  std::string name;
  std::string base = "minimal";  // a base image name or another template
  // An OCI image (templates/image_ref.h, canonical form) whose filesystem
  // the build boots instead of `base`; "" for none. Its config's Env comes
  // before `env`; with image_cmd, its Entrypoint and Cmd are the start
  // command (docs/templates.md, "From an OCI image").
  std::string from_image;
  // With from_image: the name of the tenant's credential that holds the
  // registry's username and password ("" for an anonymous pull). Only the
  // name travels in the spec; the API side resolves the value.
  std::string from_image_credential;
  bool image_cmd = false;
  std::map<std::string, std::string> files;  // guest path -> content
  std::vector<std::string> commands;         // run as root with /bin/sh -c, in order
  std::vector<std::string> env;              // KEY=VALUE defaults for every process
  std::string start;                         // started as `user`, left running
  // Or an argv (a Dockerfile's CMD and ENTRYPOINT), run as start_user in
  // start_cwd ("": `user` in its home).
  std::vector<std::string> start_argv;
  std::string start_user, start_cwd;
  std::vector<BuildStep> steps;
  std::string ready;  // polled until it exits 0
  unsigned vcpus = 1;
  uint64_t memory_mib = 256;
  // Its sandboxes' default disk (MiB); 0: templates::kDefaultDiskMib.
  uint64_t disk_mib = 0;
  // Build every step again (`vessel template build --no-cache`): neither
  // the template's version nor a step's cached disk is reused, and the
  // result is a new version. Not part of the canonical spec: it says how
  // to build, not what.
  bool no_cache = false;
};

// Parses a JSON build spec. Bounded (`max_bytes` for the whole text and
// for each file's base64 content; 1 MiB through POST /v1/templates); any
// bytes give a BuildSpec or an Error (fuzzed).
Result<BuildSpec> parseBuildSpec(std::string_view body, size_t max_bytes = 1 << 20);
// What a node takes from an API replica: a Dockerfile build's context came
// as a tar of up to 64 MiB by default (POST /v1/templates:dockerfile), so
// its files travel inline base64 in the spec. A replica's own
// --max-build-context-mib above this gets its larger builds refused by
// the node.
inline constexpr size_t kMaxNodeSpecBytes = size_t{96} << 20;
// The canonical text hashed into the version.
std::string canonicalSpec(const BuildSpec& s);
// The spec as parseBuildSpec reads it (what an API replica sends the node
// that builds it): parseBuildSpec(specJson(s)) gives `s` back.
std::string specJson(const BuildSpec& s);

}  // namespace vessel::templates
