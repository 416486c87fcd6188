/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_grpc.c - kubelet/grpc in one process: a server on a socket in a temporary
 * directory and the unary client from grpc.h on the same libev loop, plus raw sockets speaking
 * hand-made HTTP/2 frames (HPACK literals without indexing) for what the client cannot do: a
 * server stream, a cancel, garbage, truncated frames, a message over the cap.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include "base/buf.h"
#include "kubelet/grpc.h"

static struct ev_loop *loop;
static char dir[64];
static char sock[96];
static int handled, cancelled;
static struct grpc_call *held;

/* --- handlers ----------------------------------------------------------------------------- */

static void h_echo(struct grpc_call *call, const uint8_t *msg, size_t len, void *ud)
{
    (void)ud;
    handled++;
    CU_ASSERT_EQUAL(grpc_call_reply(call, msg, len), 0);
    grpc_call_finish(call, GRPC_OK, NULL);
}

static void h_fail(struct grpc_call *call, const uint8_t *msg, size_t len, void *ud)
{
    handled++;
    grpc_call_finish(call, GRPC_INVALID_ARGUMENT, len ? (const char *)msg : ud);
}

static void h_stream(struct grpc_call *call, const uint8_t *msg, size_t len, void *ud)
{
    (void)msg;
    (void)len;
    (void)ud;
    handled++;
    for (int i = 0; i < 3; i++) {
        char m[3] = {'m', (char)('0' + i), '\0'};
        CU_ASSERT_EQUAL(grpc_call_reply(call, (const uint8_t *)m, 2), 0);
    }
    grpc_call_finish(call, GRPC_OK, NULL);
}

static void on_cancel(struct grpc_call *call, void *ud)
{
    (void)ud;
    CU_ASSERT_PTR_EQUAL(call, held);
    held = NULL;
    cancelled++;
}

/* Never finishes: a unary call left waiting, or a server stream that sent one message. */
static void hold_call(struct grpc_call *call, bool send_first)
{
    handled++;
    held = call;
    grpc_call_on_cancel(call, on_cancel, NULL);
    if (send_first)
        CU_ASSERT_EQUAL(grpc_call_reply(call, (const uint8_t *)"first", 5), 0);
}

static void h_hold(struct grpc_call *call, const uint8_t *msg, size_t len, void *ud)
{
    (void)msg;
    (void)len;
    (void)ud;
    hold_call(call, false);
}

static void h_hold_stream(struct grpc_call *call, const uint8_t *msg, size_t len, void *ud)
{
    (void)msg;
    (void)len;
    (void)ud;
    hold_call(call, true);
}

static char no_message[] = "no message";

static const struct grpc_method methods[] = {
        {"/t.T/Echo", false, h_echo, NULL},
        {"/t.T/Fail", false, h_fail, no_message},
        {"/t.T/Stream", true, h_stream, NULL},
        {"/t.T/Hold", false, h_hold, NULL},
        {"/t.T/HoldStream", true, h_hold_stream, NULL},
};

static struct grpc_server *server(void)
{
    struct grpc_server *s = NULL;
    struct err err = {""};
    int r = grpc_server_new(loop, sock, methods, sizeof(methods) / sizeof(methods[0]), &s, &err);
    CU_ASSERT_EQUAL(r, 0);
    if (r < 0)
        fprintf(stderr, "grpc_server_new: %s\n", err.msg);
    handled = cancelled = 0;
    held = NULL;
    return s;
}

/* --- the loop ----------------------------------------------------------------------------- */

static void on_tick(struct ev_loop *l, ev_timer *w, int revents)
{
    (void)l;
    (void)w;
    (void)revents;
}

/* Runs the loop until cond(arg) holds or `secs` pass; returns whether it held. */
static bool spin(bool (*cond)(void *), void *arg, double secs)
{
    ev_timer tick;
    ev_timer_init(&tick, on_tick, 0.002, 0.002);
    ev_timer_start(loop, &tick);
    ev_now_update(loop);
    double end = ev_now(loop) + secs;
    bool ok;
    while (!(ok = cond(arg)) && ev_now(loop) < end)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &tick);
    return ok;
}

