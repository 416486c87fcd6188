/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/fake_api.c - a fake API server of one kind on loopback (see fake_api.h).
 */
#include "fake_api.h"

#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

const struct kube_resource fake_api_things = {"test.hostdevd.io", "v1", "things", false};
const struct kube_resource fake_api_others = {"test.hostdevd.io", "v1", "others", false};

struct fake_conn {
    int fd;
    ev_io w;
    char in[8192];
    size_t len;
    bool streaming;
    struct fake_api *f;
    struct fake_conn *next;
};

static void conn_close(struct fake_conn *c)
{
    struct fake_conn **p = &c->f->conns;
    while (*p != c)
        p = &(*p)->next;
    *p = c->next;
    if (c->f->watch == c)
        c->f->watch = NULL;
    if (c->f->held == c)
        c->f->held = NULL;
    if (c->f->others_watch == c)
        c->f->others_watch = NULL;
    ev_io_stop(c->f->loop, &c->w);
    close(c->fd);
    free(c);
}

static void send_all(struct fake_conn *c, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(c->fd, data, len);
        if (n <= 0)
            return; /* the client went: its read sees it */
        data += n;
        len -= (size_t)n;
    }
}

static void reply(struct fake_conn *c, int code, const char *body)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     code, strlen(body));
    send_all(c, head, (size_t)n);
    send_all(c, body, strlen(body));
}

static void reply_status(struct fake_conn *c, int code)
{
    char body[256];
    (void)snprintf(body, sizeof(body),
                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                   "\"reason\":\"%s\",\"code\":%d}",
                   code == 410   ? "Expired"
                   : code == 404 ? "NotFound"
                                 : "InternalError",
                   code);
    reply(c, code, body);
}

/* The value of query parameter `name` in `path`, copied to `ret` ("" when absent). */
static void query(const char *path, const char *name, char *ret, size_t size)
{
    size_t n = strlen(name);
    ret[0] = '\0';
    for (const char *p = strchr(path, '?'); p; p = strchr(p + 1, '&')) {
        if (strncmp(p + 1, name, n) == 0 && p[1 + n] == '=') {
            size_t len = strcspn(p + 2 + n, "&");
            (void)snprintf(ret, size, "%.*s", (int)(len < size ? len : size - 1), p + 2 + n);
            return;
        }
    }
}

static void answer_get(struct fake_conn *c)
{
    if (c->f->get_code)
        reply(c, c->f->get_code, c->f->get_body);
    else
        reply_status(c, 404);
}

bool fake_api_answer_get(struct fake_api *f)
{
    if (!f->held)
        return false;
    answer_get(f->held);
    conn_close(f->held);
    return true;
}

/* A GET of one object: answered, or held (then the connection stays open). */
static void serve_get(struct fake_conn *c, const char *name)
{
    struct fake_api *f = c->f;
    f->gets++;
    (void)snprintf(f->get_name, sizeof(f->get_name), "%.*s", (int)strcspn(name, "?"), name);
    if (!f->hold_gets) {
        answer_get(c);
        return;
    }
    c->streaming = true; /* not closed after serve */
    f->held = c;
}

static void serve(struct fake_conn *c, const char *path)
{
    struct fake_api *f = c->f;
    char watch[8], bookmarks[8];
    static const char things[] = "/apis/test.hostdevd.io/v1/things/";
    static const char others[] = "/apis/test.hostdevd.io/v1/others";
    bool other = strncmp(path, others, sizeof(others) - 1) == 0;
    if (strncmp(path, things, sizeof(things) - 1) == 0) {
        serve_get(c, path + sizeof(things) - 1);
        return;
    }
    if (other && path[sizeof(others) - 1] == '/') {
        serve_get(c, path + sizeof(others));
        return;
    }
    query(path, "watch", watch, sizeof(watch));
    if (strcmp(watch, "1") != 0) {
        size_t n = strlen(f->order);
        (void)snprintf(f->order + n, sizeof(f->order) - n, "%s ", other ? "others" : "things");
        if (other) {
            f->others_lists++;
            char body[sizeof(f->others_items) + 256];
            (void)snprintf(body, sizeof(body),
                           "{\"kind\":\"OtherList\",\"metadata\":{\"resourceVersion\":\"%s\"},"
                           "\"items\":%s}",
                           f->list_rv, f->others_items);
            reply(c, 200, body);
            return;
        }
        f->lists++;
        query(path, "labelSelector", f->list_labels, sizeof(f->list_labels));
        query(path, "fieldSelector", f->list_fields, sizeof(f->list_fields));
        if (f->list_code) {
            reply_status(c, f->list_code);
            return;
        }
        char body[sizeof(f->list_items) + 256];
        (void)snprintf(body, sizeof(body),
                       "{\"kind\":\"ThingList\",\"metadata\":{\"resourceVersion\":\"%s\"},"
                       "\"items\":%s}",
                       f->list_rv, f->list_items);
        reply(c, 200, body);
        return;
    }
    f->watches++;
    query(path, "resourceVersion", f->watch_rv, sizeof(f->watch_rv));
    query(path, "allowWatchBookmarks", bookmarks, sizeof(bookmarks));
    f->watch_bookmarks = strcmp(bookmarks, "true") == 0;
    if (f->watch_code) {
        reply_status(c, f->watch_code);
        f->watch_code = 0;
        return;
    }
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n";
    send_all(c, head, sizeof(head) - 1);
    if (other) {
        if (f->others_watch)
            conn_close(f->others_watch);
        c->streaming = true;
        f->others_watch = c;
        return;
    }
    if (f->watch) /* the informer watches once at a time: the old stream is gone */
        conn_close(f->watch);
    c->streaming = true;
    f->watch = c;
}

