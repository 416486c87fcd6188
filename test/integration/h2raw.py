#!/usr/bin/env python3
"""test/integration/h2raw.py - malformed HTTP/2 and gRPC input for a gRPC server on a unix
socket (test_badinput.sh), with no HTTP/2 library: frames are built by hand.

    h2raw.py SOCK CASE [METHOD]

Sends CASE (see CASES) and prints what the server answered, one frame a line:
"GOAWAY code=N", "RST_STREAM stream=S code=N", "HEADERS stream=S end_stream=B grpc-status=N grpc-message=M" (HPACK decoded),
"DATA stream=S len=N", "SETTINGS", ..., then "closed" when the server closed the connection or
"open" when it was still open after 0.3 s of silence.
"""
import base64
import socket
import struct
import sys

# RFC 7541 Appendix B, the Huffman code of each byte: 256 x (code u32, bit length u8).
HUFFMAN = (
    "AAAf+A0Af//YFw///+IcD///4xwP///kHA///+UcD///5hwP///nHA///+gcAP//6hg////8Hg///+kcD///6hw///"
    "/9Hg///+scD///7BwP///tHA///+4cD///7xwP///wHA////EcD///8hw////+Hg////McD///9BwP///1HA////Yc"
    "D///9xwP///4HA////kcD///+hwP///7HAAAABQGAAAD+AoAAAP5CgAAD/oMAAAf+Q0AAAAVBgAAAPgIAAAH+gsAAA"
    "P6CgAAA/sKAAAA+QgAAAf7CwAAAPoIAAAAFgYAAAAXBgAAABgGAAAAAAUAAAABBQAAAAIFAAAAGQYAAAAaBgAAABsG"
    "AAAAHAYAAAAdBgAAAB4GAAAAHwYAAABcBwAAAPsIAAB//A8AAAAgBgAAD/sMAAAD/AoAAB/6DQAAACEGAAAAXQcAAA"
    "BeBwAAAF8HAAAAYAcAAABhBwAAAGIHAAAAYwcAAABkBwAAAGUHAAAAZgcAAABnBwAAAGgHAAAAaQcAAABqBwAAAGsH"
    "AAAAbAcAAABtBwAAAG4HAAAAbwcAAABwBwAAAHEHAAAAcgcAAAD8CAAAAHMHAAAA/QgAAB/7DQAH//ATAAAf/A0AAD"
    "/8DgAAACIGAAB//Q8AAAADBQAAACMGAAAABAUAAAAkBgAAAAUFAAAAJQYAAAAmBgAAACcGAAAABgUAAAB0BwAAAHUH"
    "AAAAKAYAAAApBgAAACoGAAAABwUAAAArBgAAAHYHAAAALAYAAAAIBQAAAAkFAAAALQYAAAB3BwAAAHgHAAAAeQcAAA"
    "B6BwAAAHsHAAB//g8AAAf8CwAAP/0OAAAf/Q0P///8HAAP/+YUAD//0hYAD//nFAAP/+gUAD//0xYAP//UFgA//9UW"
    "AH//2RcAP//WFgB//9oXAH//2xcAf//cFwB//90XAH//3hcA///rGAB//98XAP//7BgA///tGAA//9cWAH//4BcA//"
    "/uGAB//+EXAH//4hcAf//jFwB//+QXAB//3BUAP//YFgB//+UXAD//2RYAf//mFwB//+cXAP//7xgAP//aFgAf/90V"
    "AA//6RQAP//bFgA//9wWAH//6BcAf//pFwAf/94VAH//6hcAP//dFgA//94WAP//8BgAH//fFQA//98WAH//6xcAf/"
    "/sFwAf/+AVAB//4RUAP//gFgAf/+IVAH//7RcAP//hFgB//+4XAH//7xcAD//qFAA//+IWAD//4xYAP//kFgB///AX"
    "AD//5RYAP//mFgB///EXA///4BoD///hGgAP/+sUAAf/8RMAP//nFgB///IXAD//6BYB///sGQP//+IaA///4xoD//"
    "/kGgf//94bB///3xsD///lGgD///EYAf//7RkAB//yEwAf/+MVA///5hoH///gGwf//+EbA///5xoH///iGwD///IY"
    "AB//5BUAH//lFQP//+gaA///6RoP///9HAf//+MbB///5BsH///lGwAP/+wUAP//8xgAD//tFAAf/+YVAD//6RYAH/"
    "/nFQAf/+gVAH//8xcAP//qFgA//+sWAf//7hkB///vGQD///QYAP//9RgD///qGgB///QXA///6xoH///mGwP//+wa"
    "A///7RoH///nGwf//+gbB///6RsH///qGwf//+sbD////hwH///sGwf//+0bB///7hsH///vGwf///AbA///7ho=")

STATIC = [None, ":authority", ":method", ":method", ":path", ":path", ":scheme", ":scheme",
          ":status", ":status", ":status", ":status", ":status", ":status", ":status"]

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
TYPES = {0: "DATA", 1: "HEADERS", 3: "RST_STREAM", 4: "SETTINGS", 6: "PING", 7: "GOAWAY", 8: "WINDOW_UPDATE"}


