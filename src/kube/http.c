/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/http.c - curl multi socket API driven by libev. See http.h.
 *
 * The glue keeps libcurl's rules (https://curl.se/libcurl/c/libcurl-multi.html,
 * https://curl.se/libcurl/c/CURLMOPT_SOCKETFUNCTION.html,
 * https://curl.se/libcurl/c/CURLMOPT_TIMERFUNCTION.html; curl's docs/examples/evhiperfifo.c is
 * the same loop on libev): copy the socket context's fields before curl_multi_socket_action()
 * (its REMOVE callback may free it); never call curl from the timer callback (arm a 0 s
 * ev_timer instead); drain curl_multi_info_read() after every action; re-init the ev_io
 * whenever the interest mask changes; remove an easy handle before running its completion
 * callback, and never from inside a curl callback.
 */
#include "kube/http.h"

#include <curl/curl.h>
#include <errno.h>
#include <ev.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "kube/config.h"

#define DEFAULT_TIMEOUT        30.0
#define DEFAULT_LOW_SPEED_TIME 90L
#define CONNECT_TIMEOUT_MS     10000L
#define STREAM_ERROR_BODY_MAX  ((size_t)64 * 1024)
#define ERROR_MAX              1024 /* resp.error: method, URL and curl's message */
#define URL_IN_ERROR_MAX       512  /* bytes of the URL in resp.error */
#define THROTTLED_RETRIES_MAX  10   /* client-go's rest client: maxRetries */
#define RETRY_AFTER_MAX        10   /* longer waits go to the caller's own backoff */
#define RETRY_JITTER           0.25 /* a retry waits Retry-After * (1 + up to this) */

struct kube_http {
    struct ev_loop *loop;
    CURLM *multi;
    ev_timer timer;
    int running;
    struct kube_config *config;
    int depth;               /* > 0 while curl runs (its callbacks must not call curl) */
    ev_timer kick;           /* adds and removes what was deferred during a curl callback */
    struct kube_req *reqs;   /* every active request, for kube_http_free() */
    struct kube_sock *socks; /* every watched socket, in case cleanup does not remove one */
    struct kube_http_stats stats;
    uint64_t rng; /* jitter of throttled retries */
};

struct kube_sock {
    ev_io io;
    struct kube_http *h;
    curl_socket_t fd;
    struct kube_sock *prev, *next;
};

struct kube_req {
    struct kube_http *h;
    CURL *easy;
    struct curl_slist *headers;
    struct buf body;
    kube_http_data_cb on_data;
    kube_http_done_cb on_done;
    void (*on_drop)(void *userdata);
    void *userdata;
    int data_err; /* what on_data returned when it aborted the stream */
    bool overflow;
    bool deferred;  /* started during a curl callback: not yet added to the multi handle */
    bool cancelled; /* cancelled during a curl callback: no callbacks, reaped by the kick */
    int retry_after;
    int throttled;  /* 429 answers retried so far */
    bool waiting;   /* throttled: out of curl until `retry` fires */
    ev_timer retry; /* when a throttled request goes again */
    char errbuf[CURL_ERROR_SIZE];
    struct kube_req *prev, *next;
};

static void drain_done(struct kube_http *h);
static void on_retry(struct ev_loop *loop, ev_timer *w, int revents);

/* Runs curl; while it does, kube_http_start/cancel defer their curl calls to the kick. */
static void socket_action(struct kube_http *h, curl_socket_t fd, int flags)
{
    h->depth++;
    (void)curl_multi_socket_action(h->multi, fd, flags, &h->running);
    h->depth--;
    drain_done(h); /* always, even when nothing runs any more */
}

/* --- the loop side ------------------------------------------------------------------------ */

static void on_sock_io(struct ev_loop *loop, ev_io *w, int revents)
{
    struct kube_sock *s = (struct kube_sock *)w;
    struct kube_http *h = s->h; /* copy first: the REMOVE callback may free s */
    curl_socket_t fd = s->fd;
    int flags = ((revents & EV_READ) ? CURL_CSELECT_IN : 0) |
                ((revents & EV_WRITE) ? CURL_CSELECT_OUT : 0);
    (void)loop;
    socket_action(h, fd, flags);
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct kube_http *h = w->data;
    (void)loop;
    (void)revents;
    socket_action(h, CURL_SOCKET_TIMEOUT, 0);
}

