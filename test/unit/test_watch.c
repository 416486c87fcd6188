/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_watch.c - the watch framer and decoder: recorded streams from
 * test/fixtures/watch fed in every slicing, CRLF and empty lines, the line cap, malformed lines,
 * BOOKMARK and ERROR events, and a callback that stops the feed.
 */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "kube/status.h"
#include "kube/watch.h"

#ifndef FIXTURES
#define FIXTURES "test/fixtures"
#endif

#define MAX_EVENTS 16

/* What a callback saw, one line per event: type, name, resourceVersion and a hash of the object
 * (for ERROR: the decoded Status instead). */
struct rec {
    char ev[MAX_EVENTS][160];
    int n;
    int stop_at; /* return -ECANCELED from this event on (1-based); 0 = never */
    int ret;     /* returned otherwise */
};

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static void describe_error(const struct kube_watch_event *ev, char *out, size_t size)
{
    struct kube_err e;
    int r = kube_status_from_json(ev->object, 200, &e);
    snprintf(out, size, "ERROR %d %d %s gone=%d", r, e.code, e.reason, kube_err_is_gone(&e));
}

static void describe(const struct kube_watch_event *ev, char *out, size_t size)
{
    if (ev->type == KUBE_WATCH_ERROR) {
        describe_error(ev, out, size);
        return;
    }
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(ev->object, "metadata");
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "name"));
    char *printed = cJSON_PrintUnformatted(ev->object);
    snprintf(out, size, "%s %s %s %08x", kube_watch_type_name(ev->type), name ? name : "-",
             ev->resource_version ? ev->resource_version : "-", printed ? fnv1a(printed) : 0);
    free(printed);
}

static int record(const struct kube_watch_event *ev, void *userdata)
{
    struct rec *r = userdata;
    if (r->n < MAX_EVENTS)
        describe(ev, r->ev[r->n], sizeof(r->ev[0]));
    r->n++;
    if (r->stop_at > 0 && r->n >= r->stop_at)
        return -ECANCELED;
    return r->ret;
}

static bool same_events(const struct rec *a, const struct rec *b)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n && i < MAX_EVENTS; i++)
        if (strcmp(a->ev[i], b->ev[i]) != 0)
            return false;
    return true;
}

/* Whether event `i` starts with `want` (the hash is left out of the expectations). */
static bool event_is(const struct rec *r, int i, const char *want)
{
    return i < r->n && i < MAX_EVENTS && strncmp(r->ev[i], want, strlen(want)) == 0;
}

