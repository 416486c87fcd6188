/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubelet/grpcserver.c - the gRPC server of kubelet/grpc.h: the listening unix socket, accept,
 * one connection (kubelet/grpcconn.h) per client, the request checks (POST, application/grpc,
 * a path in the method table, exactly one message) and the dispatch to the method's handler,
 * and `struct grpc_call` with its reply, finish and cancel API.
 *
 * A call lives from its request HEADERS to the stream's close (or the connection's end); the
 * user sees it from the handler to finish or cancel. Answers only go through the connection's
 * stream API, which submits and never writes from here. Does not log.
 */
#include "kubelet/grpc.h"

#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "kubelet/grpcconn.h"

#define ACCEPTS_PER_EVENT 16  /* accept()s per event, then let other watchers run */
#define ACCEPT_PAUSE      0.5 /* seconds without accept() when out of fds */
#define PATH_MAX_LEN      256 /* :path bytes kept (longer: unknown) */
#define LISTEN_BACKLOG    64

struct server_conn {
    struct grpc_conn conn; /* its streams are the calls' */
    struct grpc_server *srv;
    struct server_conn *prev, *next; /* in srv->conns */
};

struct grpc_call {
    struct grpc_stream st;
    const struct grpc_method *m;
    char path[PATH_MAX_LEN];
    bool path_long, post, grpc_type;
    bool dispatched; /* the handler ran */
    bool finished;   /* grpc_call_finish() or an error answer: no cancel callback */
    void (*on_cancel)(struct grpc_call *call, void *ud);
    void *cancel_ud;
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
    struct server_conn *conns;
    size_t n_conns;
};

/* --- calls --------------------------------------------------------------------------------- */

