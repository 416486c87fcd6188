/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/pciclaim.c - the agent's PCIDeviceClaim reconciler (see pciclaim.h).
 *
 * One reconcile of a claim is one `struct cjob`: an optional finalizer patch, one worker job
 * (sysfs reads, safety checks, module loading, bind or restore) and at most one status or
 * finalizer write. Its result lands in the cache through the informer, which queues the claim
 * again; write expectations (controllers/expect) keep a stale cache from causing a second
 * write.
 */
#include "controllers/pciclaim.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/map.h"
#include "base/timefmt.h"
#include "controllers/expect.h"
#include "controllers/worker.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "kube/names.h"
#include "kube/status.h"
#include "kube/workqueue.h"
#include "node/hostuse.h"
#include "node/kmod.h"
#include "node/sysfs.h"
#include "node/vfio.h"

#define DRIVER_ANNOTATION "harvesterhci.io/pcideviceDriver"
#define BUSY_RETRY        5.0 /* seconds between checks of a group a VM holds */
#define MESSAGE_SIZE      1024

/* --- pure planning ---------------------------------------------------------------------------- */

static const cJSON *field(const cJSON *o, const char *name)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, name) : NULL;
}

static const char *str_field(const cJSON *o, const char *name)
{
    const cJSON *v = field(o, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *ready_condition(const cJSON *status)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, field(status, "conditions"))
    {
        const char *t = str_field(c, "type");
        if (t && strcmp(t, "Ready") == 0)
            return c;
    }
    return NULL;
}

static bool same(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

bool pciclaim_driver_recorded(const cJSON *claim, const char **ret_driver)
{
    const char *d = str_field(field(claim, "status"), "kernelDriverToUnbind");
    if (d && ret_driver)
        *ret_driver = d;
    return d != NULL;
}

static double generation(const cJSON *claim)
{
    const cJSON *g = field(field(claim, "metadata"), "generation");
    return cJSON_IsNumber(g) ? g->valuedouble : 0;
}

static bool status_matches(const cJSON *claim, const struct pciclaim_status *w)
{
    const cJSON *st = field(claim, "status");
    const char *driver = NULL;
    if (w->driver && (!pciclaim_driver_recorded(claim, &driver) || strcmp(driver, w->driver)))
        return false;
    if (!cJSON_IsBool(field(st, "passthroughEnabled")) ||
        cJSON_IsTrue(field(st, "passthroughEnabled")) != w->passthrough)
        return false;
    const cJSON *c = ready_condition(st);
    const cJSON *og = field(c, "observedGeneration");
    return c && same(str_field(c, "status"), w->ready ? "True" : "False") &&
           same(str_field(c, "reason"), w->reason) && same(str_field(c, "message"), w->message) &&
           cJSON_IsNumber(og) && og->valuedouble == generation(claim);
}

char *pciclaim_status_patch(const cJSON *claim, const struct pciclaim_status *want, const char *now)
{
    if (status_matches(claim, want))
        return NULL;
    const cJSON *old = ready_condition(field(claim, "status"));
    const char *since = now;
    if (old && same(str_field(old, "status"), want->ready ? "True" : "False") &&
        str_field(old, "lastTransitionTime"))
        since = str_field(old, "lastTransitionTime");
    cJSON *patch = cJSON_CreateObject();
    cJSON *st = cJSON_AddObjectToObject(patch, "status");
    if (want->driver)
        cJSON_AddStringToObject(st, "kernelDriverToUnbind", want->driver);
    cJSON_AddBoolToObject(st, "passthroughEnabled", want->passthrough);
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "type", "Ready");
    cJSON_AddStringToObject(c, "status", want->ready ? "True" : "False");
    cJSON_AddNumberToObject(c, "observedGeneration", generation(claim));
    cJSON_AddStringToObject(c, "lastTransitionTime", since);
    cJSON_AddStringToObject(c, "reason", want->reason);
    cJSON_AddStringToObject(c, "message", want->message);
    cJSON *list = cJSON_AddArrayToObject(st, "conditions");
    cJSON_AddItemToArray(list, c);
    char *s = cJSON_PrintUnformatted(patch);
    cJSON_Delete(patch);
    return s;
}

