/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/nodeuid.h - this node's Node uid, for the ownerReference of every device
 * object the agent makes (the garbage collector deletes a removed node's devices). Read once at
 * start, and again with backoff (10 s doubling to 5 min) while the Node cannot be read: a missing
 * Node never becomes polling. Logs.
 */
#pragma once

#include "controllers/runtime/part.h"

#include <stdbool.h>

struct ev_loop;
struct kube_http;
struct nodeuid;

struct topic;

/* Emitted (no data) once the uid is known (the device reconcilers look at every object
 * again), and once after the first answer when that answer gave no uid (nodeuid_answered() has
 * turned true: the reconcilers that waited for it go ahead without an ownerReference). */
extern const struct topic nodeuid_known;

struct nodeuid *nodeuid_new(const struct part_env *env);
/* The uid, or NULL while it is not known. */
const char *nodeuid_get(const struct nodeuid *n);
/* Whether the first GET of the Node has answered, with the uid or an error (true for NULL).
 * The device reconcilers create nothing before it, so their first objects carry the
 * ownerReference whenever the Node exists; a Node that cannot be read never holds them longer. */
bool nodeuid_answered(const struct nodeuid *n);

/* The part (controllers/runtime/part.h): the first GET at start, retries stopped on SIGTERM. */
extern const struct part_ops nodeuid_part;
