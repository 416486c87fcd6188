/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/mdev/mdevledger.c - the PCI parents with mdev instances in the ledger (see
 * mdevledger.h).
 */
#include "controllers/mdev/mdevledger.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/map.h"
#include "controllers/binding/ledger.h"
#include "controllers/mdev/mdevplan.h"
#include "controllers/objects/mdevobj.h"
#include "kube/informer.h"
#include "kube/names.h"

/* A create on the worker now. */
struct creating {
    char uuid[NODE_MDEV_UUID_SIZE];
    char parent[NODE_MDEV_NAME_SIZE];
};

struct mdevledger {
    struct ledger *ledger;
    char *node;
    struct map *creating; /* object name -> struct creating */
    /* for name_of(), during a sync */
    struct kube_informer *objects;
    bool synced;
    char adopted[KUBE_NAME_MAX + 1];
};

struct mdevledger *mdevledger_new(struct ledger *l, const char *node)
{
    struct mdevledger *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->ledger = l;
    m->node = strdup(node);
    m->creating = map_new(free);
    if (!m->node || !m->creating) {
        mdevledger_free(m);
        return NULL;
    }
    return m;
}

void mdevledger_free(struct mdevledger *m)
{
    if (!m)
        return;
    map_free(m->creating);
    free(m->node);
    free(m);
}

void mdevledger_creating(struct mdevledger *m, const char *name, const char *parent,
                         const char *uuid)
{
    struct creating *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    (void)snprintf(c->uuid, sizeof(c->uuid), "%s", uuid);
    (void)snprintf(c->parent, sizeof(c->parent), "%s", parent);
    if (map_put(m->creating, name, c) < 0)
        free(c);
}

void mdevledger_created(struct mdevledger *m, const char *name)
{
    map_remove(m->creating, name);
}

const char *mdevledger_object_of(struct kube_informer *objects, const char *uuid)
{
    const char *key;
    const cJSON *obj;
    size_t pos = 0;
    while (objects && kube_informer_next(objects, &pos, &key, &obj))
        if (json_same(mdevobj_status_uuid(obj), uuid) ||
            json_same(json_str(json_field(obj, "spec"), "uuid"), uuid))
            return key;
    return NULL;
}

/* The object of instance `uuid` for a message: the one that names it, else (once the cache is
 * there) the adopted object the agent publishes for it; NULL before. */
static const char *name_of(const char *uuid, void *arg)
{
    struct mdevledger *m = arg;
    const char *key = mdevledger_object_of(m->objects, uuid);
    if (key || !m->synced)
        return key;
    if (mdevobj_adopted_name(m->node, uuid, m->adopted, sizeof(m->adopted)) < 0)
        return NULL;
    return m->adopted;
}

/* The instances of the scan and those being created, in *ret (n of them). Returns 0 or
 * -ENOMEM. */
static int instances_now(const struct mdevledger *m, const struct node_mdev_scan *scan,
                         struct node_mdev_instance **ret, size_t *ret_n)
{
    size_t n = scan->n_instances, pos = 0;
    struct node_mdev_instance *all = calloc(n + map_size(m->creating) + 1, sizeof(*all));
    void *val;
    if (!all)
        return -ENOMEM;
    if (n)
        memcpy(all, scan->instances, n * sizeof(*all));
    while (map_next(m->creating, &pos, NULL, &val)) {
        const struct creating *c = val;
        if (mdevplan_instance(scan, c->uuid))
            continue;
        (void)snprintf(all[n].uuid, sizeof(all[n].uuid), "%s", c->uuid);
        (void)snprintf(all[n].parent, sizeof(all[n].parent), "%s", c->parent);
        n++;
    }
    *ret = all;
    *ret_n = n;
    return 0;
}

void mdevledger_sync(struct mdevledger *m, const struct node_mdev_scan *scan,
                     struct kube_informer *objects, bool synced)
{
    struct node_mdev_instance *all = NULL;
    size_t n = 0;
    if (instances_now(m, scan, &all, &n) < 0)
        return; /* the holdings stay as they were */
    m->objects = objects;
    m->synced = synced;
    ledger_begin(m->ledger, LEDGER_MDEV);
    for (size_t i = 0; i < n; i++) {
        const char *parent = all[i].parent;
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = strcmp(all[k].parent, parent) == 0;
        if (seen || !kube_names_is_pci_address(parent))
            continue;
        char who[560];
        (void)mdevplan_parent_users(all, n, parent, name_of, m, who, sizeof(who));
        (void)ledger_hold(m->ledger, parent, LEDGER_MDEV, parent, who);
    }
    ledger_end(m->ledger, LEDGER_MDEV);
    m->objects = NULL;
    free(all);
}
