/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/claims/nodeclaims.c - claims no agent will ever serve (see nodeclaims.h).
 */
#include "controllers/claims/nodeclaims.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/log.h"
#include "base/map.h"
#include "base/timefmt.h"
#include "controllers/objects/claimstatus.h"
#include "controllers/objects/kinds.h"
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
#include "kube/names.h"

static void nodeclaims_free(void *userdata);

#define MAX_IN_FLIGHT 2

/* --- pure ------------------------------------------------------------------------------------ */

static void set(struct nodeclaims_decision *d, enum nodeclaims_action action, const char *reason,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void set(struct nodeclaims_decision *d, enum nodeclaims_action action, const char *reason,
                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): clang-analyzer 14 false positive
    (void)vsnprintf(d->message, sizeof(d->message), fmt, ap);
    va_end(ap);
    d->action = action;
    d->reason = reason;
}

/* Why the agent of `n` is not running, as a sentence part. */
static void agent_trouble(const struct nodeclaims_node *n, char *buf, size_t size)
{
    const char *at = n->renewed ? n->renewed : "an unknown time";
    switch (n->agent) {
    case NODECLAIMS_AGENT_NEVER:
        (void)snprintf(buf, size,
                       "the hostdevd agent of node %s has never reported (no heartbeat Lease %s): "
                       "is the agent DaemonSet scheduled on that node?",
                       n->name, n->lease);
        break;
    case NODECLAIMS_AGENT_STOPPED:
        (void)snprintf(buf, size,
                       "the hostdevd agent of node %s stopped (it gave up its heartbeat Lease %s, "
                       "last renewed %s)",
                       n->name, n->lease, at);
        break;
    default:
        (void)snprintf(buf, size,
                       "the hostdevd agent of node %s has been silent since %s (its heartbeat "
                       "Lease %s expired)",
                       n->name, at, n->lease);
        break;
    }
}

static bool is_ready(const cJSON *claim)
{
    return cJSON_IsString(json_field(claimstatus_ready(claim), "status")) &&
           strcmp(json_str(claimstatus_ready(claim), "status"), "True") == 0;
}

void nodeclaims_decide(const cJSON *claim, const char *finalizer, const struct nodeclaims_node *n,
                       struct nodeclaims_decision *d)
{
    bool deleting = kube_meta_str(claim, "deletionTimestamp") != NULL;
    bool held = claimstatus_finalizer_index(claim, finalizer) >= 0;
    *d = (struct nodeclaims_decision){.action = NODECLAIMS_NOTHING};
    if (!n->exists && deleting) {
        if (held)
            set(d, NODECLAIMS_RELEASE, NODECLAIMS_FINALIZER_REMOVED,
                "node %s no longer exists, so no hostdevd agent will ever release this device: "
                "removed the finalizer %s (the node's devices go with the Node)",
                n->name, finalizer);
        return;
    }
    if (!n->exists)
        set(d, NODECLAIMS_CONDITION, NODECLAIMS_NODE_NOT_FOUND,
            "node %s does not exist: no hostdevd agent will act on this claim; delete it, or add "
            "the node",
            n->name);
    else if (n->agent != NODECLAIMS_AGENT_RUNNING && (deleting || !is_ready(claim))) {
        char why[512];
        agent_trouble(n, why, sizeof(why));
        set(d, NODECLAIMS_CONDITION, NODECLAIMS_AGENT_NOT_RUNNING, "%s%s", why,
            deleting ? "; the claim goes once the agent is back and has released the device"
                     : "; the claim waits for it");
    }
    if (d->action == NODECLAIMS_CONDITION &&
        claimstatus_ready_is(claim, false, d->reason, d->message))
        d->action = NODECLAIMS_NOTHING; /* already says so */
}

char *nodeclaims_status_patch(const cJSON *claim, const struct nodeclaims_decision *d,
                              const char *now)
{
    const char *rv = kube_meta_str(claim, "resourceVersion");
    cJSON *patch = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(patch, "metadata");
    cJSON *list = cJSON_AddArrayToObject(cJSON_AddObjectToObject(patch, "status"), "conditions");
    if (!rv || !cJSON_AddStringToObject(meta, "resourceVersion", rv) || !list ||
        !cJSON_AddItemToArray(
                list, claimstatus_ready_condition(claim, false, d->reason, d->message, now))) {
        cJSON_Delete(patch);
        return NULL;
    }
    char *s = cJSON_PrintUnformatted(patch);
    cJSON_Delete(patch);
    return s;
}

