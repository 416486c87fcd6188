/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/claims/pciclaim.c - the agent's PCIDeviceClaim reconciler (see pciclaim.h): pure
 * planning and decisions, then the reconciler on the runner. One reconcile of a claim is one
 * runner job: a finalizer patch, or one worker job (controllers/binding/pcibind.c: sysfs reads,
 * safety checks, module loading, bind or restore) followed by at most one status or
 * finalizer write. A write that only prepares the bind (the finalizer added, the original
 * driver recorded) goes on in the same job from the object the server returned, which is
 * newer than the cache. A new claim's first phase runs the checks (which only observe) first,
 * then writes its finalizer and the record of the driver at once: one job of three writes
 * (finalizer and record in one round trip, then Bound), with no watch round trip between them.
 * The last write lands in the cache through the informer, which queues the claim again; the
 * runner's write expectations keep a stale cache from causing a second write.
 */
#include "controllers/claims/pciclaim.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/log.h"
#include "base/map.h"
#include "base/metrics.h"
#include "base/timefmt.h"
#include "controllers/binding/ledger.h"
#include "controllers/binding/pcibind.h"
#include "controllers/devices/pcidevice.h"
#include "controllers/devices/usbdevice.h"
#include "controllers/health/health.h"
#include "controllers/health/healthrelease.h"
#include "controllers/objects/claimstatus.h"
#include "controllers/objects/kinds.h"
#include "controllers/objects/pciobj.h"
#include "controllers/objects/usbobj.h"
#include "controllers/runtime/part.h"
#include "controllers/runtime/closewatch.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/runner.h"
#include "controllers/runtime/worker.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "kube/names.h"
#include "kube/status.h"
#include "node/sysfs.h"
#include "node/vfio.h"

static void pciclaim_free(void *userdata);

#define MAX_IN_FLIGHT 2

/* --- pure planning ---------------------------------------------------------------------------- */

static bool status_matches(const cJSON *claim, const struct pciclaim_status *w)
{
    const cJSON *st = json_field(claim, "status");
    const char *driver = NULL;
    if (w->driver && (!pciobj_driver_recorded(claim, &driver) || strcmp(driver, w->driver)))
        return false;
    if (!cJSON_IsBool(json_field(st, "passthroughEnabled")) ||
        cJSON_IsTrue(json_field(st, "passthroughEnabled")) != w->passthrough)
        return false;
    return claimstatus_ready_is(claim, w->ready, w->reason, w->message);
}

char *pciclaim_status_patch(const cJSON *claim, const struct pciclaim_status *want, const char *now)
{
    if (status_matches(claim, want))
        return NULL;
    cJSON *patch = cJSON_CreateObject();
    cJSON *st = cJSON_AddObjectToObject(patch, "status");
    if (want->driver)
        cJSON_AddStringToObject(st, "kernelDriverToUnbind", want->driver);
    cJSON_AddBoolToObject(st, "passthroughEnabled", want->passthrough);
    cJSON *c = claimstatus_ready_condition(claim, want->ready, want->reason, want->message, now);
    cJSON *list = cJSON_AddArrayToObject(st, "conditions");
    cJSON_AddItemToArray(list, c);
    char *s = cJSON_PrintUnformatted(patch);
    cJSON_Delete(patch);
    return s;
}

char *pciclaim_finalizer_patch(const cJSON *claim, bool add)
{
    return claimstatus_finalizer_patch(claim, PCIOBJ_FINALIZER, add);
}

enum pciclaim_step pciclaim_next_step(const cJSON *claim, const char *key, const char *node)
{
    char want[KUBE_NAME_MAX + 1];
    const cJSON *spec = json_field(claim, "spec");
    const char *n = json_str(spec, "nodeName"), *a = json_str(spec, "address");
    bool deleting = kube_meta_str(claim, "deletionTimestamp") != NULL;
    if (!claim || !n || strcmp(n, node) != 0)
        return PCICLAIM_NOTHING; /* another node's (the field selector keeps them away) */
    if (!a || kube_names_pcidevice(n, a, want, sizeof(want)) < 0 || strcmp(want, key) != 0)
        return deleting ? PCICLAIM_NOTHING : PCICLAIM_INVALID;
    if (claimstatus_finalizer_index(claim, PCIOBJ_FINALIZER) < 0)
        return deleting ? PCICLAIM_NOTHING : PCICLAIM_ADD_FINALIZER;
    return PCICLAIM_NODE_WORK;
}

static void decide_status(const cJSON *claim, struct pciclaim_decision *d, bool warning,
                          const char *log, const char *result)
{
    d->write_status = !status_matches(claim, &d->status);
    d->warning = warning;
    d->result = result;
    if (d->write_status) { /* say it once, when it changes */
        d->event_reason = d->status.reason;
        d->log = log;
    }
}

static void decide_bound(const cJSON *claim, const struct bindplan_outcome *o,
                         struct pciclaim_decision *d)
{
    (void)snprintf(d->message, sizeof(d->message), "bound to vfio-pci; VMs get /dev/vfio/%d",
                   o->group);
    d->status = (struct pciclaim_status){
            .passthrough = true, .ready = true, .reason = "Bound", .message = d->message};
    decide_status(claim, d, false, "Bound device to vfio-pci", NULL);
    if (d->write_status)
        d->result = "bound";
}