static int finalizer_index(const cJSON *claim)
{
    int i = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, field(field(claim, "metadata"), "finalizers"))
    {
        if (cJSON_IsString(f) && strcmp(f->valuestring, PCICLAIM_FINALIZER) == 0)
            return i;
        i++;
    }
    return -1;
}

char *pciclaim_finalizer_patch(const cJSON *claim, bool add)
{
    int i = finalizer_index(claim);
    const cJSON *list = field(field(claim, "metadata"), "finalizers");
    struct buf b;
    buf_init(&b, 4096);
    if (add && i < 0 && cJSON_GetArraySize(list) > 0)
        (void)buf_printf(&b,
                         "[{\"op\":\"add\",\"path\":\"/metadata/finalizers/-\",\"value\":\"%s\"}]",
                         PCICLAIM_FINALIZER);
    else if (add && i < 0) /* no list yet: create it, unless the object changed meanwhile */
        (void)buf_printf(
                &b,
                "[{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"%s\"},"
                "{\"op\":\"add\",\"path\":\"/metadata/finalizers\",\"value\":[\"%s\"]}]",
                kube_meta_str(claim, "resourceVersion") ? kube_meta_str(claim, "resourceVersion")
                                                        : "",
                PCICLAIM_FINALIZER);
    else if (!add && i >= 0)
        (void)buf_printf(&b,
                         "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/%d\",\"value\":\"%s\"},"
                         "{\"op\":\"remove\",\"path\":\"/metadata/finalizers/%d\"}]",
                         i, PCICLAIM_FINALIZER, i);
    else
        return NULL;
    return buf_take(&b);
}

/* --- the controller --------------------------------------------------------------------------- */

struct pciclaim_stats {
    unsigned long reconciles, binds, restores, refusals, failures, busy_waits;
    double last_bind_seconds, bind_seconds_sum;
    unsigned long bind_seconds_count;
};

struct pciclaim {
    struct pciclaim_config cfg;
    struct kube_informer *inf;
    struct wq *wq;
    struct expect *expect;
    struct worker *worker;
    struct kube_recorder *events;
    struct map *first_seen; /* claim uid -> double *: when this agent first saw it unbound */
    int sysfs_fd;
    bool modules_loaded; /* worker thread only */
    bool stopping;
    int in_flight;
    ev_prepare dispatch;
    ev_timer queue_timer;
    struct pciclaim_stats stats;
};

enum outcome {
    OUT_NONE,     /* nothing to write */
    OUT_REFUSED,  /* a safety check failed: reason/message */
    OUT_RECORD,   /* record `driver` as the original driver first */
    OUT_BOUND,    /* bound and verified */
    OUT_FAILED,   /* bind or restore failed: message */
    OUT_BUSY,     /* a VM holds the group: wait */
    OUT_RESTORED, /* restored (or nothing to restore): remove the finalizer */
};

struct cjob {
    struct worker_job wj;
    struct pciclaim *c;
    char *key;
    cJSON *claim; /* a copy of the cached claim */
    bool deleting;
    const char *fault; /* the fault point after our write: "finalizer", "record-driver" */
    /* worker input */
    char address[NODE_PCI_ADDRESS_SIZE];
    char original[64]; /* recorded original driver */
    bool recorded;
    char annotation[64]; /* the PCIDevice's driver at first sight */
    char **claimed;      /* addresses of this node's live claims */
    size_t n_claimed;
    /* worker output */
    enum outcome out;
    const char *reason;
    char message[MESSAGE_SIZE];
    char driver[64];
    int group;
};

static void cjob_free(struct cjob *j)
{
    for (size_t i = 0; i < j->n_claimed; i++)
        free(j->claimed[i]);
    free(j->claimed);
    cJSON_Delete(j->claim);
    free(j->key);
    free(j);
}

/* --- fault points (crash tests) --------------------------------------------------------------- */

static void fault_point(const char *goal, const char *step)
{
    const char *f = getenv("HOSTDEVD_FAULT");
    size_t n = strlen(goal);
    if (f && strncmp(f, goal, n) == 0 && f[n] == ':' && strcmp(f + n + 1, step) == 0) {
        log_warning("Fault point reached; aborting", KV_STR("goal", goal), KV_STR("step", step));
        (void)fflush(stderr);
        abort();
    }
}

