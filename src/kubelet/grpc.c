/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubelet/grpc.c - gRPC over HTTP/2 (nghttp2) over unix sockets, driven by libev. See grpc.h.
 *
 * One `struct conn` per socket, server or client: an ev_io for reading (always on) and one for
 * writing (on while nghttp2 or our out buffer has bytes the socket did not take). Everything
 * read goes to nghttp2_session_mem_recv(); everything nghttp2 has to send is gathered with
 * nghttp2_session_mem_send() and written with non-blocking send(). API calls (reply, finish)
 * only submit to nghttp2 and start the write watcher, so nghttp2 is never re-entered from its
 * own callbacks. Server calls live from their request HEADERS to nghttp2's stream close (or the
 * connection's end); the user sees them from the handler to finish or cancel. A client call's
 * result is always delivered from its ev_timer (a 0 s kick when it is known early), never
 * from inside grpc_unary() or an nghttp2 callback. Does not log.
 */
#include "kubelet/grpc.h"

#include <errno.h>
#include <ev.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"

#define PREFIX            5                 /* compressed flag + 4-byte length */
#define READ_CHUNK        16384             /* bytes per read() */
#define READS_PER_EVENT   8                 /* then let other watchers run */
#define ACCEPTS_PER_EVENT 16                /* same for accept() */
#define ACCEPT_PAUSE      0.5               /* seconds without accept() when out of fds */
#define OUT_BATCH         65536             /* bytes gathered from nghttp2 per write */
#define OUT_CAP           ((size_t)1 << 20) /* one batch plus one frame, generously */
#define QUEUE_CAP         ((size_t)2 * (GRPC_MAX_MESSAGE + PREFIX)) /* unsent reply bytes of one call */
#define PATH_MAX_LEN      256  /* :path bytes kept (longer: unknown) */
#define MESSAGE_MAX       1024 /* grpc-message bytes kept */
#define LISTEN_BACKLOG    64

struct grpc_server;
struct client;

struct conn {
    struct ev_loop *loop;
    int fd;
    ev_io rio, wio;
    nghttp2_session *h2;
    struct buf out; /* bytes from nghttp2 not yet written, from out_off */
    size_t out_off;
    bool closed;             /* socket and session gone; callbacks do nothing */
    struct grpc_server *srv; /* server side: owner */
    struct grpc_call *calls; /* server side: streams with a call */
    size_t n_calls;
    struct conn *prev, *next; /* server side: in srv->conns */
    struct client *cl;        /* client side: owner */
};

struct grpc_call {
    struct conn *c;
    int32_t id;
    const struct grpc_method *m;
    char path[PATH_MAX_LEN];
    bool path_long, post, grpc_type;
    struct buf in;  /* the request message with its prefix */
    struct buf out; /* framed reply messages not yet handed to nghttp2, from out_off */
    size_t out_off;
    bool dispatched;    /* the handler ran */
    bool finished;      /* grpc_call_finish() or an error answer: no cancel callback */
    bool responded;     /* response HEADERS submitted */
    bool deferred;      /* the data provider waits for grpc_call_reply() or finish */
    bool trailers_due;  /* finish came after HEADERS: trailers when the data is out */
    bool rst_after_end; /* answered before the request ended: RST_STREAM NO_ERROR after */
    int http;           /* :status of a Trailers-Only answer */
    enum grpc_status status;
    char *message;
    void (*on_cancel)(struct grpc_call *call, void *ud);
    void *cancel_ud;
    struct grpc_call *prev, *next;
};

struct grpc_server {
    struct ev_loop *loop;
    int fd;
    ev_io accept_io;
    ev_timer accept_pause; /* accept() out of descriptors: wait instead of spinning */
    char *path;
    dev_t dev;
    ino_t ino;
    struct grpc_method *methods;
    size_t n_methods;
    nghttp2_session_callbacks *cbs;
    struct conn *conns;
    size_t n_conns;
};

struct client {
    struct conn conn;
    ev_timer timer; /* the deadline, then the 0 s kick that delivers the result */
    grpc_done done;
    void *userdata;
    struct buf req; /* the framed request, sent from req_off */
    size_t req_off;
    struct buf resp;
    bool resp_over;
    int http;
    bool have_status;
    long grpc_status;
    char message[MESSAGE_MAX];
    bool complete; /* result fixed; delivery pending */
    enum grpc_status status;
    char *result_msg;
};

/* --- helpers ------------------------------------------------------------------------------ */

