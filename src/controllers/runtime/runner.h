/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/runner.h - the controller runner every reconciler runs on
 * (controller-runtime's Controller, in C on the libev loop).
 *
 * The runner owns an informer of the reconciler's kind, a work queue fed by its events, write
 * expectations and the dispatch. For each key it takes from the queue it
 *   1. holds the key while the informer has not shown the reconciler's last write of it
 *      (controllers/runtime/expect.h), re-queueing it for when that wait ends at the latest;
 *   2. asks the reconciler's `plan` (pure: from caches only) what to do; a NULL plan means the
 *      key has converged;
 *   3. hands the plan to `act`, which carries it out (API writes, worker jobs) and ends with
 *      runner_job_done(), at once or later, saying how the key goes on:
 *        RUNNER_DONE           converged (or our write will bring it back): failures forgotten
 *        RUNNER_RETRY          failed: again after the key's exponential backoff
 *        RUNNER_REQUEUE_AFTER  waiting on the world (a VM holds a device): again after N s
 *        RUNNER_STALE          a write was refused as stale (409 Conflict): again when the
 *                              informer moves past where it was (its event queues the key;
 *                              30 s at most), once after the backoff if it had moved since
 *                              the plan
 *      A write's response goes to runner_job_wrote() first, so the key waits for it.
 * At most `max_in_flight` keys are in act at once; keys are handed out only once every
 * informer the runner watches has synced and `can_start` (if any) agrees.
 *
 * Metrics, with controller-runtime's names and the label controller=<name>:
 * controller_runtime_reconcile_total{result=success|error|requeue_after},
 * controller_runtime_reconcile_errors_total, controller_runtime_reconcile_time_seconds,
 * controller_runtime_active_workers, controller_runtime_max_concurrent_reconciles,
 * workqueue_depth, workqueue_adds_total, workqueue_queue_duration_seconds,
 * workqueue_retries_total (label name=<name> too); and hostdevd_expectation_waits_total,
 * hostdevd_watch_restarts_total, hostdevd_relists_total.
 *
 * runner_stop() stops handing out keys; work in flight finishes (runner_in_flight() says how
 * much), and the process exits when every part has drained. Does not log, except that act
 * steps do.
 */
#pragma once

#include <stdbool.h>

#include "kube/informer.h"

struct buf;
struct clock;
struct cJSON;
struct ev_loop;
struct kube_http;
struct metrics;
struct runner;
struct runner_job;

enum runner_result { RUNNER_DONE, RUNNER_RETRY, RUNNER_REQUEUE_AFTER, RUNNER_STALE };

enum runner_event { RUNNER_EVENT_ADD, RUNNER_EVENT_UPDATE, RUNNER_EVENT_DELETE };

struct runner_ops {
    /* Pure: what to do for `key`, given `obj` (the cached object of the runner's kind, NULL
     * when there is none) and whatever else the reconciler caches. Returns 0 and a plan in
     * *ret_plan (NULL: nothing to do), or a negative errno (an error: the key is retried). */
    int (*plan)(void *ctx, const char *key, const struct cJSON *obj, void **ret_plan);
    /* Carries `plan` out and ends with runner_job_done(). The runner frees the plan with
     * plan_free after that. */
    void (*act)(struct runner_job *job, void *plan, void *ctx);
    void (*plan_free)(void *plan);
    /* Optional: an event of the runner's informer, after the runner queued its key: for
     * other keys that depend on it (a claim completes another claim's IOMMU group). */
    void (*on_event)(void *ctx, const char *key, const struct cJSON *obj, enum runner_event ev);
    /* Optional: whether keys may be handed out yet, besides the informers' sync (the agent's
     * PCIDevices wait for the first successful scan: an empty one would delete them all). */
    bool (*can_start)(void *ctx);
    /* Optional: called once, the first time the queue is empty and nothing is in flight. */
    void (*on_converged)(void *ctx);
    /* Readiness (runner_ready, the process's /readyz): the informer of `kind` ("PCIDevice")
     * has synced; and, when `unconverged` says what is missing until then ("the first
     * inventory is not written yet"), the first round is written, `waiting` being said while
     * can_start holds the keys back. */
    const char *kind;
    const char *waiting;
    const char *unconverged;
    /* Optional, for a kind another project installs (KubeVirt's): while its LIST answers 404
     * (the CRD is not installed) the runner is ready with nothing to do, says this once at
     * info level instead of a warning, and the informer keeps retrying (backoff up to 30 s),
     * so the kind is picked up when its CRD appears, without a restart. */
    const char *absent;
};

struct runner_config {
    const char *name; /* the controller label: "pcidevice", "pcideviceclaim" */
    struct ev_loop *loop;
    struct kube_http *http;
    /* The kind, namespace and selectors of the runner's informer (its handlers and userdata
     * are the runner's). */
    struct kube_informer_config informer;
    /* Or a cache another owns (the process's, runtime/manager.h: manager_runner()), whose
     * events the owner hands to runner_cache_handlers with the runner as userdata; the runner
     * neither starts nor frees it. */
    struct kube_informer *cache;
    int max_in_flight;       /* keys in act at once; <= 0: 1 */
    double max_backoff;      /* cap of a key's retry delay, seconds; <= 0: 300 */
    struct metrics *metrics; /* where to register (may be NULL) */
    const struct runner_ops *ops;
    void *ctx; /* the reconciler, given to every op */
    /* The clock of the queue's delays and the write expectations; NULL: the loop's (tests
     * pass a fake one, base/clock.h). Borrowed: must outlive the runner. */
    const struct clock *clock;
};

/* A new, stopped runner; NULL on OOM or a bad configuration. */
struct runner *runner_new(const struct runner_config *cfg);
/* Starts the informer and the dispatch. Returns 0 or a negative errno. */
int runner_start(struct runner *r);
/* Stops handing out keys (SIGTERM); work in flight goes on. */
void runner_stop(struct runner *r);
/* Whether the runner is ready as its ops declare; false with the reason in `why`. */
bool runner_ready(const struct runner *r, struct buf *why);
/* Whether the runner's kind is not installed (its LIST answered 404; runner_ops.absent). */
bool runner_kind_absent(const struct runner *r);
/* Frees the runner; a job still in flight must have ended (the process drains first). */
struct runner *runner_free(struct runner *r);

/* How a runner logs its informer's failed requests and skipped objects, for informers outside
 * a runner too (a cache of another kind): a failure that differs from the last one (code,
 * reason, message) is a warning, the same again is logged at -v 1 only, so a missing CRD is
 * one line, not one a retry. `name` goes into each line as controller=. */
struct informer_log {
    const char *name;
    int last_http;
    char last_reason[64];
    unsigned long last_hash; /* of the last message */
};
void informer_log_error(struct informer_log *l, const struct kube_err *err);
void informer_log_skip(const struct informer_log *l, const char *what);

/* What a cache another owns calls with the runner as userdata (runner_config.cache). */
extern const struct kube_informer_handlers runner_cache_handlers;

/* Queues `key` now / every key the informer caches. */
void runner_enqueue(struct runner *r, const char *key);
void runner_enqueue_all(struct runner *r);

/* The runner's informer (its cache: read-only for others). */
struct kube_informer *runner_informer(const struct runner *r);
bool runner_has_synced(const struct runner *r);
/* Whether the runner has been idle once since the start: no key ready, processing or failing,
 * nothing in flight, every write shown by the informer (delayed re-checks do not count). */
bool runner_converged(const struct runner *r);
/* Keys in act now. */
int runner_in_flight(const struct runner *r);

/* The key of a job, valid until runner_job_done(). */
const char *runner_job_key(const struct runner_job *job);
/* The time the job started (the loop's clock). */
double runner_job_started(const struct runner_job *job);
/* A write of the job's key succeeded: `obj` is the object the API server returned (its
 * resourceVersion must reach the cache before the key is reconciled again), or NULL after a
 * delete (the deletion must). */
void runner_job_wrote(struct runner_job *job, const struct cJSON *obj);
/* Ends the job: requeues its key by `result` (`after` seconds for RUNNER_REQUEUE_AFTER),
 * counts it, and frees the job and its plan. */
void runner_job_done(struct runner_job *job, enum runner_result result, double after);