/* --- the reconciler -------------------------------------------------------------------------- */

struct nodeclaims {
    struct nodeclaims_config cfg;
    struct runner *runner; /* of Nodes (metadata only), keyed by node name */
    struct kube_informer *leases;
    struct informer_log lease_log;
    struct kube_informer *pci_claims, *usb_claims;
    struct map *seen; /* Lease key -> double *: when this process saw it change */
};

struct action {
    bool usb;
    char name[254];
    cJSON *claim; /* a copy */
    struct nodeclaims_decision d;
};

struct ncjob {
    struct nodeclaims *nc;
    struct runner_job *job;
    struct action *actions;
    size_t n, next;
    bool failed;
    bool watched;         /* claims on a node whose agent runs: look again at its expiry */
    double requeue_after; /* > 0: look again when the heartbeat would expire */
};

static void ncjob_free(void *p)
{
    struct ncjob *j = p;
    for (size_t i = 0; i < j->n; i++)
        cJSON_Delete(j->actions[i].claim);
    free(j->actions);
    free(j);
}

/* The node of a claim: a PCIDeviceClaim's spec.nodeName, a USBDeviceClaim's name's. */
static bool claim_node(bool usb, const char *key, const cJSON *claim, char *buf, size_t size)
{
    if (usb)
        return kube_names_usbdevice_node(key, buf, size) == 0;
    const char *n = json_str(json_field(claim, "spec"), "nodeName");
    return n && (size_t)snprintf(buf, size, "%s", n) < size;
}

static double *seen_at(struct nodeclaims *nc, const char *lease_key)
{
    double *t = map_get(nc->seen, lease_key);
    if (!t && (t = malloc(sizeof(*t)))) {
        *t = ev_now(nc->cfg.env.loop);
        if (map_put(nc->seen, lease_key, t) < 0) {
            free(t);
            return NULL;
        }
    }
    return t;
}

/* The agent of `node`, from its heartbeat; *ret_expires is when a fresh one would expire. */
static enum nodeclaims_agent agent_of(struct nodeclaims *nc, const char *node, char *lease_key,
                                      size_t size, const char **ret_renewed, double *ret_expires)
{
    (void)snprintf(lease_key, size, "%s/%s", nc->cfg.lease_namespace, node);
    const cJSON *lease = kube_informer_get(nc->leases, lease_key);
    const cJSON *spec = json_field(lease, "spec");
    const cJSON *duration = json_field(spec, "leaseDurationSeconds");
    *ret_renewed = json_str(spec, "renewTime");
    *ret_expires = 0;
    if (!lease)
        return NODECLAIMS_AGENT_NEVER;
    if (!json_str(spec, "holderIdentity") || !json_str(spec, "holderIdentity")[0])
        return NODECLAIMS_AGENT_STOPPED;
    const double *t = seen_at(nc, lease_key);
    *ret_expires =
            (t ? *t : ev_now(nc->cfg.env.loop)) +
            (cJSON_IsNumber(duration) && duration->valuedouble > 0 ? duration->valuedouble : 180);
    return ev_now(nc->cfg.env.loop) < *ret_expires ? NODECLAIMS_AGENT_RUNNING
                                                   : NODECLAIMS_AGENT_SILENT;
}

static int add_action(struct ncjob *j, bool usb, const char *key, const cJSON *claim,
                      const struct nodeclaims_decision *d)
{
    struct action *a = realloc(j->actions, (j->n + 1) * sizeof(*a));
    if (!a)
        return -ENOMEM;
    j->actions = a;
    a = &a[j->n];
    *a = (struct action){.usb = usb, .d = *d};
    (void)snprintf(a->name, sizeof(a->name), "%s", key);
    if (!(a->claim = cJSON_Duplicate(claim, true)))
        return -ENOMEM;
    j->n++;
    return 0;
}

