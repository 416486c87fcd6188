/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/kubevirt/kubevirt.c - the KubeVirt permittedHostDevices reconciler (see kubevirt.h).
 */
#include "controllers/kubevirt/kubevirt.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/log.h"
#include "base/map.h"
#include "base/metrics.h"
#include "base/names.h"
#include "controllers/kubevirt/permitted.h"
#include "controllers/objects/caches.h"
#include "controllers/objects/kinds.h"
#include "controllers/objects/mdevobj.h"
#include "controllers/objects/pciobj.h"
#include "controllers/objects/usbobj.h"
#include "controllers/runtime/eventspart.h"
#include "controllers/runtime/leasepart.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "controllers/runtime/runner.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "kube/status.h"

static void kvpermit_free(void *userdata);

#define MAX_IN_FLIGHT 1

#define KUBEVIRT_CRD "kubevirts.kubevirt.io"

struct kvpermit {
    struct kvpermit_config cfg;
    struct runner *runner;
    struct caches caches;        /* the process's */
    struct kube_informer *vgpus; /* the process's VGPUDevices (every node's) */
    bool gate_reported, count_reported;
    size_t count_told; /* the count of CRs count_reported was about */
    struct map *told;  /* uids of the claims told that the feature gate is off */
    struct metrics_series *writes, *conflicts, *entries, *restored;
    struct kube_informer *crd; /* KubeVirt's CRD alone: its arrival ends the runner's backoff */
};

struct kvjob {
    struct kvpermit *k;
    struct runner_job *job;
    char ns[254], name[254];
    char *patch;
    size_t adopted;           /* names the write puts back into the ownership record */
    char adopted_names[1024]; /* (permitted.h) */
};

/* --- what the claims need ------------------------------------------------------------------ */

/* The gate is off and `claim` needs an entry: one Warning Event on it (until the gate is on). */
static void tell_gate_off(struct kvpermit *k, const char *kind, const char *name,
                          const cJSON *claim, const char *cr)
{
    const char *uid = kube_meta_str(claim, "uid");
    if (!k->gate_reported || !uid || map_contains(k->told, uid) || map_put(k->told, uid, NULL) < 0)
        return;
    struct kube_event_ref ref = {.api_version = "devices.harvesterhci.io/v1beta1",
                                 .kind = kind,
                                 .name = name,
                                 .uid = uid};
    char note[512];
    (void)snprintf(note, sizeof(note),
                   "the KubeVirt CR %s does not enable the HostDevices feature gate: no VM can "
                   "use this device until it does (hostdevd does not edit feature gates)",
                   cr);
    (void)kube_recorder_emit(k->cfg.events, &ref, true, "HostDevicesFeatureGateDisabled",
                             "Reconcile", note);
}

bool kvpermit_pci_entry(const cJSON *claim, const cJSON *dev, const char *key,
                        struct permitted_entry *ret)
{
    const cJSON *st = json_field(dev, "status");
    struct permitted_entry e = {.kind = PERMITTED_PCI};
    if (!pciobj_bound(claim) || !json_str(st, "vendorId") || !json_str(st, "deviceId") ||
        !pciobj_resource(claim, dev, key, e.resource, sizeof(e.resource)))
        return false;
    (void)snprintf(e.vendor, sizeof(e.vendor), "%s", json_str(st, "vendorId"));
    (void)snprintf(e.product, sizeof(e.product), "%s", json_str(st, "deviceId"));
    *ret = e;
    return names_is_extended_resource_name(e.resource); /* else the ownership list breaks */
}

bool kvpermit_usb_entry(const cJSON *claim, const cJSON *dev, struct permitted_entry *ret)
{
    const cJSON *st = json_field(dev, "status");
    const char *rn = json_str(st, "resourceName");
    struct permitted_entry e = {.kind = PERMITTED_USB};
    if (!usbobj_claim_holds(claim) || !rn || !json_str(st, "vendorID") ||
        !json_str(st, "productID"))
        return false;
    (void)snprintf(e.resource, sizeof(e.resource), "%s", rn);
    (void)snprintf(e.vendor, sizeof(e.vendor), "%s", json_str(st, "vendorID"));
    (void)snprintf(e.product, sizeof(e.product), "%s", json_str(st, "productID"));
    *ret = e;
    return names_is_extended_resource_name(e.resource);
}

/* The entry of status.mdevTypes whose id is `id`, or NULL. */
static const cJSON *mdev_type(const cJSON *st, const char *id)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, json_field(st, "mdevTypes"))
    {
        if (json_same(json_str(t, "id"), id))
            return t;
    }
    return NULL;
}

