/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/mdev/vgpudev.c - the VGPUDevice reconciler (see vgpudev.h).
 *
 * Decisions:
 * - The objects go through the device-object core (devices/devobjs.h): the informer of this
 *   node's objects, creates, patches, deletes with a uid precondition; `want` holds the objects
 *   to create (free slots, adopted instances), recomputed from the scan and the cache whenever
 *   either changes.
 * - One plan does one step (mdev/mdevplan.h); node work is a worker job whose end records what
 *   it did, scans again and queues every key.
 * - The finalizer is a merge patch of the whole list with the object's resourceVersion: a
 *   concurrent change of the list is refused (409) instead of clobbered.
 */
#include "controllers/mdev/vgpudev.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "base/log.h"
#include "base/map.h"
#include "base/metrics.h"
#include "base/timefmt.h"
#include "controllers/binding/ledger.h"
#include "controllers/devices/devobjs.h"
#include "controllers/devices/devwrite.h"
#include "controllers/devices/inventory.h"
#include "controllers/devices/nodeuid.h"
#include "controllers/devices/pcidevice.h"
#include "controllers/mdev/mdevledger.h"
#include "controllers/mdev/mdevplan.h"
#include "controllers/objects/kinds.h"
#include "controllers/objects/mdevobj.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/runner.h"
#include "controllers/runtime/worker.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "kube/names.h"
#include "node/holder.h"
#include "node/mdev.h"
#include "node/sysfs.h"
#include "node/vfio.h"

/* What the reconciler remembers of an object's last node work. */
struct memory {
    long long generation;
    char reason[32];
    char message[1024];
    double at;
};

/* An object to create. */
struct want {
    char parent[NODE_MDEV_NAME_SIZE];
    char type[NODE_MDEV_NAME_SIZE]; /* adopted: its type; "" for a free slot */
    char uuid[NODE_MDEV_UUID_SIZE]; /* adopted: its UUID */
};

struct vgpudev {
    struct devobjs o; /* first: the runner's ctx */
    struct worker *worker;
    const struct ledger *ledger;
    struct mdevledger *held; /* the PCI parents with instances, in the ledger */
    int sysfs_fd;
    struct node_mdev_scan scan;
    bool scanned;
    char scan_error[512]; /* the last failed scan's message, said once */
    struct map *memory;   /* name -> struct memory */
    struct map *said;     /* name -> the last refusal logged */
    struct metrics_series *node_writes, *node_failures;
    struct kube_recorder *events; /* Created, Removed, CreateFailed, RemoveFailed */
};

/* --- the node's mdevs, and the objects to create -----------------------------------------------
 */

static void ledger_sync(struct vgpudev *v);

static void rescan(struct vgpudev *v)
{
    struct node_mdev_scan s = {0};
    struct err err = {{0}};
    int r = node_mdev_scan(v->sysfs_fd, &s, &err);
    if (r < 0) {
        if (strcmp(v->scan_error, err.msg) != 0)
            log_warning("Cannot scan the node's mediated devices", KV_STR("message", err.msg),
                        KV_ERRNO(r));
        (void)snprintf(v->scan_error, sizeof(v->scan_error), "%s", err.msg);
        ledger_sync(v); /* the last scan's, and the creates now */
        return;
    }
    v->scan_error[0] = '\0';
    node_mdev_scan_done(&v->scan);
    v->scan = s;
    v->scanned = true;
    ledger_sync(v);
}

static bool ours(const struct vgpudev *v, const cJSON *obj)
{
    return !devwrite_foreign(obj, v->o.cfg.env.node_name);
}

/* The parent an object is a slot of ("" when none). */
static const char *parent_of(const cJSON *obj)
{
    const cJSON *spec = json_field(obj, "spec");
    const char *p = json_str(spec, "parentGPUDeviceAddress");
    return p && p[0] ? p : json_str(spec, "address") ? json_str(spec, "address") : "";
}

