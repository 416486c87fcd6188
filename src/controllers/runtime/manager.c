/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/manager.c - the caches, watches and parts one process shares (see
 * manager.h).
 */
#include "controllers/runtime/manager.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/buf.h"
#include "base/log.h"
#include "controllers/runtime/part.h"
#include "controllers/runtime/runner.h"
#include "controllers/runtime/worker.h"
#include "kube/informer.h"

#define MAX_CACHES 16
#define MAX_SUBS   16
#define MAX_WATCH  64
#define MAX_PARTS  24

struct sub {
    const struct kube_informer_handlers *h;
    void *userdata;
};

/* One kind's cache and who receives its events. */
struct cache {
    struct manager *m;
    const struct cache_kind *kind;
    struct kube_informer *inf;
    struct informer_log log; /* of its failures, when no receiver logs them */
    char log_name[96];
    struct sub subs[MAX_SUBS];
    size_t n_subs;
};

struct bound_watch {
    const struct watch *w;
    void *self;
};

struct manager {
    struct ev_loop *loop;
    struct kube_http *http;
    const char *node;
    struct worker *worker;
    struct cache caches[MAX_CACHES];
    size_t n_caches;
    struct bound_watch watches[MAX_WATCH];
    size_t n_watches;
    const struct part_ops *part_ops[MAX_PARTS];
    void *parts[MAX_PARTS];
    size_t n_parts;
    bool started;
};

/* --- a cache's events, to its receivers, then to the watches of its kind ------------------- */

static void to_watches(const struct cache *c, const struct watch_event *ev)
{
    const struct manager *m = c->m;
    for (size_t i = 0; i < m->n_watches; i++)
        if (m->watches[i].w->kind == c->kind)
            m->watches[i].w->map(m->watches[i].self, ev);
}

static void on_add(const char *key, const struct cJSON *obj, void *userdata)
{
    const struct cache *c = userdata;
    for (size_t i = 0; i < c->n_subs; i++)
        if (c->subs[i].h->on_add)
            c->subs[i].h->on_add(key, obj, c->subs[i].userdata);
    to_watches(c, &(struct watch_event){.type = WATCH_ADD, .key = key, .obj = obj});
}

static void on_update(const char *key, const struct cJSON *old, const struct cJSON *obj,
                      void *userdata)
{
    const struct cache *c = userdata;
    for (size_t i = 0; i < c->n_subs; i++)
        if (c->subs[i].h->on_update)
            c->subs[i].h->on_update(key, old, obj, c->subs[i].userdata);
    to_watches(c, &(struct watch_event){.type = WATCH_UPDATE, .key = key, .obj = obj});
}

static void on_delete(const char *key, const struct cJSON *obj, void *userdata)
{
    const struct cache *c = userdata;
    for (size_t i = 0; i < c->n_subs; i++)
        if (c->subs[i].h->on_delete)
            c->subs[i].h->on_delete(key, obj, c->subs[i].userdata);
    to_watches(c, &(struct watch_event){.type = WATCH_DELETE, .key = key, .obj = obj});
}

static void on_error(const struct kube_err *err, void *userdata)
{
    struct cache *c = userdata;
    bool logged = false;
    for (size_t i = 0; i < c->n_subs; i++)
        if (c->subs[i].h->on_error) {
            c->subs[i].h->on_error(err, c->subs[i].userdata);
            logged = true;
        }
    if (!logged)
        informer_log_error(&c->log, err);
}

static void on_skip(const char *what, void *userdata)
{
    const struct cache *c = userdata;
    bool logged = false;
    for (size_t i = 0; i < c->n_subs; i++)
        if (c->subs[i].h->on_skip) {
            c->subs[i].h->on_skip(what, c->subs[i].userdata);
            logged = true;
        }
    if (!logged)
        informer_log_skip(&c->log, what);
}

/* --- caches ---------------------------------------------------------------------------------- */

static struct cache *find(const struct manager *m, const struct cache_kind *kind)
{
    for (size_t i = 0; i < m->n_caches; i++)
        if (m->caches[i].kind == kind)
            return (struct cache *)&m->caches[i];
    return NULL;
}

static int make_cache(struct manager *m, struct cache *c, const struct cache_kind *kind)
{
    char label[300] = "", field[300] = "";
    if (m->node && kind->node_label)
        (void)snprintf(label, sizeof(label), "%s=%s", kind->node_label, m->node);
    if (m->node && kind->node_field)
        (void)snprintf(field, sizeof(field), "%s=%s%s%s", kind->node_field, m->node,
                       kind->field ? "," : "", kind->field ? kind->field : "");
    else if (kind->field)
        (void)snprintf(field, sizeof(field), "%s", kind->field);
    *c = (struct cache){.m = m, .kind = kind};
    (void)snprintf(c->log_name, sizeof(c->log_name), "cache/%s", kind->name);
    c->log.name = c->log_name;
    struct kube_informer_config ic = {
            .resource = kind->res,
            .label_selector = label[0] ? label : NULL,
            .field_selector = field[0] ? field : NULL,
            .metadata_only = kind->metadata_only,
            .handlers = {on_add, on_update, on_delete, on_error, on_skip},
            .userdata = c,
    };
    c->inf = kube_informer_new(m->loop, m->http, &ic);
    return c->inf ? 0 : -ENOMEM;
}

