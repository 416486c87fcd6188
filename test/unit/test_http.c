/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_http.c - when a throttled request goes again (kube_http_retry_delay). The
 * retries themselves run against a real API server's API Priority and Fairness in
 * test/integration/test_faults.sh. */
#include <CUnit/CUnit.h>

#include "kube/http.h"

#define EPS 1e-9

static void test_only_429_with_retry_after(void)
{
    CU_ASSERT(kube_http_retry_delay(429, -1, 0, 0.5) < 0); /* no Retry-After: the caller's */
    CU_ASSERT(kube_http_retry_delay(503, 1, 0, 0.5) < 0);
    CU_ASSERT(kube_http_retry_delay(500, 1, 0, 0.5) < 0);
    CU_ASSERT(kube_http_retry_delay(200, 1, 0, 0.5) < 0);
    CU_ASSERT(kube_http_retry_delay(0, 1, 0, 0.5) < 0);
    CU_ASSERT_DOUBLE_EQUAL(kube_http_retry_delay(429, 1, 0, 0), 1, EPS);
}

static void test_never_sooner_than_retry_after(void)
{
    for (int ra = 0; ra <= 10; ra++)
        for (int i = 0; i < 8; i++) {
            double d = kube_http_retry_delay(429, ra, 3, i / 8.0);
            CU_ASSERT(d >= ra);
            CU_ASSERT(d <= ra + (ra > 0 ? ra : 1) * 0.25 + EPS);
        }
}

static void test_jitter(void)
{
    CU_ASSERT_DOUBLE_EQUAL(kube_http_retry_delay(429, 2, 0, 0.5), 2.25, EPS);
    CU_ASSERT_DOUBLE_EQUAL(kube_http_retry_delay(429, 4, 0, 0.999999), 5, 1e-5);
    /* "Retry-After: 0" still spreads the clients over a quarter of a second */
    CU_ASSERT_DOUBLE_EQUAL(kube_http_retry_delay(429, 0, 0, 0.5), 0.125, EPS);
    /* out-of-range random numbers are clamped */
    CU_ASSERT_DOUBLE_EQUAL(kube_http_retry_delay(429, 1, 0, 7), 1.25, EPS);
    CU_ASSERT_DOUBLE_EQUAL(kube_http_retry_delay(429, 1, 0, -3), 1, EPS);
}

static void test_limits(void)
{
    CU_ASSERT(kube_http_retry_delay(429, 1, 9, 0) >= 1); /* the 10th retry */
    CU_ASSERT(kube_http_retry_delay(429, 1, 10, 0) < 0); /* then the caller's backoff */
    CU_ASSERT(kube_http_retry_delay(429, 10, 0, 0) >= 10);
    CU_ASSERT(kube_http_retry_delay(429, 11, 0, 0) < 0); /* a long wait is the caller's */
}

static CU_TestInfo tests[] = {
        {"only a 429 with Retry-After", test_only_429_with_retry_after},
        {"never sooner than Retry-After", test_never_sooner_than_retry_after},
        {"jitter", test_jitter},
        {"at most 10 retries of at most 10 s", test_limits},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo http_suites[] = {
        {"http", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
