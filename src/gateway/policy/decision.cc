#include "gateway/policy/decision.h"

namespace vessel::gateway::policy {

Decision decide(const Policy& p, const AddressClassifier& c, std::string_view name,
                const boost::asio::ip::address& destination, uint16_t port) {
  if (p.mode == Mode::kNone) return {Route::kRefuse, "mode-none"};
  if (!name.empty() && p.allows(name, port)) return {Route::kByName, ""};
  if (p.allowsAddress(destination, port)) {
    if (std::string why = c.refusalReason(destination); !why.empty())
      return {Route::kRefuse, "inward-destination:" + why};
    return {Route::kByAddress, ""};
  }
  // Full mode allows every name, so only an unnamed flow to a denied range
  // gets here.
  if (p.mode == Mode::kFull) return {Route::kRefuse, "denied-address"};
  return {Route::kRefuse, name.empty() ? "" : "policy"};
}

std::string refuseAnswer(const Policy& p, const AddressClassifier& c,
                         const boost::asio::ip::address& answer, std::optional<uint16_t> port) {
  if (std::string why = c.refusalReason(answer); !why.empty()) return "inward-answer:" + why;
  if (p.deniesAddress(answer, port)) return "denied-answer";
  return "";
}

bool permits(const Policy& p, std::string_view name, const boost::asio::ip::address& address,
             uint16_t port, bool by_address) {
  if (p.mode == Mode::kNone) return false;
  if (by_address) return p.allowsAddress(address, port);
  return p.allows(name, port) && !p.deniesAddress(address, port);
}

}  // namespace vessel::gateway::policy
