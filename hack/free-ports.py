#!/usr/bin/env python3
"""hack/free-ports.py [N] - prints N (default 1) free TCP ports on 127.0.0.1, space-separated.

Chosen at random below the kernel's ephemeral range (net.ipv4.ip_local_port_range), where no
outgoing connection takes a source port: a port the kernel handed out as "free" (bind to 0) is
from that range, and on a busy machine (make test's suites side by side, each with its clients)
another connection can take it as its source port before the server that was meant to listen
there binds it ("address already in use"). Each port is checked by binding it, and all are held
until all are chosen, so they differ. Falls back to the kernel's choice when the range leaves
no room below it.
"""
import random
import socket
import sys


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    low, high = 10000, ephemeral_low() - 1
    held = []
    for _ in range(n):
        s = socket.socket()
        for _ in range(200 if high - low > 1000 else 0):
            try:
                s.bind(("127.0.0.1", random.randint(low, high)))
                break
            except OSError:
                continue
        else:
            s.bind(("127.0.0.1", 0))
        held.append(s)
    print(" ".join(str(s.getsockname()[1]) for s in held))


if __name__ == "__main__":
    main()