static void decide_deleted(const struct bindplan_outcome *o, const char *address,
                           struct pciclaim_decision *d)
{
    d->remove_finalizer = true;
    d->event_reason = o->kind == BINDPLAN_RESTORED ? "Restored" : "Released";
    d->log = o->kind == BINDPLAN_RESTORED ? "Restored device" : "Released claim";
    d->result = o->kind == BINDPLAN_RESTORED ? "restored" : "released";
    if (o->kind == BINDPLAN_RESTORED)
        (void)snprintf(d->message, sizeof(d->message), "device %s restored to driver \"%s\"%s%s",
                       address, o->driver, o->release.checked ? "; " : "", o->release.summary);
    else
        (void)snprintf(d->message, sizeof(d->message),
                       "nothing was changed on device %s: this claim never bound it", address);
}

void pciclaim_decide(const cJSON *claim, const struct bindplan_outcome *o,
                     struct pciclaim_decision *ret)
{
    struct pciclaim_decision *d = ret;
    const char *address = pciobj_address(claim);
    *d = (struct pciclaim_decision){0};
    d->status = (struct pciclaim_status){.reason = o->reason, .message = o->message};
    switch (o->kind) {
    case BINDPLAN_REFUSED:
        if (o->reason && strcmp(o->reason, PCIOBJ_REASON_REMOVED) == 0) {
            /* still passthroughEnabled: what used the device may hold it (pciobj_bound) */
            d->status.passthrough = true;
            decide_status(claim, d, true, "Claimed PCI device is gone", "refused");
            break;
        }
        decide_status(claim, d, true, "Refused PCIDeviceClaim", "refused");
        break;
    case BINDPLAN_RECORD:
        (void)snprintf(d->message, sizeof(d->message),
                       "recorded the original driver \"%s\"; binding to vfio-pci", o->driver);
        d->status = (struct pciclaim_status){
                .driver = o->driver, .reason = "Binding", .message = d->message};
        d->write_status = !status_matches(claim, &d->status);
        d->fault = "record-driver";
        d->proceed = d->write_status;
        break;
    case BINDPLAN_BOUND:
        decide_bound(claim, o, d);
        break;
    case BINDPLAN_FAILED: /* said every time: each attempt is news */
        d->write_status = !status_matches(claim, &d->status);
        d->event_reason = o->reason;
        d->warning = true;
        d->log = "PCIDeviceClaim step failed";
        d->result = "failed";
        d->retry = true;
        break;
    case BINDPLAN_BUSY:
        (void)snprintf(d->message, sizeof(d->message),
                       "%s holds /dev/vfio/%d; the original driver is restored when it lets go "
                       "(stop the VM or detach the device)",
                       o->message[0] ? o->message : "a VM", o->group);
        d->status = (struct pciclaim_status){
                .passthrough = true, .reason = PCIOBJ_REASON_IN_USE, .message = d->message};
        decide_status(claim, d, true, NULL, "busy");
        d->requeue_after = PCICLAIM_BUSY_RETRY;
        break;
    case BINDPLAN_RESTORED:
    case BINDPLAN_RELEASED:
        decide_deleted(o, address ? address : "", d);
        break;
    case BINDPLAN_GO:
        break;
    }
}

bool pciclaim_proceeds(const struct pciclaim_decision *d, const cJSON *written, const char *key,
                       const char *node, int proceeded)
{
    return d->proceed && written && proceeded < PCICLAIM_MAX_PROCEED &&
           pciclaim_next_step(written, key, node) == PCICLAIM_NODE_WORK;
}

static bool enabled(const cJSON *claim)
{
    return cJSON_IsTrue(json_field(json_field(claim, "status"), "passthroughEnabled"));
}

/* The claim holds its device (passthroughEnabled) and is not being deleted: a device that
 * vanishes under it is held as removed, not released. */
static bool holds_live(const cJSON *claim)
{
    return enabled(claim) && !kube_meta_str(claim, "deletionTimestamp");
}

bool pciclaim_refuse_unhealthy(const cJSON *claim, const struct health_state *s, const char *key,
                               struct bindplan_outcome *ret)
{
    const char *a = pciobj_address(claim);
    if (!a || s->healthy || kube_meta_str(claim, "deletionTimestamp") || enabled(claim))
        return false; /* a claim that has its device already keeps it, and its release works */
    *ret = (struct bindplan_outcome){.kind = BINDPLAN_REFUSED, .reason = HEALTH_REFUSED};
    health_refusal(s, a, key, ret->message, sizeof(ret->message));
    return true;
}

bool pciclaim_hold_removed(const cJSON *claim, const struct health_state *s,
                           struct bindplan_outcome *ret)
{
    const char *a = pciobj_address(claim);
    if (!a || s->healthy || strcmp(s->reason, HEALTH_REMOVED) != 0 || !holds_live(claim))
        return false;
    *ret = (struct bindplan_outcome){.kind = BINDPLAN_REFUSED, .reason = PCIOBJ_REASON_REMOVED};
    /* (cut so that the address fits: the store's message may fill its buffer) */
    (void)snprintf(ret->message, sizeof(ret->message), "device %.20s: %.980s", a, s->message);
    return true;
}

