/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/blockers.c - why a PCI device cannot be passed through safely now (see blockers.h).
 * Blocking (sysfs reads); no logging.
 *
 * Decisions:
 * - One IOMMUGroupShared blocker names the members in the way (the first SHOWN of them, then
 *   a count). When one of them is a member the host cannot give up (node_vfio_member_essential),
 *   the advice is not "claim them too" but that the device cannot be passed through safely in
 *   this slot.
 * - node_hostuse_check() reports its first finding, so a device has at most one host-use
 *   blocker; the reason follows what it holds.
 */
#include "node/blockers.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/sriov.h"
#include "node/sysfs.h"
#include "node/vfio.h"

#define SHOWN 4 /* group members named in a message; the rest are counted */

struct found {
    struct node_blocker b[NODE_BLOCKERS_MAX];
    size_t n;
};

static void add(struct found *f, const char *reason, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void add(struct found *f, const char *reason, const char *fmt, ...)
{
    if (f->n == NODE_BLOCKERS_MAX)
        return;
    struct node_blocker *b = &f->b[f->n++];
    (void)snprintf(b->reason, sizeof(b->reason), "%s", reason);
    va_list ap;
    va_start(ap, fmt);
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): clang-analyzer 14 false positive
    (void)vsnprintf(b->message, sizeof(b->message), fmt, ap);
    va_end(ap);
}

/* The members of a group that stand in the way of a device. */
struct members {
    char list[320]; /* "0000:01:00.1 (snd_hda_intel), 0000:01:00.2 (no driver)" */
    size_t n;
    bool essential;      /* one of them the host cannot give up */
    struct err why_kept; /* why, for the first such member */
    const char *self;    /* what the device itself is when the platform needs it, or NULL */
};

static void note_member(struct members *ms, const struct node_vfio_dev *m)
{
    size_t len = strlen(ms->list);
    if (ms->n < SHOWN && len < sizeof(ms->list))
        (void)snprintf(ms->list + len, sizeof(ms->list) - len, "%s%s (%s)", ms->n ? ", " : "",
                       m->address, m->driver[0] ? m->driver : "no driver");
    ms->n++;
}

/* What the scan read of member `name`, when it read it whole: class, driver and group as
 * node_vfio_observe() reads them (the override, which no blocker looks at, is left ""). */
static bool member_from_scan(const struct node_pci_scan_result *scan,
                             const struct node_pci_dev *self, const char *name,
                             struct node_vfio_dev *ret)
{
    const struct node_pci_dev *d =
            strcmp(self->address, name) == 0 ? self : node_pci_scan_find(scan, name);
    if (!d || d->problem[0] || strlen(name) >= sizeof(ret->address))
        return false;
    *ret = (struct node_vfio_dev){.present = true,
                                  .iommu_group = d->iommu_group,
                                  .class_id = (uint32_t)d->class_id << 8 | d->prog_if};
    memcpy(ret->address, name, strlen(name) + 1);
    memcpy(ret->driver, d->driver, sizeof(ret->driver));
    return true;
}

/* What one device's blockers are found against. */
struct ctx {
    int fd;
    const char *address;
    const struct node_hostuse *use;
    bool (*is_claimed)(const char *, void *);
    void *arg;
    const struct node_pci_scan_result *scan; /* NULL: every member read from sysfs */
    const struct node_pci_dev *self;         /* the device in `scan` */
};

/* The members of group `group`, as node_vfio_group_members() reads them, taking from the scan
 * what it read whole. */
static int group_members(const struct ctx *c, int group, struct node_vfio_dev **ret, size_t *ret_n)
{
    if (!c->scan)
        return node_vfio_group_members(c->fd, group, ret, ret_n);
    char path[96], **names = NULL;
    size_t n = 0;
    (void)snprintf(path, sizeof(path), "kernel/iommu_groups/%d/devices", group);
    int r = node_sysfs_list(c->fd, path, &names, &n);
    if (r < 0)
        return r;
    struct node_vfio_dev *devs = calloc(n ? n : 1, sizeof(*devs));
    r = devs ? 0 : -ENOMEM;
    for (size_t i = 0; i < n && r == 0; i++)
        if (!member_from_scan(c->scan, c->self, names[i], &devs[i]))
            r = node_vfio_observe(c->fd, names[i], &devs[i]);
    node_sysfs_names_free(names);
    if (r < 0) {
        free(devs);
        return r;
    }
    *ret = devs;
    *ret_n = n;
    return 0;
}

/* Collects the members of group `group` that stand in the way of the device. */
static int collect_members(const struct ctx *c, int group, struct members *ms, struct err *ret_err)
{
    struct node_vfio_dev *m = NULL;
    size_t n = 0;
    int r = group_members(c, group, &m, &n);
    if (r < 0)
        return err_set(ret_err, r, "cannot read the members of IOMMU group %d in sysfs: %s", group,
                       strerror(-r));
    for (size_t i = 0; r == 0 && i < n; i++)
        if (m[i].present && strcmp(m[i].address, c->address) == 0)
            ms->self = node_vfio_platform_class(m[i].class_id); /* a static string */
    for (size_t i = 0; r == 0 && i < n; i++) {
        if (!node_vfio_member_blocks(&m[i], c->address, c->is_claimed, c->arg))
            continue;
        note_member(ms, &m[i]);
        if (ms->essential)
            continue;
        r = node_vfio_member_essential(c->fd, &m[i], c->use, &ms->why_kept);
        ms->essential = r > 0;
        if (r < 0)
            (void)err_set(ret_err, r, "%s", ms->why_kept.msg);
    }
    free(m);
    return r < 0 ? r : 0;
}

