#!/usr/bin/env python3
# hack/bench/ctlmem-objects.py - writes what N nodes' agents would have written, without the
# agents, for hack/bench/ctlmem.sh: for each node NAME (node-0001 ...) a Node, its agent's
# heartbeat Lease (of an hour: the controller counts the agent as running without renewals),
# and its 64 PCIDevices as `hostdevd inventory -o json` gives them for one
# node's tree (the template), renamed to the node (metadata.name, the nodename label,
# status.nodeName), owned by the Node, created and then given their status (the status
# subresource: two requests each, as the agent writes them); or (--claims) bound
# PCIDeviceClaims on given devices with the status the agent writes once a device is on
# vfio-pci (passthroughEnabled, Ready=True). Admin identity (client certificate): no admission
# policy is installed where it runs. Several connections at once; 429 answers are retried after
# their Retry-After; an object that exists already is taken as it is.
#   ctlmem-objects.py nodes TEMPLATE FIRST LAST        (node indices, inclusive)
#   ctlmem-objects.py claims NODE,NAME,ADDRESS,DRIVER...
# Environment: K8S_SERVER, K8S_CA, K8S_ADMIN_CERT, K8S_ADMIN_KEY (hack/cluster.sh's env).
import copy
import http.client
import json
import os
import ssl
import sys
import threading
import time
import urllib.parse

THREADS = 6
LEASE_NS = "hostdevd-node-lease"
G = "/apis/devices.harvesterhci.io/v1beta1"


class Client:
    def __init__(self):
        u = urllib.parse.urlparse(os.environ["K8S_SERVER"])
        self.host, self.port = u.hostname, u.port
        self.ctx = ssl.create_default_context(cafile=os.environ["K8S_CA"])
        self.ctx.load_cert_chain(os.environ["K8S_ADMIN_CERT"], os.environ["K8S_ADMIN_KEY"])
        self.conn = None

    def send(self, method, path, body, ctype="application/json"):
        """Returns (status, parsed body); retries 429s and broken connections."""
        data = json.dumps(body).encode()
        for attempt in range(60):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=60)
                self.conn.request(method, path, data, {"Content-Type": ctype, "Accept": "application/json"})
                r = self.conn.getresponse()
                text = r.read()
            except (OSError, http.client.HTTPException):
                self.conn = None
                time.sleep(0.5)
                continue
            if r.status == 429:
                time.sleep(float(r.getheader("Retry-After") or 1))
                continue
            return r.status, json.loads(text) if text else {}
        raise SystemExit(f"ctlmem-objects: {method} {path}: no answer after 60 tries")


def must(status, obj, what, ok=(200, 201)):
    if status not in ok:
        raise SystemExit(f"ctlmem-objects: {what}: HTTP {status}: {obj.get('message', obj)}")
    return obj


def node_name(i):
    return f"node-{i:04d}"


def write_node(c, i, template):
    name = node_name(i)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name,
        "labels": {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                   "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
                   "kubernetes.io/os": "linux"},
        "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                        "volumes.kubernetes.io/controller-managed-attach-detach": "true"}}}
    st, obj = c.send("POST", "/api/v1/nodes", node)
    if st == 409:
        st, obj = c.send("GET", f"/api/v1/nodes/{name}", None)
    uid = must(st, obj, f"Node {name}")["metadata"]["uid"]
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": name, "namespace": LEASE_NS},
             "spec": {"holderIdentity": name, "leaseDurationSeconds": 3600, "acquireTime": now,
                      "renewTime": now}}
    st, obj = c.send("POST", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases", lease)
    must(st, obj, f"Lease {name}", (200, 201, 409))
    prefix = template[0]["metadata"]["labels"]["nodename"]
    for t in template:
        d = copy.deepcopy(t)
        dev = d["metadata"]["name"].replace(prefix, name, 1)
        d["metadata"]["name"] = dev
        d["metadata"]["labels"]["nodename"] = name
        d["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]
        d["status"]["nodeName"] = name
        status = d.pop("status")
        st, obj = c.send("POST", f"{G}/pcidevices", d)
        must(st, obj, f"PCIDevice {dev}", (200, 201, 409))
        st, obj = c.send("PATCH", f"{G}/pcidevices/{dev}/status", {"status": status},
                         "application/merge-patch+json")
        must(st, obj, f"PCIDevice {dev} status")


def write_claim(c, spec):
    node, name, address, driver = spec.split(",", 3)
    claim = {"apiVersion": "devices.harvesterhci.io/v1beta1", "kind": "PCIDeviceClaim",
             "metadata": {"name": name},
             "spec": {"address": address, "nodeName": node, "userName": "bench"}}
    st, obj = c.send("POST", f"{G}/pcideviceclaims", claim)
    must(st, obj, f"PCIDeviceClaim {name}", (200, 201, 409))
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {"status": {"passthroughEnabled": True, "kernelDriverToUnbind": driver,
                         "conditions": [{"type": "Ready", "status": "True", "reason": "Bound",
                                         "message": f"{address} is bound to vfio-pci",
                                         "lastTransitionTime": now}]}}
    st, obj = c.send("PATCH", f"{G}/pcideviceclaims/{name}/status", status,
                     "application/merge-patch+json")
    must(st, obj, f"PCIDeviceClaim {name} status")


def run(jobs, fn):
    errors = []
    lock = threading.Lock()

    def worker():
        c = Client()
        while True:
            with lock:
                if not jobs or errors:
                    return
                job = jobs.pop()
            try:
                fn(c, job)
            except SystemExit as e:
                with lock:
                    errors.append(str(e))

    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(errors[0])


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "nodes":
        with open(sys.argv[2]) as f:
            template = json.load(f)["items"]
        first, last = int(sys.argv[3]), int(sys.argv[4])
        run(list(range(last, first - 1, -1)), lambda c, i: write_node(c, i, template))
    elif len(sys.argv) >= 3 and sys.argv[1] == "claims":
        run(list(reversed(sys.argv[2:])), write_claim)
    else:
        raise SystemExit(__doc__ or "usage: ctlmem-objects.py nodes TEMPLATE FIRST LAST | claims SPEC...")


if __name__ == "__main__":
    main()