static char *load(const char *name, size_t *ret_len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/watch/%s", FIXTURES, name);
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    struct buf b;
    buf_init(&b, 1 << 20);
    char chunk[4096];
    size_t n;
    int r = 0;
    while (r == 0 && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        r = buf_add(&b, chunk, n);
    fclose(f);
    *ret_len = b.len;
    if (r < 0) {
        buf_free(&b);
        return NULL;
    }
    return buf_take(&b);
}

/* Feeds `data` in pieces of `piece` bytes (0: all at once) to a fresh framer. */
static int feed_pieces(const char *data, size_t len, size_t piece, size_t cap, struct rec *r,
                       bool *ret_pending)
{
    struct kube_watch_framer f;
    kube_watch_framer_init(&f, cap);
    int rc = 0;
    for (size_t off = 0; rc == 0 && off < len;) {
        size_t n = piece == 0 || len - off < piece ? len - off : piece;
        rc = kube_watch_feed(&f, data + off, n, record, r);
        off += n;
    }
    if (ret_pending)
        *ret_pending = kube_watch_framer_pending(&f);
    kube_watch_framer_free(&f);
    return rc;
}

static const char *const pcidevices_events[] = {
        "ADDED titan-0000001f6 1201 ",    "ADDED titan-000001000 1202 ",
        "ADDED titan-000001001 1203 ",    "BOOKMARK - 1203 ",
        "MODIFIED titan-000001000 1250 ", "BOOKMARK - 1300 ",
        "DELETED titan-000001001 1310 ",  "MODIFIED titan-0000001f6 1322 ",
};

static void test_fixture_whole(void)
{
    size_t len;
    _cleanup_free_ char *data = load("pcidevices.watch", &len);
    CU_ASSERT_PTR_NOT_NULL(data);
    if (!data)
        return;
    struct rec r = {0};
    bool pending = true;
    CU_ASSERT_EQUAL(feed_pieces(data, len, 0, KUBE_WATCH_LINE_MAX, &r, &pending), 0);
    CU_ASSERT_FALSE(pending);
    CU_ASSERT_EQUAL(r.n, (int)ELEMENTSOF(pcidevices_events));
    for (size_t i = 0; i < ELEMENTSOF(pcidevices_events); i++)
        CU_ASSERT_TRUE(event_is(&r, (int)i, pcidevices_events[i]));
}

static void test_split_sizes(void)
{
    size_t len;
    _cleanup_free_ char *data = load("pcidevices.watch", &len);
    CU_ASSERT_PTR_NOT_NULL(data);
    if (!data)
        return;
    struct rec whole = {0};
    CU_ASSERT_EQUAL(feed_pieces(data, len, 0, KUBE_WATCH_LINE_MAX, &whole, NULL), 0);
    static const size_t pieces[] = {1, 2, 3, 7, 4096};
    for (size_t i = 0; i < ELEMENTSOF(pieces); i++) {
        struct rec r = {0};
        bool pending = true;
        CU_ASSERT_EQUAL(feed_pieces(data, len, pieces[i], KUBE_WATCH_LINE_MAX, &r, &pending), 0);
        CU_ASSERT_FALSE(pending);
        CU_ASSERT_TRUE(same_events(&whole, &r));
    }
}

/* Two feeds, split at every byte position, deliver the same events as one. */
static void test_split_every_position(void)
{
    size_t len;
    _cleanup_free_ char *data = load("pcidevices.watch", &len);
    CU_ASSERT_PTR_NOT_NULL(data);
    if (!data)
        return;
    struct rec whole = {0};
    CU_ASSERT_EQUAL(feed_pieces(data, len, 0, KUBE_WATCH_LINE_MAX, &whole, NULL), 0);
    size_t bad = 0;
    for (size_t split = 0; split <= len; split++) {
        struct kube_watch_framer f;
        kube_watch_framer_init(&f, KUBE_WATCH_LINE_MAX);
        struct rec r = {0};
        int r1 = kube_watch_feed(&f, data, split, record, &r);
        int r2 = kube_watch_feed(&f, data + split, len - split, record, &r);
        if (r1 != 0 || r2 != 0 || !same_events(&whole, &r) || kube_watch_framer_pending(&f))
            bad++;
        kube_watch_framer_free(&f);
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* The same stream with "\r\n" line ends. */
static void test_crlf(void)
{
    size_t len;
    _cleanup_free_ char *data = load("pcidevices.watch", &len);
    CU_ASSERT_PTR_NOT_NULL(data);
    if (!data)
        return;
    struct buf crlf;
    buf_init(&crlf, 1 << 20);
    int added = 0;
    for (size_t i = 0; added == 0 && i < len; i++)
        added = data[i] == '\n' ? buf_add(&crlf, "\r\n", 2) : buf_add(&crlf, &data[i], 1);
    CU_ASSERT_EQUAL(added, 0);
    struct rec lf = {0};
    CU_ASSERT_EQUAL(feed_pieces(data, len, 0, KUBE_WATCH_LINE_MAX, &lf, NULL), 0);
    static const size_t pieces[] = {0, 1, 2, 7};
    for (size_t i = 0; i < ELEMENTSOF(pieces); i++) {
        struct rec r = {0};
        bool pending = true;
        CU_ASSERT_EQUAL(
                feed_pieces(crlf.data, crlf.len, pieces[i], KUBE_WATCH_LINE_MAX, &r, &pending), 0);
        CU_ASSERT_FALSE(pending);
        CU_ASSERT_TRUE(same_events(&lf, &r));
    }
    buf_free(&crlf);
}

#define EVENT_A                                                                                    \
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}"
#define EVENT_B                                                                                    \
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"b\",\"resourceVersion\":\"2\"}}}"

static void test_empty_lines(void)
{
    static const char stream[] = "\n\r\n\n" EVENT_A "\n\n\r\n" EVENT_B "\r\n\r\n\n";
    static const size_t pieces[] = {0, 1, 2, 3};
    for (size_t i = 0; i < ELEMENTSOF(pieces); i++) {
        struct rec r = {0};
        bool pending = true;
        CU_ASSERT_EQUAL(feed_pieces(stream, strlen(stream), pieces[i], 4096, &r, &pending), 0);
        CU_ASSERT_FALSE(pending);
        CU_ASSERT_EQUAL(r.n, 2);
        CU_ASSERT_TRUE(event_is(&r, 0, "ADDED a 1 "));
        CU_ASSERT_TRUE(event_is(&r, 1, "MODIFIED b 2 "));
    }
}

static void test_oversized_line_and_recovery(void)
{
    struct kube_watch_framer f;
    kube_watch_framer_init(&f, 128);
    struct rec r = {0};
    char big[300];
    memset(big, ' ', sizeof(big));
    big[sizeof(big) - 1] = '\n';
    /* A complete line over the cap, after a good one: the good one is delivered. */
    CU_ASSERT_EQUAL(kube_watch_feed(&f, EVENT_A "\n", strlen(EVENT_A) + 1, record, &r), 0);
    CU_ASSERT_EQUAL(kube_watch_feed(&f, big, sizeof(big), record, &r), -EMSGSIZE);
    CU_ASSERT_FALSE(kube_watch_framer_pending(&f));
    CU_ASSERT_EQUAL(r.n, 1);
    /* A partial line over the cap fails before its end arrives, and the framer is reset. */
    CU_ASSERT_EQUAL(kube_watch_feed(&f, big, 100, record, &r), 0);
    CU_ASSERT_TRUE(kube_watch_framer_pending(&f));
    CU_ASSERT_EQUAL(kube_watch_feed(&f, big, 100, record, &r), -EMSGSIZE);
    CU_ASSERT_FALSE(kube_watch_framer_pending(&f));
    CU_ASSERT_PTR_NULL(f.line.data);
    /* The next stream works. */
    CU_ASSERT_EQUAL(kube_watch_feed(&f, EVENT_B "\n", strlen(EVENT_B) + 1, record, &r), 0);
    CU_ASSERT_EQUAL(r.n, 2);
    CU_ASSERT_TRUE(event_is(&r, 1, "MODIFIED b 2 "));
    kube_watch_framer_free(&f);
}

/* A line of exactly the cap passes however it is sliced, with "\n" or "\r\n"; one byte more
 * fails however it is sliced. */
static void test_cap_boundary(void)
{
    size_t cap = strlen(EVENT_A);
    static const char *const ok[] = {EVENT_A "\n", EVENT_A "\r\n", "\r\n" EVENT_A "\r\n\n"};
    static const char *const too_long[] = {EVENT_A " \n",   EVENT_A " \r\n", EVENT_A "\r\r\n",
                                           EVENT_A "\rx\n", EVENT_A "  ",    EVENT_A "x"};
    static const size_t pieces[] = {0, 1, 2, 5};
    for (size_t p = 0; p < ELEMENTSOF(pieces); p++) {
        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
            struct rec r = {0};
            CU_ASSERT_EQUAL(feed_pieces(ok[i], strlen(ok[i]), pieces[p], cap, &r, NULL), 0);
            CU_ASSERT_EQUAL(r.n, 1);
        }
        for (size_t i = 0; i < ELEMENTSOF(too_long); i++) {
            struct rec r = {0};
            bool pending = true;
            CU_ASSERT_EQUAL(
                    feed_pieces(too_long[i], strlen(too_long[i]), pieces[p], cap, &r, &pending),
                    -EMSGSIZE);
            CU_ASSERT_FALSE(pending);
            CU_ASSERT_EQUAL(r.n, 0);
        }
    }
    /* The '\r' may wait one byte past the cap for its '\n'. */
    struct kube_watch_framer f;
    kube_watch_framer_init(&f, cap);
    struct rec r = {0};
    CU_ASSERT_EQUAL(kube_watch_feed(&f, EVENT_A "\r", cap + 1, record, &r), 0);
    CU_ASSERT_TRUE(kube_watch_framer_pending(&f));
    CU_ASSERT_EQUAL(kube_watch_feed(&f, "\n", 1, record, &r), 0);
    CU_ASSERT_EQUAL(r.n, 1);
    CU_ASSERT_FALSE(kube_watch_framer_pending(&f));
    kube_watch_framer_free(&f);
}

static void test_events_across_reads(void)
{
    static const char stream[] = EVENT_A "\n" EVENT_B "\n";
    size_t a = strlen(EVENT_A);
    struct kube_watch_framer f;
    kube_watch_framer_init(&f, KUBE_WATCH_LINE_MAX);
    struct rec r = {0};
    /* The first event in three reads, the third ending inside the second event. */
    CU_ASSERT_EQUAL(kube_watch_feed(&f, stream, 10, record, &r), 0);
    CU_ASSERT_EQUAL(r.n, 0);
    CU_ASSERT_EQUAL(kube_watch_feed(&f, stream + 10, a - 10, record, &r), 0);
    CU_ASSERT_EQUAL(r.n, 0);
    CU_ASSERT_TRUE(kube_watch_framer_pending(&f));
    CU_ASSERT_EQUAL(kube_watch_feed(&f, stream + a, 20, record, &r), 0);
    CU_ASSERT_EQUAL(r.n, 1);
    CU_ASSERT_TRUE(kube_watch_framer_pending(&f));
    CU_ASSERT_EQUAL(kube_watch_feed(&f, stream + a + 20, strlen(stream) - a - 20, record, &r), 0);
    CU_ASSERT_EQUAL(r.n, 2);
    CU_ASSERT_FALSE(kube_watch_framer_pending(&f));
    CU_ASSERT_TRUE(event_is(&r, 0, "ADDED a 1 "));
    CU_ASSERT_TRUE(event_is(&r, 1, "MODIFIED b 2 "));
    /* An empty feed changes nothing. */
    CU_ASSERT_EQUAL(kube_watch_feed(&f, NULL, 0, record, &r), 0);
    CU_ASSERT_EQUAL(r.n, 2);
    kube_watch_framer_free(&f);
}

static void test_truncated_final_line(void)
{
    size_t len;
    _cleanup_free_ char *data = load("pcidevices.watch", &len);
    CU_ASSERT_PTR_NOT_NULL(data);
    if (!data)
        return;
    struct kube_watch_framer f;
    kube_watch_framer_init(&f, KUBE_WATCH_LINE_MAX);
    struct rec r = {0};
    CU_ASSERT_FALSE(kube_watch_framer_pending(&f));
    CU_ASSERT_EQUAL(kube_watch_feed(&f, data, len - 10, record, &r), 0);
    CU_ASSERT_EQUAL(r.n, 7);
    CU_ASSERT_TRUE(kube_watch_framer_pending(&f));
    CU_ASSERT_EQUAL(kube_watch_feed(&f, data + len - 10, 10, record, &r), 0);
    CU_ASSERT_EQUAL(r.n, 8);
    CU_ASSERT_FALSE(kube_watch_framer_pending(&f));
    kube_watch_framer_free(&f);
}

static const char *const malformed[] = {
        "not json",
        "[1,2,3]",
        "\"ADDED\"",
        "null",
        "   ",
        "{\"type\":\"SYNC\",\"object\":{\"metadata\":{\"name\":\"a\"}}}",
        "{\"type\":\"added\",\"object\":{\"metadata\":{\"name\":\"a\"}}}",
        "{\"type\":\"Added\",\"object\":{\"metadata\":{\"name\":\"a\"}}}",
        "{\"type\":\"ADDED \",\"object\":{\"metadata\":{\"name\":\"a\"}}}",
        "{\"type\":5,\"object\":{\"metadata\":{\"name\":\"a\"}}}",
        "{\"object\":{\"metadata\":{\"name\":\"a\"}}}",
        "{\"Type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}",
        "{\"type\":\"ADDED\"}",
        "{\"type\":\"ERROR\"}",
        "{\"type\":\"ADDED\",\"Object\":{\"metadata\":{\"name\":\"a\"}}}",
        "{\"type\":\"ADDED\",\"object\":\"a\"}",
        "{\"type\":\"ADDED\",\"object\":null}",
        "{\"type\":\"ADDED\",\"object\":[]}",
        "{\"type\":\"ADDED\",\"object\":{}}",
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":\"a\"}}",
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{}}}",
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"Name\":\"a\"}}}",
        "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"\"}}}",
        "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":7}}}",
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{}}}",
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":12}}}",
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"\"}}}",
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}} x",
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}{}",
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}},",
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}",
};