static struct cache *cache_of(struct manager *m, const struct cache_kind *kind)
{
    struct cache *c = find(m, kind);
    if (c || m->n_caches == MAX_CACHES)
        return c;
    c = &m->caches[m->n_caches];
    if (make_cache(m, c, kind) < 0)
        return NULL;
    m->n_caches++;
    if (m->started && kube_informer_start(c->inf) < 0)
        return NULL;
    return c;
}

struct kube_informer *manager_cache(struct manager *m, const struct cache_kind *kind)
{
    const struct cache *c = m && kind ? cache_of(m, kind) : NULL;
    return c ? c->inf : NULL;
}

int manager_subscribe(struct manager *m, const struct cache_kind *kind,
                      const struct kube_informer_handlers *h, void *userdata)
{
    struct cache *c = cache_of(m, kind);
    if (!c || c->n_subs == MAX_SUBS)
        return -ENOMEM;
    c->subs[c->n_subs++] = (struct sub){.h = h, .userdata = userdata};
    return 0;
}

struct runner *manager_runner(struct manager *m, const struct cache_kind *kind,
                              const struct runner_config *rc)
{
    struct runner_config c = *rc;
    if (!(c.cache = manager_cache(m, kind)))
        return NULL;
    struct runner *r = runner_new(&c);
    if (r && manager_subscribe(m, kind, &runner_cache_handlers, r) < 0)
        r = runner_free(r);
    return r;
}

int manager_start(struct manager *m)
{
    m->started = true;
    for (size_t i = 0; i < m->n_caches; i++) {
        int r = kube_informer_start(m->caches[i].inf);
        if (r < 0)
            return r;
    }
    return 0;
}

bool manager_synced(const struct manager *m, struct buf *why)
{
    for (size_t i = 0; i < m->n_caches; i++)
        if (!kube_informer_has_synced(m->caches[i].inf)) {
            (void)buf_printf(why, "%s has not synced", m->caches[i].log_name);
            return false;
        }
    return true;
}

/* --- watches and topics ---------------------------------------------------------------------- */

int manager_add_watches(struct manager *m, const struct part_ops *ops, void *self)
{
    for (const struct watch *w = ops->watches; w && w->map; w++) {
        if (m->n_watches == MAX_WATCH || (w->kind && !cache_of(m, w->kind)))
            return -ENOMEM;
        m->watches[m->n_watches++] = (struct bound_watch){.w = w, .self = self};
    }
    return 0;
}

void manager_emit(struct manager *m, const struct topic *topic, void *data)
{
    const struct watch_event ev = {.type = WATCH_TOPIC, .data = data};
    for (size_t i = 0; m && i < m->n_watches; i++)
        if (m->watches[i].w->topic == topic)
            m->watches[i].w->map(m->watches[i].self, &ev);
}

/* --- parts ------------------------------------------------------------------------------------ */

int manager_add_part(struct manager *m, const struct part_ops *ops, void *self)
{
    if (m->n_parts == MAX_PARTS)
        return -ENOMEM;
    m->part_ops[m->n_parts] = ops;
    m->parts[m->n_parts++] = self;
    return 0;
}

void *manager_part(const struct manager *m, const struct part_ops *ops)
{
    for (size_t i = 0; m && i < m->n_parts; i++)
        if (m->part_ops[i] == ops)
            return m->parts[i];
    return NULL;
}

struct worker *manager_worker(struct manager *m)
{
    if (!m->worker && !(m->worker = worker_new(m->loop)))
        log_error("Cannot start the worker thread", KV_ERRNO(-ENOMEM));
    return m->worker;
}

void manager_stop_worker(struct manager *m)
{
    if (m)
        m->worker = worker_free(m->worker); /* finishes the job in progress; cancels the rest */
}

/* --- life ------------------------------------------------------------------------------------- */

struct manager *manager_new(struct ev_loop *loop, struct kube_http *http, const char *node)
{
    struct manager *m = calloc(1, sizeof(*m));
    if (m)
        *m = (struct manager){.loop = loop, .http = http, .node = node};
    return m;
}

struct manager *manager_free(struct manager *m)
{
    if (!m)
        return NULL;
    manager_stop_worker(m);
    for (size_t i = 0; i < m->n_caches; i++)
        m->caches[i].inf = kube_informer_free(m->caches[i].inf);
    free(m);
    return NULL;
}

static void *caches_make(const struct part_env *env)
{
    return env->mgr;
}

static bool caches_ready(struct buf *why, void *self)
{
    return manager_synced(self, why);
}

static void caches_stop(void *self)
{
    const struct manager *m = self;
    for (size_t i = 0; i < m->n_caches; i++)
        kube_informer_stop(m->caches[i].inf);
}

const struct part_ops manager_caches_part = {
        .name = "caches", .make = caches_make, .ready = caches_ready, .stop = caches_stop};
