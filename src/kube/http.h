/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/http.h - HTTP requests to the API server on the libev loop, through curl's multi
 * socket API: one ev_io per socket, one ev_timer, HTTP/2 multiplexing when the server offers
 * it, TLS verification on, client certificates and CA from memory (never written to disk),
 * bearer tokens re-read from their file.
 *
 * Two kinds of request:
 *  - short (get, list, create, patch, ...): a total timeout; the body is buffered up to a cap
 *    and handed to the completion callback;
 *  - streams (watches): no total timeout but a low-speed watchdog; the body goes to a data
 *    callback as it arrives.
 * The only file that includes both curl and libev. Knows nothing of JSON or Kubernetes
 * semantics. Does not log. Single-threaded: call it from the loop's thread only.
 *
 * Throttling: a 429 with a short Retry-After is retried here after that long, with jitter (see
 * kube_http_retry_delay()); the completion callback sees only the last answer.
 *
 * Ownership: a request belongs to the http context until its completion callback has run
 * (then it is freed) or until kube_http_cancel() (then no callback runs).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct ev_loop;
struct kube_config;
struct kube_http;
struct kube_req;

/* Largest buffered response body of a short request (a list page is far smaller). */
#define KUBE_HTTP_BODY_MAX ((size_t)64 * 1024 * 1024)

/*
 * A finished request. For a transport failure `error` names the request and the server and
 * says why, as client-go does: `GET "https://127.0.0.1:6443/api/v1/nodes?limit=500": Failed to
 * connect to 127.0.0.1 port 6443 after 0 ms: Couldn't connect to server` (a URL over 512 bytes
 * is cut).
 */
struct kube_resp {
    int http;          /* HTTP status, 0 when no response arrived */
    int err;           /* 0, or a negative errno for a transport failure / aborted stream */
    const char *error; /* when `err` < 0, what failed and why, for people (see above); ""
                          when `err` is 0 */
    const char *body;  /* buffered body of a short request, NUL-terminated ("" for streams) */
    size_t body_len;
    int retry_after; /* Retry-After header in seconds, -1 when absent */
};

/* Completion: runs once per request, outside any curl callback, so it may start or cancel
 * requests. `resp` and its strings are borrowed for the call. */
typedef void (*kube_http_done_cb)(const struct kube_resp *resp, void *userdata);

/* Stream data: a slice of the body as it arrives (a stream's HTTP status is known by then).
 * Return 0 to go on, or a negative errno to abort the transfer: the completion callback then
 * runs with that errno. Must not call kube_http_* functions. */
typedef int (*kube_http_data_cb)(int http, const char *data, size_t len, void *userdata);

struct kube_http_req {
    const char *method; /* "GET", "POST", "PUT", "PATCH", "DELETE" */
    const char *path;   /* absolute path with query, e.g. "/api/v1/nodes?limit=500" */
    const char *body;   /* request body (copied) or NULL */
    size_t body_len;
    const char *content_type;  /* of the body; NULL = application/json */
    double timeout;            /* total seconds for a short request; 0 = default (30 s) */
    kube_http_data_cb on_data; /* non-NULL makes it a stream */
    double low_speed_time;     /* streams: abort when under 1 byte/s for this long (0 = 90 s) */
    kube_http_done_cb on_done;
    void *userdata;
    /* Optional: called with userdata instead of on_done when the request goes without
     * completing (kube_http_cancel, kube_http_free), to free what userdata owns. */
    void (*on_drop)(void *userdata);
};

struct kube_http_stats {
    unsigned long requests;    /* started */
    unsigned long failed;      /* transport failures (no response) */
    unsigned long http_errors; /* responses with status >= 400 */
    unsigned long http2;       /* responses that came over HTTP/2 */
    unsigned long in_flight;
    unsigned long throttled; /* 429 answers with Retry-After, retried after waiting */
};

/* A new context on `loop` using `config` (borrowed; must outlive the context). NULL on OOM or
 * when curl cannot be initialised. */
struct kube_http *kube_http_new(struct ev_loop *loop, struct kube_config *config);

/* Cancels every request (no callbacks) and frees the context. Takes NULL; returns NULL. Must
 * be called before the loop is destroyed. */
struct kube_http *kube_http_free(struct kube_http *h);

/* Starts a request. Writes it to `ret` (may be NULL) for cancelling. Returns 0, -EINVAL or
 * -ENOMEM; on failure no callback runs. */
int kube_http_start(struct kube_http *h, const struct kube_http_req *r, struct kube_req **ret);

/* Cancels a request that has not completed: its callbacks never run. Must not be called from
 * a data callback. */
void kube_http_cancel(struct kube_http *h, struct kube_req *req);

void kube_http_get_stats(const struct kube_http *h, struct kube_http_stats *ret);

/*
 * Pure: how long a request answered `http` with Retry-After `retry_after` seconds (-1: none)
 * waits before it goes again, having been retried `retried` times so far; -1 when it does not
 * go again and the caller gets the answer. Only a 429 with Retry-After of at most 10 s is
 * retried, at most 10 times; the wait is Retry-After plus up to a quarter of it (of 1 s for
 * "Retry-After: 0"), by `rand01` in [0, 1).
 */
double kube_http_retry_delay(int http, int retry_after, int retried, double rand01);

/* The server URL requests go to ("https://127.0.0.1:6443"). */
const char *kube_http_server(const struct kube_http *h);
