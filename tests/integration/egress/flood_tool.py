#!/usr/bin/env python3
"""A guest that tries to take egress from the others: it opens many TCP
connections to an allowed HTTPS name, sends each only the start of a
ClientHello (so the gateway holds them while classifying), and floods the
gateway's DNS with queries for names under an allowed wildcard (each one an
upstream lookup). Writes the number of connections started to FLAG, then
holds everything for DURATION seconds."""
import os
import resource
import socket
import struct
import sys
import threading
import time


def dns_flood(stop):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    i = 0
    while not stop.is_set():
        name = b"\x06r%05d\x01a\x04test\x00" % (i % 100000)
        q = struct.pack("!HHHHHH", i & 0xFFFF, 0x0100, 1, 0, 0, 0) + name + b"\x00\x01\x00\x01"
        try:
            s.sendto(q, ("172.16.0.1", 53))
        except OSError:
            time.sleep(0.001)
        try:
            while s.recv(2048):
                pass
        except OSError:
            pass
        i += 1


def main():
    count, duration, flag = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    resource.setrlimit(resource.RLIMIT_NOFILE, (count + 1024, count + 1024))
    with open("/proc/sys/net/ipv4/ip_local_port_range", "w") as f:
        f.write("1024 65000")
    stop = threading.Event()
    threading.Thread(target=dns_flood, args=(stop,), daemon=True).start()
    socks = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(("198.51.100.10", 443))
        except BlockingIOError:
            pass
        except OSError as e:
            print("stopped at", len(socks), e)
            s.close()
            break
        socks.append(s)
    # Half a ClientHello on every connection that got through.
    hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
    sent = 0
    for s in socks:
        try:
            s.send(hello)
            sent += 1
        except OSError:
            pass
    with open(flag, "w") as f:
        f.write("%d %d\n" % (len(socks), sent))
    print("connections", len(socks), "half-open hellos", sent, flush=True)
    time.sleep(duration)
    stop.set()


if __name__ == "__main__":
    main()
