/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/devwrite.h - what the PCIDevice and USBDevice reconcilers share: the pure
 * pieces of a minimal write plan (merge patches of the managed status fields, the nodename label
 * and the ownerReference to the Node) and the one write chain that carries a plan out on a runner
 * job, one request at a time: create, status, metadata, delete (uid precondition), each logged.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct cJSON;
struct kube_http;
struct kube_resource;
struct metrics;
struct metrics_series;
struct runner_job;

/* --- pure ------------------------------------------------------------------------------------- */

/* {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}. */
struct cJSON *devwrite_owner_ref(const char *node, const char *node_uid);

/* A new device object: apiVersion, kind, metadata {name, labels {nodename}, ownerReferences to
 * the Node when `node_uid` is known}, an empty spec. NULL on OOM. */
struct cJSON *devwrite_new_object(const char *kind, const char *name, const char *node,
                                  const char *node_uid);

/* The fields of `want` that `have` lacks or differs in, and null for each of the `n` `managed`
 * fields `have` has and `want` does not. An object-valued field that differs is patched key by
 * key, with null for each key `want` lacks (a merge patch merges objects: the whole object would
 * leave such a key in place, and the next plan would write again). */
struct cJSON *devwrite_status_diff(const struct cJSON *want, const struct cJSON *have,
                                   const char *const *managed, size_t n);

/* The metadata changes that make `meta` carry label nodename=<node> and an ownerReference to
 * the Node (other owners are kept; a Node reference with a stale uid is replaced). */
/* Whether `obj` is labelled as another node's (nodename=<other>): the API server never sends
 * one to a watch selecting nodename=<node>, and the agent must neither write nor delete it. */
bool devwrite_foreign(const struct cJSON *obj, const char *node);
/* Logs a foreign object (once per ADD event: the caller calls it for adds only). */
void devwrite_note_foreign(const char *kind, const char *key, const struct cJSON *obj,
                           const char *node);

struct cJSON *devwrite_meta_diff(const struct cJSON *meta, const char *node, const char *node_uid);

/* Serializes {"<top>": inner} and frees inner; NULL when inner is empty or on OOM. */
char *devwrite_wrap(const char *top, struct cJSON *inner);

/* --- the write chain (logs) ------------------------------------------------------------------- */

enum { DEVWRITE_CREATE, DEVWRITE_PATCH, DEVWRITE_DELETE, DEVWRITE_VERBS };

struct devwrite {
    struct runner_job *job;
    struct kube_http *http;
    const struct kube_resource *res;
    const char *kind;                     /* "PCIDevice": for log lines */
    struct metrics_series *const *writes; /* DEVWRITE_VERBS counters, by verb */
    struct cJSON *object;                 /* to create (owned), or NULL */
    char *status_patch, *meta_patch;      /* owned, or NULL */
    bool delete;                          /* with `uid` as precondition */
    char uid[64];
    const char *delete_why; /* the log line of the delete */
    int step;
};

/* Registers hostdevd_api_writes_total{kind,verb} series for `kind` into `ret`. */
void devwrite_register(struct metrics *m, const char *kind,
                       struct metrics_series *ret[DEVWRITE_VERBS]);

/* Carries the writes out, then ends the job (runner_job_done): RUNNER_DONE, or RUNNER_RETRY
 * after a failed request. `w` must live until then; devwrite_done() frees what it owns. */
void devwrite_run(struct devwrite *w, struct runner_job *job);
void devwrite_done(struct devwrite *w);
