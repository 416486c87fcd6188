/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/inventory.c - the agent's PCI inventory and its rescan triggers (see
 * inventory.h).
 */
#include "controllers/devices/inventory.h"

#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/map.h"
#include "base/metrics.h"
#include "base/names.h"
#include "controllers/devices/devobjs.h"
#include "controllers/devices/pcidevice.h"
#include "controllers/devices/usbdevice.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "kube/names.h"
#include "node/blockers.h"
#include "node/hostuse.h"
#include "node/pci.h"
#include "node/pciname.h"
#include "node/sysfs.h"
#include "node/udev.h"
#include "node/usb.h"
#include "node/usbname.h"

#define UEVENT_QUIET    0.25 /* rescan once uevents have been quiet this long */
#define UEVENT_MAX_WAIT 2.0  /* ... but no later than this after the first one */

enum { ON_VFIO, ON_HOST, UNBOUND };

struct inventory_metrics {
    struct metrics_series *devices, *bridges, *by_state[3], *no_iommu;
    struct metrics_series *scans, *scan_errors, *scan_seconds, *uevents, *overflows;
    struct metrics_series *usb_devices, *usb_scans, *usb_scan_errors, *usb_scan_seconds;
};

/* What a burst of uevents asks for. A PCI scan rescans the mdevs too (the mdev reconciler
 * watches its result), so RESCAN_MDEV alone only says the mdevs changed. */
enum { RESCAN_PCI = 1, RESCAN_USB = 2, RESCAN_ALL = 3, RESCAN_MDEV = 4 };

struct inventory {
    struct inventory_config cfg;
    struct node_pci *pci;
    int sysfs_fd;               /* for the blockers' group and host-use checks */
    struct map *reported;       /* address or entry -> the problem last logged for it */
    struct map *unreadable;     /* during a scan: the entries it skipped as unreadable */
    struct node_usbids *usbids; /* NULL: usb.ids could not be read (descriptions "Unknown") */
    struct node_udev *udev;
    ev_io uevent_io;
    ev_timer resync, uevent_timer;
    double uevent_first; /* when the first uevent of the pending burst came; 0: none pending */
    int pending;         /* RESCAN_* the pending burst asks for */
    struct inventory_metrics m;
};

/* --- discovery mapping ---------------------------------------------------------------------- */

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

struct tally {
    unsigned long devices, bridges, on_vfio, on_host, unbound, no_iommu;
};

