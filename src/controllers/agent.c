/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/agent.c - the node agent's loop: PCI inventory into PCIDevice objects.
 *
 * Level-triggered: a scan of sysfs (at start, every resync period, on SIGHUP) records what each
 * PCIDevice of this node should be; the informer (label nodename=<node>) caches what they are;
 * every key that may differ goes through the work queue, and a reconcile plans (pure, see
 * pcidevice.c) and carries out only the writes that change something. After a write, the key
 * is not reconciled again until the informer has caught up with that write (an expectation on
 * its resourceVersion), so a stale cache never causes a second write.
 */
#include "controllers/agent.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/map.h"
#include "controllers/endpoint.h"
#include "controllers/expect.h"
#include "controllers/pciclaim.h"
#include "controllers/pcidevice.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/http.h"
#include "kube/informer.h"
#include "kube/names.h"
#include "kube/workqueue.h"
#include "node/pci.h"
#include "node/pciname.h"
#include "node/udev.h"

#define MAX_IN_FLIGHT   4
#define NODE_RETRY      10.0 /* first retry of a missing Node; doubles up to NODE_RETRY_MAX */
#define NODE_RETRY_MAX  300.0
#define QUEUE_MAX_DELAY 300.0
#define UEVENT_QUIET    0.25 /* rescan once uevents have been quiet this long */
#define UEVENT_MAX_WAIT 2.0  /* ... but no later than this after the first one */

struct agent_stats {
    unsigned long scans, scan_errors;
    double last_scan_seconds;
    unsigned long devices, bridges;
    unsigned long on_vfio, on_host_driver, unbound, no_iommu; /* devices by state */
    unsigned long reconciles_noop, reconciles_written, reconciles_failed, reconciles_waiting;
    unsigned long creates, patches, deletes;
    unsigned long uevents, uevent_overflows;
};

struct agent {
    const struct agent_config *cfg;
    struct ev_loop *loop;
    struct kube_config kcfg;
    struct kube_http *http;
    struct kube_informer *inf;
    struct pciclaim *claims;
    struct wq *wq;
    struct node_pci *pci;
    struct map *want;      /* name -> struct pcidevice_spec, from the last scan */
    struct expect *expect; /* writes the informer has not shown yet */
    char *node_uid;
    double node_retry_in;
    bool scanned, ready, stopping;
    int in_flight;
    ev_prepare dispatch;
    ev_timer queue_timer, resync, node_retry, uevent_timer;
    ev_signal sigterm, sigint, sighup;
    struct node_udev *udev;
    ev_io uevent_io;
    double uevent_first; /* when the first uevent of the pending burst came; 0: none pending */
    struct endpoint *endpoint;
    struct agent_stats stats;
};

struct job {
    struct agent *a;
    char *key;
    struct pcidevice_spec want;
    struct pcidevice_plan plan;
    int step;
    char *rv;
};

static void enqueue_all(struct agent *a);

/* --- informer handlers ------------------------------------------------------------------------ */

static void on_add(const char *key, const cJSON *obj, void *userdata)
{
    struct agent *a = userdata;
    expect_observed(a->expect, key, obj, false);
    (void)wq_add(a->wq, key);
}

static void on_update(const char *key, const cJSON *old, const cJSON *obj, void *userdata)
{
    (void)old;
    on_add(key, obj, userdata);
}

static void on_delete(const char *key, const cJSON *obj, void *userdata)
{
    struct agent *a = userdata;
    expect_observed(a->expect, key, obj, true);
    (void)wq_add(a->wq, key);
}

static void on_informer_error(const struct kube_err *err, void *userdata)
{
    (void)userdata;
    log_warning("PCIDevice watch failed; retrying", KV_INT("http", err->http),
                KV_STR("reason", err->reason), KV_STR("message", err->message));
}

/* --- reconcile -------------------------------------------------------------------------------- */

static void job_next(struct job *j);

static void job_free(struct job *j)
{
    pcidevice_plan_done(&j->plan);
    free(j->key);
    free(j->rv);
    free(j);
}

