/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/health/health.c - the health of this node's PCI devices (see health.h).
 *
 * Decisions:
 * - Only unhealthy devices are stored: a device nothing is known against is healthy, so a new
 *   device, or one the store never heard of, costs nothing.
 * - Taking a state back from a PCIDevice happens only while the store knows nothing of that
 *   device: the store, not the object, is the truth once it has a word (the PCIDevice reconciler
 *   writes the object from the store). A device the store cleared is such a word: until the
 *   reconciler has written Healthy=True, the object's events still carry the old False
 *   condition, and taking that back would undo the clear.
 */
#include "controllers/health/health.h"

#include <cjson/cJSON.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/map.h"
#include "controllers/objects/kinds.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"

struct health {
    struct manager *mgr;
    struct ev_loop *loop;
    struct map *bad;     /* address -> struct health_state (unhealthy only) */
    struct map *cleared; /* addresses cleared since the start (a set): never taken back */
    const char **list;   /* health_unhealthy()'s answer */
    bool list_stale;
};

const struct topic health_changed = {"a device's health changed"};

static const char *const reasons[] = {HEALTH_RESET_FAILED, HEALTH_NOT_RESPONDING,
                                      HEALTH_ID_CHANGED,   HEALTH_DRIVER_FAILED,
                                      HEALTH_REMOVED,      HEALTH_AER_FATAL};

/* The reason's constant (so a state's reason outlives the object it was read from), or NULL. */
static const char *known_reason(const char *r)
{
    for (size_t i = 0; r && i < sizeof(reasons) / sizeof(reasons[0]); i++)
        if (strcmp(r, reasons[i]) == 0)
            return reasons[i];
    return NULL;
}

static void changed(struct health *h, const char *address)
{
    h->list_stale = true;
    manager_emit(h->mgr, &health_changed, (void *)address);
}

static void put(struct health *h, const char *address, const char *reason, const char *message,
                double since)
{
    struct health_state *s = calloc(1, sizeof(*s));
    if (!s)
        return;
    s->healthy = false;
    s->reason = reason;
    (void)snprintf(s->message, sizeof(s->message), "%s", message ? message : "");
    s->since = since;
    if (map_put(h->bad, address, s) < 0) {
        free(s);
        return;
    }
    changed(h, address);
}

void health_report(struct health *h, const char *address, const char *reason, const char *message)
{
    const char *r = known_reason(reason);
    if (!h || !address || !r)
        return;
    const struct health_state *now = map_get(h->bad, address);
    if (now && (strcmp(r, HEALTH_REMOVED) != 0 || now->reason == r))
        return; /* the first reason stays, unless the device is gone now */
    put(h, address, r, message, ev_now(h->loop));
}

void health_clear(struct health *h, const char *address)
{
    char copy[64]; /* (`address` may be a key of the map: health_unhealthy()'s list) */
    if (!h || !address || !map_contains(h->bad, address) ||
        (size_t)snprintf(copy, sizeof(copy), "%s", address) >= sizeof(copy))
        return;
    map_remove(h->bad, copy);
    (void)map_put(h->cleared, copy, h->cleared); /* a set: the value is never read */
    changed(h, copy);
}

bool health_get(const struct health *h, const char *address, struct health_state *ret)
{
    const struct health_state *s = h && address ? map_get(h->bad, address) : NULL;
    if (s) {
        *ret = *s;
        return false;
    }
    *ret = (struct health_state){.healthy = true, .reason = HEALTH_HEALTHY};
    return true;
}

const char *const *health_unhealthy(const struct health *h, size_t *ret_n)
{
    struct health *m = (struct health *)h; /* the list is a cache of the map */
    *ret_n = 0;
    if (!m)
        return NULL;
    if (m->list_stale) {
        size_t n = map_size(m->bad), pos = 0, i = 0;
        const char **l = calloc(n + 1, sizeof(*l));
        const char *key;
        void *v;
        if (!l)
            return NULL;
        while (i < n && map_next(m->bad, &pos, &key, &v))
            l[i++] = key;
        free((void *)m->list);
        m->list = l;
        m->list_stale = false;
    }
    *ret_n = map_size(m->bad);
    return m->list;
}

void health_refusal(const struct health_state *s, const char *address, const char *pcidevice,
                    char *buf, size_t size)
{
    char head[128], tail[256];
    (void)snprintf(head, sizeof(head), "device %s is unhealthy (%s)%s", address, s->reason,
                   s->message[0] ? ": " : "");
    (void)snprintf(tail, sizeof(tail),
                   "; it is given to no new user until it is checked again: after fixing it "
                   "(a host reboot, reseating the card), run kubectl annotate --overwrite "
                   "pcidevice %s " HEALTH_RECHECK_ANNOTATION "=$(date +%%s)",
                   pcidevice);
    size_t fixed = strlen(head) + strlen(tail);
    int room = size > fixed ? (int)(size - fixed - 1) : 0;
    (void)snprintf(buf, size, "%s%.*s%s", head, room, s->message, tail);
}

/* --- taken back from the PCIDevices ------------------------------------------------------------
 */

/* A PCIDevice event: its Healthy=False condition with one of our reasons, taken back while the
 * store knows nothing of the device (an agent restarted, or the store's word lost). */
static void on_pcidevice(void *self, const struct watch_event *ev)
{
    struct health *h = self;
    if (!ev->obj || ev->type == WATCH_DELETE)
        return;
    const cJSON *status = json_field(ev->obj, "status"), *c;
    const char *address = json_str(status, "address");
    if (!address || !address[0] || map_contains(h->bad, address) ||
        map_contains(h->cleared, address))
        return;
    cJSON_ArrayForEach(c, json_field(status, "conditions"))
    {
        const char *type = json_str(c, "type"), *st = json_str(c, "status");
        if (!type || strcmp(type, HEALTH_CONDITION) != 0 || !st || strcmp(st, "False") != 0)
            continue;
        const char *r = known_reason(json_str(c, "reason"));
        if (r)
            put(h, address, r, json_str(c, "message"), ev_now(h->loop));
        return;
    }
}

static const struct watch watches[] = {
        {.kind = &kind_pcidevices, .map = on_pcidevice},
        {0},
};

static void *make(const struct part_env *env)
{
    struct health *h = calloc(1, sizeof(*h));
    if (!h || !(h->bad = map_new(free)) || !(h->cleared = map_new(NULL))) {
        if (h)
            map_free(h->bad);
        free(h);
        return NULL;
    }
    h->mgr = env->mgr;
    h->loop = env->loop;
    h->list_stale = true;
    return h;
}

static void part_free(void *self)
{
    struct health *h = self;
    if (!h)
        return;
    map_free(h->bad);
    map_free(h->cleared);
    free((void *)h->list);
    free(h);
}

const struct part_ops health_part = {
        .name = "health", .make = make, .watches = watches, .free = part_free};
