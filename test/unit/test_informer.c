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
 *    then starts from the new LIST's version;
 *  - with `keep` (the controller's claimed devices): what it refuses is neither stored nor told,
 *    from the LIST or the watch; a key it comes to accept is fetched with a GET (stored, on_add),
 *    one it refuses now dropped (on_delete); a GET overtaken by a watch event for its key is
 *    dropped (the event is as new); a key refreshed while a LIST is being assembled is fetched
 *    once it is stored, and the informer is synced only when that GET has answered.
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
#include "base/json.h"
#include "kube/informer.h"

static struct {
    struct ev_loop *loop;
    struct fake_api api;
    struct kube_config cfg;
    struct kube_http *http;
    struct kube_informer *inf;
    int adds, updates, deletes, synced;
    char deleted[64];
    bool keeps;       /* setup() with a keep function: keep() */
    bool transforms;  /* setup() with a transform: drop_rv() */
    char kept[4][16]; /* the keys it accepts */
} T;

static bool keep(const char *key, void *userdata)
{
    (void)userdata;
    for (size_t i = 0; i < sizeof(T.kept) / sizeof(T.kept[0]); i++)
        if (strcmp(T.kept[i], key) == 0)
            return true;
    return false;
}

/* Drops metadata.resourceVersion but on "a" (a transform must keep it; the test looks). */
static void drop_rv(cJSON *obj)
{
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    if (!json_same(kube_meta_str(obj, "name"), "a"))
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
}

static void on_synced(void *userdata)
{
    (void)userdata;
    T.synced++;
}

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
static void setup_informer(void)
{
    T.loop = ev_loop_new(EVFLAG_AUTO);
    fake_api_start(&T.api, T.loop);
    list_of("5", "5", "b");
    char url[64];
    T.cfg = (struct kube_config){.server = strdup(fake_api_url(&T.api, url, sizeof(url)))};
    T.http = kube_http_new(T.loop, &T.cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T.http);
    struct kube_informer_config ic = {.resource = &fake_api_things,
                                      .keep = T.keeps ? keep : NULL,
                                      .transform = T.transforms ? drop_rv : NULL,
                                      .handlers = {.on_add = on_add,
                                                   .on_update = on_update,
                                                   .on_delete = on_delete,
                                                   .on_synced = on_synced}};
    T.inf = kube_informer_new(T.loop, T.http, &ic);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T.inf);
    CU_ASSERT_EQUAL(kube_informer_start(T.inf), 0);
}