bool kvpermit_mdev_entry(const cJSON *vgpu, struct permitted_entry *ret)
{
    const cJSON *st = json_field(vgpu, "status");
    const char *rn = NULL, *id = json_str(st, "configureVGPUTypeName");
    struct permitted_entry e = {.kind = PERMITTED_MDEV};
    if (!mdevobj_offered(vgpu, NULL, &rn) || !rn || !id || !id[0] ||
        permitted_mdev_selector(json_str(mdev_type(st, id), "name"), id, e.selector,
                                sizeof(e.selector)) < 0)
        return false;
    (void)snprintf(e.resource, sizeof(e.resource), "%s", rn);
    *ret = e;
    return names_is_extended_resource_name(e.resource);
}

static void want_pci(struct kvpermit *k, struct permitted_want *w, const char *cr)
{
    size_t pos = 0;
    const char *key;
    const cJSON *claim;
    while (kube_informer_next(k->caches.pci_claims, &pos, &key, &claim)) {
        struct permitted_entry e;
        if (!kvpermit_pci_entry(claim, kube_informer_get(k->caches.pci_devices, key), key, &e))
            continue;
        (void)permitted_want_add(w, &e);
        tell_gate_off(k, "PCIDeviceClaim", key, claim, cr);
    }
}

static void want_usb(struct kvpermit *k, struct permitted_want *w, const char *cr)
{
    size_t pos = 0;
    const char *key;
    const cJSON *claim;
    while (kube_informer_next(k->caches.usb_claims, &pos, &key, &claim)) {
        struct permitted_entry e;
        if (!kvpermit_usb_entry(claim, kube_informer_get(k->caches.usb_devices, key), &e))
            continue;
        (void)permitted_want_add(w, &e);
        tell_gate_off(k, "USBDeviceClaim", key, claim, cr);
    }
}

static void want_mdev(struct kvpermit *k, struct permitted_want *w, const char *cr)
{
    size_t pos = 0;
    const char *key;
    const cJSON *vgpu;
    while (k->vgpus && kube_informer_next(k->vgpus, &pos, &key, &vgpu)) {
        struct permitted_entry e;
        if (!kvpermit_mdev_entry(vgpu, &e))
            continue;
        (void)permitted_want_add(w, &e);
        tell_gate_off(k, "VGPUDevice", key, vgpu, cr);
    }
}

/* --- the runner ---------------------------------------------------------------------------- */

bool kvpermit_manages(const char *configured, const char *key, size_t count)
{
    if (configured)
        return strcmp(key, configured) == 0;
    return count == 1;
}

/* Without --kubevirt: says once per count other than one that nothing is written, and when there
 * is one again. */
static void report_count(struct kvpermit *k, const char *key, size_t n)
{
    if (n == 1 && k->count_reported)
        log_info("Exactly one KubeVirt CR again: managing its permittedHostDevices",
                 KV_STR("kubevirt", key));
    else if (n != 1 && (!k->count_reported || k->count_told != n))
        log_warning("Not exactly one KubeVirt CR in the cluster; permittedHostDevices left alone",
                    KV_INT("found", n), KV_STR("hint", "name one with --kubevirt NAMESPACE/NAME"));
    k->count_reported = n != 1;
    k->count_told = n;
}

/* Whether `key` is the CR to manage: the configured one, else the only one. */
static bool managed(struct kvpermit *k, const char *key)
{
    size_t n = kube_informer_size(runner_informer(k->runner));
    if (!k->cfg.kubevirt)
        report_count(k, key, n);
    return kvpermit_manages(k->cfg.kubevirt, key, n);
}

static void report_gate(struct kvpermit *k, const char *key, const cJSON *cr)
{
    bool on = permitted_gate_enabled(cr);
    if (!on && !k->gate_reported)
        log_warning("The KubeVirt CR does not enable the HostDevices feature gate: VMs cannot use "
                    "the permitted host devices until it does (hostdevd does not edit feature "
                    "gates)",
                    KV_STR("kubevirt", key));
    if (on)
        map_clear(k->told); /* tell again if it is turned off again */
    k->gate_reported = !on;
}

