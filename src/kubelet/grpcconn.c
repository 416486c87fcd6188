/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubelet/grpcconn.c - the connection under the gRPC server and client: an HTTP/2 session
 * (nghttp2; the only file that includes it) on a unix socket, driven by libev, its streams and
 * gRPC's framing on them. See grpcconn.h.
 *
 * A connection has an ev_io for reading (always on) and one for writing (on while nghttp2 or
 * our out buffer has bytes the socket did not take). Everything read goes to
 * nghttp2_session_mem_recv(); everything nghttp2 has to send is gathered with
 * nghttp2_session_mem_send() and written with non-blocking send(). The stream API (send, end)
 * only submits to nghttp2 and starts the write watcher, so nghttp2 is never re-entered from its
 * own callbacks. nghttp2's callbacks find the stream in the stream's user data and pass it to
 * the owner's ops. Does not log.
 */
#include "kubelet/grpcconn.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/cleanup.h"

#define READ_CHUNK      16384             /* bytes per read() */
#define READS_PER_EVENT 8                 /* then let other watchers run */
#define OUT_BATCH       65536             /* bytes gathered from nghttp2 per write */
#define OUT_CAP         ((size_t)1 << 20) /* one batch plus one frame, generously */
#define QUEUE_CAP       ((size_t)2 * (GRPC_MAX_MESSAGE + GRPC_PREFIX)) /* unsent replies */

_Static_assert((int)GRPC_H2_NO_ERROR == (int)NGHTTP2_NO_ERROR, "HTTP/2 error code");
_Static_assert((int)GRPC_H2_INTERNAL_ERROR == (int)NGHTTP2_INTERNAL_ERROR, "HTTP/2 error code");
_Static_assert((int)GRPC_H2_REFUSED_STREAM == (int)NGHTTP2_REFUSED_STREAM, "HTTP/2 error code");
_Static_assert((int)GRPC_H2_CANCEL == (int)NGHTTP2_CANCEL, "HTTP/2 error code");

/* --- framing and encodings ---------------------------------------------------------------- */

void grpc_frame_prefix(uint8_t p[GRPC_PREFIX], size_t len)
{
    p[0] = 0;
    p[1] = (uint8_t)(len >> 24);
    p[2] = (uint8_t)(len >> 16);
    p[3] = (uint8_t)(len >> 8);
    p[4] = (uint8_t)len;
}

uint32_t grpc_frame_len(const uint8_t p[GRPC_PREFIX])
{
    return (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
}

bool grpc_frame_one(const struct buf *b)
{
    const uint8_t *p = (const uint8_t *)b->data;
    return b->len >= GRPC_PREFIX && p[0] == 0 && b->len == GRPC_PREFIX + (size_t)grpc_frame_len(p);
}

char *grpc_pct_encode(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strnlen(s, GRPC_MESSAGE_MAX);
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

void grpc_pct_decode(const uint8_t *s, size_t n, char *out, size_t size)
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

char *grpc_dup_capped(const char *s)
{
    size_t n = strnlen(s, GRPC_MESSAGE_MAX);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

bool grpc_header_is(const uint8_t *name, size_t len, const char *want)
{
    return len == strlen(want) && memcmp(name, want, len) == 0;
}

int grpc_conn_addr(struct sockaddr_un *sa, const char *path, struct err *ret_err)
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

static nghttp2_nv nv(const char *name, const char *value)
{
    return (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name), strlen(value),
                        NGHTTP2_NV_FLAG_NONE};
}

/* --- socket I/O ---------------------------------------------------------------------------- */

static void conn_want_write(struct grpc_conn *c)
{
    if (!c->closed && !ev_is_active(&c->wio))
        ev_io_start(c->loop, &c->wio);
}

/* Gathers up to OUT_BATCH bytes from nghttp2 into c->out. */
static int conn_gather(struct grpc_conn *c)
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
static int conn_flush(struct grpc_conn *c)
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
static void conn_pump(struct grpc_conn *c)
{
    int r = conn_flush(c);
    if (r < 0 || (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2) &&
                  c->out.len == c->out_off)) {
        c->ops->end(c);
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
    struct grpc_conn *c = w->data;
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
            c->ops->end(c);
            return;
        }
    }
    conn_pump(c);
}

void grpc_conn_init(struct grpc_conn *c, struct ev_loop *loop, const struct grpc_conn_ops *ops,
                    void *ud)
{
    *c = (struct grpc_conn){.loop = loop, .fd = -1, .closed = true, .ops = ops, .ud = ud};
    buf_init(&c->out, OUT_CAP);
    ev_io_init(&c->rio, on_conn_read, -1, EV_READ);
    ev_io_init(&c->wio, on_conn_write, -1, EV_WRITE);
    c->rio.data = c->wio.data = c;
}

void grpc_conn_start(struct grpc_conn *c)
{
    ev_io_start(c->loop, &c->rio);
    ev_io_start(c->loop, &c->wio);
}

