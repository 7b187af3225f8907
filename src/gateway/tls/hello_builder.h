#pragma once
// Builds ClientHello bytes for tests, fuzz seeds and benchmarks: any set of
// server names, ECH, padding, and the handshake split over several records.
#include <cstdint>
#include <string>
#include <vector>

namespace vessel::gateway::tls {

struct HelloSpec {
  std::vector<std::string> server_names;  // empty: no server_name extension
  bool ech = false;
  uint16_t ech_code = 0xfe0d;  // the extension ECH is sent as (drafts used others)
  bool early_data = false;
  size_t padding = 0;      // bytes of a padding extension
  size_t record_size = 0;  // split the handshake into records of this size (0: one)
  std::vector<std::string> alpn;
};

std::string buildClientHello(const HelloSpec& spec);

}  // namespace vessel::gateway::tls
