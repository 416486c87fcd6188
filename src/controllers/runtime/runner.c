/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/runner.c - the controller runner (see runner.h). Logs one line per failed
 * LIST or WATCH of its informer; the reconcilers log what they do.
 */
#include "controllers/runtime/runner.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stddef.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/map.h"
#include "base/metrics.h"
#include "controllers/runtime/expect.h"
#include "kube/client.h"
#include "kube/status.h"
#include "kube/workqueue.h"

#define DEFAULT_MAX_BACKOFF 300.0

struct runner_metrics {
    struct metrics_series *success, *error, *requeue_after, *errors, *time;
    struct metrics_series *active, *max_active;
    struct metrics_series *depth, *adds, *retries, *wait;
    struct metrics_series *expect_waits, *watch_restarts, *relists;
};

struct runner {
    char *name;
    struct ev_loop *loop;
    const struct clock *clock; /* NULL: the loop's */
    const struct runner_ops *ops;
    void *ctx;
    struct kube_informer *inf;
    bool shared; /* inf is a cache another owns (the manager's) */
    struct wq *wq;
    struct expect *expect;
    struct map *failing; /* keys whose last reconcile failed (waiting for their retry) */
    struct metrics *registry;
    struct runner_metrics m;
    int max_in_flight, in_flight;
    bool started, stopping, converged;
    bool absent;             /* the LIST answered 404 last (runner_ops.absent) */
    struct informer_log log; /* of the informer's failures */
    ev_prepare dispatch;
    ev_timer queue_timer;
};

struct runner_job {
    struct runner *r;
    char *key;
    void *plan;
    double started;
    char *informer_rv; /* the informer's position when the plan was made */
};

/* After a write refused as stale (409), the longest wait for the informer's newer version. */
#define STALE_WAIT 10.0

/* The time of the queue and the expectations. */
static double clock_of(const struct runner *r)
{
    return r->clock ? clock_now(r->clock) : ev_now(r->loop);
}

/* --- informer events ------------------------------------------------------------------------ */

static void on_event(struct runner *r, const char *key, const cJSON *obj, enum runner_event ev)
{
    expect_observed(r->expect, key, obj, ev == RUNNER_EVENT_DELETE);
    (void)wq_add(r->wq, key);
    if (r->ops->on_event)
        r->ops->on_event(r->ctx, key, obj, ev);
}

static void on_add(const char *key, const cJSON *obj, void *userdata)
{
    on_event(userdata, key, obj, RUNNER_EVENT_ADD);
}

static void on_update(const char *key, const cJSON *old, const cJSON *obj, void *userdata)
{
    (void)old;
    on_event(userdata, key, obj, RUNNER_EVENT_UPDATE);
}

static void on_delete(const char *key, const cJSON *obj, void *userdata)
{
    on_event(userdata, key, obj, RUNNER_EVENT_DELETE);
}

/* A hash of an error message without the queries of the URLs in it (a WATCH's resourceVersion
 * and randomised timeout change with every retry). */
static unsigned long message_hash(const char *m)
{
    unsigned long hash = 5381;
    bool query = false;
    for (; *m; m++) {
        query = (query || *m == '?') && *m != '"';
        if (!query)
            hash = hash * 33 + (unsigned char)*m;
    }
    return hash;
}

/* A failed LIST or WATCH (the informer retries with backoff): a warning when it differs from
 * the last one (reason, code and message), else only at verbosity 1. */
void informer_log_error(struct informer_log *l, const struct kube_err *err)
{
    const char *reason = err->reason;
    unsigned long hash = message_hash(err->message);
    bool repeat = err->http == l->last_http && strcmp(reason, l->last_reason) == 0 &&
                  hash == l->last_hash;
    l->last_http = err->http;
    l->last_hash = hash;
    (void)snprintf(l->last_reason, sizeof(l->last_reason), "%s", reason);
    if (repeat) {
        log_v(1, "Watch failed again; retrying", KV_STR("controller", l->name),
              KV_INT("http", err->http), KV_STR("reason", reason));
        return;
    }
    log_warning("Watch failed; retrying (the same failure again is logged at -v 1)",
                KV_STR("controller", l->name), KV_INT("http", err->http), KV_STR("reason", reason),
                KV_STR("message", err->http == 404 ? "not found: is the resource's CRD installed?"
                                                   : err->message));
}