static void test_malformed_lines_decode(void)
{
    for (size_t i = 0; i < ELEMENTSOF(malformed); i++) {
        struct kube_watch_event ev = {.type = _KUBE_WATCH_TYPE_MAX};
        cJSON *root = NULL;
        int r = kube_watch_decode(malformed[i], strlen(malformed[i]), &ev, &root);
        if (r != -EBADMSG)
            fprintf(stderr, "\n  accepted: %s\n", malformed[i]);
        CU_ASSERT_EQUAL(r, -EBADMSG);
        CU_ASSERT_PTR_NULL(root);
        CU_ASSERT_EQUAL(ev.type, _KUBE_WATCH_TYPE_MAX);
        cJSON_Delete(root);
    }
}

/* In a stream, a bad line fails the feed after the events before it, drops the rest, and the
 * framer takes the next stream. */
static void test_malformed_lines_feed(void)
{
    for (size_t i = 0; i < ELEMENTSOF(malformed); i++) {
        struct buf s;
        buf_init(&s, 4096);
        CU_ASSERT_EQUAL(buf_printf(&s, "%s\n%s\n%s\n", EVENT_A, malformed[i], EVENT_B), 0);
        struct kube_watch_framer f;
        kube_watch_framer_init(&f, 4096);
        struct rec r = {0};
        CU_ASSERT_EQUAL(kube_watch_feed(&f, s.data, s.len, record, &r), -EBADMSG);
        CU_ASSERT_EQUAL(r.n, 1);
        CU_ASSERT_FALSE(kube_watch_framer_pending(&f));
        CU_ASSERT_EQUAL(kube_watch_feed(&f, EVENT_B "\n", strlen(EVENT_B) + 1, record, &r), 0);
        CU_ASSERT_EQUAL(r.n, 2);
        kube_watch_framer_free(&f);
        buf_free(&s);
    }
}

