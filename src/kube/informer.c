/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/informer.c - list+watch cache of one resource. See informer.h.
 *
 * States: LIST (pages) -> WATCH -> (stream ends) WATCH | (410) LIST | (error) WAIT -> the step
 * that failed. Every LIST is a consistent read (no resourceVersion), so a relist after 410
 * never starts from data older than what was seen. With `keep`, single objects are fetched
 * beside (kube_informer_refresh): a GET per key, never while a LIST is being assembled (its
 * store would not have it), its answer dropped when a watch event for the key overtook it.
 * Does not log.
 */
#include "kube/informer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backoff.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/json.h"
#include "base/map.h"
#include "kube/client.h"
#include "kube/http.h"
#include "kube/status.h"
#include "kube/watch.h"

#define DEFAULT_PAGE      500
#define KEY_MAX           512
#define PATH_MAX_LEN      ((size_t)16 * 1024)
#define WATCH_TIMEOUT_MIN 300 /* server-side timeoutSeconds, randomised in [min, 2*min) */
#define WATCH_LOW_SPEED   180 /* seconds without a byte before a watch counts as dead */
#define SHORT_WATCH       1.0 /* a stream that ends sooner with no event is an error */
#define LIST_TIMEOUT      60.0
#define FETCH_BACKOFF_MAX 30.0 /* a failed GET of one object is retried after up to this */

enum step { STEP_LIST, STEP_WATCH };

struct kube_informer {
    struct ev_loop *loop;
    struct kube_http *http;
    const struct kube_resource *resource;
    char *ns, *label_selector, *field_selector;
    int page_size;
    int watch_timeout; /* 0: random */
    bool keep_managed_fields;
    bool metadata_only;
    struct kube_informer_handlers handlers;
    void *userdata;
    bool (*keep)(const char *key, void *userdata);
    void (*transform)(cJSON *obj);

    struct map *store;   /* key -> cJSON * (owned) */
    struct map *pending; /* the LIST being assembled */
    char *rv;            /* where the next WATCH starts */
    char *cont;          /* continue token of the next page */
    struct map *conts;   /* the continue tokens of the LIST being assembled (a loop fails it) */
    struct kube_req *req;
    struct kube_watch_framer framer;
    ev_timer timer;
    struct backoff backoff;
    enum step retry_step;
    bool running, synced, relist;
    const char *stream_error; /* what was wrong with the watch stream that was dropped */
    bool error_reported;      /* its ERROR event went to on_error: the end of the stream it
                                 caused is counted and retried, not reported again */
    double watch_started;
    unsigned long watch_events;
    uint64_t rng;
    struct kube_informer_stats stats;
    /* with keep: */
    struct map *fetches;      /* key -> struct fetch * (a GET under way or waiting to retry) */
    struct map *deferred;     /* keys refreshed while a LIST was assembled: GET once stored */
    unsigned long list_epoch; /* LISTs started: a GET sent before the latest one is dropped */
    bool sync_waits;          /* the first LIST is stored; synced once its GETs answered */
};

/* A GET of one object for kube_informer_refresh. */
struct fetch {
    struct kube_informer *inf;
    struct kube_req *req; /* NULL while waiting to retry */
    ev_timer retry;
    struct backoff backoff;
    unsigned long epoch; /* list_epoch when it was sent */
    bool stale;          /* a watch event for the key came since it was sent */
    char key[];
};

static void start_list(struct kube_informer *inf);
static void start_watch(struct kube_informer *inf);
static void fetch_deferred(struct kube_informer *inf);

static void free_json(void *p)
{
    cJSON_Delete(p);
}

static double rand01(struct kube_informer *inf)
{
    inf->rng ^= inf->rng << 13;
    inf->rng ^= inf->rng >> 7;
    inf->rng ^= inf->rng << 17;
    return (double)(inf->rng >> 11) / (double)(UINT64_C(1) << 53);
}

static const char *rv_of(const cJSON *obj)
{
    return kube_meta_str(obj, "resourceVersion");
}

