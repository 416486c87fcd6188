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
#include "base/cleanup.h"
#include "base/json.h"
#include "base/log.h"
#include "base/map.h"
#include "base/metrics.h"
#include "base/timefmt.h"
#include "controllers/binding/ledger.h"
#include "controllers/devices/devobjs.h"
#include "controllers/devices/devwrite.h"
#include "controllers/devices/nodeuid.h"
#include "controllers/health/health.h"
#include "controllers/objects/kinds.h"
#include "controllers/objects/pciobj.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "controllers/runtime/runner.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/names.h"
#include "kube/status.h"

/* The status fields this agent writes; any other field is someone else's. */
static const char *const managed[] = {
        "address",           "vendorId",
        "deviceId",          "subsystemVendorId",
        "subsystemDeviceId", "classId",
        "revision",          "iommuGroup",
        "numaNode",          "nodeName",
        "resourceName",      "description",
        "kernelDriverInUse", "sriov",
        "serialNumber",      "serialNumberSource",
        "physicalSlot",      "passthroughBlockers",
        "aerErrors",
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
    if (s->physfn[0] && s->sriov_vf_index >= 0)
        cJSON_AddNumberToObject(o, "vfIndex", s->sriov_vf_index);
    if (s->sriov_totalvfs >= 0) {
        cJSON_AddNumberToObject(o, "totalVFs", s->sriov_totalvfs);
        if (s->sriov_numvfs >= 0) /* (absent when it cannot be read) */
            cJSON_AddNumberToObject(o, "numVFs", s->sriov_numvfs);
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

cJSON *pcidevice_aer_json(const struct pcidevice_spec *s)
{
    static const char *const keys[] = {"fatal", "nonFatal", "correctable"};
    cJSON *o = NULL;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (s->aer[i] < 0)
            continue;
        if (!o && !(o = cJSON_CreateObject()))
            return NULL;
        cJSON_AddNumberToObject(o, keys[i], (double)s->aer[i]);
    }
    return o;
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
    add_str(st, "serialNumber", s->serial);
    add_str(st, "serialNumberSource", s->serial[0] ? s->serial_source : "");
    add_str(st, "physicalSlot", s->slot);
    cJSON *blockers = blockers_json(s);
    if (blockers)
        cJSON_AddItemToObject(st, "passthroughBlockers", blockers);
    cJSON *aer = pcidevice_aer_json(s);
    if (aer)
        cJSON_AddItemToObject(st, "aerErrors", aer);
    return st;
}

/* The Healthy condition `h` says; since `old`'s lastTransitionTime when its status is the same. */
static cJSON *healthy_condition(const cJSON *old, const struct pcidevice_health *h)
{
    const char *status = h->healthy ? "True" : "False";
    const char *since = h->now;
    if (old && json_same(json_str(old, "status"), status) && json_str(old, "lastTransitionTime"))
        since = json_str(old, "lastTransitionTime");
    cJSON *c = cJSON_CreateObject();
    if (!c)
        return NULL;
    cJSON_AddStringToObject(c, "type", HEALTH_CONDITION);
    cJSON_AddStringToObject(c, "status", status);
    cJSON_AddStringToObject(c, "lastTransitionTime", since);
    cJSON_AddStringToObject(c, "reason", h->reason);
    cJSON_AddStringToObject(c, "message", h->message);
    return c;
}

cJSON *pcidevice_conditions(const cJSON *have_status, const struct pcidevice_health *h)
{
    _cleanup_json_ cJSON *list = cJSON_CreateArray();
    const cJSON *c;
    bool placed = false;
    if (!list)
        return NULL;
    cJSON_ArrayForEach(c, json_field(have_status, "conditions"))
    {
        bool ours = json_same(json_str(c, "type"), HEALTH_CONDITION);
        if (ours && placed)
            continue; /* (a second Healthy entry is dropped) */
        cJSON *item = ours ? healthy_condition(c, h) : cJSON_Duplicate(c, true);
        if (!item)
            return NULL;
        placed |= ours;
        cJSON_AddItemToArray(list, item);
    }
    cJSON *mine = placed ? NULL : healthy_condition(NULL, h);
    if (!placed && !mine)
        return NULL;
    if (mine)
        cJSON_AddItemToArray(list, mine);
    return TAKE_PTR(list);
}

cJSON *pcidevice_new_object(const struct pcidevice_spec *s, const char *node_uid,
                            const char *first_driver)
{
    cJSON *o = devwrite_new_object("PCIDevice", s->name, s->node, node_uid);
    cJSON *ann =
            cJSON_AddObjectToObject(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "annotations");
    cJSON_AddStringToObject(ann, KUBE_PCIDEVICE_DRIVER_ANNOTATION,
                            first_driver ? first_driver : s->driver);
    cJSON *labels = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(o, "metadata"), "labels");
    if (s->sriov_parent[0] && cJSON_IsObject(labels))
        cJSON_AddStringToObject(labels, PCIDEVICE_PARENT_SRIOV_LABEL, s->sriov_parent);
    return o;
}