static void test_trailing_whitespace(void)
{
    static const char *const lines[] = {EVENT_A " ", EVENT_A "\t \r", " \t" EVENT_A};
    for (size_t i = 0; i < ELEMENTSOF(lines); i++) {
        struct kube_watch_event ev;
        cJSON *root = NULL;
        CU_ASSERT_EQUAL(kube_watch_decode(lines[i], strlen(lines[i]), &ev, &root), 0);
        CU_ASSERT_PTR_NOT_NULL(root);
        CU_ASSERT_EQUAL(ev.type, KUBE_WATCH_ADDED);
        cJSON_Delete(root);
    }
    /* The length is honoured: the event ends where the line does, not at a NUL. */
    struct kube_watch_event ev;
    cJSON *root = NULL;
    CU_ASSERT_EQUAL(kube_watch_decode(EVENT_A "garbage", strlen(EVENT_A), &ev, &root), 0);
    cJSON_Delete(root);
}

static void test_decode_fields(void)
{
    static const char line[] = "{\"type\":\"DELETED\",\"object\":{\"kind\":\"PCIDevice\","
                               "\"metadata\":{\"name\":\"titan-0000001f6\",\"resourceVersion\":"
                               "\"1310\"}}}";
    struct kube_watch_event ev;
    cJSON *root = NULL;
    CU_ASSERT_EQUAL(kube_watch_decode(line, strlen(line), &ev, &root), 0);
    if (!root)
        return;
    CU_ASSERT_EQUAL(ev.type, KUBE_WATCH_DELETED);
    CU_ASSERT_PTR_EQUAL(ev.object, cJSON_GetObjectItemCaseSensitive(root, "object"));
    CU_ASSERT_STRING_EQUAL(ev.resource_version, "1310");
    CU_ASSERT_STRING_EQUAL(
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ev.object, "kind")), "PCIDevice");
    cJSON_Delete(root);
    /* A resourceVersion is optional outside BOOKMARK. */
    static const char no_rv[] = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}";
    CU_ASSERT_EQUAL(kube_watch_decode(no_rv, strlen(no_rv), &ev, &root), 0);
    CU_ASSERT_PTR_NULL(ev.resource_version);
    cJSON_Delete(root);
}

