/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/watch.h - framing and decoding of Kubernetes watch streams (`?watch=1`).
 *
 * Turns the bytes of a watch response, delivered in arbitrary slices, into events
 * {type, object}. One JSON object per line; '\r' before '\n' is stripped; empty lines are
 * skipped. A line longer than the cap fails the stream (-EMSGSIZE), as does a line that is
 * not a watch event (-EBADMSG): the caller drops the connection and watches again from the
 * last resourceVersion. Pure: no I/O, no event loop, no globals.
 * Fuzzed by test/fuzz/fuzz_watch.c.
 * Ownership: events handed to the callback are borrowed for the call only.
 *
 * Decisions:
 * - The cap counts a line's bytes without its "\n" or "\r\n". A partial line counts too: it
 *   fails as soon as no ending could bring it under the cap, so the events and the error are the
 *   same however the stream is sliced.
 * - Only empty lines ("" or "\r") are skipped; a line of blanks is not a watch event (-EBADMSG).
 * - Keys are matched case-sensitively; with duplicate keys the first one counts (cJSON).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"

struct cJSON;

/* The default cap of one event line (etcd's default request limit is 1.5 MiB). */
#define KUBE_WATCH_LINE_MAX ((size_t)16 * 1024 * 1024)

enum kube_watch_type {
    KUBE_WATCH_ADDED,
    KUBE_WATCH_MODIFIED,
    KUBE_WATCH_DELETED,
    KUBE_WATCH_BOOKMARK,
    KUBE_WATCH_ERROR,
    _KUBE_WATCH_TYPE_MAX,
};

struct kube_watch_event {
    enum kube_watch_type type;
    /* The object: a full object for ADDED/MODIFIED/DELETED (it has metadata.name), only
     * kind and metadata.resourceVersion for BOOKMARK, a metav1.Status for ERROR. */
    const struct cJSON *object;
    /* metadata.resourceVersion of the object; NULL for ERROR, and when it is missing, not a
     * string or empty (which only BOOKMARK rejects). */
    const char *resource_version;
};

/*
 * Called for each event. Return 0 to go on; a negative value stops kube_watch_feed(), which
 * returns it (the rest of the data is dropped). A positive value counts as 0. The callback must
 * not feed or free the framer that calls it.
 */
typedef int (*kube_watch_cb)(const struct kube_watch_event *ev, void *userdata);

struct kube_watch_framer {
    struct buf line;   /* the partial line carried between feeds */
    const char *error; /* after a failed feed: what was wrong ("a line that is not JSON", ...),
                          a static string; NULL otherwise (the callback's own errors too) */
};

/* Initializes a framer whose lines may be at most `max_line` bytes (its buffer may hold one byte
 * more: a '\r' whose '\n' has not arrived). Allocates nothing. */
void kube_watch_framer_init(struct kube_watch_framer *f, size_t max_line);

/* Frees the buffered partial line. */
void kube_watch_framer_free(struct kube_watch_framer *f);

/*
 * Feeds `len` bytes of the stream. Calls `cb` once per complete event line, in order.
 * Returns 0; -EMSGSIZE when a line exceeds the cap; -EBADMSG when a line is not a valid
 * event; -ENOMEM; or the callback's negative return. After an error the framer is reset (its
 * buffer freed) and can take a new stream.
 */
int kube_watch_feed(struct kube_watch_framer *f, const char *data, size_t len, kube_watch_cb cb,
                    void *userdata);

/* Whether a partial line is buffered (the stream ended mid-event if it ends now). */
bool kube_watch_framer_pending(const struct kube_watch_framer *f);

/*
 * Decodes one line (without its newline). On success writes the parsed root to `ret_root`
 * (the caller frees it with cJSON_Delete) and the event, which points into it, to `ret`.
 * Returns 0 or -EBADMSG (not JSON, not an object, unknown type, missing or non-object
 * "object", an ADDED/MODIFIED/DELETED object without metadata.name, a BOOKMARK without
 * metadata.resourceVersion) or -ENOMEM.
 * The line is read by json_parse_strict() (base/json.h): one value, only whitespace around it.
 * A name or resourceVersion must be a non-empty string. An ERROR object is not checked here:
 * kube_status_from_json() does that. cJSON does not tell a failed allocation from bad input,
 * so that is -EBADMSG too.
 */
int kube_watch_decode(const char *line, size_t len, struct kube_watch_event *ret,
                      struct cJSON **ret_root);

/* "ADDED", "MODIFIED", ...; "UNKNOWN" for anything else. */
const char *kube_watch_type_name(enum kube_watch_type t);
