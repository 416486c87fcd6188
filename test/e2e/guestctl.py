#!/usr/bin/env python3
"""guestctl - the host side of a qemu test node's control channel (hack/qemu-node.sh).

The guest's second serial port (ttyS1) is a unix socket on the host (qemu chardev, server). The
guest's command loop (/sbin/ctl-loop) reads one request a line:

    @@HDQ ID TIMEOUT BASE64(shell script)

runs the script with /bin/sh (killed after TIMEOUT seconds unless 0) and answers

    @@HDQ-BEGIN ID
    BASE64(stdout and stderr)
    @@HDQ-END ID EXIT-STATUS

Answers to other IDs (of requests whose sender gave up) are skipped. The socket stays up across a
guest reboot (same qemu process); a new connection is made for every call, and a lock file beside
the socket serializes concurrent callers.

    guestctl.py SOCK exec [--timeout S] CMD...          run CMD; print its output; exit with its
                                                        status (124: timed out, 255: no channel)
    guestctl.py SOCK wait-ready [--timeout S] [--not-boot-id ID] [--qemu-pid PID]
                                                        wait until the loop answers (after a boot);
                                                        prints the guest's boot id
    guestctl.py SOCK reboot [--timeout S]               `reboot -f` in the guest and wait-ready for
                                                        the new boot; prints the seconds it took
    guestctl.py QMPSOCK hmp 'COMMAND'                   a human monitor command through QMP
    guestctl.py QMPSOCK qmp 'JSON'                      a raw QMP command ({"execute": ...})

Standard library only.
"""
import argparse
import base64
import fcntl
import json
import os
import re
import secrets
import socket
import sys
import time

BOOT_ID = "cat /proc/sys/kernel/random/boot_id"


class ChannelError(Exception):
    pass


class Channel:
    """One connection to the guest's control channel."""

    def __init__(self, path, deadline):
        self.path = path
        self.sock = None
        self.buf = b""
        self.lock = open(path + ".lock", "a")
        while True:
            try:
                fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ChannelError("another caller holds %s.lock" % path)
                time.sleep(0.05)
        self.connect(deadline)

    def connect(self, deadline):
        self.close_socket()
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.path)
                self.sock = s
                self.buf = b""
                return
            except (FileNotFoundError, ConnectionRefusedError) as e:
                s.close()
                if time.monotonic() > deadline:
                    raise ChannelError("cannot connect to %s: %s" % (self.path, e))
                time.sleep(0.2)

    def close_socket(self):
        if self.sock:
            self.sock.close()
            self.sock = None

    def close(self):
        self.close_socket()
        self.lock.close()

    def send(self, script, guest_timeout):
        rid = secrets.token_hex(6)
        b64 = base64.b64encode(script.encode()).decode()
        self.sock.sendall(("\n@@HDQ %s %d %s\n" % (rid, guest_timeout, b64)).encode())
        return rid

    def wait_answer(self, ids, deadline, ready_hint=False):
        """Waits for the answer to one of ids; returns (id, status, output bytes), or None when the
        deadline passes (or, with ready_hint, when the guest's loop announces it (re)started).
        Raises ConnectionError when qemu closes the socket."""
        pat = re.compile(rb"@@HDQ-BEGIN ([0-9a-f]+)\r?\n(.*?)@@HDQ-END \1 (\d+)\r?\n", re.S)
        while True:
            if ready_hint and b"@@HDQ-READY" in self.buf:
                self.buf = self.buf[self.buf.rfind(b"@@HDQ-READY") + 11:]
                return None
            for m in pat.finditer(self.buf):
                rid = m.group(1).decode()
                if rid in ids:
                    self.buf = self.buf[m.end():]
                    body = re.sub(rb"[^A-Za-z0-9+/=]", b"", m.group(2))
                    return rid, int(m.group(3)), base64.b64decode(body)
            # Keep only what may still be the start of an answer.
            cut = self.buf.rfind(b"@@HDQ-BEGIN ")
            self.buf = self.buf[cut:] if cut >= 0 else self.buf[-16:]
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(min(left, 1.0))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                raise ConnectionError("the control channel closed (qemu exited?)")
            self.buf += data


