/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/leader.c - Lease-based leader election. See leader.h. Does not log.
 *
 * One round every retry period: GET the Lease; create it if missing; take or renew it with a
 * conditional PUT when it is ours, free, or expired by local observation. A leader renews
 * optimistically, as client-go does: a conditional PUT of the Lease its last write returned, no
 * GET; when that fails (someone else wrote it, or anything else) the same round falls back to
 * GET and PUT. At most one request is in flight; freeing or releasing cancels it (its callback
 * never runs), so a leader stopped at any moment is gone at once, whatever the server does.
 * Time is the loop's, or the config's clock (tests).
 */
#include "kube/leader.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/timefmt.h"
#include "kube/client.h"
#include "kube/http.h"

struct kube_leader {
    struct ev_loop *loop;
    struct kube_http *http;
    char *ns, *name, *identity;
    double duration, deadline, retry;
    void (*on_started)(void *userdata);
    void (*on_stopped)(void *userdata);
    void (*on_problem)(const char *problem, void *userdata);
    void *userdata;
    const struct clock *clock; /* NULL: the loop's time */
    char *problem;             /* why the last round could not read or write the Lease, or NULL */
    char problem_kind[128];    /* its verb, HTTP status and reason: a change of it is reported */

    ev_timer timer;
    struct kube_req *req; /* the request in flight, or NULL */
    bool running, leading, held_by_other;
    char *observed; /* holder and renewTime of the Lease last seen */
    cJSON *owner;   /* the ownerReference every write carries, or NULL */
    cJSON *mine;    /* the Lease our last write returned, while leading (optimistic renewal) */
    double observed_at;
    double last_renew;
    void (*release_done)(void *userdata);
    void *release_userdata;
};

static void round_start(struct kube_leader *l);

static double now(const struct kube_leader *l)
{
    return l->clock ? clock_now(l->clock) : ev_now(l->loop);
}

static const char *spec_str(const cJSON *lease, const char *field)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(lease, "spec"), field);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* Seconds since the epoch of a MicroTime ("2026-11-21T14:19:19.051804Z"), or -1. */
static double parse_micro_time(const char *s)
{
    struct tm tm = {0};
    const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!rest)
        return -1;
    double frac = 0;
    if (*rest == '.') {
        char *end;
        frac = strtod(rest, &end);
        rest = end;
    }
    return *rest == 'Z' ? (double)timegm(&tm) + frac : -1;
}

/*
 * Remembers when the Lease's holder or renew time last changed, by our clock (client-go's
 * observedTime, immune to clock skew). A follower sees a renewal up to one poll late, so the
 * record's own renewTime is credited too, but never by more than lease_duration -
 * renew_deadline: even with a skewed clock we take over only after the old leader, unable to
 * renew for renew_deadline, has stepped down.
 */
static void observe(struct kube_leader *l, const cJSON *lease)
{
    char seen[1024];
    (void)snprintf(seen, sizeof(seen), "%s|%s", spec_str(lease, "holderIdentity"),
                   spec_str(lease, "renewTime"));
    if (l->observed && strcmp(l->observed, seen) == 0)
        return;
    free(l->observed);
    l->observed = strdup(seen);
    double age = 0;
    double renewed = parse_micro_time(spec_str(lease, "renewTime"));
    if (renewed > 0) {
        struct timeval tv;
        gettimeofday(&tv, NULL);
        age = (double)tv.tv_sec + (double)tv.tv_usec / 1e6 - renewed;
        age = age < 0 ? 0 : age > l->duration - l->deadline ? l->duration - l->deadline : age;
    }
    l->observed_at = now(l) - age;
    l->held_by_other = strcmp(spec_str(lease, "holderIdentity"), "") != 0 &&
                       strcmp(spec_str(lease, "holderIdentity"), l->identity) != 0;
}

static void schedule(struct kube_leader *l)
{
    if (!l->running)
        return;
    double delay = l->retry;
    if (!l->leading) /* followers spread out, as client-go's JitterUntil(retry, 1.2) */
        delay *= 1.0 + 1.2 * ((double)(random() % 1000) / 1000.0);
    double expires_in = l->observed_at + l->duration - now(l);
    if (!l->leading && l->held_by_other && expires_in > 0 && expires_in < delay)
        delay = expires_in + 0.05; /* try the moment the holder's lease runs out */
    ev_timer_stop(l->loop, &l->timer);
    ev_timer_set(&l->timer, delay, 0.);
    ev_timer_start(l->loop, &l->timer);
}

/* The next round starts with a GET. */
static void forget_mine(struct kube_leader *l)
{
    cJSON_Delete(l->mine);
    l->mine = NULL;
}

/* The last round read or wrote the Lease (NULL err), or could not: a conflict is another
 * candidate's write, not a problem; anything else is, and on_problem hears of each new kind. */
