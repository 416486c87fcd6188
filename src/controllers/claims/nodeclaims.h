/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/claims/nodeclaims.h - the controller's reconciler for claims no agent will ever
 * serve, keyed by node name:
 *   - a claim whose Node does not exist gets Ready=False, reason NodeNotFound (and an Event);
 *     once it is being deleted, hostdevd's finalizer on it is removed (Event FinalizerRemoved),
 *     since no agent will ever release a device of a node that is gone: deletion does not hang
 *     (the garbage collector removes the node's devices, owned by the Node);
 *   - a claim on a node whose agent has no fresh heartbeat (the Lease named like the node in
 *     the heartbeat namespace: never written, given up, or not renewed for its duration) gets
 *     Ready=False, reason AgentNotRunning (and an Event), unless the agent had made it Ready:
 *     a bind outlives its agent, and the device stays usable.
 * The agent replaces the condition with its own when it comes back. Status writes carry the
 * claim's resourceVersion, so a concurrent write by the agent wins and the controller looks
 * again. A heartbeat counts as fresh for its leaseDurationSeconds after this process saw it
 * change (its own clock: skew between nodes does not matter). Keys are handed out only while
 * `can_write` says so (the leader). Logs.
 */
#pragma once

#include "controllers/runtime/part.h"

#include <stdbool.h>

struct buf;
struct cJSON;
struct ev_loop;
struct kube_http;
struct kube_informer;
struct kube_recorder;
struct metrics;
struct nodeclaims;

/* --- pure ------------------------------------------------------------------------------------ */

enum nodeclaims_agent {
    NODECLAIMS_AGENT_RUNNING, /* heartbeat fresh */
    NODECLAIMS_AGENT_NEVER,   /* no heartbeat Lease */
    NODECLAIMS_AGENT_STOPPED, /* the agent gave its Lease up (stopped on purpose) */
    NODECLAIMS_AGENT_SILENT,  /* the Lease was not renewed for its duration */
};

struct nodeclaims_node {
    const char *name;
    bool exists; /* a Node of that name */
    enum nodeclaims_agent agent;
    const char *lease;   /* "namespace/name" of its heartbeat Lease, for messages */
    const char *renewed; /* the Lease's spec.renewTime, or NULL */
};

enum nodeclaims_action {
    NODECLAIMS_NOTHING,
    NODECLAIMS_CONDITION, /* write Ready=False with reason and message */
    NODECLAIMS_RELEASE,   /* remove the finalizer */
};

#define NODECLAIMS_NODE_NOT_FOUND    "NodeNotFound"
#define NODECLAIMS_AGENT_NOT_RUNNING "AgentNotRunning"
#define NODECLAIMS_FINALIZER_REMOVED "FinalizerRemoved"

struct nodeclaims_decision {
    enum nodeclaims_action action;
    const char *reason;
    char message[768];
};

/* What to do about `claim` (whose finalizer is `finalizer`) on node `n`. */
void nodeclaims_decide(const struct cJSON *claim, const char *finalizer,
                       const struct nodeclaims_node *n, struct nodeclaims_decision *ret);

/* The status merge patch of a NODECLAIMS_CONDITION decision, with the claim's resourceVersion.
 * NULL on OOM. */
char *nodeclaims_status_patch(const struct cJSON *claim, const struct nodeclaims_decision *d,
                              const char *now);

/* --- the reconciler -------------------------------------------------------------------------- */

struct nodeclaims_config {
    struct part_env env; /* loop, API client, metrics, node and its paths (runtime/part.h) */
    struct kube_recorder *events;
    const char *lease_namespace; /* of the agents' heartbeats */
};

/* Reads the process's claim caches (cluster-wide); a claim's change queues its node, and
 * every node with claims or a Node object is looked at when this replica starts to lead; keys
 * are handed out only while it leads (runtime/leasepart.h). */
struct nodeclaims *nodeclaims_new(const struct nodeclaims_config *cfg);

/* The part (controllers/runtime/part.h): start, stop, drain and free, as its own; `self` is
 * what nodeclaims_new returned. */
extern const struct part_ops nodeclaims_part;