/* Serves the request in `c` once its head is whole (GETs only: no body). */
static bool try_serve(struct fake_conn *c)
{
    c->in[c->len] = '\0';
    if (!strstr(c->in, "\r\n\r\n"))
        return false;
    char method[8] = "", path[1024] = "";
    CU_ASSERT_EQUAL(sscanf(c->in, "%7s %1023s", method, path), 2);
    CU_ASSERT_STRING_EQUAL(method, "GET");
    serve(c, path);
    return true;
}

static void on_conn(struct ev_loop *loop, ev_io *w, int revents)
{
    struct fake_conn *c = w->data;
    (void)loop;
    (void)revents;
    ssize_t n = read(c->fd, c->in + c->len, sizeof(c->in) - 1 - c->len);
    if (n <= 0) {
        conn_close(c);
        return;
    }
    c->len += (size_t)n;
    if (!c->streaming && try_serve(c) && !c->streaming)
        conn_close(c);
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    int fd = accept4(w->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct fake_api *f = w->data;
    struct fake_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        return;
    }
    *c = (struct fake_conn){.fd = fd, .f = f, .next = f->conns};
    f->conns = c;
    ev_io_init(&c->w, on_conn, fd, EV_READ);
    c->w.data = c;
    ev_io_start(loop, &c->w);
}

void fake_api_start(struct fake_api *f, struct ev_loop *loop)
{
    *f = (struct fake_api){.loop = loop};
    fake_api_set_list(f, "1", "[]");
    (void)snprintf(f->others_items, sizeof(f->others_items), "[]");
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    CU_ASSERT_EQUAL_FATAL(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    CU_ASSERT_EQUAL_FATAL(listen(f->lfd, 64), 0);
    CU_ASSERT_EQUAL_FATAL(getsockname(f->lfd, (struct sockaddr *)&a, &len), 0);
    f->port = ntohs(a.sin_port);
    ev_io_init(&f->accept_w, on_accept, f->lfd, EV_READ);
    f->accept_w.data = f;
    ev_io_start(loop, &f->accept_w);
}

void fake_api_stop(struct fake_api *f)
{
    while (f->conns)
        conn_close(f->conns);
    ev_io_stop(f->loop, &f->accept_w);
    close(f->lfd);
}

const char *fake_api_url(const struct fake_api *f, char *buf, size_t size)
{
    (void)snprintf(buf, size, "http://127.0.0.1:%d", f->port);
    return buf;
}

void fake_api_set_list(struct fake_api *f, const char *rv, const char *items_json)
{
    (void)snprintf(f->list_rv, sizeof(f->list_rv), "%s", rv);
    (void)snprintf(f->list_items, sizeof(f->list_items), "%s", items_json);
}

bool fake_api_event(struct fake_api *f, const char *type, const char *object_json)
{
    if (!f->watch)
        return false;
    char line[4096], chunk[4200];
    int n = snprintf(line, sizeof(line), "{\"type\":\"%s\",\"object\":%s}\n", type, object_json);
    int m = snprintf(chunk, sizeof(chunk), "%x\r\n%s\r\n", n, line);
    send_all(f->watch, chunk, (size_t)m);
    return true;
}

void fake_api_end_watch(struct fake_api *f, bool reset)
{
    if (!f->watch)
        return;
    if (!reset)
        send_all(f->watch, "0\r\n\r\n", 5);
    conn_close(f->watch);
}

const char *fake_api_obj(char *buf, size_t size, const char *name, const char *rv)
{
    (void)snprintf(buf, size, "{\"metadata\":{\"name\":\"%s\",\"resourceVersion\":\"%s\"}}", name,
                   rv);
    return buf;
}

static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
}

bool fake_api_run_until(struct ev_loop *loop, bool (*done)(void))
{
    ev_timer tick; /* (a tick: ev_run wakes to look at done()) */
    ev_timer_init(&tick, on_tick, 0.01, 0.01);
    ev_timer_start(loop, &tick);
    double end = ev_time() + 10;
    while (!done() && ev_time() < end)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &tick);
    return done();
}
