/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/informer.h - a cache of one resource kept in step with the API server (client-go's
 * reflector + store): LIST in pages (limit/continue), then WATCH from the list's
 * resourceVersion with bookmarks and a server-side timeout, WATCH again when a stream ends,
 * LIST again after 410 Gone (emitting deletes for objects that vanished meanwhile), back off
 * with jitter on errors (honouring Retry-After). Label and field selectors narrow what is
 * cached. The store maps "name" (cluster-scoped) or "namespace/name" to the object.
 *
 * Runs on the libev loop through kube/http. Does not log; counters say what happened.
 * Handlers run on the loop; they must not stop or free the informer.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct cJSON;
struct ev_loop;
struct kube_err;
struct kube_http;
struct kube_informer;
struct kube_resource;
struct map;

struct kube_informer_handlers {
    /* `obj` is borrowed for the call (the store keeps its own copy). */
    void (*on_add)(const char *key, const struct cJSON *obj, void *userdata);
    /* Only when the resourceVersion changed. */
    void (*on_update)(const char *key, const struct cJSON *old_obj, const struct cJSON *obj,
                      void *userdata);
    /* `obj` is the object of the DELETED event as it came (not trimmed), or, for an object a
     * relist no longer finds, the last state the informer knew. */
    void (*on_delete)(const char *key, const struct cJSON *obj, void *userdata);
    /* Each failed LIST or WATCH, for logging by the owner; may be NULL. */
    void (*on_error)(const struct kube_err *err, void *userdata);
    /* Each object of a LIST or watch event that cannot be kept (not an object with a
     * metadata.name of at most 500 bytes; the server never sends one): skipped, the rest of the
     * page or stream taken. `what` says which and why. May be NULL. */
    void (*on_skip)(const char *what, void *userdata);
    /* Once, when the informer has synced (kube_informer_has_synced turns true). May be NULL. */
    void (*on_synced)(void *userdata);
};

struct kube_informer_config {
    const struct kube_resource *resource;
    const char *namespace;      /* NULL: cluster-scoped or all namespaces */
    const char *label_selector; /* NULL or e.g. "nodename=titan" */
    const char *field_selector; /* NULL or e.g. "spec.nodeName=titan" */
    int page_size;              /* LIST limit; 0 = 500 */
    bool keep_managed_fields;   /* cache metadata.managedFields too (half the memory); rarely
                                   needed: writes go through patches */
    bool metadata_only;         /* cache apiVersion, kind and metadata only (a Node's status
                                   is most of its size; enough to know it exists) */
    int watch_timeout;          /* each WATCH's server-side timeoutSeconds; 0 = random in
                                   [300, 600) (tests: the server bookmarks 2 s before it) */
    /* Optional: cache only the objects whose key this says yes to (with `userdata`), the
     * others read from the LIST's pages and the watch and dropped at once, no handler told:
     * memory follows the keys, not the collection (the controller keeps the devices that are
     * claimed, of the whole cluster's). What it says may change: kube_informer_refresh() is
     * then told the key. */
    bool (*keep)(const char *key, void *userdata);
    /* Optional: called on each object before it is stored (after managedFields and
     * metadata_only are dropped) to drop what no reader needs, as client-go's SetTransform; must
     * leave metadata.name, namespace and resourceVersion. The handlers see what it left. */
    void (*transform)(struct cJSON *obj);
    struct kube_informer_handlers handlers;
    void *userdata;
};

struct kube_informer_stats {
    unsigned long lists;          /* complete LISTs */
    unsigned long relists_gone;   /* LISTs forced by 410 Gone */
    unsigned long watches;        /* WATCH requests started */
    unsigned long watch_restarts; /* WATCHes that ended and were restarted */
    unsigned long events;         /* ADDED/MODIFIED/DELETED events applied */
    unsigned long bookmarks;
    unsigned long errors;          /* failed LIST or WATCH requests */
    unsigned long skipped;         /* objects that could not be kept (on_skip) */
    unsigned long fetches;         /* GETs of one object (kube_informer_refresh) */
    unsigned long fetches_dropped; /* their answers dropped: a watch event or a LIST was newer */
    unsigned long dropped;         /* objects of a LIST or event that keep() refused */
};