static nghttp2_nv nv(const char *name, const char *value)
{
    return (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name), strlen(value),
                        NGHTTP2_NV_FLAG_NONE};
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_prefix(uint8_t *p, size_t len)
{
    p[0] = 0;
    p[1] = (uint8_t)(len >> 24);
    p[2] = (uint8_t)(len >> 16);
    p[3] = (uint8_t)(len >> 8);
    p[4] = (uint8_t)len;
}

/* grpc-message: printable ASCII except '%' stays, everything else is %XX (PROTOCOL-HTTP2). */
static char *pct_encode(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strnlen(s, MESSAGE_MAX);
    char *out = malloc(3 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch <= 0x7e && ch != '%') {
            *o++ = (char)ch;
            continue;
        }
        *o++ = '%';
        *o++ = hex[ch >> 4];
        *o++ = hex[ch & 15];
    }
    *o = '\0';
    return out;
}

static int hexval(uint8_t ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Decodes %XX (an invalid escape stays as it is) into `out`, truncated to fit. */
static void pct_decode(const uint8_t *s, size_t n, char *out, size_t size)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < size; i++) {
        int hi = i + 2 < n ? hexval(s[i + 1]) : -1, lo = i + 2 < n ? hexval(s[i + 2]) : -1;
        if (s[i] == '%' && hi >= 0 && lo >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = (char)s[i];
        }
    }
    out[o] = '\0';
}

