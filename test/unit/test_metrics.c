/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_metrics.c - the metrics registry: families shared by name, series by label
 * values, histogram buckets cumulative, escaping, collectors, and output that a strict parser
 * of the text exposition format accepts line by line.
 */
#include <CUnit/CUnit.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/metrics.h"

/* A strict reader of one exposition line: "# HELP n text", "# TYPE n type", or
 * name{l="v",...} value. Returns true when the line is well-formed. */
static bool line_ok(const char *l)
{
    if (strncmp(l, "# HELP ", 7) == 0 || strncmp(l, "# TYPE ", 7) == 0)
        return strchr(l + 7, ' ') != NULL;
    const char *p = l;
    while (*p && *p != '{' && *p != ' ')
        p++;
    if (p == l)
        return false;
    if (*p == '{') {
        for (p++; *p != '}';) {
            while ((*p >= 'a' && *p <= 'z') || *p == '_')
                p++;
            if (*p++ != '=' || *p++ != '"')
                return false;
            while (*p && *p != '"')
                p += *p == '\\' ? 2 : 1;
            if (*p++ != '"')
                return false;
            if (*p == ',')
                p++;
            else if (*p != '}')
                return false;
        }
        p++;
    }
    if (*p++ != ' ')
        return false;
    char *end;
    (void)strtod(p, &end);
    return end != p && *end == '\0';
}

static char *render(struct metrics *m)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    CU_ASSERT_EQUAL(metrics_render(m, &b), 0);
    return buf_take(&b);
}

static void all_lines_ok(const char *text)
{
    char *copy = strdup(text);
    for (char *l = copy, *nl; l && *l; l = nl ? nl + 1 : NULL) {
        nl = strchr(l, '\n');
        if (nl)
            *nl = '\0';
        if (!line_ok(l)) {
            CU_FAIL("malformed exposition line");
            fprintf(stderr, "\nbad line: %s\n", l);
        }
    }
    free(copy);
}

static void test_counters_and_labels(void)
{
    struct metrics *m = metrics_new();
    static const char *const cr[] = {"controller", "result", NULL};
    struct metrics_family *f = metrics_family(m, METRICS_COUNTER, "x_total", "Xs.", cr, NULL, 0);
    CU_ASSERT_PTR_EQUAL(metrics_family(m, METRICS_COUNTER, "x_total", "again", cr, NULL, 0), f);
    CU_ASSERT_PTR_NULL(metrics_family(m, METRICS_GAUGE, "x_total", "clash", cr, NULL, 0));
    CU_ASSERT_PTR_NULL(metrics_family(m, METRICS_GAUGE, "bad-name", "", NULL, NULL, 0));
    struct metrics_series *a = metrics_series(f, "pcidevice", "success");
    CU_ASSERT_PTR_EQUAL(metrics_series(f, "pcidevice", "success"), a);
    metrics_inc(a);
    metrics_add(a, 2);
    metrics_inc(metrics_series(f, "pci\"claim\\\n", "error"));
    metrics_inc(NULL); /* a lost series is no crash */
    CU_ASSERT_DOUBLE_EQUAL(metrics_value(a), 3, 1e-9);
    char *out = render(m);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "# TYPE x_total counter\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "x_total{controller=\"pcidevice\",result=\"success\"} 3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "controller=\"pci\\\"claim\\\\\\n\""));
    all_lines_ok(out);
    free(out);
    metrics_free(m);
}

static void bump(void *userdata)
{
    metrics_set(userdata, 42);
}

static void test_histogram_and_collector(void)
{
    struct metrics *m = metrics_new();
    static const double b[] = {0.1, 1};
    struct metrics_series *h =
            metrics_series(metrics_family(m, METRICS_HISTOGRAM, "t_seconds", "T.", NULL, b, 2));
    metrics_observe(h, 0.05);
    metrics_observe(h, 0.5);
    metrics_observe(h, 5);
    struct metrics_series *g =
            metrics_series(metrics_family(m, METRICS_GAUGE, "depth", "D.", NULL, NULL, 0));
    CU_ASSERT_EQUAL(metrics_add_collector(m, bump, g), 0);
    char *out = render(m);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "t_seconds_bucket{le=\"0.1\"} 1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "t_seconds_bucket{le=\"1\"} 2\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "t_seconds_bucket{le=\"+Inf\"} 3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "t_seconds_sum 5.55"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "t_seconds_count 3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "depth 42\n"));
    all_lines_ok(out);
    free(out);
    metrics_remove_collector(m, bump, g);
    metrics_set(g, 1);
    out = render(m);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "depth 1\n"));
    free(out);
    metrics_free(m);
}

static CU_TestInfo tests[] = {
        {"counters, labels, escaping, clashes", test_counters_and_labels},
        {"histograms and collectors", test_histogram_and_collector},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo metrics_suites[] = {
        {"metrics", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
