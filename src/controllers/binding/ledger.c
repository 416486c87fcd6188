/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/binding/ledger.c - who holds each device of this node (see ledger.h).
 */
#include "controllers/binding/ledger.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/map.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"

/* One device's holders, one per path. */
struct holding {
    bool held[LEDGER_PATHS];
    bool stale[LEDGER_PATHS]; /* marked by ledger_begin, not held again yet */
    char id[LEDGER_PATHS][256];
    char who[LEDGER_PATHS][600];
};

struct ledger {
    struct manager *mgr;
    struct map *devices; /* address -> struct holding */
};

const struct topic ledger_released = {"a device was let go"};
const struct topic ledger_changed = {"a holding began or ended"};

struct ledger *ledger_new(struct manager *m)
{
    struct ledger *l = calloc(1, sizeof(*l));
    if (l && !(l->devices = map_new(free))) {
        free(l);
        return NULL;
    }
    if (l)
        l->mgr = m;
    return l;
}

void ledger_free(struct ledger *l)
{
    if (!l)
        return;
    map_free(l->devices);
    free(l);
}

static bool empty(const struct holding *h)
{
    for (int p = 0; p < LEDGER_PATHS; p++)
        if (h->held[p])
            return false;
    return true;
}

int ledger_hold(struct ledger *l, const char *address, enum ledger_path path, const char *id,
                const char *who)
{
    struct holding *h = map_get(l->devices, address);
    if (!h) {
        if (!(h = calloc(1, sizeof(*h))))
            return -ENOMEM;
        if (map_put(l->devices, address, h) < 0) {
            free(h);
            return -ENOMEM;
        }
    }
    bool news = !h->held[path] || strcmp(h->id[path], id) != 0;
    h->held[path] = true;
    h->stale[path] = false;
    (void)snprintf(h->id[path], sizeof(h->id[path]), "%s", id);
    (void)snprintf(h->who[path], sizeof(h->who[path]), "%s", who);
    if (news)
        manager_emit(l->mgr, &ledger_changed, &path);
    return 0;
}

/* Forgets one holding; true when there was one. */
static bool forget(struct ledger *l, const char *address, struct holding *h, enum ledger_path path)
{
    if (!h->held[path])
        return false;
    h->held[path] = h->stale[path] = false;
    if (empty(h))
        map_remove(l->devices, address);
    return true;
}

static void released(struct ledger *l, enum ledger_path path)
{
    manager_emit(l->mgr, &ledger_released, &path);
    manager_emit(l->mgr, &ledger_changed, &path);
}

void ledger_release(struct ledger *l, const char *address, enum ledger_path path, const char *id)
{
    struct holding *h = map_get(l->devices, address);
    if (h && (!id || strcmp(h->id[path], id) == 0) && forget(l, address, h, path))
        released(l, path);
}

void ledger_begin(struct ledger *l, enum ledger_path path)
{
    size_t pos = 0;
    const char *key;
    void *v;
    while (map_next(l->devices, &pos, &key, &v)) {
        struct holding *h = v;
        h->stale[path] = h->held[path];
    }
}

void ledger_end(struct ledger *l, enum ledger_path path)
{
    bool any = false, again = true;
    while (again) { /* forgetting may remove an entry: walk again from the start */
        again = false;
        size_t pos = 0;
        const char *key;
        void *v;
        while (!again && map_next(l->devices, &pos, &key, &v)) {
            struct holding *h = v;
            if (h->stale[path])
                any = again = forget(l, key, h, path);
        }
    }
    if (any)
        released(l, path);
}

bool ledger_held(const struct ledger *l, const char *address, enum ledger_path path,
                 const char *except_id, char *buf, size_t size)
{
    const struct holding *h = l ? map_get(l->devices, address) : NULL;
    if (!h || !h->held[path] || (except_id && strcmp(h->id[path], except_id) == 0))
        return false;
    if (buf && size)
        (void)snprintf(buf, size, "%s", h->who[path]);
    return true;
}

