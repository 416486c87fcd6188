/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/pciinv.c - the agent's PCI inventory in memory and its updates (see
 * pciinv.h).
 */
#include "controllers/devices/pciinv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/map.h"
#include "base/names.h"
#include "controllers/devices/pcidevice.h"
#include "kube/names.h"
#include "node/blockers.h"
#include "node/hostuse.h"
#include "node/pci.h"
#include "node/pciname.h"
#include "node/sysfs.h"

struct pciinv {
    char *node_name, *sysfs_root, *proc_root;
    struct node_pci *pci;
    bool scanned; /* a scan succeeded: res and specs hold it */
    struct node_pci_scan_result res;
    struct map *specs;    /* name -> struct pcidevice_spec (bridges have none) */
    struct map *reported; /* address or entry -> the problem last logged for it */
    /* while describing: */
    int sysfs_fd;
    const struct node_hostuse *use;
    struct pciinv_work work;
};

/* --- one device's spec --------------------------------------------------------------------- */

static void hex4(char *out, unsigned v)
{
    (void)snprintf(out, 5, "%04x", v & 0xffffu);
}

static int names_of(const struct node_pci_dev *d, struct pcidevice_spec *s)
{
    struct node_pciname_ids ids = {
            .vendor_id = d->vendor_id,
            .device_id = d->device_id,
            .class_id = d->class_id,
            .vendor_name = d->vendor_name,
            .device_name = d->device_name,
            .class_name = "",
            .subclass_name = d->class_name, /* libpci's subclass name, else its class name */
    };
    int r = node_pciname_resource(&ids, s->resource_name, sizeof(s->resource_name));
    if (r == 0)
        r = node_pciname_description(&ids, s->description, sizeof(s->description));
    if (r == 0 && !names_is_extended_resource_name(s->resource_name))
        r = -EINVAL;
    return r;
}

static int spec_from_dev(const char *node, const struct node_pci_dev *d, struct pcidevice_spec *s)
{
    *s = (struct pcidevice_spec){.numa_node = d->numa_node,
                                 .sriov_totalvfs = d->sriov_totalvfs,
                                 .sriov_numvfs = d->sriov_numvfs,
                                 .sriov_vf_index = d->sriov_vf_index};
    for (int i = 0; i < NODE_PCIAER_SEVERITIES; i++)
        s->aer[i] = d->aer.total[i];
    int r = kube_names_pcidevice(node, d->address, s->name, sizeof(s->name));
    if (r < 0)
        return r;
    (void)snprintf(s->node, sizeof(s->node), "%s", node);
    (void)snprintf(s->address, sizeof(s->address), "%s", d->address);
    hex4(s->vendor_id, d->vendor_id);
    hex4(s->device_id, d->device_id);
    if (d->subsystem_vendor_id || d->subsystem_device_id) {
        hex4(s->subsystem_vendor_id, d->subsystem_vendor_id);
        hex4(s->subsystem_device_id, d->subsystem_device_id);
    }
    hex4(s->class_id, d->class_id);
    (void)snprintf(s->revision, sizeof(s->revision), "%02x", d->revision);
    if (d->iommu_group >= 0)
        (void)snprintf(s->iommu_group, sizeof(s->iommu_group), "%d", d->iommu_group);
    (void)snprintf(s->driver, sizeof(s->driver), "%s", d->driver);
    (void)snprintf(s->physfn, sizeof(s->physfn), "%s", d->physfn);
    (void)snprintf(s->netdev, sizeof(s->netdev), "%s", d->netdev);
    (void)snprintf(s->pcie_root, sizeof(s->pcie_root), "%s", d->pcie_root);
    (void)snprintf(s->serial, sizeof(s->serial), "%s", d->serial);
    (void)snprintf(s->serial_source, sizeof(s->serial_source), "%s",
                   node_pciident_source_name(d->serial_source));
    (void)snprintf(s->slot, sizeof(s->slot), "%s", d->slot);
    return names_of(d, s);
}

void pciinv_report_once(struct map *reported, const char *key, const char *what, const char *why)
{
    const char *last = map_get(reported, key);
    if (last && strcmp(last, why) == 0)
        return;
    char *copy = strdup(why);
    if (copy && map_put(reported, key, copy) < 0)
        free(copy);
    log_warning(what, KV_STR("device", key), KV_STR("problem", why));
}

static void report(struct pciinv *inv, const char *key, const char *what, const char *why)
{
    pciinv_report_once(inv->reported, key, what, why);
}

