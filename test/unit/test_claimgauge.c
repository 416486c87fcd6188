/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_claimgauge.c - hostdevd_claims{kind, ready, reason} from an informer's cache (a
 * real informer synced on a fake API server's LIST, fake_api.h): claims counted by their Ready
 * condition, "Pending" without one, a series whose claims went reads 0, reasons past the bound
 * counted as "Other".
 */
#include <CUnit/CUnit.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/metrics.h"
#include "controllers/claims/claimgauge.h"
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
    struct metrics *m;
    int want_lists;
} T;

static bool synced(void)
{
    return kube_informer_has_synced(T.inf) && T.api.watch != NULL && T.api.lists >= T.want_lists;
}

static void claim(struct buf *b, const char *name, const char *status, const char *reason)
{
    (void)buf_printf(b, "%s{\"metadata\":{\"name\":\"%s\",\"resourceVersion\":\"5\"}",
                     b->len > 1 ? "," : "", name);
    if (status)
        (void)buf_printf(b,
                         ",\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\","
                         "\"reason\":\"%s\"}]}",
                         status, reason);
    (void)buf_printf(b, "}");
}

static void setup(const char *items)
{
    memset(&T, 0, sizeof(T));
    T.loop = ev_loop_new(EVFLAG_AUTO);
    fake_api_start(&T.api, T.loop);
    fake_api_set_list(&T.api, "5", items);
    char url[64];
    T.cfg = (struct kube_config){.server = strdup(fake_api_url(&T.api, url, sizeof(url)))};
    T.http = kube_http_new(T.loop, &T.cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T.http);
    struct kube_informer_config ic = {.resource = &fake_api_things};
    T.inf = kube_informer_new(T.loop, T.http, &ic);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T.inf);
    CU_ASSERT_EQUAL(kube_informer_start(T.inf), 0);
    T.want_lists = 1;
    CU_ASSERT_FATAL(fake_api_run_until(T.loop, synced));
    T.m = metrics_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(T.m);
}

static void teardown(void)
{
    T.inf = kube_informer_free(T.inf);
    T.http = kube_http_free(T.http);
    kube_config_done(&T.cfg);
    fake_api_stop(&T.api);
    ev_loop_destroy(T.loop);
    T.m = metrics_free(T.m);
}

static char *render(void)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    CU_ASSERT_EQUAL(metrics_render(T.m, &b), 0);
    return b.data; /* NUL-terminated; freed by the caller */
}

static void test_counts_by_ready_and_reason(void)
{
    struct buf items;
    buf_init(&items, 1 << 16);
    (void)buf_printf(&items, "[");
    claim(&items, "a", "True", "Bound");
    claim(&items, "b", "True", "Bound");
    claim(&items, "c", "False", "NodeNotFound");
    claim(&items, "d", NULL, NULL);
    (void)buf_printf(&items, "]");
    setup(items.data);
    buf_free(&items);
    struct claimgauge *g = claimgauge_new(T.m, NULL, T.inf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    char *text = render();
    CU_ASSERT_PTR_NOT_NULL(
            strstr(text, "hostdevd_claims{kind=\"usb\",ready=\"true\",reason=\"Bound\"} 2\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(
            text, "hostdevd_claims{kind=\"usb\",ready=\"false\",reason=\"NodeNotFound\"} 1\n"));
    CU_ASSERT_PTR_NOT_NULL(
            strstr(text, "hostdevd_claims{kind=\"usb\",ready=\"false\",reason=\"Pending\"} 1\n"));
    CU_ASSERT_PTR_NULL(strstr(text, "kind=\"pci\""));
    free(text);

    /* The claims go (a new LIST after 410): every series reads 0, none disappears. */
    fake_api_set_list(&T.api, "9", "[]");
    T.api.watch_code = 410;
    T.want_lists = 2;
    fake_api_end_watch(&T.api, false);
    CU_ASSERT(fake_api_run_until(T.loop, synced));
    CU_ASSERT_EQUAL(kube_informer_size(T.inf), 0);
    text = render();
    CU_ASSERT_PTR_NOT_NULL(
            strstr(text, "hostdevd_claims{kind=\"usb\",ready=\"true\",reason=\"Bound\"} 0\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(
            text, "hostdevd_claims{kind=\"usb\",ready=\"false\",reason=\"NodeNotFound\"} 0\n"));
    free(text);
    claimgauge_free(g);
    teardown();
}

static void test_reasons_are_bounded(void)
{
    struct buf items;
    buf_init(&items, 1 << 16);
    (void)buf_printf(&items, "[");
    for (int i = 0; i < CLAIMGAUGE_MAX_SERIES + 10; i++) {
        char name[24], reason[24];
        (void)snprintf(name, sizeof(name), "c%d", i);
        (void)snprintf(reason, sizeof(reason), "Reason%d", i);
        claim(&items, name, "False", reason);
    }
    (void)buf_printf(&items, "]");
    setup(items.data);
    buf_free(&items);
    struct claimgauge *g = claimgauge_new(T.m, T.inf, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    char *text = render();
    size_t series = 0;
    for (const char *p = text; (p = strstr(p, "\nhostdevd_claims{")); p++)
        series++;
    CU_ASSERT_EQUAL(series, CLAIMGAUGE_MAX_SERIES);
    /* the first 47 reasons have their series, the other 11 claims count as Other */
    CU_ASSERT_PTR_NOT_NULL(
            strstr(text, "hostdevd_claims{kind=\"pci\",ready=\"false\",reason=\"Other\"} 11\n"));
    free(text);
    claimgauge_free(g);
    teardown();
}

static CU_TestInfo tests[] = {
        {"claims by kind, Ready and reason; gone ones read 0", test_counts_by_ready_and_reason},
        {"past the bound, reasons count as Other", test_reasons_are_bounded},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo claimgauge_suites[] = {
        {"claimgauge", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