int ledger_addresses(const struct ledger *l, char ***ret, size_t *ret_n)
{
    size_t pos = 0, n = *ret_n;
    const char *key;
    void *v;
    char **out = realloc(*ret, (n + map_size(l->devices) + 1) * sizeof(*out));
    if (!out)
        return -ENOMEM;
    *ret = out;
    while (map_next(l->devices, &pos, &key, &v)) {
        const struct holding *h = v;
        if (!h->held[LEDGER_PCI_CLAIM] && !h->held[LEDGER_DRA])
            continue; /* an mdev parent: on its driver, it is no claimed member of a group */
        if (!(out[n] = strdup(key)))
            return -ENOMEM;
        *ret_n = ++n;
    }
    return 0;
}

int ledger_check(const struct ledger *l, const char *address, enum ledger_path path, const char *id,
                 struct ledger_refusal *ret)
{
    char who[600];
    if (path == LEDGER_DRA && ledger_held(l, address, path, NULL, NULL, 0) &&
        !ledger_held(l, address, path, id, NULL, 0))
        return 0; /* this DRA claim holds it already (a repeated call): a later claim is refused */
    if ((path == LEDGER_PCI_CLAIM || path == LEDGER_DRA) &&
        ledger_held(l, address, LEDGER_MDEV, NULL, who, sizeof(who))) {
        bool many = strchr(who, ',') != NULL; /* "instance a (VGPUDevice x), instance b (...)" */
        ret->reason = "ParentHasInstances";
        (void)snprintf(ret->message, sizeof(ret->message),
                       "device %s is the parent of mediated devices: %.600s. Binding it to "
                       "vfio-pci would remove them: disable or delete %s (or remove the "
                       "instance%s) first, then this %s",
                       address, who, many ? "their VGPUDevices" : "that VGPUDevice",
                       many ? "s" : "",
                       path == LEDGER_PCI_CLAIM ? "claim binds" : "ResourceClaim can be prepared");
        return -EBUSY;
    }
    if (path == LEDGER_PCI_CLAIM && ledger_held(l, address, LEDGER_DRA, NULL, who, sizeof(who))) {
        ret->reason = "AllocatedByDRA";
        (void)snprintf(ret->message, sizeof(ret->message),
                       "device %s is prepared for ResourceClaim %.600s (DRA driver "
                       "vfio-pci.hostdevd.io): this claim waits until that claim's Pod is gone",
                       address, who);
        return -EBUSY;
    }
    if (path == LEDGER_DRA && ledger_held(l, address, LEDGER_PCI_CLAIM, NULL, who, sizeof(who))) {
        ret->reason = "HeldByPCIDeviceClaim";
        (void)snprintf(ret->message, sizeof(ret->message),
                       "device %s is held by PCIDeviceClaim %s: delete that claim first", address,
                       who);
        return -EBUSY;
    }
    if (path == LEDGER_DEVICE_PLUGIN &&
        ledger_held(l, address, LEDGER_DRA, NULL, who, sizeof(who))) {
        ret->reason = "PreparedForResourceClaim";
        (void)snprintf(ret->message, sizeof(ret->message),
                       "mediated device %s is prepared for ResourceClaim %.600s (DRA driver "
                       "vfio-pci.hostdevd.io): the device plugin gives it out again once that "
                       "claim's Pod is gone",
                       address, who);
        return -EBUSY;
    }
    if (path == LEDGER_DRA && ledger_held(l, address, LEDGER_DRA, id, who, sizeof(who))) {
        ret->reason = "PreparedForResourceClaim";
        (void)snprintf(ret->message, sizeof(ret->message),
                       "device %s is prepared for ResourceClaim %s", address, who);
        return -EBUSY;
    }
    return 0;
}

static void *make(const struct part_env *env)
{
    return ledger_new(env->mgr);
}

static void part_free(void *self)
{
    ledger_free(self);
}

const struct part_ops ledger_part = {.name = "ledger", .make = make, .free = part_free};
