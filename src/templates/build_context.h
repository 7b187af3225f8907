#pragma once
// A Dockerfile's build context (issue 26): a directory whose files COPY and
// ADD read, minus what its `.dockerignore` excludes, and the translation of
// a DockerPlan into the BuildSpec the node's builder runs. Read on the host
// that asks for the build (the CLI); nothing here follows a symbolic link
// or leaves the directory, and the bytes taken are bounded.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "templates/build_spec.h"
#include "templates/dockerfile.h"

namespace vessel::templates {

// .dockerignore's rules as docker reads them: one pattern a line, `#`
// comments, `!` re-includes, `*` and `?` within a path segment, `**` any
// number of segments; a pattern that matches a directory excludes what is
// under it. The last rule that matches a path decides.
class IgnoreRules {
 public:
  static IgnoreRules parse(std::string_view text);
  bool excluded(std::string_view rel_path) const;
  // Some rule re-includes (`!`): what is under an excluded directory may
  // still be in the context, so a walk cannot skip it whole.
  bool hasExceptions() const;

 private:
  struct Rule {
    std::vector<std::string> segments;
    bool negate = false;
  };
  std::vector<Rule> rules_;
};

struct ContextLimits {
  // What the build spec can carry through the API (1 MiB as JSON, base64).
  uint64_t max_bytes = 600 << 10;
  size_t max_entries = 10000;
};

class BuildContext {
 public:
  // `dir` must exist; its .dockerignore (if any) is read.
  static Result<BuildContext> open(const std::string& dir, ContextLimits limits = {});

  // The BuildSpec for `plan`, named `name`: COPY and ADD read from here.
  Result<BuildSpec> spec(const DockerPlan& plan, const std::string& name);

 private:
  Status addCopy(const DockerStep& s, std::vector<BuildStep>& out);
  Status addFile(const DockerStep& s, const std::string& rel, const std::string& dest,
                 std::vector<BuildStep>& out);
  Status addTree(const DockerStep& s, const std::string& rel, const std::string& dest,
                 std::vector<BuildStep>& out);
  Result<std::vector<std::string>> matches(const DockerStep& s, const std::string& src);
  Status take(const DockerStep& s, uint64_t bytes);

  std::string dir_;
  IgnoreRules ignore_;
  ContextLimits limits_;
  uint64_t bytes_ = 0;
  size_t entries_ = 0;
};

}  // namespace vessel::templates
