#pragma once
// E2B's template builder (the SDK's `Template().fromImage(…).copy(…)…` and
// `Template.build`): the bodies of POST /v3/templates, POST
// /v2/templates/{id}/builds/{buildID} and the tag routes, parsed once here
// (bounded, fuzzed by tests/fuzz/e2b_template_build), and the build turned
// into Vessel's own build spec (templates/build_spec.h), which the node
// builds as it builds a Dockerfile. docs/e2b.md, "Template builds".
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "templates/build_spec.h"
#include "templates/image_ref.h"

namespace vessel::e2b {

// POST /v3/templates: the name ("name" or "name:tag") and the build VM.
struct BuildRequest {
  std::string name;               // without a tag
  std::vector<std::string> tags;  // the name's tag first, then `tags`
  unsigned cpu_count = 0;         // 0: the build spec's default
  uint64_t memory_mib = 0;
};
Result<BuildRequest> parseBuildRequest(std::string_view body);

struct TemplateStep {
  enum class Kind { kCopy, kEnv, kRun, kWorkdir, kUser };
  Kind kind = Kind::kRun;
  std::vector<std::string> args;
  std::string files_hash;  // kCopy: the uploaded archive's hash
  bool force = false;      // built again, with every step after it
};

// POST /v2/templates/{id}/builds/{buildID} (TemplateBuildStartV2).
struct TemplateBuild {
  std::string from_image;     // canonical (templates/image_ref.h); or
  std::string from_template;  // a template the tenant sees
  // fromImageRegistry of type `registry`: the registry's username and
  // password, for this build's pull only (never stored or logged).
  bool registry_credentials = false;
  templates::RegistryAuth registry_auth;
  bool force = false;
  std::vector<TemplateStep> steps;
  std::string start_cmd, ready_cmd;
};
Result<TemplateBuild> parseTemplateBuild(std::string_view body);

// POST /templates/tags ({target: "name:tag", tags}) and DELETE
// /templates/tags ({name, tags}).
struct TagsRequest {
  std::string name;  // the template's name, without a tag
  std::string tag;   // POST: the target's tag ("default" when none)
  std::vector<std::string> tags;
};
Result<TagsRequest> parseTagsRequest(std::string_view body, bool assign);

// A COPY's files hash as the SDK makes it: 64 lowercase hex digits.
bool filesHash(std::string_view h);
// A template name or tag as E2B allows it: [a-z0-9._-], 1..64 here (a
// Vessel template name is [A-Za-z0-9_-]{1,64}; '.' is refused for it).
bool e2bTemplateName(std::string_view n);

// The archive (the SDK's tar.gz) uploaded under a files hash, or null.
using UploadedFiles = std::function<const std::string*(const std::string& hash)>;
// Vessel's build spec of `b` for the template `name`: COPY writes its
// archive into the guest, unpacks it into a scratch directory with the
// guest's tar, then copies
// `src` to `dest` as docker does; RUN, ENV, WORKDIR and USER become the
// spec's steps and their user, workdir and environment; startCmd and
// readyCmd its `start` (as the last USER in the last WORKDIR) and `ready`.
// Checked as parseBuildSpec checks a spec. kFailedPrecondition when a
// COPY's archive was not uploaded.
Result<templates::BuildSpec> toBuildSpec(const TemplateBuild& b, const BuildRequest& r,
                                         const UploadedFiles& files);
// The shell words of `s`, single-quoted; `glob`: '*' and '?' stay unquoted
// (a COPY's source may be a pattern).
std::string shellQuote(std::string_view s, bool glob = false);

}  // namespace vessel::e2b