/* CURLMOPT_TIMERFUNCTION: only (re)arms the timer; calling curl from here would recurse. */
static int on_multi_timer(CURLM *multi, long ms, void *userp)
{
    struct kube_http *h = userp;
    (void)multi;
    ev_timer_stop(h->loop, &h->timer);
    if (ms >= 0) {
        ev_timer_set(&h->timer, (double)ms / 1000.0, 0.);
        ev_timer_start(h->loop, &h->timer);
    }
    return 0;
}

static void sock_free(struct kube_http *h, struct kube_sock *s)
{
    ev_io_stop(h->loop, &s->io);
    if (s->prev)
        s->prev->next = s->next;
    else
        h->socks = s->next;
    if (s->next)
        s->next->prev = s->prev;
    free(s);
}

static struct kube_sock *sock_new(struct kube_http *h, curl_socket_t fd)
{
    struct kube_sock *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->h = h;
    s->fd = fd;
    s->next = h->socks;
    if (h->socks)
        h->socks->prev = s;
    h->socks = s;
    return s;
}

/* CURLMOPT_SOCKETFUNCTION: keeps one ev_io per socket in step with what curl waits for. */
static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct kube_http *h = userp;
    struct kube_sock *s = socketp;
    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        if (s) {
            (void)curl_multi_assign(h->multi, fd, NULL);
            sock_free(h, s);
        }
        return 0;
    }
    if (!s) {
        s = sock_new(h, fd);
        if (!s)
            return -1;
        (void)curl_multi_assign(h->multi, fd, s);
    } else {
        ev_io_stop(h->loop, &s->io);
    }
    int events = ((what & CURL_POLL_IN) ? EV_READ : 0) | ((what & CURL_POLL_OUT) ? EV_WRITE : 0);
    ev_io_init(&s->io, on_sock_io, fd, events);
    ev_io_start(h->loop, &s->io);
    return 0;
}

/* --- requests ----------------------------------------------------------------------------- */

static void unlink_req(struct kube_req *r)
{
    struct kube_http *h = r->h;
    if (r->prev)
        r->prev->next = r->next;
    else
        h->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    h->stats.in_flight--;
}

static void free_req(struct kube_req *r)
{
    ev_timer_stop(r->h->loop, &r->retry);
    if (r->easy)
        curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->headers);
    buf_free(&r->body);
    free(r);
}

/* Frees a request that will never complete: its owner frees what the userdata holds. */
static void drop_req(struct kube_req *r)
{
    if (r->on_drop)
        r->on_drop(r->userdata);
    free_req(r);
}

static int errno_of(CURLcode rc)
{
    switch (rc) {
    case CURLE_OK:
        return 0;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_COULDNT_RESOLVE_HOST:
        return -EHOSTUNREACH;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
        return -EPROTO;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return -ECONNRESET;
    default:
        return -EIO;
    }
}

/*
 * What failed and why, as client-go says it: `GET "https://127.0.0.1:6443/api/v1/nodes?limit=500":
 * Failed to connect to 127.0.0.1 port 6443 after 0 ms: Couldn't connect to server`. A URL over
 * URL_IN_ERROR_MAX bytes is cut (and ends in "...") so that the reason always fits.
 */
static void describe_failure(const struct kube_req *r, CURLcode rc, int err, char *out, size_t size)
{
    const char *method = NULL, *url = NULL, *why = r->errbuf;
    (void)curl_easy_getinfo(r->easy, CURLINFO_EFFECTIVE_METHOD, &method);
    (void)curl_easy_getinfo(r->easy, CURLINFO_EFFECTIVE_URL, &url);
    char stream[128];
    if (r->overflow) {
        why = "response body over its cap";
    } else if (rc == CURLE_WRITE_ERROR && r->data_err < 0) {
        (void)snprintf(stream, sizeof(stream), "stream aborted: %s", strerror(-err));
        why = stream;
    } else if (why[0] == '\0') {
        why = curl_easy_strerror(rc);
    }
    url = url ? url : r->h->config->server;
    size_t len = strnlen(url, URL_IN_ERROR_MAX + 1);
    (void)snprintf(out, size, "%s \"%.*s%s\": %s", method ? method : "GET",
                   (int)(len > URL_IN_ERROR_MAX ? URL_IN_ERROR_MAX : len), url,
                   len > URL_IN_ERROR_MAX ? "..." : "", why);
}

/* Counts what the response says about the server. */
static void count(struct kube_http *h, CURL *easy, long code, int err)
{
    if (err < 0 && code == 0)
        h->stats.failed++;
    if (code >= 400)
        h->stats.http_errors++;
    long version = 0;
    if (curl_easy_getinfo(easy, CURLINFO_HTTP_VERSION, &version) == CURLE_OK &&
        version == CURL_HTTP_VERSION_2_0)
        h->stats.http2++;
}

