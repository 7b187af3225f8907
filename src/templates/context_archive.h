#pragma once
// A Dockerfile's build context as a tar (issue 26): the CLI writes one from
// a directory (minus what .dockerignore excludes, as docker sends it) and
// streams it to POST /v1/templates:dockerfile; the API unpacks it into a
// fresh directory, where BuildContext reads it as it would the caller's.
//
// The tar is untrusted tenant input. It is read with libarchive rather than
// by a confined `tar` process: each member is judged here, in process,
// before anything of it is written (an absolute name, `..`, a device, a
// hard link out of the tree, a member that would be written through a
// symbolic link are refused with the member named), every write goes
// through an O_PATH descriptor of its directory opened with
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, and the same library writes the
// CLI's tar. A `tar` process would need an unprivileged uid to drop to
// and a timeout, and could only say "tar failed" with its stderr.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace vessel::templates {

// The member that carries a Dockerfile from outside its context (`vessel
// template build -f ../Dockerfile --context .`): read as the Dockerfile,
// and taken out of the context before any COPY sees it.
inline constexpr std::string_view kOutsideDockerfile = ".vessel-dockerfile";

struct UnpackLimits {
  uint64_t max_bytes = 64 << 20;  // the regular files' sizes, in all
  size_t max_entries = 100000;
};

// Unpacks the plain tar (ustar, pax or GNU) at `tar` into `dir`, an
// existing empty directory. Directories, regular files (modes without
// setuid, setgid and sticky bits), symbolic links (kept as links, never
// followed) and hard links to earlier members are made; anything else is
// refused. kInvalidArgument names the member and why; kResourceExhausted
// says which limit was passed. On an error `dir` holds a part: the
// caller removes it.
Status unpackContextTar(const std::string& tar, const std::string& dir, UnpackLimits limits = {});

// The regular file `rel` (a path inside the context, no `..`) of the
// unpacked context `dir`, reached through no symbolic link, at most
// `max_bytes`: a Dockerfile. kInvalidArgument naming `rel` otherwise.
Result<std::string> readContextFile(const std::string& dir, const std::string& rel,
                                    size_t max_bytes);

struct ContextTarStats {
  uint64_t bytes = 0;  // the regular files' sizes
  size_t entries = 0;
};

// Writes the context `dir` as a tar (ustar, pax headers where a name is
// long) to the open file `fd`: its directories, regular files and symbolic
// links (as links), minus what its .dockerignore excludes; `always` (paths
// relative to `dir`) go even when excluded, as docker sends the Dockerfile
// and .dockerignore; `extra` adds members from memory (name -> content).
// Sockets and FIFOs are left out. At most `max_entries` members.
Result<ContextTarStats> writeContextTar(const std::string& dir, int fd,
                                        const std::vector<std::string>& always = {},
                                        const std::map<std::string, std::string>& extra = {},
                                        size_t max_entries = 100000);

}  // namespace vessel::templates
