// The proxy's first-bytes classifier and its decision: the first input byte
// chooses the segment size the guest's stream arrives in, the rest is the
// stream. Whatever the bytes, the classification is bounded and a verdict
// that dials by name dials a normalized, allowed name.
#include <boost/json.hpp>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gateway/classify.h"
#include "gateway/decide.h"
#include "gateway/name.h"

namespace {

using namespace vessel::gateway;

policy::Policy make(const char* mode) {
  auto p = policy::Policy::fromJson(
      boost::json::parse(std::string(R"({"generation":1,"mode":")") + mode +
                         R"(","allow":["a.test","*.w.test","p.test:8443"],
         "credentials":[{"name":"c","hosts":["a.test"],"header":"Authorization","value":"Bearer 0123456789abcdef"}],
         "inspect":["*.w.test"]})"));
  if (!p.ok()) __builtin_trap();
  return *p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const policy::Policy kPolicies[] = {make("allowlist"), make("full"), make("none")};
  static const policy::AddressClassifier kClasses;
  static const boost::asio::ip::address kDestination =
      boost::asio::ip::make_address("203.0.113.50");
  if (size == 0) return 0;
  size_t segment = data[0] + 1u;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);  // SAFETY: fuzzer bytes
  FirstBytes fb;
  bool done = false;
  for (size_t off = 0; off < in.size() && !done; off += segment) {
    done = fb.feed(in.substr(off, segment));
  }
  if (!done) fb.timeOut();
  const Classified& c = fb.result();
  if (c.bytes.size() > kClassifyCap + segment) __builtin_trap();
  for (const auto& p : kPolicies) {
    for (uint16_t port : {80, 443, 8443}) {
      Verdict v = decide(c, p, kClasses, kDestination, port);
      if (v.action == Verdict::Action::kDialName) {
        auto n = normalizeName(v.name);
        if (!n.ok() || *n != v.name || !p.allows(v.name, port)) __builtin_trap();
      }
      if (v.action == Verdict::Action::kDialOriginal && p.mode != policy::Mode::kFull)
        __builtin_trap();
      if (v.credential && (port != 443 || v.tier != Verdict::Tier::kTerminate)) __builtin_trap();
      if (p.mode == policy::Mode::kNone && v.action != Verdict::Action::kDeny) __builtin_trap();
    }
  }
  return 0;
}