bool pciclaim_lost_device(const cJSON *claim, const struct bindplan_outcome *o,
                          struct bindplan_outcome *ret)
{
    const char *a = pciobj_address(claim);
    /* (a removal takes the device out of its IOMMU group before it leaves the bus) */
    if (!a || o->kind != BINDPLAN_REFUSED || !o->reason ||
        (strcmp(o->reason, "DeviceNotFound") != 0 && strcmp(o->reason, "NoIOMMUGroup") != 0) ||
        !holds_live(claim))
        return false;
    *ret = (struct bindplan_outcome){.kind = BINDPLAN_REFUSED, .reason = PCIOBJ_REASON_REMOVED};
    (void)snprintf(ret->message, sizeof(ret->message),
                   "device %s: it is gone from the PCI bus while this claim holds it: what used it "
                   "has lost it. Put the device back (the claim binds it again), or release it by "
                   "deleting the claim",
                   a);
    return true;
}

bool pciclaim_checks_early(const cJSON *claim)
{
    return !pciobj_driver_recorded(claim, NULL) && !kube_meta_str(claim, "deletionTimestamp");
}

const cJSON *pciclaim_pick_written(const cJSON *a, const cJSON *b, const char *key,
                                   const char *node)
{
    const cJSON *work = NULL;
    const cJSON *both[] = {a, b};
    for (size_t i = 0; i < 2; i++) {
        if (!both[i] || pciclaim_next_step(both[i], key, node) != PCICLAIM_NODE_WORK)
            continue;
        if (pciobj_driver_recorded(both[i], NULL))
            return both[i];
        work = work ? work : both[i];
    }
    return work;
}

/* --- the reconciler --------------------------------------------------------------------------- */

struct pciclaim {
    struct {
        struct part_env env;
    } cfg;
    struct runner *runner;
    struct kube_informer *usb_devices;
    struct kube_recorder *events;
    struct map *first_seen;        /* claim uid -> double *: when this agent first saw it unbound */
    struct map *failures;          /* claim key -> "reason: message" of the failure last logged */
    struct kube_informer *devices; /* this node's PCIDevices */
    struct ledger *ledger;
    struct health *health; /* the node's device health: a release's unhealthy verdict goes there,
                              a new claim of an unhealthy device is refused */
    struct pcibind_env *bind;
    struct worker *worker;
    struct closewatch *closes; /* /dev/vfio/<group> of deleted claims a VM holds */
    bool stopping;
    struct metrics_series *results[7], *bind_seconds, *last_bind;
};

struct cjob {                /* one reconcile: the plan and, for node work, the worker job */
    struct pcibind_job bind; /* first: the worker hands it back */
    struct pciclaim *c;
    struct runner_job *job;
    enum pciclaim_step step;
    cJSON *claim; /* a copy of the cached claim, then of what our writes returned */
    struct pciclaim_decision decision;
    int proceeded; /* times the job went on from a write's response */
    /* a new claim's first phase: the checks, then its finalizer and the record of the driver
     * written at once */
    bool first_phase;  /* the checks of the first phase are running */
    int outstanding;   /* of its writes, how many are not back yet */
    bool failed;       /* a write of the phase failed: retry once all are back */
    cJSON *written[2]; /* what the finalizer's and the record's writes returned */
};

static void cjob_free(void *p)
{
    struct cjob *j = p;
    pcibind_job_done(&j->bind);
    cJSON_Delete(j->claim);
    cJSON_Delete(j->written[0]);
    cJSON_Delete(j->written[1]);
    free(j);
}

static const char *key_of(const struct cjob *j)
{
    return runner_job_key(j->job);
}

static double *first_seen(struct pciclaim *c, const cJSON *claim)
{
    const char *uid = kube_meta_str(claim, "uid");
    double *t = uid ? map_get(c->first_seen, uid) : NULL;
    if (uid && !t && (t = malloc(sizeof(*t)))) {
        *t = ev_time();
        if (map_put(c->first_seen, uid, t) < 0) {
            free(t);
            t = NULL;
        }
    }
    return t;
}

static int plan_claim(void *ctx, const char *key, const cJSON *obj, void **ret_plan)
{
    struct pciclaim *c = ctx;
    enum pciclaim_step step = pciclaim_next_step(obj, key, c->cfg.env.node_name);
    *ret_plan = NULL;
    if (step == PCICLAIM_NOTHING)
        return 0;
    struct cjob *j = calloc(1, sizeof(*j));
    if (!j || !(j->claim = cJSON_Duplicate(obj, true))) {
        free(j);
        return -ENOMEM;
    }
    j->c = c;
    j->step = step;
    j->bind.deleting = kube_meta_str(obj, "deletionTimestamp") != NULL;
    if (!j->bind.deleting)
        (void)first_seen(c, obj); /* the start of the time-to-bind measure */
    *ret_plan = j;
    return 0;
}

static void emit(struct cjob *j, bool warning, const char *reason, const char *note)
{
    struct kube_event_ref ref = {.api_version = "devices.harvesterhci.io/v1beta1",
                                 .kind = "PCIDeviceClaim",
                                 .name = key_of(j),
                                 .uid = kube_meta_str(j->claim, "uid")};
    (void)kube_recorder_emit(j->c->events, &ref, warning, reason, warning ? "Reconcile" : reason,
                             note);
}