static void job_finish(struct job *j, const struct kube_err *err)
{
    struct agent *a = j->a;
    if (err) {
        a->stats.reconciles_failed++;
        log_error("Failed to write PCIDevice", KV_STR("pcidevice", j->key),
                  KV_INT("http", err->http), KV_STR("reason", err->reason),
                  KV_STR("message", err->message));
        (void)wq_add_rate_limited(a->wq, j->key);
    } else {
        a->stats.reconciles_written++;
        expect_write(a->expect, j->key, j->plan.delete ? NULL : j->rv,
                     kube_informer_get(a->inf, j->key), ev_now(a->loop));
        wq_forget(a->wq, j->key);
    }
    wq_done(a->wq, j->key);
    a->in_flight--;
    job_free(j);
}

static void on_write(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct job *j = userdata;
    if (err && !(j->plan.delete &&kube_err_is_not_found(err))) {
        job_finish(j, err);
        return;
    }
    const char *rv = kube_meta_str(obj, "resourceVersion");
    if (rv) {
        free(j->rv);
        j->rv = strdup(rv);
    }
    job_next(j);
}

/* Carries out the plan one write at a time: create, status, metadata, delete. */
static void job_next(struct job *j)
{
    struct agent *a = j->a;
    const struct kube_resource *r = &kube_res_pcidevices;
    int e = 0;
    for (;;) {
        int step = j->step++;
        switch (step) {
        case 0: {
            if (!j->plan.create)
                continue;
            cJSON *o = pcidevice_new_object(&j->want, a->node_uid);
            e = o ? kube_client_create(a->http, r, NULL, o, on_write, j) : -ENOMEM;
            cJSON_Delete(o);
            a->stats.creates++;
            log_info("Creating PCIDevice", KV_STR("pcidevice", j->key),
                     KV_STR("address", j->want.address));
            break;
        }
        case 1:   /* status first: a new object is complete as early as possible */
        case 2: { /* then labels and ownerReferences */
            bool status = step == 1;
            const char *patch = status ? j->plan.status_patch : j->plan.meta_patch;
            if (!patch)
                continue;
            e = kube_client_patch(a->http, r, NULL, j->key, KUBE_PATCH_MERGE, patch, status,
                                  on_write, j);
            a->stats.patches++;
            log_v(2, "Patching PCIDevice", KV_STR("pcidevice", j->key), KV_STR("patch", patch));
            break;
        }
        case 3:
            if (!j->plan.delete)
                continue;
            e = kube_client_delete(a->http, r, NULL, j->key, j->plan.uid, NULL, on_write, j);
            a->stats.deletes++;
            log_info("Deleting PCIDevice of a device that is gone", KV_STR("pcidevice", j->key));
            break;
        default:
            job_finish(j, NULL);
            return;
        }
        break;
    }
    if (e < 0) {
        struct kube_err err;
        kube_err_transport(e, "cannot start request", &err);
        job_finish(j, &err);
    }
}

static void reconcile(struct agent *a, const char *key)
{
    double wait = expect_waiting(a->expect, key, ev_now(a->loop));
    if (wait > 0) { /* the informer's event for our write re-queues it; at the latest, this */
        a->stats.reconciles_waiting++;
        (void)wq_add_after(a->wq, key, wait);
        wq_done(a->wq, key);
        return;
    }
    const struct pcidevice_spec *want = map_get(a->want, key);
    struct job *j = calloc(1, sizeof(*j));
    if (!j || !(j->key = strdup(key)) ||
        pcidevice_plan(want, kube_informer_get(a->inf, key), a->node_uid, &j->plan) < 0) {
        if (j)
            free(j->key);
        free(j);
        (void)wq_add_rate_limited(a->wq, key);
        wq_done(a->wq, key);
        return;
    }
    if (pcidevice_plan_empty(&j->plan)) {
        a->stats.reconciles_noop++;
        wq_forget(a->wq, key);
        wq_done(a->wq, key);
        job_free(j);
        return;
    }
    j->a = a;
    if (want)
        j->want = *want;
    a->in_flight++;
    job_next(j);
}

/* --- dispatch, readiness ---------------------------------------------------------------------- */