/* --- the client side ---------------------------------------------------------------------- */

struct result {
    int calls;
    enum grpc_status status;
    char message[512];
    struct buf resp;
};

static void done(enum grpc_status status, const char *message, const uint8_t *resp, size_t len,
                 void *userdata)
{
    struct result *res = userdata;
    res->calls++;
    res->status = status;
    (void)snprintf(res->message, sizeof(res->message), "%s", message ? message : "");
    buf_init(&res->resp, (size_t)8 << 20);
    if (resp) {
        CU_ASSERT_EQUAL(buf_add(&res->resp, resp, len), 0);
    } else {
        CU_ASSERT_EQUAL(len, 0);
    }
}

static bool called(void *arg)
{
    return ((struct result *)arg)->calls > 0;
}

/* One unary call to completion: returns grpc_unary()'s value; the result in *res. */
static int call(const char *method, const void *msg, size_t len, double timeout, struct result *res)
{
    *res = (struct result){0};
    int r = grpc_unary(loop, sock, method, msg, len, timeout, done, res);
    if (r < 0)
        return r;
    CU_ASSERT_EQUAL(res->calls, 0); /* never from inside grpc_unary */
    CU_ASSERT(spin(called, res, 3.0));
    CU_ASSERT_EQUAL(res->calls, 1);
    return r;
}

/* --- raw HTTP/2 peers --------------------------------------------------------------------- */

struct raw {
    struct buf in;
    struct buf data; /* DATA payload of stream 1 */
    int fd;
    int messages; /* gRPC messages in DATA on stream 1 */
    bool eof;
    bool ended;     /* HEADERS with END_STREAM on stream 1 */
    bool rst;       /* RST_STREAM on stream 1 */
    char first[32]; /* the first message's bytes */
};

static void frame(struct buf *b, uint8_t type, uint8_t flags, uint32_t sid, const void *p, size_t n)
{
    uint8_t h[9] = {
            (uint8_t)(n >> 16),   (uint8_t)(n >> 8),    (uint8_t)n,          type,        flags,
            (uint8_t)(sid >> 24), (uint8_t)(sid >> 16), (uint8_t)(sid >> 8), (uint8_t)sid};
    CU_ASSERT_EQUAL(buf_add(b, h, 9), 0);
    CU_ASSERT_EQUAL(buf_add(b, p, n), 0);
}

static void literal(struct buf *b, const char *name, const char *value)
{
    uint8_t nl = (uint8_t)strlen(name), vl = (uint8_t)strlen(value), zero = 0;
    CU_ASSERT_EQUAL(buf_add(b, &zero, 1), 0);
    CU_ASSERT_EQUAL(buf_add(b, &nl, 1), 0);
    CU_ASSERT_EQUAL(buf_adds(b, name), 0);
    CU_ASSERT_EQUAL(buf_add(b, &vl, 1), 0);
    CU_ASSERT_EQUAL(buf_adds(b, value), 0);
}

