/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/heartbeat.h - the agent's heartbeat: a Lease named like its node in the
 * heartbeat namespace (runtime/leasepart.h), owned by the Node once its uid is known (so it goes
 * with the Node), which the controller reads to tell a node without an agent. Does not log.
 */
#pragma once

struct part_ops;

/* The part: made from the role's options (lease_namespace, heartbeat); watches nodeuid_known. */
extern const struct part_ops heartbeat_part;