double kube_http_retry_delay(int http, int retry_after, int retried, double rand01)
{
    if (http != 429 || retry_after < 0 || retry_after > RETRY_AFTER_MAX ||
        retried >= THROTTLED_RETRIES_MAX)
        return -1;
    double r = rand01 > 0 ? (rand01 < 1 ? rand01 : 1) : 0; /* also NaN -> 0 */
    return retry_after + (retry_after > 0 ? retry_after : 1) * RETRY_JITTER * r;
}

static double rand01(struct kube_http *h)
{
    h->rng ^= h->rng << 13;
    h->rng ^= h->rng >> 7;
    h->rng ^= h->rng << 17;
    return (double)(h->rng >> 11) / (double)(UINT64_C(1) << 53);
}

/*
 * A 429 with Retry-After (API Priority and Fairness, or the max-in-flight filter, turned the
 * request away before running it, so any verb may go again) waits that long, plus jitter so
 * that rejected clients do not come back together, and goes again, up to 10 times, as
 * client-go's rest client does; the caller sees only the last answer. True when it waits.
 */
static bool throttle(struct kube_req *r, long code)
{
    struct kube_http *h = r->h;
    double delay = kube_http_retry_delay((int)code, r->retry_after, r->throttled, rand01(h));
    if (delay < 0)
        return false;
    count(h, r->easy, code, 0);
    r->throttled++;
    h->stats.throttled++;
    buf_reset(&r->body);
    r->retry_after = -1;
    r->errbuf[0] = '\0';
    r->waiting = true;
    ev_timer_set(&r->retry, delay, 0.);
    ev_timer_start(h->loop, &r->retry);
    return true;
}

/* Removes a finished request from curl, runs its completion and frees it (or, throttled,
 * schedules it again). */
static void finish(struct kube_req *r, CURLcode rc)
{
    struct kube_http *h = r->h;
    long code = 0;
    (void)curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
    (void)curl_multi_remove_handle(h->multi, r->easy);
    if (rc == CURLE_OK && !r->cancelled && throttle(r, code))
        return;
    unlink_req(r);

    char error[ERROR_MAX] = "";
    struct kube_resp resp = {
            .http = (int)code,
            .err = errno_of(rc),
            .error = error,
            .body = buf_str(&r->body),
            .body_len = r->body.len,
            .retry_after = r->retry_after,
    };
    if (r->overflow)
        resp.err = -EMSGSIZE;
    else if (rc == CURLE_WRITE_ERROR && r->data_err < 0)
        resp.err = r->data_err;
    if (resp.err < 0)
        describe_failure(r, rc, resp.err, error, sizeof(error));
    count(h, r->easy, code, resp.err);
    if (code == 401 && h->config->token_file)
        (void)kube_config_refresh_token(h->config, clock_monotonic(), true);
    if (r->on_done && !r->cancelled)
        r->on_done(&resp, r->userdata);
    free_req(r);
}

static void drain_done(struct kube_http *h)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(h->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURLcode rc = msg->data.result; /* the message is invalid after remove_handle */
        struct kube_req *r = NULL;
        (void)curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        if (r)
            finish(r, rc);
    }
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct kube_req *r = userdata;
    size_t n = size * nmemb;
    long code = 0;
    if (r->cancelled)
        return 0;
    if (r->on_data) {
        (void)curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code < 300) {
            int e = r->on_data((int)code, ptr, n, r->userdata);
            if (e < 0) {
                r->data_err = e;
                return 0; /* aborts the transfer; finish() reports data_err */
            }
            return n;
        }
        /* An error response to a stream is a Status: buffer it for the completion. */
    }
    if (buf_add(&r->body, ptr, n) < 0) {
        r->overflow = true;
        return 0;
    }
    return n;
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct kube_req *r = userdata;
    size_t n = size * nmemb;
    static const char name[] = "retry-after:";
    if (n > sizeof(name) && strncasecmp(ptr, name, sizeof(name) - 1) == 0) {
        char val[16] = {0};
        size_t len = n - (sizeof(name) - 1);
        memcpy(val, ptr + sizeof(name) - 1, len < sizeof(val) - 1 ? len : sizeof(val) - 1);
        char *end;
        long secs = strtol(val, &end, 10);
        if (end != val && secs >= 0 && secs < 86400)
            r->retry_after = (int)secs;
    }
    return n;
}

static int add_header(struct kube_req *r, const char *line)
{
    struct curl_slist *l = curl_slist_append(r->headers, line);
    if (!l)
        return -ENOMEM;
    r->headers = l;
    return 0;
}