/* The actions for the claims of `node` in one claim cache. */
static int plan_claims(struct ncjob *j, bool usb, const struct nodeclaims_node *n)
{
    struct kube_informer *cache = usb ? j->nc->usb_claims : j->nc->pci_claims;
    size_t pos = 0;
    const char *key;
    const cJSON *claim;
    char node[254];
    while (kube_informer_next(cache, &pos, &key, &claim)) {
        if (!claim_node(usb, key, claim, node, sizeof(node)) || strcmp(node, n->name) != 0)
            continue;
        struct nodeclaims_decision d;
        nodeclaims_decide(claim, usb ? USBOBJ_FINALIZER : PCIOBJ_FINALIZER, n, &d);
        int r = d.action == NODECLAIMS_NOTHING ? 0 : add_action(j, usb, key, claim, &d);
        if (r < 0)
            return r;
        if (n->agent == NODECLAIMS_AGENT_RUNNING)
            j->watched = true;
    }
    return 0;
}

static int plan_node(void *ctx, const char *key, const cJSON *obj, void **ret_plan)
{
    struct nodeclaims *nc = ctx;
    char lease_key[512];
    double expires;
    struct nodeclaims_node n = {.name = key, .exists = obj != NULL, .lease = lease_key};
    n.agent = agent_of(nc, key, lease_key, sizeof(lease_key), &n.renewed, &expires);
    struct ncjob *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->nc = nc;
    int r = plan_claims(j, false, &n);
    if (r == 0)
        r = plan_claims(j, true, &n);
    if (r < 0 || (j->n == 0 && !j->watched)) {
        ncjob_free(j);
        *ret_plan = NULL;
        return r;
    }
    if (j->watched) /* the heartbeat may expire: look again then */
        j->requeue_after = expires - ev_now(nc->cfg.env.loop) + 0.5;
    *ret_plan = j;
    return 0;
}

static void emit(struct ncjob *j, const struct action *a)
{
    struct kube_event_ref ref = {.api_version = "devices.harvesterhci.io/v1beta1",
                                 .kind = a->usb ? "USBDeviceClaim" : "PCIDeviceClaim",
                                 .name = a->name,
                                 .uid = kube_meta_str(a->claim, "uid")};
    (void)kube_recorder_emit(j->nc->cfg.events, &ref, true, a->d.reason,
                             a->d.action == NODECLAIMS_RELEASE ? "RemoveFinalizer" : "Reconcile",
                             a->d.message);
}

static void next_action(struct ncjob *j);

static void on_written(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct ncjob *j = userdata;
    const struct action *a = &j->actions[j->next - 1];
    (void)obj;
    if (err && !kube_err_is_not_found(err)) {
        log_warning("Claim write failed; looking again", KV_STR("claim", a->name),
                    KV_INT("http", err->http), KV_STR("reason", err->reason),
                    KV_STR("message", err->message));
        j->failed = true;
    } else if (!err) {
        log_info(a->d.action == NODECLAIMS_RELEASE ? "Removed the finalizer of a claim whose node "
                                                     "is gone"
                                                   : "A claim no agent serves",
                 KV_STR("claim", a->name), KV_STR("reason", a->d.reason));
        emit(j, a);
    }
    next_action(j);
}

static void next_action(struct ncjob *j)
{
    while (j->next < j->n) {
        const struct action *a = &j->actions[j->next++];
        const struct kube_resource *res =
                a->usb ? &kube_res_usbdeviceclaims : &kube_res_pcideviceclaims;
        char now[40], *patch;
        bool release = a->d.action == NODECLAIMS_RELEASE;
        timefmt_now(now, sizeof(now));
        patch = release ? claimstatus_finalizer_patch(
                                  a->claim, a->usb ? USBOBJ_FINALIZER : PCIOBJ_FINALIZER, false)
                        : nodeclaims_status_patch(a->claim, &a->d, now);
        int r = patch ? kube_client_patch(j->nc->cfg.env.http, res, NULL, a->name,
                                          release ? KUBE_PATCH_JSON : KUBE_PATCH_MERGE, patch,
                                          !release, on_written, j)
                      : -ENOMEM;
        free(patch);
        if (r == 0)
            return; /* on_written goes on */
        j->failed = true;
    }
    if (j->failed)
        runner_job_done(j->job, RUNNER_RETRY, 0);
    else if (j->requeue_after > 0)
        runner_job_done(j->job, RUNNER_REQUEUE_AFTER, j->requeue_after);
    else
        runner_job_done(j->job, RUNNER_DONE, 0);
}

