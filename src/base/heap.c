/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/heap.c - intrusive binary min-heap of timers. See heap.h. No I/O, no logging.
 */
#include "base/heap.h"

#include <errno.h>
#include <stdlib.h>

#define MIN_ALLOC 16

static bool before(const struct heap_node *a, const struct heap_node *b)
{
    if (a->at != b->at)
        return a->at < b->at;
    return a->seq < b->seq;
}

static void place(struct heap *h, size_t i, struct heap_node *n)
{
    h->nodes[i] = n;
    n->idx = i;
}

static void sift_up(struct heap *h, size_t i)
{
    struct heap_node *n = h->nodes[i];
    while (i > 0 && before(n, h->nodes[(i - 1) / 2])) {
        place(h, i, h->nodes[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    place(h, i, n);
}

static void sift_down(struct heap *h, size_t i)
{
    struct heap_node *n = h->nodes[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->len)
            break;
        if (c + 1 < h->len && before(h->nodes[c + 1], h->nodes[c]))
            c++;
        if (!before(h->nodes[c], n))
            break;
        place(h, i, h->nodes[c]);
        i = c;
    }
    place(h, i, n);
}

void heap_node_init(struct heap_node *n)
{
    *n = (struct heap_node){.idx = HEAP_NONE};
}

void heap_init(struct heap *h)
{
    *h = (struct heap){0};
}

void heap_free(struct heap *h)
{
    free(h->nodes);
    heap_init(h);
}

static int reserve(struct heap *h)
{
    if (h->len < h->alloc)
        return 0;
    size_t alloc = h->alloc ? h->alloc * 2 : MIN_ALLOC;
    if (alloc > SIZE_MAX / sizeof(struct heap_node *))
        return -ENOMEM;
    struct heap_node **nodes = realloc(h->nodes, alloc * sizeof(struct heap_node *));
    if (!nodes)
        return -ENOMEM;
    h->nodes = nodes;
    h->alloc = alloc;
    return 0;
}

int heap_push(struct heap *h, struct heap_node *n)
{
    int r = reserve(h);
    if (r < 0)
        return r;
    n->seq = h->pushes++;
    place(h, h->len++, n);
    sift_up(h, n->idx);
    return 0;
}

struct heap_node *heap_top(const struct heap *h)
{
    return h->len ? h->nodes[0] : NULL;
}

struct heap_node *heap_pop(struct heap *h)
{
    struct heap_node *top = heap_top(h);
    if (top)
        heap_remove(h, top);
    return top;
}

void heap_update(struct heap *h, struct heap_node *n)
{
    sift_up(h, n->idx);
    sift_down(h, n->idx);
}

void heap_remove(struct heap *h, struct heap_node *n)
{
    size_t i = n->idx;
    struct heap_node *last = h->nodes[--h->len];
    n->idx = HEAP_NONE;
    if (i == h->len)
        return;
    place(h, i, last);
    heap_update(h, last);
}