int kube_informer_key(const cJSON *obj, char *ret, size_t size)
{
    const char *name = kube_meta_str(obj, "name");
    const char *ns = kube_meta_str(obj, "namespace");
    if (!name || !name[0])
        return -EINVAL;
    int n = ns && ns[0] ? snprintf(ret, size, "%s/%s", ns, name) : snprintf(ret, size, "%s", name);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static int set_str(char **dst, const char *src)
{
    char *copy = src ? strdup(src) : NULL;
    if (src && !copy)
        return -ENOMEM;
    free(*dst);
    *dst = copy;
    return 0;
}

/* --- retries -------------------------------------------------------------------------------- */

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct kube_informer *inf = w->data;
    (void)loop;
    (void)revents;
    if (inf->retry_step == STEP_LIST)
        start_list(inf);
    else
        start_watch(inf);
}

/* Reports `err` and retries `step` after the backoff (or Retry-After, if longer). */
static void retry(struct kube_informer *inf, enum step step, const struct kube_err *err)
{
    inf->stats.errors++;
    if (err && inf->handlers.on_error && !(step == STEP_WATCH && inf->error_reported))
        inf->handlers.on_error(err, inf->userdata);
    double delay = backoff_next(&inf->backoff, ev_now(inf->loop), rand01(inf));
    if (err && err->retry_after > delay)
        delay = err->retry_after;
    inf->retry_step = step;
    ev_timer_stop(inf->loop, &inf->timer);
    ev_timer_set(&inf->timer, delay, 0.);
    ev_timer_start(inf->loop, &inf->timer);
}

static void retry_errno(struct kube_informer *inf, enum step step, int e, const char *what)
{
    struct kube_err err;
    kube_err_transport(e, what, &err);
    retry(inf, step, &err);
}

/* --- LIST ----------------------------------------------------------------------------------- */

static int base_path(const struct kube_informer *inf, struct buf *path)
{
    int e = kube_client_path(inf->resource, inf->ns, NULL, NULL, path);
    if (e == 0 && inf->label_selector)
        e = kube_client_query(path, "labelSelector", inf->label_selector);
    if (e == 0 && inf->field_selector)
        e = kube_client_query(path, "fieldSelector", inf->field_selector);
    return e;
}

/* Replaces the store with the LIST just assembled, telling the handlers what changed. */
void kube_informer_diff(const struct map *store, const struct map *list,
                        const struct kube_informer_handlers *h, void *userdata)
{
    const char *key;
    void *v;
    size_t pos = 0;
    while (map_next(store, &pos, &key, &v))
        if (!map_contains(list, key) && h->on_delete)
            h->on_delete(key, v, userdata);
    pos = 0;
    while (map_next(list, &pos, &key, &v)) {
        const cJSON *old = map_get(store, key);
        const char *old_rv = old ? rv_of(old) : NULL;
        const char *new_rv = rv_of(v);
        if (!old && h->on_add)
            h->on_add(key, v, userdata);
        else if (old && h->on_update && (!old_rv || !new_rv || strcmp(old_rv, new_rv) != 0))
            h->on_update(key, old, v, userdata);
    }
}

/* Replaces the store with the LIST just assembled, telling the handlers what changed. */
static void replace_store(struct kube_informer *inf)
{
    void *obj;
    size_t pos = 0;
    while (map_next(inf->pending, &pos, NULL, &obj))
        json_intern_keys(obj);
    kube_informer_diff(inf->store, inf->pending, &inf->handlers, inf->userdata);
    map_free(inf->store);
    inf->store = TAKE_PTR(inf->pending);
}

/* Drops metadata.managedFields (about half of a small object) unless asked to keep it, and all
 * but apiVersion, kind and metadata when asked to. */
static void trim(const struct kube_informer *inf, cJSON *obj)
{
    if (!cJSON_IsObject(obj)) /* only objects have names; anything else is skipped */
        return;
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata"), *mf;
    while (!inf->keep_managed_fields &&
           (mf = cJSON_DetachItemFromObjectCaseSensitive(meta, "managedFields")))
        cJSON_Delete(mf); /* every copy: JSON may repeat a key */
    for (cJSON *c = obj->child, *next; inf->metadata_only && c; c = next) {
        next = c->next;
        if (strcmp(c->string, "metadata") != 0 && strcmp(c->string, "apiVersion") != 0 &&
            strcmp(c->string, "kind") != 0)
            cJSON_Delete(cJSON_DetachItemViaPointer(obj, c));
    }
    if (inf->transform)
        inf->transform(obj);
}

/* An object that cannot be kept (no name, or one too long for a key): skipped and reported.
 * `where` says which, "an item of a LIST" or "a watch event's object". */