static void on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
    struct agent *a = w->data;
    (void)revents;
    if (a->stopping) { /* exit once our writes and the claims' work are done */
        if (a->in_flight == 0 && pciclaim_in_flight(a->claims) == 0)
            ev_break(loop, EVBREAK_ALL);
        return;
    }
    if (!a->scanned || !kube_informer_has_synced(a->inf))
        return;
    const char *key;
    while (a->in_flight < MAX_IN_FLIGHT && (key = wq_get(a->wq)))
        reconcile(a, key);
    double next = wq_next_in(a->wq);
    ev_timer_stop(loop, &a->queue_timer);
    if (next > 0) {
        ev_timer_set(&a->queue_timer, next, 0.);
        ev_timer_start(loop, &a->queue_timer);
    }
    if (!a->ready && next < 0 && a->in_flight == 0 && wq_processing(a->wq) == 0) {
        a->ready = true;
        log_info("PCI inventory written", KV_INT("devices", a->stats.devices),
                 KV_INT("bridges", a->stats.bridges));
    }
}

static void on_queue_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    /* Waking up runs on_prepare, which takes the keys now due; when stopping, this is the
     * deadline for writes in flight. */
    struct agent *a = w->data;
    (void)revents;
    if (a->stopping)
        ev_break(loop, EVBREAK_ALL);
}

static void enqueue_all(struct agent *a)
{
    const char *key;
    void *v;
    const cJSON *obj;
    size_t pos = 0;
    while (map_next(a->want, &pos, &key, &v))
        (void)wq_add(a->wq, key);
    pos = 0;
    while (kube_informer_next(a->inf, &pos, &key, &obj))
        (void)wq_add(a->wq, key);
}

/* --- discovery -------------------------------------------------------------------------------- */

static void hex4(char *out, unsigned v)
{
    (void)snprintf(out, 5, "%04x", v & 0xffffu);
}

static int spec_from_dev(const struct agent *a, const struct node_pci_dev *d,
                         struct pcidevice_spec *s)
{
    *s = (struct pcidevice_spec){.numa_node = d->numa_node,
                                 .sriov_totalvfs = d->sriov_totalvfs,
                                 .sriov_numvfs = d->sriov_numvfs};
    int r = kube_names_pcidevice(a->cfg->node_name, d->address, s->name, sizeof(s->name));
    if (r < 0)
        return r;
    (void)snprintf(s->node, sizeof(s->node), "%s", a->cfg->node_name);
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
    struct node_pciname_ids ids = {
            .vendor_id = d->vendor_id,
            .device_id = d->device_id,
            .class_id = d->class_id,
            .vendor_name = d->vendor_name,
            .device_name = d->device_name,
            .class_name = "",
            .subclass_name = d->class_name, /* libpci's subclass name, else its class name */
    };
    r = node_pciname_resource(&ids, s->resource_name, sizeof(s->resource_name));
    if (r == 0)
        r = node_pciname_description(&ids, s->description, sizeof(s->description));
    if (r == 0 && !kube_names_is_extended_resource_name(s->resource_name))
        r = -EINVAL;
    return r;
}

static void free_spec(void *p)
{
    free(p);
}

static int build_want(struct agent *a, const struct node_pci_dev *devs, size_t n, struct map *want)
{
    a->stats.devices = a->stats.bridges = 0;
    a->stats.on_vfio = a->stats.on_host_driver = a->stats.unbound = a->stats.no_iommu = 0;
    for (size_t i = 0; i < n; i++) {
        if (devs[i].is_bridge) { /* not passthrough candidates, as in harvester */
            a->stats.bridges++;
            continue;
        }
        struct pcidevice_spec *s = malloc(sizeof(*s));
        int r = s ? spec_from_dev(a, &devs[i], s) : -ENOMEM;
        if (r == 0)
            r = map_put(want, s->name, s);
        if (r < 0) {
            free(s);
            log_error("Cannot describe PCI device; skipped", KV_STR("address", devs[i].address),
                      KV_ERRNO(r));
            continue;
        }
        a->stats.devices++;
        if (strcmp(devs[i].driver, "vfio-pci") == 0)
            a->stats.on_vfio++;
        else if (devs[i].driver[0])
            a->stats.on_host_driver++;
        else
            a->stats.unbound++;
        if (devs[i].iommu_group < 0)
            a->stats.no_iommu++;
    }
    return 0;
}