/* The "and N more" after a list of members. */
static void more(const struct members *ms, char *out, size_t size)
{
    if (ms->n > SHOWN)
        (void)snprintf(out, size, " and %zu more", ms->n - SHOWN);
    else
        out[0] = '\0';
}

static int group_blockers(struct found *f, const struct ctx *c, int group, struct err *ret_err)
{
    const char *address = c->address;
    if (group < 0) {
        add(f, "NoIOMMUGroup",
            "device %s has no IOMMU group, so it cannot be passed through safely: turn on the "
            "IOMMU (VT-d or AMD-Vi in the firmware, intel_iommu=on or amd_iommu=on on the kernel "
            "command line) and reboot the node",
            address);
        return 0;
    }
    struct members ms = {.n = 0};
    char tail[32];
    int r = collect_members(c, group, &ms, ret_err);
    if (r == 0 && ms.self)
        add(f, "PlatformDevice",
            "device %s is %s, which the host cannot give up: it is never passed through", address,
            ms.self);
    if (r < 0 || ms.n == 0)
        return r;
    more(&ms, tail, sizeof(tail));
    bool one = ms.n == 1;
    if (ms.essential)
        add(f, "IOMMUGroupShared",
            "IOMMU group %d also holds %s%s; %s, so device %s cannot be passed through safely in "
            "this slot (in another slot, or behind a switch with ACS, it may get an IOMMU group "
            "of its own)",
            group, ms.list, tail, ms.why_kept.msg, address);
    else
        add(f, "IOMMUGroupShared",
            "IOMMU group %d also holds %s%s, which %s not on vfio-pci; the whole group goes to one "
            "VM, so claim %s too (or bind %s to vfio-pci)",
            group, ms.list, tail, one ? "is" : "are", one ? "that device" : "those devices",
            one ? "it" : "them");
    return 0;
}

static int use_blockers(struct found *f, int fd, const char *address,
                        const struct node_hostuse *use, struct err *ret_err)
{
    enum node_hostuse_kind kind = NODE_HOSTUSE_NONE;
    struct err why;
    int r = node_hostuse_check(fd, address, use, &kind, &why);
    if (r < 0)
        return err_set(ret_err, r, "cannot tell whether device %s is host-critical: %s", address,
                       why.msg);
    if (r == 0)
        return 0;
    if (kind == NODE_HOSTUSE_MOUNT)
        add(f, "MountedFilesystem",
            "device %s is host-critical: %s; passing it through would take that filesystem away "
            "from the node: move it to another device first",
            address, why.msg);
    else if (kind == NODE_HOSTUSE_SWAP)
        add(f, "Swap",
            "device %s is host-critical: %s; passing it through would take that swap away from "
            "the node: turn it off (swapoff) or move it to another device first",
            address, why.msg);
    else
        add(f, "HostNetwork",
            "device %s is host-critical: %s; passing it through would cut the node off the "
            "network: move that address or route to another interface first",
            address, why.msg);
    return 0;
}

/* An SR-IOV PF with VFs: passing it through removes them (its driver gives them up). */
static void sriov_blocker(struct found *f, const struct ctx *c)
{
    int n = c->self && !c->self->problem[0] ? c->self->sriov_numvfs
                                            : node_sriov_numvfs(c->fd, c->address);
    if (n > 0)
        add(f, "SRIOVEnabled",
            "it is an SR-IOV physical function with %d virtual functions, which passing it "
            "through would remove: set spec.numVFs of its SRIOVNetworkDevice to 0 first, or "
            "claim a virtual function instead",
            n);
}

/* The blockers of c->address: node_blockers_for(). */
static int blockers(const struct ctx *c, int iommu_group, const char *driver,
                    struct node_blocker *ret, size_t max, struct err *ret_err)
{
    struct found f = {.n = 0};
    int r = group_blockers(&f, c, iommu_group, ret_err);
    if (r == 0 && (!driver || strcmp(driver, NODE_VFIO_DRIVER) != 0))
        r = use_blockers(&f, c->fd, c->address, c->use, ret_err);
    if (r == 0)
        sriov_blocker(&f, c);
    if (r < 0)
        return r;
    size_t k = f.n < max ? f.n : max;
    if (k > 0)
        memcpy(ret, f.b, k * sizeof(*ret));
    return (int)f.n;
}

int node_blockers_for(int sysfs_fd, const char *address, int iommu_group, const char *driver,
                      const struct node_hostuse *use,
                      bool (*is_claimed)(const char *address, void *arg), void *arg,
                      struct node_blocker *ret, size_t max, struct err *ret_err)
{
    const struct ctx c = {sysfs_fd, address, use, is_claimed, arg, NULL, NULL};
    return blockers(&c, iommu_group, driver, ret, max, ret_err);
}

int node_blockers_for_scanned(int sysfs_fd, const struct node_pci_scan_result *scan,
                              const struct node_pci_dev *d, const struct node_hostuse *use,
                              bool (*is_claimed)(const char *address, void *arg), void *arg,
                              struct node_blocker *ret, size_t max, struct err *ret_err)
{
    const struct ctx c = {sysfs_fd, d->address, use, is_claimed, arg, scan, d};
    return blockers(&c, d->iommu_group, d->driver, ret, max, ret_err);
}
