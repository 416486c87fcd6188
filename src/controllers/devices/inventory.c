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
#include "controllers/devices/pciinv.h"
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
    struct metrics_series *scans, *partial_scans, *scan_errors, *scan_seconds, *uevents, *overflows;
    struct metrics_series *usb_devices, *usb_scans, *usb_scan_errors, *usb_scan_seconds;
};

/* What a burst of uevents asks for. A PCI scan rescans the mdevs too (the mdev reconciler
 * watches its result), so RESCAN_MDEV alone only says the mdevs changed. RESCAN_PCI_SOME: the
 * PCI functions of inv->pending_pci changed (an update, pciinv.h), RESCAN_PCI: scan them all. */
enum { RESCAN_PCI = 1, RESCAN_USB = 2, RESCAN_ALL = 3, RESCAN_MDEV = 4, RESCAN_PCI_SOME = 8 };

/* At most this many functions in one update; a burst of more is scanned whole. */
#define PENDING_PCI_MAX 4096

struct inventory {
    struct inventory_config cfg;
    struct pciinv *pci;
    struct map *reported;       /* USB port path -> the problem last logged for it */
    struct map *unreadable;     /* during a USB scan: the entries it skipped as unreadable */
    struct map *pending_pci;    /* the PCI functions of the pending burst's events (a set) */
    struct node_usbids *usbids; /* NULL: usb.ids could not be read (descriptions "Unknown") */
    struct node_udev *udev;
    ev_io uevent_io;
    ev_timer resync, uevent_timer;
    double uevent_first; /* when the first uevent of the pending burst came; 0: none pending */
    int pending;         /* RESCAN_* the pending burst asks for */
    struct inventory_metrics m;
};

/* Records an entry the scan skipped as unreadable (its object is kept as it was). */
static void note_unreadable(struct map *unreadable, const char *entry)
{
    if (unreadable)
        (void)map_put(unreadable, entry, unreadable); /* a set: the value is never read */
}

static void report(struct inventory *inv, const char *key, const char *what, const char *why)
{
    pciinv_report_once(inv->reported, key, what, why);
}

static void set_tally(struct inventory *inv, const struct pciinv_tally *t)
{
    metrics_set(inv->m.devices, (double)t->devices);
    metrics_set(inv->m.bridges, (double)t->bridges);
    metrics_set(inv->m.by_state[ON_VFIO], (double)t->on_vfio);
    metrics_set(inv->m.by_state[ON_HOST], (double)t->on_host);
    metrics_set(inv->m.by_state[UNBOUND], (double)t->unbound);
    metrics_set(inv->m.no_iommu, (double)t->no_iommu);
}

/* A full scan (`addresses` NULL), or an update for the n functions `addresses` (pciinv.h). */
static void scan_pci(struct inventory *inv, const char *why, const char *const *addresses, size_t n)
{
    double t0 = ev_time();
    struct err err = {{0}};
    int r = addresses ? pciinv_update(inv->pci, addresses, n, &err) : pciinv_scan(inv->pci, &err);
    metrics_inc(inv->m.scans);
    struct map *want = r >= 0 ? pciinv_want(inv->pci) : NULL;
    struct map *unreadable = r >= 0 ? pciinv_unreadable(inv->pci) : NULL;
    if (!want) {
        metrics_inc(inv->m.scan_errors);
        log_error("PCI scan failed; keeping the previous inventory", KV_STR("why", why),
                  KV_STR("message", r < 0 ? err.msg : "out of memory"),
                  KV_ERRNO(r < 0 ? r : -ENOMEM));
        map_free(unreadable);
        return;
    }
    if (addresses && r == 1)
        metrics_inc(inv->m.partial_scans);
    else if (addresses)
        log_v(1, "PCI change not local; scanned everything", KV_STR("why", err.msg));
    struct pciinv_tally t;
    pciinv_count(inv->pci, &t);
    struct pciinv_work w;
    pciinv_last_work(inv->pci, &w);
    set_tally(inv, &t);
    metrics_set(inv->m.scan_seconds, ev_time() - t0);
    log_v(1, "Scanned PCI devices", KV_STR("why", why), KV_INT("devices", t.devices),
          KV_INT("bridges", t.bridges), KV_INT("read", w.read), KV_INT("described", w.described));
    struct devobjs_scan d = {.want = want, .unreadable = unreadable};
    manager_emit(inv->cfg.env.mgr, &pcidevices_scanned, &d);
    map_free(d.want); /* when no part took it */
    map_free(unreadable);
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

/* An update for the functions of inv->pending_pci (emptied). */
static void scan_pending_pci(struct inventory *inv, const char *why)
{
    size_t n = map_size(inv->pending_pci), k = 0, pos = 0;
    const char **addresses = calloc(n ? n : 1, sizeof(*addresses));
    const char *a;
    while (addresses && map_next(inv->pending_pci, &pos, &a, NULL))
        addresses[k++] = a;
    scan_pci(inv, why, addresses, k); /* (out of memory: NULL, a full scan) */
    free(addresses);
}

static void scan(struct inventory *inv, int what, const char *why)
{
    if (what & RESCAN_PCI)
        scan_pci(inv, why, NULL, 0);
    else if (what & RESCAN_PCI_SOME)
        scan_pending_pci(inv, why);
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
    map_clear(inv->pending_pci);
}

/* What an event asks for: its subsystem's rescan (for a PCI function's add, remove, bind, unbind
 * or change, an update of that function: pciinv.h; a move, an event without a name or too many
 * of them, a full scan); the mdevs for a parent's MDEV_STATE change (any subsystem: a PCI GPU's
 * or a virtual device's like mtty's) or an instance's add, remove, bind or unbind (subsystem
 * mdev: made by hand, by mdevctl, or gone with its parent); 0 for the rest (the monitor takes
 * every subsystem). */
static int rescan_of(struct inventory *inv, const struct node_uevent *ev)
{
    if (strcmp(ev->subsystem, "pci") == 0) {
        bool local = ev->sysname[0] && strcmp(ev->action, "move") != 0 &&
                     map_size(inv->pending_pci) < PENDING_PCI_MAX;
        if (local && map_put(inv->pending_pci, ev->sysname, inv->pending_pci) == 0)
            return RESCAN_PCI_SOME;
        return RESCAN_PCI;
    }
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
            what = rescan_of(inv, &ev);
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
    m->partial_scans =
            metrics_one(reg, METRICS_COUNTER, "hostdevd_pci_partial_scans_total",
                        "PCI scans that read only the functions a uevent burst "
                        "named and their PFs (also counted in hostdevd_pci_scans_total).");
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
    struct pciinv_config pc = {.node_name = cfg->env.node_name,
                               .sysfs_root = cfg->env.sysfs_root,
                               .proc_root = cfg->env.proc_root,
                               .pci_ids = cfg->pci_ids};
    int r = pciinv_new(&pc, &inv->pci);
    if (r < 0) {
        log_error("Cannot initialise PCI access", KV_STR("sysfsRoot", cfg->env.sysfs_root),
                  KV_STR("pciIds", cfg->pci_ids ? cfg->pci_ids : "(default)"), KV_ERRNO(r));
        free(inv);
        return r;
    }
    inv->reported = map_new(free);
    inv->pending_pci = map_new(NULL);
    if (!inv->reported || !inv->pending_pci) {
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
    inv->pci = pciinv_free(inv->pci);
    inv->usbids = node_usbids_free(inv->usbids);
    map_free(inv->reported);
    map_free(inv->pending_pci);
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