void informer_log_skip(const struct informer_log *l, const char *what)
{
    log_warning("Malformed object from the API server skipped", KV_STR("controller", l->name),
                KV_STR("object", what));
}

static void on_informer_error(const struct kube_err *err, void *userdata)
{
    struct runner *r = userdata;
    if (r->ops->absent && err->http == 404) { /* the kind is not installed: a state */
        if (!r->absent)
            log_info(r->ops->absent, KV_STR("controller", r->name));
        r->absent = true;
        return;
    }
    r->absent = false;
    informer_log_error(&r->log, err);
}

static void on_informer_skip(const char *what, void *userdata)
{
    informer_log_skip(&((struct runner *)userdata)->log, what);
}

/* --- jobs ----------------------------------------------------------------------------------- */

const char *runner_job_key(const struct runner_job *job)
{
    return job->key;
}

double runner_job_started(const struct runner_job *job)
{
    return job->started;
}

void runner_job_wrote(struct runner_job *job, const cJSON *obj)
{
    struct runner *r = job->r;
    expect_write(r->expect, job->key, obj ? kube_meta_str(obj, "resourceVersion") : NULL,
                 kube_informer_get(r->inf, job->key), clock_of(r));
}

static void count(struct runner *r, enum runner_result result, double seconds)
{
    bool failed = result == RUNNER_RETRY || result == RUNNER_STALE;
    metrics_inc(result == RUNNER_DONE ? r->m.success : failed ? r->m.error : r->m.requeue_after);
    if (failed)
        metrics_inc(r->m.errors);
    metrics_observe(r->m.time, seconds);
}

static void requeue(struct runner *r, const char *key, enum runner_result result, double after)
{
    if (result == RUNNER_RETRY) {
        (void)map_put(r->failing, key, r); /* (a lost entry only makes readiness early) */
        (void)wq_add_rate_limited(r->wq, key);
        return;
    }
    map_remove(r->failing, key);
    wq_forget(r->wq, key);
    if (result == RUNNER_REQUEUE_AFTER)
        (void)wq_add_after(r->wq, key, after);
}

/* A stale write: when the informer has moved since the plan, the cache may hold the newer
 * version already (a plain retry, once: the informer moves for any object, so a key that
 * conflicts again after a retry had not its own newer version yet). Otherwise the version the
 * API server has is still on its way: the key waits for the informer to move past where it
 * is now (an expectation, which also holds back the key's other triggers, such as another
 * informer's events), at most EXPECT_TTL (the re-check after STALE_WAIT finds it still held
 * while the informer lags). Without that wait a watch broken for a while
 * meant one 409 per trigger (seen: five in a row on one ResourceSlice). */
static enum runner_result stale(struct runner_job *job, double *after)
{
    struct runner *r = job->r;
    const char *now = kube_informer_resource_version(r->inf);
    bool moved = !job->informer_rv || strcmp(now, job->informer_rv) != 0;
    if (moved && wq_num_requeues(r->wq, job->key) == 0)
        return RUNNER_RETRY;
    char *end = NULL;
    errno = 0;
    unsigned long long rv = now ? strtoull(now, &end, 10) : 0;
    char next[32];
    if (now && *now && end && !*end && errno == 0 &&
        snprintf(next, sizeof(next), "%llu", rv + 1) < (int)sizeof(next))
        expect_write(r->expect, job->key, next, kube_informer_get(r->inf, job->key), clock_of(r));
    *after = STALE_WAIT;
    return RUNNER_REQUEUE_AFTER;
}

void runner_job_done(struct runner_job *job, enum runner_result result, double after)
{
    struct runner *r = job->r;
    count(r, result, ev_time() - job->started);
    if (result == RUNNER_STALE)
        result = stale(job, &after);
    requeue(r, job->key, result, after);
    wq_done(r->wq, job->key);
    r->in_flight--;
    if (job->plan && r->ops->plan_free)
        r->ops->plan_free(job->plan);
    free(job->key);
    free(job->informer_rv);
    free(job);
}

/* --- dispatch ------------------------------------------------------------------------------- */

