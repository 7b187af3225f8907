#pragma once
// A throwaway CA and a server certificate it signed, made with the openssl
// CLI for TLS tests (http/tls.h and its clients): real files, as an
// operator's --tls-cert and --tls-key are.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace vessel::http::testing {

struct TestPki {
  std::string ca;    // the CA certificate clients trust
  std::string cert;  // the server certificate (leaf), signed by ca
  std::string key;   // its key
};

// In `dir` (created): a CA named `ca_name` and a leaf with common name `cn`
// for `san` ("IP:127.0.0.1,DNS:localhost"). False when openssl failed.
inline bool makeTestPki(const std::string& dir, const std::string& ca_name, const std::string& cn,
                        const std::string& san, TestPki* out) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/ext.cnf") << "subjectAltName=" << san
                                  << "\nbasicConstraints=critical,CA:FALSE\n"
                                     "extendedKeyUsage=serverAuth\n";
  const std::string d = "'" + dir + "'";
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
  std::string cmd = "cd " + d + " && openssl req -x509" + ec +
                    " -keyout ca.key -out ca.crt -days 2 -subj '/CN=" + ca_name +
                    "' 2>/dev/null && openssl req" + ec +
                    " -keyout leaf.key -out leaf.csr -subj '/CN=" + cn +
                    "' 2>/dev/null && openssl x509 -req -in leaf.csr -CA ca.crt -CAkey ca.key "
                    "-CAcreateserial -days 2 -extfile ext.cnf -out leaf.crt 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) return false;
  *out = {dir + "/ca.crt", dir + "/leaf.crt", dir + "/leaf.key"};
  return true;
}

}  // namespace vessel::http::testing
