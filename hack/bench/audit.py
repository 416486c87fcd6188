#!/usr/bin/env python3
"""hack/bench/audit.py - reads the API server's audit log for the benchmark sections (scale.sh).

Only completed requests count (stage ResponseComplete; a watch once, when it ends), one per audit
ID; times are the API server's stageTimestamp, as epoch seconds. "hostdevd" requests are those
whose user agent starts with hostdevd/; WHO is "controller" for the hostdevd-controller service
account and "agent" for anyone else.

  audit.py follow LOG COUNT TIMEOUT RESOURCE VERB NAME_RE FROM
      follows LOG (as it grows) until COUNT distinct objects of RESOURCE whose name matches
      NAME_RE got a successful hostdevd request of VERB completed after FROM, then prints the
      stageTimestamp of the one that completed the set; exit 1 (and the count reached on stderr)
      after TIMEOUT s.
  audit.py last LOG FROM RESOURCE_RE VERB_RE [NAME_RE]
      the stageTimestamp of the last successful hostdevd request on a resource matching
      RESOURCE_RE (subresources included) with a verb matching VERB_RE completed after FROM;
      nothing when there is none.
  audit.py window LOG FROM TO
      hostdevd's requests completed in [FROM, TO]: "WHO VERB RESOURCE COUNT" lines, then
      "429 VERB RESOURCE N" (hostdevd's requests answered 429 Too Many Requests), "any 429 - N"
      (anyone's 429s) and "any all - N" (every request of anyone).
"""
import collections
import datetime
import glob
import json
import os
import re
import sys
import time


def epoch(ts):
    return datetime.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def completed_event(line):
    """The audit event of one log line when it is a completed request, else None."""
    try:
        e = json.loads(line)
    except ValueError:
        return None
    return e if e.get("stage") == "ResponseComplete" else None


def events(f):
    """Completed requests from an open file, as they are appended (a partial last line waits)."""
    buf = ""
    while True:
        chunk = f.readline()
        if not chunk:
            yield None  # at the end for now
            continue
        buf += chunk
        if not buf.endswith("\n"):
            continue
        line, buf = buf, ""
        e = completed_event(line)
        if e:
            yield e


def ours(e):
    return e.get("userAgent", "").startswith("hostdevd/")


def ok(e):
    return 200 <= e.get("responseStatus", {}).get("code", 0) < 300


def who(e):
    return "controller" if e["user"]["username"].endswith(":hostdevd-controller") else "agent"


def rotated(f, log):
    """True when LOG is no longer the open file f (the API server rotated it: --audit-log-maxsize)."""
    try:
        return os.stat(log).st_ino != os.fstat(f.fileno()).st_ino
    except OSError:
        return False


def follow(log, count, timeout, resource, verb, name_re, since):
    want, seen, deadline = re.compile(name_re), set(), time.monotonic() + timeout
    while True:
        with open(log) as f:
            for e in events(f):
                if e is None:
                    if rotated(f, log):
                        break  # the rest of this file was read: on with the new one
                    if time.monotonic() > deadline:
                        print(f"audit: {len(seen)} of {count}", file=sys.stderr)
                        return 1
                    time.sleep(0.05)
                    continue
                o = e.get("objectRef", {})
                if (ours(e) and ok(e) and e["verb"] == verb and o.get("resource") == resource
                        and want.search(o.get("name", "")) and epoch(e["stageTimestamp"]) > since):
                    seen.add(o.get("name"))
                    if len(seen) >= count:
                        print(f'{epoch(e["stageTimestamp"]):.3f}')
                        return 0


def completed(log):
    """Completed requests of LOG and of its rotated backups (audit-<time>.log), oldest first."""
    base, ext = os.path.splitext(log)
    for path in sorted(glob.glob(f"{glob.escape(base)}-*{ext}")) + [log]:
        with open(path) as f:
            for line in f:
                e = completed_event(line)
                if e:
                    yield e


def last(log, since, resource_re, verb_re, name_re=""):
    res, verbs, want, t = re.compile(resource_re), re.compile(verb_re), re.compile(name_re), None
    for e in completed(log):
        o = e.get("objectRef", {})
        if (ours(e) and ok(e) and verbs.search(e["verb"]) and res.fullmatch(o.get("resource", ""))
                and want.search(o.get("name", ""))):
            s = epoch(e["stageTimestamp"])
            if s > since:
                t = s if t is None else max(t, s)
    if t is not None:
        print(f"{t:.3f}")
    return 0


def window(log, since, until):
    n, n429, seen, too_many, total = collections.Counter(), collections.Counter(), set(), 0, 0
    for e in completed(log):
        if e["auditID"] in seen or not since <= epoch(e["stageTimestamp"]) <= until:
            continue
        seen.add(e["auditID"])
        total += 1
        too_many += e.get("responseStatus", {}).get("code") == 429
        if ours(e):
            k = (e["verb"], e.get("objectRef", {}).get("resource", "?"))
            n[(who(e),) + k] += 1
            if e.get("responseStatus", {}).get("code") == 429:
                n429[k] += 1
    for k, v in sorted(n.items()):
        print(*k, v)
    for k, v in sorted(n429.items()):
        print("429", *k, v)
    print("any 429 -", too_many)
    print("any all -", total)
    return 0


def main(a):
    if len(a) == 8 and a[0] == "follow":
        return follow(a[1], int(a[2]), float(a[3]), a[4], a[5], a[6], float(a[7]))
    if len(a) >= 5 and a[0] == "last":
        return last(a[1], float(a[2]), *a[3:6])
    if len(a) == 4 and a[0] == "window":
        return window(a[1], float(a[2]), float(a[3]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