/* Whether `key` still waits for our last write to show in the cache; re-queues it if so. */
static bool held(struct runner *r, const char *key, const cJSON *obj)
{
    expect_caught_up(r->expect, key, obj, kube_informer_resource_version(r->inf));
    double wait = expect_waiting(r->expect, key, clock_of(r));
    if (wait <= 0)
        return false;
    metrics_inc(r->m.expect_waits);
    (void)wq_add_after(r->wq, key, wait); /* the informer's event re-queues it sooner */
    return true;
}

static void reconcile(struct runner *r, const char *key)
{
    const cJSON *obj = kube_informer_get(r->inf, key);
    if (held(r, key, obj)) {
        wq_done(r->wq, key);
        return;
    }
    double t0 = ev_time();
    void *plan = NULL;
    int e = r->ops->plan(r->ctx, key, obj, &plan);
    struct runner_job *job = e == 0 && plan ? calloc(1, sizeof(*job)) : NULL;
    if (job && !(job->key = strdup(key))) {
        free(job);
        job = NULL;
    }
    if (!job) { /* converged, or no plan could be made */
        bool failed = e < 0 || plan;
        if (plan && r->ops->plan_free)
            r->ops->plan_free(plan);
        count(r, failed ? RUNNER_RETRY : RUNNER_DONE, ev_time() - t0);
        requeue(r, key, failed ? RUNNER_RETRY : RUNNER_DONE, 0);
        wq_done(r->wq, key);
        return;
    }
    job->r = r;
    job->plan = plan;
    job->started = t0;
    job->informer_rv = strdup(kube_informer_resource_version(r->inf)); /* NULL: a plain retry */
    r->in_flight++;
    r->ops->act(job, plan, r->ctx);
}

static bool may_run(const struct runner *r)
{
    return r->started && !r->stopping && kube_informer_has_synced(r->inf) &&
           (!r->ops->can_start || r->ops->can_start(r->ctx));
}

/* Converged: nothing to hand out or in hand, every write shown by the informer, no key
 * failing. Keys waiting in the delay heap only as a safety net (the TTL re-check after a write
 * that has since shown, a periodic re-check) do not count: they would hold readiness for
 * 30 s after the first inventory was written and seen. */
static bool idle(struct runner *r)
{
    return wq_len(r->wq) == 0 && wq_processing(r->wq) == 0 && r->in_flight == 0 &&
           expect_pending(r->expect, clock_of(r)) == 0 && map_size(r->failing) == 0;
}

static void on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
    struct runner *r = w->data;
    const char *key;
    (void)revents;
    if (!may_run(r))
        return;
    while (r->in_flight < r->max_in_flight && !r->stopping && (key = wq_get(r->wq)))
        reconcile(r, key);
    double next = wq_next_in(r->wq);
    ev_timer_stop(loop, &r->queue_timer);
    if (next > 0) {
        ev_timer_set(&r->queue_timer, next, 0.);
        ev_timer_start(loop, &r->queue_timer);
    }
    if (!r->converged && idle(r)) {
        r->converged = true;
        if (r->ops->on_converged)
            r->ops->on_converged(r->ctx);
    }
}

static void on_queue_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents; /* waking up is enough: on_prepare takes the keys now due */
}

/* --- metrics -------------------------------------------------------------------------------- */

static void on_wait(double seconds, void *userdata)
{
    const struct runner *r = userdata;
    metrics_observe(r->m.wait, seconds);
}

static void collect(void *userdata)
{
    const struct runner *r = userdata;
    struct wq_stats ws;
    struct kube_informer_stats is;
    wq_get_stats(r->wq, &ws);
    kube_informer_get_stats(r->inf, &is);
    metrics_set(r->m.depth, (double)wq_len(r->wq));
    metrics_set(r->m.adds, (double)ws.adds);
    metrics_set(r->m.retries, (double)ws.retries);
    metrics_set(r->m.active, r->in_flight);
    metrics_set(r->m.watch_restarts, (double)is.watch_restarts);
    metrics_set(r->m.relists, (double)is.relists_gone);
}

enum labels { BY_CONTROLLER, BY_QUEUE };

