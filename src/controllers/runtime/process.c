/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/process.c - the process skeleton every role runs in (see process.h).
 */
#include "controllers/runtime/process.h"

#include <errno.h>
#include <ev.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/metrics.h"
#include "controllers/runtime/endpoint.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "controllers/runtime/runner.h"
#include "controllers/runtime/worker.h"
#include "kube/config.h"
#include "kube/http.h"

#define DRAIN_TIMEOUT 10.0
#define MAX_PARTS     24

/* A part: its declared hooks and itself. */
struct process_part {
    const struct part_ops *ops;
    void *self;
};

struct process {
    struct process_config cfg;
    struct ev_loop *loop;
    struct kube_config kcfg;
    struct kube_http *http;
    struct metrics *metrics;
    struct endpoint *endpoint;
    struct manager *mgr;
    struct process_part parts[MAX_PARTS];
    size_t n_parts;
    bool stopping;
    ev_signal sigterm, sigint, sighup;
    ev_prepare drain;
    ev_timer deadline;
    struct metrics_series *api_requests, *api_failed, *api_http_errors, *api_throttled, *ready;
};

/* --- configuration -------------------------------------------------------------------------- */

static int load_config(struct process *p)
{
    struct err err = {{0}};
    int r = kube_config_in_cluster(NULL, &p->kcfg, &err);
    if (p->cfg.kubeconfig || getenv("KUBECONFIG") || r == -ENOENT) {
        err = (struct err){{0}};
        kube_config_done(&p->kcfg);
        r = kube_config_load_kubeconfig(p->cfg.kubeconfig, NULL, &p->kcfg, &err);
    }
    if (r < 0)
        log_error("Cannot load the API server configuration", KV_STR("why", err.msg), KV_ERRNO(r));
    return r;
}

/* --- readiness and metrics ------------------------------------------------------------------ */

/* --- a part's hooks: its own, else its runner's --------------------------------------------- */

static struct runner *runner_of(const struct process_part *part)
{
    return part->ops->runner ? part->ops->runner(part->self) : NULL;
}

static bool part_ready(const struct process_part *part, struct buf *why)
{
    if (part->ops->ready)
        return part->ops->ready(why, part->self);
    return !runner_of(part) || runner_ready(runner_of(part), why);
}

static void part_stop(const struct process_part *part)
{
    if (part->ops->stop)
        part->ops->stop(part->self);
    else if (runner_of(part))
        runner_stop(runner_of(part));
}

static int part_in_flight(const struct process_part *part)
{
    if (part->ops->in_flight)
        return part->ops->in_flight(part->self);
    return runner_of(part) ? runner_in_flight(runner_of(part)) : 0;
}

static bool is_ready(struct buf *why, void *userdata)
{
    struct process *p = userdata;
    for (size_t i = 0; i < p->n_parts; i++)
        if (!part_ready(&p->parts[i], why))
            return false;
    return true;
}

static void collect(void *userdata)
{
    struct process *p = userdata;
    struct kube_http_stats h;
    struct buf why;
    buf_init(&why, 256);
    kube_http_get_stats(p->http, &h);
    metrics_set(p->api_requests, (double)h.requests);
    metrics_set(p->api_failed, (double)h.failed);
    metrics_set(p->api_http_errors, (double)h.http_errors);
    metrics_set(p->api_throttled, (double)h.throttled);
    metrics_set(p->ready, is_ready(&why, p) ? 1 : 0);
    buf_free(&why);
}

static void write_metrics(struct buf *out, void *userdata)
{
    struct process *p = userdata;
    (void)metrics_render(p->metrics, out);
}

