#!/usr/bin/env python3
"""hack/bench/apiwatch.py - the latency section's clock (hack/bench/latency.sh): watch streams of
the API server read as they arrive, and actions whose start is stamped just before they are sent.

  apiwatch.py watch KUBECONFIG OUT PATH...   one watch per collection PATH (e.g.
      /apis/devices.harvesterhci.io/v1beta1/pcideviceclaims), each from a fresh list's
      resourceVersion and resumed from the last one seen when the server ends it; every event
      is a JSON line in OUT: {"t": arrival (Unix s), "res": PATH's last part, "type", "name",
      "rv", "object"}; {"type": "WATCHING", "res"} once a watch's response has started.
      One process per watch; runs until killed (SIGTERM ends the watches too).
  apiwatch.py wait OUT [--after T] [--res R] [--type T] [--name N] [--expr PY] [--timeout S]
      prints the arrival time of the first event after T that matches (PY: a Python expression
      over the object `o`; `get(o, "status.passthroughEnabled")` reads a path), and its
      resourceVersion; exits 1 when none came within S seconds (default 60).
  apiwatch.py send KUBECONFIG METHOD PATH [BODY]   one request on a connection made beforehand:
      prints the time just before the request was written and the HTTP status; exits 1 unless 2xx.
  apiwatch.py hmp QMP_SOCKET 'COMMAND'   a qemu monitor command through QMP, negotiated
      beforehand: prints the time just before it was sent; exits 1 on an error.
  apiwatch.py log FILE [--after T] [--match S]... [--utc] [--timeout S]
      a klog-format log (the agent's, kubelet's) read as it grows: prints the time the first
      line stamped after T that contains every S carries in its own header (Ixxxx hh:mm:ss.us,
      the current year; local time, or UTC with --utc as the agent writes it), not the time it
      was read; exits 1 when none came within S seconds (default 60).

Uses the kubeconfig's client certificate or token (read with `kubectl config view --raw`).
"""
import base64
import calendar
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse


def load_kubeconfig(path):
    raw = subprocess.run(["kubectl", "config", "view", "--raw", "--minify", "--flatten", "-o", "json",
                          "--kubeconfig", path], check=True, capture_output=True).stdout
    kc = json.loads(raw)
    cluster = kc["clusters"][0]["cluster"]
    user = kc["users"][0]["user"]
    url = urllib.parse.urlparse(cluster["server"])
    ctx = ssl.create_default_context()
    tmp = tempfile.mkdtemp(prefix="apiwatch.")

    def data_file(name, b64):
        p = os.path.join(tmp, name)
        with open(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600), "wb") as f:
            f.write(base64.b64decode(b64))
        return p

    if "certificate-authority-data" in cluster:
        ctx.load_verify_locations(data_file("ca", cluster["certificate-authority-data"]))
    headers = {"Accept": "application/json", "User-Agent": "hostdevd-bench-apiwatch"}
    if "client-certificate-data" in user:
        ctx.load_cert_chain(data_file("cert", user["client-certificate-data"]),
                            data_file("key", user["client-key-data"]))
    if "token" in user:
        headers["Authorization"] = "Bearer " + user["token"]
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    return url.hostname, url.port or 443, ctx, headers


def connect(api, timeout=None):
    host, port, ctx, _ = api
    c = http.client.HTTPSConnection(host, port, context=ctx, timeout=timeout)
    c.connect()
    c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return c


def get_json(api, path):
    c = connect(api, 30)
    c.request("GET", path, headers=api[3])
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError("GET %s: HTTP %d %s" % (path, r.status, body[:200]))
    return json.loads(body)


class Out:
    """Appends each record as one write(2) to a file opened O_APPEND: the watches' processes
    share it without interleaving."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def write(self, rec):
        os.write(self.fd, (json.dumps(rec, separators=(",", ":")) + "\n").encode())


def watch_one(api, out, path):
    res = path.rstrip("/").rsplit("/", 1)[-1]
    rv = None
    announced = False
    while True:
        try:
            if rv is None:
                rv = get_json(api, path)["metadata"]["resourceVersion"]
            c = connect(api)
            c.request("GET", "%s?watch=1&resourceVersion=%s&timeoutSeconds=1800" % (path, rv),
                      headers=api[3])
            r = c.getresponse()
            if r.status != 200:
                raise RuntimeError("watch %s: HTTP %d" % (path, r.status))
            if not announced:
                out.write({"t": time.time(), "res": res, "type": "WATCHING"})
                announced = True
            while True:
                line = r.readline()
                t = time.time()
                if not line:
                    break
                ev = json.loads(line)
                obj = ev.get("object") or {}
                meta = obj.get("metadata") or {}
                if ev.get("type") == "ERROR":  # 410 Gone: list again
                    rv = None
                    break
                rv = meta.get("resourceVersion", rv)
                if ev.get("type") == "BOOKMARK":
                    continue
                out.write({"t": t, "res": res, "type": ev.get("type"), "name": meta.get("name"),
                           "rv": meta.get("resourceVersion"), "object": obj})
            c.close()
        except (OSError, RuntimeError, http.client.HTTPException, ValueError) as e:
            out.write({"t": time.time(), "res": res, "type": "WATCH_ERROR", "error": str(e)})
            time.sleep(0.5)


def cmd_watch(argv):
    """One process per watch, so that decoding one stream's large objects never delays the
    stamping of another's events (as threads under the GIL would)."""
    api = load_kubeconfig(argv[0])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    children = []
    for p in argv[2:]:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            try:
                watch_one(api, Out(argv[1]), p)
            finally:
                os._exit(1)
        children.append(pid)
    try:
        for pid in children:
            os.waitpid(pid, 0)
    finally:
        for pid in children:
            try:
                os.kill(pid, 15)
            except OSError:
                pass