static void on_vfio_step(const char *goal, const char *step, void *arg)
{
    (void)arg;
    fault_point(goal, step);
}

/* --- the worker's part (no loop state) -------------------------------------------------------- */

static bool is_claimed(const char *address, void *arg)
{
    const struct cjob *j = arg;
    for (size_t i = 0; i < j->n_claimed; i++)
        if (strcmp(j->claimed[i], address) == 0)
            return true;
    return false;
}

static void refuse(struct cjob *j, const char *reason, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void refuse(struct cjob *j, const char *reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): clang-analyzer 14 false positive
    (void)vsnprintf(j->message, sizeof(j->message), fmt, ap);
    va_end(ap);
    j->out = OUT_REFUSED;
    j->reason = reason;
}

/* Lists the group members that stand in the way, as "0000:01:00.1 (snd_hda_intel, PCIDevice
 * claim name)". Returns how many. */
static int group_blockers(struct cjob *j, int fd, const char *node, struct buf *out)
{
    struct node_vfio_dev *m = NULL;
    size_t n = 0;
    int count = 0, r = node_vfio_group_members(fd, j->group, &m, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++) {
        char name[300] = "";
        if (!node_vfio_member_blocks(&m[i], j->address, is_claimed, j))
            continue;
        (void)kube_names_pcidevice(node, m[i].address, name, sizeof(name));
        (void)buf_printf(out, "%s%s (%s; claim %s)", count ? ", " : "", m[i].address,
                         m[i].driver[0] ? m[i].driver : "no driver", name);
        count++;
    }
    free(m);
    return count;
}

/* The safety checks. Returns true when the device may be bound. */
static bool check_safe(struct cjob *j, int fd, const struct node_vfio_dev *d)
{
    const char *node = j->c->cfg.node_name;
    if (!d->present) {
        refuse(j, "DeviceNotFound", "there is no PCI device %s on node %s", j->address, node);
        return false;
    }
    if (d->iommu_group < 0) {
        refuse(j, "NoIOMMUGroup",
               "device %s has no IOMMU group, so it cannot be passed through safely: turn on the "
               "IOMMU (VT-d or AMD-Vi in the firmware, intel_iommu=on or amd_iommu=on on the "
               "kernel command line) and reboot the node",
               j->address);
        return false;
    }
    if (strcmp(d->driver, NODE_VFIO_DRIVER) != 0) {
        struct node_hostuse use = {0};
        struct err why = {""};
        int r = node_hostuse_collect(j->c->cfg.proc_root, &use);
        if (r == 0)
            r = node_hostuse_check(fd, j->address, &use, NULL, &why);
        node_hostuse_done(&use);
        if (r != 0) {
            refuse(j, "HostCritical",
                   r > 0 ? "device %s is host-critical: %s; passing it through would cut the "
                           "node off. Move that use to another device first"
                         : "cannot tell whether device %s is host-critical (%s); refusing to "
                           "be safe",
                   j->address, r > 0 ? why.msg : strerror(-r));
            return false;
        }
    }
    struct buf b;
    buf_init(&b, 4096);
    int n = group_blockers(j, fd, node, &b);
    if (n > 0)
        refuse(j, "IOMMUGroupIncomplete",
               "IOMMU group %d also holds %s; the whole group goes to one VM, so claim %s too (or "
               "bind %s to vfio-pci)",
               d->iommu_group, buf_str(&b), n == 1 ? "that device" : "those devices",
               n == 1 ? "it" : "them");
    else if (n < 0)
        refuse(j, "SysfsError", "cannot read the members of IOMMU group %d in sysfs: %s",
               d->iommu_group, strerror(-n));
    buf_free(&b);
    return n == 0;
}

static int load_modules(struct cjob *j)
{
    static const char *const mods[] = {"vfio-pci", "vfio_iommu_type1", NULL};
    struct err e = {""};
    char *err = e.msg;
    if (j->c->modules_loaded)
        return 0;
    int r = node_kmod_load(mods, &e);
    char **names = NULL;
    size_t n = 0;
    if (r == 0 && (r = node_sysfs_list(j->c->sysfs_fd, "bus/pci/drivers/vfio-pci", &names, &n)) < 0)
        (void)snprintf(err, sizeof(e.msg),
                       "the vfio-pci driver is not registered (no bus/pci/drivers/vfio-pci in "
                       "sysfs) although its module loaded: %s",
                       strerror(-r));
    node_sysfs_names_free(names);
    if (r < 0) {
        j->out = OUT_FAILED;
        j->reason = "VFIOUnavailable";
        (void)snprintf(j->message, sizeof(j->message), "%s", err);
        return r;
    }
    j->c->modules_loaded = true;
    return 0;
}