/* How the key goes on after the decision (and its write, if any). */
static void finish(struct cjob *j)
{
    const struct pciclaim_decision *d = &j->decision;
    if (d->requeue_after > 0)
        runner_job_done(j->job, RUNNER_REQUEUE_AFTER, d->requeue_after);
    else
        runner_job_done(j->job, d->retry ? RUNNER_RETRY : RUNNER_DONE, 0);
}

static void node_work(struct cjob *j);
static void conclude(struct cjob *j, const struct bindplan_outcome *o);

/* Goes on from the object a write returned when the decision says so (the finalizer is on it,
 * the original driver recorded): the next step starts at once, from an object newer than the
 * cache, instead of after the watch event. Returns whether it did. */
static bool proceed(struct cjob *j, const cJSON *obj)
{
    if (j->c->stopping ||
        !pciclaim_proceeds(&j->decision, obj, key_of(j), j->c->cfg.env.node_name, j->proceeded))
        return false;
    cJSON *copy = cJSON_Duplicate(obj, true);
    if (!copy)
        return false;
    cJSON_Delete(j->claim);
    j->claim = copy;
    j->proceeded++;
    j->step = PCICLAIM_NODE_WORK;
    j->decision = (struct pciclaim_decision){0};
    pcibind_job_done(&j->bind);
    j->bind.deleting = kube_meta_str(copy, "deletionTimestamp") != NULL;
    log_v(3, "Proceeding from the written PCIDeviceClaim", KV_STR("claim", key_of(j)),
          KV_STR("resourceVersion", kube_meta_str(copy, "resourceVersion")));
    node_work(j);
    return true;
}

static void on_written(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct cjob *j = userdata;
    if (err && !(j->bind.deleting && kube_err_is_not_found(err))) {
        log_error("Failed to write PCIDeviceClaim", KV_STR("claim", key_of(j)),
                  KV_INT("http", err->http), KV_STR("reason", err->reason),
                  KV_STR("message", err->message));
        runner_job_done(j->job, RUNNER_RETRY, 0);
        return;
    }
    /* the object the server returned: removing the last finalizer deletes it, and then the
     * deletion ends the wait as well */
    runner_job_wrote(j->job, err ? NULL : obj);
    if (j->decision.fault)
        pcibind_fault_point("claim", j->decision.fault);
    if (!err && proceed(j, obj))
        return;
    finish(j);
}

/* Starts a status or finalizer write. Returns 1 when one is in flight, 0 for none, -errno. */
static int write_claim(struct cjob *j, bool add_finalizer, kube_client_cb done)
{
    const struct pciclaim_decision *d = &j->decision;
    char *patch = NULL;
    bool status = false;
    if (add_finalizer || d->remove_finalizer) {
        patch = pciclaim_finalizer_patch(j->claim, add_finalizer);
    } else if (d->write_status) {
        char now[40];
        timefmt_now(now, sizeof(now));
        patch = pciclaim_status_patch(j->claim, &d->status, now);
        status = true;
    }
    if (!patch)
        return 0;
    log_v(2, "Patching PCIDeviceClaim", KV_STR("claim", key_of(j)), KV_STR("patch", patch));
    int r = kube_client_patch(j->c->cfg.env.http, &kube_res_pcideviceclaims, NULL, key_of(j),
                              status ? KUBE_PATCH_MERGE : KUBE_PATCH_JSON, patch, status, done, j);
    free(patch);
    return r < 0 ? r : 1;
}

static const char *const results[] = {"bound",  "restored", "released", "refused",
                                      "failed", "busy",     NULL};

static void count_result(struct pciclaim *c, const char *result, const cJSON *claim)
{
    for (size_t i = 0; result && results[i]; i++)
        if (strcmp(results[i], result) == 0)
            metrics_inc(c->results[i]);
    const double *t = result && strcmp(result, "bound") == 0 ? first_seen(c, claim) : NULL;
    if (t) {
        metrics_observe(c->bind_seconds, ev_time() - *t);
        metrics_set(c->last_bind, ev_time() - *t);
    }
}

/* Whether a failure of the claim is new: a retry that fails the same way again is logged at
 * verbosity 1 only (the claim's status and Event already say it). */
static bool new_failure(struct cjob *j, bool failed, const char *reason, const char *note)
{
    struct map *m = j->c->failures;
    if (!failed) {
        map_remove(m, key_of(j));
        return false;
    }
    char *text = NULL;
    if (asprintf(&text, "%s: %s", reason ? reason : "", note) < 0)
        return true;
    const char *last = map_get(m, key_of(j));
    if (last && strcmp(last, text) == 0) {
        free(text);
        return false;
    }
    if (map_put(m, key_of(j), text) < 0)
        free(text);
    return true;
}

/* The release's reset and verification (a restore's outcome): a DeviceReset or Warning Event,
 * an unhealthy device to the health store. The Restored Event said the rest. */
