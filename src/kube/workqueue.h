/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/workqueue.h - the client-go work queue: keys to reconcile, fair and stingy.
 *
 * - A key is queued at most once (a dirty set); a key being processed is never handed out
 *   again until wq_done(); if it was added meanwhile it is queued again by wq_done().
 * - Delayed adds wait in a min-heap; a second delayed add of a waiting key only moves it
 *   earlier. The queue does not own a timer: its owner asks wq_next_in() how long until the
 *   next key is due, arms one timer for that, and calls wq_get() when it fires.
 * - Rate-limited adds wait max(per-key exponential backoff, overall token bucket):
 *   base_delay * 2^failures capped at max_delay, and qps/burst over all keys. wq_forget()
 *   resets a key's failures (call it on success).
 * - The clock is injected (struct clock), so tests drive time.
 * No I/O, no logging, no event loop. Not thread-safe.
 *
 * Decisions (workqueue.c):
 * - After wq_shut_down() wq_get() returns NULL at once, even with keys ready (client-go
 *   drains them first), and wq_next_in() returns -1. wq_add*() are ignored and return 0
 *   (wq_add_rate_limited then counts no failure); wq_done() and wq_forget() still work.
 * - wq_add() of a waiting key does not cancel the wait: the key runs now and again when it
 *   is due, as in client-go (a due key that is still queued is not queued twice).
 * - Waiting keys due at the same time become ready in the order they were added.
 * - wq_add_rate_limited() always takes a token from the bucket, even when the key's own
 *   backoff is longer (client-go's MaxOfRateLimiter asks both limiters). The bucket starts
 *   full; qps <= 0 disables it; burst < 1 counts as 1. Failures saturate at INT_MAX.
 * - A key's failure count (and its memory) is kept until wq_forget().
 * - wq_next_in() first moves the keys that are due to the ready FIFO (hence not const), so
 *   when it returns 0 the next wq_get() hands out a key.
 * - wq_new(NULL) uses wq_config_default().
 */
#pragma once

#include <stddef.h>

struct clock;
struct wq;

struct wq_config {
    double base_delay;         /* seconds; client-go 0.005 */
    double max_delay;          /* seconds; client-go 1000 (the agent uses less) */
    double qps;                /* overall rate of rate-limited adds; client-go 10 */
    int burst;                 /* token bucket size; client-go 100 */
    const struct clock *clock; /* NULL = CLOCK_MONOTONIC; borrowed, must outlive the queue */
    /* Called by wq_get() with how long the key waited from its add (client-go's
     * queue_duration metric); may be NULL. */
    void (*on_wait)(double seconds, void *userdata);
    void *userdata;
};

/* Counts since the queue was made (client-go's workqueue metrics). */
struct wq_stats {
    unsigned long adds;    /* keys that became queued (an add of a queued key is not one) */
    unsigned long retries; /* rate-limited adds */
};

/* The client-go defaults above, with the real clock. */
void wq_config_default(struct wq_config *cfg);

/* A new queue; NULL on OOM. The configuration is copied. */
struct wq *wq_new(const struct wq_config *cfg);

/* Frees the queue and every key. Takes NULL; returns NULL. */
struct wq *wq_free(struct wq *q);

/* Queues `key` now (copied). Does nothing if it is already queued or after shutdown; a key
 * being processed is marked to run again after wq_done(). Returns 0 or -ENOMEM. */
int wq_add(struct wq *q, const char *key);

/* Queues `key` after `delay` seconds (<= 0: now). If the key already waits, the earlier time
 * wins. Returns 0 or -ENOMEM. */
int wq_add_after(struct wq *q, const char *key, double delay);

/* Counts a failure of `key` and queues it after its rate-limited delay. Returns 0/-ENOMEM. */
int wq_add_rate_limited(struct wq *q, const char *key);

/* Forgets the failures of `key` (its next rate-limited delay is base_delay again). */
void wq_forget(struct wq *q, const char *key);

/* How many failures `key` has had since it was last forgotten. */
int wq_num_requeues(const struct wq *q, const char *key);

/*
 * Takes the next ready key (delayed keys that are due become ready first), marks it as being
 * processed and returns it; NULL when no key is ready now or after shutdown. The string is
 * the queue's and stays valid until wq_done() for it.
 */
const char *wq_get(struct wq *q);

/* Ends processing of `key` (the pointer wq_get() returned, or an equal string); queues it
 * again if it was added meanwhile. Invalidates the pointer wq_get() returned. */
void wq_done(struct wq *q, const char *key);

/* Seconds until the next key is ready: 0 when one is ready now, -1 when none is queued or
 * waiting. */
double wq_next_in(struct wq *q);

/* Keys ready now (not counting waiting and processing ones). */
size_t wq_len(const struct wq *q);

/* Keys being processed. */
size_t wq_processing(const struct wq *q);

void wq_get_stats(const struct wq *q, struct wq_stats *ret);

/* Stops handing out keys; later adds are ignored. Keys in processing can still be done. */
void wq_shut_down(struct wq *q);