static void test_bookmark_only_resource_version(void)
{
    static const char line[] = "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"PCIDevice\","
                               "\"apiVersion\":\"devices.harvesterhci.io/v1beta1\","
                               "\"metadata\":{\"resourceVersion\":\"1300\"}}}";
    struct kube_watch_event ev;
    cJSON *root = NULL;
    CU_ASSERT_EQUAL(kube_watch_decode(line, strlen(line), &ev, &root), 0);
    if (!root)
        return;
    CU_ASSERT_EQUAL(ev.type, KUBE_WATCH_BOOKMARK);
    CU_ASSERT_STRING_EQUAL(ev.resource_version, "1300");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(ev.object, "metadata");
    CU_ASSERT_PTR_NULL(cJSON_GetObjectItemCaseSensitive(meta, "name"));
    cJSON_Delete(root);
}

static void test_error_410(void)
{
    size_t len;
    _cleanup_free_ char *data = load("expired.watch", &len);
    CU_ASSERT_PTR_NOT_NULL(data);
    if (!data)
        return;
    struct rec r = {0};
    CU_ASSERT_EQUAL(feed_pieces(data, len, 3, KUBE_WATCH_LINE_MAX, &r, NULL), 0);
    CU_ASSERT_EQUAL(r.n, 2);
    CU_ASSERT_TRUE(event_is(&r, 0, "ADDED titan-0000001f6 1201 "));
    CU_ASSERT_STRING_EQUAL(r.ev[1], "ERROR 0 410 Expired gone=1");
    /* The etcd watcher's variant, and an ERROR with no resourceVersion to report. */
    static const char gone[] =
            "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
            "\"metadata\":{\"resourceVersion\":\"9\"},\"status\":\"Failure\",\"message\":\"The "
            "resourceVersion for the provided watch is too old.\",\"reason\":\"Gone\","
            "\"code\":410}}\n";
    struct rec g = {0};
    CU_ASSERT_EQUAL(feed_pieces(gone, strlen(gone), 0, 4096, &g, NULL), 0);
    CU_ASSERT_STRING_EQUAL(g.ev[0], "ERROR 0 410 Gone gone=1");
    struct kube_watch_event ev;
    cJSON *root = NULL;
    CU_ASSERT_EQUAL(kube_watch_decode(gone, strlen(gone) - 1, &ev, &root), 0);
    CU_ASSERT_EQUAL(ev.type, KUBE_WATCH_ERROR);
    CU_ASSERT_PTR_NULL(ev.resource_version);
    cJSON_Delete(root);
}