static void skip_object(struct kube_informer *inf, int e, const char *where, int index)
{
    char what[160];
    inf->stats.skipped++;
    (void)snprintf(what, sizeof(what), "%s%.0d of %s %s", where, index, inf->resource->plural,
                   e == -ENAMETOOLONG ? "with a name too long to keep"
                                      : "is not an object with metadata.name");
    if (inf->handlers.on_skip)
        inf->handlers.on_skip(what, inf->userdata);
}

/* Whether a resourceVersion can go into a query: printable ASCII (the server's are decimal). */
static bool rv_ok(const char *rv)
{
    for (; rv && *rv; rv++)
        if (*rv < '!' || *rv > '~')
            return false;
    return rv != NULL;
}

/* Moves the items of a LIST page into `pending`; an item without a name is skipped. Returns 0
 * or a negative errno, with *why set for a malformed page. */
static int take_items(struct kube_informer *inf, cJSON *list, const char **why)
{
    cJSON *items = cJSON_GetObjectItemCaseSensitive(list, "items");
    if (!cJSON_IsArray(items) && !cJSON_IsNull(items) && items) {
        *why = "items is not an array";
        return -EBADMSG;
    }
    for (int i = 1; items && items->child; i++) {
        _cleanup_json_ cJSON *item = cJSON_DetachItemFromArray(items, 0);
        char key[KEY_MAX];
        int e = kube_informer_key(item, key, sizeof(key));
        trim(inf, item);
        if (e < 0) {
            skip_object(inf, e, "LIST item ", i);
            continue;
        }
        if (inf->keep && !inf->keep(key, inf->userdata)) {
            inf->stats.dropped++;
            continue;
        }
        e = map_put(inf->pending, key, item);
        if (e < 0)
            return e;
        TAKE_PTR(item); /* pending's now */
    }
    return 0;
}

/* Records the continue token of the next page; one seen before in this LIST is a loop. */
static int next_page(struct kube_informer *inf, const char *cont, const char **why)
{
    if (!cont || !cont[0])
        return set_str(&inf->cont, NULL);
    if (map_contains(inf->conts, cont)) {
        *why = "a continue token that repeats (the pages loop)";
        return -ELOOP;
    }
    int e = map_put(inf->conts, cont, inf);
    return e < 0 ? e : set_str(&inf->cont, cont);
}

static void list_page(struct kube_informer *inf);

/* Takes one LIST page into inf->pending, inf->cont and (the last page) inf->rv. */
static int parse_page(struct kube_informer *inf, const char *body, size_t len, const char **why)
{
    _cleanup_json_ cJSON *list = NULL;
    *why = "the body is not JSON";
    int e = json_parse_strict(body, len, &list, NULL);
    if (e == 0 && !cJSON_IsObject(list)) {
        *why = "the body is not a JSON object";
        e = -EBADMSG;
    }
    if (e < 0)
        return e;
    e = take_items(inf, list, why);
    const char *rv = kube_meta_str(list, "resourceVersion");
    if (e == 0)
        e = next_page(inf, kube_meta_str(list, "continue"), why);
    if (e == 0 && !inf->cont && !(rv && rv[0])) {
        *why = "no metadata.resourceVersion";
        e = -EBADMSG;
    } else if (e == 0 && !inf->cont && !rv_ok(rv)) {
        *why = "a resourceVersion that is not printable ASCII";
        e = -EBADMSG;
    }
    if (e == 0 && !inf->cont)
        e = set_str(&inf->rv, rv);
    return e;
}

int kube_informer_list_page(const char *body, size_t len, bool keep_managed_fields,
                            bool metadata_only, struct map *pending, char **ret_cont, char **ret_rv)
{
    static const struct kube_resource any = {.plural = "objects"};
    struct kube_informer inf = {.resource = &any,
                                .keep_managed_fields = keep_managed_fields,
                                .metadata_only = metadata_only,
                                .pending = pending,
                                .conts = map_new(NULL)};
    const char *why = NULL;
    int e = inf.conts ? parse_page(&inf, body, len, &why) : -ENOMEM;
    map_free(inf.conts);
    if (e < 0 || inf.cont) {
        free(inf.rv);
        inf.rv = NULL;
    }
    if (e < 0) {
        free(inf.cont);
        return e;
    }
    *ret_cont = inf.cont;
    *ret_rv = inf.rv;
    return 0;
}

