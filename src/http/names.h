#pragma once
// vessel::http is the project's HTTP layer on Boost.Beast: its namespace
// takes in Beast's HTTP vocabulary, so that `http::verb`, `http::status` and
// `http::field` read the same in the library and in every front end, next to
// its own `http::Request`, `http::HttpServer` and `http::Router`.
#include <boost/asio/awaitable.hpp>
#include <boost/beast/http.hpp>

namespace vessel::http {

using namespace boost::beast::http;  // NOLINT(google-build-using-namespace): see above
namespace asio = boost::asio;

}  // namespace vessel::http