static void count_dev(struct tally *t, const struct node_pci_dev *d)
{
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

/* One log line per device and problem, not per rescan: `key` is logged again only when what
 * is wrong with it changes. */
static void report(struct inventory *inv, const char *key, const char *what, const char *why)
{
    const char *last = map_get(inv->reported, key);
    if (last && strcmp(last, why) == 0)
        return;
    char *copy = strdup(why);
    if (copy && map_put(inv->reported, key, copy) < 0)
        free(copy);
    log_warning(what, KV_STR("device", key), KV_STR("problem", why));
}

/* status.passthroughBlockers: the claim's checks, and a device whose sysfs is unreadable. */
static void add_blockers(struct inventory *inv, const struct node_pci_scan_result *res,
                         const struct node_pci_dev *d, const struct node_hostuse *use,
                         struct pcidevice_spec *s)
{
    struct err err = {{0}};
    struct node_blocker found[NODE_BLOCKERS_MAX];
    int n = node_blockers_for_scanned(inv->sysfs_fd, res, d, use, NULL, NULL, found,
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
static void name_parent(const struct inventory *inv, const struct node_pci_scan_result *res,
                        const struct node_pci_dev *d, struct pcidevice_spec *s)
{
    const struct node_pci_dev *pf = d->physfn[0] ? node_pci_scan_find(res, d->physfn) : NULL;
    if (pf && pf->netdev[0] &&
        kube_names_sriovnetdev(inv->cfg.env.node_name, pf->netdev, s->sriov_parent,
                               sizeof(s->sriov_parent)) < 0)
        s->sriov_parent[0] = '\0';
}

/* Records an entry the scan skipped as unreadable (its object is kept as it was). */
static void note_unreadable(struct map *unreadable, const char *entry)
{
    if (unreadable)
        (void)map_put(unreadable, entry, unreadable); /* a set: the value is never read */
}

static void build_want(struct inventory *inv, const struct node_pci_scan_result *res,
                       const struct node_hostuse *use, struct map *want, struct tally *t)
{
    for (size_t i = 0; i < res->n_skipped; i++) {
        report(inv, res->skipped[i].entry, "PCI device unreadable; skipped", res->skipped[i].why);
        note_unreadable(inv->unreadable, res->skipped[i].entry);
    }
    for (size_t i = 0; i < res->n_devs; i++) {
        const struct node_pci_dev *d = &res->devs[i];
        if (d->is_bridge) { /* not passthrough candidates, as in harvester */
            t->bridges++;
            continue;
        }
        struct pcidevice_spec *s = malloc(sizeof(*s));
        int r = s ? spec_from_dev(inv->cfg.env.node_name, d, s) : -ENOMEM;
        if (r == 0) {
            name_parent(inv, res, d, s);
            add_blockers(inv, res, d, use, s);
            r = map_put(want, s->name, s);
        }
        if (r < 0) {
            pcidevice_spec_free(s);
            report(inv, d->address, "Cannot describe PCI device; skipped", strerror(-r));
            continue;
        }
        count_dev(t, d);
    }
}

static void set_tally(struct inventory *inv, const struct tally *t)
{
    metrics_set(inv->m.devices, (double)t->devices);
    metrics_set(inv->m.bridges, (double)t->bridges);
    metrics_set(inv->m.by_state[ON_VFIO], (double)t->on_vfio);
    metrics_set(inv->m.by_state[ON_HOST], (double)t->on_host);
    metrics_set(inv->m.by_state[UNBOUND], (double)t->unbound);
    metrics_set(inv->m.no_iommu, (double)t->no_iommu);
}

static void scan_pci(struct inventory *inv, const char *why)
{
    double t0 = ev_time();
    struct node_pci_scan_result res = {0};
    struct node_hostuse use = {0};
    struct err err = {{0}};
    struct tally t = {0};
    int r = node_pci_scan(inv->pci, &res, &err);
    int u = r == 0 ? node_hostuse_collect(inv->cfg.env.proc_root, &use) : 0;
    inv->sysfs_fd = r == 0 ? node_sysfs_open_root(inv->cfg.env.sysfs_root) : -1;
    if (u < 0) /* the host-use blockers are left out of this scan, not the devices */
        log_warning("Cannot read what the host uses; host-use blockers left out",
                    KV_STR("procRoot", inv->cfg.env.proc_root), KV_ERRNO(u));
    struct map *want = r == 0 ? pcidevices_new_want() : NULL;
    inv->unreadable = map_new(NULL);
    if (want)
        build_want(inv, &res, u == 0 ? &use : NULL, want, &t);
    node_pci_scan_result_done(&res);
    node_hostuse_done(&use);
    if (inv->sysfs_fd >= 0)
        close(inv->sysfs_fd);
    inv->sysfs_fd = -1;
    metrics_inc(inv->m.scans);
    if (!want) {
        metrics_inc(inv->m.scan_errors);
        log_error("PCI scan failed; keeping the previous inventory", KV_STR("why", why),
                  KV_STR("message", err.msg), KV_ERRNO(r < 0 ? r : -ENOMEM));
        inv->unreadable = map_free(inv->unreadable);
        return;
    }
    set_tally(inv, &t);
    metrics_set(inv->m.scan_seconds, ev_time() - t0);
    log_v(1, "Scanned PCI devices", KV_STR("why", why), KV_INT("devices", t.devices),
          KV_INT("bridges", t.bridges));
    struct devobjs_scan d = {.want = want, .unreadable = inv->unreadable};
    manager_emit(inv->cfg.env.mgr, &pcidevices_scanned, &d);
    map_free(d.want); /* when no part took it */
    inv->unreadable = map_free(inv->unreadable);
}

/* --- USB ------------------------------------------------------------------------------------- */

static void build_usb_want(struct inventory *inv, const struct node_usb_scan_result *res,
                           struct map *want)
{
    for (size_t i = 0; i < res->n_skipped; i++) {
        report(inv, res->skipped[i].entry, "USB device unreadable; skipped", res->skipped[i].why);
        note_unreadable(inv->unreadable, res->skipped[i].entry);
    }
    for (size_t i = 0; i < res->n_devs; i++) {
        const struct node_usb_dev *d = &res->devs[i];
        struct usbdevice_spec *s = malloc(sizeof(*s));
        int r = s ? usbdevice_spec_from(inv->cfg.env.node_name, d, inv->usbids, s) : -ENOMEM;
        bool unnamed = r == 1;
        if (r >= 0)
            r = map_put(want, s->name, s);
        if (r < 0) {
            free(s);
            report(inv, d->port_path, "Cannot describe USB device; skipped", strerror(-r));
        } else if (d->problem[0]) {
            report(inv, d->port_path, "USB device partly unreadable; published with what was read",
                   d->problem);
        } else if (unnamed) {
            report(inv, d->port_path, "USB device published without a resource name",
                   "kubevirt.io/<object name> would be longer than 63 characters after the '/' "
                   "(a long node name): kubelet cannot offer it");
        } else {
            map_remove(inv->reported, d->port_path);
        }
    }
}

static void scan_usb(struct inventory *inv, const char *why)
{
    double t0 = ev_time();
    struct node_usb_scan_result res = {0};
    struct err err = {{0}};
    int fd = node_sysfs_open_root(inv->cfg.env.sysfs_root);
    int r = fd < 0 ? fd : node_usb_scan(fd, &res, &err);
    if (fd >= 0)
        close(fd);
    struct map *want = r == 0 ? usbdevices_new_want() : NULL;
    inv->unreadable = map_new(NULL);
    if (want)
        build_usb_want(inv, &res, want);
    node_usb_scan_result_done(&res);
    metrics_inc(inv->m.usb_scans);
    if (!want) {
        metrics_inc(inv->m.usb_scan_errors);
        log_error("USB scan failed; keeping the previous inventory", KV_STR("why", why),
                  KV_STR("message", err.msg), KV_ERRNO(r < 0 ? r : -ENOMEM));
        inv->unreadable = map_free(inv->unreadable);
        return;
    }
    metrics_set(inv->m.usb_devices, (double)map_size(want));
    metrics_set(inv->m.usb_scan_seconds, ev_time() - t0);
    log_v(1, "Scanned USB devices", KV_STR("why", why), KV_INT("devices", map_size(want)));
    struct devobjs_scan d = {.want = want, .unreadable = inv->unreadable};
    manager_emit(inv->cfg.env.mgr, &usbdevices_scanned, &d);
    map_free(d.want); /* when no part took it */
    inv->unreadable = map_free(inv->unreadable);
}

static void scan(struct inventory *inv, int what, const char *why)
{
    if (what & RESCAN_PCI)
        scan_pci(inv, why);
    else if (what & RESCAN_MDEV)
        manager_emit(inv->cfg.env.mgr, &inventory_mdevs_changed, NULL);
    if ((what & RESCAN_USB) && inv->cfg.usb)
        scan_usb(inv, why);
}

void inventory_scan(struct inventory *inv, const char *why)
{
    scan(inv, RESCAN_ALL, why);
}

/* --- triggers ------------------------------------------------------------------------------- */

static void on_resync(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    inventory_scan(w->data, "resync");
}

static void uevent_hint(struct inventory *inv, int what)
{
    struct ev_loop *loop = inv->cfg.env.loop;
    inv->pending |= what;
    double now = ev_now(loop);
    if (inv->uevent_first == 0)
        inv->uevent_first = now;
    double at = inv->uevent_first + UEVENT_MAX_WAIT;
    if (now + UEVENT_QUIET < at)
        at = now + UEVENT_QUIET;
    ev_timer_stop(loop, &inv->uevent_timer);
    ev_timer_set(&inv->uevent_timer, at - now, 0.);
    ev_timer_start(loop, &inv->uevent_timer);
}

static void on_uevent_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct inventory *inv = w->data;
    (void)loop;
    (void)revents;
    int what = inv->pending;
    inv->uevent_first = 0;
    inv->pending = 0;
    scan(inv, what, "uevent");
}

/* What an event asks for: its subsystem's rescan; the mdevs for a parent's MDEV_STATE change
 * (any subsystem: a PCI GPU's or a virtual device's like mtty's) or an instance's add, remove,
 * bind or unbind (subsystem mdev: made by hand, by mdevctl, or gone with its parent); 0 for the
 * rest (the monitor takes every subsystem). */
static int rescan_of(const struct node_uevent *ev)
{
    if (strcmp(ev->subsystem, "pci") == 0)
        return RESCAN_PCI;
    if (strcmp(ev->subsystem, "usb") == 0)
        return RESCAN_USB;
    if (ev->mdev_state[0] || strcmp(ev->subsystem, "mdev") == 0)
        return RESCAN_MDEV;
    return 0;
}

static void on_uevent(struct ev_loop *loop, ev_io *w, int revents)
{
    struct inventory *inv = w->data;
    struct node_uevent ev;
    int r;
    (void)revents;
    while ((r = node_udev_receive(inv->udev, &ev)) != 0) {
        int what = RESCAN_ALL;
        if (r == -ENOBUFS) {
            metrics_inc(inv->m.overflows);
            log_warning("Kernel events were lost; rescanning", KV_ERRNO(r));
        } else if (r < 0) {
            log_error("Cannot receive kernel events; relying on the periodic rescan", KV_ERRNO(r));
            ev_io_stop(loop, w);
            return;
        } else {
            what = rescan_of(&ev);
            log_v(what ? 3 : 5, "Kernel event", KV_STR("action", ev.action),
                  KV_STR("subsystem", ev.subsystem), KV_STR("device", ev.sysname),
                  KV_STR("driver", ev.driver), KV_STR("mdevState", ev.mdev_state));
            if (!what)
                continue;
            metrics_inc(inv->m.uevents);
        }
        uevent_hint(inv, what);
    }
}

static void start_uevents(struct inventory *inv)
{
    enum node_udev_source src;
    if (strcmp(inv->cfg.uevent_source, "none") == 0 ||
        node_udev_source_from_string(inv->cfg.uevent_source, &src) < 0)
        return;
    int r = node_udev_new(src, NULL, &inv->udev); /* every subsystem: see rescan_of */
    if (r < 0) {
        log_warning("Cannot listen to kernel events; relying on the periodic rescan",
                    KV_STR("source", inv->cfg.uevent_source), KV_ERRNO(r));
        return;
    }
    ev_io_init(&inv->uevent_io, on_uevent, node_udev_fd(inv->udev), EV_READ);
    inv->uevent_io.data = inv;
    ev_io_start(inv->cfg.env.loop, &inv->uevent_io);
}

/* --- metrics and life ----------------------------------------------------------------------- */

static void register_metrics(struct inventory *inv)
{
    static const char *const states[] = {"vfio-pci", "host-driver", "unbound", NULL};
    struct metrics *reg = inv->cfg.env.metrics;
    struct inventory_metrics *m = &inv->m;
    m->devices = metrics_one(reg, METRICS_GAUGE, "hostdevd_pci_devices",
                             "PCI functions published as PCIDevices.");
    metrics_enum(reg, METRICS_GAUGE, "hostdevd_pci_devices_by_state",
                 "Published PCI devices by driver state.", "state", states, m->by_state);
    m->no_iommu = metrics_one(reg, METRICS_GAUGE, "hostdevd_pci_devices_without_iommu_group",
                              "Published PCI devices with no IOMMU group (cannot be passed "
                              "through).");
    m->bridges = metrics_one(reg, METRICS_GAUGE, "hostdevd_pci_bridges",
                             "PCI bridges found (not published).");
    m->scans = metrics_one(reg, METRICS_COUNTER, "hostdevd_pci_scans_total", "PCI scans.");
    m->scan_errors = metrics_one(reg, METRICS_COUNTER, "hostdevd_pci_scan_errors_total",
                                 "Failed PCI scans.");
    m->uevents = metrics_one(reg, METRICS_COUNTER, "hostdevd_uevents_total",
                             "Kernel device events received that cause a rescan (PCI, USB and "
                             "mediated devices).");
    m->overflows = metrics_one(reg, METRICS_COUNTER, "hostdevd_uevent_overflows_total",
                               "Times kernel events were lost (each causes a rescan).");
    m->scan_seconds = metrics_one(reg, METRICS_GAUGE, "hostdevd_pci_scan_duration_seconds",
                                  "Duration of the last scan.");
    m->usb_devices = metrics_one(reg, METRICS_GAUGE, "hostdevd_usb_devices",
                                 "USB devices published as USBDevices (root hubs left out).");
    m->usb_scans = metrics_one(reg, METRICS_COUNTER, "hostdevd_usb_scans_total", "USB scans.");
    m->usb_scan_errors = metrics_one(reg, METRICS_COUNTER, "hostdevd_usb_scan_errors_total",
                                     "Failed USB scans.");
    m->usb_scan_seconds = metrics_one(reg, METRICS_GAUGE, "hostdevd_usb_scan_duration_seconds",
                                      "Duration of the last USB scan.");
}

int inventory_new(const struct inventory_config *cfg, struct inventory **ret)
{
    struct inventory *inv = calloc(1, sizeof(*inv));
    if (!inv)
        return -ENOMEM;
    inv->cfg = *cfg;
    int r = node_pci_new(cfg->env.sysfs_root, cfg->pci_ids, &inv->pci);
    if (r < 0) {
        log_error("Cannot initialise PCI access", KV_STR("sysfsRoot", cfg->env.sysfs_root),
                  KV_STR("pciIds", cfg->pci_ids ? cfg->pci_ids : "(default)"), KV_ERRNO(r));
        free(inv);
        return r;
    }
    inv->sysfs_fd = -1;
    inv->reported = map_new(free);
    if (!inv->reported) {
        inventory_free(inv);
        return -ENOMEM;
    }
    struct err err = {{0}};
    if (cfg->usb && node_usbids_load(cfg->usb_ids, &inv->usbids, &err) < 0)
        log_warning("Cannot read usb.ids; USB devices are described as \"Unknown vvvv:pppp\"",
                    KV_STR("message", err.msg));
    register_metrics(inv);
    ev_timer_init(&inv->resync, on_resync, cfg->resync, cfg->resync);
    inv->resync.data = inv;
    ev_timer_init(&inv->uevent_timer, on_uevent_timer, UEVENT_QUIET, 0.);
    inv->uevent_timer.data = inv;
    *ret = inv;
    return 0;
}

static int inventory_start(void *self)
{
    struct inventory *inv = self;
    ev_timer_start(inv->cfg.env.loop, &inv->resync);
    start_uevents(inv);
    inventory_scan(inv, "start");
    return 0;
}

static void inventory_rescan(void *userdata)
{
    inventory_scan(userdata, "SIGHUP");
}

static void inventory_stop(void *userdata)
{
    struct inventory *inv = userdata;
    ev_timer_stop(inv->cfg.env.loop, &inv->resync);
    ev_timer_stop(inv->cfg.env.loop, &inv->uevent_timer);
    if (inv->udev)
        ev_io_stop(inv->cfg.env.loop, &inv->uevent_io);
}

void inventory_free(void *userdata)
{
    struct inventory *inv = userdata;
    if (!inv)
        return;
    inventory_stop(inv);
    inv->udev = node_udev_free(inv->udev);
    inv->pci = node_pci_free(inv->pci);
    inv->usbids = node_usbids_free(inv->usbids);
    if (inv->sysfs_fd >= 0)
        close(inv->sysfs_fd);
    map_free(inv->reported);
    free(inv);
}

const struct topic inventory_rescan_wanted = {"a rescan is wanted"};
const struct topic inventory_mdevs_changed = {"the kernel's mediated devices changed"};

static void on_rescan_wanted(void *self, const struct watch_event *ev)
{
    inventory_scan(self, ev->data);
}

static void *make(const struct part_env *env)
{
    struct inventory_config c = {.env = *env,
                                 .pci_ids = env->opt->pci_ids,
                                 .usb_ids = env->opt->usb_ids,
                                 .resync = env->opt->resync,
                                 .uevent_source = env->opt->uevent_source,
                                 .usb = true};
    struct inventory *inv = NULL;
    return inventory_new(&c, &inv) < 0 ? NULL : inv;
}

static const struct watch watches[] = {
        {.topic = &inventory_rescan_wanted, .map = on_rescan_wanted},
        {0},
};

const struct part_ops inventory_part = {.name = "inventory",
                                        .make = make,
                                        .watches = watches,
                                        .start = inventory_start,
                                        .stop = inventory_stop,
                                        .rescan = inventory_rescan,
                                        .free = inventory_free};