/* A copy of at most MESSAGE_MAX bytes of `s`. */
static char *dup_capped(const char *s)
{
    size_t n = strnlen(s, MESSAGE_MAX);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static bool header_is(const uint8_t *name, size_t len, const char *want)
{
    return len == strlen(want) && memcmp(name, want, len) == 0;
}

static int fill_addr(struct sockaddr_un *sa, const char *path, struct err *ret_err)
{
    size_t n = strlen(path);
    *sa = (struct sockaddr_un){.sun_family = AF_UNIX};
    if (n == 0 || n >= sizeof(sa->sun_path))
        return err_set(ret_err, -ENAMETOOLONG,
                       "socket path %.64s... is %zu bytes; a unix socket path holds 1 to %zu", path,
                       n, sizeof(sa->sun_path) - 1);
    memcpy(sa->sun_path, path, n + 1);
    return 0;
}

/* --- connections: the I/O shared by both sides -------------------------------------------- */

static void conn_end(struct conn *c);

static void conn_want_write(struct conn *c)
{
    if (!c->closed && !ev_is_active(&c->wio))
        ev_io_start(c->loop, &c->wio);
}

/* Gathers up to OUT_BATCH bytes from nghttp2 into c->out. */
static int conn_gather(struct conn *c)
{
    while (c->out.len - c->out_off < OUT_BATCH) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(c->h2, &p);
        if (n < 0)
            return -EPROTO;
        if (n == 0)
            break;
        if (c->out_off > 0) {
            buf_consume(&c->out, c->out_off);
            c->out_off = 0;
        }
        if (buf_add(&c->out, p, (size_t)n) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* Writes what nghttp2 has for the peer: 0 when all went, 1 when the socket is full, -errno. */
static int conn_flush(struct conn *c)
{
    for (;;) {
        int r = conn_gather(c);
        if (r < 0)
            return r;
        size_t avail = c->out.len - c->out_off;
        if (avail == 0)
            return 0;
        ssize_t w = send(c->fd, c->out.data + c->out_off, avail, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 1;
        if (w < 0)
            return -errno;
        c->out_off += (size_t)w;
        if (c->out_off == c->out.len) {
            buf_reset(&c->out);
            c->out_off = 0;
        }
    }
}

/* After reading or when writable: writes, and ends the connection when nghttp2 is done. */
static void conn_pump(struct conn *c)
{
    int r = conn_flush(c);
    if (r < 0 || (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2) &&
                  c->out.len == c->out_off)) {
        conn_end(c);
        return;
    }
    if (r == 1)
        ev_io_start(c->loop, &c->wio);
    else
        ev_io_stop(c->loop, &c->wio);
}

static void on_conn_write(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    (void)revents;
    conn_pump(w->data);
}

static void on_conn_read(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = w->data;
    uint8_t data[READ_CHUNK];
    (void)loop;
    (void)revents;
    for (int i = 0; i < READS_PER_EVENT; i++) {
        ssize_t n = read(c->fd, data, sizeof(data));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0 || nghttp2_session_mem_recv(c->h2, data, (size_t)n) < 0) {
            if (n > 0)
                (void)conn_flush(c); /* a GOAWAY, if nghttp2 queued one */
            conn_end(c);
            return;
        }
    }
    conn_pump(c);
}

static void conn_init(struct conn *c, struct ev_loop *loop, int fd)
{
    c->loop = loop;
    c->fd = fd;
    buf_init(&c->out, OUT_CAP);
    ev_io_init(&c->rio, on_conn_read, fd, EV_READ);
    ev_io_init(&c->wio, on_conn_write, fd, EV_WRITE);
    c->rio.data = c->wio.data = c;
}

/* Stops the watchers, closes the socket and deletes the session (which runs no callbacks).
 * Idempotent. */
static void conn_shutdown(struct conn *c)
{
    c->closed = true;
    ev_io_stop(c->loop, &c->rio);
    ev_io_stop(c->loop, &c->wio);
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    nghttp2_session_del(c->h2);
    c->h2 = NULL;
    buf_free(&c->out);
}

/* --- server calls ------------------------------------------------------------------------- */

static void call_free(struct grpc_call *call)
{
    struct conn *c = call->c;
    if (call->prev)
        call->prev->next = call->next;
    else
        c->calls = call->next;
    if (call->next)
        call->next->prev = call->prev;
    c->n_calls--;
    buf_free(&call->in);
    buf_free(&call->out);
    free(call->message);
    free(call);
}

/* The stream or the connection went: the cancel callback if the user still holds the call. */
static void call_drop(struct grpc_call *call)
{
    if (call->dispatched && !call->finished) {
        call->finished = true;
        if (call->on_cancel)
            call->on_cancel(call, call->cancel_ud);
    }
    call_free(call);
}

/* HEADERS with grpc-status (and :status, content-type when Trailers-Only). */
static int submit_status(struct grpc_call *call, bool trailers_only)
{
    char code[16], http[16];
    (void)snprintf(code, sizeof(code), "%d", (int)call->status);
    (void)snprintf(http, sizeof(http), "%d", call->http ? call->http : 200);
    char *msg = pct_encode(call->status == GRPC_OK || !call->message ? "" : call->message);
    if (!msg)
        return -ENOMEM;
    nghttp2_nv h[4];
    size_t n = 0;
    if (trailers_only) {
        h[n++] = nv(":status", http);
        h[n++] = nv("content-type", "application/grpc");
    }
    h[n++] = nv("grpc-status", code);
    h[n++] = nv("grpc-message", msg);
    int r = trailers_only ? nghttp2_submit_response(call->c->h2, call->id, h, n, NULL)
                          : nghttp2_submit_trailer(call->c->h2, call->id, h, n);
    free(msg);
    return r < 0 ? -ENOMEM : 0;
}

static void set_status(struct grpc_call *call, enum grpc_status status, const char *message)
{
    call->status = status;
    free(call->message);
    call->message = message && status != GRPC_OK ? dup_capped(message) : NULL;
}

/* An error answer before the handler ran: Trailers-Only, then RST_STREAM if the request is
 * still coming; further request DATA is dropped. */
static void call_refuse(struct grpc_call *call, int http, enum grpc_status status,
                        const char *message)
{
    if (call->finished || call->dispatched)
        return;
    call->finished = true;
    buf_free(&call->in);
    call->http = http;
    set_status(call, status, message);
    call->responded = true;
    call->rst_after_end = !nghttp2_session_get_stream_remote_close(call->c->h2, call->id);
    if (submit_status(call, true) < 0)
        (void)nghttp2_submit_rst_stream(call->c->h2, NGHTTP2_FLAG_NONE, call->id,
                                        NGHTTP2_INTERNAL_ERROR);
    conn_want_write(call->c);
}

static ssize_t call_read(nghttp2_session *session, int32_t id, uint8_t *dst, size_t length,
                         uint32_t *flags, nghttp2_data_source *source, void *user_data)
{
    struct grpc_call *call = source->ptr;
    size_t avail = call->out.len - call->out_off;
    (void)session;
    (void)id;
    (void)user_data;
    if (avail > 0) {
        size_t n = avail < length ? avail : length;
        memcpy(dst, call->out.data + call->out_off, n);
        call->out_off += n;
        if (call->out_off == call->out.len) {
            buf_free(&call->out);
            call->out_off = 0;
        }
        return (ssize_t)n;
    }
    if (!call->trailers_due) {
        call->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    return submit_status(call, false) < 0 ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE : 0;
}

/* Starts the response (HEADERS and a data provider) or wakes the provider up. */
static int call_kick(struct grpc_call *call)
{
    if (!call->responded) {
        nghttp2_nv h[] = {nv(":status", "200"), nv("content-type", "application/grpc")};
        nghttp2_data_provider prd = {.source.ptr = call, .read_callback = call_read};
        if (nghttp2_submit_response(call->c->h2, call->id, h, ELEMENTSOF(h), &prd) < 0)
            return -ENOMEM;
        call->responded = true;
    } else if (call->deferred) {
        call->deferred = false;
        (void)nghttp2_session_resume_data(call->c->h2, call->id);
    }
    conn_want_write(call->c);
    return 0;
}

int grpc_call_reply(struct grpc_call *call, const uint8_t *msg, size_t len)
{
    if (call->finished || call->c->closed)
        return -EPIPE;
    if (len > GRPC_MAX_MESSAGE)
        return -E2BIG;
    if (call->out.len - call->out_off + PREFIX + len > QUEUE_CAP)
        return -ENOBUFS;
    if (call->out_off > 0) {
        buf_consume(&call->out, call->out_off);
        call->out_off = 0;
    }
    uint8_t prefix[PREFIX];
    put_prefix(prefix, len);
    size_t before = call->out.len;
    if (buf_add(&call->out, prefix, PREFIX) < 0 || buf_add(&call->out, msg, len) < 0) {
        call->out.len = call->out.data ? before : 0;
        return -ENOMEM;
    }
    return call_kick(call);
}

void grpc_call_finish(struct grpc_call *call, enum grpc_status status, const char *message)
{
    if (call->finished || call->c->closed)
        return;
    call->finished = true;
    set_status(call, status, message);
    if (!call->responded) {
        call->responded = true;
        if (submit_status(call, true) < 0)
            (void)nghttp2_submit_rst_stream(call->c->h2, NGHTTP2_FLAG_NONE, call->id,
                                            NGHTTP2_INTERNAL_ERROR);
        conn_want_write(call->c);
        return;
    }
    call->trailers_due = true;
    (void)call_kick(call);
}

void grpc_call_on_cancel(struct grpc_call *call, void (*cb)(struct grpc_call *call, void *ud),
                         void *ud)
{
    call->on_cancel = cb;
    call->cancel_ud = ud;
}

/* --- server: nghttp2 callbacks ------------------------------------------------------------ */

static struct grpc_call *stream_call(nghttp2_session *session, int32_t id)
{
    return nghttp2_session_get_stream_user_data(session, id);
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    struct conn *c = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (c->n_calls >= GRPC_MAX_STREAMS) {
        (void)nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                        NGHTTP2_REFUSED_STREAM);
        return 0;
    }
    struct grpc_call *call = calloc(1, sizeof(*call));
    if (!call)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    call->c = c;
    call->id = frame->hd.stream_id;
    buf_init(&call->in, PREFIX + GRPC_MAX_MESSAGE);
    buf_init(&call->out, QUEUE_CAP);
    call->next = c->calls;
    if (c->calls)
        c->calls->prev = call;
    c->calls = call;
    c->n_calls++;
    (void)nghttp2_session_set_stream_user_data(session, call->id, call);
    return 0;
}

static int on_request_header(nghttp2_session *session, const nghttp2_frame *frame,
                             const uint8_t *name, size_t namelen, const uint8_t *value,
                             size_t valuelen, uint8_t flags, void *ud)
{
    struct grpc_call *call = stream_call(session, frame->hd.stream_id);
    (void)flags;
    (void)ud;
    if (!call || frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (header_is(name, namelen, ":path")) {
        call->path_long = valuelen >= sizeof(call->path);
        if (!call->path_long) {
            memcpy(call->path, value, valuelen);
            call->path[valuelen] = '\0';
        }
    } else if (header_is(name, namelen, ":method")) {
        call->post = header_is(value, valuelen, "POST");
    } else if (header_is(name, namelen, "content-type")) {
        static const char grpc[] = "application/grpc";
        size_t n = sizeof(grpc) - 1;
        call->grpc_type = valuelen >= n && memcmp(value, grpc, n) == 0 &&
                          (valuelen == n || value[n] == '+' || value[n] == ';');
    }
    return 0;
}

/* The request HEADERS are complete: a method we serve, POST, application/grpc. */
static void check_request(struct grpc_call *call)
{
    const struct grpc_server *s = call->c->srv;
    if (!call->post) {
        call_refuse(call, 405, GRPC_INTERNAL, "method not allowed");
        return;
    }
    if (!call->grpc_type) {
        call_refuse(call, 415, GRPC_INTERNAL, "invalid gRPC request content-type");
        return;
    }
    for (size_t i = 0; i < s->n_methods && !call->path_long; i++)
        if (strcmp(s->methods[i].path, call->path) == 0)
            call->m = &s->methods[i];
    if (!call->m) {
        char msg[PATH_MAX_LEN + 32];
        (void)snprintf(msg, sizeof(msg), "unknown method %s", call->path_long ? "" : call->path);
        call_refuse(call, 200, GRPC_UNIMPLEMENTED, msg);
    }
}

/* Request DATA: one message, checked as soon as its prefix is in. */
static void take_data(struct grpc_call *call, const uint8_t *data, size_t len)
{
    if (call->finished || call->dispatched)
        return;
    if (buf_add(&call->in, data, len) < 0) {
        call_refuse(call, 200, GRPC_RESOURCE_EXHAUSTED, "request message over the size limit");
        return;
    }
    if (call->in.len < PREFIX)
        return;
    const uint8_t *p = (const uint8_t *)call->in.data;
    uint32_t n = be32(p + 1);
    if (p[0] != 0)
        call_refuse(call, 200, GRPC_INTERNAL, "compressed message without grpc-encoding");
    else if (n > GRPC_MAX_MESSAGE)
        call_refuse(call, 200, GRPC_RESOURCE_EXHAUSTED, "request message over the size limit");
    else if (call->in.len > PREFIX + (size_t)n)
        call_refuse(call, 200, GRPC_INTERNAL, "more than one request message");
}

/* The request ended: exactly one whole message runs the handler. */
static void end_request(struct grpc_call *call)
{
    if (call->finished || call->dispatched)
        return;
    const uint8_t *p = (const uint8_t *)call->in.data;
    if (call->in.len < PREFIX || call->in.len != PREFIX + (size_t)be32(p + 1)) {
        call_refuse(call, 200, GRPC_INTERNAL, "truncated or missing request message");
        return;
    }
    call->dispatched = true;
    call->m->handler(call, p + PREFIX, call->in.len - PREFIX, call->m->userdata);
    buf_free(&call->in); /* the call lives on: only nghttp2 processing frees it */
}

static int on_request_frame(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    struct grpc_call *call = stream_call(session, frame->hd.stream_id);
    (void)ud;
    if (!call)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
        check_request(call);
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        end_request(call);
    return 0;
}

static int on_request_data(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                           size_t len, void *ud)
{
    struct grpc_call *call = stream_call(session, id);
    (void)flags;
    (void)ud;
    if (call)
        take_data(call, data, len);
    return 0;
}

/* An early answer went out: end the request side too (PROTOCOL-HTTP2 "Early Server Closure"). */
static int on_server_frame_sent(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    struct grpc_call *call = stream_call(session, frame->hd.stream_id);
    (void)ud;
    if (call && call->rst_after_end && frame->hd.type == NGHTTP2_HEADERS &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        !nghttp2_session_get_stream_remote_close(session, call->id))
        (void)nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, call->id, NGHTTP2_NO_ERROR);
    return 0;
}

static int on_server_stream_close(nghttp2_session *session, int32_t id, uint32_t error_code,
                                  void *ud)
{
    struct conn *c = ud;
    struct grpc_call *call = stream_call(session, id);
    (void)error_code;
    if (c->closed || !call)
        return 0;
    (void)nghttp2_session_set_stream_user_data(session, id, NULL);
    call_drop(call);
    return 0;
}

static nghttp2_session_callbacks *server_callbacks(void)
{
    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs) != 0)
        return NULL;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_request_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_request_frame);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_request_data);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_server_frame_sent);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_server_stream_close);
    return cbs;
}