/* A page arrived: store its items, then fetch the next page or finish the LIST. */
static int list_page_done(struct kube_informer *inf, const struct kube_resp *resp, const char **why)
{
    int e = parse_page(inf, resp->body, resp->body_len, why);
    if (e < 0)
        return e;
    if (inf->cont) {
        list_page(inf);
        return 0;
    }
    replace_store(inf);
    inf->stats.lists++;
    fetch_deferred(inf);
    if (!inf->synced && inf->fetches && map_size(inf->fetches) > 0)
        inf->sync_waits = true; /* synced once the GETs the LIST left answer */
    else if (!inf->synced) {
        inf->synced = true;
        if (inf->handlers.on_synced)
            inf->handlers.on_synced(inf->userdata);
    }
    start_watch(inf);
    return 0;
}

static void on_list_done(const struct kube_resp *resp, void *userdata)
{
    struct kube_informer *inf = userdata;
    inf->req = NULL;
    if (resp->http == 200 && resp->err == 0) {
        const char *why = NULL;
        int e = list_page_done(inf, resp, &why);
        if (e < 0) {
            char what[256];
            (void)snprintf(what, sizeof(what), "malformed LIST response of %s: %s",
                           inf->resource->plural, why ? why : strerror(-e));
            retry_errno(inf, STEP_LIST, e, what);
        }
        return;
    }
    struct kube_err err;
    if (resp->http == 0 || (resp->err < 0 && resp->http < 300)) /* no or a cut-off response */
        kube_err_transport(resp->err < 0 ? resp->err : -EIO, resp->error, &err);
    else
        (void)kube_status_decode(resp->http, resp->body, resp->body_len, resp->retry_after, &err);
    retry(inf, STEP_LIST, &err); /* a 410 on a continue token also starts over */
}

static void list_page(struct kube_informer *inf)
{
    _cleanup_buf_ struct buf path;
    buf_init(&path, PATH_MAX_LEN);
    char limit[16];
    (void)snprintf(limit, sizeof(limit), "%d", inf->page_size);
    int e = base_path(inf, &path);
    if (e == 0)
        e = kube_client_query(&path, "limit", limit);
    if (e == 0 && inf->cont)
        e = kube_client_query(&path, "continue", inf->cont);
    struct kube_http_req req = {
            .method = "GET",
            .path = buf_str(&path),
            .timeout = LIST_TIMEOUT,
            .on_done = on_list_done,
            .userdata = inf,
    };
    if (e == 0)
        e = kube_http_start(inf->http, &req, &inf->req);
    if (e < 0)
        retry_errno(inf, STEP_LIST, e, "cannot start LIST");
}

static void start_list(struct kube_informer *inf)
{
    inf->list_epoch++;
    map_free(inf->pending);
    map_free(inf->conts);
    inf->pending = map_new(free_json);
    inf->conts = map_new(NULL);
    (void)set_str(&inf->cont, NULL);
    if (!inf->pending || !inf->conts) {
        retry_errno(inf, STEP_LIST, -ENOMEM, "out of memory");
        return;
    }
    list_page(inf);
}

/* --- WATCH ---------------------------------------------------------------------------------- */

static int apply_object(struct kube_informer *inf, const struct kube_watch_event *ev)
{
    char key[KEY_MAX];
    int e = kube_informer_key(ev->object, key, sizeof(key));
    if (e < 0) {
        skip_object(inf, e, "a watch event's object", 0);
        return 0;
    }
    struct fetch *f = inf->fetches ? map_get(inf->fetches, key) : NULL;
    if (f)
        f->stale = true; /* the event is at least as new as what the GET will say */
    _cleanup_json_ cJSON *old = map_take(inf->store, key);
    if (inf->keep && !inf->keep(key, inf->userdata)) {
        inf->stats.dropped++;
        if (old && inf->handlers.on_delete) /* kept no longer, and not refreshed yet */
            inf->handlers.on_delete(key, old, inf->userdata);
        return 0;
    }
    if (ev->type == KUBE_WATCH_DELETED) {
        if (inf->handlers.on_delete && (old || !inf->keep))
            inf->handlers.on_delete(key, ev->object, inf->userdata);
        return 0;
    }
    _cleanup_json_ cJSON *dup = cJSON_Duplicate(ev->object, true);
    if (dup) {
        trim(inf, dup);
        json_intern_keys(dup);
    }
    if (!dup || map_put(inf->store, key, dup) < 0)
        return -ENOMEM;
    cJSON *copy = TAKE_PTR(dup); /* the store's now */
    const char *old_rv = old ? rv_of(old) : NULL;
    if (!old && inf->handlers.on_add)
        inf->handlers.on_add(key, copy, inf->userdata);
    else if (old && inf->handlers.on_update &&
             (!old_rv || !ev->resource_version || strcmp(old_rv, ev->resource_version) != 0))
        inf->handlers.on_update(key, old, copy, inf->userdata);
    return 0;
}

