/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_grpc.c - kubelet/grpc's server side on arbitrary client bytes.
 *
 * One server (on a socket in a temporary directory, created on the first input) serves an
 * echo, an error, a server stream of three and a stream that never ends. Each input is written
 * as a client connection's whole byte stream, the write side is shut, and the server's output is
 * drained until it closes the connection. Checks that the server always closes it (within 5 s:
 * a hang aborts) and that no call is left open afterwards (every call finished or cancelled).
 */
#include <errno.h>
#include <ev.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kubelet/grpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ev_loop *loop;
static struct grpc_server *server;
static char dir[64], sock[96];

static void echo(struct grpc_call *call, const uint8_t *msg, size_t len, void *ud)
{
    (void)ud;
    (void)grpc_call_reply(call, msg, len);
    grpc_call_finish(call, GRPC_OK, NULL);
}

static void fail(struct grpc_call *call, const uint8_t *msg, size_t len, void *ud)
{
    (void)msg;
    (void)len;
    (void)ud;
    grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "no: 100% \xff\n");
}

static void three(struct grpc_call *call, const uint8_t *msg, size_t len, void *ud)
{
    (void)ud;
    for (int i = 0; i < 3; i++)
        (void)grpc_call_reply(call, msg, len);
    grpc_call_finish(call, GRPC_OK, NULL);
}

static void on_cancel(struct grpc_call *call, void *ud)
{
    (void)call;
    (void)ud;
}

static void hold(struct grpc_call *call, const uint8_t *msg, size_t len, void *ud)
{
    (void)ud;
    grpc_call_on_cancel(call, on_cancel, NULL);
    (void)grpc_call_reply(call, msg, len);
}

static void cleanup(void)
{
    server = grpc_server_free(server);
    (void)rmdir(dir);
    ev_loop_destroy(loop);
}

static void setup(void)
{
    static const struct grpc_method methods[] = {
            {"/t.T/Echo", false, echo, NULL},
            {"/t.T/Fail", false, fail, NULL},
            {"/t.T/Stream", true, three, NULL},
            {"/t.T/Hold", true, hold, NULL},
    };
    (void)snprintf(dir, sizeof(dir), "/tmp/hostdevd-fuzz-grpc.XXXXXX");
    if (!mkdtemp(dir))
        abort();
    (void)snprintf(sock, sizeof(sock), "%s/s", dir);
    loop = ev_loop_new(EVFLAG_AUTO);
    struct err err;
    if (!loop || grpc_server_new(loop, sock, methods, 4, &server, &err) < 0)
        abort();
    atexit(cleanup);
}

struct peer {
    ev_io io;
    const uint8_t *data;
    size_t size, off;
    bool closed;
};

static void on_peer(struct ev_loop *l, ev_io *w, int revents)
{
    struct peer *p = (struct peer *)w;
    if ((revents & EV_WRITE) && p->off < p->size) {
        ssize_t n = send(w->fd, p->data + p->off, p->size - p->off, MSG_NOSIGNAL);
        if (n > 0)
            p->off += (size_t)n;
        else if (n < 0 && errno != EAGAIN)
            p->off = p->size; /* the server hung up: stop writing, read to the end */
        if (p->off == p->size) {
            (void)shutdown(w->fd, SHUT_WR);
            ev_io_stop(l, w);
            ev_io_set(w, w->fd, EV_READ);
            ev_io_start(l, w);
        }
    }
    if (revents & EV_READ) {
        char buf[16384];
        ssize_t n = read(w->fd, buf, sizeof(buf));
        if (n == 0 || (n < 0 && errno != EAGAIN)) {
            p->closed = true;
            ev_break(l, EVBREAK_ONE);
        }
    }
}

static void on_hang(struct ev_loop *l, ev_timer *w, int revents)
{
    (void)l;
    (void)w;
    (void)revents;
    abort(); /* the server kept a connection whose peer is gone */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!server)
        setup();
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        abort();
    struct peer p = {.data = data, .size = size};
    ev_io_init(&p.io, on_peer, fd, size ? EV_READ | EV_WRITE : EV_READ);
    if (!size)
        (void)shutdown(fd, SHUT_WR);
    ev_io_start(loop, &p.io);
    ev_timer hang;
    ev_timer_init(&hang, on_hang, 5., 0.);
    ev_timer_start(loop, &hang);
    ev_run(loop, 0);
    ev_timer_stop(loop, &hang);
    ev_io_stop(loop, &p.io);
    close(fd);
    if (!p.closed || grpc_server_calls(server) != 0)
        abort();
    return 0;
}
