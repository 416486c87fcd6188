/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/endpoint.c - /healthz, /readyz, /metrics over HTTP/1.x on libev. See
 * endpoint.h.
 */
#include "controllers/runtime/endpoint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"

#define REQUEST_MAX     8192
#define REQUEST_TIMEOUT 5.0
#define CONNECTIONS_MAX 16

struct conn {
    ev_io io;
    ev_timer timer;
    struct endpoint *e;
    struct buf in;
    struct conn *next;
};

struct endpoint {
    struct ev_loop *loop;
    ev_io listen;
    struct endpoint_handlers handlers;
    struct conn *conns;
    int nconns;
};

static void conn_close(struct conn *c)
{
    struct endpoint *e = c->e;
    for (struct conn **p = &e->conns; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    e->nconns--;
    ev_io_stop(e->loop, &c->io);
    ev_timer_stop(e->loop, &c->timer);
    close(c->io.fd);
    buf_free(&c->in);
    free(c);
}

static void respond(struct conn *c, int code, const char *type, const struct buf *body)
{
    struct buf out;
    buf_init(&out, (size_t)64 * 1024 * 1024);
    const char *status = code == 200   ? "OK"
                         : code == 404 ? "Not Found"
                         : code == 405 ? "Method Not Allowed"
                                       : "Service Unavailable";
    int r = buf_printf(&out,
                       "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                       "Connection: close\r\n\r\n",
                       code, status, type, body->len);
    if (r == 0)
        r = buf_add(&out, buf_str(body), body->len);
    /* Small answers: one blocking-free attempt is enough for probes and scrapes on loopback;
     * a client that does not read gets a truncated answer rather than stalling the loop. */
    for (size_t off = 0; r == 0 && off < out.len;) {
        ssize_t n = send(c->io.fd, out.data + off, out.len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    buf_free(&out);
}

static void serve(struct conn *c, const char *method, const char *path)
{
    struct endpoint *e = c->e;
    struct buf body;
    buf_init(&body, (size_t)32 * 1024 * 1024);
    int code = 200;
    const char *type = "text/plain; charset=utf-8";
    if (strcmp(method, "GET") != 0) {
        code = 405;
        (void)buf_adds(&body, "only GET\n");
    } else if (strcmp(path, "/healthz") == 0 || strcmp(path, "/livez") == 0) {
        (void)buf_adds(&body, "ok\n");
    } else if (strcmp(path, "/readyz") == 0) {
        bool ready = e->handlers.ready(&body, e->handlers.userdata);
        code = ready ? 200 : 503;
        (void)buf_adds(&body, ready ? "ok\n" : "\n");
    } else if (strcmp(path, "/metrics") == 0) {
        type = "text/plain; version=0.0.4; charset=utf-8";
        e->handlers.metrics(&body, e->handlers.userdata);
    } else {
        code = 404;
        (void)buf_adds(&body, "not found: try /healthz, /readyz or /metrics\n");
    }
    respond(c, code, type, &body);
    buf_free(&body);
}

/* Parses "METHOD /path[?query] HTTP/1.x" from the first line and answers. */
static void handle(struct conn *c)
{
    char method[8] = "", path[256] = "";
    const char *line = buf_str(&c->in);
    const char *sp1 = strchr(line, ' ');
    const char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (sp1 && sp2 && (size_t)(sp1 - line) < sizeof(method) &&
        (size_t)(sp2 - sp1 - 1) < sizeof(path)) {
        memcpy(method, line, (size_t)(sp1 - line));
        memcpy(path, sp1 + 1, (size_t)(sp2 - sp1 - 1));
        path[strcspn(path, "?")] = '\0';
        serve(c, method, path);
    }
    conn_close(c);
}

static void on_read(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = (struct conn *)w;
    char chunk[2048];
    (void)loop;
    (void)revents;
    ssize_t n = recv(w->fd, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0 || buf_add(&c->in, chunk, (size_t)n) < 0) {
        conn_close(c);
        return;
    }
    /* The request line is all we need; headers and bodies are ignored. */
    if (strstr(buf_str(&c->in), "\r\n\r\n") || strstr(buf_str(&c->in), "\n\n"))
        handle(c);
}

static void on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    conn_close(w->data);
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    struct endpoint *e = w->data;
    (void)revents;
    int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct conn *c = e->nconns < CONNECTIONS_MAX ? calloc(1, sizeof(*c)) : NULL;
    if (!c) {
        close(fd);
        return;
    }
    c->e = e;
    buf_init(&c->in, REQUEST_MAX);
    ev_io_init(&c->io, on_read, fd, EV_READ);
    ev_timer_init(&c->timer, on_timeout, REQUEST_TIMEOUT, 0.);
    c->timer.data = c;
    ev_io_start(loop, &c->io);
    ev_timer_start(loop, &c->timer);
    c->next = e->conns;
    e->conns = c;
    e->nconns++;
}

/* Parses "[host]:port" into an IPv4 socket address (empty host = any). */
static int parse_address(const char *address, struct sockaddr_in *ret)
{
    const char *colon = strrchr(address, ':');
    char host[64] = "0.0.0.0";
    if (!colon || (size_t)(colon - address) >= sizeof(host))
        return -EINVAL;
    if (colon > address) {
        memcpy(host, address, (size_t)(colon - address));
        host[colon - address] = '\0';
    }
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end || port < 0 || port > 65535)
        return -EINVAL;
    *ret = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    return inet_pton(AF_INET, host, &ret->sin_addr) == 1 ? 0 : -EINVAL;
}

static int listen_on(const char *address, int *ret_port)
{
    struct sockaddr_in sa;
    int r = parse_address(address, &sa);
    if (r < 0)
        return r;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    socklen_t len = sizeof(sa);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    if (ret_port)
        *ret_port = ntohs(sa.sin_port);
    return fd;
}

int endpoint_new(struct ev_loop *loop, const char *address,
                 const struct endpoint_handlers *handlers, int *ret_port, struct endpoint **ret)
{
    int fd = listen_on(address, ret_port);
    if (fd < 0)
        return fd;
    struct endpoint *e = calloc(1, sizeof(*e));
    if (!e) {
        close(fd);
        return -ENOMEM;
    }
    e->loop = loop;
    e->handlers = *handlers;
    ev_io_init(&e->listen, on_accept, fd, EV_READ);
    e->listen.data = e;
    ev_io_start(loop, &e->listen);
    *ret = e;
    return 0;
}

struct endpoint *endpoint_free(struct endpoint *e)
{
    if (!e)
        return NULL;
    struct conn *next;
    for (struct conn *c = e->conns; c; c = next) {
        next = c->next;
        ev_io_stop(e->loop, &c->io);
        ev_timer_stop(e->loop, &c->timer);
        close(c->io.fd);
        buf_free(&c->in);
        free(c);
    }
    e->conns = NULL;
    ev_io_stop(e->loop, &e->listen);
    close(e->listen.fd);
    free(e);
    return NULL;
}