static void scan(struct agent *a, const char *why)
{
    double t0 = ev_time();
    struct node_pci_dev *devs = NULL;
    size_t n = 0;
    struct node_pci_err err = {{0}};
    int r = node_pci_scan(a->pci, &devs, &n, &err);
    struct map *want = r == 0 ? map_new(free_spec) : NULL;
    if (r == 0 && want)
        r = build_want(a, devs, n, want);
    node_pci_devs_free(devs);
    a->stats.scans++;
    if (r < 0 || !want) {
        a->stats.scan_errors++;
        log_error("PCI scan failed; keeping the previous inventory", KV_STR("why", why),
                  KV_STR("message", err.message), KV_ERRNO(r < 0 ? r : -ENOMEM));
        map_free(want);
        return;
    }
    map_free(a->want);
    a->want = want;
    a->scanned = true;
    a->stats.last_scan_seconds = ev_time() - t0;
    log_v(1, "Scanned PCI devices", KV_STR("why", why), KV_INT("devices", a->stats.devices),
          KV_INT("bridges", a->stats.bridges));
    enqueue_all(a);
    pciclaim_enqueue_all(a->claims); /* a driver may have changed under a claim (a reboot) */
}

static void on_resync(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    scan(w->data, "resync");
}

/* --- uevents -------------------------------------------------------------------------------- */

/* Uevents are hints: a burst of them (a driver probing many functions) becomes one rescan,
 * once they have been quiet for UEVENT_QUIET, or UEVENT_MAX_WAIT after the first. */
static void uevent_hint(struct agent *a)
{
    double now = ev_now(a->loop);
    if (a->uevent_first == 0)
        a->uevent_first = now;
    double at = a->uevent_first + UEVENT_MAX_WAIT;
    if (now + UEVENT_QUIET < at)
        at = now + UEVENT_QUIET;
    ev_timer_stop(a->loop, &a->uevent_timer);
    ev_timer_set(&a->uevent_timer, at - now, 0.);
    ev_timer_start(a->loop, &a->uevent_timer);
}

static void on_uevent_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct agent *a = w->data;
    (void)loop;
    (void)revents;
    a->uevent_first = 0;
    scan(a, "uevent");
}

static void on_uevent(struct ev_loop *loop, ev_io *w, int revents)
{
    struct agent *a = w->data;
    struct node_uevent ev;
    int r;
    (void)loop;
    (void)revents;
    while ((r = node_udev_receive(a->udev, &ev)) != 0) {
        if (r == -ENOBUFS) {
            a->stats.uevent_overflows++;
            log_warning("Kernel events were lost; rescanning", KV_ERRNO(r));
        } else if (r < 0) {
            log_error("Cannot receive kernel events; relying on the periodic rescan", KV_ERRNO(r));
            ev_io_stop(loop, w);
            return;
        } else {
            a->stats.uevents++;
            log_v(3, "Kernel event", KV_STR("action", ev.action), KV_STR("subsystem", ev.subsystem),
                  KV_STR("device", ev.sysname), KV_STR("driver", ev.driver));
        }
        uevent_hint(a);
    }
}

static void setup_uevents(struct agent *a)
{
    static const char *const subsystems[] = {"pci", NULL};
    enum node_udev_source src;
    if (strcmp(a->cfg->uevent_source, "none") == 0 ||
        node_udev_source_from_string(a->cfg->uevent_source, &src) < 0)
        return;
    int r = node_udev_new(src, subsystems, &a->udev);
    if (r < 0) {
        log_warning("Cannot listen to kernel events; relying on the periodic rescan",
                    KV_STR("source", a->cfg->uevent_source), KV_ERRNO(r));
        return;
    }
    ev_io_init(&a->uevent_io, on_uevent, node_udev_fd(a->udev), EV_READ);
    a->uevent_io.data = a;
    ev_io_start(a->loop, &a->uevent_io);
}

/* --- the Node ------------------------------------------------------------------------------- */

static void get_node(struct agent *a);

/* Retries reading the Node later, backing off: a missing Node must not become polling. */
static void retry_node(struct agent *a)
{
    a->node_retry_in = a->node_retry_in > 0 ? a->node_retry_in * 2 : NODE_RETRY;
    if (a->node_retry_in > NODE_RETRY_MAX)
        a->node_retry_in = NODE_RETRY_MAX;
    ev_timer_set(&a->node_retry, a->node_retry_in, 0.);
    ev_timer_start(a->loop, &a->node_retry);
}

