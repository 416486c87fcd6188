/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_watch.c - the watch framer and decoder on arbitrary bytes.
 *
 * Input: one byte N (0-7), N bytes of piece sizes (each + 1), then the stream. The stream is fed
 * once whole and once in pieces of the given sizes, cycled, to a framer with a 4 KiB line cap;
 * the two runs must see the same events, the same result and the same pending state. The
 * callback reads every field of the event, decodes ERROR objects as Status and stops the feed
 * at an object whose resourceVersion is "stop".
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/status.h"
#include "kube/watch.h"

#define LINE_CAP   4096
#define MAX_STREAM (1 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct trace {
    uint64_t hash;
    size_t events;
};

static uint64_t mix(uint64_t h, const char *s)
{
    for (; s && *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211u;
    return (h ^ 0xff) * 1099511628211u;
}

static int on_event(const struct kube_watch_event *ev, void *userdata)
{
    struct trace *t = userdata;
    if (ev->type < KUBE_WATCH_ADDED || ev->type >= _KUBE_WATCH_TYPE_MAX || !ev->object ||
        !cJSON_IsObject(ev->object))
        abort();
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(ev->object, "metadata");
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "name"));
    if (ev->type <= KUBE_WATCH_DELETED && (!name || !*name))
        abort();
    if (ev->type == KUBE_WATCH_BOOKMARK && (!ev->resource_version || !*ev->resource_version))
        abort();
    t->hash = mix(t->hash, kube_watch_type_name(ev->type));
    t->hash = mix(t->hash, name);
    t->hash = mix(t->hash, ev->resource_version);
    if (ev->type == KUBE_WATCH_ERROR) {
        if (ev->resource_version)
            abort();
        struct kube_err e;
        int r = kube_status_from_json(ev->object, 200, &e);
        t->hash = mix(t->hash, e.reason);
        t->hash = mix(t->hash, e.message);
        t->hash += (uint64_t)(r + e.code * 7 + kube_err_to_errno(&e) * 13);
    }
    t->events++;
    if (ev->resource_version && strcmp(ev->resource_version, "stop") == 0)
        return -ECANCELED;
    return 0;
}

/* Feeds the stream in pieces of sizes[i % nsizes] + 1 bytes, or whole when nsizes is 0. */
static int feed_all(const uint8_t *data, size_t size, const uint8_t *sizes, size_t nsizes,
                    struct trace *t, bool *ret_pending)
{
    struct kube_watch_framer f;
    kube_watch_framer_init(&f, LINE_CAP);
    int r = 0;
    for (size_t off = 0, i = 0; r == 0 && off < size; i++) {
        size_t n = nsizes ? (size_t)sizes[i % nsizes] + 1 : size - off;
        if (n > size - off)
            n = size - off;
        r = kube_watch_feed(&f, (const char *)data + off, n, on_event, t);
        off += n;
    }
    *ret_pending = kube_watch_framer_pending(&f);
    kube_watch_framer_free(&f);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > MAX_STREAM)
        return 0;
    size_t nsizes = data[0] % 8;
    if (size < 1 + nsizes)
        return 0;
    const uint8_t *sizes = data + 1;
    data += 1 + nsizes;
    size -= 1 + nsizes;

    struct trace whole = {0}, pieces = {0};
    bool whole_pending, pieces_pending;
    int rw = feed_all(data, size, NULL, 0, &whole, &whole_pending);
    int rp = feed_all(data, size, sizes, nsizes, &pieces, &pieces_pending);
    if (rw != 0 && rw != -EMSGSIZE && rw != -EBADMSG && rw != -ECANCELED)
        abort();
    if (rw != rp || whole.hash != pieces.hash || whole.events != pieces.events ||
        whole_pending != pieces_pending)
        abort();
    if (rw < 0 && whole_pending)
        abort();
    return 0;
}
