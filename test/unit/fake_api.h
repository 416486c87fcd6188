/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/fake_api.h - a fake API server of one cluster-scoped kind on loopback, for suites
 * that run an informer (kube/informer.c) on the same libev loop: plain HTTP/1.1, a LIST answered
 * from a list the test sets (or with an error Status), a WATCH answered 200 and then held open
 * as a chunked stream into which the test writes events when it chooses (a watch that lags is
 * one the test writes nothing to). The test drives everything; nothing happens by time.
 */
#pragma once

#include <ev.h>
#include <stdbool.h>

#include "kube/client.h"

/* The kind served: /apis/test.hostdevd.io/v1/things; and a second one, others, LISTed from
 * others_items (at list_rv) and watched on a stream of its own (no event is written there). */
extern const struct kube_resource fake_api_things;
extern const struct kube_resource fake_api_others;

struct fake_conn;

struct fake_api {
    struct ev_loop *loop;
    int lfd, port;
    ev_io accept_w;
    struct fake_conn *conns;
    struct fake_conn *watch; /* the open WATCH stream, or NULL */
    /* the LIST's answer: items (a JSON array's text) at resourceVersion list_rv, or list_code
     * (410, 500) with a Status body while non-zero */
    char list_items[16384];
    char list_rv[32];
    int list_code;
    /* what came in */
    int lists, watches;
    char watch_rv[32];                       /* the resourceVersion query of the last WATCH */
    char list_labels[256], list_fields[256]; /* the selectors of the last LIST (URL-encoded) */
    bool watch_bookmarks;                    /* the last WATCH asked allowWatchBookmarks=true */
    int watch_code; /* answer the next WATCH with this Status code instead (0: stream) */
    /* a GET of one object (/things/<name>): answered get_body with get_code (0: 404 with a
     * Status), or held unanswered while hold_gets until fake_api_answer_get() */
    int gets;
    char get_name[64]; /* the name of the last GET */
    int get_code;
    char get_body[1024];
    bool hold_gets;
    struct fake_conn *held;
    char others_items[4096]; /* the LIST of others ("[]" at start) */
    int others_lists;
    struct fake_conn *others_watch;
    char order[256]; /* the kinds LISTed, in order: "things others things " */
};

/* Listens on 127.0.0.1 (a free port) on `loop`. */
void fake_api_start(struct fake_api *f, struct ev_loop *loop);
void fake_api_stop(struct fake_api *f);
/* "http://127.0.0.1:<port>" in `buf`. */
const char *fake_api_url(const struct fake_api *f, char *buf, size_t size);
/* The LIST's answer from now on. */
void fake_api_set_list(struct fake_api *f, const char *rv, const char *items_json);
/* Writes one watch event ({"type": type, "object": object_json}) into the open WATCH; false
 * when none is open. */
bool fake_api_event(struct fake_api *f, const char *type, const char *object_json);
/* Answers the GET held (hold_gets) as get_code and get_body say now; false when none is held. */
bool fake_api_answer_get(struct fake_api *f);
/* Ends the open WATCH cleanly (the server's timeout) or, with `reset`, by closing it mid-way. */
void fake_api_end_watch(struct fake_api *f, bool reset);
/* {"metadata":{"name":name,"resourceVersion":rv}} in `buf`. */
/* Runs `loop` until `done()`, or 10 s of real time pass (a failure); returns done(). */
bool fake_api_run_until(struct ev_loop *loop, bool (*done)(void));
const char *fake_api_obj(char *buf, size_t size, const char *name, const char *rv);
