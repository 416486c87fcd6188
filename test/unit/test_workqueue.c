/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_workqueue.c - the client-go work queue driven by a fake clock: dedup, FIFO,
 * processing, delays, rate limits, the token bucket, shutdown, many keys.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "kube/workqueue.h"

#define EPS 1e-9

struct fake {
    struct clock clock;
    double now;
};

static double fake_now(void *userdata)
{
    return ((const struct fake *)userdata)->now;
}

static void fake_init(struct fake *f, double now)
{
    f->clock = (struct clock){.now = fake_now, .userdata = f};
    f->now = now;
}

/* A queue on fake clock `f` with client-go's defaults unless changed afterwards. */
static struct wq *new_queue(struct fake *f, double base, double max, double qps, int burst)
{
    fake_init(f, 1000);
    struct wq_config cfg = {
            .base_delay = base, .max_delay = max, .qps = qps, .burst = burst, .clock = &f->clock};
    return wq_new(&cfg);
}

static struct wq *default_queue(struct fake *f)
{
    return new_queue(f, 0.005, 1000, 10, 100);
}

/* Gets a key and checks it is `want` (NULL: none); a got key is done at once. */
static void expect_get(struct wq *q, const char *want)
{
    const char *got = wq_get(q);
    if (!want) {
        CU_ASSERT_PTR_NULL(got);
        return;
    }
    CU_ASSERT_PTR_NOT_NULL(got);
    if (!got)
        return;
    CU_ASSERT_STRING_EQUAL(got, want);
    wq_done(q, got);
}

static void test_config_default(void)
{
    struct wq_config cfg;
    wq_config_default(&cfg);
    CU_ASSERT_DOUBLE_EQUAL(cfg.base_delay, 0.005, EPS);
    CU_ASSERT_DOUBLE_EQUAL(cfg.max_delay, 1000, EPS);
    CU_ASSERT_DOUBLE_EQUAL(cfg.qps, 10, EPS);
    CU_ASSERT_EQUAL(cfg.burst, 100);
    CU_ASSERT_PTR_NULL(cfg.clock);
    struct wq *q = wq_new(NULL);
    CU_ASSERT_PTR_NOT_NULL(q);
    if (!q)
        return;
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), -1, EPS);
    CU_ASSERT_EQUAL(wq_add(q, "a"), 0);
    expect_get(q, "a");
    CU_ASSERT_PTR_NULL(wq_free(q));
    CU_ASSERT_PTR_NULL(wq_free(NULL));
}

static void test_dedup_and_fifo(void)
{
    struct fake f;
    struct wq *q = default_queue(&f);
    CU_ASSERT_EQUAL(wq_add(q, "c"), 0);
    CU_ASSERT_EQUAL(wq_add(q, "a"), 0);
    CU_ASSERT_EQUAL(wq_add(q, "c"), 0);
    CU_ASSERT_EQUAL(wq_add(q, "b"), 0);
    CU_ASSERT_EQUAL(wq_add(q, "a"), 0);
    CU_ASSERT_EQUAL(wq_len(q), 3);
    expect_get(q, "c");
    expect_get(q, "a");
    expect_get(q, "b");
    expect_get(q, NULL);
    CU_ASSERT_EQUAL(wq_len(q), 0);
    CU_ASSERT_EQUAL(wq_processing(q), 0);
    wq_free(q);
}

/* Gets keys "k<from>".."k<to - 1>" in order, each done at once. */
static void expect_range(struct wq *q, int from, int to)
{
    char key[16];
    for (int i = from; i < to; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        expect_get(q, key);
    }
}

static void add_range(struct wq *q, int from, int to)
{
    char key[16];
    for (int i = from; i < to; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        CU_ASSERT_EQUAL(wq_add(q, key), 0);
    }
}

static void test_fifo_across_wrap_and_growth(void)
{
    struct fake f;
    struct wq *q = default_queue(&f);
    add_range(q, 0, 10);
    expect_range(q, 0, 8);
    add_range(q, 10, 24); /* fills the ring past its end, wrapping */
    add_range(q, 24, 40); /* grows it while wrapped */
    CU_ASSERT_EQUAL(wq_len(q), 32);
    expect_range(q, 8, 40);
    expect_get(q, NULL);
    wq_free(q);
}

static void test_add_while_processing(void)
{
    struct fake f;
    struct wq *q = default_queue(&f);
    CU_ASSERT_EQUAL(wq_add(q, "a"), 0);
    CU_ASSERT_EQUAL(wq_add(q, "b"), 0);
    const char *a = wq_get(q);
    CU_ASSERT_STRING_EQUAL(a, "a");
    CU_ASSERT_EQUAL(wq_processing(q), 1);
    CU_ASSERT_EQUAL(wq_add(q, "a"), 0);
    CU_ASSERT_EQUAL(wq_add(q, "a"), 0);
    CU_ASSERT_EQUAL(wq_len(q), 1);
    expect_get(q, "b");
    expect_get(q, NULL); /* "a" is dirty but still processing */
    wq_done(q, "a");     /* an equal string, not the queue's pointer */
    CU_ASSERT_EQUAL(wq_processing(q), 0);
    CU_ASSERT_EQUAL(wq_len(q), 1);
    expect_get(q, "a");
    expect_get(q, NULL);
    /* Done for keys not being processed is ignored. */
    wq_done(q, "a");
    wq_done(q, "unknown");
    CU_ASSERT_EQUAL(wq_len(q), 0);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), -1, EPS);
    wq_free(q);
}