static int on_event(const struct kube_watch_event *ev, void *userdata)
{
    struct kube_informer *inf = userdata;
    if (ev->type == KUBE_WATCH_ERROR) {
        struct kube_err err;
        (void)kube_status_from_json(ev->object, 200, &err);
        inf->relist = kube_err_is_gone(&err);
        if (!inf->relist && inf->handlers.on_error)
            inf->handlers.on_error(&err, inf->userdata);
        inf->error_reported = true;
        return inf->relist ? -ESTALE : -EPROTO;
    }
    if (ev->resource_version && !rv_ok(ev->resource_version)) {
        inf->stream_error = "an event whose resourceVersion is not printable ASCII";
        return -EBADMSG;
    }
    if (ev->type != KUBE_WATCH_BOOKMARK) {
        int e = apply_object(inf, ev);
        if (e < 0)
            return e;
        inf->stats.events++;
        inf->watch_events++;
    } else {
        inf->stats.bookmarks++;
    }
    return ev->resource_version ? set_str(&inf->rv, ev->resource_version) : 0;
}

static int on_watch_data(int http, const char *data, size_t len, void *userdata)
{
    struct kube_informer *inf = userdata;
    (void)http;
    int e = kube_watch_feed(&inf->framer, data, len, on_event, inf);
    if (e < 0 && inf->framer.error)
        inf->stream_error = inf->framer.error;
    return e;
}

/* A watch that was answered and ended: why it counts as failed, or NULL. */
static const char *watch_end_error(struct kube_informer *inf, const struct kube_resp *resp)
{
    bool inside = kube_watch_framer_pending(&inf->framer);
    if (resp->err < 0 || resp->http == 0)
        return inf->stream_error ? inf->stream_error
               : inside          ? "the stream ended inside an event"
                                 : "";
    if (inside)
        return "the stream ended inside an event";
    if (ev_now(inf->loop) - inf->watch_started < SHORT_WATCH && inf->watch_events == 0)
        return "watch ended at once";
    return NULL;
}

/* Whether the WATCH that ended was answered and had lived a while (not one that failed to
 * start). */
static bool established(const struct kube_informer *inf)
{
    return ev_now(inf->loop) - inf->watch_started >= SHORT_WATCH;
}

/* An established stream broke (a reset, a dead connection): watch again at once, as
 * client-go's reflector does; only a WATCH that cannot start again backs off, so faults
 * minutes apart do not each wait longer than the last. A malformed stream backs off. */
static void watch_broke(struct kube_informer *inf, const struct kube_err *err)
{
    inf->stats.errors++;
    if (inf->handlers.on_error && !inf->error_reported)
        inf->handlers.on_error(err, inf->userdata);
    inf->stats.watch_restarts++;
    start_watch(inf);
}

static void on_watch_done(const struct kube_resp *resp, void *userdata)
{
    struct kube_informer *inf = userdata;
    inf->req = NULL;
    const char *why = resp->http < 300 ? watch_end_error(inf, resp) : NULL;
    kube_watch_framer_free(&inf->framer);
    struct kube_err err;
    if (resp->http >= 300)
        (void)kube_status_decode(resp->http, resp->body, resp->body_len, resp->retry_after, &err);
    if (inf->relist || (resp->http >= 300 && kube_err_is_gone(&err))) {
        inf->relist = false;
        inf->stats.relists_gone++;
        start_list(inf);
        return;
    }
    if (resp->http >= 300) {
        retry(inf, STEP_WATCH, &err);
        return;
    }
    /* A transport failure says why (http.c names the server), and a malformed stream what was
     * wrong; a stream that was answered and ended cleanly fails only when it ended inside an
     * event or at once and empty ("watch ended at once"). */
    if (why) {
        char what[KUBE_ERR_MESSAGE_MAX];
        bool failed = resp->err < 0 || resp->http == 0;
        (void)snprintf(what, sizeof(what), "%s%s%s%s", failed ? resp->error : "",
                       failed && why[0] ? " (" : "", why, failed && why[0] ? ")" : "");
        kube_err_transport(resp->err < 0 ? resp->err : -ECONNRESET, what, &err);
        if (failed && resp->http == 200 && !inf->stream_error && established(inf)) {
            watch_broke(inf, &err);
            return;
        }
        retry(inf, STEP_WATCH, &err);
        return;
    }
    inf->stats.watch_restarts++;
    start_watch(inf);
}