static int setup_metrics(struct process *p)
{
    p->metrics = metrics_new();
    if (!p->metrics)
        return -ENOMEM;
    struct metrics *m = p->metrics;
    p->api_requests =
            metrics_one(m, METRICS_COUNTER, "hostdevd_api_requests_total", "API requests started.");
    p->api_failed = metrics_one(m, METRICS_COUNTER, "hostdevd_api_transport_errors_total",
                                "API requests that got no response.");
    p->api_http_errors = metrics_one(m, METRICS_COUNTER, "hostdevd_api_http_errors_total",
                                     "API responses with status >= 400.");
    p->api_throttled = metrics_one(m, METRICS_COUNTER, "hostdevd_api_throttled_retries_total",
                                   "API requests answered 429 with Retry-After and sent again.");
    p->ready = metrics_one(m, METRICS_GAUGE, "hostdevd_ready", "1 when /readyz answers ok.");
    return metrics_add_collector(p->metrics, collect, p);
}

static int setup_endpoint(struct process *p)
{
    struct endpoint_handlers eh = {.ready = is_ready, .metrics = write_metrics, .userdata = p};
    int port = 0;
    int r = endpoint_new(p->loop, p->cfg.listen, &eh, &port, &p->endpoint);
    if (r < 0) {
        log_error("Cannot listen", KV_STR("address", p->cfg.listen), KV_ERRNO(r));
        return r;
    }
    log_info("Serving health and metrics", KV_STR("address", p->cfg.listen), KV_INT("port", port));
    return 0;
}

/* --- signals and draining ------------------------------------------------------------------- */

static int in_flight(const struct process *p)
{
    int n = 0;
    for (size_t i = 0; i < p->n_parts; i++)
        n += part_in_flight(&p->parts[i]);
    return n;
}

static void on_drain(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)revents;
    if (in_flight(w->data) == 0)
        ev_break(loop, EVBREAK_ALL);
}

static void on_deadline(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)revents;
    log_warning("Work still in flight at the stop deadline; exiting",
                KV_INT("inFlight", in_flight(w->data)));
    ev_break(loop, EVBREAK_ALL);
}

static void on_stop(struct ev_loop *loop, ev_signal *w, int revents)
{
    struct process *p = w->data;
    (void)revents;
    if (p->stopping)
        return;
    log_info("Stopping", KV_INT("signal", w->signum), KV_INT("inFlight", in_flight(p)));
    p->stopping = true;
    for (size_t i = 0; i < p->n_parts; i++)
        part_stop(&p->parts[i]);
    ev_prepare_start(loop, &p->drain);
    ev_timer_start(loop, &p->deadline);
}

static void on_hup(struct ev_loop *loop, ev_signal *w, int revents)
{
    struct process *p = w->data;
    (void)loop;
    (void)revents;
    for (size_t i = 0; i < p->n_parts && !p->stopping; i++)
        if (p->parts[i].ops->rescan)
            p->parts[i].ops->rescan(p->parts[i].self);
}

static void setup_signals(struct process *p)
{
    signal(SIGPIPE, SIG_IGN);
    ev_signal_init(&p->sigterm, on_stop, SIGTERM);
    ev_signal_init(&p->sigint, on_stop, SIGINT);
    ev_signal_init(&p->sighup, on_hup, SIGHUP);
    p->sigterm.data = p->sigint.data = p->sighup.data = p;
    ev_signal_start(p->loop, &p->sigterm);
    ev_signal_start(p->loop, &p->sigint);
    ev_signal_start(p->loop, &p->sighup);
    ev_prepare_init(&p->drain, on_drain);
    p->drain.data = p;
    double t = p->cfg.drain_timeout > 0 ? p->cfg.drain_timeout : DRAIN_TIMEOUT;
    ev_timer_init(&p->deadline, on_deadline, t, 0.);
    p->deadline.data = p;
}

/* --- the process ---------------------------------------------------------------------------- */

