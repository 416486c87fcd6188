/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/leasepart.h - a coordination.k8s.io Lease held by a process (kube/leader.h)
 * as one of its parts: the controller's leader election and the agent's heartbeat. On SIGTERM the
 * part gives the Lease up (empty holder) and holds the exit until that write ends, so the next
 * holder takes over at once (controller) or the controller knows the agent stopped on purpose
 * (agent). The leader's part is ready while it can serve: leading, or standing by with the Lease
 * readable; not while the Lease cannot be read or written (/readyz says why). The leader logs
 * when it starts and stops leading and when its Lease cannot be held; the heartbeat does not log.
 */
#pragma once

#include <stdbool.h>

/* Where each agent keeps its heartbeat, a Lease named like its node (as kubelet's in
 * kube-node-lease), which the controller reads. */
#define LEASEPART_HEARTBEAT_NAMESPACE "hostdevd-node-lease"
#define LEASEPART_HEARTBEAT_SECONDS   180 /* the agent's default lease; renewed every third */

struct kube_leader;
struct kube_leader_config;
struct manager;
struct part_env;
struct part_ops;
struct topic;

/* The controller's leader election, a Lease "hostdevd-controller" in the role's namespace held
 * as its identity (part_options); emits leasepart_leading (no data) when this replica starts to
 * lead, and keeps the gauge hostdevd_leader. */
extern const struct part_ops leasepart_leader;
extern const struct topic leasepart_leading;
/* Whether the process's leader part leads now (false when the role has none). */
bool leasepart_leads(const struct manager *m);

/* A Lease `lc` describes (strings copied) as a part, for a role's own Lease part (the agent's
 * heartbeat): NULL on OOM or a bad configuration. Its hooks are the ones below; its Lease,
 * leasepart_lease(). */
void *leasepart_new(const struct part_env *env, const struct kube_leader_config *lc);
struct kube_leader *leasepart_lease(void *self);
int leasepart_start(void *self);
void leasepart_stop(void *self);
int leasepart_in_flight(void *self);
void leasepart_free(void *self);