/* --- server: connections and the listening socket ---------------------------------------- */

/* Cancels the connection's calls and frees it; `goodbye` tries to send a GOAWAY first. */
static void server_conn_free(struct conn *c, bool goodbye)
{
    struct grpc_server *s = c->srv;
    if (goodbye) {
        (void)nghttp2_session_terminate_session(c->h2, NGHTTP2_NO_ERROR);
        (void)conn_flush(c);
    }
    c->closed = true; /* the call API and nghttp2's callbacks do nothing from here */
    struct grpc_call *next;
    for (struct grpc_call *call = c->calls; call; call = next) {
        next = call->next; /* a cancel callback frees nothing but its own call */
        call_drop(call);
    }
    conn_shutdown(c);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->n_conns--;
    free(c);
}

static int server_conn_new(struct grpc_server *s, int fd)
{
    struct conn *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    conn_init(c, s->loop, fd);
    c->srv = s;
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, GRPC_MAX_STREAMS}};
    if (nghttp2_session_server_new(&c->h2, s->cbs, c) != 0) {
        free(c);
        return -ENOMEM;
    }
    if (nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, ELEMENTSOF(iv)) != 0) {
        nghttp2_session_del(c->h2);
        free(c);
        return -ENOMEM;
    }
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    ev_io_start(s->loop, &c->rio);
    ev_io_start(s->loop, &c->wio); /* the server SETTINGS go out at once */
    return 0;
}

