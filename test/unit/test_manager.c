/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_manager.c - runtime/manager: one cache per kind (a real informer on a fake API
 * server, fake_api.h), its events to its receivers first and then to the watches of that kind in
 * the order the parts were added, with the event's type, key and object; topics to their watches
 * only; parts found by their hooks; readiness named after the cache that has not synced; a
 * cache of keys_of started once its keys' cache has synced, keeping what those keys name and
 * following them (a key that comes: a GET; one that goes: dropped).
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "fake_api.h"
#include "kube/config.h"
#include "kube/http.h"
#include "kube/informer.h"
#include "kube/status.h"
#include "controllers/runtime/worker.h"

static const struct cache_kind things = {.name = "things", .res = &fake_api_things};
static const struct cache_kind others = {.name = "others", .res = &fake_api_things};
static const struct topic scanned = {"scanned"};
static const struct topic other_topic = {"other"};

static struct {
    struct ev_loop *loop;
    struct fake_api api;
    struct kube_config cfg;
    struct kube_http *http;
    struct manager *m;
    char log[1024];
} T;

static void note(const char *who, const char *what, const char *key)
{
    size_t n = strlen(T.log);
    (void)snprintf(T.log + n, sizeof(T.log) - n, "%s:%s:%s ", who, what, key ? key : "-");
}

static void sub_add(const char *key, const struct cJSON *obj, void *ud)
{
    (void)obj;
    note(ud, "add", key);
}

static void sub_update(const char *key, const struct cJSON *old, const struct cJSON *obj, void *ud)
{
    char what[64];
    (void)snprintf(what, sizeof(what), "update(%s>%s)", kube_meta_str(old, "resourceVersion"),
                   kube_meta_str(obj, "resourceVersion"));
    note(ud, what, key);
}

static int errors, skips;

static void sub_error(const struct kube_err *err, void *ud)
{
    (void)err;
    (void)ud;
    errors++;
}

static void sub_skip(const char *what, void *ud)
{
    (void)what;
    (void)ud;
    skips++;
}

/* A receiver of adds only (no update, delete, error or skip hook). */
static const struct kube_informer_handlers adds_only = {.on_add = sub_add};
static const struct kube_informer_handlers failures = {.on_error = sub_error, .on_skip = sub_skip};

static void sub_delete(const char *key, const struct cJSON *obj, void *ud)
{
    (void)obj;
    note(ud, "delete", key);
}

static const struct kube_informer_handlers sub = {
        .on_add = sub_add, .on_update = sub_update, .on_delete = sub_delete};

static void watch_map(void *self, const struct watch_event *ev)
{
    static const char *const types[] = {"add", "update", "delete", "topic"};
    note(self, types[ev->type], ev->key ? ev->key : ev->data);
    if (ev->type != WATCH_TOPIC)
        CU_ASSERT_PTR_NOT_NULL(ev->obj);
}

static const struct watch watches_a[] = {
        {.kind = &things, .map = watch_map}, {.topic = &scanned, .map = watch_map}, {0}};
static const struct watch watches_b[] = {{.topic = &scanned, .map = watch_map}, {0}};
static const struct part_ops part_a = {.name = "a", .watches = watches_a};
static const struct part_ops part_b = {.name = "b", .watches = watches_b};

static char runner_id[] = "runner", late_id[] = "late", a_id[] = "a", b_id[] = "b",
            adds_id[] = "adds";

static bool b_added(void)
{
    return strstr(T.log, "a:add:b") != NULL;
}

static bool others_synced(void)
{
    return kube_informer_has_synced(manager_cache(T.m, &others));
}

static bool failed_twice(void)
{
    return errors >= 2;
}

static bool synced(void)
{
    return kube_informer_has_synced(manager_cache(T.m, &things)) && T.api.watch != NULL;
}

static void setup(void)
{
    memset(&T, 0, sizeof(T));
    T.loop = ev_loop_new(EVFLAG_AUTO);
    fake_api_start(&T.api, T.loop);
    fake_api_set_list(&T.api, "5", "[{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"5\"}}]");
    char url[64];
    T.cfg = (struct kube_config){.server = strdup(fake_api_url(&T.api, url, sizeof(url)))};
    T.http = kube_http_new(T.loop, &T.cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T.http);
    T.m = manager_new(T.loop, T.http, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T.m);
}