static void run_bind(struct cjob *j, int fd)
{
    struct node_vfio_dev d;
    int r = node_vfio_observe(fd, j->address, &d);
    if (r < 0) {
        refuse(j, "SysfsError", "cannot read device %s in sysfs: %s", j->address, strerror(-r));
        return;
    }
    j->group = d.iommu_group;
    if (!check_safe(j, fd, &d))
        return;
    if (!j->recorded) { /* record before touching anything: a crash must know what to restore */
        const char *orig = strcmp(d.driver, NODE_VFIO_DRIVER) != 0        ? d.driver
                           : strcmp(j->annotation, NODE_VFIO_DRIVER) != 0 ? j->annotation
                                                                          : "";
        (void)snprintf(j->driver, sizeof(j->driver), "%s", orig);
        j->out = OUT_RECORD;
        return;
    }
    if (load_modules(j) < 0)
        return;
    struct err e = {""};
    r = node_vfio_converge(fd, j->address, NODE_VFIO_BIND, j->original, on_vfio_step, NULL, &d, &e);
    if (r < 0) {
        (void)snprintf(j->message, sizeof(j->message), "%s", e.msg);
        j->out = OUT_FAILED;
        j->reason = "BindFailed";
        return;
    }
    j->out = OUT_BOUND;
}

static void run_restore(struct cjob *j, int fd)
{
    struct node_vfio_dev d;
    j->out = OUT_RESTORED;
    if (!j->recorded) /* never touched: nothing to restore */
        return;
    int r = node_vfio_observe(fd, j->address, &d);
    if (r < 0) {
        j->out = OUT_FAILED;
        j->reason = "RestoreFailed";
        (void)snprintf(j->message, sizeof(j->message), "cannot read device %s in sysfs: %s",
                       j->address, strerror(-r));
        return;
    }
    j->group = d.iommu_group;
    if (d.present && strcmp(d.driver, NODE_VFIO_DRIVER) == 0 && d.iommu_group >= 0 &&
        node_vfio_group_busy(j->c->cfg.dev_root, d.iommu_group) > 0) {
        j->out = OUT_BUSY;
        return;
    }
    struct err e = {""};
    r = node_vfio_converge(fd, j->address, NODE_VFIO_RESTORE, j->original, on_vfio_step, NULL, &d,
                           &e);
    if (r < 0) {
        (void)snprintf(j->message, sizeof(j->message), "%s", e.msg);
        j->out = OUT_FAILED;
        j->reason = "RestoreFailed";
        return;
    }
    (void)snprintf(j->driver, sizeof(j->driver), "%s", d.driver);
}

static void run(struct worker_job *wj)
{
    struct cjob *j = (struct cjob *)wj;
    int fd = j->c->sysfs_fd;
    if (j->deleting)
        run_restore(j, fd);
    else
        run_bind(j, fd);
}

/* --- the loop's part -------------------------------------------------------------------------- */

static void job_end(struct cjob *j, bool requeue, double after)
{
    struct pciclaim *c = j->c;
    if (requeue && after > 0)
        (void)wq_add_after(c->wq, j->key, after);
    else if (requeue)
        (void)wq_add_rate_limited(c->wq, j->key);
    else
        wq_forget(c->wq, j->key);
    wq_done(c->wq, j->key);
    c->in_flight--;
    cjob_free(j);
}

static void emit(struct cjob *j, bool warning, const char *reason, const char *note)
{
    struct kube_event_ref ref = {.api_version = "devices.harvesterhci.io/v1beta1",
                                 .kind = "PCIDeviceClaim",
                                 .name = j->key,
                                 .uid = kube_meta_str(j->claim, "uid")};
    (void)kube_recorder_emit(j->c->events, &ref, warning, reason, warning ? "Reconcile" : reason,
                             note);
}

