/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/controller.c - `hostdevd controller` (see controller.h): wiring only. Parts:
 * leader election (kube/leader.c through controllers/runtime/leasepart.c), four cluster-wide caches
 * (PCIDeviceClaims, PCIDevices, USBDeviceClaims, USBDevices) whose every change queues the
 * KubeVirt CR again (and a claim's node), the Event recorder, the KubeVirt reconciler and the
 * reconciler of claims no agent serves (controllers/claims/nodeclaims.c); both hand out work only
 * while this replica leads.
 */
#include "controllers/controller.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/metrics.h"
#include "controllers/claims/claimgauge.h"
#include "controllers/claims/nodeclaims.h"
#include "controllers/kubevirt/kubevirt.h"
#include "controllers/objects/caches.h"
#include "controllers/runtime/leasepart.h"
#include "controllers/runtime/process.h"
#include "controllers/runtime/runner.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/leader.h"

#define LEASE_NAME "hostdevd-controller"

enum { PCI_CLAIMS, PCI_DEVICES, USB_CLAIMS, USB_DEVICES, N_CACHES };

/* A cache's handlers' userdata: the controller, and the log of the cache's failures. */
struct cache {
    struct controller *c;
    struct informer_log log;
};

struct controller {
    const struct controller_config *cfg;
    struct process *proc;
    struct kube_leader *leader;
    struct kube_informer *caches[N_CACHES];
    struct cache cache[N_CACHES];
    struct kube_recorder *events;
    struct kvpermit *kv;
    struct nodeclaims *nc;
    struct claimgauge *gauge;
    struct metrics_series *leading;
    char identity[256];
};

/* --- leadership ---------------------------------------------------------------------------- */

static void on_started(void *userdata)
{
    struct controller *c = userdata;
    metrics_set(c->leading, 1);
    log_info("Leading: keeping KubeVirt's permittedHostDevices and watching for claims no agent "
             "serves",
             KV_STR("identity", c->identity));
    kvpermit_enqueue(c->kv);
    nodeclaims_enqueue_all(c->nc);
}

static void on_stopped(void *userdata)
{
    struct controller *c = userdata;
    metrics_set(c->leading, 0);
    log_warning("No longer leading", KV_STR("identity", c->identity));
}

static void on_lease_problem(const char *problem, void *userdata)
{
    const struct controller *c = userdata;
    if (problem)
        log_error("Cannot hold the leader Lease", KV_STR("identity", c->identity),
                  KV_STR("problem", problem));
    else
        log_info("The leader Lease can be read and written again", KV_STR("identity", c->identity));
}

static bool leads(void *userdata)
{
    const struct controller *c = userdata;
    return c->leader && kube_leader_is_leader(c->leader);
}

static int add_leader(struct controller *c)
{
    struct kube_leader_config lc = {.namespace = c->cfg->namespace,
                                    .name = LEASE_NAME,
                                    .identity = c->identity,
                                    .lease_duration = c->cfg->lease_duration,
                                    .renew_deadline = c->cfg->lease_duration * 2 / 3,
                                    .retry_period = c->cfg->lease_duration / 7.5,
                                    .on_started_leading = on_started,
                                    .on_stopped_leading = on_stopped,
                                    .on_problem = on_lease_problem,
                                    .userdata = c};
    c->leading = metrics_one(process_metrics(c->proc), METRICS_GAUGE, "hostdevd_leader",
                             "1 while this replica leads.");
    return leasepart_add(c->proc, &leasepart_leader, &lc, &c->leader);
}

/* --- caches and the reconciler ------------------------------------------------------------- */

static void on_add(const char *key, const cJSON *obj, void *userdata)
{
    const struct cache *cache = userdata;
    (void)key;
    (void)obj;
    kvpermit_enqueue(cache->c->kv);
}

static void on_update(const char *key, const cJSON *old_obj, const cJSON *obj, void *userdata)
{
    (void)old_obj;
    on_add(key, obj, userdata);
}

/* A claim changed: the CR, and the claim's node (is there a node, an agent?). */
static void on_claim(const struct cache *cache, bool usb, const char *key, const cJSON *obj)
{
    kvpermit_enqueue(cache->c->kv);
    nodeclaims_claim_changed(cache->c->nc, usb, key, obj);
}

static void on_pci_claim(const char *key, const cJSON *obj, void *userdata)
{
    on_claim(userdata, false, key, obj);
}

static void on_pci_claim_update(const char *key, const cJSON *old_obj, const cJSON *obj,
                                void *userdata)
{
    (void)old_obj;
    on_claim(userdata, false, key, obj);
}

static void on_usb_claim(const char *key, const cJSON *obj, void *userdata)
{
    on_claim(userdata, true, key, obj);
}

static void on_usb_claim_update(const char *key, const cJSON *old_obj, const cJSON *obj,
                                void *userdata)
{
    (void)old_obj;
    on_claim(userdata, true, key, obj);
}

static void on_cache_error(const struct kube_err *err, void *userdata)
{
    informer_log_error(&((struct cache *)userdata)->log, err);
}

static void on_cache_skip(const char *what, void *userdata)
{
    informer_log_skip(&((struct cache *)userdata)->log, what);
}

static void caches_free(void *userdata)
{
    struct controller *c = userdata;
    for (int i = 0; i < N_CACHES; i++)
        c->caches[i] = kube_informer_free(c->caches[i]);
}

static int caches_start(void *userdata)
{
    const struct controller *c = userdata;
    int r = 0;
    for (int i = 0; r == 0 && i < N_CACHES; i++)
        r = kube_informer_start(c->caches[i]);
    return r;
}

static void caches_stop(void *userdata)
{
    struct controller *c = userdata;
    for (int i = 0; i < N_CACHES; i++)
        kube_informer_stop(c->caches[i]);
}

/* A replica can serve (lead at once) when its caches are synced. */
static bool caches_ready(struct buf *why, void *userdata)
{
    const struct controller *c = userdata;
    for (int i = 0; i < N_CACHES; i++)
        if (!kube_informer_has_synced(c->caches[i])) {
            (void)buf_printf(why, "%s has not synced", c->cache[i].log.name);
            return false;
        }
    return true;
}

static int add_caches(struct controller *c)
{
    static const struct kube_resource *const res[N_CACHES] = {
            &kube_res_pcideviceclaims, &kube_res_pcidevices, &kube_res_usbdeviceclaims,
            &kube_res_usbdevices};
    static const char *const names[N_CACHES] = {"cache/pcideviceclaims", "cache/pcidevices",
                                                "cache/usbdeviceclaims", "cache/usbdevices"};
    static const struct kube_informer_handlers handlers[N_CACHES] = {
            [PCI_CLAIMS] = {on_pci_claim, on_pci_claim_update, on_pci_claim, on_cache_error,
                            on_cache_skip},
            [PCI_DEVICES] = {on_add, on_update, on_add, on_cache_error, on_cache_skip},
            [USB_CLAIMS] = {on_usb_claim, on_usb_claim_update, on_usb_claim, on_cache_error,
                            on_cache_skip},
            [USB_DEVICES] = {on_add, on_update, on_add, on_cache_error, on_cache_skip},
    };
    for (int i = 0; i < N_CACHES; i++) {
        c->cache[i] = (struct cache){.c = c, .log = {.name = names[i]}};
        struct kube_informer_config ic = {
                .resource = res[i], .handlers = handlers[i], .userdata = &c->cache[i]};
        c->caches[i] = kube_informer_new(process_loop(c->proc), process_http(c->proc), &ic);
        if (!c->caches[i])
            return -ENOMEM;
    }
    static const struct part_ops caches = {.name = "caches",
                                           .start = caches_start,
                                           .ready = caches_ready,
                                           .stop = caches_stop,
                                           .free = caches_free};
    return process_add(c->proc, &caches, c);
}

static void events_stop(void *userdata)
{
    struct controller *c = userdata;
    kube_recorder_flush(c->events);
}

static int events_in_flight(void *userdata)
{
    const struct controller *c = userdata;
    return (int)kube_recorder_in_flight(c->events);
}

static void events_free(void *userdata)
{
    struct controller *c = userdata;
    c->events = kube_recorder_free(c->events);
}

static int add_events(struct controller *c)
{
    struct kube_recorder_config rc = {.controller = "hostdevd.io/controller",
                                      .instance = c->identity};
    static const struct part_ops events = {.name = "events",
                                           .stop = events_stop,
                                           .in_flight = events_in_flight,
                                           .free = events_free};
    c->events = kube_recorder_new(process_loop(c->proc), process_http(c->proc), &rc);
    return process_add(c->proc, &events, c->events ? c : NULL);
}

static int add_kubevirt(struct controller *c)
{
    struct kvpermit_config kc = {.env = process_env(c->proc),
                                 .kubevirt = c->cfg->kubevirt,
                                 .events = c->events,
                                 .can_write = leads,
                                 .userdata = c};
    int r = process_add(c->proc, &kvpermit_part, c->kv = kvpermit_new(&kc));
    if (r == 0)
        kvpermit_set_caches(c->kv, &(struct caches){c->caches[PCI_CLAIMS], c->caches[PCI_DEVICES],
                                                    c->caches[USB_CLAIMS], c->caches[USB_DEVICES]});
    return r;
}

static int add_nodeclaims(struct controller *c)
{
    struct nodeclaims_config nc = {.env = process_env(c->proc),
                                   .events = c->events,
                                   .lease_namespace = c->cfg->lease_namespace,
                                   .can_write = leads,
                                   .userdata = c};
    int r = process_add(c->proc, &nodeclaims_part, c->nc = nodeclaims_new(&nc));
    if (r == 0)
        nodeclaims_set_caches(c->nc, c->caches[PCI_CLAIMS], c->caches[USB_CLAIMS]);
    return r;
}

static void gauge_free(void *userdata)
{
    struct controller *c = userdata;
    c->gauge = claimgauge_free(c->gauge);
}

/* hostdevd_claims{kind, ready, reason} from the caches, for alerts (claims not Ready). */
static int add_gauge(struct controller *c)
{
    static const struct part_ops gauge = {.name = "claim gauge", .free = gauge_free};
    c->gauge =
            claimgauge_new(process_metrics(c->proc), c->caches[PCI_CLAIMS], c->caches[USB_CLAIMS]);
    return process_add(c->proc, &gauge, c->gauge ? c : NULL);
}

static int setup(struct controller *c)
{
    static const struct {
        const char *what;
        int (*run)(struct controller *c);
    } steps[] = {
            {"the caches", add_caches},
            {"the Event recorder", add_events},
            {"the KubeVirt reconciler", add_kubevirt},
            {"the reconciler of claims no agent serves", add_nodeclaims},
            {"the claim gauge", add_gauge},
            {"leader election", add_leader},
    };
    struct process_config pc = {
            .role = "controller", .kubeconfig = c->cfg->kubeconfig, .listen = c->cfg->listen};
    int r = process_new(&pc, &c->proc);
    for (size_t i = 0; r == 0 && i < sizeof(steps) / sizeof(steps[0]); i++)
        if ((r = steps[i].run(c)) < 0)
            log_error("Cannot set up the controller", KV_STR("part", steps[i].what), KV_ERRNO(r));
    return r;
}

int controller_run(const struct controller_config *cfg)
{
    struct controller c = {.cfg = cfg};
    if (cfg->identity)
        (void)snprintf(c.identity, sizeof(c.identity), "%s", cfg->identity);
    else if (gethostname(c.identity, sizeof(c.identity) - 1) < 0)
        (void)snprintf(c.identity, sizeof(c.identity), "hostdevd-controller-%d", (int)getpid());
    log_info("Starting hostdevd controller", KV_STR("version", HOSTDEVD_VERSION),
             KV_STR("identity", c.identity), KV_STR("leaseNamespace", cfg->namespace));
    int rc = setup(&c) == 0 ? process_run(c.proc) : 1;
    process_free(c.proc);
    return rc;
}
