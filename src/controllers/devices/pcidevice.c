/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/pcidevice.c - the PCIDevice reconciler: desired objects and minimal write
 * plans (pure: no I/O, no logging), and the reconciler on the runner that carries them out. See
 * pcidevice.h.
 */
#include "controllers/devices/pcidevice.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/log.h"
#include "base/map.h"
#include "base/metrics.h"
#include "controllers/devices/devwrite.h"
#include "controllers/devices/nodeuid.h"
#include "controllers/runtime/part.h"
#include "controllers/runtime/runner.h"
#include "kube/client.h"
#include "kube/names.h"
#include "kube/status.h"

static void pcidevices_free(void *userdata);

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

cJSON *pcidevice_new_object(const struct pcidevice_spec *s, const char *node_uid)
{
    cJSON *o = devwrite_new_object("PCIDevice", s->name, s->node, node_uid);
    cJSON *ann =
            cJSON_AddObjectToObject(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "annotations");
    cJSON_AddStringToObject(ann, KUBE_PCIDEVICE_DRIVER_ANNOTATION, s->driver);
    return o;
}

int pcidevice_plan(const struct pcidevice_spec *want, const cJSON *have, const char *node_uid,
                   struct pcidevice_plan *ret)
{
    *ret = (struct pcidevice_plan){0};
    const cJSON *meta = json_field(have, "metadata");
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
        ret->meta_patch = devwrite_wrap("metadata", devwrite_meta_diff(meta, want->node, node_uid));
    ret->status_patch = devwrite_wrap(
            "status", devwrite_status_diff(status, json_field(have, "status"), managed,
                                           sizeof(managed) / sizeof(managed[0])));
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
 * Not pure: it carries plans out on the runner (controllers/devices/devwrite.c: API writes, one at
 * a time, each logged). */

struct pcidevices {
    struct pcidevices_config cfg;
    struct runner *runner;
    struct map *want; /* name -> struct pcidevice_spec, from the last scan; NULL before one */
    struct metrics_series *writes[DEVWRITE_VERBS];
};

static void write_job_free(void *p)
{
    struct devwrite *w = p;
    devwrite_done(w);
    free(w);
}

static int plan_key(void *ctx, const char *key, const cJSON *obj, void **ret_plan)
{
    struct pcidevices *d = ctx;
    const struct pcidevice_spec *want = map_get(d->want, key);
    const char *node_uid = nodeuid_get(d->cfg.node);
    struct pcidevice_plan plan;
    *ret_plan = NULL;
    if (obj && devwrite_foreign(obj, d->cfg.env.node_name))
        return 0;
    int r = pcidevice_plan(want, obj, node_uid, &plan);
    if (r < 0 || pcidevice_plan_empty(&plan)) {
        pcidevice_plan_done(&plan);
        return r;
    }
    struct devwrite *w = calloc(1, sizeof(*w));
    if (w && plan.create && !(w->object = pcidevice_new_object(want, node_uid))) {
        free(w);
        w = NULL;
    }
    if (!w) {
        pcidevice_plan_done(&plan);
        return -ENOMEM;
    }
    *w = (struct devwrite){.http = d->cfg.env.http,
                           .res = &kube_res_pcidevices,
                           .kind = "PCIDevice",
                           .writes = d->writes,
                           .object = w->object,
                           .status_patch = plan.status_patch,
                           .meta_patch = plan.meta_patch,
                           .delete = plan.delete,
                           .delete_why = "Deleting PCIDevice of a device that is gone"};
    (void)snprintf(w->uid, sizeof(w->uid), "%s", plan.uid);
    *ret_plan = w;
    return 0;
}

static void act(struct runner_job *job, void *plan, void *ctx)
{
    (void)ctx;
    devwrite_run(plan, job);
}

static bool can_start(void *ctx)
{
    const struct pcidevices *d = ctx;
    return d->want != NULL && nodeuid_answered(d->cfg.node); /* objects made with their owner */
}

static void on_event(void *ctx, const char *key, const cJSON *obj, enum runner_event ev)
{
    const struct pcidevices *d = ctx;
    if (ev == RUNNER_EVENT_ADD)
        devwrite_note_foreign("PCIDevice", key, obj, d->cfg.env.node_name);
    if (d->cfg.on_event)
        d->cfg.on_event(key, d->cfg.userdata);
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
        .on_event = on_event,
        .can_start = can_start,
        .on_converged = on_converged,
        .kind = "PCIDevice",
        .waiting = "no PCI scan has succeeded",
        .unconverged = "the first inventory is not written yet",
};

/* --- the reconciler's life ------------------------------------------------------------------ */

struct pcidevices *pcidevices_new(const struct pcidevices_config *cfg)
{
    struct pcidevices *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->cfg = *cfg;
    d->runner = devwrite_runner_new(&cfg->env, "pcidevice", "PCIDevice", &kube_res_pcidevices, &ops,
                                    d, d->writes);
    if (!d->runner) {
        pcidevices_free(d);
        return NULL;
    }
    return d;
}

static int pcidevices_start(void *self)
{
    struct pcidevices *d = self;
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

static struct pcidevice_spec *spec_dup(const struct pcidevice_spec *old)
{
    size_t n = old->n_blockers > 0 ? (size_t)old->n_blockers : 0;
    struct pcidevice_spec *copy = malloc(sizeof(*copy));
    if (!copy)
        return NULL;
    *copy = *old;
    copy->blockers = n ? malloc(n * sizeof(*old->blockers)) : NULL;
    if (n && !copy->blockers) {
        free(copy);
        return NULL;
    }
    if (n)
        memcpy(copy->blockers, old->blockers, n * sizeof(*old->blockers));
    return copy;
}

void pcidevices_keep_unreadable(const struct pcidevices *d, struct map *want,
                                const struct map *unreadable)
{
    const char *entry;
    size_t pos = 0;
    while (d->want && unreadable && map_next(unreadable, &pos, &entry, NULL)) {
        char name[KUBE_NAME_MAX + 1];
        const struct pcidevice_spec *old;
        if (kube_names_pcidevice(d->cfg.env.node_name, entry, name, sizeof(name)) < 0 ||
            map_contains(want, name) || !(old = map_get(d->want, name)))
            continue;
        struct pcidevice_spec *copy = spec_dup(old);
        if (copy && map_put(want, name, copy) < 0)
            pcidevice_spec_free(copy);
    }
}

const struct map *pcidevices_want(const struct pcidevices *d)
{
    return d->want;
}

struct runner *pcidevices_runner(const struct pcidevices *d)
{
    return d->runner;
}

static void pcidevices_free(void *userdata)
{
    struct pcidevices *d = userdata;
    if (!d)
        return;
    d->runner = runner_free(d->runner);
    map_free(d->want);
    free(d);
}

static struct runner *part_runner(const void *self)
{
    return ((const struct pcidevices *)self)->runner;
}

const struct part_ops pcidevices_part = {.name = "pcidevices",
                                         .runner = part_runner,
                                         .start = pcidevices_start,
                                         .free = pcidevices_free};