/* The free slot of `parent` among the cached objects (the first by index), or NULL. */
static const char *free_slot_of(const struct vgpudev *v, const char *parent)
{
    struct kube_informer *inf = runner_informer(v->o.runner);
    const char *best = NULL, *key;
    const cJSON *obj;
    size_t pos = 0;
    while (kube_informer_next(inf, &pos, &key, &obj))
        if (ours(v, obj) && mdevplan_is_slot(obj) && strcmp(parent_of(obj), parent) == 0 &&
            (!best || mdevplan_slot_before(key, best)))
            best = key;
    return best;
}

static bool named(const struct vgpudev *v, const char *uuid)
{
    return mdevledger_object_of(runner_informer(v->o.runner), uuid) != NULL;
}

/* The ledger's LEDGER_MDEV holdings again (mdev/mdevledger.h). */
static void ledger_sync(struct vgpudev *v)
{
    mdevledger_sync(v->held, &v->scan, runner_informer(v->o.runner),
                    runner_has_synced(v->o.runner));
}

static void want_put(struct map *want, const char *name, const char *parent, const char *type,
                     const char *uuid)
{
    struct want *w = calloc(1, sizeof(*w));
    if (!w)
        return;
    (void)snprintf(w->parent, sizeof(w->parent), "%s", parent);
    (void)snprintf(w->type, sizeof(w->type), "%s", type);
    (void)snprintf(w->uuid, sizeof(w->uuid), "%s", uuid);
    if (map_put(want, name, w) < 0)
        free(w);
}

/* The free slot to create for `p`, named with the smallest index no object has. */
static void want_slot(struct vgpudev *v, struct map *want, const struct node_mdev_parent *p)
{
    char name[KUBE_NAME_MAX + 1];
    struct kube_informer *inf = runner_informer(v->o.runner);
    for (unsigned k = 0; k < 4096; k++) {
        if (mdevobj_slot_name(v->o.cfg.env.node_name, p->name, k, name, sizeof(name)) < 0)
            return;
        if (!kube_informer_get(inf, name)) {
            want_put(want, name, p->name, "", "");
            return;
        }
    }
}

static void want_sync(struct vgpudev *v)
{
    if (!v->scanned || !runner_has_synced(v->o.runner))
        return;
    struct map *want = map_new(free);
    for (size_t i = 0; want && i < v->scan.n_parents; i++) {
        const struct node_mdev_parent *p = &v->scan.parents[i];
        if (mdevplan_has_capacity(p) && !free_slot_of(v, p->name))
            want_slot(v, want, p);
    }
    for (size_t i = 0; want && i < v->scan.n_instances; i++) {
        const struct node_mdev_instance *in = &v->scan.instances[i];
        char name[KUBE_NAME_MAX + 1];
        if (!named(v, in->uuid) &&
            mdevobj_adopted_name(v->o.cfg.env.node_name, in->uuid, name, sizeof(name)) == 0)
            want_put(want, name, in->parent, in->type, in->uuid);
    }
    if (want)
        devobjs_take_want(&v->o, want);
}

/* --- the plan --------------------------------------------------------------------------------- */

/* Node work for one key. */
struct job {
    struct worker_job wj;
    struct runner_job *rj;
    struct vgpudev *v;
    bool create;
    char name[KUBE_NAME_MAX + 1], uid[64];
    char uuid[NODE_MDEV_UUID_SIZE], type[NODE_MDEV_NAME_SIZE], parent[NODE_MDEV_NAME_SIZE];
    int group;
    long long generation;
    const char *dev_root, *proc_root;
    /* the outcome */
    int r;
    const char *reason;
    struct err err;
};

struct plan {
    struct devwrite *write; /* API writes, or NULL */
    struct job *job;        /* node work, or NULL */
    double wait;            /* > 0: nothing to do until then */
};

static void plan_free(void *p)
{
    struct plan *pl = p;
    if (!pl)
        return;
    if (pl->write) {
        devwrite_done(pl->write);
        free(pl->write);
    }
    free(pl->job);
    free(pl);
}

