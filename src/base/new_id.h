#pragma once
// Ids minted for sandboxes, operations and VMs: a prefix and 12 random hex
// digits, e.g. "sb-3f9a0c1d2e4b".
#include <string>

namespace vessel {

std::string newId(const std::string& prefix);

}  // namespace vessel
