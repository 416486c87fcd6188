/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/sriov/sriovnet.c - the SRIOVNetworkDevice reconciler (see sriovnet.h).
 *
 * Decisions:
 * - The objects go through the device-object core (devices/devobjs.h: the informer of this
 *   node's objects, creates, status patches, deletes with a uid precondition); the node work is a
 *   worker job whose end records what it did and asks for a rescan; the next plan, from the new
 *   facts, writes the status.
 * - One plan does one thing: API writes, or node work. The node work comes first when the spec
 *   asks something the node lacks and nothing refuses it; the status says the outcome after.
 */
#include "controllers/sriov/sriovnet.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/log.h"
#include "base/map.h"
#include "base/metrics.h"
#include "controllers/binding/ledger.h"
#include "controllers/devices/devobjs.h"
#include "controllers/devices/devwrite.h"
#include "controllers/devices/nodeuid.h"
#include "controllers/devices/inventory.h"
#include "controllers/devices/pcidevice.h"
#include "controllers/objects/kinds.h"
#include "controllers/objects/sriovobj.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/runner.h"
#include "controllers/runtime/worker.h"
#include "controllers/sriov/sriovpf.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/names.h"
#include "node/sriov.h"
#include "node/sysfs.h"
#include "node/vflink.h"

/* A failed node write, kept so that it is shown rather than tried again and again. */
struct failure {
    long long generation;
    int current;
    char reason[32];
    char message[1024];
};

struct sriovnet {
    struct devobjs o; /* first: the runner's ctx */
    struct worker *worker;
    struct kube_informer *claims; /* (its sync: the ledger's PCI claims are complete) */
    const struct ledger *ledger;  /* who holds a VF (binding/ledger.h) */
    struct map *failed;           /* name -> struct failure */
    struct map *said;             /* name -> the last refusal logged */
    struct metrics_series *node_writes, *node_failures;
};

/* --- the PFs of a scan ------------------------------------------------------------------------ */

/* The object of PF `address` among the cached ones, by spec.address (a PF that lost its
 * interface keeps its object). */
static const char *object_of(const struct sriovnet *s, const char *address)
{
    size_t pos = 0;
    const char *key;
    const cJSON *obj;
    struct kube_informer *inf = runner_informer(s->o.runner);
    while (kube_informer_next(inf, &pos, &key, &obj))
        if (json_same(json_str(json_field(obj, "spec"), "address"), address) &&
            !devwrite_foreign(obj, s->o.cfg.env.node_name))
            return key;
    return NULL;
}

/* The PF of `d` as this node's object names it, or NULL (no name yet, or OOM). */
static struct sriovpf *pf_of(const struct sriovnet *s, const struct pcidevice_spec *d,
                             const struct map *pci_want)
{
    char name[KUBE_NAME_MAX + 1];
    const char *existing = object_of(s, d->address);
    int r = d->netdev[0]
                    ? kube_names_sriovnetdev(s->o.cfg.env.node_name, d->netdev, name, sizeof(name))
                    : -ENOENT;
    if (r < 0 && existing)
        r = snprintf(name, sizeof(name), "%s", existing) > 0 ? 0 : -EINVAL;
    if (r < 0) {
        if (d->netdev[0])
            log_warning("SR-IOV PF's interface does not make an object name; not published",
                        KV_STR("address", d->address), KV_STR("interface", d->netdev));
        return NULL;
    }
    return sriovpf_new(name, d, pci_want);
}

void sriovnet_sync(struct sriovnet *s, const struct map *pci_want)
{
    if (!s || !pci_want)
        return;
    struct map *want = map_new(sriovpf_free);
    size_t pos = 0;
    const char *key;
    void *v;
    while (want && map_next(pci_want, &pos, &key, &v)) {
        if (!sriovpf_is_network_pf(v))
            continue;
        struct sriovpf *p = pf_of(s, v, pci_want);
        if (p && map_put(want, p->name, p) < 0)
            sriovpf_free(p);
    }
    if (want)
        devobjs_take_want(&s->o, want);
}

/* --- the plan --------------------------------------------------------------------------------- */

/* Node work for one key: the count's writes, then the VF settings. */
struct job {
    struct worker_job wj;
    struct runner_job *rj;
    struct sriovnet *s;
    char name[254], address[20], ifname[16], driver[64];
    const char *sysfs_root;
    long long generation;
    int current;
    int writes[2], n_writes;
    struct node_vflink_want *settings;
    size_t n_settings;
    /* the outcome */
    int r;
    char reason[32];
    struct err err;
};

struct plan {
    struct devwrite *write; /* API writes, or NULL */
    struct job *job;        /* node work, or NULL */
};

static void plan_free(void *v)
{
    struct plan *p = v;
    if (!p)
        return;
    if (p->write) {
        devwrite_done(p->write);
        free(p->write);
    }
    if (p->job) {
        free(p->job->settings);
        free(p->job);
    }
    free(p);
}

/* The settings the VFs lack (all of them when the count changes: new VFs have none). */
static int settings_of(const struct sriovpf *p, const struct sriovobj_spec *spec, bool all,
                       struct job *j)
{
    j->settings = spec->n_vfs ? calloc(spec->n_vfs, sizeof(*j->settings)) : NULL;
    if (spec->n_vfs && !j->settings)
        return -ENOMEM;
    for (size_t i = 0; i < spec->n_vfs; i++) {
        const struct node_vflink_want w = spec->vfs[i];
        const struct sriovpf_vf *have = NULL;
        for (size_t k = 0; k < p->n_vfs; k++)
            if (p->vfs[k].index == w.index && p->vfs[k].has_link)
                have = &p->vfs[k];
        if (all || !have || !node_vflink_satisfied(&have->link, &w))
            j->settings[j->n_settings++] = w;
    }
    return 0;
}

/* What the node lacks of what `spec` asks: a job, or a refusal (reason and message), or both
 * NULL when the node is as asked. */
static int node_plan(struct sriovnet *s, const struct sriovpf *p, const struct sriovobj_spec *spec,
                     struct job **ret_job, const char **ret_reason, struct buf *message)
{
    *ret_job = NULL;
    *ret_reason = NULL;
    struct buf used;
    buf_init(&used, 2048);
    sriovpf_in_use(p, s->ledger, &used);
    const struct node_blocker *b = NULL; /* the host's use of the PF; not its IOMMU group */
    for (int i = 0; !b && i < p->n_blockers; i++)
        if (strcmp(p->blockers[i].reason, "HostNetwork") == 0 ||
            strcmp(p->blockers[i].reason, "MountedFilesystem") == 0 ||
            strcmp(p->blockers[i].reason, "Swap") == 0)
            b = &p->blockers[i];
    struct sriovobj_facts f = {.total = p->total,
                               .current = p->current,
                               .blocker_reason = b ? b->reason : NULL,
                               .blocker_message = b ? b->message : NULL,
                               .in_use = buf_str(&used)};
    struct sriovobj_count_plan cp;
    sriovobj_count_plan(spec->num_vfs, &f, &cp);
    buf_free(&used);
    if (cp.reason) {
        *ret_reason = cp.reason;
        return buf_printf(message, "%s", cp.message);
    }
    struct job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    memcpy(j->writes, cp.writes, sizeof(j->writes));
    j->n_writes = cp.n_writes;
    bool ready_for_settings = cp.n_writes > 0 || p->current == spec->num_vfs;
    int r = ready_for_settings ? settings_of(p, spec, cp.n_writes > 0, j) : 0;
    if (r < 0 || (j->n_writes == 0 && j->n_settings == 0)) {
        free(j->settings);
        free(j);
        return r;
    }
    (void)snprintf(j->name, sizeof(j->name), "%s", p->name);
    (void)snprintf(j->address, sizeof(j->address), "%s", p->address);
    (void)snprintf(j->ifname, sizeof(j->ifname), "%s", p->ifname);
    (void)snprintf(j->driver, sizeof(j->driver), "%s", p->driver);
    j->sysfs_root = s->o.cfg.env.sysfs_root;
    j->generation = spec->generation;
    j->current = p->current;
    j->s = s;
    *ret_job = j;
    return 0;
}

/* Logs a refusal once per object and message. */
static void say_refusal(struct sriovnet *s, const char *key, const char *reason,
                        const char *message)
{
    const char *last = map_get(s->said, key);
    if (last && strcmp(last, message) == 0)
        return;
    char *copy = strdup(message);
    if (copy && map_put(s->said, key, copy) < 0)
        free(copy);
    log_warning("SR-IOV change refused", KV_STR("sriovnetworkdevice", key),
                KV_STR("reason", reason), KV_STR("message", message));
}

/* No node work: the object's status (and metadata) written where they differ; a refusal said
 * once. */
static int plan_status(struct sriovnet *s, const char *key, const struct sriovpf *p,
                       const cJSON *obj, const struct sriovobj_spec *spec, const char *reason,
                       struct buf *msg, struct plan *ret)
{
    if (reason &&
        (strcmp(reason, SRIOVOBJ_TOO_MANY_VFS) == 0 || strcmp(reason, SRIOVOBJ_VFS_IN_USE) == 0 ||
         strcmp(reason, SRIOVOBJ_HOST_NEEDS_DEVICE) == 0))
        say_refusal(s, key, reason, buf_str(msg));
    else
        map_remove(s->said, key);
    if (!reason)
        (void)buf_printf(msg, "%s has %d of %d VFs%s, as spec asks",
                         p->ifname[0] ? p->ifname : p->address, p->current, p->total,
                         spec->n_vfs ? " with the VF settings asked" : "");
    cJSON *st = sriovpf_status(p, obj, reason == NULL, reason ? reason : SRIOVOBJ_CONFIGURED,
                               buf_str(msg) ? buf_str(msg) : "");
    char *patch = devwrite_wrap("status", devwrite_status_diff(st, json_field(obj, "status"),
                                                               sriovpf_managed, sriovpf_n_managed));
    cJSON_Delete(st);
    char *meta = devwrite_wrap("metadata", devwrite_meta_diff(json_field(obj, "metadata"),
                                                              s->o.cfg.env.node_name,
                                                              nodeuid_get(s->o.cfg.node)));
    if (patch || meta)
        ret->write = devobjs_write(&s->o, NULL, patch, meta, false, NULL);
    return (patch || meta) && !ret->write ? -ENOMEM : 0;
}

static int plan_existing(struct sriovnet *s, const char *key, const struct sriovpf *p,
                         const cJSON *obj, struct plan *ret)
{
    struct sriovobj_spec *spec = malloc(sizeof(*spec));
    struct err why = {{0}};
    struct buf message;
    buf_init(&message, 2048);
    const char *reason = NULL;
    int r = spec ? 0 : -ENOMEM;
    if (r == 0 && sriovobj_spec(obj, spec, &why) < 0) {
        reason = SRIOVOBJ_INVALID_SETTING;
        r = buf_printf(&message, "%s", why.msg);
    }
    const struct failure *failed = map_get(s->failed, key);
    if (r == 0 && !reason && failed &&
        (failed->generation != spec->generation || failed->current != p->current)) {
        map_remove(s->failed, key); /* a new spec or a new count: try again */
        failed = NULL;
    }
    if (r == 0 && !reason && failed) {
        reason = failed->reason;
        r = buf_printf(&message, "%s", failed->message);
    }
    if (r == 0 && !reason && p->current < 0 && sriovpf_unreadable(p, &message))
        reason = SRIOVOBJ_SYSFS_UNREADABLE; /* no count plan on a count unknown */
    if (r == 0 && !reason)
        r = node_plan(s, p, spec, &ret->job, &reason, &message);
    if (r == 0 && !ret->job && !reason && p->links_error[0] && spec->n_vfs > 0) {
        reason = SRIOVOBJ_WRITE_FAILED;
        r = buf_printf(&message, "cannot read the VF settings of %s: %s", p->ifname,
                       p->links_error);
    }
    if (r == 0 && !ret->job && !reason && sriovpf_unreadable(p, &message))
        reason = SRIOVOBJ_SYSFS_UNREADABLE;
    if (r == 0 && !ret->job)
        r = plan_status(s, key, p, obj, spec, reason, &message, ret);
    buf_free(&message);
    free(spec);
    return r;
}

static cJSON *new_object(const struct sriovnet *s, const struct sriovpf *p)
{
    cJSON *o = devwrite_new_object("SRIOVNetworkDevice", p->name, s->o.cfg.env.node_name,
                                   nodeuid_get(s->o.cfg.node));
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    cJSON_AddStringToObject(ann, SRIOVOBJ_INTERFACE_ANNOTATION, p->ifname);
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(o, "spec");
    cJSON_AddStringToObject(spec, "address", p->address);
    cJSON_AddStringToObject(spec, "nodeName", s->o.cfg.env.node_name);
    /* adopt: never remove VFs (a count that cannot be read: the VFs there are) */
    cJSON_AddNumberToObject(spec, "numVFs", p->current >= 0 ? p->current : (double)p->n_vfs);
    return o;
}

static int plan_key(void *ctx, const char *key, const cJSON *obj, void **ret_plan)
{
    struct sriovnet *s = ctx;
    *ret_plan = NULL;
    if (obj && devwrite_foreign(obj, s->o.cfg.env.node_name))
        return 0;
    const struct sriovpf *p = map_get(s->o.want, key);
    if (!p && !obj)
        return 0;
    struct plan *plan = calloc(1, sizeof(*plan));
    if (!plan)
        return -ENOMEM;
    int r = 0;
    if (!p) {
        map_remove(s->failed, key);
        plan->write = devobjs_write(&s->o, NULL, NULL, NULL, true, kube_meta_str(obj, "uid"));
    } else if (!obj) {
        struct buf m;
        buf_init(&m, 1024);
        bool bad = sriovpf_unreadable(p, &m) > 0 && buf_str(&m);
        cJSON *st =
                sriovpf_status(p, NULL, !bad, bad ? SRIOVOBJ_SYSFS_UNREADABLE : SRIOVOBJ_CONFIGURED,
                               bad ? buf_str(&m) : "adopted as the kernel has it");
        buf_free(&m);
        plan->write = devobjs_write(
                &s->o, new_object(s, p),
                devwrite_wrap("status",
                              devwrite_status_diff(st, NULL, sriovpf_managed, sriovpf_n_managed)),
                NULL, false, NULL);
        cJSON_Delete(st);
    } else {
        r = plan_existing(s, key, p, obj, plan);
    }
    if (r == 0 && !p && !plan->write)
        r = -ENOMEM;
    if (r < 0 || (!plan->write && !plan->job)) {
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
    int fd = j->n_writes ? node_sysfs_open_root(j->sysfs_root) : 0;
    if (fd < 0) {
        j->r = err_set(&j->err, fd, "cannot open the sysfs root %s: %s", j->sysfs_root,
                       strerror(-fd));
        (void)snprintf(j->reason, sizeof(j->reason), "%s", SRIOVOBJ_WRITE_FAILED);
        return;
    }
    for (int i = 0; i < j->n_writes && j->r == 0; i++)
        j->r = node_sriov_set_numvfs(fd, j->address, j->writes[i], &j->err);
    if (j->n_writes)
        close(fd);
    if (j->r < 0) {
        (void)snprintf(j->reason, sizeof(j->reason), "%s", SRIOVOBJ_WRITE_FAILED);
        return;
    }
    for (size_t i = 0; i < j->n_settings && j->r == 0; i++)
        j->r = node_vflink_set(j->ifname, j->driver, &j->settings[i], &j->err);
    if (j->r < 0)
        (void)snprintf(j->reason, sizeof(j->reason), "%s",
                       j->r == -EOPNOTSUPP ? SRIOVOBJ_SETTING_UNSUPPORTED : SRIOVOBJ_WRITE_FAILED);
}

static void job_done(struct worker_job *wj, bool cancelled)
{
    struct job *j = (struct job *)wj;
    struct sriovnet *s = j->s;
    struct runner_job *rj = j->rj;
    if (cancelled) {
        runner_job_done(rj, RUNNER_RETRY, 0);
        free(j->settings);
        free(j);
        return;
    }
    metrics_inc(s->node_writes);
    if (j->r < 0) {
        metrics_inc(s->node_failures);
        struct failure *f = calloc(1, sizeof(*f));
        if (f) {
            *f = (struct failure){.generation = j->generation, .current = j->current};
            (void)snprintf(f->reason, sizeof(f->reason), "%s", j->reason);
            (void)snprintf(f->message, sizeof(f->message), "%s", j->err.msg);
            if (map_put(s->failed, j->name, f) < 0)
                free(f);
        }
        log_warning("SR-IOV change failed", KV_STR("sriovnetworkdevice", j->name),
                    KV_STR("reason", j->reason), KV_STR("message", j->err.msg));
    } else {
        map_remove(s->failed, j->name);
        log_info("SR-IOV PF configured", KV_STR("sriovnetworkdevice", j->name),
                 KV_STR("address", j->address), KV_INT("from", j->current),
                 KV_INT("numVFs", j->n_writes ? j->writes[j->n_writes - 1] : j->current),
                 KV_INT("vfSettings", (long long)j->n_settings));
    }
    /* the new facts come with the rescan, which queues the key again */
    runner_job_done(rj, RUNNER_DONE, 0);
    free(j->settings);
    free(j);
    static char why[] = "SR-IOV change";
    manager_emit(s->o.cfg.env.mgr, &inventory_rescan_wanted, why);
}

static void act(struct runner_job *job, void *v, void *ctx)
{
    struct sriovnet *s = ctx;
    struct plan *p = v;
    if (p->write) {
        devwrite_run(p->write, job);
        return;
    }
    struct job *j = p->job;
    p->job = NULL; /* the job frees itself after its done */
    j->rj = job;
    j->wj.run = job_run;
    j->wj.done = job_done;
    log_info("Configuring SR-IOV PF", KV_STR("sriovnetworkdevice", j->name),
             KV_STR("address", j->address), KV_INT("numVFs", j->current),
             KV_INT("writes", j->n_writes), KV_INT("vfSettings", (long long)j->n_settings));
    worker_submit(s->worker, &j->wj);
}

static bool can_start(void *ctx)
{
    const struct sriovnet *s = ctx;
    return s->claims && kube_informer_has_synced(s->claims) && devobjs_can_start(ctx);
}

static const struct devobjs_kind kind = {
        .name = "sriovnetworkdevice",
        .kind = "SRIOVNetworkDevice",
        .cache = &kind_sriovnetworkdevices,
        .written = "SR-IOV PFs written",
        .gone = "Deleting SRIOVNetworkDevice of a PF that is gone"};

static const struct runner_ops ops = {
        .plan = plan_key,
        .act = act,
        .plan_free = plan_free,
        .on_event = devobjs_on_event,
        .can_start = can_start,
        .on_converged = devobjs_on_converged,
        .kind = "SRIOVNetworkDevice",
        .waiting = "no PCI scan has succeeded",
        .unconverged = "the first SR-IOV PFs are not written yet",
        .absent = "SRIOVNetworkDevice CRD not installed; SR-IOV PFs not published until it is",
};

/* --- life ------------------------------------------------------------------------------------- */

struct sriovnet *sriovnet_new(const struct part_env *env)
{
    struct devobjs_config dc = devobjs_config_of(env);
    struct sriovnet *s = devobjs_new(sizeof(*s), &dc, &kind, &ops);
    if (!s)
        return NULL;
    s->worker = manager_worker(env->mgr);
    s->claims = manager_cache(env->mgr, &kind_pcideviceclaims);
    s->ledger = manager_part(env->mgr, &ledger_part);
    s->failed = map_new(free);
    s->said = map_new(free);
    s->node_writes = metrics_one(env->metrics, METRICS_COUNTER, "hostdevd_sriov_node_writes_total",
                                 "SR-IOV node changes made (VF counts and VF settings).");
    s->node_failures =
            metrics_one(env->metrics, METRICS_COUNTER, "hostdevd_sriov_node_write_failures_total",
                        "SR-IOV node changes the kernel or the PF's driver refused.");
    if (!s->worker || !s->failed || !s->said) {
        map_free(s->failed);
        map_free(s->said);
        devobjs_free(s);
        return NULL;
    }
    return s;
}

/* A claim changed: a VF may have become free or taken. */
static void on_claim(void *self, const struct watch_event *ev)
{
    struct sriovnet *s = self;
    (void)ev;
    if (s->o.want)
        devobjs_enqueue_all(&s->o);
}

static void on_scan(void *self, const struct watch_event *ev)
{
    sriovnet_sync(self, ev->data);
}

static void *make(const struct part_env *env)
{
    return sriovnet_new(env);
}

static const struct watch watches[] = {
        {.topic = &pcidevices_wanted, .map = on_scan},
        {.kind = &kind_pcideviceclaims, .map = on_claim},
        {0},
};

static void sriovnet_free(void *self)
{
    struct sriovnet *s = self;
    map_free(s->failed);
    map_free(s->said);
    devobjs_free(s);
}

const struct part_ops sriovnet_part = {.name = "sriovnetworkdevices",
                                       .make = make,
                                       .watches = watches,
                                       .runner = devobjs_runner,
                                       .start = devobjs_start,
                                       .free = sriovnet_free};