static void on_written(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct cjob *j = userdata;
    struct pciclaim *c = j->c;
    if (err && !(j->deleting && kube_err_is_not_found(err))) {
        log_error("Failed to write PCIDeviceClaim", KV_STR("claim", j->key),
                  KV_INT("http", err->http), KV_STR("reason", err->reason),
                  KV_STR("message", err->message));
        job_end(j, true, 0);
        return;
    }
    /* Removing the last finalizer of a deleting claim deletes it: expect the deletion. */
    bool deleted = err || j->out == OUT_RESTORED;
    expect_write(c->expect, j->key, deleted ? NULL : kube_meta_str(obj, "resourceVersion"),
                 kube_informer_get(c->inf, j->key), ev_now(c->cfg.loop));
    if (j->fault)
        fault_point("claim", j->fault);
    bool retry_busy = j->out == OUT_BUSY, failed = j->out == OUT_FAILED;
    job_end(j, retry_busy || failed, retry_busy ? BUSY_RETRY : 0);
}

static int write_status(struct cjob *j, const struct pciclaim_status *want)
{
    char now[40];
    timefmt_now(now, sizeof(now));
    char *patch = pciclaim_status_patch(j->claim, want, now);
    if (!patch)
        return 0;
    log_v(2, "Patching PCIDeviceClaim status", KV_STR("claim", j->key), KV_STR("patch", patch));
    int r = kube_client_patch(j->c->cfg.http, &kube_res_pcideviceclaims, NULL, j->key,
                              KUBE_PATCH_MERGE, patch, true, on_written, j);
    free(patch);
    return r < 0 ? r : 1;
}