static void on_accept_resume(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct grpc_server *s = w->data;
    (void)revents;
    ev_io_start(loop, &s->accept_io);
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    struct grpc_server *s = w->data;
    (void)revents;
    for (int i = 0; i < ACCEPTS_PER_EVENT; i++) {
        int fd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
            /* The connection stays queued and the socket readable: a level-triggered watcher
             * would wake at once, forever. Look again in a while. */
            ev_io_stop(loop, w);
            ev_timer_set(&s->accept_pause, ACCEPT_PAUSE, 0);
            ev_timer_start(loop, &s->accept_pause);
        }
        if (fd < 0)
            return;
        if (s->n_conns >= GRPC_MAX_CONNS || server_conn_new(s, fd) < 0)
            close(fd);
    }
}

/* Replaces a socket file at the path (never anything else) and binds with mode 0600: the umask
 * is 0177 around bind(), so the file never exists with a wider mode. */
static int bind_socket(int fd, const struct sockaddr_un *sa, struct err *ret_err)
{
    struct stat st;
    if (lstat(sa->sun_path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return err_set(ret_err, -EEXIST, "%s exists and is not a socket", sa->sun_path);
        if (unlink(sa->sun_path) < 0 && errno != ENOENT)
            return err_set(ret_err, -errno, "cannot remove the old socket %s: %s", sa->sun_path,
                           strerror(errno));
    }
    mode_t old = umask(0177);
    int r = bind(fd, (const struct sockaddr *)sa, sizeof(*sa));
    int e = errno;
    umask(old);
    if (r < 0)
        return err_set(ret_err, -e, "cannot bind %s: %s", sa->sun_path, strerror(e));
    if (listen(fd, LISTEN_BACKLOG) < 0)
        return err_set(ret_err, -errno, "cannot listen on %s: %s", sa->sun_path, strerror(errno));
    return 0;
}

static int copy_methods(struct grpc_server *s, const struct grpc_method *methods, size_t n)
{
    s->methods = calloc(n ? n : 1, sizeof(*methods));
    if (!s->methods)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        s->methods[i] = methods[i];
        s->methods[i].path = strdup(methods[i].path);
        if (!s->methods[i].path)
            return -ENOMEM;
        s->n_methods++;
    }
    return 0;
}

