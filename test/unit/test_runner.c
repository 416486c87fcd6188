/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_runner.c - the controller runner (controllers/runtime/runner.c) with a real
 * informer on a fake API server on loopback (fake_api.h: the watch delivers what the test
 * writes into it, so a lagging watch is one the test keeps quiet) and a fake clock (the queue's
 * delays and the expectations), so every wait is exact whatever the machine's load. The
 * reconciler is a fake: it writes a key it wants, and the "API server" answers 409 when the
 * version it planned from is not the server's (a stale cache). What docs/runtime.md promises:
 *  - after a 409 while the informer has not moved, the key is held until the informer moves
 *    past where it was: one 409 per key however many triggers come meanwhile (the storm was one
 *    per trigger), not released by a bookmark where it was, released by one past it or by the
 *    key's own newer version, and at the latest after the expectation's TTL;
 *  - a 409 after the informer moved since the plan is retried once after the backoff, then held;
 *  - our own write holds the key until the informer shows it;
 *  - the requeue rules: RUNNER_RETRY after the key's backoff (5 ms doubling), RUNNER_DONE not
 *    again until a trigger, RUNNER_REQUEUE_AFTER after exactly N s, which forgets the failures;
 *  - at most max_in_flight keys in act; runner_stop() hands out no more and lets acts finish.
 */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "controllers/runtime/expect.h"
#include "controllers/runtime/runner.h"
#include "fake_api.h"
#include "kube/config.h"
#include "kube/http.h"

#define EPS 1e-6

enum mode { WRITE, HOLD, RESULT };

/* One object of the fake kind: what the server has and whether the reconciler wants a write. */
struct thing {
    const char *name;
    int server_rv; /* the version the API server has */
    bool want;     /* the reconciler's plan writes it */
    int plans;     /* plans made for it */
};

struct plan {
    char key[16];
    char rv[16]; /* of the cached object the plan was made from */
};

static struct {
    struct ev_loop *loop;
    struct fake_api api;
    struct kube_config cfg;
    struct kube_http *http;
    struct runner *r;
    double now; /* the fake clock */
    int rv;     /* the server's last resourceVersion */
    struct thing things[3];
    enum mode mode;
    enum runner_result result; /* mode RESULT */
    double after;
    int plans, conflicts, writes;
    struct runner_job *held[4]; /* mode HOLD */
    int n_held;
} T;

static double fake_now(void *userdata)
{
    (void)userdata;
    return T.now;
}

static const struct clock fake_clock = {.now = fake_now};

static struct thing *thing(const char *key)
{
    for (size_t i = 0; i < sizeof(T.things) / sizeof(T.things[0]); i++)
        if (T.things[i].name && strcmp(T.things[i].name, key) == 0)
            return &T.things[i];
    return NULL;
}

/* --- the fake reconciler -------------------------------------------------------------------- */

static int plan(void *ctx, const char *key, const cJSON *obj, void **ret_plan)
{
    (void)ctx;
    T.plans++;
    struct thing *t = thing(key);
    *ret_plan = NULL;
    if (t)
        t->plans++;
    if (!t || !t->want)
        return 0;
    struct plan *p = calloc(1, sizeof(*p));
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    (void)snprintf(p->key, sizeof(p->key), "%s", key);
    (void)snprintf(p->rv, sizeof(p->rv), "%s", obj ? kube_meta_str(obj, "resourceVersion") : "");
    *ret_plan = p;
    return 0;
}

static int rv_num(const char *rv)
{
    return rv && *rv ? (int)strtol(rv, NULL, 10) : -1;
}

/* An update conditional on the version planned from: 409 when the server has another. */
static void write_thing(struct runner_job *job, const struct plan *p)
{
    struct thing *t = thing(p->key);
    if (rv_num(p->rv) != t->server_rv) {
        T.conflicts++;
        runner_job_done(job, RUNNER_STALE, 0);
        return;
    }
    t->server_rv = ++T.rv;
    t->want = false;
    T.writes++;
    char rv[16], text[128];
    (void)snprintf(rv, sizeof(rv), "%d", t->server_rv);
    cJSON *obj = cJSON_Parse(fake_api_obj(text, sizeof(text), p->key, rv));
    runner_job_wrote(job, obj);
    cJSON_Delete(obj);
    runner_job_done(job, RUNNER_DONE, 0);
}