static int write_finalizer(struct cjob *j, bool add)
{
    char *patch = pciclaim_finalizer_patch(j->claim, add);
    if (!patch)
        return 0;
    int r = kube_client_patch(j->c->cfg.http, &kube_res_pcideviceclaims, NULL, j->key,
                              KUBE_PATCH_JSON, patch, false, on_written, j);
    free(patch);
    return r < 0 ? r : 1;
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

/* Turns the worker's outcome into one write. Returns 1 when a write is in flight. */
static int act(struct cjob *j)
{
    struct pciclaim *c = j->c;
    char msg[MESSAGE_SIZE + 64];
    struct pciclaim_status st = {.reason = j->reason, .message = j->message};
    switch (j->out) {
    case OUT_REFUSED:
        c->stats.refusals++;
        if (!status_matches(j->claim, &st)) {
            log_warning("Refused PCIDeviceClaim", KV_STR("claim", j->key),
                        KV_STR("reason", j->reason), KV_STR("message", j->message));
            emit(j, true, j->reason, j->message);
        }
        return write_status(j, &st);
    case OUT_RECORD:
        (void)snprintf(msg, sizeof(msg), "recorded the original driver \"%s\"; binding to vfio-pci",
                       j->driver);
        st = (struct pciclaim_status){.driver = j->driver, .reason = "Binding", .message = msg};
        j->fault = "record-driver";
        return write_status(j, &st);
    case OUT_BOUND: {
        c->stats.binds++;
        (void)snprintf(msg, sizeof(msg), "bound to vfio-pci; VMs get /dev/vfio/%d", j->group);
        st = (struct pciclaim_status){
                .passthrough = true, .ready = true, .reason = "Bound", .message = msg};
        if (status_matches(j->claim, &st))
            return 0;
        const double *t = first_seen(c, j->claim);
        if (t) {
            c->stats.last_bind_seconds = ev_time() - *t;
            c->stats.bind_seconds_sum += c->stats.last_bind_seconds;
            c->stats.bind_seconds_count++;
        }
        log_info("Bound device to vfio-pci", KV_STR("claim", j->key), KV_STR("device", j->address),
                 KV_INT("iommuGroup", j->group), KV_STR("originalDriver", j->original));
        emit(j, false, "Bound", msg);
        return write_status(j, &st);
    }
    case OUT_FAILED:
        c->stats.failures++;
        log_error("PCIDeviceClaim step failed", KV_STR("claim", j->key),
                  KV_STR("reason", j->reason), KV_STR("message", j->message));
        emit(j, true, j->reason, j->message);
        return write_status(j, &st);
    case OUT_BUSY:
        c->stats.busy_waits++;
        (void)snprintf(msg, sizeof(msg),
                       "a VM holds /dev/vfio/%d; the original driver is restored when it lets go "
                       "(stop the VM or detach the device)",
                       j->group);
        st = (struct pciclaim_status){.passthrough = true, .reason = "DeviceInUse", .message = msg};
        if (!status_matches(j->claim, &st))
            emit(j, true, "DeviceInUse", msg);
        return write_status(j, &st);
    case OUT_RESTORED:
        c->stats.restores++;
        (void)snprintf(msg, sizeof(msg), "device %s restored to driver \"%s\"", j->address,
                       j->driver);
        log_info("Restored device", KV_STR("claim", j->key), KV_STR("device", j->address),
                 KV_STR("driver", j->driver));
        emit(j, false, "Restored", msg);
        return write_finalizer(j, false);
    default:
        return 0;
    }
}

static void done(struct worker_job *wj, bool cancelled)
{
    struct cjob *j = (struct cjob *)wj;
    if (cancelled || j->c->stopping) {
        job_end(j, false, 0);
        return;
    }
    int r = act(j);
    if (r < 0) {
        log_error("Cannot start a request", KV_STR("claim", j->key), KV_ERRNO(r));
        job_end(j, true, 0);
    } else if (r == 0) {
        job_end(j, j->out == OUT_BUSY || j->out == OUT_FAILED, j->out == OUT_BUSY ? BUSY_RETRY : 0);
    }
}

/* Collects the addresses of this node's live claims: members of a group count as claimed. */
static void collect_claimed(struct cjob *j)
{
    size_t pos = 0, n = 0;
    const char *key;
    const cJSON *obj;
    while (kube_informer_next(j->c->inf, &pos, &key, &obj))
        n++;
    j->claimed = calloc(n ? n : 1, sizeof(*j->claimed));
    if (!j->claimed)
        return;
    pos = 0;
    while (kube_informer_next(j->c->inf, &pos, &key, &obj)) {
        const char *a = str_field(field(obj, "spec"), "address");
        if (a && !kube_meta_str(obj, "deletionTimestamp") && j->n_claimed < n)
            j->claimed[j->n_claimed++] = strdup(a);
    }
}

static void fill_inputs(struct cjob *j)
{
    const char *a = str_field(field(j->claim, "spec"), "address");
    const char *orig = NULL;
    (void)snprintf(j->address, sizeof(j->address), "%s", a ? a : "");
    j->recorded = pciclaim_driver_recorded(j->claim, &orig);
    (void)snprintf(j->original, sizeof(j->original), "%s", orig ? orig : "");
    const cJSON *dev = j->c->cfg.devices ? kube_informer_get(j->c->cfg.devices, j->key) : NULL;
    const char *ann = str_field(field(field(dev, "metadata"), "annotations"), DRIVER_ANNOTATION);
    (void)snprintf(j->annotation, sizeof(j->annotation), "%s", ann ? ann : "");
    collect_claimed(j);
}

/* Checks what the API server cannot: the claim is for this node and names a valid address. */
static bool valid_claim(struct cjob *j)
{
    char want[300];
    const cJSON *spec = field(j->claim, "spec");
    const char *node = str_field(spec, "nodeName"), *a = str_field(spec, "address");
    if (!node || strcmp(node, j->c->cfg.node_name) != 0)
        return false; /* another node's (the field selector should keep them away) */
    if (a && kube_names_pcidevice(node, a, want, sizeof(want)) == 0 && strcmp(want, j->key) == 0)
        return true;
    j->out = OUT_REFUSED;
    j->reason = "InvalidClaim";
    (void)snprintf(j->message, sizeof(j->message),
                   "spec.address \"%s\" is not a PCI address of the form 0000:3b:00.1, or the "
                   "claim is not named after it (%s)",
                   a ? a : "", a ? want : "no address");
    return true;
}

static void reconcile(struct pciclaim *c, const char *key)
{
    const cJSON *obj = kube_informer_get(c->inf, key);
    double wait = expect_waiting(c->expect, key, ev_now(c->cfg.loop));
    if (!obj || wait > 0) {
        if (!obj)
            wq_forget(c->wq, key);
        else /* the informer's event for our write re-queues it; at the latest, this */
            (void)wq_add_after(c->wq, key, wait);
        wq_done(c->wq, key);
        return;
    }
    struct cjob *j = calloc(1, sizeof(*j));
    if (!j || !(j->key = strdup(key)) || !(j->claim = cJSON_Duplicate(obj, true))) {
        if (j)
            cjob_free(j);
        (void)wq_add_rate_limited(c->wq, key);
        wq_done(c->wq, key);
        return;
    }
    j->c = c;
    j->deleting = kube_meta_str(obj, "deletionTimestamp") != NULL;
    if (!j->deleting)
        (void)first_seen(c, obj); /* the start of the time-to-bind measure */
    c->in_flight++;
    c->stats.reconciles++;
    if (!valid_claim(j)) {
        job_end(j, false, 0);
        return;
    }
    if (j->out == OUT_REFUSED) {
        done(&j->wj, false);
        return;
    }
    if (j->deleting && finalizer_index(obj) < 0) {
        job_end(j, false, 0);
        return;
    }
    if (!j->deleting && finalizer_index(obj) < 0) {
        j->fault = "finalizer";
        int r = write_finalizer(j, true);
        if (r <= 0)
            job_end(j, true, 0);
        return; /* the informer brings the claim back with it */
    }
    fill_inputs(j);
    j->wj.run = run;
    j->wj.done = done;
    worker_submit(c->worker, &j->wj);
}

/* --- informer, dispatch ----------------------------------------------------------------------- */

static void on_add(const char *key, const cJSON *obj, void *userdata)
{
    struct pciclaim *c = userdata;
    expect_observed(c->expect, key, obj, false);
    (void)wq_add(c->wq, key); /* (during a LIST the store may not hold it yet) */
    /* a new claim may complete another claim's IOMMU group: look at all of them */
    pciclaim_enqueue_all(c);
}

static void on_update(const char *key, const cJSON *old, const cJSON *obj, void *userdata)
{
    struct pciclaim *c = userdata;
    (void)old;
    expect_observed(c->expect, key, obj, false);
    (void)wq_add(c->wq, key);
}

static void on_delete(const char *key, const cJSON *obj, void *userdata)
{
    struct pciclaim *c = userdata;
    const char *uid = kube_meta_str(obj, "uid");
    expect_observed(c->expect, key, obj, true);
    if (uid)
        map_remove(c->first_seen, uid);
    pciclaim_enqueue_all(c); /* a group member is no longer claimed */
}

static void on_error(const struct kube_err *err, void *userdata)
{
    (void)userdata;
    log_warning("PCIDeviceClaim watch failed; retrying", KV_INT("http", err->http),
                KV_STR("reason", err->reason), KV_STR("message", err->message));
}

void pciclaim_enqueue_all(struct pciclaim *c)
{
    size_t pos = 0;
    const char *key;
    const cJSON *obj;
    if (!c || !c->inf)
        return;
    while (kube_informer_next(c->inf, &pos, &key, &obj))
        (void)wq_add(c->wq, key);
}

static void on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
    struct pciclaim *c = w->data;
    const char *key;
    (void)revents;
    if (c->stopping || !kube_informer_has_synced(c->inf))
        return;
    while (c->in_flight < 2 && (key = wq_get(c->wq)))
        reconcile(c, key);
    double next = wq_next_in(c->wq);
    ev_timer_stop(loop, &c->queue_timer);
    if (next > 0) {
        ev_timer_set(&c->queue_timer, next, 0.);
        ev_timer_start(loop, &c->queue_timer);
    }
}

