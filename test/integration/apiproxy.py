#!/usr/bin/env python3
"""test/integration/apiproxy.py - a forwarding proxy between hostdevd and the real API server
that replaces chosen responses with malformed ones (test_badinput.sh).

    apiproxy.py PORT UPSTREAM CA CERT KEY [WATCH_SECONDS]

Listens on 127.0.0.1:PORT (plain HTTP/1.1; the client's kubeconfig says http://...) and
forwards every request to UPSTREAM (https) with the client certificate CERT/KEY, streaming
watch responses chunk by chunk. Forwarded watches ask the API server for WATCH_SECONDS
(default 2) at most (timeoutSeconds), so that the client soon watches again and meets the
rules posted meanwhile. Control requests (never forwarded):

    POST /__rule   a JSON rule, appended; the first rule that matches a request answers it
                   instead of the API server, once (or "times" times), and is then dropped.
    GET  /__hits   the names of the rules used so far, one a line.
    GET  /__log    the requests seen so far, "METHOD PATH" a line.
    GET  /__times  the same, each line after the seconds (monotonic clock) it came in at.

A rule: {"name": N, "method": "GET", "path": REGEX (searched in the path with its query),
"times": 1, and one action:
    "status": CODE, "body": TEXT, "type": CONTENT-TYPE,  a whole response (with those headers);
    "headers": {NAME: VALUE}
    "cut": TEXT                          200 with a Content-Length past TEXT, cut after it;
    "lines": [TEXT...], "hold": SECONDS  a 200 watch stream of those lines (each + "\\n",
                                         sent as they are: a line may be cut), held open
                                         SECONDS, then ended;
    "prepend": [TEXT...]                 the real response (a watch stream) with those lines
                                         first.}
A TEXT "@big:N:TEXT" is TEXT with a string of N 'x' in place of "@X@"; "@hex:HEX" is raw bytes.
"""
import http.client
import http.server
import json
import re
import socket
import ssl
import sys
import threading
import time
import urllib.parse

LOCK = threading.Lock()
RULES = []
HITS = []
SEEN = []
TIMES = []


def text(t):
    if t.startswith("@hex:"):
        return bytes.fromhex(t[5:])
    if t.startswith("@big:"):
        _, n, rest = t.split(":", 2)
        return rest.replace("@X@", "x" * int(n)).encode()
    return t.encode()


def take_rule(method, path):
    with LOCK:
        SEEN.append(f"{method} {path}")
        TIMES.append(f"{time.monotonic():.3f} {method} {path}")
        for r in RULES:
            if r.get("method", "GET") == method and re.search(r["path"], path):
                r["times"] = r.get("times", 1) - 1
                if r["times"] <= 0:
                    RULES.remove(r)
                HITS.append(r.get("name", r["path"]))
                return r
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_all(self, code, body, ctype="application/json", headers=None):
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def chunk(self, data):
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def start_stream(self, code=200, headers=()):
        self.send_response(code)
        for k, v in headers:
            if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(k, v)
        if not any(k.lower() == "content-type" for k, _ in headers):
            self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def control(self):
        if self.command == "POST" and self.path == "/__rule":
            rule = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with LOCK:
                RULES.append(rule)
            return self.send_all(200, b"ok\n", "text/plain")
        with LOCK:
            lines = {"/__hits": HITS, "/__times": TIMES}.get(self.path, SEEN)
            body = "".join(x + "\n" for x in lines).encode()
        self.send_all(200, body, "text/plain")

    def act(self, r):
        if "status" in r:
            return self.send_all(r["status"], text(r.get("body", "")), r.get("type", "application/json"),
                                 r.get("headers"))
        if "cut" in r:
            body = text(r["cut"])
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body) + 1000))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            self.close_connection = True
            return None
        if "lines" in r:
            self.start_stream()
            for line in r["lines"]:
                self.chunk(text(line) + (b"" if r.get("raw") else b"\n"))
            time.sleep(r.get("hold", 0))
            if r.get("unterminated"):  # the chunked body never ends: close without "0\r\n\r\n"
                self.close_connection = True
                return None
            self.wfile.write(b"0\r\n\r\n")
            return None
        return self.forward(prepend=[text(x) + b"\n" for x in r.get("prepend", [])])

    def handle_one(self):
        if self.path.startswith("/__"):
            return self.control()
        r = take_rule(self.command, self.path)
        if r:
            return self.act(r)
        return self.forward()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_one

    def forward(self, prepend=()):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("host", "connection", "content-length", "accept-encoding")}
        up = http.client.HTTPSConnection(UP.hostname, UP.port, context=CTX, timeout=3600)
        try:
            path = re.sub(r"timeoutSeconds=\d+", "timeoutSeconds=%d" % WATCH_SECONDS, self.path)
            up.request(self.command, path, body=body, headers=headers)
            resp = up.getresponse()
            watch = "watch=1" in self.path and resp.status == 200
            if not watch:
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return None
            self.start_stream(resp.status, resp.getheaders())
            for p in prepend:
                self.chunk(p)
            while True:
                data = resp.read1(65536)
                if not data:
                    break
                self.chunk(data)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, socket.timeout, ssl.SSLError):
            self.close_connection = True
        finally:
            up.close()
        return None


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


if __name__ == "__main__":
    port, upstream, ca, cert, key = sys.argv[1:6]
    WATCH_SECONDS = int(sys.argv[6]) if len(sys.argv) > 6 else 2
    UP = urllib.parse.urlsplit(upstream)
    CTX = ssl.create_default_context(cafile=ca)
    CTX.load_cert_chain(cert, key)
    srv = Server(("127.0.0.1", int(port)), Handler)
    print("listening", flush=True)
    srv.serve_forever()