/* {"metadata":{"resourceVersion":rv,"finalizers":[...]}} with ours added or removed. */
static char *finalizer_patch(const cJSON *obj, bool add)
{
    const cJSON *meta = json_field(obj, "metadata"), *f;
    cJSON *inner = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(inner, "finalizers");
    cJSON_AddStringToObject(inner, "resourceVersion", kube_meta_str(obj, "resourceVersion"));
    cJSON_ArrayForEach(f, json_field(meta, "finalizers"))
    {
        if (cJSON_IsString(f) && strcmp(f->valuestring, MDEVOBJ_FINALIZER) != 0)
            cJSON_AddItemToArray(list, cJSON_CreateString(f->valuestring));
    }
    if (add)
        cJSON_AddItemToArray(list, cJSON_CreateString(MDEVOBJ_FINALIZER));
    return devwrite_wrap("metadata", inner);
}

static char *status_patch(const struct vgpudev *v, const struct mdevplan *mp, const cJSON *obj)
{
    char now[40];
    timefmt_now(now, sizeof(now));
    cJSON *st = mdevplan_status(mp, obj, &v->scan, now);
    cJSON *diff = devwrite_status_diff(st, json_field(obj, "status"), mdevplan_managed,
                                       mdevplan_n_managed);
    cJSON_Delete(st);
    return devwrite_wrap("status", diff);
}

/* Logs a refusal once per object and message. */
static void say_refusal(struct vgpudev *v, const char *key, const struct mdevplan *mp)
{
    const char *last = map_get(v->said, key);
    if (mp->ready || (last && strcmp(last, mp->message) == 0))
        return;
    char *copy = strdup(mp->message);
    if (copy && map_put(v->said, key, copy) < 0)
        free(copy);
    log_warning("Mediated device not as asked", KV_STR("vgpudevice", key),
                KV_STR("reason", mp->reason), KV_STR("message", mp->message));
}

static struct job *job_of(struct vgpudev *v, const char *key, const struct mdevplan *mp,
                          const cJSON *obj)
{
    struct job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->v = v;
    j->create = mp->step == MDEVPLAN_CREATE;
    (void)snprintf(j->name, sizeof(j->name), "%s", key);
    const char *uid = kube_meta_str(obj, "uid");
    (void)snprintf(j->uid, sizeof(j->uid), "%s", uid ? uid : "");
    (void)snprintf(j->uuid, sizeof(j->uuid), "%s", mp->uuid);
    (void)snprintf(j->type, sizeof(j->type), "%s", mp->type);
    (void)snprintf(j->parent, sizeof(j->parent), "%s",
                   mp->instance ? mp->instance->parent : mp->parent);
    j->group = mp->instance ? mp->instance->iommu_group : -1;
    if (mp->instance)
        (void)snprintf(j->type, sizeof(j->type), "%s", mp->instance->type);
    const cJSON *gen = json_field(json_field(obj, "metadata"), "generation");
    j->generation = cJSON_IsNumber(gen) ? (long long)gen->valuedouble : 0;
    j->dev_root = v->o.cfg.env.dev_root;
    j->proc_root = v->o.cfg.env.proc_root;
    return j;
}

/* Who holds the parent whole: its PCIDeviceClaim or DRA claim (binding/ledger.h). */
static const char *claimed(const struct vgpudev *v, const cJSON *obj, char *who, size_t size)
{
    const char *parent = parent_of(obj);
    char name[600];
    if (!kube_names_is_pci_address(parent))
        return NULL;
    if (ledger_held(v->ledger, parent, LEDGER_PCI_CLAIM, NULL, name, sizeof(name)))
        (void)snprintf(who, size, "PCIDeviceClaim %s", name);
    else if (ledger_held(v->ledger, parent, LEDGER_DRA, NULL, name, sizeof(name)))
        (void)snprintf(who, size, "ResourceClaim %s", name);
    else
        return NULL;
    return who;
}

