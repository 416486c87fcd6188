/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/heap.h - an intrusive binary min-heap of timers, ordered by time.
 *
 * The caller embeds a `struct heap_node` in its own object and sets `at`; the heap keeps
 * pointers to the nodes (it never owns or frees them) and records each node's position, so
 * a node can be moved (heap_update) or removed in O(log n). Nodes with equal `at` come out
 * in the order they were pushed. No I/O, no logging. Not thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HEAP_NONE SIZE_MAX

struct heap_node {
    double at;    /* the ordering key, e.g. a time in seconds; set by the caller */
    uint64_t seq; /* push order, breaks ties; set by the heap */
    size_t idx;   /* position in the heap, HEAP_NONE when outside; set by the heap */
};

struct heap {
    struct heap_node **nodes;
    size_t len;
    size_t alloc;
    uint64_t pushes;
};

/* The object that embeds heap node `n` as `member`. */
#define heap_entry(n, type, member) ((type *)(void *)((char *)(n)-offsetof(type, member)))

/* Marks a node as being in no heap. */
void heap_node_init(struct heap_node *n);

static inline bool heap_node_queued(const struct heap_node *n)
{
    return n->idx != HEAP_NONE;
}

/* An empty heap; allocates nothing. */
void heap_init(struct heap *h);

/* Frees the heap's array (not the nodes, which are left marked as queued) and empties it. */
void heap_free(struct heap *h);

static inline size_t heap_len(const struct heap *h)
{
    return h->len;
}

/* Adds `n` (which must not be queued). Returns 0, or -ENOMEM with the heap unchanged. */
int heap_push(struct heap *h, struct heap_node *n);

/* The node with the smallest `at` (borrowed), or NULL when empty. */
struct heap_node *heap_top(const struct heap *h);

/* Removes and returns the top node; NULL when empty. */
struct heap_node *heap_pop(struct heap *h);

/* Restores the order after the caller changed the `at` of queued node `n`. */
void heap_update(struct heap *h, struct heap_node *n);

/* Removes queued node `n`. */
void heap_remove(struct heap *h, struct heap_node *n);
