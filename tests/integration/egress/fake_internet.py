#!/usr/bin/env python3
"""The egress tests' fake internet, run inside its own network namespace.

Everything here uses documentation addresses and .test names. Any byte that
reaches an attacker-controlled endpoint (X = 203.0.113.66, the CDN tenant
x2.test, inward traps like 169.254.169.254, disallowed ports of A) is
appended to the attacker log; a threat test passes only if that log stays
empty. Requests reaching the legitimate API are appended to the API log so
tests can check what the gateway injected.
"""
import argparse
import http.server
import os
import re
import socket
import socketserver
import ssl
import struct
import sys
import threading

ZONE = {
    "a.test": "198.51.100.10",
    "api.a.test": "198.51.100.10",
    "a2.test": "198.51.100.20",
    "x2.test": "198.51.100.20",
    "x.test": "203.0.113.66",
    "rebind.test": "169.254.169.254",
    "loop.test": "127.0.0.1",
    "ten.test": "10.1.2.3",
    "hold.test": "198.51.100.30",
}
X_IP = "203.0.113.66"
lock = threading.Lock()
args = None


def log(path, line):
    with lock, open(path, "ab") as f:
        f.write(line if isinstance(line, bytes) else line.encode())
        f.write(b"\n")
        f.flush()


def attacker(line):
    log(args.attacker_log, line)


def attacker_name(name):
    return name == "x.test" or name.endswith(".x.test") or name == "x2.test"


# --- DNS: authoritative for .test; queries for X's zone are X's to see ---
def dns_answer(pkt):
    if len(pkt) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", pkt[:6])
    pos, labels = 12, []
    while pos < len(pkt) and pkt[pos] != 0:
        n = pkt[pos]
        labels.append(pkt[pos + 1:pos + 1 + n].decode("ascii", "replace"))
        pos += 1 + n
    pos += 1
    qtype, qclass = struct.unpack("!HH", pkt[pos:pos + 4])
    question = pkt[12:pos + 4]
    name = ".".join(labels).lower()
    if attacker_name(name) or name.endswith(".x2.test"):
        attacker("dns query " + name)
    ip = ZONE.get(name)
    if ip is None and name.endswith(".x.test"):
        ip = X_IP
    rcode = 0 if ip else 3
    answers = b""
    if ip and qtype == 1:
        answers = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 30, 4) + socket.inet_aton(ip)
    hdr = struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, 1 if answers else 0, 0, 0)
    return hdr + question + answers


def serve_dns(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, 53))

    def loop():
        while True:
            pkt, src = s.recvfrom(2048)
            try:
                out = dns_answer(pkt)
            except Exception:
                out = None
            if out:
                s.sendto(out, src)

    threading.Thread(target=loop, daemon=True).start()


# --- raw loggers: every connection and byte to X and to traps ---
class RawLogger(socketserver.BaseRequestHandler):
    def handle(self):
        where = "%s:%d" % self.server.server_address
        attacker("tcp connect %s from %s" % (where, self.client_address[0]))
        self.request.settimeout(5)
        try:
            while True:
                data = self.request.recv(65536)
                if not data:
                    break
                attacker(b"tcp data " + where.encode() + b" " + data[:2000])
        except Exception:
            pass


class TServer(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def serve_raw_tcp(addr, port):
    srv = TServer((addr, port), RawLogger)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def serve_udp_logger(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))

    def loop():
        while True:
            data, src = s.recvfrom(65536)
            attacker("udp %s:%d from %s %r" % (addr, port, src[0], data[:200]))

    threading.Thread(target=loop, daemon=True).start()


def serve_raw_ip(proto):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, proto)

    def loop():
        while True:
            data, src = s.recvfrom(65536)
            dst = socket.inet_ntoa(data[16:20])
            # Echo requests (type 8) or any other protocol, to X or a trap.
            if proto == socket.IPPROTO_ICMP and (len(data) < 21 or data[20] != 8):
                continue
            if dst in (X_IP, "169.254.169.254", "10.1.2.3"):
                attacker("ip proto %d %s -> %s len %d" % (proto, src[0], dst, len(data)))

    threading.Thread(target=loop, daemon=True).start()


# --- a sink that holds any number of idle connections on one thread ---
def serve_hold(addr, port):
    import selectors
    sel = selectors.DefaultSelector()
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((addr, port))
    lsock.listen(4096)
    lsock.setblocking(False)
    sel.register(lsock, selectors.EVENT_READ)

    def loop():
        while True:
            for key, _ in sel.select():
                if key.fileobj is lsock:
                    try:
                        c, _ = lsock.accept()
                        c.setblocking(False)
                        sel.register(c, selectors.EVENT_READ)
                    except OSError:
                        pass
                else:
                    try:
                        data = key.fileobj.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(key.fileobj)
                        key.fileobj.close()

    threading.Thread(target=loop, daemon=True).start()