static void act(struct runner_job *job, void *p, void *ctx)
{
    (void)ctx;
    if (T.mode == HOLD) {
        CU_ASSERT_FATAL(T.n_held < 4);
        T.held[T.n_held++] = job;
    } else if (T.mode == RESULT) {
        runner_job_done(job, T.result, T.after);
    } else {
        write_thing(job, p);
    }
}

static const struct runner_ops ops = {.plan = plan, .act = act, .plan_free = free};

/* --- driving the loop ----------------------------------------------------------------------- */

static bool run_until(bool (*done)(void))
{
    return fake_api_run_until(T.loop, done);
}

/* One turn of the loop without waiting: the runner hands out every key due now. */
static void step(void)
{
    ev_run(T.loop, EVRUN_NOWAIT);
    ev_run(T.loop, EVRUN_NOWAIT);
}

static void advance(double seconds)
{
    T.now += seconds;
    step();
}

static void trigger(const char *key)
{
    runner_enqueue(T.r, key);
    step();
}

static bool watching(void)
{
    return T.api.watch != NULL;
}

static char want_rv[32];

static bool informer_at(void)
{
    return strcmp(kube_informer_resource_version(runner_informer(T.r)), want_rv) == 0;
}

/* The watch delivers `type` of `name` at `rv` (a BOOKMARK: no name); the runner has handled
 * it when this returns. */
static void deliver(const char *type, const char *name, int rv)
{
    char text[128], rvs[16];
    (void)snprintf(rvs, sizeof(rvs), "%d", rv);
    (void)snprintf(want_rv, sizeof(want_rv), "%s", rvs);
    CU_ASSERT_FATAL(fake_api_event(&T.api, type, fake_api_obj(text, sizeof(text), name, rvs)));
    CU_ASSERT_FATAL(run_until(informer_at));
    step();
}

/* A runner with `max_in_flight` on a fake API whose LIST holds a@10, b@10 and c@10 (the
 * informer's position: 10), started, synced, its first round (nothing wanted) done, and the
 * watch open. */
static void setup(int max_in_flight)
{
    memset(&T, 0, sizeof(T));
    T.loop = ev_loop_new(EVFLAG_AUTO);
    T.now = 1000;
    T.rv = 10;
    T.things[0] = (struct thing){.name = "a", .server_rv = 10};
    T.things[1] = (struct thing){.name = "b", .server_rv = 10};
    T.things[2] = (struct thing){.name = "c", .server_rv = 10};
    fake_api_start(&T.api, T.loop);
    char a[128], b[128], c[128], items[512], url[64];
    (void)snprintf(items, sizeof(items), "[%s,%s,%s]", fake_api_obj(a, sizeof(a), "a", "10"),
                   fake_api_obj(b, sizeof(b), "b", "10"), fake_api_obj(c, sizeof(c), "c", "10"));
    fake_api_set_list(&T.api, "10", items);
    T.cfg = (struct kube_config){.server = strdup(fake_api_url(&T.api, url, sizeof(url)))};
    T.http = kube_http_new(T.loop, &T.cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T.http);
    struct runner_config rc = {.name = "test",
                               .loop = T.loop,
                               .http = T.http,
                               .informer = {.resource = &fake_api_things},
                               .max_in_flight = max_in_flight,
                               .ops = &ops,
                               .clock = &fake_clock};
    T.r = runner_new(&rc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T.r);
    CU_ASSERT_EQUAL_FATAL(runner_start(T.r), 0);
    CU_ASSERT_FATAL(run_until(watching));
    step();
    CU_ASSERT(runner_has_synced(T.r));
    CU_ASSERT_EQUAL(T.plans, 3); /* the LIST's adds: a, b and c, converged */
    CU_ASSERT(runner_converged(T.r));
    T.plans = 0;
    for (int i = 0; i < 3; i++)
        T.things[i].plans = 0;
}

static void teardown(void)
{
    CU_ASSERT_EQUAL(runner_in_flight(T.r), 0);
    T.r = runner_free(T.r);
    T.http = kube_http_free(T.http);
    kube_config_done(&T.cfg);
    fake_api_stop(&T.api);
    ev_loop_destroy(T.loop);
}