static void start_watch(struct kube_informer *inf)
{
    _cleanup_buf_ struct buf path;
    buf_init(&path, PATH_MAX_LEN);
    char timeout[16];
    int secs = inf->watch_timeout ? inf->watch_timeout
                                  : WATCH_TIMEOUT_MIN + (int)(rand01(inf) * WATCH_TIMEOUT_MIN);
    (void)snprintf(timeout, sizeof(timeout), "%d", secs);
    int e = base_path(inf, &path);
    if (e == 0)
        e = kube_client_query(&path, "watch", "1");
    if (e == 0)
        e = kube_client_query(&path, "allowWatchBookmarks", "true");
    if (e == 0)
        e = kube_client_query(&path, "resourceVersion", inf->rv ? inf->rv : "");
    if (e == 0)
        e = kube_client_query(&path, "timeoutSeconds", timeout);
    kube_watch_framer_free(&inf->framer);
    kube_watch_framer_init(&inf->framer, KUBE_WATCH_LINE_MAX);
    inf->stream_error = NULL;
    inf->error_reported = false;
    struct kube_http_req req = {
            .method = "GET",
            .path = buf_str(&path),
            .on_data = on_watch_data,
            .low_speed_time = WATCH_LOW_SPEED,
            .on_done = on_watch_done,
            .userdata = inf,
    };
    if (e == 0)
        e = kube_http_start(inf->http, &req, &inf->req);
    if (e < 0) {
        retry_errno(inf, STEP_WATCH, e, "cannot start WATCH");
        return;
    }
    inf->stats.watches++;
    inf->watch_started = ev_now(inf->loop);
    inf->watch_events = 0;
}

/* --- single objects (keep) ------------------------------------------------------------------- */

static void free_fetch(void *p)
{
    struct fetch *f = p;
    if (f->req)
        kube_http_cancel(f->inf->http, f->req);
    ev_timer_stop(f->inf->loop, &f->retry);
    free(f);
}

/* The first LIST was stored and the last of the GETs it left has answered: synced now. */
static void maybe_synced(struct kube_informer *inf)
{
    if (!inf->sync_waits || map_size(inf->fetches) > 0)
        return;
    inf->sync_waits = false;
    inf->synced = true;
    if (inf->handlers.on_synced)
        inf->handlers.on_synced(inf->userdata);
}

/* Stores what a GET of `key` answered (`obj`, or NULL: not found), telling the handlers. */
static void store_fetched(struct kube_informer *inf, const char *key, const cJSON *obj)
{
    _cleanup_json_ cJSON *old = map_take(inf->store, key);
    _cleanup_json_ cJSON *dup = obj ? cJSON_Duplicate(obj, true) : NULL;
    if (!dup) {
        if (old && inf->handlers.on_delete)
            inf->handlers.on_delete(key, old, inf->userdata);
        return;
    }
    trim(inf, dup);
    json_intern_keys(dup);
    if (map_put(inf->store, key, dup) < 0)
        return; /* out of memory: as if gone; a later event brings it */
    const cJSON *copy = TAKE_PTR(dup);
    const char *old_rv = old ? rv_of(old) : NULL, *new_rv = rv_of(copy);
    if (!old && inf->handlers.on_add)
        inf->handlers.on_add(key, copy, inf->userdata);
    else if (old && inf->handlers.on_update && (!old_rv || !new_rv || strcmp(old_rv, new_rv) != 0))
        inf->handlers.on_update(key, old, copy, inf->userdata);
}

static int send_fetch(struct fetch *f);

