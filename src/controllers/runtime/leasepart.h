/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/leasepart.h - a coordination.k8s.io Lease held by a process (kube/leader.h)
 * as one of its parts: the controller's leader election and the agent's heartbeat. On SIGTERM the
 * part gives the Lease up (empty holder) and holds the exit until that write ends, so the next
 * holder takes over at once (controller) or the controller knows the agent stopped on purpose
 * (agent). The leader's part is ready while it can serve: leading, or standing by with the Lease
 * readable; not while the Lease cannot be read or written (/readyz says why). Does not log.
 */
#pragma once

/* Where each agent keeps its heartbeat, a Lease named like its node (as kubelet's in
 * kube-node-lease), which the controller reads. */
#define LEASEPART_HEARTBEAT_NAMESPACE "hostdevd-node-lease"
#define LEASEPART_HEARTBEAT_SECONDS   180 /* the agent's default lease; renewed every third */

struct kube_leader;
struct kube_leader_config;
struct process;

struct part_ops;

/* The two kinds of Lease part: "leader", ready while it leads or stands by able to read the
 * Lease (a replica that cannot is not ready: /readyz says "lease: <why>"), and "heartbeat",
 * whose Lease says nothing of readiness. */
extern const struct part_ops leasepart_leader;
extern const struct part_ops leasepart_heartbeat;

/* Adds a part of kind `ops` holding the Lease `lc` describes (strings copied). Returns 0 and
 * the candidate in *ret (freed with the process; started with the process's parts), or a
 * negative errno. */
int leasepart_add(struct process *proc, const struct part_ops *ops,
                  const struct kube_leader_config *lc, struct kube_leader **ret);