void grpc_conn_goaway(struct grpc_conn *c, bool now)
{
    (void)nghttp2_session_terminate_session(c->h2, NGHTTP2_NO_ERROR);
    if (now)
        (void)conn_flush(c);
}

void grpc_conn_shutdown(struct grpc_conn *c)
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

/* --- streams ------------------------------------------------------------------------------- */

void grpc_stream_init(struct grpc_stream *st, struct grpc_conn *c, void *ud)
{
    *st = (struct grpc_stream){.c = c, .ud = ud, .next = c->streams};
    buf_init(&st->in, GRPC_PREFIX + GRPC_MAX_MESSAGE);
    buf_init(&st->out, QUEUE_CAP);
    if (c->streams)
        c->streams->prev = st;
    c->streams = st;
    c->n_streams++;
}

void grpc_stream_release(struct grpc_stream *st)
{
    struct grpc_conn *c = st->c;
    if (st->prev)
        st->prev->next = st->next;
    else
        c->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    c->n_streams--;
    buf_free(&st->in);
    buf_free(&st->out);
    free(st->message);
    st->message = NULL;
}

int grpc_stream_queue(struct grpc_stream *st, const uint8_t *msg, size_t len)
{
    if (len > GRPC_MAX_MESSAGE)
        return -E2BIG;
    if (st->out.len - st->out_off + GRPC_PREFIX + len > QUEUE_CAP)
        return -ENOBUFS;
    if (st->out_off > 0) {
        buf_consume(&st->out, st->out_off);
        st->out_off = 0;
    }
    uint8_t prefix[GRPC_PREFIX];
    grpc_frame_prefix(prefix, len);
    size_t before = st->out.len;
    if (buf_add(&st->out, prefix, GRPC_PREFIX) < 0 || buf_add(&st->out, msg, len) < 0) {
        st->out.len = st->out.data ? before : 0;
        return -ENOMEM;
    }
    return 0;
}

/* HEADERS with grpc-status (and :status, content-type when Trailers-Only). */
static int submit_status(struct grpc_stream *st, bool trailers_only)
{
    char code[16], http[16];
    (void)snprintf(code, sizeof(code), "%d", (int)st->status);
    (void)snprintf(http, sizeof(http), "%d", st->http ? st->http : 200);
    char *msg = grpc_pct_encode(st->status == GRPC_OK || !st->message ? "" : st->message);
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
    int r = trailers_only ? nghttp2_submit_response(st->c->h2, st->id, h, n, NULL)
                          : nghttp2_submit_trailer(st->c->h2, st->id, h, n);
    free(msg);
    return r < 0 ? -ENOMEM : 0;
}

/* The data provider of both sides: the queued bytes; then END_STREAM with the last of them (a
 * request), or a pause until more or the end, and trailers (a response). */
static ssize_t stream_read(nghttp2_session *session, int32_t id, uint8_t *dst, size_t length,
                           uint32_t *flags, nghttp2_data_source *source, void *user_data)
{
    struct grpc_stream *st = source->ptr;
    size_t avail = st->out.len - st->out_off;
    (void)session;
    (void)id;
    (void)user_data;
    if (avail > 0) {
        size_t n = avail < length ? avail : length;
        memcpy(dst, st->out.data + st->out_off, n);
        st->out_off += n;
        if (st->out_off == st->out.len) {
            buf_free(&st->out);
            st->out_off = 0;
            if (st->last)
                *flags |= NGHTTP2_DATA_FLAG_EOF;
        }
        return (ssize_t)n;
    }
    if (st->last) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        return 0;
    }
    if (!st->trailers_due) {
        st->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    return submit_status(st, false) < 0 ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE : 0;
}

/* Starts the response (HEADERS and a data provider) or wakes the provider up. */
static int stream_kick(struct grpc_stream *st)
{
    if (!st->responded) {
        nghttp2_nv h[] = {nv(":status", "200"), nv("content-type", "application/grpc")};
        nghttp2_data_provider prd = {.source.ptr = st, .read_callback = stream_read};
        if (nghttp2_submit_response(st->c->h2, st->id, h, ELEMENTSOF(h), &prd) < 0)
            return -ENOMEM;
        st->responded = true;
    } else if (st->deferred) {
        st->deferred = false;
        (void)nghttp2_session_resume_data(st->c->h2, st->id);
    }
    conn_want_write(st->c);
    return 0;
}

int grpc_stream_send(struct grpc_stream *st, const uint8_t *msg, size_t len)
{
    int r = grpc_stream_queue(st, msg, len);
    return r < 0 ? r : stream_kick(st);
}

void grpc_stream_end(struct grpc_stream *st, int http, enum grpc_status status, const char *message)
{
    st->http = http;
    st->status = status;
    free(st->message);
    st->message = message && status != GRPC_OK ? grpc_dup_capped(message) : NULL;
    if (st->responded) {
        st->trailers_due = true;
        (void)stream_kick(st);
        return;
    }
    st->responded = true;
    st->rst_after_end = !nghttp2_session_get_stream_remote_close(st->c->h2, st->id);
    if (submit_status(st, true) < 0)
        (void)nghttp2_submit_rst_stream(st->c->h2, NGHTTP2_FLAG_NONE, st->id,
                                        NGHTTP2_INTERNAL_ERROR);
    conn_want_write(st->c);
}