/* a's write meets 409: the API server has a@12, which the (lagging) watch has not brought. */
static void conflicted(void)
{
    thing("a")->server_rv = T.rv = 12;
    thing("a")->want = true;
    trigger("a");
    CU_ASSERT_EQUAL(thing("a")->plans, 1);
    CU_ASSERT_EQUAL(T.conflicts, 1);
}

/* --- the tests ------------------------------------------------------------------------------ */

/* One 409 however many triggers come while the informer lags; the key's own newer version
 * releases it, and the write then goes through (and holds the key until it shows). */
static void test_conflict_holds_while_the_informer_lags(void)
{
    setup(1);
    conflicted();
    for (int i = 0; i < 5; i++) /* other informers' events, a resync: triggers of the key */
        trigger("a");
    CU_ASSERT_EQUAL(thing("a")->plans, 1);
    CU_ASSERT_EQUAL(T.conflicts, 1);
    deliver("BOOKMARK", "x", 10); /* a bookmark where the informer was: not past it */
    trigger("a");
    advance(10.0); /* the requeue of RUNNER_STALE comes, but the informer still lags */
    CU_ASSERT_EQUAL(thing("a")->plans, 1);
    CU_ASSERT_EQUAL(T.conflicts, 1);
    deliver("MODIFIED", "a", 12); /* the watch catches up */
    CU_ASSERT_EQUAL(thing("a")->plans, 2);
    CU_ASSERT_EQUAL(T.conflicts, 1);
    CU_ASSERT_EQUAL(T.writes, 1); /* a@13 */
    for (int i = 0; i < 3; i++)   /* our write holds the key until the informer shows it */
        trigger("a");
    CU_ASSERT_EQUAL(thing("a")->plans, 2);
    deliver("MODIFIED", "a", 13);
    CU_ASSERT_EQUAL(thing("a")->plans, 3); /* converged: nothing wanted */
    CU_ASSERT_EQUAL(T.writes, 1);
    teardown();
}

/* The informer moving past where it was at the 409 (a bookmark, another object's event)
 * releases the key: the next trigger plans again. */
static void test_released_when_the_informer_moves_past(void)
{
    setup(1);
    conflicted();
    deliver("BOOKMARK", "x", 11);
    CU_ASSERT_EQUAL(thing("a")->plans, 1); /* released, but nothing triggered it */
    trigger("a");
    CU_ASSERT_EQUAL(thing("a")->plans,
                    2); /* (the cache still has a@10: a second 409, and held again) */
    CU_ASSERT_EQUAL(T.conflicts, 2);
    trigger("a");
    CU_ASSERT_EQUAL(thing("a")->plans, 2);
    deliver("MODIFIED", "b", 12); /* another object's event past where it was */
    trigger("a");
    CU_ASSERT_EQUAL(thing("a")->plans, 3);
    teardown();
}

/* A lost watch never strands the key: the expectation ends after its TTL. */
static void test_released_after_the_ttl(void)
{
    setup(1);
    conflicted();
    advance(EXPECT_TTL - 0.5);
    trigger("a");
    CU_ASSERT_EQUAL(thing("a")->plans, 1);
    advance(0.5); /* the re-check queued when the key was held */
    CU_ASSERT_EQUAL(thing("a")->plans, 2);
    teardown();
}

/* A 409 after the informer moved since the plan: the cache may hold the newer version already,
 * so the key is retried once after its backoff; a second 409 holds it. */