static int plan_object(struct vgpudev *v, const char *key, const cJSON *obj, struct plan *plan)
{
    char fresh[NODE_MDEV_UUID_SIZE] = "", who[700];
    if (node_mdev_uuid_new(fresh) < 0)
        fresh[0] = '\0';
    const struct memory *m = map_get(v->memory, key);
    struct mdevplan_memory mem = {0};
    if (m)
        mem = (struct mdevplan_memory){.generation = m->generation,
                                       .reason = m->reason,
                                       .message = m->message,
                                       .at = m->at};
    const char *slot = free_slot_of(v, parent_of(obj));
    const struct node_mdev_parent *par = mdevplan_parent(&v->scan, parent_of(obj));
    struct mdevplan_facts f = {.obj = obj,
                               .scan = &v->scan,
                               .free_slot =
                                       slot && strcmp(slot, key) == 0 && mdevplan_has_capacity(par),
                               .parent_claimed = claimed(v, obj, who, sizeof(who)),
                               .memory = m ? &mem : NULL,
                               .new_uuid = fresh,
                               .now = ev_now(v->o.cfg.env.loop)};
    struct mdevplan mp;
    mdevplan_decide(&f, &mp);
    switch (mp.step) {
    case MDEVPLAN_NONE:
        return 0;
    case MDEVPLAN_WAIT:
        plan->wait = mp.wait > 0.1 ? mp.wait : 0.1;
        return 0;
    case MDEVPLAN_STATUS: {
        say_refusal(v, key, &mp);
        char *patch = status_patch(v, &mp, obj);
        if (!patch)
            return 0;
        plan->write = devobjs_write(&v->o, NULL, patch, NULL, false, NULL);
        break;
    }
    case MDEVPLAN_WRITE_UUID: {
        cJSON *st = cJSON_CreateObject();
        cJSON_AddStringToObject(st, "uuid", mp.uuid);
        plan->write = devobjs_write(&v->o, NULL, devwrite_wrap("status", st), NULL, false, NULL);
        break;
    }
    case MDEVPLAN_ADD_FINALIZER:
    case MDEVPLAN_REMOVE_FINALIZER:
        plan->write =
                devobjs_write(&v->o, NULL, NULL,
                              finalizer_patch(obj, mp.step == MDEVPLAN_ADD_FINALIZER), false, NULL);
        break;
    case MDEVPLAN_DELETE:
        plan->write = devobjs_write(&v->o, NULL, NULL, NULL, true, kube_meta_str(obj, "uid"));
        break;
    case MDEVPLAN_CREATE:
    case MDEVPLAN_REMOVE:
        plan->job = job_of(v, key, &mp, obj);
        return plan->job ? 0 : -ENOMEM;
    }
    return plan->write ? 0 : -ENOMEM;
}

/* The object `w` makes: a disabled free slot, or an adopted instance (enabled, its type and
 * UUID), with its status. */
static struct devwrite *plan_create(struct vgpudev *v, const char *key, const struct want *w)
{
    const char *node = v->o.cfg.env.node_name;
    cJSON *o = devwrite_new_object("VGPUDevice", key, node, nodeuid_get(v->o.cfg.node));
    char label[NODE_MDEV_NAME_SIZE * 2];
    cJSON *labels = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(o, "metadata"), "labels");
    if (labels && mdevobj_parent_label(w->parent, label, sizeof(label)) == 0)
        cJSON_AddStringToObject(labels, MDEVOBJ_PARENT_LABEL, label);
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(o, "spec");
    cJSON_AddStringToObject(spec, "address", w->parent);
    cJSON_AddStringToObject(spec, "parentGPUDeviceAddress", w->parent);
    cJSON_AddStringToObject(spec, "nodeName", node);
    cJSON_AddBoolToObject(spec, "enabled", w->uuid[0] != '\0');
    struct mdevplan mp = {.ready = true, .reason = MDEVOBJ_AVAILABLE};
    if (w->uuid[0]) {
        cJSON_AddStringToObject(spec, "vGPUTypeName", w->type);
        cJSON_AddStringToObject(spec, "uuid", w->uuid);
        mp.reason = MDEVOBJ_CREATED;
        mp.instance = mdevplan_instance(&v->scan, w->uuid);
        (void)snprintf(mp.uuid, sizeof(mp.uuid), "%s", w->uuid);
        (void)snprintf(mp.message, sizeof(mp.message),
                       "instance %s of type %s on parent %s exists (found on the node: adopted)",
                       w->uuid, w->type, w->parent);
    } else {
        (void)snprintf(mp.message, sizeof(mp.message),
                       "a free slot: set spec.vGPUTypeName to one of status.availableTypes and "
                       "spec.enabled=true to create an instance");
    }
    char now[40];
    timefmt_now(now, sizeof(now));
    cJSON *st = mdevplan_status(&mp, NULL, &v->scan, now);
    char *patch = devwrite_wrap(
            "status", devwrite_status_diff(st, NULL, mdevplan_managed, mdevplan_n_managed));
    cJSON_Delete(st);
    return devobjs_write(&v->o, o, patch, NULL, false, NULL);
}