static void test_callback_error_stops(void)
{
    size_t len;
    _cleanup_free_ char *data = load("pcidevices.watch", &len);
    CU_ASSERT_PTR_NOT_NULL(data);
    if (!data)
        return;
    /* Whole, and in pieces where the stop comes from a line completed from the buffer. */
    static const size_t pieces[] = {0, 7};
    for (size_t i = 0; i < ELEMENTSOF(pieces); i++) {
        struct rec r = {.stop_at = 3};
        bool pending = true;
        CU_ASSERT_EQUAL(feed_pieces(data, len, pieces[i], KUBE_WATCH_LINE_MAX, &r, &pending),
                        -ECANCELED);
        CU_ASSERT_EQUAL(r.n, 3);
        CU_ASSERT_FALSE(pending);
    }
    /* A positive return goes on. */
    struct rec r = {.ret = 1};
    CU_ASSERT_EQUAL(feed_pieces(data, len, 0, KUBE_WATCH_LINE_MAX, &r, NULL), 0);
    CU_ASSERT_EQUAL(r.n, 8);
}

/* A failed feed says what was wrong with the line (the agent logs it); the callback's own
 * errors and successful feeds leave it NULL. */
static void test_error_says_why(void)
{
    static const struct {
        const char *line, *why;
    } cases[] = {
            {"<html>", "a line that is not JSON"},
            {"{\"type\":\"RENAMED\",\"object\":{}}", "an event whose type is missing or unknown"},
            {"{\"type\":5,\"object\":{}}", "an event whose type is missing or unknown"},
            {"{\"type\":\"ADDED\",\"object\":\"a\"}",
             "an event whose object is missing or not an object"},
            {"{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{}}}",
             "a BOOKMARK without metadata.resourceVersion"},
            {"{\"type\":\"ADDED\",\"object\":{\"metadata\":{}}}",
             "an object without metadata.name"},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        struct kube_watch_framer f;
        kube_watch_framer_init(&f, 256);
        struct rec r = {0};
        CU_ASSERT_EQUAL(kube_watch_feed(&f, EVENT_A "\n", strlen(EVENT_A) + 1, record, &r), 0);
        CU_ASSERT_PTR_NULL(f.error);
        CU_ASSERT_EQUAL(kube_watch_feed(&f, cases[i].line, strlen(cases[i].line), record, &r), 0);
        CU_ASSERT_EQUAL(kube_watch_feed(&f, "\n", 1, record, &r), -EBADMSG);
        CU_ASSERT_PTR_NOT_NULL(f.error);
        if (f.error)
            CU_ASSERT_STRING_EQUAL(f.error, cases[i].why);
        kube_watch_framer_free(&f);
    }
    struct kube_watch_framer f;
    kube_watch_framer_init(&f, 256);
    char big[300];
    memset(big, 'x', sizeof(big));
    CU_ASSERT_EQUAL(kube_watch_feed(&f, big, sizeof(big), record, &(struct rec){0}), -EMSGSIZE);
    CU_ASSERT_PTR_NOT_NULL(f.error);
    if (f.error)
        CU_ASSERT_STRING_EQUAL(f.error, "an event line over the size cap");
    kube_watch_framer_free(&f);
}