/* status.passthroughBlockers: the claim's checks, and a device whose sysfs is unreadable. */
static void add_blockers(struct pciinv *inv, const struct node_pci_dev *d, struct pcidevice_spec *s)
{
    struct err err = {{0}};
    struct node_blocker found[NODE_BLOCKERS_MAX];
    int n = node_blockers_for_scanned(inv->sysfs_fd, &inv->res, d, inv->use, NULL, NULL, found,
                                      NODE_BLOCKERS_MAX, &err);
    int kept = n < 0 ? 0 : n < NODE_BLOCKERS_MAX ? n : NODE_BLOCKERS_MAX;
    const char *problem = d->problem[0] ? d->problem : n < 0 ? err.msg : NULL;
    if (problem && kept < NODE_BLOCKERS_MAX) {
        struct node_blocker *b = &found[kept++];
        (void)snprintf(b->reason, sizeof(b->reason), "SysfsUnreadable");
        (void)snprintf(b->message, sizeof(b->message),
                       "some of its sysfs facts could not be read (%.300s), so whether it can "
                       "be passed through safely cannot be told",
                       problem);
    }
    s->blockers = kept > 0 ? malloc((size_t)kept * sizeof(*s->blockers)) : NULL;
    s->n_blockers = s->blockers ? kept : 0; /* (out of memory: published without them) */
    if (s->blockers)
        memcpy(s->blockers, found, (size_t)kept * sizeof(*s->blockers));
    if (problem)
        report(inv, d->address, "PCI device partly unreadable; published with what was read",
               problem);
    else
        map_remove(inv->reported, d->address);
}

/* A VF's PF's SRIOVNetworkDevice, by the PF's interface ("" when it has none). */
static void name_parent(const struct pciinv *inv, const struct node_pci_dev *d,
                        struct pcidevice_spec *s)
{
    const struct node_pci_dev *pf = d->physfn[0] ? node_pci_scan_find(&inv->res, d->physfn) : NULL;
    if (pf && pf->netdev[0] &&
        kube_names_sriovnetdev(inv->node_name, pf->netdev, s->sriov_parent,
                               sizeof(s->sriov_parent)) < 0)
        s->sriov_parent[0] = '\0';
}

/* Describes device `d` of inv->res into inv->specs (replacing its spec); a bridge has none. */
static void describe(struct pciinv *inv, const struct node_pci_dev *d)
{
    if (d->is_bridge) /* not passthrough candidates, as in harvester */
        return;
    inv->work.described++;
    struct pcidevice_spec *s = malloc(sizeof(*s));
    int r = s ? spec_from_dev(inv->node_name, d, s) : -ENOMEM;
    if (r == 0) {
        name_parent(inv, d, s);
        add_blockers(inv, d, s);
        r = map_put(inv->specs, s->name, s);
    }
    if (r < 0) {
        pcidevice_spec_free(s);
        report(inv, d->address, "Cannot describe PCI device; skipped", strerror(-r));
    }
}

/* What describing needs: the host's uses and a root for the blockers' reads. */
static void describe_begin(struct pciinv *inv, struct node_hostuse *use)
{
    int u = node_hostuse_collect(inv->proc_root, use);
    if (u < 0) /* the host-use blockers are left out of this scan, not the devices */
        log_warning("Cannot read what the host uses; host-use blockers left out",
                    KV_STR("procRoot", inv->proc_root), KV_ERRNO(u));
    inv->use = u == 0 ? use : NULL;
    inv->sysfs_fd = node_sysfs_open_root(inv->sysfs_root);
    for (size_t i = 0; i < inv->res.n_skipped; i++)
        report(inv, inv->res.skipped[i].entry, "PCI device unreadable; skipped",
               inv->res.skipped[i].why);
}

static void describe_end(struct pciinv *inv, struct node_hostuse *use)
{
    node_hostuse_done(use);
    inv->use = NULL;
    if (inv->sysfs_fd >= 0)
        close(inv->sysfs_fd);
    inv->sysfs_fd = -1;
}

/* --- full scans ---------------------------------------------------------------------------- */