static int plan_key(void *ctx, const char *key, const cJSON *obj, void **ret_plan)
{
    struct vgpudev *v = ctx;
    *ret_plan = NULL;
    if (obj && !ours(v, obj))
        return 0;
    const struct want *w = obj ? NULL : map_get(v->o.want, key);
    if (!obj && !w)
        return 0;
    if (!obj && !w->uuid[0] && free_slot_of(v, w->parent))
        return 0; /* a slot was published meanwhile */
    struct plan *plan = calloc(1, sizeof(*plan));
    if (!plan)
        return -ENOMEM;
    int r = 0;
    if (!obj)
        r = (plan->write = plan_create(v, key, w)) ? 0 : -ENOMEM;
    else
        r = plan_object(v, key, obj, plan);
    if (r < 0 || (!plan->write && !plan->job && plan->wait <= 0)) {
        plan_free(plan);
        return r;
    }
    *ret_plan = plan;
    return 0;
}

/* --- the node work ---------------------------------------------------------------------------- */

static void job_run(struct worker_job *wj)
{
    struct job *j = (struct job *)wj;
    int fd = node_sysfs_open_root(j->v->o.cfg.env.sysfs_root);
    if (fd < 0) {
        j->r = err_set(&j->err, fd, "cannot open the sysfs root: %s", strerror(-fd));
        j->reason = j->create ? MDEVOBJ_CREATE_FAILED : MDEVOBJ_REMOVE_FAILED;
        return;
    }
    if (j->create) {
        j->r = node_mdev_create(fd, j->parent, j->type, j->uuid, &j->err);
        j->reason = j->r < 0 ? MDEVOBJ_CREATE_FAILED : NULL;
    } else if (j->group >= 0 && node_vfio_group_busy(j->dev_root, j->group) > 0) {
        char who[256] = "";
        if (node_vfio_group_holder(j->dev_root, j->proc_root, j->group, who, sizeof(who)) <= 0)
            who[0] = '\0';
        j->r = err_set(&j->err, -EBUSY,
                       "instance %s (/dev/vfio/%d) is held by %s: it is removed when that "
                       "process lets go (stop the VM that uses it)",
                       j->uuid, j->group, who[0] ? who : "a process (which one cannot be read)");
        j->reason = MDEVOBJ_IN_USE;
    } else {
        j->r = node_mdev_remove(fd, j->uuid, &j->err);
        j->reason = j->r < 0 ? MDEVOBJ_REMOVE_FAILED : NULL;
    }
    close(fd);
}

static void remember(struct vgpudev *v, const struct job *j)
{
    struct memory *m = calloc(1, sizeof(*m));
    if (!m)
        return;
    m->generation = j->generation;
    m->at = ev_now(v->o.cfg.env.loop);
    (void)snprintf(m->reason, sizeof(m->reason), "%s", j->reason ? j->reason : MDEVPLAN_WRITTEN);
    (void)snprintf(m->message, sizeof(m->message), "%s", j->err.msg);
    if (map_put(v->memory, j->name, m) < 0)
        free(m);
}

/* The node work's outcome as an Event on the VGPUDevice (a refusal because the instance is held
 * is the Ready condition's, said once there). */