static void teardown(void)
{
    T.m = manager_free(T.m);
    T.http = kube_http_free(T.http);
    kube_config_done(&T.cfg);
    fake_api_stop(&T.api);
    ev_loop_destroy(T.loop);
}

static void test_cache_events_in_order(void)
{
    setup();
    struct kube_informer *inf = manager_cache(T.m, &things);
    CU_ASSERT_PTR_NOT_NULL_FATAL(inf);
    CU_ASSERT_PTR_EQUAL(manager_cache(T.m, &things), inf); /* one per kind */
    CU_ASSERT_EQUAL(manager_subscribe(T.m, &things, &sub, runner_id), 0);
    CU_ASSERT_EQUAL(manager_add_watches(T.m, &part_a, a_id), 0);
    CU_ASSERT_EQUAL(manager_add_watches(T.m, &part_b, b_id), 0);
    CU_ASSERT_EQUAL(manager_subscribe(T.m, &things, &sub, late_id), 0);
    CU_ASSERT_EQUAL(manager_subscribe(T.m, &things, &adds_only, adds_id), 0);
    struct buf why;
    buf_init(&why, 256);
    CU_ASSERT_FALSE(manager_synced(T.m, &why));
    CU_ASSERT_STRING_EQUAL(why.data, "cache/things has not synced");
    buf_free(&why);
    CU_ASSERT_EQUAL(manager_start(T.m), 0);
    CU_ASSERT_FATAL(fake_api_run_until(T.loop, synced));
    CU_ASSERT_STRING_EQUAL(T.log, "runner:add:a late:add:a adds:add:a a:add:a ");
    buf_init(&why, 256);
    CU_ASSERT_TRUE(manager_synced(T.m, &why));
    buf_free(&why);

    T.log[0] = '\0';
    char obj[128];
    CU_ASSERT(fake_api_event(&T.api, "MODIFIED", fake_api_obj(obj, sizeof(obj), "a", "6")));
    CU_ASSERT(fake_api_event(&T.api, "DELETED", fake_api_obj(obj, sizeof(obj), "a", "7")));
    CU_ASSERT(fake_api_event(&T.api, "ADDED", fake_api_obj(obj, sizeof(obj), "b", "8")));
    CU_ASSERT(fake_api_run_until(T.loop, b_added));
    CU_ASSERT_STRING_EQUAL(T.log, "runner:update(5>6):a late:update(5>6):a a:update:a "
                                  "runner:delete:a late:delete:a a:delete:a "
                                  "runner:add:b late:add:b adds:add:b a:add:b ");

    /* another kind is another cache; a kind made after the start starts at once */
    struct kube_informer *other = manager_cache(T.m, &others);
    CU_ASSERT_PTR_NOT_NULL(other);
    CU_ASSERT_PTR_NOT_EQUAL(other, inf);
    CU_ASSERT(fake_api_run_until(T.loop, others_synced));
    teardown();
}

static void test_topics_and_parts(void)
{
    setup();
    CU_ASSERT_EQUAL(manager_add_watches(T.m, &part_a, a_id), 0);
    CU_ASSERT_EQUAL(manager_add_watches(T.m, &part_b, b_id), 0);
    char data[] = "scan-1";
    manager_emit(T.m, &scanned, data);
    manager_emit(T.m, &other_topic, data); /* no watch: nothing */
    CU_ASSERT_STRING_EQUAL(T.log, "a:topic:scan-1 b:topic:scan-1 ");

    int self_a = 1, self_b = 2;
    CU_ASSERT_PTR_NULL(manager_part(T.m, &part_a));
    CU_ASSERT_EQUAL(manager_add_part(T.m, &part_a, &self_a), 0);
    CU_ASSERT_EQUAL(manager_add_part(T.m, &part_b, &self_b), 0);
    CU_ASSERT_PTR_EQUAL(manager_part(T.m, &part_a), &self_a);
    CU_ASSERT_PTR_EQUAL(manager_part(T.m, &part_b), &self_b);
    CU_ASSERT_PTR_NULL(manager_part(NULL, &part_a));
    teardown();
}

/* In a node's process a kind narrows itself to the node: its label, its field (with the kind's
 * own field); cluster-wide, only the kind's own field. */