int process_new(const struct process_config *cfg, struct process **ret)
{
    struct process *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->cfg = *cfg;
    p->loop = EV_DEFAULT;
    setup_signals(p);
    int r = load_config(p);
    if (r == 0 && (!(p->http = kube_http_new(p->loop, &p->kcfg)) ||
                   !(p->mgr = manager_new(p->loop, p->http, cfg->node)))) {
        log_error("Cannot set up the API client", KV_ERRNO(-ENOMEM));
        r = -ENOMEM;
    }
    if (r == 0 && (r = setup_metrics(p)) < 0)
        log_error("Cannot set up metrics", KV_ERRNO(r));
    if (r == 0)
        r = setup_endpoint(p);
    if (r < 0) {
        process_free(p);
        return r;
    }
    *ret = p;
    return 0;
}

struct ev_loop *process_loop(const struct process *p)
{
    return p->loop;
}

struct kube_http *process_http(const struct process *p)
{
    return p->http;
}

struct metrics *process_metrics(const struct process *p)
{
    return p->metrics;
}

struct manager *process_manager(const struct process *p)
{
    return p->mgr;
}

bool process_stopping(const struct process *p)
{
    return p->stopping;
}

struct part_env process_env(const struct process *p)
{
    return (struct part_env){
            .loop = p->loop, .http = p->http, .metrics = p->metrics, .mgr = p->mgr};
}

int process_add(struct process *p, const struct part_ops *ops, void *self)
{
    if (!self)
        return -ENOMEM;
    if (p->n_parts == MAX_PARTS) {
        if (ops->free)
            ops->free(self);
        return -ENOMEM;
    }
    p->parts[p->n_parts++] = (struct process_part){.ops = ops, .self = self};
    if (manager_add_part(p->mgr, ops, self) < 0 || manager_add_watches(p->mgr, ops, self) < 0)
        return -ENOMEM; /* freed with the process */
    return 0;
}

int process_add_parts(struct process *p, const struct part_ops *const *parts,
                      const struct part_env *env)
{
    int r = 0;
    for (size_t i = 0; r == 0 && parts[i]; i++)
        if ((r = process_add(p, parts[i], parts[i]->make(env))) < 0)
            log_error("Cannot set up the part", KV_STR("role", p->cfg.role),
                      KV_STR("part", parts[i]->name), KV_ERRNO(r));
    return r;
}

static int start_parts(const struct process *p)
{
    for (size_t i = 0; i < p->n_parts; i++) {
        const struct process_part *part = &p->parts[i];
        int r = part->ops->start ? part->ops->start(part->self) : 0;
        if (r < 0) {
            log_error("Cannot start", KV_STR("part", part->ops->name), KV_ERRNO(r));
            return r;
        }
    }
    return 0;
}

int process_run(struct process *p)
{
    int r = manager_start(p->mgr);
    if (r < 0) {
        log_error("Cannot start the caches", KV_ERRNO(r));
        return 1;
    }
    if (start_parts(p) < 0)
        return 1;
    log_info("Running", KV_STR("role", p->cfg.role), KV_INT("parts", p->n_parts));
    ev_run(p->loop, 0);
    return 0;
}

struct process *process_free(struct process *p)
{
    if (!p)
        return NULL;
    manager_stop_worker(p->mgr); /* finishes the job in progress; cancels the rest */
    while (p->n_parts > 0) {
        const struct process_part *part = &p->parts[--p->n_parts];
        if (part->ops->free)
            part->ops->free(part->self);
    }
    ev_signal_stop(p->loop, &p->sigterm);
    ev_signal_stop(p->loop, &p->sigint);
    ev_signal_stop(p->loop, &p->sighup);
    ev_prepare_stop(p->loop, &p->drain);
    ev_timer_stop(p->loop, &p->deadline);
    p->mgr = manager_free(p->mgr); /* the caches, after the parts that read them */
    p->endpoint = endpoint_free(p->endpoint);
    p->http = kube_http_free(p->http); /* cancels anything still in flight */
    p->metrics = metrics_free(p->metrics);
    kube_config_done(&p->kcfg);
    free(p);
    return NULL;
}
