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
#include "base/map.h"
#include "base/log.h"
#include "controllers/runtime/part.h"
#include "controllers/runtime/runner.h"
#include "controllers/runtime/worker.h"
#include "kube/informer.h"

#define MAX_CACHES 16
#define MAX_SUBS   16
#define MAX_WATCH  64
#define MAX_PARTS  24
#define KEYED_PAGE 100 /* LIST page of a keys_of cache (the others: the informer's 500) */

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
    struct map *keys; /* with kind->keys_of: the names that cache has (the keys kept) */
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

static void start_keyed(struct manager *m, const struct cache_kind *keys_of);

static void on_synced(void *userdata)
{
    const struct cache *c = userdata;
    start_keyed(c->m, c->kind);
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

/* A cache of keys_of: whether `key` is one of the names its keys' cache has. */
static bool keep_key(const char *key, void *userdata)
{
    const struct cache *c = userdata;
    return map_contains(c->keys, key);
}

/* The keys' cache has `key` now, or not any more: the keyed cache follows. */
static void key_add(const char *key, const struct cJSON *obj, void *userdata)
{
    struct cache *c = userdata;
    (void)obj;
    if (!map_contains(c->keys, key) && map_put(c->keys, key, c) < 0)
        return; /* out of memory: the device is not cached; the claim's next change retries */
    (void)kube_informer_refresh(c->inf, key);
}

static void key_update(const char *key, const struct cJSON *old, const struct cJSON *obj,
                       void *userdata)
{
    (void)old;
    key_add(key, obj, userdata);
}

static void key_delete(const char *key, const struct cJSON *obj, void *userdata)
{
    struct cache *c = userdata;
    (void)obj;
    (void)map_remove(c->keys, key);
    (void)kube_informer_refresh(c->inf, key);
}

static const struct kube_informer_handlers key_handlers = {
        .on_add = key_add, .on_update = key_update, .on_delete = key_delete};

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
            .keep = kind->keys_of ? keep_key : NULL,
            /* a keyed cache reads every object of its kind and keeps few: smaller pages, so
             * that the page being read (the most the process holds while listing) is small */
            .page_size = kind->keys_of ? KEYED_PAGE : 0,
            .handlers = {on_add, on_update, on_delete, on_error, on_skip, on_synced},
            .userdata = c,
    };
    if (kind->keys_of && !(c->keys = map_new(NULL)))
        return -ENOMEM;
    c->inf = kube_informer_new(m->loop, m->http, &ic);
    if (!c->inf)
        c->keys = map_free(c->keys);
    return c->inf ? 0 : -ENOMEM;
}

/* Whether `c` may start: a cache of keys_of once the keys' cache has synced. */
static bool may_start(const struct manager *m, const struct cache *c)
{
    const struct cache *keys = c->kind->keys_of ? find(m, c->kind->keys_of) : NULL;
    return m->started && (!keys || kube_informer_has_synced(keys->inf));
}

/* The cache of `keys_of` has synced: start the caches keyed by it. */
static void start_keyed(struct manager *m, const struct cache_kind *keys_of)
{
    for (size_t i = 0; i < m->n_caches; i++)
        if (m->caches[i].kind->keys_of == keys_of && may_start(m, &m->caches[i]))
            (void)kube_informer_start(m->caches[i].inf); /* returns 0 */
}

static int manager_subscribe_cache(struct cache *c, const struct kube_informer_handlers *h,
                                   void *userdata);

static struct cache *cache_of(struct manager *m, const struct cache_kind *kind)
{
    struct cache *c = find(m, kind);
    if (c || m->n_caches == MAX_CACHES)
        return c;
    struct cache *keys = kind->keys_of ? cache_of(m, kind->keys_of) : NULL;
    if ((kind->keys_of && !keys) || m->n_caches == MAX_CACHES)
        return NULL;
    c = &m->caches[m->n_caches];
    if (make_cache(m, c, kind) < 0)
        return NULL;
    m->n_caches++;
    if (keys) { /* the names it has so far, and from now on */
        size_t pos = 0;
        const char *key;
        const struct cJSON *obj;
        while (kube_informer_next(keys->inf, &pos, &key, &obj))
            if (map_put(c->keys, key, c) < 0)
                return NULL;
        if (manager_subscribe_cache(keys, &key_handlers, c) < 0)
            return NULL;
    }
    if (may_start(m, c) && kube_informer_start(c->inf) < 0)
        return NULL;
    return c;
}

struct kube_informer *manager_cache(struct manager *m, const struct cache_kind *kind)
{
    const struct cache *c = m && kind ? cache_of(m, kind) : NULL;
    return c ? c->inf : NULL;
}

static int manager_subscribe_cache(struct cache *c, const struct kube_informer_handlers *h,
                                   void *userdata)
{
    if (c->n_subs == MAX_SUBS)
        return -ENOMEM;
    c->subs[c->n_subs++] = (struct sub){.h = h, .userdata = userdata};
    return 0;
}

int manager_subscribe(struct manager *m, const struct cache_kind *kind,
                      const struct kube_informer_handlers *h, void *userdata)
{
    struct cache *c = cache_of(m, kind);
    return c ? manager_subscribe_cache(c, h, userdata) : -ENOMEM;
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
        if (!may_start(m, &m->caches[i]))
            continue; /* keyed: once its keys' cache has synced (start_keyed) */
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
    for (size_t i = 0; i < m->n_caches; i++) {
        m->caches[i].inf = kube_informer_free(m->caches[i].inf);
        m->caches[i].keys = map_free(m->caches[i].keys);
    }
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
