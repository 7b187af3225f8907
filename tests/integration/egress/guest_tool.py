#!/usr/bin/env python3
"""What a hostile root guest does, one subcommand per primitive. Run inside
the guest network namespace by the egress tests. Prints a short result and
exits 0 even when the network refuses: the tests judge by the attacker's
log, not by what the guest saw."""
import socket
import struct
import sys


def dns(server, name, qtype=1, tcp=False):
    q = struct.pack("!HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\x00" + struct.pack("!HH", qtype, 1)
    try:
        if tcp:
            s = socket.create_connection((server, 53), timeout=3)
            s.sendall(struct.pack("!H", len(q)) + q)
            data = s.recv(4096)[2:]
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(3)
            s.sendto(q, (server, 53))
            data, _ = s.recvfrom(4096)
    except Exception as e:
        print("error", type(e).__name__)
        return
    rcode = data[3] & 0xF
    ancount = struct.unpack("!H", data[6:8])[0]
    ips = []
    if ancount and len(data) >= 4:
        ips = [socket.inet_ntoa(data[-4:])]
    print("rcode", rcode, "answers", ancount, *ips)


def tcp(host, port, payload):
    try:
        s = socket.create_connection((host, int(port)), timeout=3)
        s.sendall(payload.encode().decode("unicode_escape").encode("latin-1"))
        s.settimeout(3)
        print("reply", s.recv(4096)[:200])
    except Exception as e:
        print("error", type(e).__name__)


def udp(host, port, payload):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(payload.encode(), (host, int(port)))
    print("sent")


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def ping(host, payload="exfil-by-icmp"):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    body = payload.encode()
    hdr = struct.pack("!BBHHH", 8, 0, 0, 1, 1)
    pkt = struct.pack("!BBHHH", 8, 0, checksum(hdr + body), 1, 1) + body
    s.sendto(pkt, (host, 0))
    print("sent")


def rawproto(host, proto):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, int(proto))
    s.sendto(b"exfil-by-proto", (host, 0))
    print("sent")


def spoof_udp(src, dst, port):
    # A hand-built IPv4 header with a source address that is not ours.
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    payload = b"spoofed"
    udp_hdr = struct.pack("!HHHH", 4444, int(port), 8 + len(payload), 0)
    total = 20 + len(udp_hdr) + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 1, 0, 64, 17, 0, socket.inet_aton(src),
                     socket.inet_aton(dst))
    s.sendto(ip + udp_hdr + payload, (dst, 0))
    print("sent")


def frag_udp(dst, port):
    # A first fragment (MF set) of a UDP datagram to port.
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    src = socket.inet_aton("172.16.0.2")
    udp_hdr = struct.pack("!HHHH", 4444, int(port), 8 + 16, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 16, 7, 0x2000, 64, 17, 0, src,
                     socket.inet_aton(dst))
    s.sendto(ip + udp_hdr + b"fragment", (dst, 0))
    print("sent")


def raw_frame(ethertype_hex, dst_mac="ff:ff:ff:ff:ff:ff"):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind(("eth0", 0))
    src = s.getsockname()[4]
    dst = bytes(int(x, 16) for x in dst_mac.split(":"))
    s.send(dst + src + struct.pack("!H", int(ethertype_hex, 16)) + b"\x60" + b"x" * 60)
    print("sent")


def reflect(url, cafile):
    # Fetches the origin's /reflect offering gzip (as any client may), then
    # decodes every line, so the test sees the secret if any encoding of it
    # got through.
    import base64, gzip, json, ssl, urllib.parse, urllib.request
    ctx = ssl.create_default_context(cafile=cafile)
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip",
                                               "Authorization": "Bearer placeholder"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
            body = r.read()
            if r.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
    except Exception as e:
        print("error", type(e).__name__, e)
        return
    for line in body.decode("latin-1").splitlines():
        label, _, data = line.partition(": ")
        try:
            if label.startswith("b64url"):
                out = base64.urlsafe_b64decode(data.replace("*", "A")).decode("latin-1")
            elif label.startswith("b64"):
                out = base64.b64decode(data.replace("*", "A")).decode("latin-1")
            elif label == "json":
                out = json.loads('"' + data + '"')
            elif label.startswith("pct"):
                out = urllib.parse.unquote(data)
            else:
                out = data
        except Exception as e:
            out = "undecodable " + type(e).__name__
        print(label, "=", out, "| sent", data)


def main():
    cmd, rest = sys.argv[1], sys.argv[2:]
    {"dns": lambda: dns(rest[0], rest[1], int(rest[2]) if len(rest) > 2 else 1,
                        len(rest) > 3 and rest[3] == "tcp"),
     "tcp": lambda: tcp(*rest),
     "udp": lambda: udp(*rest),
     "ping": lambda: ping(*rest),
     "rawproto": lambda: rawproto(*rest),
     "spoof-udp": lambda: spoof_udp(*rest),
     "frag-udp": lambda: frag_udp(*rest),
     "raw-frame": lambda: raw_frame(*rest),
     "reflect": lambda: reflect(*rest)}[cmd]()


if __name__ == "__main__":
    main()