static void note_round(struct kube_leader *l, const char *verb, const struct kube_err *err)
{
    if (err && kube_err_is_conflict(err))
        return;
    char kind[sizeof(l->problem_kind)] = "";
    if (err)
        (void)snprintf(kind, sizeof(kind), "%s %d %s %d", verb, err->http, err->reason,
                       err->transport);
    if (strcmp(kind, l->problem_kind) == 0 && (!err || l->problem))
        return;
    (void)snprintf(l->problem_kind, sizeof(l->problem_kind), "%s", kind);
    free(l->problem);
    l->problem = NULL;
    if (err) {
        char text[KUBE_ERR_MESSAGE_MAX + 512];
        const char *what = err->message[0]  ? err->message
                           : err->transport ? strerror(-err->transport)
                                            : err->reason;
        if (err->http)
            (void)snprintf(text, sizeof(text), "cannot %s Lease %s/%s: %s (HTTP %d %s)", verb,
                           l->ns, l->name, what, err->http, err->reason);
        else
            (void)snprintf(text, sizeof(text), "cannot %s Lease %s/%s: %s", verb, l->ns, l->name,
                           what);
        l->problem = strdup(text);
    }
    if (l->on_problem)
        l->on_problem(l->problem, l->userdata);
}

static void step_down(struct kube_leader *l)
{
    forget_mine(l);
    if (!l->leading)
        return;
    l->leading = false;
    if (l->on_stopped)
        l->on_stopped(l->userdata);
}

/* The round failed: a leader that could not renew for the whole deadline steps down. */
static void round_failed(struct kube_leader *l)
{
    if (l->leading && now(l) - l->last_renew >= l->deadline)
        step_down(l);
    schedule(l);
}

/* Starts the one request of `l`: `method` on its Lease (`body` NULL: none; `named`: the Lease,
 * else the collection). Returns 0 or a negative errno. */
static int send(struct kube_leader *l, const char *method, bool named, const cJSON *body,
                kube_client_cb cb)
{
    return kube_client_send(l->http, method, &kube_res_leases, l->ns, named ? l->name : NULL, body,
                            cb, l, &l->req);
}

/* Cancels the request in flight, if any: its callback never runs. */
static void cancel(struct kube_leader *l)
{
    kube_http_cancel(l->http, l->req);
    l->req = NULL;
}

static void on_write(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct kube_leader *l = userdata;
    l->req = NULL;
    bool optimistic = l->mine != NULL;
    forget_mine(l);
    if (err || !obj) {
        if (optimistic && l->running) { /* the slow path, in the same round */
            round_start(l);
            return;
        }
        if (err)
            note_round(l, "write", err);
        round_failed(l);
        return;
    }
    note_round(l, "write", NULL);
    observe(l, obj);
    l->mine = cJSON_Duplicate(obj, true); /* (out of memory: the next round GETs) */
    l->last_renew = now(l);
    if (!l->leading) {
        l->leading = true;
        if (l->on_started)
            l->on_started(l->userdata);
    }
    schedule(l);
}

/* Sets the spec fields of `lease` for `holder` (NULL releases). */
static void fill_spec(struct kube_leader *l, cJSON *lease, const char *holder, bool acquired)
{
    char stamp[64];
    timefmt_micro_now(stamp, sizeof(stamp));
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(lease, "spec");
    if (!spec)
        spec = cJSON_AddObjectToObject(lease, "spec");
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(spec, "leaseTransitions");
    int transitions = cJSON_IsNumber(tr) ? (int)tr->valuedouble : 0;
    cJSON_DeleteItemFromObjectCaseSensitive(spec, "holderIdentity");
    cJSON_DeleteItemFromObjectCaseSensitive(spec, "leaseDurationSeconds");
    cJSON_DeleteItemFromObjectCaseSensitive(spec, "renewTime");
    cJSON_AddStringToObject(spec, "holderIdentity", holder ? holder : "");
    cJSON_AddNumberToObject(spec, "leaseDurationSeconds", holder ? (int)l->duration : 1);
    cJSON_AddStringToObject(spec, "renewTime", stamp);
    if (acquired) {
        cJSON_DeleteItemFromObjectCaseSensitive(spec, "acquireTime");
        cJSON_DeleteItemFromObjectCaseSensitive(spec, "leaseTransitions");
        cJSON_AddStringToObject(spec, "acquireTime", stamp);
        cJSON_AddNumberToObject(spec, "leaseTransitions", transitions + 1);
    }
}

static int write_lease(struct kube_leader *l, const cJSON *current, const char *holder,
                       kube_client_cb cb)
{
    _cleanup_json_ cJSON *lease = current ? cJSON_Duplicate(current, true) : cJSON_CreateObject();
    if (!lease)
        return -ENOMEM;
    bool acquired = holder && strcmp(spec_str(current, "holderIdentity"), holder) != 0;
    fill_spec(l, lease, holder, acquired);
    if (l->owner) {
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(lease, "metadata");
        if (!meta)
            meta = cJSON_AddObjectToObject(lease, "metadata");
        cJSON *refs = cJSON_CreateArray();
        cJSON_AddItemToArray(refs, cJSON_Duplicate(l->owner, true));
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "ownerReferences");
        cJSON_AddItemToObject(meta, "ownerReferences", refs);
    }
    int e;
    if (current) {
        e = send(l, "PUT", true, lease, cb);
    } else {
        cJSON_AddStringToObject(lease, "apiVersion", "coordination.k8s.io/v1");
        cJSON_AddStringToObject(lease, "kind", "Lease");
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(lease, "metadata");
        if (!meta)
            meta = cJSON_AddObjectToObject(lease, "metadata");
        cJSON_AddStringToObject(meta, "name", l->name);
        cJSON_AddStringToObject(meta, "namespace", l->ns);
        e = send(l, "POST", false, lease, cb);
    }
    return e;
}

