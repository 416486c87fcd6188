#!/usr/bin/env python3
"""test/integration/mdev-kernel.py SYSFS - plays the kernel's part of mdev on a fixture tree
(hack/mk-sysfs-fixture.sh): a UUID written to a type's `create` file becomes an instance (its
directory under the parent, mdev_type, iommu_group in a new group, bus/mdev/devices/<uuid> and
the type's devices/<uuid> links; available_instances one less), "1" written to an instance's
`remove` file takes it away (available_instances one more). A UUID written to a type with
available_instances 0 is dropped, as the kernel refuses it. Polls every 50 ms until killed."""
import os
import shutil
import sys
import time

root = sys.argv[1]
next_group = [200]


def rel_link(target, name):
    os.symlink(os.path.relpath(target, os.path.dirname(name)), name)


def avail(tdir, delta):
    p = os.path.join(tdir, "available_instances")
    with open(p) as f:
        n = int(f.read().strip())
    with open(p + ".new", "w") as f:  # renamed over it: a reader never sees it empty
        f.write("%d\n" % (n + delta))
    os.rename(p + ".new", p)
    return n


def create(pdir, tdir, uuid):
    if avail(tdir, 0) <= 0:
        return
    inst = os.path.join(pdir, uuid)
    os.mkdir(inst)
    open(os.path.join(inst, "remove"), "w").close()
    rel_link(tdir, os.path.join(inst, "mdev_type"))
    g = os.path.join(root, "kernel/iommu_groups", str(next_group[0]))
    next_group[0] += 1
    os.makedirs(os.path.join(g, "devices"))
    rel_link(g, os.path.join(inst, "iommu_group"))
    rel_link(inst, os.path.join(g, "devices", uuid))
    rel_link(inst, os.path.join(tdir, "devices", uuid))
    rel_link(inst, os.path.join(root, "bus/mdev/devices", uuid))
    avail(tdir, -1)


def remove(uuid):
    link = os.path.join(root, "bus/mdev/devices", uuid)
    inst = os.path.realpath(link)
    tdir = os.path.realpath(os.path.join(inst, "mdev_type"))
    g = os.path.realpath(os.path.join(inst, "iommu_group"))
    # The kernel removes an instance before the write to `remove` returns, so the writer never
    # scans a half-removed one; this fake works 50 ms later, so it gives the capacity back first:
    # giving it back last left a window where a scan saw neither the instance nor its capacity,
    # and the agent rightly deleted the parent's free slot (a flake in make test).
    tlink = os.path.join(tdir, "devices", uuid)
    if os.path.islink(tlink):
        os.unlink(tlink)
    avail(tdir, 1)
    if os.path.islink(link):
        os.unlink(link)
    shutil.rmtree(g, ignore_errors=True)
    shutil.rmtree(inst)


def tick():
    bus = os.path.join(root, "class/mdev_bus")
    for parent in sorted(os.listdir(bus)) if os.path.isdir(bus) else []:
        pdir = os.path.realpath(os.path.join(bus, parent))
        types = os.path.join(pdir, "mdev_supported_types")
        for t in sorted(os.listdir(types)):
            cf = os.path.join(types, t, "create")
            with open(cf) as f:
                uuid = f.read().strip()
            if uuid:
                open(cf, "w").close()
                if not os.path.exists(os.path.join(root, "bus/mdev/devices", uuid)):
                    create(pdir, os.path.join(types, t), uuid)
    devs = os.path.join(root, "bus/mdev/devices")
    for uuid in sorted(os.listdir(devs)) if os.path.isdir(devs) else []:
        rf = os.path.join(devs, uuid, "remove")
        if os.path.exists(rf) and open(rf).read().strip() == "1":
            remove(uuid)


while True:
    tick()
    time.sleep(0.05)