static void call_free(struct grpc_call *call)
{
    grpc_stream_release(&call->st);
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

/* An error answer before the handler ran: Trailers-Only, then RST_STREAM if the request is
 * still coming; further request DATA is dropped. */
static void call_refuse(struct grpc_call *call, int http, enum grpc_status status,
                        const char *message)
{
    if (call->finished || call->dispatched)
        return;
    call->finished = true;
    buf_free(&call->st.in);
    grpc_stream_end(&call->st, http, status, message);
}

int grpc_call_reply(struct grpc_call *call, const uint8_t *msg, size_t len)
{
    if (call->finished || call->st.c->closed)
        return -EPIPE;
    return grpc_stream_send(&call->st, msg, len);
}

void grpc_call_finish(struct grpc_call *call, enum grpc_status status, const char *message)
{
    if (call->finished || call->st.c->closed)
        return;
    call->finished = true;
    grpc_stream_end(&call->st, 200, status, message);
}

void grpc_call_on_cancel(struct grpc_call *call, void (*cb)(struct grpc_call *call, void *ud),
                         void *ud)
{
    call->on_cancel = cb;
    call->cancel_ud = ud;
}

/* --- requests: the connection's ops -------------------------------------------------------- */

static struct grpc_stream *on_stream_open(struct grpc_conn *c)
{
    struct grpc_call *call = calloc(1, sizeof(*call));
    if (!call)
        return NULL;
    grpc_stream_init(&call->st, c, call);
    return &call->st;
}

static void on_request_header(struct grpc_stream *st, bool trailers, const uint8_t *name,
                              size_t namelen, const uint8_t *value, size_t valuelen)
{
    struct grpc_call *call = st->ud;
    if (trailers)
        return;
    if (grpc_header_is(name, namelen, ":path")) {
        call->path_long = valuelen >= sizeof(call->path);
        if (!call->path_long) {
            memcpy(call->path, value, valuelen);
            call->path[valuelen] = '\0';
        }
    } else if (grpc_header_is(name, namelen, ":method")) {
        call->post = grpc_header_is(value, valuelen, "POST");
    } else if (grpc_header_is(name, namelen, "content-type")) {
        static const char grpc[] = "application/grpc";
        size_t n = sizeof(grpc) - 1;
        call->grpc_type = valuelen >= n && memcmp(value, grpc, n) == 0 &&
                          (valuelen == n || value[n] == '+' || value[n] == ';');
    }
}

/* The request HEADERS are complete: a method we serve, POST, application/grpc. */
static void on_request(struct grpc_stream *st)
{
    struct grpc_call *call = st->ud;
    const struct grpc_server *s = ((struct server_conn *)st->c->ud)->srv;
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
static void on_request_data(struct grpc_stream *st, const uint8_t *data, size_t len)
{
    struct grpc_call *call = st->ud;
    if (call->finished || call->dispatched)
        return;
    if (buf_add(&st->in, data, len) < 0) {
        call_refuse(call, 200, GRPC_RESOURCE_EXHAUSTED, "request message over the size limit");
        return;
    }
    if (st->in.len < GRPC_PREFIX)
        return;
    const uint8_t *p = (const uint8_t *)st->in.data;
    uint32_t n = grpc_frame_len(p);
    if (p[0] != 0)
        call_refuse(call, 200, GRPC_INTERNAL, "compressed message without grpc-encoding");
    else if (n > GRPC_MAX_MESSAGE)
        call_refuse(call, 200, GRPC_RESOURCE_EXHAUSTED, "request message over the size limit");
    else if (st->in.len > GRPC_PREFIX + (size_t)n)
        call_refuse(call, 200, GRPC_INTERNAL, "more than one request message");
}

/* The request ended: exactly one whole message runs the handler. */
static void on_request_end(struct grpc_stream *st)
{
    struct grpc_call *call = st->ud;
    if (call->finished || call->dispatched)
        return;
    if (!grpc_frame_one(&st->in)) {
        call_refuse(call, 200, GRPC_INTERNAL, "truncated or missing request message");
        return;
    }
    call->dispatched = true;
    call->m->handler(call, (const uint8_t *)st->in.data + GRPC_PREFIX, st->in.len - GRPC_PREFIX,
                     call->m->userdata);
    buf_free(&st->in); /* the call lives on: only nghttp2 processing frees it */
}

static void on_call_close(struct grpc_stream *st, uint32_t error_code)
{
    (void)error_code;
    call_drop(st->ud);
}

/* --- connections and the listening socket -------------------------------------------------- */

/* Cancels the connection's calls and frees it; `goodbye` tries to send a GOAWAY first. */
static void server_conn_free(struct server_conn *sc, bool goodbye)
{
    struct grpc_server *s = sc->srv;
    if (goodbye)
        grpc_conn_goaway(&sc->conn, true);
    grpc_conn_shutdown(&sc->conn); /* the call API does nothing from here */
    struct grpc_stream *next;
    for (struct grpc_stream *st = sc->conn.streams; st; st = next) {
        next = st->next; /* a cancel callback frees nothing but its own call */
        call_drop(st->ud);
    }
    if (sc->prev)
        sc->prev->next = sc->next;
    else
        s->conns = sc->next;
    if (sc->next)
        sc->next->prev = sc->prev;
    s->n_conns--;
    free(sc);
}

static void on_conn_end(struct grpc_conn *c)
{
    server_conn_free(c->ud, false);
}

static const struct grpc_conn_ops server_ops = {
        .stream_open = on_stream_open,
        .header = on_request_header,
        .request = on_request,
        .data = on_request_data,
        .remote_end = on_request_end,
        .stream_close = on_call_close,
        .end = on_conn_end,
};

static int server_conn_new(struct grpc_server *s, int fd)
{
    struct server_conn *sc = calloc(1, sizeof(*sc));
    if (!sc)
        return -ENOMEM;
    grpc_conn_init(&sc->conn, s->loop, &server_ops, sc);
    sc->srv = s;
    if (grpc_conn_open(&sc->conn, fd, true) < 0) {
        free(sc);
        return -ENOMEM;
    }
    sc->next = s->conns;
    if (s->conns)
        s->conns->prev = sc;
    s->conns = sc;
    s->n_conns++;
    grpc_conn_start(&sc->conn); /* the server SETTINGS go out at once */
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
    int r = grpc_conn_addr(&sa, path, ret_err);
    if (r < 0)
        return r;
    struct grpc_server *s = calloc(1, sizeof(*s));
    if (!s)
        return err_set(ret_err, -ENOMEM, "out of memory");
    s->loop = loop;
    s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    r = s->fd < 0 ? -errno : 0;
    s->path = strdup(path);
    if (r == 0 && (!s->path || copy_methods(s, methods, n_methods) < 0))
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
    free(s->path);
    free(s);
    return NULL;
}

size_t grpc_server_calls(const struct grpc_server *s)
{
    size_t n = 0;
    for (const struct server_conn *sc = s->conns; sc; sc = sc->next)
        for (const struct grpc_stream *st = sc->conn.streams; st; st = st->next) {
            const struct grpc_call *call = st->ud;
            n += call->dispatched && !call->finished;
        }
    return n;
}