def do_exec(path, script, timeout):
    deadline = time.monotonic() + (timeout + 10 if timeout > 0 else 10 ** 9)
    try:
        ch = Channel(path, time.monotonic() + 10)
    except ChannelError as e:
        print("guestctl: %s" % e, file=sys.stderr)
        return 255
    try:
        rid = ch.send(script, timeout)
        ans = ch.wait_answer({rid}, deadline)
    except (ConnectionError, OSError) as e:
        print("guestctl: %s" % e, file=sys.stderr)
        return 255
    finally:
        ch.close()
    if ans is None:
        print("guestctl: no answer within %ds" % timeout, file=sys.stderr)
        return 124
    _, status, out = ans
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    return status


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def wait_ready(path, timeout, not_boot_id=None, ch=None, qemu_pid=None):
    """Pings until the guest's loop answers (with a boot id other than not_boot_id). Returns the
    boot id, or None on timeout (or when process qemu_pid is gone)."""
    deadline = time.monotonic() + timeout
    own = ch is None
    try:
        if own:
            ch = Channel(path, deadline)
        ids = set()
        while time.monotonic() < deadline:
            if qemu_pid and not alive(qemu_pid):
                print("guestctl: qemu (pid %d) exited" % qemu_pid, file=sys.stderr)
                return None
            try:
                ids.add(ch.send(BOOT_ID, 10))
                ans = ch.wait_answer(ids, min(deadline, time.monotonic() + 1.0), ready_hint=True)
            except (ConnectionError, OSError):
                time.sleep(0.2)
                try:
                    ch.connect(deadline)
                except ChannelError:
                    return None
                continue
            if ans is None:
                continue
            _, status, out = ans
            boot_id = out.decode(errors="replace").strip()
            if status == 0 and boot_id and boot_id != not_boot_id:
                return boot_id
            time.sleep(0.2)
        return None
    except ChannelError:
        return None
    finally:
        if own and ch:
            ch.close()


def do_reboot(path, timeout):
    t0 = time.monotonic()
    try:
        ch = Channel(path, t0 + 10)
    except ChannelError as e:
        print("guestctl: %s" % e, file=sys.stderr)
        return 255
    try:
        rid = ch.send(BOOT_ID, 10)
        ans = ch.wait_answer({rid}, t0 + 15)
        if ans is None or ans[1] != 0:
            print("guestctl: the guest does not answer", file=sys.stderr)
            return 255
        old = ans[2].decode().strip()
        ch.send("reboot -f", 0)
        t1 = time.monotonic()
        new = wait_ready(path, timeout, not_boot_id=old, ch=ch)
    except (ConnectionError, OSError) as e:
        print("guestctl: %s" % e, file=sys.stderr)
        return 255
    finally:
        ch.close()
    if new is None:
        print("guestctl: the guest did not come back within %ds" % timeout, file=sys.stderr)
        return 1
    print("%.1f" % (time.monotonic() - t1))
    return 0


def qmp(path, command, timeout=30):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    f = s.makefile("rwb")

    def call(obj):
        f.write(json.dumps(obj).encode() + b"\n")
        f.flush()
        while True:
            line = f.readline()
            if not line:
                raise ConnectionError("QMP closed")
            msg = json.loads(line)
            if "return" in msg or "error" in msg:
                return msg

    json.loads(f.readline())  # greeting
    call({"execute": "qmp_capabilities"})
    try:
        return call(command)
    finally:
        s.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("sock")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("exec")
    e.add_argument("--timeout", type=int, default=60)
    e.add_argument("command", nargs=argparse.REMAINDER)
    w = sub.add_parser("wait-ready")
    w.add_argument("--timeout", type=int, default=120)
    w.add_argument("--not-boot-id")
    w.add_argument("--qemu-pid", type=int)
    r = sub.add_parser("reboot")
    r.add_argument("--timeout", type=int, default=120)
    h = sub.add_parser("hmp")
    h.add_argument("command")
    q = sub.add_parser("qmp")
    q.add_argument("json")
    a = p.parse_args()

    if a.cmd == "exec":
        cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
        if not cmd:
            p.error("exec needs a command")
        return do_exec(a.sock, " ".join(cmd), a.timeout)
    if a.cmd == "wait-ready":
        boot_id = wait_ready(a.sock, a.timeout, a.not_boot_id, qemu_pid=a.qemu_pid)
        if boot_id is None:
            print("guestctl: the guest did not answer within %ds" % a.timeout, file=sys.stderr)
            return 1
        print(boot_id)
        return 0
    if a.cmd == "reboot":
        return do_reboot(a.sock, a.timeout)
    try:
        if a.cmd == "hmp":
            msg = qmp(a.sock, {"execute": "human-monitor-command",
                               "arguments": {"command-line": a.command}})
            if "error" in msg:
                print(msg["error"].get("desc", msg["error"]), file=sys.stderr)
                return 1
            sys.stdout.write(msg["return"])
            # HMP reports errors as text.
            return 1 if re.match(r"(Error|unknown command|Unknown)", msg["return"]) else 0
        msg = qmp(a.sock, json.loads(a.json))
        print(json.dumps(msg))
        return 1 if "error" in msg else 0
    except (OSError, ConnectionError, ValueError) as e:
        print("guestctl: %s" % e, file=sys.stderr)
        return 255


if __name__ == "__main__":
    sys.exit(main())
