#pragma once
// Response and request heads built or read the same way by every front end.
//
// Downloads: a guest's file name is the guest's bytes, so it never reaches
// a head as it is. `Content-Disposition` follows RFC 6266: a quoted
// `filename` that is ASCII only (controls, DEL and non-ASCII become `_`,
// `"` and `\` escaped) and, when that lost anything, `filename*` with the
// name's bytes as UTF-8, percent-encoded (RFC 8187). A CR or LF in a name
// therefore never starts another field. `X-Content-Type-Options: nosniff`
// goes with it, so a browser does not guess the type of a guest's bytes.
//
// Request targets: where a request goes is its absolute-form authority
// when it has one (RFC 9112 3.2.2), else its one `Host`; two `Host` fields
// are refused (RFC 9112 3.2), since a proxy and a server could read
// different ones.
#include <boost/beast/http/message.hpp>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::http {

// The Content-Disposition value for `file_name` ("attachment" or "inline").
std::string contentDisposition(std::string_view disposition, std::string_view file_name);

// Sets Content-Disposition (as above) and X-Content-Type-Options: nosniff.
void setDownloadHeaders(boost::beast::http::fields& head, std::string_view disposition,
                        std::string_view file_name);

// The authority a request names: an absolute-form target's host[:port],
// else its Host ("" when it has none). kInvalidArgument for two Host fields
// or an absolute-form target that is not http(s)://authority/...
Result<std::string> requestAuthority(const boost::beast::http::request_header<>& head);

}  // namespace vessel::http
