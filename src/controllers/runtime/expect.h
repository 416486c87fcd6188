/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/expect.h - write expectations (client-go's "expectations" pattern): after a
 * controller writes an object it records the resourceVersion the API server returned, and does
 * not reconcile that key again until its informer has delivered that version (or the deletion),
 * or a TTL has passed. A stale cache therefore never causes a second, redundant write.
 * A version at or after the one we wrote counts as seen (resourceVersions are etcd revisions).
 * Pure bookkeeping: no I/O, no logging; time comes from the caller.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct cJSON;
struct expect;

#define EXPECT_TTL 30.0

struct expect *expect_new(void);
struct expect *expect_free(struct expect *e);
/* Our write of `key` returned resourceVersion `rv` (NULL: we deleted it). `cached` is what the
 * informer holds for `key` now: the watch event may have come before the response, and then
 * there is nothing to wait for. */
void expect_write(struct expect *e, const char *key, const char *rv, const struct cJSON *cached,
                  double now);
/* How many more seconds `key` waits for the informer to see our last write; 0 when it does
 * not wait. The caller re-queues the key after that long, so a lost event cannot strand it. */
double expect_waiting(struct expect *e, const char *key, double now);
/* The informer delivered `obj` for `key` (deleted: a deletion, which ends any expectation:
 * nothing stale remains of an object that is gone, and one of the same name may come next). */
void expect_observed(struct expect *e, const char *key, const struct cJSON *obj, bool deleted);
/* How many keys still wait (within their TTL) for a write to show. */
size_t expect_pending(const struct expect *e, double now);
/* Ends the expectation of `key` when the informer has caught up with it, whatever the order
 * in which the write's response and its watch event came: the cached object is at or after
 * the version we wrote, the informer's list/watch position (`informer_rv`, may be NULL) is,
 * or the object we deleted is no longer cached. The runner calls it before each reconcile. */
void expect_caught_up(struct expect *e, const char *key, const struct cJSON *cached,
                      const char *informer_rv);