static void on_node(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct agent *a = userdata;
    const char *uid = kube_meta_str(obj, "uid");
    if (err || !uid) {
        log_warning("Cannot read this node's Node object; PCIDevices get no ownerReference yet",
                    KV_STR("node", a->cfg->node_name), KV_INT("http", err ? err->http : 0),
                    KV_STR("reason", err ? err->reason : ""));
        retry_node(a);
        return;
    }
    free(a->node_uid);
    a->node_uid = strdup(uid);
    enqueue_all(a);
}

static void get_node(struct agent *a)
{
    if (kube_client_get(a->http, &kube_res_nodes, NULL, a->cfg->node_name, on_node, a) < 0)
        retry_node(a);
}

static void on_node_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    get_node(w->data);
}

/* --- endpoint --------------------------------------------------------------------------------- */

static bool is_ready(struct buf *why, void *userdata)
{
    struct agent *a = userdata;
    if (!kube_informer_has_synced(a->inf))
        (void)buf_adds(why, "PCIDevice informer has not synced");
    else if (!pciclaim_has_synced(a->claims))
        (void)buf_adds(why, "PCIDeviceClaim informer has not synced");
    else if (!a->scanned)
        (void)buf_adds(why, "no PCI scan has succeeded");
    else if (!a->ready)
        (void)buf_adds(why, "the first inventory is not written yet");
    return a->ready && pciclaim_has_synced(a->claims);
}

static void metric(struct buf *out, const char *name, const char *type, const char *help,
                   const char *labels, double value)
{
    (void)buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n%s%s %.9g\n", name, help, name, type, name,
                     labels, value);
}

static void write_metrics(struct buf *out, void *userdata)
{
    struct agent *a = userdata;
    const struct agent_stats *s = &a->stats;
    struct kube_http_stats h;
    struct kube_informer_stats i;
    kube_http_get_stats(a->http, &h);
    kube_informer_get_stats(a->inf, &i);
    metric(out, "hostdevd_pci_devices", "gauge", "PCI functions published as PCIDevices.", "",
           (double)s->devices);
    (void)buf_printf(out,
                     "# HELP hostdevd_pci_devices_by_state Published PCI devices by driver state.\n"
                     "# TYPE hostdevd_pci_devices_by_state gauge\n"
                     "hostdevd_pci_devices_by_state{state=\"vfio-pci\"} %lu\n"
                     "hostdevd_pci_devices_by_state{state=\"host-driver\"} %lu\n"
                     "hostdevd_pci_devices_by_state{state=\"unbound\"} %lu\n",
                     s->on_vfio, s->on_host_driver, s->unbound);
    metric(out, "hostdevd_pci_devices_without_iommu_group", "gauge",
           "Published PCI devices with no IOMMU group (cannot be passed through).", "",
           (double)s->no_iommu);
    metric(out, "hostdevd_pci_bridges", "gauge", "PCI bridges found (not published).", "",
           (double)s->bridges);
    metric(out, "hostdevd_pci_scans_total", "counter", "PCI scans.", "", (double)s->scans);
    metric(out, "hostdevd_pci_scan_errors_total", "counter", "Failed PCI scans.", "",
           (double)s->scan_errors);
    metric(out, "hostdevd_uevents_total", "counter", "Kernel device events received (PCI).", "",
           (double)s->uevents);
    metric(out, "hostdevd_uevent_overflows_total", "counter",
           "Times kernel events were lost (each causes a rescan).", "",
           (double)s->uevent_overflows);
    metric(out, "hostdevd_pci_scan_duration_seconds", "gauge", "Duration of the last scan.", "",
           s->last_scan_seconds);
    (void)buf_printf(out,
                     "# HELP hostdevd_reconciles_total Reconciles of PCIDevices by result.\n"
                     "# TYPE hostdevd_reconciles_total counter\n"
                     "hostdevd_reconciles_total{result=\"noop\"} %lu\n"
                     "hostdevd_reconciles_total{result=\"written\"} %lu\n"
                     "hostdevd_reconciles_total{result=\"failed\"} %lu\n"
                     "hostdevd_reconciles_total{result=\"waiting\"} %lu\n",
                     s->reconciles_noop, s->reconciles_written, s->reconciles_failed,
                     s->reconciles_waiting);
    (void)buf_printf(out,
                     "# HELP hostdevd_api_writes_total API writes by verb.\n"
                     "# TYPE hostdevd_api_writes_total counter\n"
                     "hostdevd_api_writes_total{verb=\"create\"} %lu\n"
                     "hostdevd_api_writes_total{verb=\"patch\"} %lu\n"
                     "hostdevd_api_writes_total{verb=\"delete\"} %lu\n",
                     s->creates, s->patches, s->deletes);
    metric(out, "hostdevd_api_requests_total", "counter", "API requests started.", "",
           (double)h.requests);
    metric(out, "hostdevd_api_transport_errors_total", "counter",
           "API requests that got no response.", "", (double)h.failed);
    metric(out, "hostdevd_api_http_errors_total", "counter", "API responses with status >= 400.",
           "", (double)h.http_errors);
    metric(out, "hostdevd_watch_restarts_total", "counter", "Watches that ended and restarted.", "",
           (double)i.watch_restarts);
    metric(out, "hostdevd_relists_total", "counter", "LISTs after 410 Gone.", "",
           (double)i.relists_gone);
    pciclaim_write_metrics(a->claims, out);
    metric(out, "hostdevd_ready", "gauge", "1 once the first inventory is written.", "",
           a->ready ? 1 : 0);
}