/* A gone device kept (Removed while held): only its Healthy condition is written. */
static int plan_kept(const cJSON *have, const struct pcidevice_health *health,
                     struct pcidevice_plan *ret)
{
    const cJSON *have_status = json_field(have, "status");
    _cleanup_json_ cJSON *want = cJSON_CreateObject();
    cJSON *conditions = pcidevice_conditions(have_status, health);
    if (!want || !conditions) {
        cJSON_Delete(conditions);
        return -ENOMEM;
    }
    cJSON_AddItemToObject(want, "conditions", conditions);
    ret->status_patch = devwrite_wrap("status", devwrite_status_diff(want, have_status, NULL, 0));
    return 0;
}

int pcidevice_plan_health(const struct pcidevice_spec *want, const cJSON *have,
                          const char *node_uid, const struct pcidevice_health *health,
                          struct pcidevice_plan *ret)
{
    *ret = (struct pcidevice_plan){0};
    const cJSON *meta = json_field(have, "metadata");
    const char *uid = kube_meta_str(have, "uid");
    if (uid)
        (void)snprintf(ret->uid, sizeof(ret->uid), "%s", uid);
    if (!want && have && health && health->keep_gone)
        return plan_kept(have, health, ret);
    if (!want) {
        ret->delete = have != NULL;
        return 0;
    }
    cJSON *status = pcidevice_status(want);
    cJSON *conditions =
            status && health ? pcidevice_conditions(json_field(have, "status"), health) : NULL;
    if (!status || (health && !conditions)) {
        cJSON_Delete(status);
        return -ENOMEM;
    }
    if (conditions)
        cJSON_AddItemToObject(status, "conditions", conditions);
    ret->create = have == NULL;
    if (have)
        ret->meta_patch = devwrite_wrap("metadata", devwrite_meta_diff(meta, want->node, node_uid));
    ret->status_patch = devwrite_wrap(
            "status", devwrite_status_diff(status, json_field(have, "status"), managed,
                                           sizeof(managed) / sizeof(managed[0])));
    cJSON_Delete(status);
    return 0;
}