static void say_release(struct cjob *j)
{
    const struct bindplan_outcome *o = &j->bind.out;
    struct kube_event_ref ref = {.api_version = "devices.harvesterhci.io/v1beta1",
                                 .kind = "PCIDeviceClaim",
                                 .name = key_of(j),
                                 .uid = kube_meta_str(j->claim, "uid")};
    if (j->bind.deleting && (o->kind == BINDPLAN_RESTORED || o->kind == BINDPLAN_FAILED))
        healthrelease_say(j->c->events, j->c->health, &ref, j->c->cfg.env.node_name,
                          j->bind.address, &o->release, true);
}

static void say(struct cjob *j)
{
    const struct pciclaim_decision *d = &j->decision;
    /* the decision's own sentence, else the outcome's (a refusal, a failure) */
    const char *note = d->message[0] ? d->message : d->status.message ? d->status.message : "";
    bool failed = d->result && strcmp(d->result, "failed") == 0;
    bool fresh = new_failure(j, failed, d->status.reason, note);
    if (d->log && failed && !fresh)
        log_v(1, d->log, KV_STR("claim", key_of(j)), KV_STR("reason", d->status.reason));
    else if (d->log && failed)
        log_error(d->log, KV_STR("claim", key_of(j)), KV_STR("reason", d->status.reason),
                  KV_STR("message", note));
    else if (d->log && d->warning)
        log_warning(d->log, KV_STR("claim", key_of(j)), KV_STR("device", j->bind.address),
                    KV_STR("reason", d->status.reason), KV_STR("message", note));
    else if (d->log && j->bind.out.kind == BINDPLAN_BOUND) /* with the bind's own time */
        log_info(d->log, KV_STR("claim", key_of(j)), KV_STR("device", j->bind.address),
                 KV_INT("bindMicroseconds", j->bind.out.bind_us), KV_STR("message", note));
    else if (d->log)
        log_info(d->log, KV_STR("claim", key_of(j)), KV_STR("device", j->bind.address),
                 KV_STR("message", note));
    if (d->event_reason)
        emit(j, d->warning, d->event_reason, note);
    say_release(j);
    count_result(j->c, d->result, j->claim);
}

/* Acts on the outcome: log, Event, count, at most one write. */
/* A deleted claim whose group a VM holds is looked at again when the VMM closes the group,
 * besides its retry. */
static void watch_group(struct cjob *j, int group)
{
    char path[512];
    (void)snprintf(path, sizeof(path), "%s/vfio/%d", j->c->cfg.env.dev_root, group);
    int r = closewatch_arm(j->c->closes, path, key_of(j));
    if (r < 0)
        log_v(2, "Cannot watch the group for its close", KV_STR("path", path), KV_ERRNO(r));
}

static void on_group_closed(const char *key, void *userdata)
{
    struct pciclaim *c = userdata;
    log_v(2, "IOMMU group closed", KV_STR("claim", key));
    if (!c->stopping)
        runner_enqueue(c->runner, key);
}

static void conclude(struct cjob *j, const struct bindplan_outcome *o)
{
    struct bindplan_outcome gone;
    struct health_state s;
    if (pciclaim_lost_device(j->claim, o, &gone)) { /* the store's word when it has one */
        const char *a = pciobj_address(j->claim);
        if (!health_get(j->c->health, a, &s))
            (void)pciclaim_hold_removed(j->claim, &s, &gone);
        o = &gone;
    }
    if (o->kind == BINDPLAN_GO && o->reason)
        log_info("PCIDeviceClaim's device is being removed; left as it is",
                 KV_STR("claim", key_of(j)), KV_STR("reason", o->reason),
                 KV_STR("message", o->message));
    double ago = closewatch_closed_ago(j->c->closes, key_of(j));
    /* busy with no holder: the kernel still releasing the group after a close, or a VMM whose
     * exit has begun (its /proc/<pid>/fd unreadable, its files not yet closed) when the claim
     * says DeviceInUse already: the same wait, not news; nothing written */
    bool waiting = json_same(json_str(claimstatus_ready(j->claim), "reason"), PCIOBJ_REASON_IN_USE);
    if (o->kind == BINDPLAN_BUSY && !o->message[0] &&
        (closewatch_settling(ago, false) || waiting)) {
        log_v(2, "IOMMU group busy with no holder (being released); looking again",
              KV_STR("claim", key_of(j)), KV_INT("iommuGroup", o->group));
        if (o->group >= 0)
            watch_group(j, o->group);
        j->decision = (struct pciclaim_decision){
                .requeue_after = ago >= 0 ? closewatch_settle_delay(ago) : PCICLAIM_BUSY_RETRY};
        finish(j);
        return;
    }
    pciclaim_decide(j->claim, o, &j->decision);
    if (o->kind == BINDPLAN_BUSY && o->group >= 0)
        watch_group(j, o->group);
    say(j);
    int r = write_claim(j, false, on_written);
    if (r < 0) {
        log_error("Cannot start a request", KV_STR("claim", key_of(j)), KV_ERRNO(r));
        runner_job_done(j->job, RUNNER_RETRY, 0);
    } else if (r == 0) {
        finish(j);
    }
}

/* --- a new claim's first phase ----------------------------------------------------------------
 * The checks (which only observe) run first; with their outcome the finalizer and the record
 * of the original driver (or a refusal) are written at once, in one round trip. The bind
 * starts only when both writes are back: both are on the claim before anything changes, in
 * whichever order they landed (the finalizer's JSON patch tests the list, not the
 * resourceVersion, so the status write cannot fail it). */