/* --- signals, setup --------------------------------------------------------------------------- */

static void on_stop(struct ev_loop *loop, ev_signal *w, int revents)
{
    struct agent *a = w->data;
    (void)revents;
    log_info("Stopping", KV_INT("signal", w->signum), KV_INT("inFlight", a->in_flight));
    a->stopping = true;
    pciclaim_stop(a->claims);
    /* Writes in flight finish (on_prepare breaks the loop after the last one), within 10 s. */
    ev_timer_stop(loop, &a->resync);
    ev_timer_stop(loop, &a->uevent_timer);
    ev_timer_set(&a->queue_timer, 10.0, 0.);
    ev_timer_start(loop, &a->queue_timer);
}

static void on_hup(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)loop;
    (void)revents;
    scan(w->data, "SIGHUP");
}

static int load_config(struct agent *a)
{
    struct err err = {0};
    int r = kube_config_in_cluster(NULL, &a->kcfg, &err);
    if (a->cfg->kubeconfig || getenv("KUBECONFIG") || r == -ENOENT) {
        kube_config_done(&a->kcfg);
        r = kube_config_load_kubeconfig(a->cfg->kubeconfig, NULL, &a->kcfg, &err);
    }
    if (r < 0)
        log_error("Cannot load the API server configuration", KV_STR("why", err.msg), KV_ERRNO(r));
    return r;
}

static int setup_pci(struct agent *a)
{
    int r = node_pci_new(a->cfg->sysfs_root, a->cfg->pci_ids, &a->pci);
    if (r < 0)
        log_error("Cannot initialise PCI access", KV_STR("sysfsRoot", a->cfg->sysfs_root),
                  KV_STR("pciIds", a->cfg->pci_ids ? a->cfg->pci_ids : "(default)"), KV_ERRNO(r));
    return r;
}

static int setup_informer(struct agent *a)
{
    char selector[300];
    (void)snprintf(selector, sizeof(selector), "nodename=%s", a->cfg->node_name);
    struct kube_informer_config ic = {
            .resource = &kube_res_pcidevices,
            .label_selector = selector,
            .handlers = {.on_add = on_add,
                         .on_update = on_update,
                         .on_delete = on_delete,
                         .on_error = on_informer_error},
            .userdata = a,
    };
    struct wq_config wc;
    wq_config_default(&wc);
    wc.max_delay = QUEUE_MAX_DELAY;
    a->inf = kube_informer_new(a->loop, a->http, &ic);
    a->wq = wq_new(&wc);
    a->want = map_new(free_spec);
    a->expect = expect_new();
    if (!a->inf || !a->wq || !a->want || !a->expect)
        return -ENOMEM;
    struct pciclaim_config cc = {.loop = a->loop,
                                 .http = a->http,
                                 .node_name = a->cfg->node_name,
                                 .sysfs_root = a->cfg->sysfs_root,
                                 .dev_root = a->cfg->dev_root,
                                 .proc_root = a->cfg->proc_root,
                                 .devices = a->inf};
    a->claims = pciclaim_new(&cc);
    if (!a->claims || pciclaim_start(a->claims) < 0)
        return -ENOMEM;
    return kube_informer_start(a->inf);
}

