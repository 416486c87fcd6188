/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_http.c - the HTTP layer's own decisions: when a throttled request goes again
 * (kube_http_retry_delay; the retries themselves run against a real API server's API Priority
 * and Fairness in test/integration/test_faults.sh), and requests that never complete:
 * cancelled, or still in flight when the context is freed (an agent stopping with an Event's
 * series patch under way). Whatever the request's owner allocated for it goes back to the
 * owner; nothing leaks (the unit run has LeakSanitizer, make test-long runs it in valgrind
 * memcheck too). The exchanges themselves are tested against the real API server
 * (test/integration/test_kube.sh).
 */
#include <CUnit/CUnit.h>
#include <ev.h>
#include <stdlib.h>
#include <string.h>

#include "kube/client.h"
#include "kube/config.h"
#include "kube/http.h"

static int done_calls, drop_calls;

static void on_done(const struct kube_resp *resp, void *userdata)
{
    (void)resp;
    (void)userdata;
    done_calls++;
}

static void on_drop(void *userdata)
{
    drop_calls++;
    free(userdata);
}

static void on_client(const struct kube_err *err, const struct cJSON *obj, void *userdata)
{
    (void)err;
    (void)obj;
    (void)userdata;
    done_calls++;
}

/* A server nobody listens on: the requests are started, never answered within the test. */
static struct kube_http *http_new(struct ev_loop *loop, struct kube_config *c)
{
    *c = (struct kube_config){.server = strdup("https://127.0.0.1:9")};
    done_calls = drop_calls = 0;
    return kube_http_new(loop, c);
}

static void start(struct kube_http *h, struct kube_req **ret)
{
    struct kube_http_req req = {
            .method = "GET",
            .path = "/api/v1/nodes",
            .on_done = on_done,
            .userdata = malloc(32),
            .on_drop = on_drop,
    };
    CU_ASSERT_EQUAL_FATAL(kube_http_start(h, &req, ret), 0);
}

static void test_freed_in_flight(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct kube_config c;
    struct kube_http *h = http_new(loop, &c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    start(h, NULL);
    start(h, NULL);
    kube_http_free(h);
    CU_ASSERT_EQUAL(drop_calls, 2);
    CU_ASSERT_EQUAL(done_calls, 0);
    kube_config_done(&c);
    ev_loop_destroy(loop);
}

static void test_cancelled(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct kube_config c;
    struct kube_http *h = http_new(loop, &c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    struct kube_req *r = NULL;
    start(h, &r);
    kube_http_cancel(h, r);
    CU_ASSERT_EQUAL(drop_calls, 1);
    CU_ASSERT_EQUAL(done_calls, 0);
    kube_http_free(h);
    CU_ASSERT_EQUAL(drop_calls, 1);
    kube_config_done(&c);
    ev_loop_destroy(loop);
}

/* The client's own per-call state (found by memcheck in test_kube's Event series patch). */
static void test_client_call_freed(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct kube_config c;
    struct kube_http *h = http_new(loop, &c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(kube_client_get(h, &kube_res_pcidevices, NULL, "a", on_client, NULL), 0);
    CU_ASSERT_EQUAL(kube_client_patch(h, &kube_res_events, "default", "e", KUBE_PATCH_MERGE, "{}",
                                      false, on_client, NULL),
                    0);
    kube_http_free(h);
    CU_ASSERT_EQUAL(done_calls, 0);
    kube_config_done(&c);
    ev_loop_destroy(loop);
}

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
        {"freed with requests in flight: owners get their userdata back", test_freed_in_flight},
        {"a cancelled request gives its userdata back once", test_cancelled},
        {"the client's call state is freed with unfinished requests", test_client_call_freed},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo http_suites[] = {
        {"http", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
