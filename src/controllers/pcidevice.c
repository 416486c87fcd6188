/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/pcidevice.c - the PCIDevice reconciler: desired objects and minimal write plans
 * (pure: no I/O, no logging), and the reconciler on the runner that carries them out. See
 * pcidevice.h.
 */
#include "controllers/pcidevice.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/map.h"
#include "base/metrics.h"
#include "controllers/runner.h"
#include "kube/client.h"
#include "kube/names.h"
#include "kube/status.h"

/* The status fields this agent writes; any other field is someone else's. */
static const char *const managed[] = {
        "address",
        "vendorId",
        "deviceId",
        "subsystemVendorId",
        "subsystemDeviceId",
        "classId",
        "revision",
        "iommuGroup",
        "numaNode",
        "nodeName",
        "resourceName",
        "description",
        "kernelDriverInUse",
        "sriov",
        "passthroughBlockers",
};

static void add_str(cJSON *o, const char *key, const char *value)
{
    if (value[0])
        cJSON_AddStringToObject(o, key, value);
}

static cJSON *sriov_json(const struct pcidevice_spec *s)
{
    if (!s->physfn[0] && s->sriov_totalvfs < 0)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    add_str(o, "physicalFunction", s->physfn);
    if (s->sriov_totalvfs >= 0) {
        cJSON_AddNumberToObject(o, "totalVFs", s->sriov_totalvfs);
        cJSON_AddNumberToObject(o, "numVFs", s->sriov_numvfs >= 0 ? s->sriov_numvfs : 0);
    }
    return o;
}

void pcidevice_spec_free(void *spec)
{
    struct pcidevice_spec *s = spec;
    if (s)
        free(s->blockers);
    free(s);
}

static cJSON *blockers_json(const struct pcidevice_spec *s)
{
    if (s->n_blockers <= 0)
        return NULL;
    cJSON *list = cJSON_CreateArray();
    for (int i = 0; list && s->blockers && i < s->n_blockers; i++) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "reason", s->blockers[i].reason);
        cJSON_AddStringToObject(b, "message", s->blockers[i].message);
        cJSON_AddItemToArray(list, b);
    }
    return list;
}

cJSON *pcidevice_status(const struct pcidevice_spec *s)
{
    cJSON *st = cJSON_CreateObject();
    if (!st)
        return NULL;
    add_str(st, "address", s->address);
    add_str(st, "vendorId", s->vendor_id);
    add_str(st, "deviceId", s->device_id);
    add_str(st, "subsystemVendorId", s->subsystem_vendor_id);
    add_str(st, "subsystemDeviceId", s->subsystem_device_id);
    add_str(st, "classId", s->class_id);
    add_str(st, "revision", s->revision);
    cJSON_AddStringToObject(st, "iommuGroup", s->iommu_group); /* "" when none, as harvester */
    if (s->numa_node >= 0)
        cJSON_AddNumberToObject(st, "numaNode", s->numa_node);
    add_str(st, "nodeName", s->node);
    add_str(st, "resourceName", s->resource_name);
    add_str(st, "description", s->description);
    add_str(st, "kernelDriverInUse", s->driver);
    cJSON *sriov = sriov_json(s);
    if (sriov)
        cJSON_AddItemToObject(st, "sriov", sriov);
    cJSON *blockers = blockers_json(s);
    if (blockers)
        cJSON_AddItemToObject(st, "passthroughBlockers", blockers);
    return st;
}

static cJSON *owner_ref(const char *node, const char *node_uid)
{
    cJSON *ref = cJSON_CreateObject();
    cJSON_AddStringToObject(ref, "apiVersion", "v1");
    cJSON_AddStringToObject(ref, "kind", "Node");
    cJSON_AddStringToObject(ref, "name", node);
    cJSON_AddStringToObject(ref, "uid", node_uid);
    return ref;
}

cJSON *pcidevice_new_object(const struct pcidevice_spec *s, const char *node_uid)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "apiVersion", "devices.harvesterhci.io/v1beta1");
    cJSON_AddStringToObject(o, "kind", "PCIDevice");
    cJSON *meta = cJSON_AddObjectToObject(o, "metadata");
    cJSON_AddStringToObject(meta, "name", s->name);
    cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON_AddStringToObject(labels, "nodename", s->node);
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    cJSON_AddStringToObject(ann, KUBE_PCIDEVICE_DRIVER_ANNOTATION, s->driver);
    if (node_uid) {
        cJSON *refs = cJSON_AddArrayToObject(meta, "ownerReferences");
        cJSON_AddItemToArray(refs, owner_ref(s->node, node_uid));
    }
    cJSON_AddObjectToObject(o, "spec");
    return o;
}