int grpc_stream_request(struct grpc_stream *st, const char *path, double timeout)
{
    char deadline[32];
    double ms = timeout * 1000.0 + 0.999;
    if (ms <= 99999999.)
        (void)snprintf(deadline, sizeof(deadline), "%llum", (unsigned long long)ms);
    else
        (void)snprintf(deadline, sizeof(deadline), "99999999S");
    nghttp2_nv h[] = {nv(":method", "POST"),
                      nv(":scheme", "http"),
                      nv(":path", path),
                      nv(":authority", "localhost"),
                      nv("content-type", "application/grpc"),
                      nv("te", "trailers"),
                      nv("user-agent", "hostdevd-grpc"),
                      nv("grpc-timeout", deadline)};
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = stream_read};
    st->last = true;
    int32_t id = nghttp2_submit_request(st->c->h2, NULL, h, ELEMENTSOF(h), &prd, st);
    if (id < 0)
        return -ENOMEM;
    st->id = id;
    return 0;
}

void grpc_stream_reset(struct grpc_stream *st, enum grpc_h2_error code)
{
    (void)nghttp2_submit_rst_stream(st->c->h2, NGHTTP2_FLAG_NONE, st->id, (uint32_t)code);
}

/* --- nghttp2's callbacks ------------------------------------------------------------------- */

static struct grpc_stream *stream_of(nghttp2_session *session, int32_t id)
{
    return nghttp2_session_get_stream_user_data(session, id);
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    struct grpc_conn *c = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST ||
        !c->ops->stream_open)
        return 0;
    if (c->n_streams >= GRPC_MAX_STREAMS) {
        (void)nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                        NGHTTP2_REFUSED_STREAM);
        return 0;
    }
    struct grpc_stream *st = c->ops->stream_open(c);
    if (!st)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    st->id = frame->hd.stream_id;
    (void)nghttp2_session_set_stream_user_data(session, st->id, st);
    return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    struct grpc_conn *c = ud;
    struct grpc_stream *st = stream_of(session, frame->hd.stream_id);
    (void)flags;
    if (st && frame->hd.type == NGHTTP2_HEADERS && c->ops->header)
        c->ops->header(st, frame->headers.cat == NGHTTP2_HCAT_HEADERS, name, namelen, value,
                       valuelen);
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    struct grpc_conn *c = ud;
    struct grpc_stream *st = stream_of(session, frame->hd.stream_id);
    if (!st)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST &&
        c->ops->request)
        c->ops->request(st);
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && c->ops->remote_end)
        c->ops->remote_end(st);
    return 0;
}

static int on_data(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                   size_t len, void *ud)
{
    struct grpc_conn *c = ud;
    struct grpc_stream *st = stream_of(session, id);
    (void)flags;
    if (st && c->ops->data)
        c->ops->data(st, data, len);
    return 0;
}

/* An early answer went out: end the request side too (PROTOCOL-HTTP2 "Early Server Closure"). */
static int on_frame_sent(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    struct grpc_stream *st = stream_of(session, frame->hd.stream_id);
    (void)ud;
    if (st && st->rst_after_end && frame->hd.type == NGHTTP2_HEADERS &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        !nghttp2_session_get_stream_remote_close(session, st->id))
        (void)nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t error_code, void *ud)
{
    struct grpc_conn *c = ud;
    struct grpc_stream *st = stream_of(session, id);
    if (c->closed || !st)
        return 0;
    (void)nghttp2_session_set_stream_user_data(session, id, NULL);
    if (c->ops->stream_close)
        c->ops->stream_close(st, error_code);
    return 0;
}

/* --- sessions ------------------------------------------------------------------------------ */

static int session_new(struct grpc_conn *c, bool server)
{
    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs) != 0)
        return -ENOMEM;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_sent);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    int r = server ? nghttp2_session_server_new(&c->h2, cbs, c)
                   : nghttp2_session_client_new(&c->h2, cbs, c);
    nghttp2_session_callbacks_del(cbs);
    return r != 0 ? -ENOMEM : 0;
}

int grpc_conn_open(struct grpc_conn *c, int fd, bool server)
{
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, GRPC_MAX_STREAMS}};
    if (session_new(c, server) < 0)
        return -ENOMEM;
    if (nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, server ? iv : NULL,
                                server ? ELEMENTSOF(iv) : 0) != 0) {
        nghttp2_session_del(c->h2);
        c->h2 = NULL;
        return -ENOMEM;
    }
    c->fd = fd;
    ev_io_set(&c->rio, fd, EV_READ);
    ev_io_set(&c->wio, fd, EV_WRITE);
    c->closed = false;
    return 0;
}