static int plan_cr(void *ctx, const char *key, const cJSON *obj, void **ret_plan)
{
    struct kvpermit *k = ctx;
    struct permitted_want w = {0};
    struct permitted_result res;
    *ret_plan = NULL;
    if (!obj || !managed(k, key))
        return 0;
    report_gate(k, key, obj);
    want_pci(k, &w, key);
    want_usb(k, &w, key);
    want_mdev(k, &w, key);
    metrics_set(k->entries, (double)w.n);
    int r = permitted_plan(obj, &w, &res);
    permitted_want_done(&w);
    if (r < 0 || !res.patch)
        return r;
    if (res.conflicts[0])
        log_warning("A resource name hostdevd needs is listed by an entry it does not own; left "
                    "to that entry",
                    KV_STR("kubevirt", key), KV_STR("resources", res.conflicts));
    struct kvjob *j = calloc(1, sizeof(*j));
    if (!j) {
        free(res.patch);
        return -ENOMEM;
    }
    j->k = k;
    j->patch = res.patch;
    j->adopted = res.adopted;
    (void)snprintf(j->adopted_names, sizeof(j->adopted_names), "%s", res.adopted_names);
    (void)snprintf(j->ns, sizeof(j->ns), "%s", json_str(json_field(obj, "metadata"), "namespace"));
    (void)snprintf(j->name, sizeof(j->name), "%s", json_str(json_field(obj, "metadata"), "name"));
    log_info("Updating KubeVirt permittedHostDevices", KV_STR("kubevirt", key),
             KV_INT("added", res.added), KV_INT("removed", res.removed),
             KV_INT("rewritten", res.rewritten), KV_INT("adopted", res.adopted));
    *ret_plan = j;
    return 0;
}

static void kvjob_free(void *p)
{
    struct kvjob *j = p;
    free(j->patch);
    free(j);
}

static void on_written(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct kvjob *j = userdata;
    if (err) {
        if (err->http == 409)
            metrics_inc(j->k->conflicts);
        log_warning("KubeVirt CR write failed; retrying from its current version",
                    KV_STR("kubevirt", runner_job_key(j->job)), KV_INT("http", err->http),
                    KV_STR("reason", err->reason), KV_STR("message", err->message));
        runner_job_done(j->job, kube_err_is_conflict(err) ? RUNNER_STALE : RUNNER_RETRY, 0);
        return;
    }
    metrics_inc(j->k->writes);
    if (j->adopted) {
        metrics_add(j->k->restored, (double)j->adopted);
        log_warning("The ownership record of the KubeVirt CR had lost names of entries hostdevd "
                    "wrote (removed or edited from outside); restored",
                    KV_STR("kubevirt", runner_job_key(j->job)),
                    KV_STR("annotation", PERMITTED_OWNED_ANNOTATION),
                    KV_STR("resources", j->adopted_names));
    }
    runner_job_wrote(j->job, obj);
    runner_job_done(j->job, RUNNER_DONE, 0);
}

static void act(struct runner_job *job, void *plan, void *ctx)
{
    struct kvjob *j = plan;
    (void)ctx;
    j->job = job;
    log_v(2, "Patching KubeVirt", KV_STR("kubevirt", runner_job_key(job)),
          KV_STR("patch", j->patch));
    if (kube_client_patch(j->k->cfg.env.http, &kube_res_kubevirts, j->ns, j->name, KUBE_PATCH_MERGE,
                          j->patch, false, on_written, j) < 0)
        runner_job_done(job, RUNNER_RETRY, 0);
}

static bool can_start(void *ctx)
{
    const struct kvpermit *k = ctx;
    bool synced = k->caches.pci_claims && kube_informer_has_synced(k->caches.pci_claims) &&
                  kube_informer_has_synced(k->caches.pci_devices) &&
                  kube_informer_has_synced(k->caches.usb_claims) &&
                  kube_informer_has_synced(k->caches.usb_devices) && k->vgpus &&
                  kube_informer_has_synced(k->vgpus);
    return synced && leasepart_leads(k->cfg.env.mgr);
}

static void on_event(void *ctx, const char *key, const cJSON *obj, enum runner_event ev)
{
    struct kvpermit *k = ctx;
    (void)key;
    (void)obj;
    if (ev != RUNNER_EVENT_UPDATE)
        runner_enqueue_all(k->runner); /* a CR came or went: the count may have changed */
}

static const struct runner_ops ops = {
        .plan = plan_cr,
        .act = act,
        .plan_free = kvjob_free,
        .on_event = on_event,
        .can_start = can_start,
        .kind = "KubeVirt",
        .absent = "KubeVirt is not installed (no kubevirts.kubevirt.io CRD): devices and claims "
                  "work without it; permittedHostDevices is kept once KubeVirt's CRD appears",
};

/* KubeVirt's CRD came (or became Established): while the kind is absent, the runner's LIST
 * waits out a backoff of up to 30 s; it starts now instead. */
static void on_crd(const char *key, const cJSON *obj, void *userdata)
{
    struct kvpermit *k = userdata;
    (void)key;
    (void)obj;
    if (runner_kind_absent(k->runner)) {
        log_info("KubeVirt's CRD appeared; listing KubeVirt CRs now", KV_STR("crd", KUBEVIRT_CRD));
        kube_informer_retry_now(runner_informer(k->runner));
    }
}

