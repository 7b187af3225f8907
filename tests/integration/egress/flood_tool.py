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
            pass
        if i % 64 == 0:
            time.sleep(0.01)  # ~6000 queries/s: a flood, without starving the connects
        try:
            while s.recv(2048):
                pass
        except OSError:
            pass
        i += 1


def hold(count, duration, out):
    """One process's share: `count` half-open TLS connections, held."""
    socks = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(("198.51.100.10", 443))
        except BlockingIOError:
            pass
        except OSError as e:
            print("stopped at", len(socks), e, flush=True)
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
    os.write(out, b"%d %d\n" % (len(socks), sent))
    time.sleep(duration)


def main():
    count, duration, flag = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    # The descriptor limit may not be raisable past its hard value: the
    # connections are spread over enough processes.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    per = max(1, hard - 256)
    with open("/proc/sys/net/ipv4/ip_local_port_range", "w") as f:
        f.write("1024 65000")
    start = time.monotonic()
    r, w = os.pipe()
    kids = []
    left = count
    while left > 0:
        n = min(per, left)
        left -= n
        pid = os.fork()
        if pid == 0:
            os.close(r)
            hold(n, duration, w)
            os._exit(0)
        kids.append(pid)
    os.close(w)
    opened = sent = 0
    with os.fdopen(r) as f:
        for _ in kids:
            line = f.readline().split()
            if len(line) == 2:
                opened += int(line[0])
                sent += int(line[1])
    stop = threading.Event()
    threading.Thread(target=dns_flood, args=(stop,), daemon=True).start()
    print("connections", opened, "half-open hellos", sent,
          "in %.1fs" % (time.monotonic() - start), flush=True)
    with open(flag, "w") as f:
        f.write("%d %d\n" % (opened, sent))
    for pid in kids:
        os.waitpid(pid, 0)
    stop.set()


if __name__ == "__main__":
    main()