static void start_watchers(struct agent *a)
{
    ev_prepare_init(&a->dispatch, on_prepare);
    a->dispatch.data = a;
    ev_prepare_start(a->loop, &a->dispatch);
    ev_timer_init(&a->queue_timer, on_queue_timer, 0., 0.);
    a->queue_timer.data = a;
    ev_timer_init(&a->resync, on_resync, a->cfg->resync, a->cfg->resync);
    a->resync.data = a;
    ev_timer_start(a->loop, &a->resync);
    ev_timer_init(&a->node_retry, on_node_retry, NODE_RETRY, 0.);
    a->node_retry.data = a;
    ev_timer_init(&a->uevent_timer, on_uevent_timer, UEVENT_QUIET, 0.);
    a->uevent_timer.data = a;
    setup_uevents(a);
    ev_signal_init(&a->sigterm, on_stop, SIGTERM);
    ev_signal_init(&a->sigint, on_stop, SIGINT);
    ev_signal_init(&a->sighup, on_hup, SIGHUP);
    a->sigterm.data = a->sigint.data = a->sighup.data = a;
    ev_signal_start(a->loop, &a->sigterm);
    ev_signal_start(a->loop, &a->sigint);
    ev_signal_start(a->loop, &a->sighup);
}

static void teardown(struct agent *a)
{
    ev_prepare_stop(a->loop, &a->dispatch);
    ev_timer_stop(a->loop, &a->queue_timer);
    ev_timer_stop(a->loop, &a->resync);
    ev_timer_stop(a->loop, &a->node_retry);
    ev_timer_stop(a->loop, &a->uevent_timer);
    if (a->udev)
        ev_io_stop(a->loop, &a->uevent_io);
    a->udev = node_udev_free(a->udev);
    ev_signal_stop(a->loop, &a->sigterm);
    ev_signal_stop(a->loop, &a->sigint);
    ev_signal_stop(a->loop, &a->sighup);
    a->endpoint = endpoint_free(a->endpoint);
    a->claims = pciclaim_free(a->claims);
    a->inf = kube_informer_free(a->inf);
    a->http = kube_http_free(a->http); /* cancels anything still in flight */
    a->wq = wq_free(a->wq);
    map_free(a->want);
    a->expect = expect_free(a->expect);
    a->pci = node_pci_free(a->pci);
    free(a->node_uid);
    kube_config_done(&a->kcfg);
}

int agent_run(const struct agent_config *cfg)
{
    struct agent a = {.cfg = cfg, .loop = EV_DEFAULT};
    signal(SIGPIPE, SIG_IGN);
    log_info("Starting hostdevd agent", KV_STR("version", HOSTDEVD_VERSION),
             KV_STR("node", cfg->node_name), KV_STR("sysfsRoot", cfg->sysfs_root));
    int rc = 1;
    if (load_config(&a) < 0 || setup_pci(&a) < 0)
        goto out;
    a.http = kube_http_new(a.loop, &a.kcfg);
    if (!a.http || setup_informer(&a) < 0) {
        log_error("Cannot set up the API client", KV_ERRNO(-ENOMEM));
        goto out;
    }
    struct endpoint_handlers eh = {.ready = is_ready, .metrics = write_metrics, .userdata = &a};
    int port = 0, err = 0;
    a.endpoint = endpoint_new(a.loop, cfg->listen, &eh, &port, &err);
    if (!a.endpoint) {
        log_error("Cannot listen", KV_STR("address", cfg->listen), KV_ERRNO(err));
        goto out;
    }
    log_info("Serving health and metrics", KV_STR("address", cfg->listen), KV_INT("port", port));
    start_watchers(&a);
    get_node(&a);
    scan(&a, "start");
    ev_run(a.loop, 0);
    rc = 0;
out:
    teardown(&a);
    return rc;
}