static void test_add_after_earlier_wins(void)
{
    struct fake f;
    struct wq *q = default_queue(&f);
    CU_ASSERT_EQUAL(wq_add_after(q, "a", 10), 0);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 10, EPS);
    CU_ASSERT_EQUAL(wq_add_after(q, "a", 5), 0);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 5, EPS);
    CU_ASSERT_EQUAL(wq_add_after(q, "a", 20), 0);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 5, EPS);
    CU_ASSERT_EQUAL(wq_len(q), 0);
    f.now += 4.5;
    expect_get(q, NULL);
    f.now += 0.5;
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 0, EPS);
    expect_get(q, "a");
    /* The later times were dropped, not kept as second entries. */
    f.now += 100;
    expect_get(q, NULL);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), -1, EPS);
    wq_free(q);
}

static void test_next_in(void)
{
    struct fake f;
    struct wq *q = default_queue(&f);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), -1, EPS);
    CU_ASSERT_EQUAL(wq_add_after(q, "a", 2.5), 0);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 2.5, EPS);
    f.now += 1;
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 1.5, EPS);
    CU_ASSERT_EQUAL(wq_add(q, "b"), 0);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 0, EPS);
    const char *b = wq_get(q);
    /* Only a processing key and a waiting one: wait for the waiting one. */
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 1.5, EPS);
    wq_done(q, b);
    f.now += 1.5;
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 0, EPS);
    CU_ASSERT_EQUAL(wq_len(q), 1);
    expect_get(q, "a");
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), -1, EPS);
    wq_free(q);
}

static void test_delayed_keys_become_ready(void)
{
    struct fake f;
    struct wq *q = default_queue(&f);
    CU_ASSERT_EQUAL(wq_add_after(q, "c", 3), 0);
    CU_ASSERT_EQUAL(wq_add_after(q, "a", 1), 0);
    CU_ASSERT_EQUAL(wq_add_after(q, "b", 2), 0);
    CU_ASSERT_EQUAL(wq_add_after(q, "now", 0), 0);
    CU_ASSERT_EQUAL(wq_add_after(q, "past", -1), 0);
    CU_ASSERT_EQUAL(wq_len(q), 2);
    expect_get(q, "now");
    expect_get(q, "past");
    expect_get(q, NULL);
    f.now += 2;
    expect_get(q, "a");
    expect_get(q, "b");
    expect_get(q, NULL);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 1, EPS);
    f.now += 1;
    expect_get(q, "c");
    wq_free(q);
}

static void test_waiting_key_added_now(void)
{
    struct fake f;
    struct wq *q = default_queue(&f);
    CU_ASSERT_EQUAL(wq_add_after(q, "a", 1), 0);
    CU_ASSERT_EQUAL(wq_add(q, "a"), 0);
    expect_get(q, "a");
    /* The wait is not cancelled: the key runs again when due, as in client-go. */
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 1, EPS);
    f.now += 1;
    expect_get(q, "a");
    /* A key that is due while queued is not queued twice. */
    CU_ASSERT_EQUAL(wq_add_after(q, "b", 1), 0);
    CU_ASSERT_EQUAL(wq_add(q, "b"), 0);
    f.now += 1;
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 0, EPS);
    CU_ASSERT_EQUAL(wq_len(q), 1);
    expect_get(q, "b");
    expect_get(q, NULL);
    wq_free(q);
}

/* Fails `key` once more and checks its delay, then lets it run. */
static void fail_and_run(struct fake *f, struct wq *q, const char *key, double want)
{
    CU_ASSERT_EQUAL(wq_add_rate_limited(q, key), 0);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), want, EPS);
    f->now += want;
    expect_get(q, key);
}

static void test_rate_limited_per_key(void)
{
    struct fake f;
    struct wq *q = default_queue(&f);
    double want = 0.005;
    for (int i = 0; i < 8; i++) {
        fail_and_run(&f, q, "a", want);
        CU_ASSERT_EQUAL(wq_num_requeues(q, "a"), i + 1);
        want *= 2;
    }
    /* Other keys have their own count. */
    CU_ASSERT_EQUAL(wq_num_requeues(q, "b"), 0);
    fail_and_run(&f, q, "b", 0.005);
    fail_and_run(&f, q, "a", 1.28);
    wq_forget(q, "a");
    CU_ASSERT_EQUAL(wq_num_requeues(q, "a"), 0);
    fail_and_run(&f, q, "a", 0.005);
    fail_and_run(&f, q, "a", 0.01);
    wq_forget(q, "unknown");
    wq_free(q);
}