static void on_queue_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents; /* waking up is enough: on_prepare takes the keys now due */
}

static void free_double(void *p)
{
    free(p);
}

struct pciclaim *pciclaim_new(const struct pciclaim_config *cfg)
{
    struct pciclaim *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->cfg = *cfg;
    c->sysfs_fd = node_sysfs_open_root(cfg->sysfs_root);
    char selector[300];
    (void)snprintf(selector, sizeof(selector), "spec.nodeName=%s", cfg->node_name);
    struct kube_informer_config ic = {
            .resource = &kube_res_pcideviceclaims,
            .field_selector = selector,
            .handlers = {.on_add = on_add,
                         .on_update = on_update,
                         .on_delete = on_delete,
                         .on_error = on_error},
            .userdata = c,
    };
    char instance[300];
    (void)snprintf(instance, sizeof(instance), "hostdevd-agent-%s", cfg->node_name);
    struct kube_recorder_config rc = {.controller = "hostdevd.io/agent", .instance = instance};
    struct wq_config wc;
    wq_config_default(&wc);
    wc.max_delay = 300;
    c->inf = kube_informer_new(cfg->loop, cfg->http, &ic);
    c->wq = wq_new(&wc);
    c->expect = expect_new();
    c->events = kube_recorder_new(cfg->loop, cfg->http, &rc);
    c->first_seen = map_new(free_double);
    if (c->sysfs_fd < 0 || !c->inf || !c->wq || !c->expect || !c->events || !c->first_seen)
        return pciclaim_free(c);
    ev_prepare_init(&c->dispatch, on_prepare);
    c->dispatch.data = c;
    ev_timer_init(&c->queue_timer, on_queue_timer, 0., 0.);
    c->queue_timer.data = c;
    return c;
}