static int set_headers(struct kube_req *r, const struct kube_http_req *in)
{
    struct kube_config *c = r->h->config;
    _cleanup_buf_ struct buf line;
    buf_init(&line, (size_t)64 * 1024);
    int e = add_header(r, "Accept: application/json");
    if (e == 0)
        e = add_header(r, "Expect:");
    if (e == 0 && in->body) {
        e = buf_printf(&line, "Content-Type: %s",
                       in->content_type ? in->content_type : "application/json");
        if (e == 0)
            e = add_header(r, buf_str(&line));
    }
    if (e == 0 && c->token_file)
        (void)kube_config_refresh_token(c, clock_monotonic(), false);
    if (e == 0 && c->token) {
        buf_reset(&line);
        e = buf_printf(&line, "Authorization: Bearer %s", c->token);
        if (e == 0)
            e = add_header(r, buf_str(&line));
    }
    return e;
}

static void set_tls(CURL *e, const struct kube_config *c)
{
    if (c->ca_pem) {
        struct curl_blob b = {.data = c->ca_pem, .len = c->ca_len, .flags = CURL_BLOB_COPY};
        (void)curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &b);
    }
    if (c->cert_pem && c->key_pem) {
        struct curl_blob cert = {.data = c->cert_pem, .len = c->cert_len, .flags = CURL_BLOB_COPY};
        struct curl_blob key = {.data = c->key_pem, .len = c->key_len, .flags = CURL_BLOB_COPY};
        (void)curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cert);
        (void)curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
        (void)curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &key);
        (void)curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (c->insecure_skip_tls_verify) {
        (void)curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        (void)curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
}

static void set_method(CURL *e, const struct kube_http_req *in)
{
    if (strcmp(in->method, "GET") != 0)
        (void)curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, in->method);
    if (in->body) {
        (void)curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)in->body_len);
        (void)curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, in->body);
    }
}

static void set_transfer(CURL *e, const struct kube_http_req *in, bool tls)
{
    (void)curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    (void)curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    /* Wait for the one HTTP/2 connection rather than open another. Over cleartext there is no
     * HTTP/2 (2TLS), and curl would wait for a busy HTTP/1.1 connection (a watch's) to say
     * whether it multiplexes: a GET beside a held watch never started. */
    (void)curl_easy_setopt(e, CURLOPT_PIPEWAIT, tls ? 1L : 0L);
    (void)curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    (void)curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    (void)curl_easy_setopt(e, CURLOPT_USERAGENT, "hostdevd/" HOSTDEVD_VERSION);
    if (in->on_data) {
        long secs = in->low_speed_time > 0 ? (long)in->low_speed_time : DEFAULT_LOW_SPEED_TIME;
        (void)curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
        (void)curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, secs);
    } else {
        double t = in->timeout > 0 ? in->timeout : DEFAULT_TIMEOUT;
        (void)curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(t * 1000));
    }
}

static int setup(struct kube_req *r, const struct kube_http_req *in)
{
    _cleanup_buf_ struct buf url;
    buf_init(&url, (size_t)64 * 1024);
    int e = buf_printf(&url, "%s%s", r->h->config->server, in->path);
    if (e == 0)
        e = set_headers(r, in);
    if (e == 0) {
        CURL *c = r->easy;
        (void)curl_easy_setopt(c, CURLOPT_URL, buf_str(&url));
        (void)curl_easy_setopt(c, CURLOPT_PRIVATE, r);
        (void)curl_easy_setopt(c, CURLOPT_ERRORBUFFER, r->errbuf);
        (void)curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
        (void)curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
        (void)curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        (void)curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
        (void)curl_easy_setopt(c, CURLOPT_HTTPHEADER, r->headers);
        set_transfer(c, in, strncmp(r->h->config->server, "https://", 8) == 0);
        set_tls(c, r->h->config);
        set_method(c, in);
    }
    return e;
}