# --- HTTP(S) origins ---
class Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, code, body, extra=()):
        body = body.encode() if isinstance(body, str) else body
        self.send_response(code)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_expect_100(self):
        # /early answers at once without asking for (or reading) the body,
        # as servers that reject a request on its head do.
        if self.path.startswith("/early"):
            return True
        return super().handle_expect_100()

    def reflect(self):
        # Every encoding a service might echo a header in, in a chunked body
        # whose chunks split the value, gzip-compressed when the client
        # offers gzip.
        import base64, gzip, urllib.parse
        token = (self.headers.get("Authorization") or "").split(" ")[-1].encode()
        lines = [b"raw: " + token]
        for pad in (b"", b"x", b"xy"):
            lines.append(b"b64-%d: " % len(pad) + base64.b64encode(pad + token + b"!?"))
            lines.append(b"b64url-%d: " % len(pad) +
                         base64.urlsafe_b64encode(pad + token + b"!?"))
        t = token.decode()
        lines.append(b"json: " + t.replace("/", "\\/").replace("&", "\\u0026").encode())
        lines.append(b"pct-upper: " + urllib.parse.quote(t, safe="").encode())
        lower = re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), urllib.parse.quote(t, safe=""))
        lines.append(b"pct-lower: " + lower.encode())
        body = b"\n".join(lines) + b"\n"
        self.send_response(200)
        if "gzip" in (self.headers.get("Accept-Encoding") or ""):
            body = gzip.compress(body)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(0, len(body), 7):
            part = body[i:i + 7]
            self.wfile.write(b"%x\r\n" % len(part) + part + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")

    def do_GET(self):
        host = (self.headers.get("Host") or "").split(":")[0].lower()
        length = int(self.headers.get("Content-Length") or 0)
        # Like many servers, the CDN ignores a body on GET (and /early any
        # body): those bytes are the next request to it.
        lax = self.server.role == "cdn" and (self.command == "GET" or
                                             self.path.startswith("/early"))
        body = self.rfile.read(length) if length and not lax else b""
        role = self.server.role
        entry = "%s %s %s %s host=%s\n%s" % (role, self.server.server_address[1],
                                             self.command, self.path, host, str(self.headers))
        if role == "cdn" and attacker_name(host):
            attacker("cdn request for " + host + " " + self.path)
        if role == "a":
            log(args.api_log, entry)
        if self.path.startswith("/early"):
            return self.reply(401, "no")
        if self.path.startswith("/reflect"):
            return self.reflect()
        if self.path.startswith("/redirect"):
            return self.reply(302, "moved", [("Location", "https://x.test/steal")])
        if self.path.startswith("/echo"):
            return self.reply(200, str(self.headers) + body.decode("latin-1"))
        self.reply(200, "hello from %s (%s)\n" % (host, role))

    do_POST = do_GET
    do_PUT = do_GET


class HServer(http.server.ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True


def serve_http(addr, port, role, cert=None):
    srv = HServer((addr, port), Origin)
    srv.role = role
    if cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(args.dir, cert + ".crt"),
                            os.path.join(args.dir, cert + ".key"))
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--attacker-log", required=True)
    p.add_argument("--api-log", required=True)
    p.add_argument("--ready", required=True)
    args = p.parse_args()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    serve_dns("192.0.2.53")
    serve_http("198.51.100.10", 80, "a")
    serve_http("198.51.100.10", 443, "a", "a")
    serve_http("198.51.100.10", 8443, "a", "a")
    for port in (22, 25, 6379):
        serve_raw_tcp("198.51.100.10", port)  # A's ports no rule opens
    serve_hold("198.51.100.30", 7000)
    serve_http("198.51.100.20", 80, "cdn")
    serve_http("198.51.100.20", 443, "cdn", "cdn")
    for port in (80, 443, 8443, 22, 25, 53, 587, 5432, 6379, 15001, 15053):
        serve_raw_tcp(X_IP, port)
    for port in (53, 123, 443, 51820):
        serve_udp_logger(X_IP, port)
    for trap in ("169.254.169.254", "10.1.2.3"):
        for port in (80, 443):
            serve_raw_tcp(trap, port)
    serve_raw_ip(socket.IPPROTO_ICMP)
    serve_raw_ip(253)
    with open(args.ready, "w") as f:
        f.write("ready\n")
    threading.Event().wait()


if __name__ == "__main__":
    main()