int grpc_server_new(struct ev_loop *loop, const char *path, const struct grpc_method *methods,
                    size_t n_methods, struct grpc_server **ret, struct err *ret_err)
{
    struct sockaddr_un sa;
    int r = fill_addr(&sa, path, ret_err);
    if (r < 0)
        return r;
    struct grpc_server *s = calloc(1, sizeof(*s));
    if (!s)
        return err_set(ret_err, -ENOMEM, "out of memory");
    s->loop = loop;
    s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    r = s->fd < 0 ? -errno : 0;
    s->path = strdup(path);
    s->cbs = server_callbacks();
    if (r == 0 && (!s->path || !s->cbs || copy_methods(s, methods, n_methods) < 0))
        r = -ENOMEM;
    if (r < 0)
        err_set(ret_err, r, "cannot create the server for %s: %s", path, strerror(-r));
    else
        r = bind_socket(s->fd, &sa, ret_err);
    struct stat st = {0};
    if (r == 0 && stat(path, &st) < 0)
        r = err_set(ret_err, -errno, "cannot stat %s: %s", path, strerror(errno));
    if (r < 0) {
        grpc_server_free(s);
        return r;
    }
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    ev_io_init(&s->accept_io, on_accept, s->fd, EV_READ);
    s->accept_io.data = s;
    ev_timer_init(&s->accept_pause, on_accept_resume, ACCEPT_PAUSE, 0);
    s->accept_pause.data = s;
    ev_io_start(loop, &s->accept_io);
    *ret = s;
    return 0;
}