static const struct cache_kind by_label = {
        .name = "l", .res = &fake_api_things, .node_label = "nodename", .field = "spec.x=1"};
static const struct cache_kind by_field = {
        .name = "f", .res = &fake_api_things, .node_field = "spec.nodeName", .field = "spec.x=1"};

static bool listed(void)
{
    return T.api.lists > 0;
}

static void selectors_of(const char *node, const struct cache_kind *k, char *labels, char *fields)
{
    setup();
    manager_free(T.m);
    T.m = manager_new(T.loop, T.http, node);
    CU_ASSERT_PTR_NOT_NULL_FATAL(manager_cache(T.m, k));
    CU_ASSERT_EQUAL(manager_start(T.m), 0);
    CU_ASSERT(fake_api_run_until(T.loop, listed));
    (void)snprintf(labels, 256, "%s", T.api.list_labels);
    (void)snprintf(fields, 256, "%s", T.api.list_fields);
    teardown();
}

static void test_node_selectors(void)
{
    char labels[256], fields[256];
    selectors_of("n1", &by_label, labels, fields);
    CU_ASSERT_STRING_EQUAL(labels, "nodename%3Dn1");
    CU_ASSERT_STRING_EQUAL(fields, "spec.x%3D1");
    selectors_of("n1", &by_field, labels, fields);
    CU_ASSERT_STRING_EQUAL(labels, "");
    CU_ASSERT_STRING_EQUAL(fields, "spec.nodeName%3Dn1%2Cspec.x%3D1");
    selectors_of(NULL, &by_label, labels, fields);
    CU_ASSERT_STRING_EQUAL(labels, "");
    CU_ASSERT_STRING_EQUAL(fields, "spec.x%3D1");
}

/* A failed LIST goes to each receiver that takes failures (the manager logs it itself only
 * when none does). */
static void test_failures_to_receivers(void)
{
    setup();
    errors = skips = 0;
    T.api.list_code = 500;
    CU_ASSERT_EQUAL(manager_subscribe(T.m, &things, &adds_only, adds_id), 0);
    CU_ASSERT_EQUAL(manager_subscribe(T.m, &things, &failures, NULL), 0);
    CU_ASSERT_EQUAL(manager_start(T.m), 0);
    CU_ASSERT(fake_api_run_until(T.loop, failed_twice));
    CU_ASSERT_EQUAL(skips, 0);
    CU_ASSERT_STRING_EQUAL(T.log, "");
    T.api.list_code = 0;
    fake_api_set_list(&T.api, "5", "[{\"metadata\":{}},{\"metadata\":{\"name\":\"a\"}}]");
    kube_informer_retry_now(manager_cache(T.m, &things));
    CU_ASSERT(fake_api_run_until(T.loop, synced));
    CU_ASSERT_EQUAL(skips, 1);
    CU_ASSERT_STRING_EQUAL(T.log, "adds:add:a ");
    teardown();
}

/* The tables' bounds: 24 parts, 64 watches, 16 kinds; one more is -ENOMEM. The worker is made
 * once. */
static void test_bounds(void)
{
    setup();
    static const struct part_ops parts[25] = {{0}};
    static const struct watch many[2] = {{.topic = &scanned, .map = watch_map}, {0}};
    static const struct part_ops watcher = {.name = "w", .watches = many};
    static struct cache_kind kinds[17];
    for (int i = 0; i < 24; i++)
        CU_ASSERT_EQUAL(manager_add_part(T.m, &parts[i], a_id), 0);
    CU_ASSERT_EQUAL(manager_add_part(T.m, &parts[24], a_id), -ENOMEM);
    CU_ASSERT_PTR_EQUAL(manager_part(T.m, &parts[23]), a_id);
    for (int i = 0; i < 64; i++)
        CU_ASSERT_EQUAL(manager_add_watches(T.m, &watcher, a_id), 0);
    CU_ASSERT_EQUAL(manager_add_watches(T.m, &watcher, a_id), -ENOMEM);
    for (int i = 0; i < 17; i++)
        kinds[i] = (struct cache_kind){.name = "k", .res = &fake_api_things};
    for (int i = 0; i < 16; i++)
        CU_ASSERT_PTR_NOT_NULL(manager_cache(T.m, &kinds[i]));
    CU_ASSERT_PTR_NULL(manager_cache(T.m, &kinds[16]));
    struct worker *w = manager_worker(T.m);
    CU_ASSERT_PTR_NOT_NULL(w);
    CU_ASSERT_PTR_EQUAL(manager_worker(T.m), w);
    teardown();
}

