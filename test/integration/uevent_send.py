#!/usr/bin/env python3
"""test/integration/uevent_send.py - sends one udev-format netlink message (as systemd-udevd
relays a kernel uevent, libudev's "libudev" header and the properties) to the udev multicast
group, for an agent started with --uevent-source udev (test_badinput.sh, hack/bench/health.sh).
Needs root.

    uevent_send.py CASE [DEVPATH...]

CASE: good, short, bad-magic, bad-offset, no-action (libudev drops these four),
kernel-format, huge-properties, bad-devpath (well-formed enough for libudev: events); add,
remove, change: a well-formed event of that ACTION (good is change) for each DEVPATH, sent
back to back, as the kernel announces a function added or removed (hack/bench/health.sh times
from the moment printed: "sent CASE: N bytes at <Unix time just before the first send>").
The message's subsystem hash is pci's, so the socket filter libudev installs lets it through
and libudev's own checks (systemd's device-monitor.c) judge it.
"""
import socket
import struct
import sys
import time

NETLINK_KOBJECT_UEVENT = 15
UDEV_GROUP = 2
MAGIC = 0xFEEDCAFE


def murmur2(data, seed=0):  # systemd's string_hash32(), MurmurHash2
    m, h, n = 0x5BD1E995, seed ^ len(data), len(data)
    i = 0
    while n - i >= 4:
        k = struct.unpack_from("<I", data, i)[0]
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
        i += 4
    rest = n - i
    if rest == 3:
        h ^= data[i + 2] << 16
    if rest >= 2:
        h ^= data[i + 1] << 8
    if rest >= 1:
        h ^= data[i]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    return h ^ (h >> 15)


def message(props, magic=MAGIC, off=None, length=None):
    body = b"".join(p.encode() + b"\0" for p in props)
    head = b"libudev\0" + struct.pack(">I", magic) + struct.pack(
        "=III", 40, 40 if off is None else off, len(body) if length is None else length) + \
        struct.pack(">III", murmur2(b"pci"), 0, 0) + struct.pack(">I", 0)
    return head + body


def props_of(action, devpath):
    return ["ACTION=" + action, "DEVPATH=" + devpath, "SUBSYSTEM=pci", "SEQNUM=4242",
            "PCI_SLOT_NAME=" + devpath.rsplit("/", 1)[-1]]


def main():
    case = sys.argv[1]
    devpaths = sys.argv[2:] or ["/devices/pci0000:00/0000:00:04.0"]
    devpath = devpaths[0]
    props = props_of("change", devpath)
    odd = {
        "good": lambda: message(props),
        "short": lambda: b"libudev\0\xfe\xed",
        "bad-magic": lambda: message(props, magic=0xDEADBEEF),
        "bad-offset": lambda: message(props, off=4096),
        "no-action": lambda: message(props[1:]),
        "kernel-format": lambda: ("change@" + devpath).encode() + b"\0" + message(props)[40:],
        "huge-properties": lambda: message(props + ["X=" + "y" * 60000]),
        "bad-devpath": lambda: message(["ACTION=add", "DEVPATH=/../../../etc/passwd", "SUBSYSTEM=pci",
                                        "SEQNUM=1"]),
    }
    if case in ("add", "remove", "change"):
        msgs = [message(props_of(case, d)) for d in devpaths]
    else:
        msgs = [odd[case]()]
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_KOBJECT_UEVENT)
    s.bind((0, 0))
    t0 = time.time()
    for msg in msgs:
        s.sendto(msg, (0, UDEV_GROUP))
    print(f"sent {case}: {sum(len(m) for m in msgs)} bytes at {t0:.6f}")


if __name__ == "__main__":
    main()
