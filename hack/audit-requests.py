#!/usr/bin/env python3
"""hack/audit-requests.py - the API requests hostdevd made (user agent hostdevd/<version>),
counted from the API server's audit log (hack/cluster.sh writes one per control plane).

    hack/audit-requests.py AUDIT_LOG [--resource PLURAL]

Prints "<reads> <writes> <lease writes>": reads are get/list/watch, writes are
create/update/patch/delete of anything but Leases, lease writes those of Leases (the agent's
heartbeat and the controller's election renew them on a timer, so an idle process makes only
those). With --resource, only requests for that resource (e.g. kubevirts) count.
"""
import json
import sys

WRITES = ("create", "update", "patch", "delete", "deletecollection")


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--resource"):
        sys.exit(__doc__)
    only = argv[3] if len(argv) == 4 else None
    reads = writes = leases = 0
    with open(argv[1], encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            if e.get("stage") != "ResponseComplete" or \
                    not e.get("userAgent", "").startswith("hostdevd/"):
                continue
            resource = e.get("objectRef", {}).get("resource")
            if only and resource != only:
                continue
            if e.get("verb") not in WRITES:
                reads += 1
            elif resource == "leases":
                leases += 1
            else:
                writes += 1
    print(reads, writes, leases)


if __name__ == "__main__":
    main(sys.argv)