static const cJSON *get(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* Serializes {"<top>": inner} and frees inner; NULL when inner is empty or on OOM. */
static char *wrap(const char *top, cJSON *inner)
{
    if (!inner || !inner->child) {
        cJSON_Delete(inner);
        return NULL;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, top, inner);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* The status fields of `want` that `have` lacks or differs in, and null for managed fields
 * `have` has and `want` does not. */
static cJSON *status_diff(const cJSON *want, const cJSON *have)
{
    cJSON *patch = cJSON_CreateObject();
    const cJSON *item;
    cJSON_ArrayForEach(item, want)
    {
        const cJSON *cur = get(have, item->string);
        if (!cur || !cJSON_Compare(item, cur, true))
            cJSON_AddItemToObject(patch, item->string, cJSON_Duplicate(item, true));
    }
    for (size_t i = 0; i < sizeof(managed) / sizeof(managed[0]); i++)
        if (get(have, managed[i]) && !get(want, managed[i]))
            cJSON_AddNullToObject(patch, managed[i]);
    return patch;
}

static bool has_owner(const cJSON *refs, const char *node, const char *node_uid)
{
    const cJSON *ref;
    cJSON_ArrayForEach(ref, refs)
    {
        const char *kind = cJSON_GetStringValue(get(ref, "kind"));
        const char *name = cJSON_GetStringValue(get(ref, "name"));
        const char *uid = cJSON_GetStringValue(get(ref, "uid"));
        if (kind && name && uid && strcmp(kind, "Node") == 0 && strcmp(name, node) == 0 &&
            strcmp(uid, node_uid) == 0)
            return true;
    }
    return false;
}

/* Other owners are kept; a Node reference with a stale uid is replaced. */
static cJSON *owners_with_node(const cJSON *refs, const char *node, const char *node_uid)
{
    cJSON *list = cJSON_CreateArray();
    const cJSON *ref;
    cJSON_ArrayForEach(ref, refs)
    {
        const char *kind = cJSON_GetStringValue(get(ref, "kind"));
        if (!kind || strcmp(kind, "Node") != 0)
            cJSON_AddItemToArray(list, cJSON_Duplicate(ref, true));
    }
    cJSON_AddItemToArray(list, owner_ref(node, node_uid));
    return list;
}

static cJSON *meta_diff(const struct pcidevice_spec *want, const cJSON *meta, const char *node_uid)
{
    cJSON *patch = cJSON_CreateObject();
    const char *label = cJSON_GetStringValue(get(get(meta, "labels"), "nodename"));
    if (!label || strcmp(label, want->node) != 0) {
        cJSON *labels = cJSON_AddObjectToObject(patch, "labels");
        cJSON_AddStringToObject(labels, "nodename", want->node);
    }
    const cJSON *refs = get(meta, "ownerReferences");
    if (node_uid && !has_owner(refs, want->node, node_uid))
        cJSON_AddItemToObject(patch, "ownerReferences",
                              owners_with_node(refs, want->node, node_uid));
    return patch;
}

int pcidevice_plan(const struct pcidevice_spec *want, const cJSON *have, const char *node_uid,
                   struct pcidevice_plan *ret)
{
    *ret = (struct pcidevice_plan){0};
    const cJSON *meta = get(have, "metadata");
    const char *uid = kube_meta_str(have, "uid");
    if (uid)
        (void)snprintf(ret->uid, sizeof(ret->uid), "%s", uid);
    if (!want) {
        ret->delete = have != NULL;
        return 0;
    }
    cJSON *status = pcidevice_status(want);
    if (!status)
        return -ENOMEM;
    ret->create = have == NULL;
    if (have)
        ret->meta_patch = wrap("metadata", meta_diff(want, meta, node_uid));
    ret->status_patch = wrap("status", status_diff(status, get(have, "status")));
    cJSON_Delete(status);
    return 0;
}

bool pcidevice_plan_empty(const struct pcidevice_plan *p)
{
    return !p->create && !p->delete &&!p->meta_patch && !p->status_patch;
}

void pcidevice_plan_done(struct pcidevice_plan *p)
{
    free(p->meta_patch);
    free(p->status_patch);
    *p = (struct pcidevice_plan){0};
}

/* --- the reconciler ---------------------------------------------------------------------------
 * Not pure: it carries plans out on the runner (API writes, one at a time), looks up the
 * Node's uid for the ownerReference, and logs what it writes. */

#define MAX_IN_FLIGHT  4
#define NODE_RETRY     10.0 /* first retry of a missing Node; doubles up to NODE_RETRY_MAX */
#define NODE_RETRY_MAX 300.0

struct pcidevices {
    struct pcidevices_config cfg;
    struct runner *runner;
    struct map *want; /* name -> struct pcidevice_spec, from the last scan; NULL before one */
    char *node_uid;
    double node_retry_in;
    ev_timer node_retry;
    struct metrics_series *writes[3]; /* by verb: WRITE_CREATE, WRITE_PATCH, WRITE_DELETE */
};

enum { WRITE_CREATE, WRITE_PATCH, WRITE_DELETE };

struct write_job { /* a plan being carried out */
    struct pcidevices *d;
    struct runner_job *job;
    struct pcidevice_spec want;
    struct pcidevice_plan plan;
    int step;
};

static void write_job_free(void *p)
{
    struct write_job *w = p;
    pcidevice_plan_done(&w->plan);
    free(w);
}

static int plan_key(void *ctx, const char *key, const cJSON *obj, void **ret_plan)
{
    struct pcidevices *d = ctx;
    const struct pcidevice_spec *want = map_get(d->want, key);
    struct write_job *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    int r = pcidevice_plan(want, obj, d->node_uid, &w->plan);
    if (r < 0 || pcidevice_plan_empty(&w->plan)) {
        write_job_free(w);
        *ret_plan = NULL;
        return r;
    }
    w->d = d;
    if (want) {
        w->want = *want; /* the create needs the names only: not the scan's blockers, which a */
        w->want.blockers = NULL; /* new scan may free while the write is in flight */
        w->want.n_blockers = 0;
    }
    *ret_plan = w;
    return 0;
}

static void write_next(struct write_job *w);

static void on_write(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct write_job *w = userdata;
    if (err && !(w->plan.delete &&kube_err_is_not_found(err))) {
        log_error("Failed to write PCIDevice", KV_STR("pcidevice", runner_job_key(w->job)),
                  KV_INT("http", err->http), KV_STR("reason", err->reason),
                  KV_STR("message", err->message));
        runner_job_done(w->job, RUNNER_RETRY, 0);
        return;
    }
    runner_job_wrote(w->job, w->plan.delete ? NULL : obj);
    write_next(w);
}

/* Starts the write of step `step`: 0 when there is nothing to write at that step. */
static int write_step(struct write_job *w, int step)
{
    struct pcidevices *d = w->d;
    const struct kube_resource *r = &kube_res_pcidevices;
    const char *key = runner_job_key(w->job);
    if (step == 0 && w->plan.create) {
        cJSON *o = pcidevice_new_object(&w->want, d->node_uid);
        int e = o ? kube_client_create(d->cfg.http, r, NULL, o, on_write, w) : -ENOMEM;
        cJSON_Delete(o);
        metrics_inc(d->writes[WRITE_CREATE]);
        log_info("Creating PCIDevice", KV_STR("pcidevice", key),
                 KV_STR("address", w->want.address));
        return e < 0 ? e : 1;
    }
    /* status first: a new object is complete as early as possible; then labels and owners */
    const char *patch = step == 1 ? w->plan.status_patch : step == 2 ? w->plan.meta_patch : NULL;
    if (patch) {
        metrics_inc(d->writes[WRITE_PATCH]);
        log_v(2, "Patching PCIDevice", KV_STR("pcidevice", key), KV_STR("patch", patch));
        int e = kube_client_patch(d->cfg.http, r, NULL, key, KUBE_PATCH_MERGE, patch, step == 1,
                                  on_write, w);
        return e < 0 ? e : 1;
    }
    if (step == 3 && w->plan.delete) {
        metrics_inc(d->writes[WRITE_DELETE]);
        log_info("Deleting PCIDevice of a device that is gone", KV_STR("pcidevice", key));
        int e = kube_client_delete(d->cfg.http, r, NULL, key, w->plan.uid, NULL, on_write, w);
        return e < 0 ? e : 1;
    }
    return 0;
}

/* Carries out the plan one write at a time: create, status, metadata, delete. */
static void write_next(struct write_job *w)
{
    while (w->step < 4) {
        int e = write_step(w, w->step++);
        if (e > 0)
            return; /* on_write goes on */
        if (e < 0) {
            log_error("Cannot start a request", KV_STR("pcidevice", runner_job_key(w->job)),
                      KV_ERRNO(e));
            runner_job_done(w->job, RUNNER_RETRY, 0);
            return;
        }
    }
    runner_job_done(w->job, RUNNER_DONE, 0);
}

static void act(struct runner_job *job, void *plan, void *ctx)
{
    struct write_job *w = plan;
    (void)ctx;
    w->job = job;
    write_next(w);
}

static bool can_start(void *ctx)
{
    const struct pcidevices *d = ctx;
    return d->want != NULL;
}

static void on_converged(void *ctx)
{
    const struct pcidevices *d = ctx;
    log_info("PCI inventory written", KV_INT("devices", map_size(d->want)));
}

static const struct runner_ops ops = {
        .plan = plan_key,
        .act = act,
        .plan_free = write_job_free,
        .can_start = can_start,
        .on_converged = on_converged,
};

/* --- the Node ------------------------------------------------------------------------------- */

static void get_node(struct pcidevices *d);

/* Retries reading the Node later, backing off: a missing Node must not become polling. */
static void retry_node(struct pcidevices *d)
{
    d->node_retry_in = d->node_retry_in > 0 ? d->node_retry_in * 2 : NODE_RETRY;
    if (d->node_retry_in > NODE_RETRY_MAX)
        d->node_retry_in = NODE_RETRY_MAX;
    ev_timer_set(&d->node_retry, d->node_retry_in, 0.);
    ev_timer_start(d->cfg.loop, &d->node_retry);
}

static void on_node(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct pcidevices *d = userdata;
    const char *uid = kube_meta_str(obj, "uid");
    if (err || !uid) {
        log_warning("Cannot read this node's Node object; PCIDevices get no ownerReference yet",
                    KV_STR("node", d->cfg.node_name), KV_INT("http", err ? err->http : 0),
                    KV_STR("reason", err ? err->reason : ""));
        retry_node(d);
        return;
    }
    free(d->node_uid);
    d->node_uid = strdup(uid);
    pcidevices_enqueue_all(d);
}

static void get_node(struct pcidevices *d)
{
    if (kube_client_get(d->cfg.http, &kube_res_nodes, NULL, d->cfg.node_name, on_node, d) < 0)
        retry_node(d);
}

static void on_node_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    get_node(w->data);
}

/* --- the reconciler's life ------------------------------------------------------------------ */

static void register_metrics(struct pcidevices *d)
{
    static const char *const verbs[] = {"create", "patch", "delete", NULL};
    metrics_enum(d->cfg.metrics, METRICS_COUNTER, "hostdevd_api_writes_total",
                 "PCIDevice writes by verb.", "verb", verbs, d->writes);
}

struct pcidevices *pcidevices_new(const struct pcidevices_config *cfg)
{
    struct pcidevices *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->cfg = *cfg;
    char selector[300];
    (void)snprintf(selector, sizeof(selector), "nodename=%s", cfg->node_name);
    struct runner_config rc = {
            .name = "pcidevice",
            .loop = cfg->loop,
            .http = cfg->http,
            .informer = {.resource = &kube_res_pcidevices, .label_selector = selector},
            .max_in_flight = MAX_IN_FLIGHT,
            .metrics = cfg->metrics,
            .ops = &ops,
            .ctx = d,
    };
    d->runner = runner_new(&rc);
    if (!d->runner) {
        pcidevices_free(d);
        return NULL;
    }
    register_metrics(d);
    ev_timer_init(&d->node_retry, on_node_retry, NODE_RETRY, 0.);
    d->node_retry.data = d;
    return d;
}

int pcidevices_start(struct pcidevices *d)
{
    get_node(d);
    return runner_start(d->runner);
}

void pcidevices_set_want(struct pcidevices *d, struct map *want)
{
    map_free(d->want);
    d->want = want;
    pcidevices_enqueue_all(d);
}

void pcidevices_enqueue_all(struct pcidevices *d)
{
    const char *key;
    void *v;
    size_t pos = 0;
    while (map_next(d->want, &pos, &key, &v))
        runner_enqueue(d->runner, key);
    runner_enqueue_all(d->runner);
}

struct map *pcidevices_new_want(void)
{
    return map_new(pcidevice_spec_free);
}

struct runner *pcidevices_runner(const struct pcidevices *d)
{
    return d->runner;
}

bool pcidevices_ready(struct buf *why, void *userdata)
{
    const struct pcidevices *d = userdata;
    if (!runner_has_synced(d->runner))
        (void)buf_adds(why, "PCIDevice informer has not synced");
    else if (!d->want)
        (void)buf_adds(why, "no PCI scan has succeeded");
    else if (!runner_converged(d->runner))
        (void)buf_adds(why, "the first inventory is not written yet");
    return runner_converged(d->runner);
}

void pcidevices_stop(void *userdata)
{
    struct pcidevices *d = userdata;
    runner_stop(d->runner);
    ev_timer_stop(d->cfg.loop, &d->node_retry);
}

int pcidevices_in_flight(void *userdata)
{
    const struct pcidevices *d = userdata;
    return runner_in_flight(d->runner);
}

void pcidevices_free(void *userdata)
{
    struct pcidevices *d = userdata;
    if (!d)
        return;
    ev_timer_stop(d->cfg.loop, &d->node_retry);
    d->runner = runner_free(d->runner);
    map_free(d->want);
    free(d->node_uid);
    free(d);
}
