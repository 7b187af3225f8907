#pragma once
// A Dockerfile (issue 26, `vessel template build -f Dockerfile`), parsed
// once at the edge into a plan: the base it starts from, the RUN, COPY and
// ADD steps in order, each with the USER, WORKDIR and environment in effect
// where it stands, and the defaults it leaves (ENV, the start command, the
// user and directory it runs as and in). Instructions are read as docker
// reads them: parser directives (`# escape=`), line continuations, comments,
// exec and shell forms, `$VAR`, `${VAR}`, `${VAR:-word}` and `${VAR:+word}`
// in the instructions that expand them, ARG (before and after FROM) with
// --build-arg values. What Vessel does not do (a second FROM, COPY --from,
// ONBUILD, HEALTHCHECK, VOLUME, RUN --mount, ADD from a URL, ...) is refused
// naming its line. Bounded; any bytes give a plan or an Error (fuzzed).
//
// COPY and ADD sources stay names here: templates/build_context.h reads
// them from the context directory and turns the plan into a BuildSpec.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace vessel::templates {

inline constexpr size_t kMaxDockerfileBytes = 1 << 20;
inline constexpr size_t kMaxDockerfileInstructions = 2000;

// A COPY or ADD, its sources not yet read.
struct CopyStep {
  bool add = false;                  // ADD: local archives are unpacked
  std::vector<std::string> sources;  // relative to the context; may hold globs
  // Absolute (WORKDIR applied). Ends in '/' when the Dockerfile said it is
  // a directory.
  std::string dest;
  std::string chown;  // "" (root) or user[:group], names or numbers
  std::optional<uint32_t> chmod;
};

// A RUN: exec form as written, shell form as SHELL (default /bin/sh -c)
// followed by the command.
struct RunStep {
  std::vector<std::string> argv;
};

struct DockerStep {
  unsigned line = 0;  // the instruction's first line
  std::string text;   // the instruction as written, joined onto one line
  std::string user = "root";
  std::string workdir = "/";
  std::vector<std::string> env;  // NAME=VALUE: ARGs, then ENV (which wins)
  std::optional<RunStep> run;    // exactly one of run and copy is set
  std::optional<CopyStep> copy;
};

struct DockerPlan {
  // FROM: an OCI image reference (as written, expanded), or `vessel://NAME`
  // (a Vessel base or template) read into from_template.
  std::string from_image;
  std::string from_template;
  std::vector<DockerStep> steps;
  std::vector<std::string> env;    // ENV at the end: the template's defaults
  std::vector<std::string> start;  // ENTRYPOINT and CMD combined; empty: none
  std::string user = "root";       // USER at the end
  std::string workdir = "/";       // WORKDIR at the end
  std::vector<uint16_t> exposed;   // EXPOSE'd TCP ports, as written
  // Not errors: a --build-arg no ARG declares, a LABEL ignored.
  std::vector<std::string> warnings;
};

// Parses a Dockerfile with the build's --build-arg values.
Result<DockerPlan> parseDockerfile(std::string_view text,
                                   const std::map<std::string, std::string>& build_args = {});

}  // namespace vessel::templates