static void emit(struct job *j)
{
    struct kube_event_ref ref = {.api_version = "devices.harvesterhci.io/v1beta1",
                                 .kind = "VGPUDevice",
                                 .name = j->name,
                                 .uid = j->uid[0] ? j->uid : NULL};
    char note[1200];
    if (j->reason)
        (void)snprintf(note, sizeof(note), "%s", j->err.msg);
    else
        (void)snprintf(note, sizeof(note), "mediated device %s of type %s %s parent %s", j->uuid,
                       j->type, j->create ? "created on" : "removed from", j->parent);
    const char *reason = j->create ? (j->reason ? "CreateFailed" : "Created")
                                   : (j->reason ? "RemoveFailed" : "Removed");
    (void)kube_recorder_emit(j->v->events, &ref, j->reason != NULL, reason, reason, note);
}

static void job_done(struct worker_job *wj, bool cancelled)
{
    struct job *j = (struct job *)wj;
    struct vgpudev *v = j->v;
    if (cancelled) {
        runner_job_done(j->rj, RUNNER_RETRY, 0);
        if (j->create)
            mdevledger_created(v->held, j->name);
        free(j);
        return;
    }
    metrics_inc(v->node_writes);
    remember(v, j);
    if (j->reason && strcmp(j->reason, MDEVOBJ_IN_USE) != 0) {
        metrics_inc(v->node_failures);
        log_warning(j->create ? "Cannot create mediated device" : "Cannot remove mediated device",
                    KV_STR("vgpudevice", j->name), KV_STR("uuid", j->uuid),
                    KV_STR("message", j->err.msg));
        emit(j);
    } else if (!j->reason) {
        log_info(j->create ? "Created mediated device" : "Removed mediated device",
                 KV_STR("vgpudevice", j->name), KV_STR("uuid", j->uuid), KV_STR("type", j->type),
                 KV_STR("parent", j->parent));
        emit(j);
    }
    runner_job_done(j->rj, RUNNER_DONE, 0);
    if (j->create)
        mdevledger_created(v->held, j->name);
    free(j);
    rescan(v); /* and the ledger: the instance is in the scan now, or the create failed */
    want_sync(v);
}

static void act(struct runner_job *job, void *p, void *ctx)
{
    struct vgpudev *v = ctx;
    struct plan *plan = p;
    if (plan->write) {
        devwrite_run(plan->write, job);
        return;
    }
    if (!plan->job) {
        runner_job_done(job, RUNNER_REQUEUE_AFTER, plan->wait);
        return;
    }
    struct job *j = plan->job;
    plan->job = NULL; /* the job frees itself after its done */
    j->rj = job;
    j->wj.run = job_run;
    j->wj.done = job_done;
    if (j->create) { /* its parent is held from now: a claim of it waits for the create */
        mdevledger_creating(v->held, j->name, j->parent, j->uuid);
        ledger_sync(v);
    }
    if (j->create)
        log_info("Creating mediated device", KV_STR("vgpudevice", j->name), KV_STR("uuid", j->uuid),
                 KV_STR("parent", j->parent));
    else /* (a held instance is looked at again every few seconds: "Removed" is said at info) */
        log_v(2, "Removing mediated device unless it is held", KV_STR("vgpudevice", j->name),
              KV_STR("uuid", j->uuid), KV_STR("parent", j->parent));
    worker_submit(v->worker, &j->wj);
}

static void on_event(void *ctx, const char *key, const cJSON *obj, enum runner_event ev)
{
    struct vgpudev *v = ctx;
    devobjs_on_event(ctx, key, obj, ev);
    if (ev == RUNNER_EVENT_DELETE) {
        map_remove(v->memory, key);
        map_remove(v->said, key);
    }
    want_sync(v);
    ledger_sync(v); /* the objects a claim's message names */
}

static bool can_start(void *ctx)
{
    struct vgpudev *v = ctx;
    if (v->scanned && !v->o.want && runner_has_synced(v->o.runner))
        want_sync(v);
    return v->scanned && devobjs_can_start(ctx);
}