def frame(ftype, flags, stream, payload, length=None):
    n = len(payload) if length is None else length
    return struct.pack(">I", n)[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def literal(name, value):  # literal header field without indexing, new name, no Huffman
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def headers(method, ctype=b"application/grpc"):
    block = (b"\x83\x86"  # :method POST, :scheme http (static table)
             + literal(b":path", method) + literal(b":authority", b"localhost")
             + literal(b"content-type", ctype) + literal(b"te", b"trailers"))
    return frame(1, 0x4, 1, block)  # END_HEADERS


def message(body, compressed=0):
    return bytes([compressed]) + struct.pack(">I", len(body)) + body


def data(payload, end=True):
    return frame(0, 0x1 if end else 0, 1, payload)


def start():
    return PREFACE + frame(4, 0, 0, b"")


def cases(method):
    good = message(b"")
    return {
        "bad-preface": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        "oversized-frame": start() + frame(0, 0, 1, b"x" * 100, length=(1 << 24) - 1),
        "headers-on-stream-0": start() + frame(1, 0x5, 0, b"\x83"),
        "wrong-content-type": start() + headers(method, b"text/plain") + data(good),
        "wrong-wire-types": start() + headers(method) + data(message(b"\x0d\xff\xff\xff\xff\x0a\x01")),
        "truncated-length-prefix": start() + headers(method) + data(b"\x00\x00\x00"),
        "length-past-data": start() + headers(method) + data(b"\x00\x00\x00\x10\x00abc"),
        "compressed-flag": start() + headers(method) + data(message(b"", compressed=1)),
        "unknown-method": start() + headers(b"/no.Such/Method") + data(good),
        "data-before-headers": start() + data(good),
        "bad-hpack": start() + frame(1, 0x5, 1, b"\xff\xff\xff\xff\xff"),
        "window-update-zero": start() + frame(8, 0, 0, b"\x00\x00\x00\x00"),
    }


def huffman_table():
    raw = base64.b64decode("".join(HUFFMAN))
    return {struct.unpack(">IB", raw[i * 5:i * 5 + 5]): i for i in range(256)}


def huffman_decode(data, table):
    out, code, n = bytearray(), 0, 0
    for byte in data:
        for bit in range(7, -1, -1):
            code, n = (code << 1) | ((byte >> bit) & 1), n + 1
            if (code, n) in table:
                out.append(table[(code, n)])
                code, n = 0, 0
    return bytes(out)  # the rest is padding (all ones, under 8 bits)


def hpack_int(block, i, prefix):
    v = block[i] & ((1 << prefix) - 1)
    i += 1
    if v < (1 << prefix) - 1:
        return v, i
    shift = 0
    while True:
        b = block[i]
        i += 1
        v += (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def hpack_str(block, i, table):
    huff = block[i] & 0x80
    n, i = hpack_int(block, i, 7)
    s = block[i:i + n]
    return (huffman_decode(s, table) if huff else s).decode(errors="replace"), i + n


def hpack_decode(block, dynamic):
    """The header list of a block: enough of HPACK for what nghttp2 sends (names of the static
    table beyond :status are not needed here and print as #N)."""
    table, out, i = huffman_table(), {}, 0
    while i < len(block):
        b = block[i]
        if b & 0x80:  # indexed
            idx, i = hpack_int(block, i, 7)
            name, value = dynamic[idx - 62] if idx > 61 else (STATIC[idx] if idx < len(STATIC) else f"#{idx}", "")
        elif b & 0x20:  # dynamic table size update
            _, i = hpack_int(block, i, 5)
            continue
        else:
            prefix = 6 if b & 0x40 else 4
            idx, i = hpack_int(block, i, prefix)
            if idx:
                name = dynamic[idx - 62][0] if idx > 61 else (STATIC[idx] if idx < len(STATIC) else f"#{idx}")
            else:
                name, i = hpack_str(block, i, table)
            value, i = hpack_str(block, i, table)
            if prefix == 6:
                dynamic.insert(0, (name, value))
        out[name] = value
    return out


def main():
    sock, case = sys.argv[1], sys.argv[2]
    method = sys.argv[3].encode() if len(sys.argv) > 3 else b"/x.Y/Z"
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(0.3)
    s.connect(sock)
    s.sendall(cases(method)[case])
    buf = b""
    state = "closed"
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    except socket.timeout:
        state = "open"
    except ConnectionResetError:
        pass
    dynamic = []
    while len(buf) >= 9:
        n = int.from_bytes(buf[:3], "big")
        t, flags = buf[3], buf[4]
        sid = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
        p = buf[9:9 + n]
        buf = buf[9 + n:]
        name = TYPES.get(t, str(t))
        if t == 7:
            print(f"GOAWAY code={int.from_bytes(p[4:8], 'big')} debug={p[8:].decode(errors='replace')!r}")
        elif t == 3:
            print(f"RST_STREAM stream={sid} code={int.from_bytes(p[:4], 'big')}")
        elif t == 1:
            h = hpack_decode(p, dynamic)
            print(f"HEADERS stream={sid} end_stream={bool(flags & 1)} grpc-status={h.get('grpc-status', '')} "
                  f"grpc-message={h.get('grpc-message', '')!r}")
        elif t == 0:
            print(f"DATA stream={sid} len={n}")
        else:
            print(name)
    print(state)


if __name__ == "__main__":
    main()