/* --- arguments -------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fputs("Usage: hostdevd agent [OPTIONS]\n"
          "  --node-name NAME     this node (default $NODE_NAME)\n"
          "  --kubeconfig PATH    kubeconfig (default $KUBECONFIG, else in-cluster)\n"
          "  --sysfs-root DIR     sysfs mount (default /sys)\n"
          "  --kubelet-dir DIR    kubelet directory (default /var/lib/kubelet)\n"
          "  --pci-ids PATH       pci.ids database (default: libpci's)\n"
          "  --dev-root DIR       device nodes, for /dev/vfio (default /dev)\n"
          "  --proc-root DIR      procfs, for mounts, swap and routes (default /proc)\n"
          "  --listen ADDR:PORT   health and metrics endpoint (default 0.0.0.0:9808)\n"
          "  --resync SECONDS     full rescan period (default 300)\n"
          "  --uevent-source SRC  kernel (default; needs no udevd), udev, or none\n"
          "  -v N                 log verbosity (default 0)\n",
          f);
}

static int parse_seconds(const char *s, double *ret)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0 || v > 86400)
        return -EINVAL;
    if (*end == 'm')
        v *= 60, end++;
    else if (*end == 's')
        end++;
    if (*end)
        return -EINVAL;
    *ret = v;
    return 0;
}

int agent_parse_args(int argc, char **argv, struct agent_config *ret)
{
    static const struct option opts[] = {
            {"node-name", required_argument, NULL, 'n'},
            {"kubeconfig", required_argument, NULL, 'k'},
            {"sysfs-root", required_argument, NULL, 's'},
            {"kubelet-dir", required_argument, NULL, 'd'},
            {"pci-ids", required_argument, NULL, 'p'},
            {"dev-root", required_argument, NULL, 'D'},
            {"proc-root", required_argument, NULL, 'P'},
            {"listen", required_argument, NULL, 'l'},
            {"resync", required_argument, NULL, 'r'},
            {"uevent-source", required_argument, NULL, 'u'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
    };
    *ret = (struct agent_config){.node_name = getenv("NODE_NAME"),
                                 .sysfs_root = "/sys",
                                 .kubelet_dir = "/var/lib/kubelet",
                                 .listen = "0.0.0.0:9808",
                                 .dev_root = "/dev",
                                 .proc_root = "/proc",
                                 .resync = 300,
                                 .uevent_source = "kernel"};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "v:h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'n':
            ret->node_name = optarg;
            break;
        case 'k':
            ret->kubeconfig = optarg;
            break;
        case 's':
            ret->sysfs_root = optarg;
            break;
        case 'd':
            ret->kubelet_dir = optarg;
            break;
        case 'p':
            ret->pci_ids = optarg;
            break;
        case 'D':
            ret->dev_root = optarg;
            break;
        case 'P':
            ret->proc_root = optarg;
            break;
        case 'l':
            ret->listen = optarg;
            break;
        case 'r':
            if (parse_seconds(optarg, &ret->resync) < 0) {
                log_error("Invalid --resync", KV_STR("value", optarg),
                          KV_STR("hint", "seconds (300, 300s) or minutes (5m)"));
                return -EINVAL;
            }
            break;
        case 'u': {
            enum node_udev_source src;
            if (strcmp(optarg, "none") != 0 && node_udev_source_from_string(optarg, &src) < 0) {
                log_error("Invalid --uevent-source", KV_STR("value", optarg),
                          KV_STR("hint", "kernel, udev or none"));
                return -EINVAL;
            }
            ret->uevent_source = optarg;
            break;
        }
        case 'v': {
            long v = strtol(optarg, &end, 10);
            if (*end || v < 0 || v > 10)
                return -EINVAL;
            log_set_verbosity((int)v);
            break;
        }
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return -EINVAL;
        }
    }
    if (optind < argc || !ret->node_name || !kube_names_is_dns_subdomain(ret->node_name)) {
        log_error("A valid node name is required",
                  KV_STR("hint", "--node-name or NODE_NAME, a lower-case DNS subdomain"));
        return -EINVAL;
    }
    return 0;
}
