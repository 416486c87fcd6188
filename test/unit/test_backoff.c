/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_backoff.c - reflector backoff: doubling, cap, jitter, reset. */
#include <CUnit/CUnit.h>

#include "base/backoff.h"

#define EPS 1e-9

static void reflector(struct backoff *b)
{
    backoff_init(b, 0.8, 30, 2, 1, 120);
}

static void test_sequence_without_jitter(void)
{
    static const double want[] = {0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30, 30};
    struct backoff b;
    reflector(&b);
    double now = 1000;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        CU_ASSERT_DOUBLE_EQUAL(backoff_next(&b, now, 0), want[i], EPS);
        now += 10;
    }
}

static void test_jitter_bounds(void)
{
    struct backoff b;
    reflector(&b);
    double d = backoff_next(&b, 0, 0.999999);
    CU_ASSERT(d >= 0.8 && d < 1.6);
    CU_ASSERT_DOUBLE_EQUAL(d, 1.6, 1e-5);
    d = backoff_next(&b, 1, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(d, 2.4, EPS);
    for (int i = 0; i < 10; i++)
        d = backoff_next(&b, 2 + i, 0.999999);
    /* Jitter applies on top of the cap. */
    CU_ASSERT(d >= 30 && d < 60);
    CU_ASSERT_DOUBLE_EQUAL(d, 60, 1e-4);
    /* Out-of-range random numbers are clamped. */
    CU_ASSERT_DOUBLE_EQUAL(backoff_next(&b, 20, 7), 60, EPS);
    CU_ASSERT_DOUBLE_EQUAL(backoff_next(&b, 21, -3), 30, EPS);
}

static void test_reset_after_healthy_period(void)
{
    struct backoff b;
    reflector(&b);
    CU_ASSERT_DOUBLE_EQUAL(backoff_next(&b, 0, 0), 0.8, EPS);
    CU_ASSERT_DOUBLE_EQUAL(backoff_next(&b, 100, 0), 1.6, EPS);
    /* Exactly reset_after later is not yet healthy. */
    CU_ASSERT_DOUBLE_EQUAL(backoff_next(&b, 220, 0), 3.2, EPS);
    CU_ASSERT_DOUBLE_EQUAL(backoff_next(&b, 340.5, 0), 0.8, EPS);
    CU_ASSERT_DOUBLE_EQUAL(backoff_next(&b, 341, 0), 1.6, EPS);
}

static void test_reset(void)
{
    struct backoff b;
    reflector(&b);
    for (int i = 0; i < 5; i++)
        backoff_next(&b, i, 0);
    backoff_reset(&b);
    CU_ASSERT_DOUBLE_EQUAL(backoff_next(&b, 6, 0), 0.8, EPS);
    CU_ASSERT_DOUBLE_EQUAL(backoff_next(&b, 7, 0), 1.6, EPS);
}

static void test_initial_above_max(void)
{
    struct backoff b;
    backoff_init(&b, 10, 5, 2, 0, 60);
    CU_ASSERT_DOUBLE_EQUAL(backoff_next(&b, 0, 0.5), 5, EPS);
    CU_ASSERT_DOUBLE_EQUAL(backoff_next(&b, 1, 0.5), 5, EPS);
}

static CU_TestInfo tests[] = {
        {"sequence without jitter", test_sequence_without_jitter},
        {"jitter bounds", test_jitter_bounds},
        {"reset after a healthy period", test_reset_after_healthy_period},
        {"backoff_reset", test_reset},
        {"initial above max", test_initial_above_max},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo backoff_suites[] = {
        {"backoff", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