int pcidevice_plan(const struct pcidevice_spec *want, const cJSON *have, const char *node_uid,
                   struct pcidevice_plan *ret)
{
    return pcidevice_plan_health(want, have, node_uid, NULL, ret);
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

/* The PCIDevice reconciler: the device-object core and what the Healthy condition reads. */
struct pcidevices {
    struct devobjs o;      /* first: the core's functions take the reconciler as one */
    struct health *health; /* the node's health store (NULL where the role has none) */
    struct ledger *ledger; /* who holds each device (NULL where the role has none) */
};

/* The Healthy condition's message while nothing is known against the device. */
#define HEALTHY_MESSAGE                                                                            \
    "nothing is known against the device: no failed reset or check after a release, no removal "   \
    "while held, no AER fatal error since the agent started"

/* Whether the object of a gone device stays: the store says it was Removed and a PCIDeviceClaim
 * or a DRA claim still holds it, or the claims are not all known yet (after a restart: the
 * ledger is filled from the claims' cache; ledger_changed looks again once it is). */
static bool keep_gone(const struct pcidevices *p, const char *address,
                      const struct health_state *st)
{
    char who[256];
    if (!address || st->healthy || strcmp(st->reason, HEALTH_REMOVED) != 0 || !p->ledger)
        return false;
    if (p->o.claims && !kube_informer_has_synced(p->o.claims))
        return true;
    return ledger_held(p->ledger, address, LEDGER_PCI_CLAIM, NULL, who, sizeof(who)) ||
           ledger_held(p->ledger, address, LEDGER_DRA, NULL, who, sizeof(who));
}

static int plan_key(void *ctx, const char *key, const cJSON *obj, void **ret_plan)
{
    struct pcidevices *p = ctx;
    struct devobjs *d = &p->o;
    const struct pcidevice_spec *want = map_get(d->want, key);
    const char *node_uid = nodeuid_get(d->cfg.node);
    struct pcidevice_plan plan;
    *ret_plan = NULL;
    if (obj && devwrite_foreign(obj, d->cfg.env.node_name))
        return 0;
    const char *address = want ? want->address : json_str(json_field(obj, "status"), "address");
    struct health_state st;
    char now[32];
    (void)health_get(p->health, address, &st);
    timefmt_now(now, sizeof(now));
    struct pcidevice_health h = {.healthy = st.healthy,
                                 .reason = st.reason,
                                 .message = st.healthy ? HEALTHY_MESSAGE : st.message,
                                 .now = now,
                                 .keep_gone = !want && keep_gone(p, address, &st)};
    int r = pcidevice_plan_health(want, obj, node_uid, p->health ? &h : NULL, &plan);
    if (r < 0 || pcidevice_plan_empty(&plan)) {
        pcidevice_plan_done(&plan);
        return r;
    }
    /* a claim of the device remembers its driver from before the bind */
    const cJSON *claim = plan.create && d->claims ? kube_informer_get(d->claims, key) : NULL;
    const char *recorded = NULL;
    if (!pciobj_driver_recorded(claim, &recorded))
        recorded = NULL;
    cJSON *object = plan.create && want ? pcidevice_new_object(want, node_uid, recorded) : NULL;
    if (!plan.create || object) {
        *ret_plan =
                devobjs_write(d, object, plan.status_patch, plan.meta_patch, plan.delete, plan.uid);
        plan.status_patch = plan.meta_patch = NULL; /* the write owns them now */
    }
    pcidevice_plan_done(&plan);
    return *ret_plan ? 0 : -ENOMEM;
}

static const struct devobjs_kind kind = {.name = "pcidevice",
                                         .kind = "PCIDevice",
                                         .cache = &kind_pcidevices,
                                         .written = "PCI inventory written",
                                         .gone = "Deleting PCIDevice of a device that is gone"};

static const struct runner_ops ops = {
        .plan = plan_key,
        .act = devobjs_act,
        .plan_free = devobjs_plan_free,
        .on_event = devobjs_on_event,
        .can_start = devobjs_can_start,
        .on_converged = devobjs_on_converged,
        .kind = "PCIDevice",
        .waiting = "no PCI scan has succeeded",
        .unconverged = "the first inventory is not written yet",
};

/* --- the reconciler's life ------------------------------------------------------------------ */

struct devobjs *pcidevices_new(const struct devobjs_config *cfg)
{
    return devobjs_new(sizeof(struct pcidevices), cfg, &kind, &ops);
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

void pcidevices_keep_unreadable(const struct devobjs *d, struct map *want,
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

const struct topic pcidevices_scanned = {"a PCI scan"};
const struct topic pcidevices_wanted = {"the PCIDevices of a scan"};

/* A scan: its PCIDevices (the unreadable devices' kept), then to whoever reads the scan. */
static void on_scan(void *self, const struct watch_event *ev)
{
    struct devobjs *d = self;
    struct devobjs_scan *scan = ev->data;
    pcidevices_keep_unreadable(d, scan->want, scan->unreadable);
    devobjs_take_want(d, TAKE_PTR(scan->want));
    manager_emit(d->cfg.env.mgr, &pcidevices_wanted, (void *)devobjs_want(d));
}

/* Queues the object of the device at `address`. */
static void enqueue_address(struct pcidevices *p, const char *address)
{
    char name[KUBE_NAME_MAX + 1];
    if (address && kube_names_pcidevice(p->o.cfg.env.node_name, address, name, sizeof(name)) == 0)
        runner_enqueue(p->o.runner, name);
}

/* A device's health changed: its Healthy condition. */
static void on_health(void *self, const struct watch_event *ev)
{
    enqueue_address(self, ev->data);
}

/* A holding began or ended: the objects of Removed devices (kept while held) again. */
static void on_ledger(void *self, const struct watch_event *ev)
{
    struct pcidevices *p = self;
    size_t n = 0;
    const char *const *bad = health_unhealthy(p->health, &n);
    (void)ev;
    for (size_t i = 0; bad && i < n; i++) {
        struct health_state st;
        if (!health_get(p->health, bad[i], &st) && strcmp(st.reason, HEALTH_REMOVED) == 0)
            enqueue_address(p, bad[i]);
    }
}

static void *make(const struct part_env *env)
{
    struct devobjs_config c = devobjs_config_of(env);
    struct pcidevices *p = (struct pcidevices *)pcidevices_new(&c);
    if (p) {
        p->o.claims = manager_cache(env->mgr, &kind_pcideviceclaims);
        p->health = manager_part(env->mgr, &health_part);
        p->ledger = manager_part(env->mgr, &ledger_part);
    }
    return p;
}

static const struct watch watches[] = {
        {.topic = &pcidevices_scanned, .map = on_scan},
        {.topic = &nodeuid_known, .map = devobjs_enqueue_all_watch},
        {.topic = &health_changed, .map = on_health},
        {.topic = &ledger_changed, .map = on_ledger},
        {0},
};

const struct part_ops pcidevices_part = {.name = "pcidevices",
                                         .make = make,
                                         .watches = watches,
                                         .runner = devobjs_runner,
                                         .start = devobjs_start,
                                         .free = devobjs_free};