static void on_fetch_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct fetch *f = w->data;
    (void)loop;
    (void)revents;
    if (send_fetch(f) < 0)
        (void)map_remove(f->inf->fetches, f->key); /* out of memory; a later refresh asks again */
}

static void on_fetch_done(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct fetch *f = userdata;
    struct kube_informer *inf = f->inf;
    f->req = NULL;
    bool gone = err && err->http == 404;
    if (err && !gone && !f->stale && f->epoch == inf->list_epoch) {
        inf->stats.errors++;
        if (inf->handlers.on_error)
            inf->handlers.on_error(err, inf->userdata);
        double delay = backoff_next(&f->backoff, ev_now(inf->loop), rand01(inf));
        ev_timer_set(&f->retry, err->retry_after > delay ? err->retry_after : delay, 0.);
        ev_timer_start(inf->loop, &f->retry);
        return;
    }
    char key[KEY_MAX];
    (void)snprintf(key, sizeof(key), "%s", f->key);
    bool relisted = f->epoch != inf->list_epoch, stale = f->stale;
    free(map_take(inf->fetches, key)); /* f: its request is done, its timer stopped */
    inf->stats.fetches_dropped += relisted || stale;
    if (relisted)
        (void)kube_informer_refresh(inf, key); /* again, after the LIST */
    else if (!stale && inf->keep(key, inf->userdata))
        store_fetched(inf, key, gone ? NULL : obj);
    maybe_synced(inf);
}

static int send_fetch(struct fetch *f)
{
    struct kube_informer *inf = f->inf;
    const char *slash = inf->resource->namespaced ? strchr(f->key, '/') : NULL;
    char ns[KEY_MAX] = "";
    if (slash)
        (void)snprintf(ns, sizeof(ns), "%.*s", (int)(slash - f->key), f->key);
    f->epoch = inf->list_epoch;
    f->stale = false;
    inf->stats.fetches++;
    return kube_client_send(inf->http, "GET", inf->resource, slash ? ns : NULL,
                            slash ? slash + 1 : f->key, NULL, on_fetch_done, f, &f->req);
}

static int start_fetch(struct kube_informer *inf, const char *key)
{
    size_t len = strlen(key);
    struct fetch *f = calloc(1, sizeof(*f) + len + 1);
    if (!f)
        return -ENOMEM;
    f->inf = inf;
    memcpy(f->key, key, len + 1);
    ev_timer_init(&f->retry, on_fetch_retry, 0., 0.);
    f->retry.data = f;
    backoff_init(&f->backoff, 0.8, FETCH_BACKOFF_MAX, 2.0, 1.0, 120.0);
    int e = map_put(inf->fetches, key, f);
    if (e < 0) {
        free(f);
        return e;
    }
    e = send_fetch(f);
    if (e < 0)
        (void)map_remove(inf->fetches, key);
    return e;
}

/* The LIST is stored: GET the keys refreshed meanwhile that it did not bring. */
static void fetch_deferred(struct kube_informer *inf)
{
    const char *key;
    size_t pos = 0;
    while (inf->deferred && map_next(inf->deferred, &pos, &key, NULL))
        if (!map_contains(inf->store, key) && !map_contains(inf->fetches, key) &&
            inf->keep(key, inf->userdata))
            (void)start_fetch(inf, key);
    if (inf->deferred)
        map_clear(inf->deferred);
}

int kube_informer_refresh(struct kube_informer *inf, const char *key)
{
    if (!inf->keep || !inf->running)
        return 0;
    if (!inf->keep(key, inf->userdata)) {
        (void)map_remove(inf->fetches, key);
        (void)map_remove(inf->deferred, key);
        _cleanup_json_ cJSON *old = map_take(inf->store, key);
        if (old && inf->handlers.on_delete)
            inf->handlers.on_delete(key, old, inf->userdata);
        maybe_synced(inf);
        return 0;
    }
    if (map_contains(inf->store, key) || map_contains(inf->fetches, key))
        return 0;
    if (inf->pending) /* a LIST is being assembled: after it */
        return map_put(inf->deferred, key, inf);
    return start_fetch(inf, key);
}

/* --- the informer --------------------------------------------------------------------------- */

