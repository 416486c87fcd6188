/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_expect.c - write expectations: a key waits until the informer shows our write,
 * not when the watch event came before the write's response, never past a deletion, and at
 * most EXPECT_TTL seconds (the caller re-queues after the time expect_waiting returns).
 */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>

#include "controllers/runtime/expect.h"

static cJSON *obj(const char *rv)
{
    char text[128];
    (void)snprintf(text, sizeof(text), "{\"metadata\":{\"name\":\"k\",\"resourceVersion\":\"%s\"}}",
                   rv);
    return cJSON_Parse(text);
}

static void test_waits_for_its_version(void)
{
    struct expect *e = expect_new();
    cJSON *v1 = obj("1"), *v2 = obj("2");
    expect_write(e, "k", "2", v1, 100.0);
    CU_ASSERT_DOUBLE_EQUAL(expect_waiting(e, "k", 101.0), EXPECT_TTL - 1, 1e-9);
    expect_observed(e, "k", v1, false); /* an older event does not end it */
    CU_ASSERT(expect_waiting(e, "k", 101.0) > 0);
    expect_observed(e, "k", v2, false);
    CU_ASSERT_EQUAL(expect_waiting(e, "k", 101.0), 0);
    CU_ASSERT_EQUAL(expect_waiting(e, "other", 101.0), 0);
    cJSON_Delete(v1);
    cJSON_Delete(v2);
    expect_free(e);
}

static void test_event_before_response(void)
{
    struct expect *e = expect_new();
    cJSON *v2 = obj("2");
    expect_write(e, "k", "2", v2, 100.0); /* the cache has it already */
    CU_ASSERT_EQUAL(expect_waiting(e, "k", 100.0), 0);
    expect_write(e, "k", NULL, NULL, 100.0); /* deleted, and the cache saw the deletion */
    CU_ASSERT_EQUAL(expect_waiting(e, "k", 100.0), 0);
    cJSON_Delete(v2);
    expect_free(e);
}

static void test_deletion_ends_it(void)
{
    struct expect *e = expect_new();
    cJSON *v1 = obj("1"), *v9 = obj("9");
    /* our write (finalizer removal) returned rv 5, then the object went away: a new object of
     * the same name must not wait for rv 5 */
    expect_write(e, "k", "5", v1, 100.0);
    expect_observed(e, "k", v1, true);
    CU_ASSERT_EQUAL(expect_waiting(e, "k", 100.0), 0);
    expect_write(e, "k", NULL, v1, 100.0); /* a delete: waits for the deletion */
    expect_observed(e, "k", v9, false);
    CU_ASSERT(expect_waiting(e, "k", 100.0) > 0);
    CU_ASSERT_EQUAL(expect_waiting(e, "k", 100.0 + EXPECT_TTL), 0); /* the TTL ends it */
    cJSON_Delete(v1);
    cJSON_Delete(v9);
    expect_free(e);
}

/* The 30 s stall: the informer had caught up with our write, but not with the exact version
 * the response carried (a later one was cached, or the event came first and a later write
 * followed). No order of response and event may hold the key. */
static void test_later_version_counts(void)
{
    struct expect *e = expect_new();
    cJSON *v7 = obj("7"), *v9 = obj("9"), *v12 = obj("12");
    expect_write(e, "k", "9", v12, 100.0); /* the cache is past our write already */
    CU_ASSERT_EQUAL(expect_waiting(e, "k", 100.0), 0);
    expect_write(e, "k", "9", v7, 100.0); /* the cache is behind: wait */
    CU_ASSERT(expect_waiting(e, "k", 100.0) > 0);
    expect_observed(e, "k", v12, false); /* a later event than ours ends it */
    CU_ASSERT_EQUAL(expect_waiting(e, "k", 100.0), 0);
    expect_write(e, "k", "9", v7, 100.0);
    expect_caught_up(e, "k", v7, "8"); /* the watch is not there yet */
    CU_ASSERT(expect_waiting(e, "k", 100.0) > 0);
    expect_caught_up(e, "k", v7, "10"); /* the watch is past it (the event was for others) */
    CU_ASSERT_EQUAL(expect_waiting(e, "k", 100.0), 0);
    expect_write(e, "k", "9", v7, 100.0);
    expect_caught_up(e, "k", v9, NULL); /* the cache shows it */
    CU_ASSERT_EQUAL(expect_waiting(e, "k", 100.0), 0);
    expect_write(e, "k", "9", v7, 100.0);
    CU_ASSERT_EQUAL(expect_pending(e, 100.0), 1);
    CU_ASSERT_EQUAL(expect_pending(e, 100.0 + EXPECT_TTL), 0); /* past its TTL: not pending */
    expect_write(e, "k", NULL, v7, 100.0);                     /* a delete... */
    expect_caught_up(e, "k", v7, "99"); /* ...still cached: wait for the DELETED event */
    CU_ASSERT(expect_waiting(e, "k", 100.0) > 0);
    expect_caught_up(e, "k", NULL, NULL); /* gone from the cache */
    CU_ASSERT_EQUAL(expect_waiting(e, "k", 100.0), 0);
    cJSON_Delete(v7);
    cJSON_Delete(v9);
    cJSON_Delete(v12);
    expect_free(e);
}

/* resourceVersions that are not revision numbers are compared for equality only. */
static void test_opaque_versions(void)
{
    struct expect *e = expect_new();
    cJSON *a = obj("abc"), *b = obj("abd");
    expect_write(e, "k", "abd", a, 100.0);
    expect_caught_up(e, "k", a, "zzz");
    CU_ASSERT(expect_waiting(e, "k", 100.0) > 0);
    expect_observed(e, "k", b, false);
    CU_ASSERT_EQUAL(expect_waiting(e, "k", 100.0), 0);
    cJSON_Delete(a);
    cJSON_Delete(b);
    expect_free(e);
}

static CU_TestInfo tests[] = {
        {"waits for its version", test_waits_for_its_version},
        {"event before the response", test_event_before_response},
        {"a deletion ends it; the TTL too", test_deletion_ends_it},
        {"a later version or the informer's position ends it", test_later_version_counts},
        {"opaque versions: equality only", test_opaque_versions},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo expect_suites[] = {
        {"expect", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