/* A kind keyed by things (its cache keeps the others named like a thing). */
static const struct cache_kind keyed = {
        .name = "keyed", .res = &fake_api_others, .keys_of = &things};

static bool keyed_synced(void)
{
    return kube_informer_has_synced(manager_cache(T.m, &keyed));
}

static bool things_listed(void)
{
    return T.api.lists >= 1;
}

static bool keyed_has_c(void)
{
    return kube_informer_get(manager_cache(T.m, &keyed), "c") != NULL;
}

static bool keyed_lost_a(void)
{
    return kube_informer_get(manager_cache(T.m, &keyed), "a") == NULL;
}

/* things: a; others: a, b, c. The keyed cache LISTs once things has synced (its first LIST
 * failed: the keyed one waits), keeps a; a thing c made later brings its other with a GET; a
 * deleted drops its other. */
static void test_keyed_cache(void)
{
    setup();
    (void)snprintf(T.api.others_items, sizeof(T.api.others_items), "[%s,%s,%s]",
                   "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"5\"}}",
                   "{\"metadata\":{\"name\":\"b\",\"resourceVersion\":\"5\"}}",
                   "{\"metadata\":{\"name\":\"c\",\"resourceVersion\":\"5\"}}");
    struct kube_informer *k = manager_cache(T.m, &keyed);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_PTR_NOT_NULL(manager_cache(T.m, &things)); /* made with it */
    CU_ASSERT_EQUAL(manager_subscribe(T.m, &keyed, &sub, runner_id), 0);
    T.api.list_code = 500; /* things' first LIST fails: it waits out its backoff */
    CU_ASSERT_EQUAL(manager_start(T.m), 0);
    CU_ASSERT_FATAL(fake_api_run_until(T.loop, things_listed));
    T.api.list_code = 0;
    CU_ASSERT_FATAL(fake_api_run_until(T.loop, keyed_synced));
    CU_ASSERT_STRING_EQUAL(T.api.order, "things things others "); /* after things synced */
    CU_ASSERT_EQUAL(kube_informer_size(k), 1);
    CU_ASSERT_PTR_NOT_NULL(kube_informer_get(k, "a"));
    CU_ASSERT_STRING_EQUAL(T.log, "runner:add:a ");
    CU_ASSERT_FATAL(fake_api_run_until(T.loop, synced)); /* things' watch is open */

    T.api.get_code = 200;
    (void)snprintf(T.api.get_body, sizeof(T.api.get_body),
                   "{\"metadata\":{\"name\":\"c\",\"resourceVersion\":\"7\"}}");
    char obj[128];
    CU_ASSERT(fake_api_event(&T.api, "ADDED", fake_api_obj(obj, sizeof(obj), "c", "6")));
    CU_ASSERT(fake_api_run_until(T.loop, keyed_has_c));
    CU_ASSERT_STRING_EQUAL(T.api.get_name, "c");
    CU_ASSERT_EQUAL(T.api.gets, 1);
    CU_ASSERT(fake_api_event(&T.api, "DELETED", fake_api_obj(obj, sizeof(obj), "a", "8")));
    CU_ASSERT(fake_api_run_until(T.loop, keyed_lost_a));
    CU_ASSERT_STRING_EQUAL(T.log, "runner:add:a runner:add:c runner:delete:a ");
    CU_ASSERT_EQUAL(kube_informer_size(k), 1);
    CU_ASSERT_EQUAL(T.api.others_lists, 1);
    teardown();
}

static CU_TestInfo tests[] = {
        {"in a node's process, a kind narrowed to the node", test_node_selectors},
        {"failures to the receivers that take them", test_failures_to_receivers},
        {"24 parts, 64 watches, 16 kinds, one worker", test_bounds},
        {"a cache's events: receivers, then watches, in order", test_cache_events_in_order},
        {"topics to their watches; parts by their hooks", test_topics_and_parts},
        {"keys_of: started after its keys' cache, keeps what they name, follows them",
         test_keyed_cache},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo manager_suites[] = {
        {"manager", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
