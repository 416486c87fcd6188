/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/closewatch.c - wakes a reconciler when a device node is closed (see
 * closewatch.h): one inotify descriptor on the loop, watch descriptor -> the keys armed on it.
 */
#include "controllers/runtime/closewatch.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "base/map.h"

#define EVENTS (IN_CLOSE_WRITE | IN_CLOSE_NOWRITE | IN_DELETE_SELF | IN_ONESHOT)

struct closewatch {
    struct ev_loop *loop;
    void (*on_closed)(const char *key, void *userdata);
    void *userdata;
    int fd; /* -1 until the first arm */
    ev_io io;
    struct map *keys;  /* "<wd>" -> struct map * of the keys armed on it (values unused) */
    struct map *fired; /* key -> double *: the loop time of its last close */
};

static void free_keys(void *value)
{
    map_free(value);
}

struct closewatch *closewatch_new(struct ev_loop *loop,
                                  void (*on_closed)(const char *key, void *userdata),
                                  void *userdata)
{
    struct closewatch *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->loop = loop;
    w->on_closed = on_closed;
    w->userdata = userdata;
    w->fd = -1;
    w->keys = map_new(free_keys);
    w->fired = map_new(free);
    if (!w->keys || !w->fired) {
        map_free(w->keys);
        map_free(w->fired);
        free(w);
        return NULL;
    }
    return w;
}

/* Calls the keys armed on `wd` and forgets them. */
static void fire(struct closewatch *w, int wd)
{
    char name[16];
    (void)snprintf(name, sizeof(name), "%d", wd);
    struct map *keys = map_take(w->keys, name);
    if (!keys)
        return; /* IN_IGNORED after a one-shot event, or an event already handled */
    size_t pos = 0;
    const char *key;
    void *unused;
    while (map_next(keys, &pos, &key, &unused)) {
        double *at = malloc(sizeof(*at));
        if (at) {
            *at = ev_now(w->loop);
            if (map_put(w->fired, key, at) < 0)
                free(at);
        }
        w->on_closed(key, w->userdata);
    }
    map_free(keys);
}

static void on_readable(struct ev_loop *loop, ev_io *io, int revents)
{
    struct closewatch *w = io->data;
    (void)loop;
    (void)revents;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(w->fd, buf, sizeof(buf));
        if (n <= 0)
            return; /* EAGAIN: drained */
        for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= n;) {
            const struct inotify_event *e = (const struct inotify_event *)(buf + off);
            off += (ssize_t)sizeof(*e) + e->len;
            if (e->mask & (IN_CLOSE_WRITE | IN_CLOSE_NOWRITE | IN_DELETE_SELF | IN_Q_OVERFLOW))
                fire(w, e->wd);
            if (e->mask & IN_Q_OVERFLOW) { /* events lost: wake every key */
                size_t pos = 0;
                const char *wd;
                void *unused;
                while (map_next(w->keys, &pos, &wd, &unused)) {
                    fire(w, (int)strtol(wd, NULL, 10));
                    pos = 0;
                }
            }
        }
    }
}

static int open_inotify(struct closewatch *w)
{
    if (w->fd >= 0)
        return 0;
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0)
        return -errno;
    ev_io_init(&w->io, on_readable, w->fd, EV_READ);
    w->io.data = w;
    ev_io_start(w->loop, &w->io);
    ev_unref(w->loop); /* a watch keeps nothing alive */
    return 0;
}

int closewatch_arm(struct closewatch *w, const char *path, const char *key)
{
    int r = open_inotify(w);
    if (r < 0)
        return r;
    int wd = inotify_add_watch(w->fd, path, EVENTS);
    if (wd < 0)
        return -errno;
    char name[16];
    (void)snprintf(name, sizeof(name), "%d", wd);
    struct map *keys = map_get(w->keys, name);
    if (!keys) {
        if (!(keys = map_new(NULL)))
            return -ENOMEM;
        if (map_put(w->keys, name, keys) < 0) {
            map_free(keys);
            return -ENOMEM;
        }
    }
    return map_put(keys, key, NULL) < 0 ? -ENOMEM : 0;
}

int closewatch_armed(const struct closewatch *w)
{
    int n = 0;
    size_t pos = 0;
    const char *wd;
    void *keys;
    while (w && map_next(w->keys, &pos, &wd, &keys))
        n += (int)map_size(keys);
    return n;
}

double closewatch_closed_ago(struct closewatch *w, const char *key)
{
    const double *at = w ? map_get(w->fired, key) : NULL;
    if (!at)
        return -1;
    double ago = ev_now(w->loop) - *at;
    if (ago < CLOSEWATCH_SETTLE)
        return ago;
    free(map_take(w->fired, key)); /* long ago: forgotten */
    return -1;
}

double closewatch_settle_delay(double closed_ago)
{
    double d = closed_ago / 2;
    return d < 0.05 ? 0.05 : d > 1.0 ? 1.0 : d;
}

bool closewatch_settling(double closed_ago, bool holder_known)
{
    return !holder_known && closed_ago >= 0 && closed_ago < CLOSEWATCH_SETTLE;
}

struct closewatch *closewatch_free(struct closewatch *w)
{
    if (!w)
        return NULL;
    if (w->fd >= 0) {
        ev_ref(w->loop);
        ev_io_stop(w->loop, &w->io);
        close(w->fd);
    }
    map_free(w->keys);
    map_free(w->fired);
    free(w);
    return NULL;
}