static void test_bucket_limits_a_burst(void)
{
    struct fake f;
    struct wq *q = new_queue(&f, 0.005, 1000, 10, 3);
    char key[16];
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        CU_ASSERT_EQUAL(wq_add_rate_limited(q, key), 0);
    }
    /* The burst of 3 waits only its own backoff; then one key per 1/qps. */
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 0.005, EPS);
    f.now += 0.005;
    expect_get(q, "k0");
    expect_get(q, "k1");
    expect_get(q, "k2");
    expect_get(q, NULL);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 0.095, EPS);
    f.now += 0.095;
    expect_get(q, "k3");
    expect_get(q, NULL);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 0.1, EPS);
    f.now += 0.1;
    expect_get(q, "k4");
    /* The bucket refills with the clock: after a long pause the burst is back. */
    f.now += 60;
    for (int i = 5; i < 8; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        CU_ASSERT_EQUAL(wq_add_rate_limited(q, key), 0);
    }
    CU_ASSERT_EQUAL(wq_add_rate_limited(q, "k8"), 0);
    f.now += 0.005;
    expect_get(q, "k5");
    expect_get(q, "k6");
    expect_get(q, "k7");
    expect_get(q, NULL);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 0.095, EPS);
    wq_free(q);
}

static void test_cap_at_max_delay(void)
{
    struct fake f;
    struct wq *q = new_queue(&f, 1, 10, 0, 0);
    static const double want[] = {1, 2, 4, 8, 10, 10};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        fail_and_run(&f, q, "a", want[i]);
    /* Thousands of failures neither overflow nor pass the cap. */
    for (int i = 0; i < 3000; i++)
        CU_ASSERT_EQUAL(wq_add_rate_limited(q, "a"), 0);
    CU_ASSERT_EQUAL(wq_num_requeues(q, "a"), 3006);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), 10, EPS);
    f.now += 10;
    expect_get(q, "a");
    fail_and_run(&f, q, "a", 10);
    wq_free(q);
}

static void test_shut_down(void)
{
    struct fake f;
    struct wq *q = default_queue(&f);
    CU_ASSERT_EQUAL(wq_add(q, "a"), 0);
    CU_ASSERT_EQUAL(wq_add(q, "b"), 0);
    CU_ASSERT_EQUAL(wq_add_after(q, "later", 1), 0);
    const char *a = wq_get(q);
    CU_ASSERT_EQUAL(wq_add(q, "a"), 0); /* dirty while processing */
    wq_shut_down(q);
    expect_get(q, NULL);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), -1, EPS);
    CU_ASSERT_EQUAL(wq_add(q, "c"), 0);
    CU_ASSERT_EQUAL(wq_add_after(q, "d", 1), 0);
    CU_ASSERT_EQUAL(wq_add_rate_limited(q, "e"), 0);
    CU_ASSERT_EQUAL(wq_num_requeues(q, "e"), 0);
    CU_ASSERT_EQUAL(wq_len(q), 1);
    CU_ASSERT_EQUAL(wq_processing(q), 1);
    wq_done(q, a);
    CU_ASSERT_EQUAL(wq_processing(q), 0);
    f.now += 2;
    expect_get(q, NULL);
    wq_free(q); /* frees the queued, dirty and waiting keys */
}

static void test_many_keys(void)
{
    enum { N = 10000 };
    struct fake f;
    struct wq *q = default_queue(&f);
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "default/dev-%d", i);
        CU_ASSERT_EQUAL(i % 2 ? wq_add_after(q, key, i % 7) : wq_add(q, key), 0);
        if (i % 3 == 0)
            CU_ASSERT_EQUAL(wq_add_rate_limited(q, key), 0);
    }
    f.now += 3600;
    size_t got = 0;
    const char *k;
    while ((k = wq_get(q))) {
        got++;
        if (got <= N && got % 5 == 0)
            CU_ASSERT_EQUAL(wq_add(q, k), 0); /* runs again after done */
        wq_forget(q, k);
        wq_done(q, k);
    }
    CU_ASSERT_EQUAL(got, N + N / 5);
    CU_ASSERT_EQUAL(wq_processing(q), 0);
    CU_ASSERT_DOUBLE_EQUAL(wq_next_in(q), -1, EPS);
    for (int i = 0; i < N; i += 2) {
        snprintf(key, sizeof(key), "default/dev-%d", i);
        CU_ASSERT_EQUAL(wq_add_after(q, key, 5), 0);
    }
    wq_free(q); /* leaves N / 2 waiting keys to free */
}

static CU_TestInfo tests[] = {
        {"config default", test_config_default},
        {"dedup and FIFO order", test_dedup_and_fifo},
        {"FIFO across ring wrap and growth", test_fifo_across_wrap_and_growth},
        {"add while processing", test_add_while_processing},
        {"add_after: the earlier time wins", test_add_after_earlier_wins},
        {"next_in", test_next_in},
        {"delayed keys become ready", test_delayed_keys_become_ready},
        {"waiting key added now", test_waiting_key_added_now},
        {"rate limited per key, forget", test_rate_limited_per_key},
        {"bucket limits a burst", test_bucket_limits_a_burst},
        {"cap at max_delay", test_cap_at_max_delay},
        {"shut down", test_shut_down},
        {"10000 keys", test_many_keys},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo workqueue_suites[] = {
        {"workqueue", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