/* The runner's series without a result label, one per controller. */
static const struct series_def {
    size_t offset; /* of the series pointer in struct runner_metrics */
    enum metrics_type type;
    enum labels labels;
    const char *name, *help;
} series_defs[] = {
        {offsetof(struct runner_metrics, errors), METRICS_COUNTER, BY_CONTROLLER,
         "controller_runtime_reconcile_errors_total",
         "Total number of reconciliation errors per controller."},
        {offsetof(struct runner_metrics, time), METRICS_HISTOGRAM, BY_CONTROLLER,
         "controller_runtime_reconcile_time_seconds",
         "Length of time per reconciliation per controller."},
        {offsetof(struct runner_metrics, active), METRICS_GAUGE, BY_CONTROLLER,
         "controller_runtime_active_workers", "Number of currently used workers per controller."},
        {offsetof(struct runner_metrics, max_active), METRICS_GAUGE, BY_CONTROLLER,
         "controller_runtime_max_concurrent_reconciles",
         "Maximum number of concurrent reconciles per controller."},
        {offsetof(struct runner_metrics, expect_waits), METRICS_COUNTER, BY_CONTROLLER,
         "hostdevd_expectation_waits_total",
         "Reconciles held until the informer showed the controller's last write."},
        {offsetof(struct runner_metrics, watch_restarts), METRICS_COUNTER, BY_CONTROLLER,
         "hostdevd_watch_restarts_total",
         "Watches of the controller's informer that ended and restarted."},
        {offsetof(struct runner_metrics, relists), METRICS_COUNTER, BY_CONTROLLER,
         "hostdevd_relists_total", "LISTs of the controller's informer after 410 Gone."},
        {offsetof(struct runner_metrics, depth), METRICS_GAUGE, BY_QUEUE, "workqueue_depth",
         "Current depth of workqueue."},
        {offsetof(struct runner_metrics, adds), METRICS_COUNTER, BY_QUEUE, "workqueue_adds_total",
         "Total number of adds handled by workqueue."},
        {offsetof(struct runner_metrics, retries), METRICS_COUNTER, BY_QUEUE,
         "workqueue_retries_total", "Total number of retries handled by workqueue."},
        {offsetof(struct runner_metrics, wait), METRICS_HISTOGRAM, BY_QUEUE,
         "workqueue_queue_duration_seconds",
         "How long in seconds an item stays in workqueue before being requested."},
};

static struct metrics_series *make_series(struct runner *r, const struct series_def *d)
{
    static const char *const by_controller[] = {"controller", NULL};
    static const char *const by_queue[] = {"controller", "name", NULL};
    bool hist = d->type == METRICS_HISTOGRAM, queue = d->labels == BY_QUEUE;
    struct metrics_family *f =
            metrics_family(r->registry, d->type, d->name, d->help, queue ? by_queue : by_controller,
                           !hist   ? NULL
                           : queue ? metrics_workqueue_buckets
                                   : metrics_reconcile_buckets,
                           !hist   ? 0
                           : queue ? metrics_workqueue_buckets_n
                                   : metrics_reconcile_buckets_n);
    return metrics_series(f, r->name, r->name); /* the second value only for two labels */
}

static void register_metrics(struct runner *r)
{
    static const char *const cr[] = {"controller", "result", NULL};
    struct metrics_family *total =
            metrics_family(r->registry, METRICS_COUNTER, "controller_runtime_reconcile_total",
                           "Total number of reconciliations per controller.", cr, NULL, 0);
    r->m.success = metrics_series(total, r->name, "success");
    r->m.error = metrics_series(total, r->name, "error");
    r->m.requeue_after = metrics_series(total, r->name, "requeue_after");
    for (size_t i = 0; i < sizeof(series_defs) / sizeof(series_defs[0]); i++)
        *(struct metrics_series **)((char *)&r->m + series_defs[i].offset) =
                make_series(r, &series_defs[i]);
    metrics_set(r->m.max_active, r->max_in_flight);
}

/* --- the runner ----------------------------------------------------------------------------- */

const struct kube_informer_handlers runner_cache_handlers = {.on_add = on_add,
                                                             .on_update = on_update,
                                                             .on_delete = on_delete,
                                                             .on_error = on_informer_error,
                                                             .on_skip = on_informer_skip};

