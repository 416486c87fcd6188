/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_health.c - controllers/health/health: reports (the first reason stays, Removed
 * says more), clears, health_changed once per change, the state taken back from a PCIDevice's
 * Healthy=False condition, and not taken back once the store cleared the device (its object still
 * carries the old condition until the PCIDevice reconciler writes the clear).
 */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <ev.h>
#include <stdio.h>
#include <string.h>

#include "controllers/health/health.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"

#define DEV "0000:00:04.0"

static int changes;
static char last[32];

static void on_changed(void *self, const struct watch_event *ev)
{
    (void)self;
    changes++;
    (void)snprintf(last, sizeof(last), "%s", (const char *)ev->data);
}

static const struct watch watches[] = {{.topic = &health_changed, .map = on_changed}, {0}};
static const struct part_ops watcher = {.name = "watcher", .watches = watches};

static struct ev_loop *loop;
static struct manager *mgr;

static struct health *setup(void)
{
    changes = 0;
    last[0] = '\0';
    loop = ev_loop_new(EVFLAG_AUTO);
    mgr = manager_new(loop, NULL, "n1");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mgr);
    CU_ASSERT_EQUAL_FATAL(manager_add_watches(mgr, &watcher, NULL), 0);
    struct part_env env = {.loop = loop, .mgr = mgr, .node_name = "n1"};
    struct health *h = health_part.make(&env);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    return h;
}

static void teardown(struct health *h)
{
    health_part.free(h);
    mgr = manager_free(mgr);
    ev_loop_destroy(loop);
}

/* A PCIDevice event with a Healthy condition (status, reason, message) to the store's watch. */
static void object_says(struct health *h, const char *status, const char *reason, const char *msg)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *st = cJSON_AddObjectToObject(o, "status");
    cJSON_AddStringToObject(st, "address", DEV);
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "type", "Healthy");
    cJSON_AddStringToObject(c, "status", status);
    cJSON_AddStringToObject(c, "reason", reason);
    cJSON_AddStringToObject(c, "message", msg);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(st, "conditions"), c);
    struct watch_event ev = {.type = WATCH_UPDATE, .key = "n1-000000040", .obj = o};
    health_part.watches[0].map(h, &ev);
    cJSON_Delete(o);
}

static void test_report_and_clear(void)
{
    struct health *h = setup();
    struct health_state st;
    CU_ASSERT_TRUE(health_get(h, DEV, &st));
    CU_ASSERT_STRING_EQUAL(st.reason, HEALTH_HEALTHY);
    health_report(h, DEV, HEALTH_AER_FATAL, "fatal grew");
    CU_ASSERT_EQUAL(changes, 1);
    CU_ASSERT_STRING_EQUAL(last, DEV);
    health_report(h, DEV, HEALTH_RESET_FAILED, "later"); /* the first reason stays */
    health_report(h, DEV, "NoSuchReason", "ignored");    /* not one of ours */
    CU_ASSERT_EQUAL(changes, 1);
    CU_ASSERT_FALSE(health_get(h, DEV, &st));
    CU_ASSERT_STRING_EQUAL(st.reason, HEALTH_AER_FATAL);
    health_report(h, DEV, HEALTH_REMOVED, "gone"); /* the device gone says more */
    health_report(h, DEV, HEALTH_REMOVED, "gone again");
    CU_ASSERT_EQUAL(changes, 2);
    CU_ASSERT_FALSE(health_get(h, DEV, &st));
    CU_ASSERT_STRING_EQUAL(st.message, "gone");
    /* cleared by the address health_unhealthy() lends (a key of the store's own map) */
    size_t n = 0;
    const char *const *bad = health_unhealthy(h, &n);
    CU_ASSERT_EQUAL_FATAL(n, 1);
    health_clear(h, bad[0]);
    CU_ASSERT_EQUAL(changes, 3);
    CU_ASSERT_STRING_EQUAL(last, DEV);
    CU_ASSERT_TRUE(health_get(h, DEV, &st));
    health_clear(h, DEV); /* nothing to clear: no change */
    CU_ASSERT_EQUAL(changes, 3);
    (void)health_unhealthy(h, &n);
    CU_ASSERT_EQUAL(n, 0);
    teardown(h);
}

static void test_taken_back(void)
{
    struct health *h = setup();
    struct health_state st;
    object_says(h, "True", "Healthy", "fine");
    object_says(h, "False", "SomeoneElses", "not ours");
    CU_ASSERT_TRUE(health_get(h, DEV, &st));
    CU_ASSERT_EQUAL(changes, 0);
    object_says(h, "False", HEALTH_RESET_FAILED, "reset failed (before a restart)");
    CU_ASSERT_FALSE(health_get(h, DEV, &st));
    CU_ASSERT_STRING_EQUAL(st.reason, HEALTH_RESET_FAILED);
    CU_ASSERT_STRING_EQUAL(st.message, "reset failed (before a restart)");
    CU_ASSERT_EQUAL(changes, 1);
    /* the store has a word: another object event does not change it */
    object_says(h, "False", HEALTH_NOT_RESPONDING, "other");
    CU_ASSERT_FALSE(health_get(h, DEV, &st));
    CU_ASSERT_STRING_EQUAL(st.reason, HEALTH_RESET_FAILED);
    /* cleared: the object's stale False condition is not taken back */
    health_clear(h, DEV);
    object_says(h, "False", HEALTH_RESET_FAILED, "reset failed (before a restart)");
    CU_ASSERT_TRUE(health_get(h, DEV, &st));
    CU_ASSERT_EQUAL(changes, 2);
    teardown(h);
}

static CU_TestInfo tests[] = {
        {"reports, the first reason, Removed, clears", test_report_and_clear},
        {"taken back from the PCIDevice, not after a clear", test_taken_back},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo health_suites[] = {
        {"health", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