static void act(struct runner_job *job, void *plan, void *ctx)
{
    struct ncjob *j = plan;
    (void)ctx;
    j->job = job;
    next_action(j);
}

static bool can_start(void *ctx)
{
    const struct nodeclaims *nc = ctx;
    bool synced = nc->pci_claims && kube_informer_has_synced(nc->pci_claims) &&
                  kube_informer_has_synced(nc->usb_claims) && kube_informer_has_synced(nc->leases);
    return synced && leasepart_leads(nc->cfg.env.mgr);
}

static const struct runner_ops ops = {
        .plan = plan_node,
        .act = act,
        .plan_free = ncjob_free,
        .can_start = can_start,
};

/* --- heartbeats ------------------------------------------------------------------------------ */

static void enqueue_lease(struct nodeclaims *nc, const char *key)
{
    const char *slash = strchr(key, '/');
    runner_enqueue(nc->runner, slash ? slash + 1 : key);
}

static void on_lease_add(const char *key, const cJSON *obj, void *userdata)
{
    struct nodeclaims *nc = userdata;
    double *t = malloc(sizeof(*t));
    (void)obj;
    if (t) {
        *t = ev_now(nc->cfg.env.loop);
        if (map_put(nc->seen, key, t) < 0)
            free(t);
    }
    enqueue_lease(nc, key);
}

static void on_lease_update(const char *key, const cJSON *old_obj, const cJSON *obj, void *userdata)
{
    (void)old_obj;
    on_lease_add(key, obj, userdata); /* only called when the resourceVersion changed */
}

static void on_lease_delete(const char *key, const cJSON *obj, void *userdata)
{
    struct nodeclaims *nc = userdata;
    (void)obj;
    (void)map_remove(nc->seen, key);
    enqueue_lease(nc, key);
}

static void on_lease_error(const struct kube_err *err, void *userdata)
{
    informer_log_error(&((struct nodeclaims *)userdata)->lease_log, err);
}

static void on_lease_skip(const char *what, void *userdata)
{
    informer_log_skip(&((struct nodeclaims *)userdata)->lease_log, what);
}

/* --- what is cached of Nodes and Leases ------------------------------------------------------ */

/* Deletes the members of `o` not named in `names` (NULL-terminated). */
static void keep_members(cJSON *o, const char *const *names)
{
    for (cJSON *c = o ? o->child : NULL, *next; c; c = next) {
        next = c->next;
        bool named = false;
        for (const char *const *n = names; *n && !named; n++)
            named = c->string && strcmp(c->string, *n) == 0;
        if (!named)
            cJSON_Delete(cJSON_DetachItemViaPointer(o, c));
    }
}

static const char *const identity[] = {
        "name", "namespace", "uid", "resourceVersion", "deletionTimestamp", NULL};

/* A Node: whether it exists is all the claims need (its name; the runner's resourceVersion).
 * Its labels and annotations, a kilobyte or more each on a real cluster, are not kept. */
static void node_transform(cJSON *node)
{
    static const char *const top[] = {"metadata", NULL};
    keep_members(node, top);
    keep_members(cJSON_GetObjectItemCaseSensitive(node, "metadata"), identity);
}

/* A heartbeat Lease: its holder, duration and renewal (agent_of). */
static void lease_transform(cJSON *lease)
{
    static const char *const top[] = {"metadata", "spec", NULL};
    static const char *const spec[] = {"holderIdentity", "leaseDurationSeconds", "renewTime", NULL};
    keep_members(lease, top);
    keep_members(cJSON_GetObjectItemCaseSensitive(lease, "metadata"), identity);
    keep_members(cJSON_GetObjectItemCaseSensitive(lease, "spec"), spec);
}

/* --- life ------------------------------------------------------------------------------------ */