def get(o, path, default=None):
    for k in path.split("."):
        if not isinstance(o, dict) or k not in o:
            return default
        o = o[k]
    return o


def lines_of(path, timeout):
    """The complete lines of the file at `path`, those there and those appended, read every 20 ms;
    None once `timeout` seconds have gone by (after one look at least)."""
    deadline = time.monotonic() + timeout
    pos = 0
    buf = b""
    while True:
        with open(path, "rb") as f:
            f.seek(pos)
            chunk = f.read()
        pos += len(chunk)
        buf += chunk
        *lines, buf = buf.split(b"\n")
        yield from lines
        if time.monotonic() > deadline:
            yield None
            return
        time.sleep(0.02)


def cmd_wait(argv):
    import argparse
    p = argparse.ArgumentParser(prog="apiwatch.py wait")
    p.add_argument("out")
    p.add_argument("--after", type=float, default=0)
    p.add_argument("--res")
    p.add_argument("--type")
    p.add_argument("--name")
    p.add_argument("--expr")
    p.add_argument("--timeout", type=float, default=60)
    a = p.parse_args(argv)
    expr = compile(a.expr, "<expr>", "eval") if a.expr else None
    for line in lines_of(a.out, a.timeout):
        if line is None:
            return 1
        e = json.loads(line)
        if e["t"] < a.after or (a.res and e.get("res") != a.res) or \
                (a.type and e.get("type") != a.type) or (a.name and e.get("name") != a.name):
            continue
        if expr and not eval(expr, {"get": get, "o": e.get("object") or {}}):
            continue
        print("%.6f %s" % (e["t"], e.get("rv") or ""))
        return 0


KLOG = re.compile(rb"^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) ")


def klog_time(line, utc):
    m = KLOG.match(line)
    if not m:
        return None
    mon, day, hh, mm, ss, us = (int(x) for x in m.groups())
    year = time.gmtime().tm_year if utc else time.localtime().tm_year
    tm = (year, mon, day, hh, mm, ss, 0, 0, -1)
    return (calendar.timegm(tm) if utc else time.mktime(tm)) + us / 1e6


def cmd_log(argv):
    import argparse
    p = argparse.ArgumentParser(prog="apiwatch.py log")
    p.add_argument("file")
    p.add_argument("--after", type=float, default=0)
    p.add_argument("--match", action="append", default=[])
    p.add_argument("--utc", action="store_true")
    p.add_argument("--timeout", type=float, default=60)
    a = p.parse_args(argv)
    want = [m.encode() for m in a.match]
    for line in lines_of(a.file, a.timeout):
        if line is None:
            return 1
        t = klog_time(line, a.utc) if all(w in line for w in want) else None
        if t is not None and t >= a.after:
            print("%.6f" % t)
            return 0


def cmd_send(argv):
    api = load_kubeconfig(argv[0])
    method, path = argv[1], argv[2]
    body = argv[3].encode() if len(argv) > 3 else None
    headers = dict(api[3])
    if body is not None:
        headers["Content-Type"] = "application/json"
    c = connect(api, 60)
    t0 = time.time()
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    print("%.6f %d" % (t0, r.status))
    if r.status // 100 != 2:
        sys.stderr.write(data.decode(errors="replace")[:500] + "\n")
        return 1
    return 0


def cmd_hmp(argv):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(argv[0])
    f = s.makefile("rwb")

    def call(obj):
        f.write(json.dumps(obj).encode() + b"\n")
        f.flush()
        while True:
            msg = json.loads(f.readline())
            if "return" in msg or "error" in msg:
                return msg

    json.loads(f.readline())  # greeting
    call({"execute": "qmp_capabilities"})
    t0 = time.time()
    msg = call({"execute": "human-monitor-command", "arguments": {"command-line": argv[1]}})
    s.close()
    print("%.6f" % t0)
    return 1 if "error" in msg or msg.get("return", "").startswith(("Error", "unknown")) else 0


def main():
    cmds = {"watch": cmd_watch, "wait": cmd_wait, "send": cmd_send, "hmp": cmd_hmp, "log": cmd_log}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.stderr.write(__doc__)
        return 2
    return cmds[sys.argv[1]](sys.argv[2:]) or 0


if __name__ == "__main__":
    sys.exit(main())
