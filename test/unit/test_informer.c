/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_informer.c - the informer (kube/informer.c) against a fake API server on
 * loopback (fake_api.h), at the edges where a cache goes wrong silently:
 *  - the WATCH starts from the LIST's resourceVersion and asks for bookmarks;
 *  - a bookmark moves the informer's position (kube_informer_resource_version, which the
 *    runner's expectations compare with) without an event, and the next WATCH starts there,
 *    not from the LIST again;
 *  - 410 Gone, as an ERROR event in the stream or as the WATCH's answer, makes it LIST again
 *    and tell the handlers what changed meanwhile: a delete for an object that vanished, an add
 *    for a new one, an update for a changed one, nothing for one that did not change; the WATCH
 *    then starts from the new LIST's version.
 * Transport faults, malformed answers and paging are in test/integration/test_kube.sh and
 * test_badinput.sh (against the real API server and apiproxy.py).
 */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_api.h"
#include "kube/config.h"
#include "kube/http.h"
#include "kube/informer.h"

static struct {
    struct ev_loop *loop;
    struct fake_api api;
    struct kube_config cfg;
    struct kube_http *http;
    struct kube_informer *inf;
    int adds, updates, deletes;
    char deleted[64];
} T;

static void on_add(const char *key, const cJSON *obj, void *userdata)
{
    (void)key, (void)obj, (void)userdata;
    T.adds++;
}

static void on_update(const char *key, const cJSON *old, const cJSON *obj, void *userdata)
{
    (void)key, (void)old, (void)obj, (void)userdata;
    T.updates++;
}

static void on_delete(const char *key, const cJSON *obj, void *userdata)
{
    (void)obj, (void)userdata;
    T.deletes++;
    (void)snprintf(T.deleted, sizeof(T.deleted), "%s", key);
}

static bool run_until(bool (*done)(void))
{
    return fake_api_run_until(T.loop, done);
}

static int want_watches;

static bool watching(void)
{
    return T.api.watch != NULL && T.api.watches >= want_watches;
}

static char want_rv[32];

static bool at(void)
{
    return strcmp(kube_informer_resource_version(T.inf), want_rv) == 0;
}

static void list_of(const char *rv, const char *a_rv, const char *b_name)
{
    char a[128], b[128], items[300];
    (void)snprintf(items, sizeof(items), "[%s,%s]", fake_api_obj(a, sizeof(a), "a", a_rv),
                   fake_api_obj(b, sizeof(b), b_name, "5"));
    fake_api_set_list(&T.api, rv, items);
}

/* An informer synced on a LIST of a@5 and b@5 at 5, watching. */
static void setup(void)
{
    memset(&T, 0, sizeof(T));
    T.loop = ev_loop_new(EVFLAG_AUTO);
    fake_api_start(&T.api, T.loop);
    list_of("5", "5", "b");
    char url[64];
    T.cfg = (struct kube_config){.server = strdup(fake_api_url(&T.api, url, sizeof(url)))};
    T.http = kube_http_new(T.loop, &T.cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T.http);
    struct kube_informer_config ic = {
            .resource = &fake_api_things,
            .handlers = {.on_add = on_add, .on_update = on_update, .on_delete = on_delete}};
    T.inf = kube_informer_new(T.loop, T.http, &ic);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T.inf);
    CU_ASSERT_EQUAL(kube_informer_start(T.inf), 0);
    want_watches = 1;
    CU_ASSERT_FATAL(run_until(watching));
    CU_ASSERT(kube_informer_has_synced(T.inf));
    CU_ASSERT_EQUAL(T.adds, 2);
    CU_ASSERT_EQUAL(T.api.lists, 1);
    CU_ASSERT_STRING_EQUAL(T.api.watch_rv, "5");
    CU_ASSERT(T.api.watch_bookmarks);
}

static void teardown(void)
{
    T.inf = kube_informer_free(T.inf);
    T.http = kube_http_free(T.http);
    kube_config_done(&T.cfg);
    fake_api_stop(&T.api);
    ev_loop_destroy(T.loop);
}

static void test_bookmark_moves_the_position(void)
{
    setup();
    char text[128];
    CU_ASSERT(fake_api_event(&T.api, "BOOKMARK", fake_api_obj(text, sizeof(text), "", "9")));
    (void)snprintf(want_rv, sizeof(want_rv), "9");
    CU_ASSERT(run_until(at));
    CU_ASSERT_EQUAL(T.adds + T.updates + T.deletes, 2); /* no event for a bookmark */
    CU_ASSERT_EQUAL(kube_informer_size(T.inf), 2);
    fake_api_end_watch(&T.api, false); /* the server's timeout: watch again from the bookmark */
    want_watches = 2;
    CU_ASSERT(run_until(watching));
    CU_ASSERT_STRING_EQUAL(T.api.watch_rv, "9");
    CU_ASSERT_EQUAL(T.api.lists, 1);
    teardown();
}

/* Meanwhile (compacted away): a changed to @12, b deleted, c created. */
static void check_relisted(void)
{
    want_watches = T.api.watches + 1;
    CU_ASSERT(run_until(watching));
    CU_ASSERT_EQUAL(T.api.lists, 2);
    CU_ASSERT_STRING_EQUAL(T.api.watch_rv, "12");
    CU_ASSERT_STRING_EQUAL(kube_informer_resource_version(T.inf), "12");
    CU_ASSERT_EQUAL(T.deletes, 1);
    CU_ASSERT_STRING_EQUAL(T.deleted, "b");
    CU_ASSERT_EQUAL(T.adds, 3); /* a, b, then c */
    CU_ASSERT_EQUAL(T.updates, 1);
    CU_ASSERT_PTR_NULL(kube_informer_get(T.inf, "b"));
    CU_ASSERT_STRING_EQUAL(kube_meta_str(kube_informer_get(T.inf, "a"), "resourceVersion"), "12");
    struct kube_informer_stats st;
    kube_informer_get_stats(T.inf, &st);
    CU_ASSERT_EQUAL(st.relists_gone, 1);
}

static void test_gone_in_the_stream_relists(void)
{
    setup();
    list_of("12", "12", "c");
    CU_ASSERT(fake_api_event(&T.api, "ERROR",
                             "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                             "\"reason\":\"Expired\",\"code\":410,\"message\":\"too old\"}"));
    check_relisted();
    teardown();
}

static void test_gone_as_the_answer_relists(void)
{
    setup();
    list_of("12", "12", "c");
    T.api.watch_code = 410;
    fake_api_end_watch(&T.api, false);
    check_relisted();
    CU_ASSERT_EQUAL(T.api.watches, 3); /* the one answered 410, then the new one */
    teardown();
}

static CU_TestInfo tests[] = {
        {"a bookmark moves the position; the next WATCH starts there",
         test_bookmark_moves_the_position},
        {"410 as an ERROR event: LIST again, handlers told", test_gone_in_the_stream_relists},
        {"410 as the WATCH's answer: LIST again", test_gone_as_the_answer_relists},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo informer_suites[] = {
        {"informer", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
