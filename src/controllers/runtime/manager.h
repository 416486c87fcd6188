/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/manager.h - what the parts of one process share (controller-runtime's
 * Manager, in C): one cache per kind, the watches that map a cache's events or an in-process
 * topic to a part's own work, the parts themselves by their declared hooks, and the worker
 * thread.
 *
 * - A cache (`struct cache_kind`, declared once by the module that knows the kind:
 *   controllers/objects/kinds.h) is one informer per process, made on first use, started with
 *   the process's parts, freed after them. In a node's process (part_env.node_name set) a kind
 *   that names its node selector caches that node's objects only; one that names `keys_of`
 *   only the objects whose names that other cache has.
 * - A watch (`struct watch`, declared in a part's ops) maps each event of a cache, or each
 *   emission of a topic, to the part's own keys: it calls `map` with the part itself. Watches
 *   run in the order the parts were added, after the cache's own runner queued the key.
 * - A topic (`struct topic`, declared by the module that emits it) is an in-process event: a
 *   scan's result, a Node's uid, devices released. manager_emit() runs its watches at once.
 * - manager_part() finds the part a role added with the given hooks: a part reads another's
 *   public API, nobody sets another's fields.
 * Runs on the loop; does not log, except the failures of a cache no runner reads.
 */
#pragma once

#include <stdbool.h>

struct buf;
struct cJSON;
struct ev_loop;
struct kube_http;
struct kube_informer;
struct kube_resource;
struct manager;
struct kube_informer_handlers;
struct part_ops;
struct runner;
struct runner_config;
struct worker;

enum watch_type { WATCH_ADD, WATCH_UPDATE, WATCH_DELETE, WATCH_TOPIC };

/* A kind a process caches once. */
struct cache_kind {
    const char *name; /* "pcidevices": the cache's name in logs and /readyz (cache/<name>) */
    const struct kube_resource *res;
    const char *node_label; /* in a node's process: label selector <node_label>=<node> */
    const char *node_field; /* in a node's process: field selector <node_field>=<node> */
    const char *field;      /* always: a field selector ("metadata.name=...") */
    bool metadata_only;     /* cache metadata only (a Node's status is most of its size) */
    /* Cache only the objects named like one in the cache of `keys_of` (a claim and its device
     * share their name), of the whole collection; started once that cache has synced, so that
     * its first LIST keeps what it should; an object whose name comes later is fetched with a
     * GET (kube/informer.h keep, kube_informer_refresh). Memory then follows the claims, not
     * the cluster's devices (the controller's). NULL: every object. */
    const struct cache_kind *keys_of;
};

/* An in-process event, declared by the module that emits it. */
struct topic {
    const char *name;
};

/* What a watch's map function is given: a cache's event (`key`, `obj`, `type`), or a topic's
 * emission (`data`, as the topic's module documents it; key and obj NULL). */
struct watch_event {
    enum watch_type type;
    const char *key;
    const struct cJSON *obj;
    void *data;
};

/* A watch a part declares: the events of `kind`, or of `topic`, mapped to the part's work. */
struct watch {
    const struct cache_kind *kind;
    const struct topic *topic;
    void (*map)(void *self, const struct watch_event *ev);
};

/* A new manager for the process on `loop` with client `http`; `node`: the node the process
 * serves (NULL: cluster-wide). NULL on OOM. */
struct manager *manager_new(struct ev_loop *loop, struct kube_http *http, const char *node);
/* Frees the caches (after the parts that read them). Takes NULL; returns NULL. */
struct manager *manager_free(struct manager *m);

/* The cache of `kind`, made on first use; NULL on OOM. Read-only for every part. */
struct kube_informer *manager_cache(struct manager *m, const struct cache_kind *kind);
/* A runner (runtime/runner.h) on the cache of `kind`: `rc` as given, its informer the cache,
 * its events first among the cache's receivers. NULL on OOM or a bad configuration. */
struct runner *manager_runner(struct manager *m, const struct cache_kind *kind,
                              const struct runner_config *rc);
/* Adds `h` (with `userdata`) to the receivers of `kind`'s events, after those already added
 * (a runner adds its own when it is made). Returns 0 or -ENOMEM. */
int manager_subscribe(struct manager *m, const struct cache_kind *kind,
                      const struct kube_informer_handlers *h, void *userdata);
/* Adds the watches a part declares (ops->watches), for `self`. Returns 0 or -ENOMEM. */
int manager_add_watches(struct manager *m, const struct part_ops *ops, void *self);
/* Runs the watches of `topic` with `data`, in the order they were added. */
void manager_emit(struct manager *m, const struct topic *topic, void *data);
/* Starts every cache (the process does, before its parts). Returns 0 or a negative errno. */
int manager_start(struct manager *m);
/* Whether every cache has synced; false with "cache/<name> has not synced" in `why`. */
bool manager_synced(const struct manager *m, struct buf *why);

/* Records a part the process added, for manager_part(). Returns 0 or -ENOMEM. */
int manager_add_part(struct manager *m, const struct part_ops *ops, void *self);
/* The part added with hooks `ops` (its module's `<module>_part`), or NULL when the role has
 * none. */
void *manager_part(const struct manager *m, const struct part_ops *ops);

/* The worker thread for blocking node work, started on first use; NULL on failure (logged).
 * manager_stop_worker() finishes the job in progress, cancels the rest and frees it. */
struct worker *manager_worker(struct manager *m);
void manager_stop_worker(struct manager *m);

/* The part that makes a role ready only once every cache has synced ("caches"), for a role
 * whose caches no runner reports (the controller's). */
extern const struct part_ops manager_caches_part;