int pciinv_scan(struct pciinv *inv, struct err *ret_err)
{
    struct node_pci_scan_result res = {0};
    int r = node_pci_scan(inv->pci, &res, ret_err);
    if (r < 0)
        return r;
    struct map *specs = pcidevices_new_want();
    if (!specs) {
        node_pci_scan_result_done(&res);
        return err_set(ret_err, -ENOMEM, "out of memory");
    }
    node_pci_scan_result_done(&inv->res);
    inv->res = res;
    map_free(inv->specs);
    inv->specs = specs;
    inv->scanned = true;
    inv->work = (struct pciinv_work){.read = res.n_devs + res.n_skipped};
    struct node_hostuse use = {0};
    describe_begin(inv, &use);
    for (size_t i = 0; i < inv->res.n_devs; i++)
        describe(inv, &inv->res.devs[i]);
    describe_end(inv, &use);
    return 0;
}

/* --- updates ------------------------------------------------------------------------------- */

/* The addresses whose specs an update makes again: a set (map keys). */
static void touch(struct map *set, const char *address)
{
    (void)map_put(set, address, set); /* (out of memory: the next full scan mends it) */
}

/* Whether a function read again is or was a bridge: then the change is not local. */
static bool any_bridge(const struct node_pci_scan_result *old,
                       const struct node_pci_scan_result *now, char (*read)[NODE_PCI_ADDRESS_SIZE],
                       size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct node_pci_dev *a = node_pci_scan_find(old, read[i]);
        const struct node_pci_dev *b = node_pci_scan_find(now, read[i]);
        if ((a && a->is_bridge) || (b && b->is_bridge))
            return true;
    }
    return false;
}

/* The neighbours of function `address` (read again; `a` before, `b` after, NULL when absent)
 * whose specs depend on it: its IOMMU group's members before and after, and, when its network
 * interface changed, the VFs hanging off it. */
static void touch_neighbours(const struct pciinv *inv, struct map *set, const char *address,
                             const struct node_pci_dev *a, const struct node_pci_dev *b)
{
    int g1 = a ? a->iommu_group : -1, g2 = b ? b->iommu_group : -1;
    bool netdev = strcmp(a ? a->netdev : "", b ? b->netdev : "") != 0 || !a || !b;
    touch(set, address);
    for (size_t i = 0; i < inv->res.n_devs; i++) {
        const struct node_pci_dev *d = &inv->res.devs[i];
        if ((d->iommu_group >= 0 && (d->iommu_group == g1 || d->iommu_group == g2)) ||
            (netdev && strcmp(d->physfn, address) == 0))
            touch(set, d->address);
    }
}

/* Describes again the functions of `set`; those gone lose their spec. */
static void describe_set(struct pciinv *inv, const struct map *set)
{
    struct node_hostuse use = {0};
    describe_begin(inv, &use);
    size_t pos = 0;
    const char *address;
    while (map_next(set, &pos, &address, NULL)) {
        char name[254];
        if (kube_names_pcidevice(inv->node_name, address, name, sizeof(name)) == 0)
            map_remove(inv->specs, name);
        const struct node_pci_dev *d = node_pci_scan_find(&inv->res, address);
        if (d)
            describe(inv, d);
    }
    describe_end(inv, &use);
}

/* A full scan instead of an update, for `why` (left in ret_err). */
static int instead(struct pciinv *inv, int why_r, const char *why, struct err *ret_err)
{
    struct err scan_err = {{0}};
    int r = pciinv_scan(inv, &scan_err);
    if (r < 0) {
        /* the result may hold what an update read, the specs not: the next update scans all */
        inv->scanned = false;
        if (ret_err)
            *ret_err = scan_err;
        return r;
    }
    (void)err_set(ret_err, why_r, "%s", why);
    return 0;
}

int pciinv_update(struct pciinv *inv, const char *const *addresses, size_t n, struct err *ret_err)
{
    if (!inv->scanned)
        return instead(inv, -ENODATA, "no scan yet", ret_err);
    struct node_pci_scan_result old = {0};
    if (inv->res.n_devs) {
        old.devs = malloc(inv->res.n_devs * sizeof(*old.devs));
        if (!old.devs)
            return err_set(ret_err, -ENOMEM, "out of memory");
        memcpy(old.devs, inv->res.devs, inv->res.n_devs * sizeof(*old.devs));
        old.n_devs = inv->res.n_devs;
    }
    char(*read)[NODE_PCI_ADDRESS_SIZE] = NULL;
    size_t n_read = 0;
    struct err err = {{0}};
    int r = node_pci_rescan_devices(inv->pci, &inv->res, addresses, n, &read, &n_read, &err);
    if (r == -EINVAL || r == -EAGAIN) {
        node_pci_scan_result_done(&old);
        return instead(inv, r, err.msg, ret_err);
    }
    if (r < 0) {
        node_pci_scan_result_done(&old);
        if (ret_err)
            *ret_err = err;
        return r;
    }
    if (any_bridge(&old, &inv->res, read, n_read)) {
        free(read);
        node_pci_scan_result_done(&old);
        return instead(inv, -EXDEV, "a bridge changed (its subordinate functions with it)",
                       ret_err);
    }
    struct map *set = map_new(NULL);
    for (size_t i = 0; set && i < n_read; i++)
        touch_neighbours(inv, set, read[i], node_pci_scan_find(&old, read[i]),
                         node_pci_scan_find(&inv->res, read[i]));
    node_pci_scan_result_done(&old);
    free(read);
    if (!set)
        return instead(inv, -ENOMEM, "out of memory", ret_err);
    inv->work = (struct pciinv_work){.read = n_read};
    describe_set(inv, set);
    map_free(set);
    return 1;
}