struct grpc_server *grpc_server_free(struct grpc_server *s)
{
    if (!s)
        return NULL;
    while (s->conns)
        server_conn_free(s->conns, true);
    ev_io_stop(s->loop, &s->accept_io);
    ev_timer_stop(s->loop, &s->accept_pause);
    if (s->fd >= 0)
        close(s->fd);
    struct stat st;
    if (s->ino && stat(s->path, &st) == 0 && st.st_dev == s->dev && st.st_ino == s->ino)
        (void)unlink(s->path);
    for (size_t i = 0; i < s->n_methods; i++)
        free((char *)s->methods[i].path);
    free(s->methods);
    if (s->cbs)
        nghttp2_session_callbacks_del(s->cbs);
    free(s->path);
    free(s);
    return NULL;
}

size_t grpc_server_calls(const struct grpc_server *s)
{
    size_t n = 0;
    for (const struct conn *c = s->conns; c; c = c->next)
        for (const struct grpc_call *call = c->calls; call; call = call->next)
            n += call->dispatched && !call->finished;
    return n;
}

/* --- the unary client --------------------------------------------------------------------- */

/* Fixes the result (the first one wins) and delivers it from the next loop iteration. */
static void client_result(struct client *cl, enum grpc_status status, const char *message)
{
    if (cl->complete)
        return;
    cl->complete = true;
    cl->status = status;
    cl->result_msg = message ? dup_capped(message) : NULL;
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
    conn_shutdown(&cl->conn);
    bool ok = cl->status == GRPC_OK;
    const uint8_t *resp = ok ? (const uint8_t *)cl->resp.data + PREFIX : NULL;
    size_t len = ok ? cl->resp.len - PREFIX : 0;
    cl->done(cl->status, ok ? NULL : cl->result_msg, resp, len, cl->userdata);
    buf_free(&cl->req);
    buf_free(&cl->resp);
    free(cl->result_msg);
    free(cl);
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
        const uint8_t *p = (const uint8_t *)cl->resp.data;
        bool one = cl->resp.len >= PREFIX && p[0] == 0 && cl->resp.len == PREFIX + be32(p + 1);
        client_result(cl, one ? GRPC_OK : GRPC_INTERNAL,
                      one ? NULL : "not exactly one uncompressed response message");
    } else if (error_code == NGHTTP2_REFUSED_STREAM) {
        client_result(cl, GRPC_UNAVAILABLE, "stream refused by the server");
    } else if (error_code == NGHTTP2_CANCEL) {
        client_result(cl, GRPC_CANCELLED, "stream cancelled by the server");
    } else if (error_code != NGHTTP2_NO_ERROR) {
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

static int on_response_header(nghttp2_session *session, const nghttp2_frame *frame,
                              const uint8_t *name, size_t namelen, const uint8_t *value,
                              size_t valuelen, uint8_t flags, void *ud)
{
    struct client *cl = ((struct conn *)ud)->cl;
    (void)session;
    (void)frame;
    (void)flags;
    if (header_is(name, namelen, ":status")) {
        cl->http = parse_code(value, valuelen);
    } else if (header_is(name, namelen, "grpc-status")) {
        int code = parse_code(value, valuelen);
        cl->have_status = true;
        cl->grpc_status = code >= 0 && code <= 16 ? code : GRPC_UNKNOWN;
    } else if (header_is(name, namelen, "grpc-message")) {
        pct_decode(value, valuelen, cl->message, sizeof(cl->message));
    }
    return 0;
}

static int on_response_data(nghttp2_session *session, uint8_t flags, int32_t id,
                            const uint8_t *data, size_t len, void *ud)
{
    struct client *cl = ((struct conn *)ud)->cl;
    (void)flags;
    if (!cl->resp_over && buf_add(&cl->resp, data, len) < 0) {
        cl->resp_over = true;
        (void)nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    }
    return 0;
}

static int on_client_stream_close(nghttp2_session *session, int32_t id, uint32_t error_code,
                                  void *ud)
{
    struct conn *c = ud;
    (void)session;
    (void)id;
    if (!c->closed)
        client_stream_closed(c->cl, error_code);
    /* One call per connection: close it once the GOAWAY (if any) is out. */
    (void)nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR);
    return 0;
}

