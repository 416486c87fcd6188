/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/workqueue.c - the client-go work queue. See workqueue.h. No I/O, no logging.
 *
 * Every key the queue knows has one `struct item` in `items`, which owns it: the item says
 * whether the key is dirty (needs a run), processing (handed out), waiting (in the delay
 * heap) and how many failures it has. An item is freed as soon as none of these holds.
 * The ready FIFO is a ring of item pointers holding exactly the keys that are dirty and not
 * processing; its capacity is kept at least the number of dirty keys, so that wq_done() and
 * wq_get() never allocate.
 */
#include "kube/workqueue.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/heap.h"
#include "base/map.h"

#define MIN_RING 16

struct item {
    char *key;
    struct heap_node wait; /* wait.at: when the key is due */
    int failures;
    double added; /* when it became dirty: the start of its queue duration */
    bool dirty;
    bool processing;
};

struct wq {
    struct wq_config cfg;
    struct map *items; /* key -> struct item, owned */
    struct item **ring;
    size_t head, len, alloc;
    size_t ndirty, nprocessing;
    struct heap waiting;
    double tokens, refilled; /* the token bucket, and when it was last refilled */
    struct wq_stats stats;
    bool shutting_down;
};

static void item_free(void *p)
{
    struct item *it = p;
    free(it->key);
    free(it);
}

/* The item of `key`, made if needed; NULL on OOM. */
static struct item *item_obtain(struct wq *q, const char *key)
{
    struct item *it = map_get(q->items, key);
    if (it)
        return it;
    it = calloc(1, sizeof(*it));
    if (!it)
        return NULL;
    heap_node_init(&it->wait);
    it->key = strdup(key);
    if (!it->key || map_put(q->items, key, it) < 0) {
        item_free(it);
        return NULL;
    }
    return it;
}

/* Frees the item when the queue has nothing left to remember about its key. */
static void item_release(struct wq *q, struct item *it)
{
    if (it->dirty || it->processing || heap_node_queued(&it->wait) || it->failures > 0)
        return;
    map_take(q->items, it->key);
    item_free(it);
}

/* The ring slot of the i-th queued item; the ring's size is a power of two. */
static size_t ring_slot(const struct wq *q, size_t i)
{
    return (q->head + i) & (q->alloc - 1);
}

/* Grows the ring to hold at least `need` items, unwrapping it into the new array. */
static int ring_reserve(struct wq *q, size_t need)
{
    if (need <= q->alloc)
        return 0;
    size_t alloc = q->alloc ? q->alloc * 2 : MIN_RING;
    if (alloc > SIZE_MAX / sizeof(struct item *))
        return -ENOMEM;
    struct item **ring = malloc(alloc * sizeof(struct item *));
    if (!ring)
        return -ENOMEM;
    for (size_t i = 0; i < q->len; i++)
        ring[i] = q->ring[ring_slot(q, i)];
    free(q->ring);
    q->ring = ring;
    q->head = 0;
    q->alloc = alloc;
    return 0;
}

/* Appends to the ring, which has room (see ring_reserve). */
static void ring_push(struct wq *q, struct item *it)
{
    q->ring[ring_slot(q, q->len)] = it;
    q->len++;
}

static struct item *ring_pop(struct wq *q)
{
    if (q->len == 0)
        return NULL;
    struct item *it = q->ring[q->head];
    q->head = ring_slot(q, 1);
    q->len--;
    return it;
}

/* Marks the key dirty and queues it unless it is being processed (queue.go Add). */
static int make_dirty(struct wq *q, struct item *it)
{
    if (it->dirty)
        return 0;
    if (ring_reserve(q, q->ndirty + 1) < 0)
        return -ENOMEM;
    it->dirty = true;
    it->added = clock_now(q->cfg.clock);
    q->ndirty++;
    q->stats.adds++;
    if (!it->processing)
        ring_push(q, it);
    return 0;
}

/* Moves the waiting keys that are due at `now` to the ready FIFO. */
static void promote(struct wq *q, double now)
{
    struct heap_node *n;
    while ((n = heap_top(&q->waiting)) && n->at <= now) {
        struct item *it = heap_entry(n, struct item, wait);
        if (make_dirty(q, it) < 0)
            return; /* it stays waiting and is retried on the next call */
        heap_pop(&q->waiting);
    }
}

/* base_delay * 2^failures, capped at max_delay; doubling stops at the cap, so no overflow. */
static double item_delay(const struct wq *q, int failures)
{
    double d = q->cfg.base_delay;
    for (int i = 0; i < failures && d > 0 && d < q->cfg.max_delay; i++)
        d *= 2;
    return d < q->cfg.max_delay ? d : q->cfg.max_delay;
}