int pciclaim_start(struct pciclaim *c)
{
    c->worker = worker_new(c->cfg.loop);
    if (!c->worker)
        return -ENOMEM;
    ev_prepare_start(c->cfg.loop, &c->dispatch);
    return kube_informer_start(c->inf);
}

bool pciclaim_has_synced(const struct pciclaim *c)
{
    return kube_informer_has_synced(c->inf);
}

int pciclaim_in_flight(const struct pciclaim *c)
{
    return c->in_flight + (int)kube_recorder_in_flight(c->events);
}

void pciclaim_stop(struct pciclaim *c)
{
    c->stopping = true;
    kube_recorder_flush(c->events);
}

struct pciclaim *pciclaim_free(struct pciclaim *c)
{
    if (!c)
        return NULL;
    c->stopping = true;
    c->worker = worker_free(c->worker); /* finishes the job in progress first */
    ev_prepare_stop(c->cfg.loop, &c->dispatch);
    ev_timer_stop(c->cfg.loop, &c->queue_timer);
    c->inf = kube_informer_free(c->inf);
    c->events = kube_recorder_free(c->events);
    c->wq = wq_free(c->wq);
    c->expect = expect_free(c->expect);
    map_free(c->first_seen);
    if (c->sysfs_fd >= 0)
        close(c->sysfs_fd);
    free(c);
    return NULL;
}

void pciclaim_write_metrics(const struct pciclaim *c, struct buf *out)
{
    const struct pciclaim_stats *s = &c->stats;
    (void)buf_printf(out,
                     "# HELP hostdevd_claim_results_total PCIDeviceClaim reconciles by result.\n"
                     "# TYPE hostdevd_claim_results_total counter\n"
                     "hostdevd_claim_results_total{result=\"bound\"} %lu\n"
                     "hostdevd_claim_results_total{result=\"restored\"} %lu\n"
                     "hostdevd_claim_results_total{result=\"refused\"} %lu\n"
                     "hostdevd_claim_results_total{result=\"failed\"} %lu\n"
                     "hostdevd_claim_results_total{result=\"busy\"} %lu\n"
                     "# HELP hostdevd_claim_reconciles_total PCIDeviceClaim reconciles.\n"
                     "# TYPE hostdevd_claim_reconciles_total counter\n"
                     "hostdevd_claim_reconciles_total %lu\n"
                     "# HELP hostdevd_claim_bind_seconds From first sight of a claim to its "
                     "verified bind.\n"
                     "# TYPE hostdevd_claim_bind_seconds summary\n"
                     "hostdevd_claim_bind_seconds_sum %.6f\n"
                     "hostdevd_claim_bind_seconds_count %lu\n"
                     "# HELP hostdevd_claim_last_bind_seconds The last claim's time to bind.\n"
                     "# TYPE hostdevd_claim_last_bind_seconds gauge\n"
                     "hostdevd_claim_last_bind_seconds %.6f\n",
                     s->binds, s->restores, s->refusals, s->failures, s->busy_waits, s->reconciles,
                     s->bind_seconds_sum, s->bind_seconds_count, s->last_bind_seconds);
}
