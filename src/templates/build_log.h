#pragma once
// A Dockerfile build's log entry (issue 26, item 3), as the node's builder
// makes it and the lifecycle publishes it (a template.log event): kind
// "step" when an instruction starts (text: the instruction), "stdout" or
// "stderr" with the complete lines a chunk of its output held, "done" when
// it ends (seconds: its time), or "cached" instead of all but "step" when
// the build cache held its result (node/build_cache.h). Here, below both, so each layer uses the
// one type.
#include <cstddef>
#include <string>
#include <vector>

namespace vessel::templates {

struct BuildLogEntry {
  unsigned step = 0;  // 1-based instruction number among the Dockerfile's steps
  unsigned line = 0;  // its Dockerfile line
  std::string kind;
  std::string text;
  std::vector<std::string> lines;
  double seconds = 0;
};

// What a build logs at most; past it, one "[further output is not logged]" line.
inline constexpr size_t kMaxBuildLogBytes = 4 << 20;

}  // namespace vessel::templates