static void on_crd_update(const char *key, const cJSON *old_obj, const cJSON *obj, void *userdata)
{
    (void)old_obj;
    on_crd(key, obj, userdata);
}

/* --- life ---------------------------------------------------------------------------------- */

struct kvpermit *kvpermit_new(const struct kvpermit_config *cfg)
{
    struct kvpermit *k = calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    k->cfg = *cfg;
    struct manager *m = cfg->env.mgr;
    k->caches = (struct caches){
            manager_cache(m, &kind_pcideviceclaims), manager_cache(m, &kind_claimed_pcidevices),
            manager_cache(m, &kind_usbdeviceclaims), manager_cache(m, &kind_claimed_usbdevices)};
    k->vgpus = manager_cache(m, &kind_vgpudevices);
    struct runner_config rc = {.name = "kubevirt",
                               .loop = cfg->env.loop,
                               .http = cfg->env.http,
                               .informer = {.resource = &kube_res_kubevirts},
                               .max_in_flight = MAX_IN_FLIGHT,
                               .max_backoff = 30,
                               .metrics = cfg->env.metrics,
                               .ops = &ops,
                               .ctx = k};
    k->runner = runner_new(&rc);
    k->told = map_new(NULL);
    struct kube_informer_config crd = {.resource = &kube_res_crds,
                                       .field_selector = "metadata.name=" KUBEVIRT_CRD,
                                       .metadata_only = true,
                                       .handlers = {.on_add = on_crd, .on_update = on_crd_update},
                                       .userdata = k};
    k->crd = kube_informer_new(cfg->env.loop, cfg->env.http, &crd);
    if (!k->runner || !k->told || !k->crd) {
        kvpermit_free(k);
        return NULL;
    }
    k->writes = metrics_one(cfg->env.metrics, METRICS_COUNTER, "hostdevd_kubevirt_writes_total",
                            "Writes of the KubeVirt CR's permittedHostDevices.");
    k->conflicts =
            metrics_one(cfg->env.metrics, METRICS_COUNTER, "hostdevd_kubevirt_conflicts_total",
                        "KubeVirt CR writes refused for a stale resourceVersion (retried).");
    k->entries = metrics_one(cfg->env.metrics, METRICS_GAUGE, "hostdevd_kubevirt_entries",
                             "permittedHostDevices entries the Ready claims need.");
    k->restored = metrics_one(
            cfg->env.metrics, METRICS_COUNTER, "hostdevd_kubevirt_ownership_restored_total",
            "Resource names put back into the KubeVirt CR's ownership record after it was removed "
            "or edited from outside.");
    return k;
}

static int kvpermit_start(void *self)
{
    struct kvpermit *k = self;
    int r = runner_start(k->runner);
    return r < 0 ? r : kube_informer_start(k->crd);
}

static void kvpermit_stop(void *self)
{
    struct kvpermit *k = self;
    kube_informer_stop(k->crd);
    runner_stop(k->runner);
}

/* A claim or device changed, or this replica leads now: look at the CR again. */
static void enqueue(void *self, const struct watch_event *ev)
{
    const struct kvpermit *k = self;
    (void)ev;
    runner_enqueue_all(k->runner);
}

static void *make(const struct part_env *env)
{
    struct kvpermit_config c = {
            .env = *env, .kubevirt = env->opt->kubevirt, .events = eventspart_recorder(env->mgr)};
    return c.events ? kvpermit_new(&c) : NULL;
}

static const struct watch watches[] = {
        {.kind = &kind_pcideviceclaims, .map = enqueue},
        {.kind = &kind_claimed_pcidevices, .map = enqueue},
        {.kind = &kind_usbdeviceclaims, .map = enqueue},
        {.kind = &kind_claimed_usbdevices, .map = enqueue},
        {.kind = &kind_vgpudevices, .map = enqueue},
        {.topic = &leasepart_leading, .map = enqueue},
        {0},
};

static void kvpermit_free(void *userdata)
{
    struct kvpermit *k = userdata;
    if (!k)
        return;
    k->crd = kube_informer_free(k->crd);
    k->runner = runner_free(k->runner);
    k->told = map_free(k->told);
    free(k);
}

static struct runner *part_runner(const void *self)
{
    return ((const struct kvpermit *)self)->runner;
}

const struct part_ops kvpermit_part = {.name = "kubevirt",
                                       .make = make,
                                       .watches = watches,
                                       .runner = part_runner,
                                       .start = kvpermit_start,
                                       .stop = kvpermit_stop,
                                       .free = kvpermit_free};
