#pragma once
// What the agent does only as PID 1: mount the basic filesystems and find
// the agent's virtio-serial port.
#include <string>

namespace vessel::agent {

// proc, sysfs, devtmpfs, devpts, tmpfs on /tmp and /run, cgroup2. Failures
// are logged to the console; the agent carries on with what it has.
void mountBasics();

// The /dev node of the virtio-serial port with this name ("" if none yet).
std::string findPort(const std::string& name);

}  // namespace vessel::agent
