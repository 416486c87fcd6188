/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubelet/grpcclient.c - the unary gRPC client of kubelet/grpc.h (grpc_unary()): one connection
 * (kubelet/grpcconn.h) and one stream per call, the response's status taken from :status,
 * grpc-status and grpc-message, and the result delivered once.
 *
 * The result is always delivered from the call's ev_timer (a 0 s kick when it is known early),
 * never from inside grpc_unary() or the connection's callbacks; the connection is shut down and
 * the call freed there too. Does not log.
 */
#include "kubelet/grpc.h"

#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kubelet/grpcconn.h"

struct client {
    struct grpc_conn conn;
    struct grpc_stream st; /* out: the framed request; in: the response message */
    ev_timer timer;        /* the deadline, then the 0 s kick that delivers the result */
    grpc_done done;
    void *userdata;
    bool resp_over;
    int http;
    bool have_status;
    long grpc_status;
    char message[GRPC_MESSAGE_MAX];
    bool complete; /* result fixed; delivery pending */
    enum grpc_status status;
    char *result_msg;
};

static void client_free(struct client *cl)
{
    grpc_stream_release(&cl->st);
    free(cl->result_msg);
    free(cl);
}

/* Fixes the result (the first one wins) and delivers it from the next loop iteration. */
static void client_result(struct client *cl, enum grpc_status status, const char *message)
{
    if (cl->complete)
        return;
    cl->complete = true;
    cl->status = status;
    cl->result_msg = message ? grpc_dup_capped(message) : NULL;
    ev_timer_stop(cl->conn.loop, &cl->timer);
    ev_timer_set(&cl->timer, 0., 0.);
    ev_timer_start(cl->conn.loop, &cl->timer);
}

static void on_client_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct client *cl = w->data;
    (void)revents;
    ev_timer_stop(loop, &cl->timer);
    if (!cl->complete) {
        cl->complete = true;
        cl->status = GRPC_DEADLINE_EXCEEDED;
        cl->result_msg = strdup("deadline exceeded");
    }
    grpc_conn_shutdown(&cl->conn);
    bool ok = cl->status == GRPC_OK;
    const uint8_t *resp = ok ? (const uint8_t *)cl->st.in.data + GRPC_PREFIX : NULL;
    size_t len = ok ? cl->st.in.len - GRPC_PREFIX : 0;
    cl->done(cl->status, ok ? NULL : cl->result_msg, resp, len, cl->userdata);
    client_free(cl);
}

static enum grpc_status status_of_http(int http)
{
    switch (http) {
    case 400:
        return GRPC_INTERNAL;
    case 404:
        return GRPC_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
        return GRPC_UNAVAILABLE;
    default:
        return GRPC_UNKNOWN;
    }
}

/* The stream closed: the result from grpc-status, or from how the stream ended. */
static void client_stream_closed(struct client *cl, uint32_t error_code)
{
    char msg[64];
    if (cl->resp_over) {
        client_result(cl, GRPC_RESOURCE_EXHAUSTED, "response message over the size limit");
    } else if (cl->have_status && cl->grpc_status != GRPC_OK) {
        client_result(cl, (enum grpc_status)cl->grpc_status, cl->message);
    } else if (cl->have_status) {
        bool one = grpc_frame_one(&cl->st.in);
        client_result(cl, one ? GRPC_OK : GRPC_INTERNAL,
                      one ? NULL : "not exactly one uncompressed response message");
    } else if (error_code == GRPC_H2_REFUSED_STREAM) {
        client_result(cl, GRPC_UNAVAILABLE, "stream refused by the server");
    } else if (error_code == GRPC_H2_CANCEL) {
        client_result(cl, GRPC_CANCELLED, "stream cancelled by the server");
    } else if (error_code != GRPC_H2_NO_ERROR) {
        (void)snprintf(msg, sizeof(msg), "stream reset by the server (HTTP/2 error %u)",
                       error_code);
        client_result(cl, GRPC_INTERNAL, msg);
    } else if (cl->http != 200) {
        (void)snprintf(msg, sizeof(msg), "unexpected HTTP status %d", cl->http);
        client_result(cl, status_of_http(cl->http), msg);
    } else {
        client_result(cl, GRPC_INTERNAL, "response without grpc-status");
    }
}