/* --- what is handed on --------------------------------------------------------------------- */

struct map *pciinv_want(const struct pciinv *inv)
{
    struct map *want = pcidevices_new_want();
    size_t pos = 0;
    const char *name;
    void *value;
    while (want && inv->specs && map_next(inv->specs, &pos, &name, &value)) {
        const struct pcidevice_spec *s = value;
        struct pcidevice_spec *c = malloc(sizeof(*c));
        if (c) {
            *c = *s;
            c->blockers =
                    s->n_blockers ? malloc((size_t)s->n_blockers * sizeof(*c->blockers)) : NULL;
            if (c->blockers)
                memcpy(c->blockers, s->blockers, (size_t)s->n_blockers * sizeof(*c->blockers));
            else
                c->n_blockers = 0;
        }
        if (!c || map_put(want, name, c) < 0) {
            pcidevice_spec_free(c);
            return map_free(want);
        }
    }
    return want;
}

struct map *pciinv_unreadable(const struct pciinv *inv)
{
    struct map *set = map_new(NULL);
    for (size_t i = 0; set && i < inv->res.n_skipped; i++)
        if (map_put(set, inv->res.skipped[i].entry, set) < 0)
            return map_free(set);
    return set;
}

const struct node_pci_scan_result *pciinv_result(const struct pciinv *inv)
{
    return &inv->res;
}

void pciinv_count(const struct pciinv *inv, struct pciinv_tally *t)
{
    *t = (struct pciinv_tally){0};
    for (size_t i = 0; i < inv->res.n_devs; i++) {
        const struct node_pci_dev *d = &inv->res.devs[i];
        char name[254];
        if (d->is_bridge) {
            t->bridges++;
            continue;
        }
        if (kube_names_pcidevice(inv->node_name, d->address, name, sizeof(name)) < 0 ||
            !map_get(inv->specs, name))
            continue;
        t->devices++;
        if (strcmp(d->driver, "vfio-pci") == 0)
            t->on_vfio++;
        else if (d->driver[0])
            t->on_host++;
        else
            t->unbound++;
        if (d->iommu_group < 0)
            t->no_iommu++;
    }
}

void pciinv_last_work(const struct pciinv *inv, struct pciinv_work *ret)
{
    *ret = inv->work;
}

/* --- life ---------------------------------------------------------------------------------- */

int pciinv_new(const struct pciinv_config *cfg, struct pciinv **ret)
{
    struct pciinv *inv = calloc(1, sizeof(*inv));
    if (!inv)
        return -ENOMEM;
    inv->sysfs_fd = -1;
    inv->node_name = strdup(cfg->node_name ? cfg->node_name : "");
    inv->sysfs_root = strdup(cfg->sysfs_root ? cfg->sysfs_root : "/sys");
    inv->proc_root = strdup(cfg->proc_root ? cfg->proc_root : "/proc");
    inv->reported = map_new(free);
    inv->specs = pcidevices_new_want();
    if (!inv->node_name || !inv->sysfs_root || !inv->proc_root || !inv->reported || !inv->specs) {
        pciinv_free(inv);
        return -ENOMEM;
    }
    int r = node_pci_new(inv->sysfs_root, cfg->pci_ids, &inv->pci);
    if (r < 0) {
        pciinv_free(inv);
        return r;
    }
    *ret = inv;
    return 0;
}

struct pciinv *pciinv_free(struct pciinv *inv)
{
    if (!inv)
        return NULL;
    node_pci_free(inv->pci);
    node_pci_scan_result_done(&inv->res);
    map_free(inv->specs);
    map_free(inv->reported);
    free(inv->node_name);
    free(inv->sysfs_root);
    free(inv->proc_root);
    free(inv);
    return NULL;
}