/* Preface, empty SETTINGS and the request HEADERS (END_STREAM when `end`) on stream 1. */
static void request_start(struct buf *b, const char *path, bool end)
{
    struct buf hb;
    buf_init(&hb, 4096);
    literal(&hb, ":method", "POST");
    literal(&hb, ":scheme", "http");
    literal(&hb, ":path", path);
    literal(&hb, ":authority", "localhost");
    literal(&hb, "content-type", "application/grpc");
    literal(&hb, "te", "trailers");
    CU_ASSERT_EQUAL(buf_adds(b, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0);
    frame(b, 4, 0, 0, "", 0);
    frame(b, 1, 0x4 | (end ? 0x1 : 0), 1, hb.data, hb.len);
    buf_free(&hb);
}

/* A DATA frame on stream 1 with a gRPC prefix saying `claimed` bytes and `n` bytes of `msg`. */
static void request_data(struct buf *b, size_t claimed, const char *msg, size_t n, bool end)
{
    struct buf d;
    buf_init(&d, 1 << 20);
    uint8_t p[5] = {0, (uint8_t)(claimed >> 24), (uint8_t)(claimed >> 16), (uint8_t)(claimed >> 8),
                    (uint8_t)claimed};
    CU_ASSERT_EQUAL(buf_add(&d, p, 5), 0);
    CU_ASSERT_EQUAL(buf_add(&d, msg, n), 0);
    frame(b, 0, end ? 1 : 0, 1, d.data, d.len);
    buf_free(&d);
}

static int raw_open(struct raw *r, const struct buf *b)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    *r = (struct raw){.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    buf_init(&r->in, 1 << 20);
    buf_init(&r->data, 1 << 20);
    memcpy(sa.sun_path, sock, strlen(sock) + 1); /* short: a temporary directory */
    if (r->fd < 0 || connect(r->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return -errno;
    if (b && write(r->fd, b->data, b->len) != (ssize_t)b->len)
        return -EIO;
    return fcntl(r->fd, F_SETFL, O_NONBLOCK);
}

static void raw_close(struct raw *r)
{
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    buf_free(&r->in);
    buf_free(&r->data);
}

static void raw_frame(struct raw *r, const uint8_t *f, uint32_t len)
{
    uint32_t sid = ((uint32_t)f[5] << 24 | (uint32_t)f[6] << 16 | (uint32_t)f[7] << 8 | f[8]);
    if (sid != 1)
        return;
    if (f[3] == 0) {
        CU_ASSERT_EQUAL(buf_add(&r->data, f + 9, len), 0);
    }
    if (f[3] == 1 && (f[4] & 1))
        r->ended = true;
    if (f[3] == 3)
        r->rst = true;
    /* Count whole messages so far. */
    r->messages = 0;
    for (size_t off = 0; off + 5 <= r->data.len;) {
        const uint8_t *m = (const uint8_t *)r->data.data + off;
        uint32_t n = (uint32_t)m[1] << 24 | (uint32_t)m[2] << 16 | (uint32_t)m[3] << 8 | m[4];
        if (off + 5 + n > r->data.len)
            break;
        if (r->messages++ == 0)
            (void)snprintf(r->first, sizeof(r->first), "%.*s", (int)n, (const char *)m + 5);
        off += 5 + n;
    }
}

/* Reads what is there and parses whole frames. */
static bool raw_poll(struct raw *r)
{
    char tmp[16384];
    ssize_t n;
    while ((n = read(r->fd, tmp, sizeof(tmp))) > 0)
        CU_ASSERT_EQUAL(buf_add(&r->in, tmp, (size_t)n), 0);
    if (n == 0)
        r->eof = true;
    size_t off = 0;
    while (off + 9 <= r->in.len) {
        const uint8_t *f = (const uint8_t *)r->in.data + off;
        uint32_t len = (uint32_t)f[0] << 16 | (uint32_t)f[1] << 8 | f[2];
        if (off + 9 + len > r->in.len)
            break;
        raw_frame(r, f, len);
        off += 9 + len;
    }
    buf_consume(&r->in, off);
    return r->eof;
}

static bool raw_ended(void *arg)
{
    struct raw *r = arg;
    raw_poll(r);
    return r->ended || r->eof;
}

static bool raw_has_message(void *arg)
{
    struct raw *r = arg;
    raw_poll(r);
    return r->messages > 0 || r->eof;
}

static bool raw_reset(void *arg)
{
    struct raw *r = arg;
    raw_poll(r);
    return r->rst || r->eof;
}

static bool raw_has_bytes(void *arg)
{
    struct raw *r = arg;
    char c;
    ssize_t n = recv(r->fd, &c, 1, MSG_PEEK);
    return n > 0;
}

static bool raw_eof(void *arg)
{
    return raw_poll(arg);
}

static bool is_cancelled(void *arg)
{
    (void)arg;
    return cancelled > 0;
}

/* --- tests -------------------------------------------------------------------------------- */

static void test_echo(void)
{
    struct grpc_server *s = server();
    struct result res;
    CU_ASSERT_EQUAL(call("/t.T/Echo", "hello", 5, 2.0, &res), 0);
    CU_ASSERT_EQUAL(res.status, GRPC_OK);
    CU_ASSERT_EQUAL(res.resp.len, 5);
    CU_ASSERT_NSTRING_EQUAL(res.resp.data, "hello", 5);
    buf_free(&res.resp);
    /* An empty message is a message too. */
    CU_ASSERT_EQUAL(call("/t.T/Echo", "", 0, 2.0, &res), 0);
    CU_ASSERT_EQUAL(res.status, GRPC_OK);
    CU_ASSERT_EQUAL(res.resp.len, 0);
    buf_free(&res.resp);
    CU_ASSERT_EQUAL(handled, 2);
    CU_ASSERT_EQUAL(grpc_server_calls(s), 0);
    grpc_server_free(s);
}

static void test_error_message_round_trip(void)
{
    struct grpc_server *s = server();
    struct result res;
    const char *msg = "bad: 100% sure\n\"caf\xc3\xa9\" %41";
    CU_ASSERT_EQUAL(call("/t.T/Fail", msg, strlen(msg), 2.0, &res), 0);
    CU_ASSERT_EQUAL(res.status, GRPC_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(res.message, msg);
    CU_ASSERT_EQUAL(res.resp.len, 0);
    buf_free(&res.resp);
    grpc_server_free(s);
}

static void test_unknown_path(void)
{
    struct grpc_server *s = server();
    struct result res;
    CU_ASSERT_EQUAL(call("/t.T/Nope", "x", 1, 2.0, &res), 0);
    CU_ASSERT_EQUAL(res.status, GRPC_UNIMPLEMENTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(res.message, "/t.T/Nope"));
    buf_free(&res.resp);
    CU_ASSERT_EQUAL(handled, 0);
    grpc_server_free(s);
}

static void test_server_stream(void)
{
    struct grpc_server *s = server();
    struct buf b;
    struct raw r;
    buf_init(&b, 4096);
    request_start(&b, "/t.T/Stream", false);
    request_data(&b, 0, "", 0, true);
    CU_ASSERT_EQUAL_FATAL(raw_open(&r, &b), 0);
    CU_ASSERT(spin(raw_ended, &r, 2.0));
    CU_ASSERT_EQUAL(r.messages, 3);
    CU_ASSERT_STRING_EQUAL(r.first, "m0");
    CU_ASSERT_EQUAL(r.data.len, (size_t)3 * 7);
    CU_ASSERT_NSTRING_EQUAL(r.data.data + 14, "\0\0\0\0\2m2", 7);
    CU_ASSERT(r.ended);
    /* The unary client refuses a stream of three: not exactly one message. */
    struct result res;
    CU_ASSERT_EQUAL(call("/t.T/Stream", "", 0, 2.0, &res), 0);
    CU_ASSERT_EQUAL(res.status, GRPC_INTERNAL);
    buf_free(&res.resp);
    raw_close(&r);
    buf_free(&b);
    grpc_server_free(s);
}

static void test_large_message(void)
{
    struct grpc_server *s = server();
    size_t n = (size_t)100 * 1024;
    char *msg = malloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(msg);
    if (!msg)
        return;
    for (size_t i = 0; i < n; i++)
        msg[i] = (char)(i * 7 + i / 251);
    struct result res;
    CU_ASSERT_EQUAL(call("/t.T/Echo", msg, n, 2.0, &res), 0);
    CU_ASSERT_EQUAL(res.status, GRPC_OK);
    CU_ASSERT_EQUAL(res.resp.len, n);
    CU_ASSERT(res.resp.len == n && memcmp(res.resp.data, msg, n) == 0);
    buf_free(&res.resp);
    free(msg);
    grpc_server_free(s);
}

static void test_over_the_cap(void)
{
    struct grpc_server *s = server();
    struct result res;
    /* The client refuses to send one. */
    CU_ASSERT_EQUAL(grpc_unary(loop, sock, "/t.T/Echo", (const uint8_t *)"", GRPC_MAX_MESSAGE + 1,
                               1.0, done, &res),
                    -E2BIG);
    /* The server answers a prefix claiming too much at once, with a reset, no handler. */
    struct buf b;
    struct raw r;
    buf_init(&b, 4096);
    request_start(&b, "/t.T/Echo", false);
    request_data(&b, GRPC_MAX_MESSAGE + 1, "abc", 3, false);
    CU_ASSERT_EQUAL_FATAL(raw_open(&r, &b), 0);
    CU_ASSERT(spin(raw_ended, &r, 2.0));
    CU_ASSERT(r.ended);
    CU_ASSERT(spin(raw_reset, &r, 1.0));
    CU_ASSERT_EQUAL(r.messages, 0);
    CU_ASSERT_EQUAL(handled, 0);
    raw_close(&r);
    buf_free(&b);
    grpc_server_free(s);
}

static void test_timeout(void)
{
    struct grpc_server *s = server();
    struct result res;
    double t0 = ev_time();
    CU_ASSERT_EQUAL(call("/t.T/Hold", "x", 1, 0.1, &res), 0);
    double took = ev_time() - t0;
    CU_ASSERT_EQUAL(res.status, GRPC_DEADLINE_EXCEEDED);
    CU_ASSERT(took >= 0.09 && took < 1.0);
    buf_free(&res.resp);
    /* The client closed its connection: the server's call is cancelled, once. */
    CU_ASSERT(spin(is_cancelled, NULL, 1.0));
    CU_ASSERT_EQUAL(cancelled, 1);
    CU_ASSERT_EQUAL(grpc_server_calls(s), 0);
    grpc_server_free(s);
}

static void test_cancel_by_reset(void)
{
    struct grpc_server *s = server();
    struct buf b;
    struct raw r;
    buf_init(&b, 4096);
    request_start(&b, "/t.T/HoldStream", false);
    request_data(&b, 0, "", 0, true);
    CU_ASSERT_EQUAL_FATAL(raw_open(&r, &b), 0);
    CU_ASSERT(spin(raw_has_message, &r, 2.0));
    CU_ASSERT_EQUAL(r.messages, 1);
    CU_ASSERT_STRING_EQUAL(r.first, "first");
    CU_ASSERT_EQUAL(grpc_server_calls(s), 1);
    buf_reset(&b);
    uint8_t cancel[4] = {0, 0, 0, 8};
    frame(&b, 3, 0, 1, cancel, 4);
    CU_ASSERT_EQUAL(write(r.fd, b.data, b.len), (ssize_t)b.len);
    CU_ASSERT(spin(is_cancelled, NULL, 1.0));
    CU_ASSERT_EQUAL(cancelled, 1);
    CU_ASSERT_EQUAL(grpc_server_calls(s), 0);
    raw_close(&r);
    buf_free(&b);
    grpc_server_free(s);
}

/* Garbage, a truncated frame and a peer gone mid-stream harm no other connection. */
static void test_bad_peers(void)
{
    struct grpc_server *s = server();
    struct buf garbage, trunc, hold;
    struct raw g, t, h;
    buf_init(&garbage, 4096);
    buf_init(&trunc, 4096);
    buf_init(&hold, 4096);
    CU_ASSERT_EQUAL(buf_adds(&garbage, "GET / HTTP/1.1\r\nHost: x\r\n\r\n\x00\xff garbage"), 0);
    request_start(&trunc, "/t.T/Echo", false);
    CU_ASSERT_EQUAL(buf_add(&trunc, "\x00\x01\x00\x00\x01\x01", 6), 0); /* 256 claimed */
    request_start(&hold, "/t.T/HoldStream", false);
    request_data(&hold, 0, "", 0, true);
    CU_ASSERT_EQUAL_FATAL(raw_open(&g, &garbage), 0);
    CU_ASSERT_EQUAL_FATAL(raw_open(&t, &trunc), 0);
    CU_ASSERT_EQUAL_FATAL(raw_open(&h, &hold), 0);
    struct result res;
    CU_ASSERT_EQUAL(call("/t.T/Echo", "still", 5, 2.0, &res), 0);
    CU_ASSERT_EQUAL(res.status, GRPC_OK);
    buf_free(&res.resp);
    CU_ASSERT(spin(raw_eof, &g, 1.0)); /* the garbage peer was dropped */
    CU_ASSERT_EQUAL(grpc_server_calls(s), 1);
    raw_close(&h); /* gone mid-stream */
    CU_ASSERT(spin(is_cancelled, NULL, 1.0));
    CU_ASSERT_EQUAL(grpc_server_calls(s), 0);
    shutdown(t.fd, SHUT_WR); /* the truncated frame never completes */
    CU_ASSERT(spin(raw_eof, &t, 1.0));
    CU_ASSERT_EQUAL(call("/t.T/Echo", "after", 5, 2.0, &res), 0);
    CU_ASSERT_EQUAL(res.status, GRPC_OK);
    buf_free(&res.resp);
    raw_close(&g);
    raw_close(&t);
    buf_free(&garbage);
    buf_free(&trunc);
    buf_free(&hold);
    grpc_server_free(s);
}

static void test_connection_limit(void)
{
    struct grpc_server *s = server();
    struct raw r[GRPC_MAX_CONNS + 1];
    for (int i = 0; i <= GRPC_MAX_CONNS; i++)
        CU_ASSERT_EQUAL_FATAL(raw_open(&r[i], NULL), 0);
    CU_ASSERT(spin(raw_eof, &r[GRPC_MAX_CONNS], 1.0));
    raw_poll(&r[0]);
    CU_ASSERT(!r[0].eof);
    for (int i = 0; i <= GRPC_MAX_CONNS; i++)
        raw_close(&r[i]);
    grpc_server_free(s);
}

/* Out of file descriptors, accept() fails while the connection stays queued: the server must
 * wait, not spin on a socket that stays readable, and serve the connection once it can. */
static void test_out_of_descriptors(void)
{
    struct grpc_server *s = server();
    struct rlimit old, low;
    CU_ASSERT_EQUAL_FATAL(getrlimit(RLIMIT_NOFILE, &old), 0);
    struct raw r;
    CU_ASSERT_EQUAL_FATAL(raw_open(&r, NULL), 0);
    low = old;
    low.rlim_cur = (rlim_t)r.fd + 1; /* no descriptor above the client's */
    CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_NOFILE, &low), 0);
    int fill[64], n = 0;
    while (n < 64 && (fill[n] = dup(0)) >= 0) /* and none free below it */
        n++;
    unsigned before = ev_iteration(loop);
    ev_timer stop;
    ev_timer_init(&stop, on_tick, 0.3, 0);
    ev_timer_start(loop, &stop);
    ev_now_update(loop);
    double end = ev_now(loop) + 0.3;
    while (ev_now(loop) < end)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &stop);
    unsigned woken = ev_iteration(loop) - before;
    CU_ASSERT(woken < 20); /* a spinning watcher wakes many thousand times in 0.3 s */
    while (n > 0)
        close(fill[--n]);
    CU_ASSERT_EQUAL(setrlimit(RLIMIT_NOFILE, &old), 0);
    /* With descriptors again, the queued connection is accepted (SETTINGS arrive). Not under
     * valgrind: it emulates the lowered limit by accepting the connection and closing it. */
    if (!RUNNING_ON_VALGRIND)
        CU_ASSERT(spin(raw_has_bytes, &r, 2.0));
    raw_close(&r);
    grpc_server_free(s);
}

static void test_socket_file(void)
{
    struct stat st;
    /* A socket file is replaced; the new one has mode 0600 and goes with the server. */
    struct grpc_server *s1 = server(), *s2 = server();
    CU_ASSERT_EQUAL(stat(sock, &st), 0);
    CU_ASSERT(S_ISSOCK(st.st_mode));
    CU_ASSERT_EQUAL(st.st_mode & 07777, 0600);
    grpc_server_free(s1); /* not its socket any more: left alone */
    CU_ASSERT_EQUAL(stat(sock, &st), 0);
    struct result res;
    CU_ASSERT_EQUAL(call("/t.T/Echo", "x", 1, 2.0, &res), 0);
    CU_ASSERT_EQUAL(res.status, GRPC_OK);
    buf_free(&res.resp);
    grpc_server_free(s2);
    CU_ASSERT_EQUAL(stat(sock, &st), -1);
    /* Nobody listens: UNAVAILABLE, later. */
    CU_ASSERT_EQUAL(call("/t.T/Echo", "x", 1, 2.0, &res), 0);
    CU_ASSERT_EQUAL(res.status, GRPC_UNAVAILABLE);
    buf_free(&res.resp);
    /* A regular file is not replaced. */
    int fd = open(sock, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    CU_ASSERT(fd >= 0);
    close(fd);
    struct grpc_server *s3 = NULL;
    struct err err = {""};
    CU_ASSERT_EQUAL(grpc_server_new(loop, sock, methods, 1, &s3, &err), -EEXIST);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a socket"));
    CU_ASSERT_EQUAL(unlink(sock), 0);
}

static void test_path_too_long(void)
{
    char path[200];
    memset(path, 'a', sizeof(path) - 1);
    path[sizeof(path) - 1] = '\0';
    struct grpc_server *s = NULL;
    struct err err = {""};
    CU_ASSERT_EQUAL(grpc_server_new(loop, path, methods, 1, &s, &err), -ENAMETOOLONG);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "unix socket path"));
    struct result res = {0};
    CU_ASSERT_EQUAL(grpc_unary(loop, path, "/t.T/Echo", (const uint8_t *)"", 0, 1.0, done, &res),
                    -ENAMETOOLONG);
    CU_ASSERT_EQUAL(res.calls, 0);
}