/* A decimal status (":status", "grpc-status") of 1 to 3 digits, or -1. */
static int parse_code(const uint8_t *v, size_t n)
{
    int code = 0;
    if (n == 0 || n > 3)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        code = code * 10 + (v[i] - '0');
    }
    return code;
}

/* --- the connection's ops ------------------------------------------------------------------ */

static void on_response_header(struct grpc_stream *st, bool trailers, const uint8_t *name,
                               size_t namelen, const uint8_t *value, size_t valuelen)
{
    struct client *cl = st->ud;
    (void)trailers;
    if (grpc_header_is(name, namelen, ":status")) {
        cl->http = parse_code(value, valuelen);
    } else if (grpc_header_is(name, namelen, "grpc-status")) {
        int code = parse_code(value, valuelen);
        cl->have_status = true;
        cl->grpc_status = code >= 0 && code <= 16 ? code : GRPC_UNKNOWN;
    } else if (grpc_header_is(name, namelen, "grpc-message")) {
        grpc_pct_decode(value, valuelen, cl->message, sizeof(cl->message));
    }
}

static void on_response_data(struct grpc_stream *st, const uint8_t *data, size_t len)
{
    struct client *cl = st->ud;
    if (!cl->resp_over && buf_add(&st->in, data, len) < 0) {
        cl->resp_over = true;
        grpc_stream_reset(st, GRPC_H2_CANCEL);
    }
}

static void on_response_close(struct grpc_stream *st, uint32_t error_code)
{
    struct client *cl = st->ud;
    client_stream_closed(cl, error_code);
    /* One call per connection: close it once the GOAWAY (if any) is out. */
    grpc_conn_goaway(st->c, false);
}

/* The connection is over (EOF, an error, or nothing more to do). */
static void on_client_end(struct grpc_conn *c)
{
    grpc_conn_shutdown(c);
    client_result(c->ud, GRPC_UNAVAILABLE, "connection closed before the response");
}

static const struct grpc_conn_ops client_ops = {
        .header = on_response_header,
        .data = on_response_data,
        .stream_close = on_response_close,
        .end = on_client_end,
};

/* --- the call ------------------------------------------------------------------------------ */

static int client_new(struct ev_loop *loop, const uint8_t *msg, size_t len, grpc_done done,
                      void *userdata, struct client **ret)
{
    struct client *cl = calloc(1, sizeof(*cl));
    if (!cl)
        return -ENOMEM;
    grpc_conn_init(&cl->conn, loop, &client_ops, cl);
    grpc_stream_init(&cl->st, &cl->conn, cl);
    cl->done = done;
    cl->userdata = userdata;
    if (grpc_stream_queue(&cl->st, msg, len) < 0) {
        client_free(cl);
        return -ENOMEM;
    }
    ev_timer_init(&cl->timer, on_client_timer, 0., 0.);
    cl->timer.data = cl;
    *ret = cl;
    return 0;
}

/* The socket, the session on it and the request submitted: 0 or -errno. */
static int client_open(struct client *cl, const char *method, double timeout)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int r = grpc_conn_open(&cl->conn, fd, false);
    if (r < 0) {
        close(fd);
        return r;
    }
    return grpc_stream_request(&cl->st, method, timeout);
}

int grpc_unary(struct ev_loop *loop, const char *path, const char *method, const uint8_t *msg,
               size_t len, double timeout, grpc_done done, void *userdata)
{
    struct sockaddr_un sa;
    struct client *cl;
    int r = len > GRPC_MAX_MESSAGE ? -E2BIG : grpc_conn_addr(&sa, path, NULL);
    if (r < 0 || (r = client_new(loop, msg, len, done, userdata, &cl)) < 0)
        return r;
    if ((r = client_open(cl, method, timeout)) < 0) {
        grpc_conn_shutdown(&cl->conn);
        client_free(cl);
        return r;
    }
    if (connect(cl->conn.fd, (const struct sockaddr *)&sa, sizeof(sa)) < 0 &&
        errno != EINPROGRESS) {
        char why[128];
        (void)snprintf(why, sizeof(why), "cannot connect: %s", strerror(errno));
        client_result(cl, GRPC_UNAVAILABLE, why);
        return 0;
    }
    ev_timer_set(&cl->timer, timeout > 0 ? timeout : 0., 0.);
    ev_timer_start(loop, &cl->timer);
    grpc_conn_start(&cl->conn);
    return 0;
}
