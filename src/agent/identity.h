#pragma once
// Who processes run as and with which environment, plus the identity a
// restored snapshot must refresh: hostname, wall clock, kernel entropy.
#include <sys/types.h>

#include <string>
#include <vector>

#include "agent/channel.h"
#include "agentproto/messages.h"
#include "base/result.h"

namespace vessel::agent {

struct UserInfo {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;
  std::string shell;
};

class Identity {
 public:
  explicit Identity(std::string passwd_path) : passwd_path_(std::move(passwd_path)) {}

  // Looks a user up in the guest's passwd file (static binaries have no NSS).
  Result<UserInfo> lookupUser(const std::string& name) const;
  // The full environment of a new process: base variables for the user, then
  // the default env, then the request's.
  std::vector<std::string> processEnv(const UserInfo& u, bool pty,
                                      const std::vector<std::string>& extra) const;

  void handle(Channel& ch, uint32_t stream, const agentproto::Frame& f);

 private:
  std::string passwd_path_;
  std::vector<std::string> default_env_;
};

}  // namespace vessel::agent
