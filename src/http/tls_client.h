#pragma once
// TLS for vesseld's own clients of its own listeners: an API replica's
// calls to a node's API (cluster/remote_node.h), its envd forwarder
// (http/forward.h) and a node's template copies from another node
// (cluster/template_transfer.h). The node's certificate is verified
// against the CA file the operator gives (--node-ca-file), else against
// the system's trust store, for the host name or IP address of the URL
// the node advertised; a peer that fails is never sent a byte of the
// request (its bearer token included).
#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>
#include <memory>
#include <string>

#include "base/result.h"

namespace vessel::http {

// A client context: TLS 1.2 and up, the peer verified against the PEM
// certificates in `ca_file` ("": the system's trust store). An unreadable
// file or one with no certificate is an error naming it. Thread-safe once
// made: every connection makes its own SSL from it.
Result<std::shared_ptr<boost::asio::ssl::context>> clientContext(const std::string& ca_file);

// Before the handshake of `ssl`: the server name it sends (SNI, for a DNS
// name) and the name or address the certificate must carry.
void expectServer(SSL* ssl, const std::string& host);

// What a failed client handshake says: the verification's verdict when
// the certificate was the reason ("certificate verify failed: self-signed
// certificate in certificate chain"), else the transport's error.
std::string handshakeError(SSL* ssl, const boost::system::error_code& ec);

}  // namespace vessel::http
