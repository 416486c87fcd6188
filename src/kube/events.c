/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/events.c - events.k8s.io/v1 recorder with series aggregation. See events.h.
 * Entries are keyed by everything that makes two events "the same"; an entry with a request
 * in flight is never freed (the recorder must outlive its requests, or the http context must
 * be freed first, which cancels them without callbacks).
 */
#include "kube/events.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/json.h"
#include "base/map.h"
#include "base/timefmt.h"
#include "kube/client.h"

#define NOTE_MAX    1024
#define ENTRIES_MAX 4096

struct kube_recorder {
    struct ev_loop *loop;
    struct kube_http *http;
    char *controller, *instance, *ns;
    double flush_interval, window;
    struct map *entries; /* key -> struct entry */
    ev_timer timer;
    unsigned long serial;
    unsigned in_flight;
    struct kube_recorder_stats stats;
};

struct entry {
    struct kube_recorder *r;
    char *ns;
    char *event_name; /* set once the Event exists */
    int count, written;
    double last_seen;
    bool busy; /* a request about this entry is in flight */
};

static void free_entry(void *p)
{
    struct entry *e = p;
    if (!e)
        return;
    free(e->ns);
    free(e->event_name);
    free(e);
}

static void arm(struct kube_recorder *r)
{
    if (!ev_is_active(&r->timer)) {
        ev_timer_set(&r->timer, r->flush_interval, 0.);
        ev_timer_start(r->loop, &r->timer);
    }
}

static void on_created(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct entry *e = userdata;
    struct kube_recorder *r = e->r;
    const char *name = kube_meta_str(obj, "name");
    r->in_flight--;
    e->busy = false;
    if (err || !name) {
        r->stats.failed++;
        return;
    }
    r->stats.created++;
    e->event_name = strdup(name);
    e->written = 1;
    if (e->count > e->written)
        arm(r);
}

static void on_series(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct entry *e = userdata;
    (void)obj;
    e->r->in_flight--;
    e->busy = false;
    if (err)
        e->r->stats.failed++;
}

static void add_ref(cJSON *ev, const struct kube_event_ref *ref)
{
    cJSON *reg = cJSON_AddObjectToObject(ev, "regarding");
    cJSON_AddStringToObject(reg, "apiVersion", ref->api_version);
    cJSON_AddStringToObject(reg, "kind", ref->kind);
    cJSON_AddStringToObject(reg, "name", ref->name);
    if (ref->namespace)
        cJSON_AddStringToObject(reg, "namespace", ref->namespace);
    if (ref->uid)
        cJSON_AddStringToObject(reg, "uid", ref->uid);
}

static cJSON *event_json(struct kube_recorder *r, const char *ns, const struct kube_event_ref *ref,
                         bool warning, const char *reason, const char *action, const char *note)
{
    char now[40], name[320], short_note[NOTE_MAX + 1];
    timefmt_micro_now(now, sizeof(now));
    (void)snprintf(name, sizeof(name), "%.200s.%llx%04lx", ref->name,
                   (unsigned long long)(ev_time() * 1e6), r->serial++ & 0xffff);
    (void)snprintf(short_note, sizeof(short_note), "%s", note);
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "apiVersion", "events.k8s.io/v1");
    cJSON_AddStringToObject(ev, "kind", "Event");
    cJSON *meta = cJSON_AddObjectToObject(ev, "metadata");
    cJSON_AddStringToObject(meta, "name", name);
    cJSON_AddStringToObject(meta, "namespace", ns);
    cJSON_AddStringToObject(ev, "eventTime", now);
    cJSON_AddStringToObject(ev, "reportingController", r->controller);
    cJSON_AddStringToObject(ev, "reportingInstance", r->instance);
    cJSON_AddStringToObject(ev, "type", warning ? "Warning" : "Normal");
    cJSON_AddStringToObject(ev, "reason", reason);
    cJSON_AddStringToObject(ev, "action", action);
    cJSON_AddStringToObject(ev, "note", short_note);
    add_ref(ev, ref);
    return ev;
}

static int create_event(struct entry *e, const struct kube_event_ref *ref, bool warning,
                        const char *reason, const char *action, const char *note)
{
    struct kube_recorder *r = e->r;
    _cleanup_json_ cJSON *ev = event_json(r, e->ns, ref, warning, reason, action, note);
    int rc = ev ? kube_client_create(r->http, &kube_res_events, e->ns, ev, on_created, e) : -ENOMEM;
    if (rc == 0) {
        e->busy = true;
        r->in_flight++;
    }
    return rc;
}

static int write_series(struct entry *e)
{
    char now[40], patch[256];
    timefmt_micro_now(now, sizeof(now));
    (void)snprintf(patch, sizeof(patch), "{\"series\":{\"count\":%d,\"lastObservedTime\":\"%s\"}}",
                   e->count, now);
    int rc = kube_client_patch(e->r->http, &kube_res_events, e->ns, e->event_name, KUBE_PATCH_MERGE,
                               patch, false, on_series, e);
    if (rc == 0) {
        e->busy = true;
        e->written = e->count;
        e->r->in_flight++;
        e->r->stats.series++;
    }
    return rc;
}

