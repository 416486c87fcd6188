/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_heap.c - the intrusive timer heap: order, ties, update, remove. */
#include <CUnit/CUnit.h>
#include <stdlib.h>

#include "base/heap.h"

#define N 1000

struct timer {
    int id;
    struct heap_node node;
};

/* A deterministic pseudo-random sequence (xorshift32). */
static unsigned next_rand(unsigned *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* Pops everything; returns how many nodes came out of order. */
static int drain(struct heap *h)
{
    int wrong = 0;
    double last = -1;
    struct heap_node *n;
    while ((n = heap_pop(h))) {
        wrong += n->at < last || heap_node_queued(n);
        last = n->at;
    }
    return wrong;
}

static void test_pops_in_order(void)
{
    static struct timer t[N];
    struct heap h;
    heap_init(&h);
    unsigned seed = 12345;
    for (int i = 0; i < N; i++) {
        heap_node_init(&t[i].node);
        t[i].node.at = (double)(next_rand(&seed) % 500);
        CU_ASSERT_EQUAL(heap_push(&h, &t[i].node), 0);
    }
    CU_ASSERT_EQUAL(heap_len(&h), N);
    CU_ASSERT_EQUAL(drain(&h), 0);
    CU_ASSERT_PTR_NULL(heap_top(&h));
    CU_ASSERT_PTR_NULL(heap_pop(&h));
    heap_free(&h);
}

static void test_ties_in_push_order(void)
{
    struct timer t[5];
    struct heap h;
    heap_init(&h);
    for (int i = 0; i < 5; i++) {
        t[i].id = i;
        heap_node_init(&t[i].node);
        t[i].node.at = i == 2 ? 0.5 : 1;
        CU_ASSERT_EQUAL(heap_push(&h, &t[i].node), 0);
    }
    static const int want[] = {2, 0, 1, 3, 4};
    for (int i = 0; i < 5; i++) {
        struct timer *x = heap_entry(heap_pop(&h), struct timer, node);
        CU_ASSERT_PTR_EQUAL(x, &t[want[i]]);
        CU_ASSERT_EQUAL(x->id, t[want[i]].id);
    }
    heap_free(&h);
}

static void test_update_and_remove(void)
{
    static struct timer t[N];
    struct heap h;
    heap_init(&h);
    for (int i = 0; i < N; i++) {
        heap_node_init(&t[i].node);
        t[i].node.at = 1000 + i;
        CU_ASSERT_EQUAL(heap_push(&h, &t[i].node), 0);
    }
    t[700].node.at = 1;
    heap_update(&h, &t[700].node);
    CU_ASSERT_PTR_EQUAL(heap_top(&h), &t[700].node);
    t[700].node.at = 5000;
    heap_update(&h, &t[700].node);
    CU_ASSERT_PTR_EQUAL(heap_top(&h), &t[0].node);
    unsigned seed = 777;
    for (int i = 0; i < N / 2; i++) {
        struct timer *x = &t[next_rand(&seed) % N];
        if (heap_node_queued(&x->node))
            heap_remove(&h, &x->node);
        CU_ASSERT_FALSE(heap_node_queued(&x->node));
    }
    size_t left = heap_len(&h);
    CU_ASSERT_EQUAL(drain(&h), 0);
    CU_ASSERT(left > 0 && left < N);
    heap_free(&h);
}

static CU_TestInfo tests[] = {
        {"pops in order", test_pops_in_order},
        {"ties in push order", test_ties_in_push_order},
        {"update and remove", test_update_and_remove},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo heap_suites[] = {
        {"heap", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