/* One of the phase's writes is back; after the last, the bind goes on from the written claim
 * that shows both (pciclaim_pick_written), or the job ends. */
static void phase_done(struct cjob *j)
{
    if (--j->outstanding > 0)
        return;
    if (j->failed || j->c->stopping) {
        runner_job_done(j->job, j->failed ? RUNNER_RETRY : RUNNER_DONE, 0);
        return;
    }
    const cJSON *w =
            pciclaim_pick_written(j->written[0], j->written[1], key_of(j), j->c->cfg.env.node_name);
    if (!proceed(j, w))
        finish(j);
}

static void phase_written(struct cjob *j, const struct kube_err *err, const cJSON *obj, int which,
                          const char *fault)
{
    if (err) {
        log_error("Failed to write PCIDeviceClaim", KV_STR("claim", key_of(j)),
                  KV_INT("http", err->http), KV_STR("reason", err->reason),
                  KV_STR("message", err->message));
        j->failed = true;
    } else {
        runner_job_wrote(j->job, obj);
        if (fault)
            pcibind_fault_point("claim", fault);
        j->written[which] = obj ? cJSON_Duplicate(obj, true) : NULL;
    }
    phase_done(j);
}

static void on_phase_finalizer(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    phase_written(userdata, err, obj, 0, "finalizer");
}

static void on_phase_record(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct cjob *j = userdata;
    phase_written(j, err, obj, 1, j->decision.fault);
}

/* The checks are back: the finalizer, and what they found (the record, or a refusal). */
static void phase_write(struct cjob *j)
{
    int r = write_claim(j, true, on_phase_finalizer);
    if (r < 0) {
        log_error("Cannot start a request", KV_STR("claim", key_of(j)), KV_ERRNO(r));
        runner_job_done(j->job, RUNNER_RETRY, 0);
        return;
    }
    j->outstanding = 1 + r; /* (one more until the record is on its way) */
    pciclaim_decide(j->claim, &j->bind.out, &j->decision);
    say(j);
    r = j->decision.write_status ? write_claim(j, false, on_phase_record) : 0;
    if (r < 0) {
        log_error("Cannot start a request", KV_STR("claim", key_of(j)), KV_ERRNO(r));
        j->failed = true;
    }
    j->outstanding += r > 0;
    phase_done(j);
}

static void on_bind_done(struct worker_job *wj, bool cancelled)
{
    struct cjob *j = (struct cjob *)wj;
    bool first = j->first_phase;
    j->first_phase = false;
    if (cancelled || j->c->stopping) { /* the next start converges from sysfs */
        runner_job_done(j->job, RUNNER_DONE, 0);
        return;
    }
    if (first)
        phase_write(j);
    else
        conclude(j, &j->bind.out);
}

/* Collects the addresses of this node's live claims: members of a group count as claimed. */
static void collect_claimed(struct cjob *j)
{
    const struct kube_informer *inf = runner_informer(j->c->runner);
    size_t pos = 0, n = kube_informer_size(inf);
    const char *key;
    const cJSON *obj;
    j->bind.claimed = calloc(n ? n : 1, sizeof(*j->bind.claimed));
    while (j->bind.claimed && kube_informer_next(inf, &pos, &key, &obj)) {
        const char *a = pciobj_address(obj);
        char *copy = a && !kube_meta_str(obj, "deletionTimestamp") ? strdup(a) : NULL;
        if (copy && j->bind.n_claimed < n)
            j->bind.claimed[j->bind.n_claimed++] = copy;
        else
            free(copy);
    }
}

/* The USBDevices of this node enabled behind the claimed device (a USB host controller). */
static void collect_usb(struct cjob *j)
{
    struct buf b;
    size_t pos = 0;
    const char *key;
    const cJSON *obj;
    buf_init(&b, 2048);
    while (j->c->usb_devices && kube_informer_next(j->c->usb_devices, &pos, &key, &obj)) {
        if (usbobj_enabled_behind(obj, j->bind.address))
            (void)buf_printf(&b, "%s%s", b.len ? ", " : "", key);
    }
    j->bind.usb_enabled = buf_take(&b);
}

/* Submits the node work; `check_only`: observe and check, never bind. */
static void start_node_work(struct cjob *j, bool check_only)
{
    struct pcibind_job *b = &j->bind;
    b->check_only = check_only;
    const char *a = pciobj_address(j->claim), *orig = NULL;
    (void)snprintf(b->address, sizeof(b->address), "%s", a ? a : "");
    b->recorded = pciobj_driver_recorded(j->claim, &orig);
    (void)snprintf(b->original, sizeof(b->original), "%s", orig ? orig : "");
    const cJSON *dev = j->c->devices ? kube_informer_get(j->c->devices, key_of(j)) : NULL;
    const char *ann = pciobj_first_driver(dev);
    (void)snprintf(b->annotation, sizeof(b->annotation), "%s", ann ? ann : "");
    collect_claimed(j);
    collect_usb(j);
    b->env = j->c->bind;
    b->wj.run = pcibind_run;
    b->wj.done = on_bind_done;
    worker_submit(j->c->worker, &b->wj);
}