static void test_moved_since_the_plan_retries_once(void)
{
    setup(1);
    thing("a")->server_rv = T.rv = 12;
    thing("a")->want = true;
    T.mode = HOLD;
    trigger("a");
    CU_ASSERT_EQUAL_FATAL(T.n_held, 1);
    deliver("MODIFIED", "b", 11); /* the informer moves while the write is in flight */
    T.conflicts++;
    runner_job_done(T.held[--T.n_held], RUNNER_STALE, 0);
    T.mode = WRITE;
    advance(0.004);
    CU_ASSERT_EQUAL(thing("a")->plans, 1);
    advance(0.001); /* the first backoff: 5 ms */
    CU_ASSERT_EQUAL(thing("a")->plans, 2);
    CU_ASSERT_EQUAL(T.conflicts, 2); /* still a@10 in the cache */
    for (int i = 0; i < 3; i++)
        trigger("a");
    advance(0.1);
    CU_ASSERT_EQUAL(thing("a")->plans, 2);
    CU_ASSERT_EQUAL(T.conflicts, 2);
    deliver("MODIFIED", "a", 12);
    CU_ASSERT_EQUAL(thing("a")->plans, 3);
    CU_ASSERT_EQUAL(T.writes, 1);
    teardown();
}

static void test_requeue_rules(void)
{
    setup(1);
    thing("a")->want = true;
    T.mode = RESULT;
    T.result = RUNNER_RETRY;
    trigger("a");
    CU_ASSERT_EQUAL(thing("a")->plans, 1);
    advance(0.0049);
    CU_ASSERT_EQUAL(thing("a")->plans, 1);
    advance(0.0001 + EPS); /* 5 ms */
    CU_ASSERT_EQUAL(thing("a")->plans, 2);
    advance(0.0099);
    CU_ASSERT_EQUAL(thing("a")->plans, 2);
    advance(0.0001 + EPS); /* then 10 ms */
    CU_ASSERT_EQUAL(thing("a")->plans, 3);
    T.result = RUNNER_REQUEUE_AFTER;
    T.after = 5.0;
    advance(0.02); /* 20 ms: the third try, which asks for 5 s */
    CU_ASSERT_EQUAL(thing("a")->plans, 4);
    advance(5.0 - EPS);
    CU_ASSERT_EQUAL(thing("a")->plans, 4);
    T.result = RUNNER_RETRY;
    advance(2 * EPS);
    CU_ASSERT_EQUAL(thing("a")->plans, 5);
    advance(0.005 + EPS); /* the requeue forgot the failures: 5 ms again */
    CU_ASSERT_EQUAL(thing("a")->plans, 6);
    T.result = RUNNER_DONE;
    advance(0.01 + EPS);
    CU_ASSERT_EQUAL(thing("a")->plans, 7);
    advance(1000); /* done: not again until something triggers it */
    CU_ASSERT_EQUAL(thing("a")->plans, 7);
    trigger("a");
    CU_ASSERT_EQUAL(thing("a")->plans, 8);
    teardown();
}

/* At most max_in_flight keys in act; runner_stop() hands out no more keys and lets the acts in
 * flight finish. */
static void test_in_flight_limit_and_drain(void)
{
    setup(2);
    T.mode = HOLD;
    for (int i = 0; i < 3; i++)
        T.things[i].want = true;
    trigger("a");
    trigger("b");
    trigger("c");
    CU_ASSERT_EQUAL(T.n_held, 2);
    CU_ASSERT_EQUAL(runner_in_flight(T.r), 2);
    runner_job_done(T.held[--T.n_held], RUNNER_DONE, 0);
    step();
    CU_ASSERT_EQUAL(T.n_held, 2); /* the third key */
    CU_ASSERT_EQUAL(T.plans, 3);
    runner_stop(T.r);
    runner_job_done(T.held[--T.n_held], RUNNER_RETRY, 0);
    trigger("a");
    trigger("b");
    advance(1);
    CU_ASSERT_EQUAL(T.plans, 3);
    CU_ASSERT_EQUAL(runner_in_flight(T.r), 1);
    runner_job_done(T.held[--T.n_held], RUNNER_DONE, 0);
    CU_ASSERT_EQUAL(runner_in_flight(T.r), 0);
    teardown();
}

static CU_TestInfo tests[] = {
        {"a 409 holds the key while the informer lags",
         test_conflict_holds_while_the_informer_lags},
        {"released when the informer moves past", test_released_when_the_informer_moves_past},
        {"released after the expectation's TTL", test_released_after_the_ttl},
        {"a 409 after the informer moved: one retry", test_moved_since_the_plan_retries_once},
        {"requeue rules", test_requeue_rules},
        {"in-flight limit and drain on stop", test_in_flight_limit_and_drain},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo runner_suites[] = {
        {"runner", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