/* Writes pending counts and drops idle entries; re-arms while something is pending. */
static void flush(struct kube_recorder *r, bool expire)
{
    const char *key;
    void *v;
    size_t pos = 0;
    bool pending = false;
    double now = ev_now(r->loop);
    _cleanup_buf_ struct buf stale;
    buf_init(&stale, (size_t)16 * 1024 * 1024);
    while (map_next(r->entries, &pos, &key, &v)) {
        struct entry *e = v;
        if (!e->busy && e->event_name && e->count > e->written)
            (void)write_series(e);
        if (e->count > e->written)
            pending = true;
        else if (expire && !e->busy && now - e->last_seen > r->window)
            (void)buf_add(&stale, key, strlen(key) + 1);
    }
    for (size_t off = 0; off < stale.len; off += strlen(stale.data + off) + 1)
        map_remove(r->entries, stale.data + off);
    if (pending || map_size(r->entries) > 0)
        arm(r);
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    flush(w->data, true);
}

void kube_recorder_flush(struct kube_recorder *r)
{
    flush(r, false);
}

static int make_key(struct buf *k, const struct kube_event_ref *ref, bool warning,
                    const char *reason, const char *action, const char *note)
{
    return buf_printf(k, "%s|%s|%s|%s|%s|%d|%s|%s|%.1024s", ref->uid ? ref->uid : "",
                      ref->api_version, ref->kind, ref->namespace ? ref->namespace : "", ref->name,
                      warning, reason, action, note);
}

static struct entry *entry_new(struct kube_recorder *r, const char *ns, double now)
{
    struct entry *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    *e = (struct entry){.r = r, .count = 1, .last_seen = now, .ns = strdup(ns)};
    if (!e->ns) {
        free(e);
        return NULL;
    }
    return e;
}

/* Counts a repeat of an entry still in its series (or still being written). */
static bool join_series(struct kube_recorder *r, struct entry *e, double now)
{
    if (!e || (now - e->last_seen > r->window && !e->busy))
        return false;
    e->count++;
    e->last_seen = now;
    if (e->event_name)
        arm(r);
    return true;
}

static int emit_key(struct kube_recorder *r, const char *key, const struct kube_event_ref *ref,
                    bool warning, const char *reason, const char *action, const char *note)
{
    double now = ev_now(r->loop);
    if (join_series(r, map_get(r->entries, key), now))
        return 0;
    map_remove(r->entries, key); /* an idle entry whose window has passed */
    if (map_size(r->entries) >= ENTRIES_MAX)
        flush(r, true);
    struct entry *e = entry_new(r, ref->namespace ? ref->namespace : r->ns, now);
    if (!e)
        return -ENOMEM;
    if (map_put(r->entries, key, e) < 0) {
        free_entry(e);
        return -ENOMEM;
    }
    int rc = create_event(e, ref, warning, reason, action, note);
    if (rc < 0)
        map_remove(r->entries, key);
    return rc;
}

int kube_recorder_emit(struct kube_recorder *r, const struct kube_event_ref *regarding,
                       bool warning, const char *reason, const char *action, const char *note)
{
    _cleanup_buf_ struct buf key;
    buf_init(&key, 8192);
    r->stats.emitted++;
    int rc = make_key(&key, regarding, warning, reason, action, note);
    if (rc == 0)
        rc = emit_key(r, buf_str(&key), regarding, warning, reason, action, note);
    return rc;
}

struct kube_recorder *kube_recorder_new(struct ev_loop *loop, struct kube_http *http,
                                        const struct kube_recorder_config *cfg)
{
    struct kube_recorder *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->loop = loop;
    r->http = http;
    r->controller = strdup(cfg->controller ? cfg->controller : "hostdevd");
    r->instance = strdup(cfg->instance ? cfg->instance : "hostdevd");
    r->ns = strdup(cfg->namespace ? cfg->namespace : "default");
    r->flush_interval = cfg->flush_interval > 0 ? cfg->flush_interval : 30.0;
    r->window = cfg->series_window > 0 ? cfg->series_window : 600.0;
    r->entries = map_new(free_entry);
    ev_timer_init(&r->timer, on_timer, 0., 0.);
    r->timer.data = r;
    if (!r->controller || !r->instance || !r->ns || !r->entries)
        return kube_recorder_free(r);
    return r;
}

struct kube_recorder *kube_recorder_free(struct kube_recorder *r)
{
    if (!r)
        return NULL;
    ev_timer_stop(r->loop, &r->timer);
    map_free(r->entries);
    free(r->controller);
    free(r->instance);
    free(r->ns);
    free(r);
    return NULL;
}

unsigned kube_recorder_in_flight(const struct kube_recorder *r)
{
    return r->in_flight;
}

void kube_recorder_get_stats(const struct kube_recorder *r, struct kube_recorder_stats *ret)
{
    *ret = r->stats;
}