int kube_http_start(struct kube_http *h, const struct kube_http_req *in, struct kube_req **ret)
{
    if (!in->method || !in->path || in->path[0] != '/' || !in->on_done)
        return -EINVAL;
    struct kube_req *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->h = h;
    ev_timer_init(&r->retry, on_retry, 0., 0.);
    r->retry.data = r;
    r->on_data = in->on_data;
    r->on_done = in->on_done;
    r->on_drop = in->on_drop;
    r->userdata = in->userdata;
    r->retry_after = -1;
    buf_init(&r->body, in->on_data ? STREAM_ERROR_BODY_MAX : KUBE_HTTP_BODY_MAX);
    r->easy = curl_easy_init();
    int e = r->easy ? setup(r, in) : -ENOMEM;
    r->deferred = h->depth > 0;
    if (e == 0 && r->deferred)
        ev_feed_event(h->loop, &h->kick, EV_TIMER);
    else if (e == 0 && curl_multi_add_handle(h->multi, r->easy) != CURLM_OK)
        e = -ENOMEM;
    if (e < 0) {
        free_req(r);
        return e;
    }
    r->next = h->reqs;
    if (h->reqs)
        h->reqs->prev = r;
    h->reqs = r;
    h->stats.requests++;
    h->stats.in_flight++;
    if (ret)
        *ret = r;
    return 0;
}

void kube_http_cancel(struct kube_http *h, struct kube_req *r)
{
    if (!r || r->cancelled)
        return;
    if (h->depth > 0 && !r->deferred && !r->waiting) { /* curl runs it: the kick removes it */
        r->cancelled = true;
        ev_feed_event(h->loop, &h->kick, EV_TIMER);
        return;
    }
    if (!r->deferred && !r->waiting)
        (void)curl_multi_remove_handle(h->multi, r->easy);
    unlink_req(r);
    drop_req(r);
}

/* Completes a request that curl never ran, with `err`. */
static void fail_unstarted(struct kube_req *r, int err)
{
    struct kube_resp resp = {
            .err = err, .error = "cannot start the request", .body = "", .retry_after = -1};
    unlink_req(r);
    if (r->on_done)
        r->on_done(&resp, r->userdata);
    free_req(r);
}

/* A throttled request's wait is over: to curl again. */
static void on_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct kube_req *r = w->data;
    (void)loop;
    (void)revents;
    r->waiting = false;
    if (curl_multi_add_handle(r->h->multi, r->easy) != CURLM_OK)
        fail_unstarted(r, -ENOMEM);
}

/* Outside curl: adds the requests started, and reaps those cancelled, during its callbacks. */
static void on_kick(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct kube_http *h = w->data;
    struct kube_req *next;
    (void)loop;
    (void)revents;
    for (struct kube_req *r = h->reqs; r; r = next) {
        next = r->next;
        if (r->cancelled) {
            (void)curl_multi_remove_handle(h->multi, r->easy);
            unlink_req(r);
            drop_req(r);
        } else if (r->deferred) {
            r->deferred = false;
            if (curl_multi_add_handle(h->multi, r->easy) != CURLM_OK)
                fail_unstarted(r, -ENOMEM);
        }
    }
}

/* --- the context -------------------------------------------------------------------------- */

struct kube_http *kube_http_new(struct ev_loop *loop, struct kube_config *config)
{
    static bool curl_ready;
    if (!curl_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            return NULL;
        curl_ready = true;
    }
    struct kube_http *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->loop = loop;
    h->config = config;
    h->rng = (uint64_t)(uintptr_t)h ^ (uint64_t)(ev_time() * 1e6) ^ UINT64_C(0x9e3779b97f4a7c15);
    h->multi = curl_multi_init();
    if (!h->multi) {
        free(h);
        return NULL;
    }
    ev_timer_init(&h->timer, on_timer, 0., 0.);
    h->timer.data = h;
    ev_timer_init(&h->kick, on_kick, 0., 0.);
    h->kick.data = h;
    (void)curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    (void)curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
    (void)curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, on_multi_timer);
    (void)curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
    (void)curl_multi_setopt(h->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    return h;
}

struct kube_http *kube_http_free(struct kube_http *h)
{
    if (!h)
        return NULL;
    struct kube_req *next_req;
    for (struct kube_req *r = h->reqs; r; r = next_req) {
        next_req = r->next;
        if (!r->deferred)
            (void)curl_multi_remove_handle(h->multi, r->easy);
        drop_req(r);
    }
    h->reqs = NULL;
    /* May still call on_socket(REMOVE): the loop and h must be alive. */
    (void)curl_multi_cleanup(h->multi);
    struct kube_sock *next_sock;
    for (struct kube_sock *s = h->socks; s; s = next_sock) {
        next_sock = s->next;
        ev_io_stop(h->loop, &s->io);
        free(s);
    }
    h->socks = NULL;
    ev_timer_stop(h->loop, &h->timer);
    ev_clear_pending(h->loop, &h->kick);
    free(h);
    return NULL;
}

void kube_http_get_stats(const struct kube_http *h, struct kube_http_stats *ret)
{
    *ret = h->stats;
}

const char *kube_http_server(const struct kube_http *h)
{
    return h->config->server;
}