static int suite_init(void)
{
    (void)snprintf(dir, sizeof(dir), "/tmp/hostdevd-grpc.XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    (void)snprintf(sock, sizeof(sock), "%s/plugin.sock", dir);
    loop = ev_loop_new(EVFLAG_AUTO);
    return loop ? 0 : -1;
}

static int suite_clean(void)
{
    (void)unlink(sock);
    (void)rmdir(dir);
    ev_loop_destroy(loop);
    return 0;
}

static CU_TestInfo tests[] = {
        {"unary echo", test_echo},
        {"error status and percent-encoded message", test_error_message_round_trip},
        {"unknown path is UNIMPLEMENTED", test_unknown_path},
        {"server stream of three", test_server_stream},
        {"100 KB message across DATA frames", test_large_message},
        {"message over the cap", test_over_the_cap},
        {"client timeout cancels the server call", test_timeout},
        {"RST_STREAM cancels a server stream", test_cancel_by_reset},
        {"bad peers harm no other connection", test_bad_peers},
        {"connection limit", test_connection_limit},
        {"out of file descriptors: waits, then serves", test_out_of_descriptors},
        {"socket file: mode, replace, remove", test_socket_file},
        {"path too long", test_path_too_long},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo grpc_suites[] = {
        {"grpc", suite_init, suite_clean, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