static ssize_t request_read(nghttp2_session *session, int32_t id, uint8_t *dst, size_t length,
                            uint32_t *flags, nghttp2_data_source *source, void *user_data)
{
    struct client *cl = source->ptr;
    size_t avail = cl->req.len - cl->req_off;
    size_t n = avail < length ? avail : length;
    (void)session;
    (void)id;
    (void)user_data;
    memcpy(dst, cl->req.data + cl->req_off, n);
    cl->req_off += n;
    if (cl->req_off == cl->req.len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* The client session: callbacks, empty SETTINGS, and the request. */
static int client_session(struct client *cl, const char *method, double timeout)
{
    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs) != 0)
        return -ENOMEM;
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_response_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_response_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_client_stream_close);
    int r = nghttp2_session_client_new(&cl->conn.h2, cbs, &cl->conn);
    nghttp2_session_callbacks_del(cbs);
    if (r != 0)
        return -ENOMEM;
    char deadline[32];
    double ms = timeout * 1000.0 + 0.999;
    if (ms <= 99999999.)
        (void)snprintf(deadline, sizeof(deadline), "%llum", (unsigned long long)ms);
    else
        (void)snprintf(deadline, sizeof(deadline), "99999999S");
    nghttp2_nv h[] = {nv(":method", "POST"),
                      nv(":scheme", "http"),
                      nv(":path", method),
                      nv(":authority", "localhost"),
                      nv("content-type", "application/grpc"),
                      nv("te", "trailers"),
                      nv("user-agent", "hostdevd-grpc"),
                      nv("grpc-timeout", deadline)};
    nghttp2_data_provider prd = {.source.ptr = cl, .read_callback = request_read};
    if (nghttp2_submit_settings(cl->conn.h2, NGHTTP2_FLAG_NONE, NULL, 0) != 0 ||
        nghttp2_submit_request(cl->conn.h2, NULL, h, ELEMENTSOF(h), &prd, NULL) < 0)
        return -ENOMEM;
    return 0;
}

static int client_new(struct ev_loop *loop, const uint8_t *msg, size_t len, grpc_done done,
                      void *userdata, struct client **ret)
{
    struct client *cl = calloc(1, sizeof(*cl));
    if (!cl)
        return -ENOMEM;
    conn_init(&cl->conn, loop, -1);
    cl->conn.cl = cl;
    cl->conn.closed = true; /* until there is a socket */
    cl->done = done;
    cl->userdata = userdata;
    buf_init(&cl->req, PREFIX + GRPC_MAX_MESSAGE);
    buf_init(&cl->resp, PREFIX + GRPC_MAX_MESSAGE);
    uint8_t prefix[PREFIX];
    put_prefix(prefix, len);
    if (buf_add(&cl->req, prefix, PREFIX) < 0 || buf_add(&cl->req, msg, len) < 0) {
        buf_free(&cl->req);
        free(cl);
        return -ENOMEM;
    }
    ev_timer_init(&cl->timer, on_client_timer, 0., 0.);
    cl->timer.data = cl;
    *ret = cl;
    return 0;
}

int grpc_unary(struct ev_loop *loop, const char *path, const char *method, const uint8_t *msg,
               size_t len, double timeout, grpc_done done, void *userdata)
{
    struct sockaddr_un sa;
    struct client *cl;
    int r = len > GRPC_MAX_MESSAGE ? -E2BIG : fill_addr(&sa, path, NULL);
    if (r < 0 || (r = client_new(loop, msg, len, done, userdata, &cl)) < 0)
        return r;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || (r = client_session(cl, method, timeout)) < 0) {
        r = fd < 0 ? -errno : r;
        if (fd >= 0)
            close(fd);
        nghttp2_session_del(cl->conn.h2);
        buf_free(&cl->req);
        free(cl);
        return r;
    }
    conn_init(&cl->conn, loop, fd);
    cl->conn.closed = false;
    if (connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
        char why[128];
        (void)snprintf(why, sizeof(why), "cannot connect: %s", strerror(errno));
        client_result(cl, GRPC_UNAVAILABLE, why);
        return 0;
    }
    ev_timer_set(&cl->timer, timeout > 0 ? timeout : 0., 0.);
    ev_timer_start(loop, &cl->timer);
    ev_io_start(loop, &cl->conn.rio);
    ev_io_start(loop, &cl->conn.wio);
    return 0;
}

/* --- both sides --------------------------------------------------------------------------- */

/* The connection is over (EOF, an error, or nghttp2 has nothing more to do). */
static void conn_end(struct conn *c)
{
    if (c->srv) {
        server_conn_free(c, false);
        return;
    }
    conn_shutdown(c);
    client_result(c->cl, GRPC_UNAVAILABLE, "connection closed before the response");
}