/* Takes a token from the bucket and returns how long its reservation waits (x/time/rate). */
static double bucket_delay(struct wq *q)
{
    if (!(q->cfg.qps > 0))
        return 0;
    double now = clock_now(q->cfg.clock);
    double burst = q->cfg.burst > 1 ? q->cfg.burst : 1;
    if (now > q->refilled) {
        q->tokens += (now - q->refilled) * q->cfg.qps;
        q->refilled = now;
    }
    if (q->tokens > burst)
        q->tokens = burst;
    q->tokens -= 1;
    return q->tokens < 0 ? -q->tokens / q->cfg.qps : 0;
}

void wq_config_default(struct wq_config *cfg)
{
    *cfg = (struct wq_config){
            .base_delay = 0.005,
            .max_delay = 1000,
            .qps = 10,
            .burst = 100,
            .clock = NULL,
    };
}

struct wq *wq_new(const struct wq_config *cfg)
{
    struct wq *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    if (cfg)
        q->cfg = *cfg;
    else
        wq_config_default(&q->cfg);
    q->items = map_new(item_free);
    if (!q->items) {
        free(q);
        return NULL;
    }
    heap_init(&q->waiting);
    q->tokens = q->cfg.burst > 1 ? q->cfg.burst : 1;
    q->refilled = clock_now(q->cfg.clock);
    return q;
}

struct wq *wq_free(struct wq *q)
{
    if (!q)
        return NULL;
    heap_free(&q->waiting);
    map_free(q->items);
    free(q->ring);
    free(q);
    return NULL;
}

int wq_add(struct wq *q, const char *key)
{
    if (q->shutting_down)
        return 0;
    struct item *it = item_obtain(q, key);
    if (!it)
        return -ENOMEM;
    int r = make_dirty(q, it);
    item_release(q, it);
    return r;
}

int wq_add_after(struct wq *q, const char *key, double delay)
{
    if (q->shutting_down)
        return 0;
    if (!(delay > 0))
        return wq_add(q, key);
    double at = clock_now(q->cfg.clock) + delay;
    struct item *it = item_obtain(q, key);
    if (!it)
        return -ENOMEM;
    if (heap_node_queued(&it->wait)) {
        if (at < it->wait.at) {
            it->wait.at = at;
            heap_update(&q->waiting, &it->wait);
        }
        return 0;
    }
    it->wait.at = at;
    int r = heap_push(&q->waiting, &it->wait);
    item_release(q, it);
    return r;
}

int wq_add_rate_limited(struct wq *q, const char *key)
{
    if (q->shutting_down)
        return 0;
    struct item *it = item_obtain(q, key);
    if (!it)
        return -ENOMEM;
    double delay = item_delay(q, it->failures);
    double bucket = bucket_delay(q);
    if (it->failures < INT_MAX)
        it->failures++;
    q->stats.retries++;
    return wq_add_after(q, key, bucket > delay ? bucket : delay);
}

void wq_forget(struct wq *q, const char *key)
{
    struct item *it = map_get(q->items, key);
    if (!it)
        return;
    it->failures = 0;
    item_release(q, it);
}

int wq_num_requeues(const struct wq *q, const char *key)
{
    const struct item *it = map_get(q->items, key);
    return it ? it->failures : 0;
}

const char *wq_get(struct wq *q)
{
    if (q->shutting_down)
        return NULL;
    promote(q, clock_now(q->cfg.clock));
    struct item *it = ring_pop(q);
    if (!it)
        return NULL;
    it->dirty = false;
    q->ndirty--;
    if (q->cfg.on_wait)
        q->cfg.on_wait(clock_now(q->cfg.clock) - it->added, q->cfg.userdata);
    it->processing = true;
    q->nprocessing++;
    return it->key;
}

void wq_done(struct wq *q, const char *key)
{
    struct item *it = map_get(q->items, key);
    if (!it || !it->processing)
        return;
    /* `key` may be it->key: it is not used again once the item may be freed. */
    it->processing = false;
    q->nprocessing--;
    if (it->dirty)
        ring_push(q, it);
    item_release(q, it);
}

double wq_next_in(struct wq *q)
{
    if (q->shutting_down)
        return -1;
    double now = clock_now(q->cfg.clock);
    promote(q, now);
    if (q->len > 0)
        return 0;
    const struct heap_node *n = heap_top(&q->waiting);
    if (!n)
        return -1;
    return n->at > now ? n->at - now : 0;
}

size_t wq_len(const struct wq *q)
{
    return q->len;
}

size_t wq_processing(const struct wq *q)
{
    return q->nprocessing;
}

void wq_shut_down(struct wq *q)
{
    q->shutting_down = true;
}

void wq_get_stats(const struct wq *q, struct wq_stats *ret)
{
    *ret = q->stats;
}