/* A claim (not deleting) on a device another path holds is refused (binding/ledger.h: a DRA
 * ResourceClaim prepared with it, mediated device instances on it); it binds once that path
 * lets the device go (the ledger says so: every claim is queued then). */
static bool refused_by_ledger(struct cjob *j, struct ledger_refusal *ret)
{
    const char *a = pciobj_address(j->claim);
    return a && !json_field(json_field(j->claim, "metadata"), "deletionTimestamp") &&
           ledger_check(j->c->ledger, a, LEDGER_PCI_CLAIM, key_of(j), ret) < 0;
}

static bool ledger_refuses(struct cjob *j)
{
    struct ledger_refusal why;
    if (!refused_by_ledger(j, &why))
        return false;
    struct bindplan_outcome o = {.kind = BINDPLAN_REFUSED, .reason = why.reason};
    (void)snprintf(o.message, sizeof(o.message), "%s", why.message);
    conclude(j, &o);
    return true;
}

/* A new claim of a device the health store says is unhealthy is refused (DeviceUnhealthy); a
 * bound one whose device is gone says so (DeviceRemoved). Either goes on when the store clears
 * the device (health_changed queues it). */
static bool refused_by_health(struct cjob *j, struct bindplan_outcome *ret)
{
    struct health_state s;
    const char *a = pciobj_address(j->claim);
    return a && !health_get(j->c->health, a, &s) &&
           (pciclaim_refuse_unhealthy(j->claim, &s, key_of(j), ret) ||
            pciclaim_hold_removed(j->claim, &s, ret));
}

static void node_work(struct cjob *j)
{
    struct bindplan_outcome o;
    if (ledger_refuses(j))
        return;
    if (refused_by_health(j, &o))
        conclude(j, &o);
    else
        start_node_work(j, false);
}

static void act(struct runner_job *job, void *plan, void *ctx)
{
    struct cjob *j = plan;
    (void)ctx;
    j->job = job;
    if (j->step == PCICLAIM_INVALID) {
        const char *a = pciobj_address(j->claim);
        struct bindplan_outcome o = {.kind = BINDPLAN_REFUSED, .reason = "InvalidClaim"};
        (void)snprintf(o.message, sizeof(o.message),
                       "spec.address \"%s\" is not a PCI address of the form 0000:3b:00.1, or the "
                       "claim is not named after it (<node>-<address without ':' and '.'>)",
                       a ? a : "");
        conclude(j, &o);
    } else if (j->step == PCICLAIM_ADD_FINALIZER) {
        struct ledger_refusal why;
        struct bindplan_outcome o;
        j->decision.fault = "finalizer";
        j->decision.proceed = true;
        if (pciclaim_checks_early(j->claim) && !refused_by_ledger(j, &why) &&
            !refused_by_health(j, &o)) {
            j->first_phase = true; /* the checks first, then the finalizer with the record */
            start_node_work(j, true);
            return;
        }
        int r = write_claim(j, true, on_written);
        if (r <= 0)
            runner_job_done(job, r < 0 ? RUNNER_RETRY : RUNNER_DONE, 0);
    } else {
        node_work(j);
    }
}

/* The device ledger: a claim holds its device as long as it exists (under its address when the
 * claim is named after it, <node>-<address>, as a DRA claim looks it up). */
static void record(struct pciclaim *c, const char *key, const cJSON *obj, enum runner_event ev)
{
    const char *a = pciobj_address(obj);
    char name[KUBE_NAME_MAX + 1];
    if (!a || kube_names_pcidevice(c->cfg.env.node_name, a, name, sizeof(name)) < 0 ||
        strcmp(name, key) != 0)
        return;
    if (ev == RUNNER_EVENT_DELETE)
        ledger_release(c->ledger, a, LEDGER_PCI_CLAIM, key);
    else
        (void)ledger_hold(c->ledger, a, LEDGER_PCI_CLAIM, key, key);
}

/* A new claim may complete another claim's IOMMU group, a deleted one may open one: look at
 * all of them then. */
static void on_event(void *ctx, const char *key, const cJSON *obj, enum runner_event ev)
{
    struct pciclaim *c = ctx;
    const char *uid = kube_meta_str(obj, "uid");
    (void)key;
    if (ev == RUNNER_EVENT_DELETE && uid)
        map_remove(c->first_seen, uid);
    if (ev != RUNNER_EVENT_UPDATE)
        runner_enqueue_all(c->runner);
    record(c, key, obj, ev);
}

/* Not before the PCIDevices are listed: the health store takes an unhealthy device's state back
 * from them after a restart, and a claim must not bind it in between. */
static bool can_start(void *ctx)
{
    const struct pciclaim *c = ctx;
    return (!c->usb_devices || kube_informer_has_synced(c->usb_devices)) &&
           (!c->devices || kube_informer_has_synced(c->devices));
}

static const struct runner_ops ops = {
        .plan = plan_claim,
        .act = act,
        .plan_free = cjob_free,
        .on_event = on_event,
        .can_start = can_start,
        .kind = "PCIDeviceClaim",
};

/* --- the reconciler's life -------------------------------------------------------------------- */

static void free_double(void *p)
{
    free(p);
}