static bool can_take(struct kube_leader *l, const cJSON *lease)
{
    const char *holder = spec_str(lease, "holderIdentity");
    return holder[0] == '\0' || strcmp(holder, l->identity) == 0 ||
           now(l) >= l->observed_at + l->duration;
}

static void on_get(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct kube_leader *l = userdata;
    l->req = NULL;
    if (!l->running)
        return;
    if (err && !kube_err_is_not_found(err)) {
        note_round(l, "read", err);
        round_failed(l);
        return;
    }
    if (obj)
        observe(l, obj);
    if (obj && !can_take(l, obj)) {
        note_round(l, "read", NULL); /* a standby that can read the Lease is well */
        step_down(l);
        schedule(l);
        return;
    }
    if (write_lease(l, obj, l->identity, on_write) < 0)
        round_failed(l);
}

static void round_start(struct kube_leader *l)
{
    if (l->req || !l->running)
        return;
    if (l->leading && l->mine) {
        if (write_lease(l, l->mine, l->identity, on_write) == 0)
            return;
        forget_mine(l);
    }
    if (send(l, "GET", true, NULL, on_get) < 0)
        round_failed(l);
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    round_start(w->data);
}

struct kube_leader *kube_leader_new(struct ev_loop *loop, struct kube_http *http,
                                    const struct kube_leader_config *cfg)
{
    struct kube_leader *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->loop = loop;
    l->http = http;
    l->duration = cfg->lease_duration > 0 ? cfg->lease_duration : 15.0;
    l->deadline = cfg->renew_deadline > 0 ? cfg->renew_deadline : 10.0;
    l->retry = cfg->retry_period > 0 ? cfg->retry_period : 2.0;
    l->on_started = cfg->on_started_leading;
    l->on_stopped = cfg->on_stopped_leading;
    l->on_problem = cfg->on_problem;
    l->userdata = cfg->userdata;
    l->clock = cfg->clock;
    l->ns = cfg->namespace ? strdup(cfg->namespace) : NULL;
    l->name = cfg->name ? strdup(cfg->name) : NULL;
    l->identity = cfg->identity ? strdup(cfg->identity) : NULL;
    ev_timer_init(&l->timer, on_timer, 0., 0.);
    l->timer.data = l;
    if (!l->ns || !l->name || !l->identity || !l->identity[0] || l->deadline >= l->duration ||
        l->retry >= l->deadline)
        return kube_leader_free(l);
    return l;
}

int kube_leader_start(struct kube_leader *l)
{
    l->running = true;
    round_start(l);
    return 0;
}

bool kube_leader_is_leader(const struct kube_leader *l)
{
    return l->leading;
}

const char *kube_leader_problem(const struct kube_leader *l)
{
    return l->problem;
}

static void on_released(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct kube_leader *l = userdata;
    (void)err;
    (void)obj;
    l->req = NULL;
    bool was = l->leading;
    l->leading = false;
    if (was && l->on_stopped) /* the Lease is given up: no longer leading, before the exit */
        l->on_stopped(l->userdata);
    if (l->release_done)
        l->release_done(l->release_userdata);
}

static void on_get_for_release(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct kube_leader *l = userdata;
    l->req = NULL;
    bool ours = !err && obj && strcmp(spec_str(obj, "holderIdentity"), l->identity) == 0;
    if (!ours || write_lease(l, obj, NULL, on_released) < 0)
        on_released(NULL, NULL, l);
}

void kube_leader_release(struct kube_leader *l, void (*done)(void *userdata), void *userdata)
{
    l->running = false;
    ev_timer_stop(l->loop, &l->timer);
    l->release_done = done;
    l->release_userdata = userdata;
    cancel(l); /* a renewal under way: what it did or not, the GET below sees */
    forget_mine(l);
    if (!l->leading || send(l, "GET", true, NULL, on_get_for_release) < 0)
        on_released(NULL, NULL, l);
}

struct kube_leader *kube_leader_free(struct kube_leader *l)
{
    if (!l)
        return NULL;
    ev_timer_stop(l->loop, &l->timer);
    cancel(l);
    free(l->ns);
    free(l->name);
    free(l->identity);
    free(l->observed);
    free(l->problem);
    cJSON_Delete(l->owner);
    cJSON_Delete(l->mine);
    free(l);
    return NULL;
}

int kube_leader_set_owner(struct kube_leader *l, const cJSON *owner)
{
    if (!cJSON_IsObject(owner))
        return -EINVAL;
    cJSON *copy = cJSON_Duplicate(owner, true);
    if (!copy)
        return -ENOMEM;
    cJSON_Delete(l->owner);
    l->owner = copy;
    return 0;
}