struct nodeclaims *nodeclaims_new(const struct nodeclaims_config *cfg)
{
    struct nodeclaims *nc = calloc(1, sizeof(*nc));
    if (!nc)
        return NULL;
    nc->cfg = *cfg;
    nc->pci_claims = manager_cache(cfg->env.mgr, &kind_pcideviceclaims);
    nc->usb_claims = manager_cache(cfg->env.mgr, &kind_usbdeviceclaims);
    nc->lease_log.name = "nodeclaims/leases";
    struct runner_config rc = {.name = "nodeclaims",
                               .loop = cfg->env.loop,
                               .http = cfg->env.http,
                               .informer = {.resource = &kube_res_nodes,
                                            .metadata_only = true,
                                            .transform = node_transform},
                               .max_in_flight = MAX_IN_FLIGHT,
                               .max_backoff = 60,
                               .metrics = cfg->env.metrics,
                               .ops = &ops,
                               .ctx = nc};
    struct kube_informer_config lc = {.resource = &kube_res_leases,
                                      .namespace = cfg->lease_namespace,
                                      .transform = lease_transform,
                                      .handlers = {.on_add = on_lease_add,
                                                   .on_update = on_lease_update,
                                                   .on_delete = on_lease_delete,
                                                   .on_error = on_lease_error,
                                                   .on_skip = on_lease_skip},
                                      .userdata = nc};
    nc->runner = runner_new(&rc);
    nc->leases = kube_informer_new(cfg->env.loop, cfg->env.http, &lc);
    nc->seen = map_new(free);
    if (!nc->runner || !nc->leases || !nc->seen) {
        nodeclaims_free(nc);
        return NULL;
    }
    return nc;
}

static int nodeclaims_start(void *self)
{
    struct nodeclaims *nc = self;
    int r = kube_informer_start(nc->leases);
    return r < 0 ? r : runner_start(nc->runner);
}

/* A claim changed (`usb`: a USBDeviceClaim): its node is looked at again. */
static void claim_changed(struct nodeclaims *nc, bool usb, const char *key, const cJSON *claim)
{
    char node[254];
    if (claim_node(usb, key, claim, node, sizeof(node)))
        runner_enqueue(nc->runner, node);
}

static void on_pci_claim(void *self, const struct watch_event *ev)
{
    claim_changed(self, false, ev->key, ev->obj);
}

static void on_usb_claim(void *self, const struct watch_event *ev)
{
    claim_changed(self, true, ev->key, ev->obj);
}

/* This replica leads now: every node with claims or a Node object. */
static void on_leading(void *self, const struct watch_event *ev)
{
    struct nodeclaims *nc = self;
    size_t pos;
    const char *key;
    const cJSON *claim;
    (void)ev;
    runner_enqueue_all(nc->runner);
    for (pos = 0; kube_informer_next(nc->pci_claims, &pos, &key, &claim);)
        claim_changed(nc, false, key, claim);
    for (pos = 0; kube_informer_next(nc->usb_claims, &pos, &key, &claim);)
        claim_changed(nc, true, key, claim);
}

static void *make(const struct part_env *env)
{
    struct nodeclaims_config c = {.env = *env,
                                  .events = eventspart_recorder(env->mgr),
                                  .lease_namespace = env->opt->lease_namespace};
    return c.events ? nodeclaims_new(&c) : NULL;
}

static const struct watch watches[] = {
        {.kind = &kind_pcideviceclaims, .map = on_pci_claim},
        {.kind = &kind_usbdeviceclaims, .map = on_usb_claim},
        {.topic = &leasepart_leading, .map = on_leading},
        {0},
};

static bool nodeclaims_ready(struct buf *why, void *userdata)
{
    const struct nodeclaims *nc = userdata;
    if (runner_has_synced(nc->runner) && kube_informer_has_synced(nc->leases))
        return true;
    (void)buf_adds(why, "Node or heartbeat Lease informer has not synced");
    return false;
}

static void nodeclaims_stop(void *userdata)
{
    struct nodeclaims *nc = userdata;
    runner_stop(nc->runner);
    kube_informer_stop(nc->leases);
}

static void nodeclaims_free(void *userdata)
{
    struct nodeclaims *nc = userdata;
    if (!nc)
        return;
    nc->runner = runner_free(nc->runner);
    nc->leases = kube_informer_free(nc->leases);
    nc->seen = map_free(nc->seen);
    free(nc);
}

static struct runner *part_runner(const void *self)
{
    return ((const struct nodeclaims *)self)->runner;
}

const struct part_ops nodeclaims_part = {.name = "nodeclaims",
                                         .make = make,
                                         .watches = watches,
                                         .runner = part_runner,
                                         .start = nodeclaims_start,
                                         .ready = nodeclaims_ready,
                                         .stop = nodeclaims_stop,
                                         .free = nodeclaims_free};