static void register_metrics(struct pciclaim *c)
{
    struct metrics *m = c->cfg.env.metrics;
    metrics_enum(m, METRICS_COUNTER, "hostdevd_claim_results_total",
                 "PCIDeviceClaim reconciles by result.", "result", results, c->results);
    c->bind_seconds =
            metrics_series(metrics_family(m, METRICS_HISTOGRAM, "hostdevd_claim_bind_seconds",
                                          "From first sight of a claim to its verified bind.", NULL,
                                          metrics_reconcile_buckets, metrics_reconcile_buckets_n));
    c->last_bind = metrics_one(m, METRICS_GAUGE, "hostdevd_claim_last_bind_seconds",
                               "The last claim's time to bind.");
}

static int make_runner(struct pciclaim *c)
{
    struct runner_config rc = {
            .name = "pcideviceclaim",
            .loop = c->cfg.env.loop,
            .http = c->cfg.env.http,
            .max_in_flight = MAX_IN_FLIGHT,
            .metrics = c->cfg.env.metrics,
            .ops = &ops,
            .ctx = c,
    };
    c->runner = manager_runner(c->cfg.env.mgr, &kind_pcideviceclaims, &rc);
    return c->runner ? 0 : -ENOMEM;
}

struct pciclaim *pciclaim_new(const struct part_env *env)
{
    struct pciclaim *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->cfg.env = *env;
    c->devices = manager_cache(env->mgr, &kind_pcidevices);
    c->usb_devices = manager_cache(env->mgr, &kind_usbdevices);
    c->ledger = manager_part(env->mgr, &ledger_part);
    c->health = manager_part(env->mgr, &health_part);
    c->bind = manager_part(env->mgr, &pcibind_env_part);
    c->worker = manager_worker(env->mgr);
    char instance[300];
    (void)snprintf(instance, sizeof(instance), "hostdevd-agent-%s", env->node_name);
    struct kube_recorder_config rc = {.controller = "hostdevd.io/agent", .instance = instance};
    c->events = kube_recorder_new(env->loop, env->http, &rc);
    c->first_seen = map_new(free_double);
    c->failures = map_new(free);
    c->closes = closewatch_new(env->loop, on_group_closed, c);
    if (!c->bind || !c->worker || !c->ledger || !c->events || !c->first_seen || !c->failures ||
        !c->closes || make_runner(c) < 0) {
        pciclaim_free(c);
        return NULL;
    }
    register_metrics(c);
    return c;
}

static int pciclaim_start(void *self)
{
    struct pciclaim *c = self;
    return runner_start(c->runner);
}

static void enqueue_all(void *self, const struct watch_event *ev)
{
    const struct pciclaim *c = self;
    (void)ev;
    runner_enqueue_all(c->runner);
}

/* A DRA claim let devices go, or an mdev parent's last instance went: claims refused because
 * of them may go on. */
static void on_released(void *self, const struct watch_event *ev)
{
    const enum ledger_path *path = ev->data;
    if (*path == LEDGER_DRA || *path == LEDGER_MDEV)
        enqueue_all(self, ev);
}

/* A device's health changed: its claim (named after it) is refused, or goes on. */
static void on_health(void *self, const struct watch_event *ev)
{
    const struct pciclaim *c = self;
    char key[KUBE_NAME_MAX + 1];
    if (ev->data && kube_names_pcidevice(c->cfg.env.node_name, ev->data, key, sizeof(key)) == 0)
        runner_enqueue(c->runner, key);
}

static void *make(const struct part_env *env)
{
    return pciclaim_new(env);
}

/* After a scan every claim again: a driver may have changed under one (a reboot, someone's
 * unbind; a USB controller may have gone to vfio-pci); a USBDevice's change, for the claims of
 * USB controllers. */
static const struct watch watches[] = {
        {.topic = &pcidevices_scanned, .map = enqueue_all},
        {.topic = &usbdevices_scanned, .map = enqueue_all},
        {.kind = &kind_usbdevices, .map = enqueue_all},
        {.topic = &ledger_released, .map = on_released},
        {.topic = &health_changed, .map = on_health},
        {0},
};

static void pciclaim_stop(void *userdata)
{
    struct pciclaim *c = userdata;
    c->stopping = true;
    runner_stop(c->runner);
    kube_recorder_flush(c->events);
}

static int pciclaim_in_flight(void *userdata)
{
    const struct pciclaim *c = userdata;
    return runner_in_flight(c->runner) + (int)kube_recorder_in_flight(c->events);
}

static void pciclaim_free(void *userdata)
{
    struct pciclaim *c = userdata;
    if (!c)
        return;
    c->stopping = true;
    c->closes = closewatch_free(c->closes);
    c->runner = runner_free(c->runner);
    c->events = kube_recorder_free(c->events);
    map_free(c->first_seen);
    map_free(c->failures);
    free(c);
}

static struct runner *part_runner(const void *self)
{
    return ((const struct pciclaim *)self)->runner;
}

const struct part_ops pciclaim_part = {.name = "pcideviceclaims",
                                       .make = make,
                                       .watches = watches,
                                       .runner = part_runner,
                                       .start = pciclaim_start,
                                       .stop = pciclaim_stop,
                                       .in_flight = pciclaim_in_flight,
                                       .free = pciclaim_free};