/* A new, stopped informer. The config's strings are copied. NULL on OOM or bad config. */
struct kube_informer *kube_informer_new(struct ev_loop *loop, struct kube_http *http,
                                        const struct kube_informer_config *cfg);

/* Stops (cancelling requests, no handler runs) and frees. Takes NULL; returns NULL. */
struct kube_informer *kube_informer_free(struct kube_informer *inf);

/* Starts listing and watching. Returns 0 or a negative errno. */
int kube_informer_start(struct kube_informer *inf);

/* A retry waiting out its backoff (e.g. a LIST that answered 404 while the kind's CRD was
 * absent) starts now, and the backoff starts over; nothing happens when no retry waits. */
void kube_informer_retry_now(struct kube_informer *inf);

/* Stops: cancels requests and timers; the store is kept. */
void kube_informer_stop(struct kube_informer *inf);

/* With `keep`: the answer of keep(key) may have changed. Now yes and the object not cached: it
 * is fetched (a GET; once the LIST under way is stored, if one is) and stored with on_add, the
 * GET's answer dropped when a watch event for the key came meanwhile (the event is as new) or a
 * LIST started (fetched again after it); a failed GET is retried with backoff while the key is
 * kept. Now no: the object is dropped with on_delete (its last state), a GET under way
 * cancelled. Nothing happens before kube_informer_start (the first LIST asks keep) or without
 * `keep`. Returns 0 or -ENOMEM. */
int kube_informer_refresh(struct kube_informer *inf, const char *key);

/* Whether the first complete LIST has been stored (with `keep`: and the GETs it left to do, for
 * keys refreshed while it was under way, have answered). */
bool kube_informer_has_synced(const struct kube_informer *inf);

/* The cached object for `key`, or NULL (borrowed; valid until the loop runs again). */
const struct cJSON *kube_informer_get(const struct kube_informer *inf, const char *key);

size_t kube_informer_size(const struct kube_informer *inf);

/* Iterates the store as map_next() does: start with *pos = 0. */
bool kube_informer_next(const struct kube_informer *inf, size_t *pos, const char **ret_key,
                        const struct cJSON **ret_obj);

/* The resourceVersion the next WATCH would start from ("" before the first LIST). */
const char *kube_informer_resource_version(const struct kube_informer *inf);

void kube_informer_get_stats(const struct kube_informer *inf, struct kube_informer_stats *ret);

/* The store key of an object: "name" or "namespace/name", written to `ret` (size bytes).
 * Returns 0, -EINVAL (no metadata.name) or -ENAMETOOLONG. */
int kube_informer_key(const struct cJSON *obj, char *ret, size_t size);

/* What a relist does with one LIST page (the body of a 200 answer), pure so that it can be
 * fuzzed: its items go into `pending` (key -> object, owned by the map; managedFields dropped
 * unless `keep_managed_fields`, all but apiVersion, kind and metadata with `metadata_only`).
 * Returns 0 with `*ret_cont` the continue token of the next page (malloc'd), or NULL on the last
 * page, which must carry the list's resourceVersion (`*ret_rv`, malloc'd; NULL on other pages).
 * An item without a usable name is skipped (counted nowhere: the informer reports it through
 * on_skip). -EBADMSG (not a JSON object, items not a list, the last page without a printable
 * resourceVersion) or -ENOMEM otherwise; `pending` may hold the items taken before the error. */
int kube_informer_list_page(const char *body, size_t len, bool keep_managed_fields,
                            bool metadata_only, struct map *pending, char **ret_cont,
                            char **ret_rv);

/* Tells `h` how the objects of a complete LIST (`list`: key -> object) differ from `store`:
 * on_delete for keys only in the store, on_add for keys only in the list, on_update for keys
 * in both whose resourceVersion differs (or is missing). Changes neither map. */
void kube_informer_diff(const struct map *store, const struct map *list,
                        const struct kube_informer_handlers *h, void *userdata);