static void setup(void)
{
    memset(&T, 0, sizeof(T));
    setup_informer();
    want_watches = 1;
    CU_ASSERT_FATAL(run_until(watching));
    CU_ASSERT(kube_informer_has_synced(T.inf));
    CU_ASSERT_EQUAL(T.synced, 1);
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

/* An informer that keeps a only, synced on the LIST of a@5 and b@5, watching. */
static void setup_keep(void)
{
    memset(&T, 0, sizeof(T));
    T.keeps = true;
    (void)snprintf(T.kept[0], sizeof(T.kept[0]), "a");
    setup_informer();
    want_watches = 1;
    CU_ASSERT_FATAL(run_until(watching));
    CU_ASSERT(kube_informer_has_synced(T.inf));
    CU_ASSERT_EQUAL(T.synced, 1);
    CU_ASSERT_EQUAL(T.adds, 1);
    CU_ASSERT_EQUAL(kube_informer_size(T.inf), 1);
    CU_ASSERT_PTR_NULL(kube_informer_get(T.inf, "b"));
}

static const char *last_rv;

static bool rv_seen(void)
{
    return json_same(kube_informer_resource_version(T.inf), last_rv);
}

/* Writes a watch event and waits until the informer has taken it (its resourceVersion). */
static void event(const char *type, const char *name, const char *rv)
{
    char text[128];
    CU_ASSERT(fake_api_event(&T.api, type, fake_api_obj(text, sizeof(text), name, rv)));
    last_rv = rv;
    CU_ASSERT(run_until(rv_seen));
}

static void test_keep_drops_the_others(void)
{
    setup_keep();
    event("ADDED", "c", "6");
    event("MODIFIED", "b", "7");
    event("DELETED", "b", "8");
    CU_ASSERT_EQUAL(T.adds + T.updates + T.deletes, 1); /* a's add only */
    CU_ASSERT_EQUAL(kube_informer_size(T.inf), 1);
    event("MODIFIED", "a", "9");
    CU_ASSERT_EQUAL(T.updates, 1);
    struct kube_informer_stats st;
    kube_informer_get_stats(T.inf, &st);
    CU_ASSERT_EQUAL(st.dropped, 4); /* b of the LIST, then c, b, b */
    CU_ASSERT_EQUAL(T.api.gets, 0);
    teardown();
}

static bool added_twice(void)
{
    return T.adds == 2;
}

static bool deleted_once(void)
{
    return T.deletes == 1;
}

static void test_keep_refresh_fetches_and_drops(void)
{
    setup_keep();
    T.api.get_code = 200;
    (void)fake_api_obj(T.api.get_body, sizeof(T.api.get_body), "b", "7");
    CU_ASSERT_EQUAL(kube_informer_refresh(T.inf, "b"), 0); /* not kept: nothing */
    (void)snprintf(T.kept[1], sizeof(T.kept[1]), "b");
    CU_ASSERT_EQUAL(kube_informer_refresh(T.inf, "b"), 0);
    CU_ASSERT(run_until(added_twice));
    CU_ASSERT_EQUAL(T.api.gets, 1);
    CU_ASSERT_STRING_EQUAL(T.api.get_name, "b");
    CU_ASSERT_STRING_EQUAL(kube_meta_str(kube_informer_get(T.inf, "b"), "resourceVersion"), "7");
    CU_ASSERT_EQUAL(kube_informer_refresh(T.inf, "b"), 0); /* cached: no GET */
    event("MODIFIED", "b", "8");
    CU_ASSERT_EQUAL(T.updates, 1);
    T.kept[1][0] = '\0';
    CU_ASSERT_EQUAL(kube_informer_refresh(T.inf, "b"), 0);
    CU_ASSERT(run_until(deleted_once));
    CU_ASSERT_STRING_EQUAL(T.deleted, "b");
    CU_ASSERT_PTR_NULL(kube_informer_get(T.inf, "b"));
    CU_ASSERT_EQUAL(T.api.gets, 1);
    teardown();
}

static bool get_held(void)
{
    return T.api.held != NULL;
}

static bool get_dropped(void)
{
    struct kube_informer_stats st;
    kube_informer_get_stats(T.inf, &st);
    return st.fetches_dropped == 1;
}

static void test_keep_event_overtakes_a_get(void)
{
    setup_keep();
    T.api.hold_gets = true;
    T.api.get_code = 200;
    (void)fake_api_obj(T.api.get_body, sizeof(T.api.get_body), "c", "8");
    (void)snprintf(T.kept[1], sizeof(T.kept[1]), "c");
    CU_ASSERT_EQUAL(kube_informer_refresh(T.inf, "c"), 0);
    CU_ASSERT(run_until(get_held));
    event("MODIFIED", "c", "9"); /* newer than what the GET read */
    CU_ASSERT_EQUAL(T.adds, 2);
    CU_ASSERT(fake_api_answer_get(&T.api));
    CU_ASSERT(run_until(get_dropped));
    CU_ASSERT_STRING_EQUAL(kube_meta_str(kube_informer_get(T.inf, "c"), "resourceVersion"), "9");
    CU_ASSERT_EQUAL(T.adds + T.updates, 2);
    teardown();
}

static bool synced_now(void)
{
    return kube_informer_has_synced(T.inf);
}

static bool list_failed(void)
{
    return T.api.lists >= 1 && !T.api.watch;
}

/* A LIST being assembled (its first answer failed: it waits out the backoff) when c comes to be
 * kept: c is fetched once the LIST is stored, and the informer synced only then. */
static void test_keep_refresh_during_a_list(void)
{
    memset(&T, 0, sizeof(T));
    T.keeps = true;
    (void)snprintf(T.kept[0], sizeof(T.kept[0]), "a");
    setup_informer(); /* the LIST is sent once the loop runs */
    T.api.list_code = 500;
    CU_ASSERT(run_until(list_failed));
    (void)snprintf(T.kept[1], sizeof(T.kept[1]), "c");
    CU_ASSERT_EQUAL(kube_informer_refresh(T.inf, "c"), 0);
    CU_ASSERT_EQUAL(T.api.gets, 0); /* not while the LIST is under way */
    T.api.list_code = 0;
    T.api.hold_gets = true;
    T.api.get_code = 200;
    (void)fake_api_obj(T.api.get_body, sizeof(T.api.get_body), "c", "6");
    kube_informer_retry_now(T.inf);
    CU_ASSERT(run_until(get_held));
    CU_ASSERT_STRING_EQUAL(T.api.get_name, "c");
    CU_ASSERT(!kube_informer_has_synced(T.inf));
    CU_ASSERT_EQUAL(T.synced, 0);
    CU_ASSERT(fake_api_answer_get(&T.api));
    CU_ASSERT(run_until(synced_now));
    CU_ASSERT_EQUAL(T.synced, 1);
    CU_ASSERT_EQUAL(T.adds, 2); /* a, c */
    CU_ASSERT_PTR_NOT_NULL(kube_informer_get(T.inf, "c"));
    teardown();
}

static void test_transform(void)
{
    memset(&T, 0, sizeof(T));
    T.transforms = true;
    setup_informer();
    want_watches = 1;
    CU_ASSERT_FATAL(run_until(watching));
    CU_ASSERT_STRING_EQUAL(kube_meta_str(kube_informer_get(T.inf, "a"), "resourceVersion"), "5");
    CU_ASSERT_PTR_NULL(kube_meta_str(kube_informer_get(T.inf, "b"), "resourceVersion"));
    CU_ASSERT_PTR_NOT_NULL(kube_informer_get(T.inf, "b")); /* the LIST's, transformed */
    event("ADDED", "c", "6");
    CU_ASSERT_PTR_NOT_NULL(kube_informer_get(T.inf, "c"));
    CU_ASSERT_PTR_NULL(kube_meta_str(kube_informer_get(T.inf, "c"), "resourceVersion"));
    teardown();
}

static CU_TestInfo tests[] = {
        {"a bookmark moves the position; the next WATCH starts there",
         test_bookmark_moves_the_position},
        {"410 as an ERROR event: LIST again, handlers told", test_gone_in_the_stream_relists},
        {"410 as the WATCH's answer: LIST again", test_gone_as_the_answer_relists},
        {"transform: what the cache keeps of LIST items and events", test_transform},
        {"keep: the others neither stored nor told", test_keep_drops_the_others},
        {"keep: refresh fetches a key now kept, drops one no longer",
         test_keep_refresh_fetches_and_drops},
        {"keep: a watch event overtakes a GET: the GET's answer dropped",
         test_keep_event_overtakes_a_get},
        {"keep: refreshed during a LIST: fetched after it, synced after the GET",
         test_keep_refresh_during_a_list},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo informer_suites[] = {
        {"informer", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
