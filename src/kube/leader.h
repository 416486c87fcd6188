/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/leader.h - leader election with a coordination.k8s.io/v1 Lease (client-go's
 * leaderelection): try to acquire every retry period; a lease held by someone else counts as
 * expired lease_duration after this process last saw it change (local time, so clock skew
 * between nodes does not matter); the leader renews every retry period and steps down when it
 * could not renew for renew_deadline; on shutdown it releases the lease (empty holder), so the
 * next candidate takes over at once. Writes are conditional on resourceVersion.
 * Runs on the libev loop through kube/client. Does not log: callbacks report transitions.
 */
#pragma once

#include <stdbool.h>

struct cJSON;
struct clock;
struct ev_loop;
struct kube_http;
struct kube_leader;

struct kube_leader_config {
    const char *namespace; /* of the Lease */
    const char *name;      /* of the Lease */
    const char *identity;  /* this candidate, e.g. the pod name */
    double lease_duration; /* 0 = 15 s */
    double renew_deadline; /* 0 = 10 s */
    double retry_period;   /* 0 = 2 s */
    void (*on_started_leading)(void *userdata);
    void (*on_stopped_leading)(void *userdata);
    /* The Lease could not be read or written for a new reason (`problem`: "cannot write Lease
     * NS/NAME: namespaces \"NS\" not found (HTTP 404 NotFound)"), or can again (NULL). Once per
     * change, not per retry; a conflict (another candidate wrote first) is no problem. */
    void (*on_problem)(const char *problem, void *userdata);
    void *userdata;
    const struct clock *clock; /* the time the deadlines are measured in; NULL: the loop's */
};

/* A new candidate (strings copied); NULL on OOM or a bad config (deadline >= duration). */
struct kube_leader *kube_leader_new(struct ev_loop *loop, struct kube_http *http,
                                    const struct kube_leader_config *cfg);

/* Starts campaigning. Returns 0 or a negative errno. */
int kube_leader_start(struct kube_leader *l);

bool kube_leader_is_leader(const struct kube_leader *l);

/* Why the last round could not read or write the Lease (see on_problem), or NULL. */
const char *kube_leader_problem(const struct kube_leader *l);

/* From the next write on, the Lease is owned by `owner` (an ownerReference JSON object, copied;
 * e.g. the Node whose agent holds it, so the garbage collector removes the Lease with the Node).
 * Returns 0 or -ENOMEM / -EINVAL. */
int kube_leader_set_owner(struct kube_leader *l, const struct cJSON *owner);

/* Stops campaigning (a request in flight is cancelled); if leading, releases the Lease and
 * calls `done` when the write finished (or failed), after on_stopped_leading; otherwise calls
 * `done` at once. */
void kube_leader_release(struct kube_leader *l, void (*done)(void *userdata), void *userdata);

/* Frees at once (without releasing), cancelling the request in flight if any: nothing of the
 * leader is left, whether or not the server ever answers. Takes NULL; returns NULL. */
struct kube_leader *kube_leader_free(struct kube_leader *l);