static int copy_config(struct kube_informer *inf, const struct kube_informer_config *cfg)
{
    inf->resource = cfg->resource;
    inf->page_size = cfg->page_size > 0 ? cfg->page_size : DEFAULT_PAGE;
    inf->watch_timeout = cfg->watch_timeout > 0 ? cfg->watch_timeout : 0;
    inf->keep_managed_fields = cfg->keep_managed_fields;
    inf->metadata_only = cfg->metadata_only;
    inf->keep = cfg->keep;
    inf->transform = cfg->transform;
    inf->handlers = cfg->handlers;
    inf->userdata = cfg->userdata;
    int e = set_str(&inf->ns, cfg->namespace);
    if (e == 0)
        e = set_str(&inf->label_selector, cfg->label_selector);
    if (e == 0)
        e = set_str(&inf->field_selector, cfg->field_selector);
    return e;
}

struct kube_informer *kube_informer_new(struct ev_loop *loop, struct kube_http *http,
                                        const struct kube_informer_config *cfg)
{
    if (!cfg->resource || (!cfg->resource->namespaced && cfg->namespace))
        return NULL;
    struct kube_informer *inf = calloc(1, sizeof(*inf));
    if (!inf)
        return NULL;
    inf->loop = loop;
    inf->http = http;
    inf->store = map_new(free_json);
    inf->rng =
            (uint64_t)(uintptr_t)inf ^ (uint64_t)(ev_time() * 1e6) ^ UINT64_C(0x9e3779b97f4a7c15);
    ev_timer_init(&inf->timer, on_timer, 0., 0.);
    inf->timer.data = inf;
    backoff_init(&inf->backoff, 0.8, 30.0, 2.0, 1.0, 120.0);
    kube_watch_framer_init(&inf->framer, KUBE_WATCH_LINE_MAX);
    if (cfg->keep) {
        inf->fetches = map_new(free_fetch);
        inf->deferred = map_new(NULL);
    }
    if (!inf->store || (cfg->keep && (!inf->fetches || !inf->deferred)) ||
        copy_config(inf, cfg) < 0)
        return kube_informer_free(inf);
    return inf;
}

void kube_informer_retry_now(struct kube_informer *inf)
{
    if (!inf->running || inf->req || !ev_is_active(&inf->timer))
        return; /* not started, or a request under way: nothing waits */
    ev_timer_stop(inf->loop, &inf->timer);
    backoff_reset(&inf->backoff);
    on_timer(inf->loop, &inf->timer, 0);
}

int kube_informer_start(struct kube_informer *inf)
{
    if (inf->running)
        return 0;
    inf->running = true;
    start_list(inf);
    return 0;
}

void kube_informer_stop(struct kube_informer *inf)
{
    if (inf->req)
        kube_http_cancel(inf->http, inf->req);
    inf->req = NULL;
    ev_timer_stop(inf->loop, &inf->timer);
    inf->running = false;
    inf->relist = false;
    inf->sync_waits = false;
    if (inf->fetches)
        map_clear(inf->fetches); /* cancels the GETs */
    if (inf->deferred)
        map_clear(inf->deferred);
}

struct kube_informer *kube_informer_free(struct kube_informer *inf)
{
    if (!inf)
        return NULL;
    kube_informer_stop(inf);
    kube_watch_framer_free(&inf->framer);
    map_free(inf->fetches);
    map_free(inf->deferred);
    map_free(inf->store);
    map_free(inf->pending);
    map_free(inf->conts);
    free(inf->rv);
    free(inf->cont);
    free(inf->ns);
    free(inf->label_selector);
    free(inf->field_selector);
    free(inf);
    return NULL;
}

bool kube_informer_has_synced(const struct kube_informer *inf)
{
    return inf->synced;
}

const cJSON *kube_informer_get(const struct kube_informer *inf, const char *key)
{
    return map_get(inf->store, key);
}

size_t kube_informer_size(const struct kube_informer *inf)
{
    return map_size(inf->store);
}

bool kube_informer_next(const struct kube_informer *inf, size_t *pos, const char **ret_key,
                        const cJSON **ret_obj)
{
    void *v;
    if (!map_next(inf->store, pos, ret_key, &v))
        return false;
    *ret_obj = v;
    return true;
}

const char *kube_informer_resource_version(const struct kube_informer *inf)
{
    return inf->rv ? inf->rv : "";
}

void kube_informer_get_stats(const struct kube_informer *inf, struct kube_informer_stats *ret)
{
    *ret = inf->stats;
}