static void test_type_names(void)
{
    CU_ASSERT_STRING_EQUAL(kube_watch_type_name(KUBE_WATCH_ADDED), "ADDED");
    CU_ASSERT_STRING_EQUAL(kube_watch_type_name(KUBE_WATCH_MODIFIED), "MODIFIED");
    CU_ASSERT_STRING_EQUAL(kube_watch_type_name(KUBE_WATCH_DELETED), "DELETED");
    CU_ASSERT_STRING_EQUAL(kube_watch_type_name(KUBE_WATCH_BOOKMARK), "BOOKMARK");
    CU_ASSERT_STRING_EQUAL(kube_watch_type_name(KUBE_WATCH_ERROR), "ERROR");
    CU_ASSERT_STRING_EQUAL(kube_watch_type_name(_KUBE_WATCH_TYPE_MAX), "UNKNOWN");
    CU_ASSERT_STRING_EQUAL(kube_watch_type_name((enum kube_watch_type) - 1), "UNKNOWN");
}

static CU_TestInfo tests[] = {
        {"fixture whole", test_fixture_whole},
        {"split sizes", test_split_sizes},
        {"split at every position", test_split_every_position},
        {"crlf", test_crlf},
        {"empty lines", test_empty_lines},
        {"oversized line and recovery", test_oversized_line_and_recovery},
        {"cap boundary", test_cap_boundary},
        {"events across reads", test_events_across_reads},
        {"truncated final line", test_truncated_final_line},
        {"malformed lines decode", test_malformed_lines_decode},
        {"malformed lines feed", test_malformed_lines_feed},
        {"trailing whitespace", test_trailing_whitespace},
        {"decode fields", test_decode_fields},
        {"bookmark only resourceVersion", test_bookmark_only_resource_version},
        {"error 410", test_error_410},
        {"callback error stops", test_callback_error_stops},
        {"error says why", test_error_says_why},
        {"type names", test_type_names},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo watch_suites[] = {
        {"watch", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
