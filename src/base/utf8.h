#pragma once
// Text from a guest (a build's output) on its way into JSON: JSON is
// UTF-8, and a client that parses strictly (boost::json, most browsers'
// EventSource decoders) drops or mangles an event that is not.
#include <string>
#include <string_view>

namespace vessel {

// `in` with every byte that does not start or continue a well-formed UTF-8
// sequence (overlong forms, surrogates and code points past U+10FFFF
// included) replaced by U+FFFD.
std::string toValidUtf8(std::string_view in);

}  // namespace vessel
