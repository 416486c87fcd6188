/* SPDX-License-Identifier: Apache-2.0 */
/* controllers/claims/claimgauge.c - hostdevd_claims{kind, ready, reason} (see claimgauge.h). */
#include "controllers/claims/claimgauge.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/metrics.h"
#include "controllers/objects/claimstatus.h"
#include "controllers/objects/kinds.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "kube/informer.h"

struct entry {
    int kind;
    bool ready;
    char reason[64];
    struct metrics_series *series;
};

struct claimgauge {
    struct metrics *m;
    struct metrics_family *family;
    const struct kube_informer *inf[2];
    struct entry entries[CLAIMGAUGE_MAX_SERIES];
    size_t n;
};

static const char *const kinds[2] = {"pci", "usb"};

static struct entry *entry_for(struct claimgauge *g, int kind, bool ready, const char *reason)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->entries[i].kind == kind && g->entries[i].ready == ready &&
            strcmp(g->entries[i].reason, reason) == 0)
            return &g->entries[i];
    if (g->n >= CLAIMGAUGE_MAX_SERIES - 1 && strcmp(reason, "Other") != 0)
        return entry_for(g, kind, ready, "Other");
    if (g->n == CLAIMGAUGE_MAX_SERIES)
        return NULL;
    struct entry *e = &g->entries[g->n];
    *e = (struct entry){.kind = kind, .ready = ready};
    (void)snprintf(e->reason, sizeof(e->reason), "%s", reason);
    e->series = metrics_series(g->family, kinds[kind], ready ? "true" : "false", e->reason);
    if (!e->series)
        return NULL;
    g->n++;
    return e;
}

static void count(struct claimgauge *g, int kind, const cJSON *claim)
{
    const cJSON *cond = claimstatus_ready(claim);
    bool ready = json_same(json_str(cond, "status"), "True");
    const char *reason = json_str(cond, "reason");
    struct entry *e = entry_for(g, kind, ready, cond && reason && reason[0] ? reason : "Pending");
    if (e)
        metrics_add(e->series, 1);
}

void claimgauge_collect(void *userdata)
{
    struct claimgauge *g = userdata;
    for (size_t i = 0; i < g->n; i++)
        metrics_set(g->entries[i].series, 0);
    for (int k = 0; k < 2; k++) {
        size_t pos = 0;
        const char *key;
        const cJSON *claim;
        while (g->inf[k] && kube_informer_next(g->inf[k], &pos, &key, &claim))
            count(g, k, claim);
    }
}

struct claimgauge *claimgauge_new(struct metrics *m, const struct kube_informer *pci,
                                  const struct kube_informer *usb)
{
    static const char *const labels[] = {"kind", "ready", "reason", NULL};
    struct claimgauge *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    *g = (struct claimgauge){.m = m, .inf = {pci, usb}};
    g->family = metrics_family(m, METRICS_GAUGE, "hostdevd_claims",
                               "Claims in this replica's caches by kind, Ready and reason.", labels,
                               NULL, 0);
    if (!g->family || metrics_add_collector(m, claimgauge_collect, g) < 0) {
        free(g);
        return NULL;
    }
    return g;
}

struct claimgauge *claimgauge_free(struct claimgauge *g)
{
    if (g) {
        metrics_remove_collector(g->m, claimgauge_collect, g);
        free(g);
    }
    return NULL;
}

static void *make(const struct part_env *env)
{
    return claimgauge_new(env->metrics, manager_cache(env->mgr, &kind_pcideviceclaims),
                          manager_cache(env->mgr, &kind_usbdeviceclaims));
}

static void part_free(void *self)
{
    (void)claimgauge_free(self);
}

const struct part_ops claimgauge_part = {.name = "claim gauge", .make = make, .free = part_free};