static const struct devobjs_kind kind = {.name = "vgpudevice",
                                         .kind = "VGPUDevice",
                                         .cache = &kind_vgpudevices,
                                         .written = "Mediated devices written",
                                         .gone = "Deleting an extra free VGPUDevice slot"};

static const struct runner_ops ops = {
        .plan = plan_key,
        .act = act,
        .plan_free = plan_free,
        .on_event = on_event,
        .can_start = can_start,
        .on_converged = devobjs_on_converged,
        .kind = "VGPUDevice",
        .waiting = "the node's mediated devices are not scanned yet",
        .unconverged = "the first VGPUDevices are not written yet",
        .absent = "VGPUDevice CRD not installed; mediated devices not published until it is",
};

/* --- life ------------------------------------------------------------------------------------- */

static void vgpudev_free(void *self)
{
    struct vgpudev *v = self;
    if (!v)
        return;
    map_free(v->memory);
    map_free(v->said);
    if (v->events)
        kube_recorder_flush(v->events);
    v->events = kube_recorder_free(v->events);
    mdevledger_free(v->held);
    node_mdev_scan_done(&v->scan);
    if (v->sysfs_fd >= 0)
        close(v->sysfs_fd);
    devobjs_free(v);
}

static void *make(const struct part_env *env)
{
    struct devobjs_config dc = devobjs_config_of(env);
    struct vgpudev *v = devobjs_new(sizeof(*v), &dc, &kind, &ops);
    if (!v)
        return NULL;
    v->worker = manager_worker(env->mgr);
    struct ledger *l = manager_part(env->mgr, &ledger_part);
    v->ledger = l;
    v->held = l ? mdevledger_new(l, env->node_name) : NULL;
    v->memory = map_new(free);
    v->said = map_new(free);
    v->sysfs_fd = node_sysfs_open_root(env->sysfs_root);
    char instance[300];
    (void)snprintf(instance, sizeof(instance), "hostdevd-agent-%s", env->node_name);
    struct kube_recorder_config rc = {.controller = "hostdevd.io/agent", .instance = instance};
    v->events = kube_recorder_new(env->loop, env->http, &rc);
    v->node_writes = metrics_one(env->metrics, METRICS_COUNTER, "hostdevd_mdev_node_writes_total",
                                 "Mediated devices created and removed (and removals refused "
                                 "because a process holds the device).");
    v->node_failures =
            metrics_one(env->metrics, METRICS_COUNTER, "hostdevd_mdev_node_write_failures_total",
                        "Mediated device creates and removes the kernel refused.");
    if (!v->worker || !v->held || !v->memory || !v->said || !v->events || v->sysfs_fd < 0) {
        log_error("Cannot make the VGPUDevice reconciler", KV_STR("sysfs", env->sysfs_root));
        vgpudev_free(v);
        return NULL;
    }
    return v;
}

static int start(void *self)
{
    struct vgpudev *v = self;
    rescan(v);
    return devobjs_start(v);
}

/* A PCI scan (each resync, each PCI device event), or the kernel's word that mdevs changed (a
 * parent registered or unregistered, an instance came or went): the mdevs again. */
static void on_scan(void *self, const struct watch_event *ev)
{
    struct vgpudev *v = self;
    (void)ev;
    rescan(v);
    want_sync(v);
    if (v->o.want)
        devobjs_enqueue_all(&v->o);
}

/* A claim changed: a parent may be claimed whole, or free again. */
static void on_claim(void *self, const struct watch_event *ev)
{
    struct vgpudev *v = self;
    (void)ev;
    if (v->o.want)
        devobjs_enqueue_all(&v->o);
}

static const struct watch watches[] = {
        {.topic = &pcidevices_wanted, .map = on_scan},
        {.topic = &inventory_mdevs_changed, .map = on_scan},
        {.kind = &kind_pcideviceclaims, .map = on_claim},
        {0},
};

const struct part_ops vgpudev_part = {.name = "vgpudevices",
                                      .make = make,
                                      .watches = watches,
                                      .runner = devobjs_runner,
                                      .start = start,
                                      .free = vgpudev_free};