static int make_parts(struct runner *r, const struct runner_config *cfg)
{
    struct kube_informer_config ic = cfg->informer;
    ic.handlers = (struct kube_informer_handlers){.on_add = on_add,
                                                  .on_update = on_update,
                                                  .on_delete = on_delete,
                                                  .on_error = on_informer_error,
                                                  .on_skip = on_informer_skip};
    ic.userdata = r;
    struct wq_config wc;
    wq_config_default(&wc);
    wc.max_delay = cfg->max_backoff > 0 ? cfg->max_backoff : DEFAULT_MAX_BACKOFF;
    wc.on_wait = on_wait;
    wc.clock = cfg->clock;
    wc.userdata = r;
    r->shared = cfg->cache != NULL;
    r->inf = r->shared ? cfg->cache : kube_informer_new(cfg->loop, cfg->http, &ic);
    r->wq = wq_new(&wc);
    r->expect = expect_new();
    r->failing = map_new(NULL);
    if (!r->inf || !r->wq || !r->expect || !r->failing)
        return -ENOMEM;
    if (!r->registry)
        return 0;
    register_metrics(r);
    return metrics_add_collector(r->registry, collect, r);
}

struct runner *runner_new(const struct runner_config *cfg)
{
    if (!cfg->name || !cfg->ops || !cfg->ops->plan || !cfg->ops->act)
        return NULL;
    struct runner *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->loop = cfg->loop;
    r->clock = cfg->clock;
    r->ops = cfg->ops;
    r->ctx = cfg->ctx;
    r->registry = cfg->metrics;
    r->max_in_flight = cfg->max_in_flight > 0 ? cfg->max_in_flight : 1;
    r->name = strdup(cfg->name);
    r->log.name = r->name;
    if (!r->name || make_parts(r, cfg) < 0)
        return runner_free(r);
    ev_prepare_init(&r->dispatch, on_prepare);
    r->dispatch.data = r;
    ev_timer_init(&r->queue_timer, on_queue_timer, 0., 0.);
    r->queue_timer.data = r;
    return r;
}

int runner_start(struct runner *r)
{
    r->started = true;
    ev_prepare_start(r->loop, &r->dispatch);
    return r->shared ? 0 : kube_informer_start(r->inf);
}

void runner_stop(struct runner *r)
{
    if (!r)
        return;
    r->stopping = true;
    wq_shut_down(r->wq);
    ev_timer_stop(r->loop, &r->queue_timer);
}

struct runner *runner_free(struct runner *r)
{
    if (!r)
        return NULL;
    if (r->registry)
        metrics_remove_collector(r->registry, collect, r);
    ev_prepare_stop(r->loop, &r->dispatch);
    ev_timer_stop(r->loop, &r->queue_timer);
    if (!r->shared)
        r->inf = kube_informer_free(r->inf);
    r->wq = wq_free(r->wq);
    r->expect = expect_free(r->expect);
    map_free(r->failing);
    free(r->name);
    free(r);
    return NULL;
}

void runner_enqueue(struct runner *r, const char *key)
{
    if (r)
        (void)wq_add(r->wq, key);
}

void runner_enqueue_all(struct runner *r)
{
    size_t pos = 0;
    const char *key;
    const cJSON *obj;
    while (r && kube_informer_next(r->inf, &pos, &key, &obj))
        (void)wq_add(r->wq, key);
}

struct kube_informer *runner_informer(const struct runner *r)
{
    return r->inf;
}

bool runner_has_synced(const struct runner *r)
{
    return kube_informer_has_synced(r->inf);
}

bool runner_ready(const struct runner *r, struct buf *why)
{
    const struct runner_ops *ops = r->ops;
    if (!kube_informer_has_synced(r->inf) && r->absent)
        return true; /* nothing to reconcile until the kind is installed */
    if (!kube_informer_has_synced(r->inf))
        (void)buf_printf(why, "%s informer has not synced", ops->kind ? ops->kind : r->name);
    else if (!ops->unconverged || r->converged)
        return true;
    else if (ops->waiting && ops->can_start && !ops->can_start(r->ctx))
        (void)buf_adds(why, ops->waiting);
    else
        (void)buf_adds(why, ops->unconverged);
    return false;
}

bool runner_kind_absent(const struct runner *r)
{
    return r->absent && !kube_informer_has_synced(r->inf);
}

bool runner_converged(const struct runner *r)
{
    return r->converged;
}

int runner_in_flight(const struct runner *r)
{
    return r ? r->in_flight : 0;
}
