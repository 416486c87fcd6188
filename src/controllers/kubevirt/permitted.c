/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/kubevirt/permitted.c - permittedHostDevices as a set with an owner (see permitted.h).
 */
#include "controllers/kubevirt/permitted.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/json.h"
#include "kube/client.h"

int permitted_want_add(struct permitted_want *w, const struct permitted_entry *e)
{
    for (size_t i = 0; i < w->n; i++) {
        struct permitted_entry *have = &w->entries[i];
        if (strcmp(have->resource, e->resource) != 0)
            continue;
        /* two mdev types offered under one name: the smallest selector, whatever the caches'
         * order (else the entry would flap between writes) */
        if (have->kind == PERMITTED_MDEV && e->kind == PERMITTED_MDEV &&
            strcmp(e->selector, have->selector) < 0)
            *have = *e;
        return 0;
    }
    struct permitted_entry *p = realloc(w->entries, (w->n + 1) * sizeof(*p));
    if (!p)
        return -ENOMEM;
    w->entries = p;
    w->entries[w->n++] = *e;
    return 0;
}

void permitted_want_done(struct permitted_want *w)
{
    free(w->entries);
    *w = (struct permitted_want){0};
}

int permitted_mdev_selector(const char *name, const char *id, char *buf, size_t size)
{
    const char *s = name ? name : "";
    while (isspace((unsigned char)*s))
        s++;
    size_t len = strlen(s);
    while (len > 0 && isspace((unsigned char)s[len - 1]))
        len--;
    if (len == 0) {
        s = id ? id : "";
        len = strlen(s);
    }
    if (len == 0)
        return -EINVAL;
    if (len >= size)
        return -ENAMETOOLONG;
    memcpy(buf, s, len);
    buf[len] = '\0';
    for (char *p = strchr(buf, ' '); p; p = strchr(p + 1, ' '))
        *p = '_';
    return 0;
}

bool permitted_gate_enabled(const cJSON *kubevirt)
{
    const cJSON *gates =
            json_field(json_field(json_field(json_field(kubevirt, "spec"), "configuration"),
                                  "developerConfiguration"),
                       "featureGates");
    const cJSON *g;
    cJSON_ArrayForEach(g, gates)
    {
        if (cJSON_IsString(g) && strcmp(g->valuestring, "HostDevices") == 0)
            return true;
    }
    return false;
}

/* --- ownership ----------------------------------------------------------------------------- */

/* Whether `name` is in the comma-separated list `list`. */
static bool listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return true;
        p = end ? end + 1 : NULL;
    }
    return false;
}

static const char *owned_list(const cJSON *kubevirt)
{
    const char *s = cJSON_GetStringValue(
            json_field(json_field(json_field(kubevirt, "metadata"), "annotations"),
                       PERMITTED_OWNED_ANNOTATION));
    return s ? s : "";
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* --- the lists ----------------------------------------------------------------------------- */

static cJSON *entry_json(const struct permitted_entry *e)
{
    cJSON *o = cJSON_CreateObject();
    if (e->kind == PERMITTED_MDEV) {
        cJSON_AddStringToObject(o, "mdevNameSelector", e->selector);
        cJSON_AddStringToObject(o, "resourceName", e->resource);
    } else if (e->kind == PERMITTED_USB) {
        cJSON_AddStringToObject(o, "resourceName", e->resource);
        cJSON *sel = cJSON_AddArrayToObject(o, "selectors");
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "vendor", e->vendor);
        cJSON_AddStringToObject(s, "product", e->product);
        cJSON_AddItemToArray(sel, s);
    } else {
        char selector[10];
        (void)snprintf(selector, sizeof(selector), "%s:%s", e->vendor, e->product);
        cJSON_AddStringToObject(o, "pciVendorSelector", selector);
        cJSON_AddStringToObject(o, "resourceName", e->resource);
    }
    cJSON_AddBoolToObject(o, "externalResourceProvider", true);
    return o;
}

static const struct permitted_entry *wanted(const struct permitted_want *w, const char *resource,
                                            enum permitted_kind kind)
{
    for (size_t i = 0; resource && i < w->n; i++)
        if (w->entries[i].kind == kind && strcmp(w->entries[i].resource, resource) == 0)
            return &w->entries[i];
    return NULL;
}

struct pass { /* one list being rebuilt */
    const struct permitted_want *w;
    const char *owned;
    enum permitted_kind kind; /* the list being rebuilt */
    bool *emitted;            /* per want entry: placed already */
    bool *conflict;           /* per want entry: a foreign entry serves it */
    bool *adopted; /* per want entry: not in the record, but its entries are ours (taken back) */
    struct permitted_result *res;
    struct buf *conflicts, *adopted_names;
};

/* Whether `rn` is hostdevd's: listed in the record, or taken back by this plan. */
static bool owns(const struct pass *p, const char *rn)
{
    if (listed(p->owned, rn))
        return true;
    for (size_t i = 0; i < p->w->n; i++)
        if (p->adopted[i] && strcmp(p->w->entries[i].resource, rn) == 0)
            return true;
    return false;
}

/* Rebuilds one current list: foreign entries as they are, owned ones kept or dropped. */
static void keep_current(struct pass *p, const cJSON *current, cJSON *out)
{
    const cJSON *item;
    cJSON_ArrayForEach(item, current)
    {
        const char *rn = json_str(item, "resourceName");
        const struct permitted_entry *e = wanted(p->w, rn, p->kind);
        size_t idx = e ? (size_t)(e - p->w->entries) : 0;
        if (!rn || !owns(p, rn)) {
            cJSON_AddItemToArray(out, cJSON_Duplicate(item, true)); /* foreign */
        } else if (!e || p->emitted[idx]) {
            p->res->removed++; /* no longer needed, or a duplicate */
        } else {
            cJSON *mine = entry_json(e);
            if (!cJSON_Compare(mine, item, true))
                p->res->rewritten++;
            cJSON_AddItemToArray(out, mine);
            p->emitted[idx] = true;
        }
    }
}

/* By enum permitted_kind. */
static const char *const lists[] = {"pciHostDevices", "usb", "mediatedDevices"};
#define N_LISTS (sizeof(lists) / sizeof(lists[0]))

/* Whether every entry of either list named like `e` is exactly what hostdevd writes for `e` (in
 * its list, nothing more, nothing less): such entries are ours, whatever the record says. */
static bool all_ours(const cJSON *phd, const struct permitted_entry *e)
{
    _cleanup_json_ cJSON *mine = entry_json(e);
    bool ours = mine != NULL;
    for (size_t l = 0; ours && l < N_LISTS; l++) {
        const cJSON *item;
        cJSON_ArrayForEach(item, json_field(phd, lists[l]))
        {
            const char *rn = json_str(item, "resourceName");
            if (rn && strcmp(rn, e->resource) == 0 &&
                (l != (size_t)e->kind || !cJSON_Compare(mine, item, true)))
                ours = false;
        }
    }
    return ours;
}

/* Decides the needed names the record does not list but an entry of either list does: taken
 * back when all such entries are exactly ours (the record was removed or edited), else left to
 * the foreign entry (a conflict). All lists first: a name owned for one list must not make a
 * foreign entry of the same name in another list look owned next time (it was removed then). */
static void find_conflicts(struct pass *p, const cJSON *phd)
{
    for (size_t l = 0; l < N_LISTS; l++) {
        const cJSON *item;
        cJSON_ArrayForEach(item, json_field(phd, lists[l]))
        {
            const char *rn = json_str(item, "resourceName");
            for (size_t i = 0; rn && !listed(p->owned, rn) && i < p->w->n; i++) {
                if (p->emitted[i] || p->adopted[i] || strcmp(p->w->entries[i].resource, rn) != 0)
                    continue;
                struct buf *names = p->conflicts;
                if (all_ours(phd, &p->w->entries[i])) {
                    names = p->adopted_names;
                    p->adopted[i] = true;
                    p->res->adopted++;
                } else {
                    p->emitted[i] = p->conflict[i] = true;
                }
                (void)buf_printf(names, "%s%s", names->len ? "," : "", rn);
            }
        }
    }
}

/* The new list of kind p->kind, or NULL when it would equal the current one. */
static cJSON *rebuild(struct pass *p, const cJSON *current)
{
    _cleanup_json_ cJSON *out = cJSON_CreateArray();
    keep_current(p, current, out);
    for (size_t i = 0; i < p->w->n; i++) {
        if (p->w->entries[i].kind != p->kind || p->emitted[i])
            continue;
        cJSON_AddItemToArray(out, entry_json(&p->w->entries[i]));
        p->emitted[i] = true;
        p->res->added++;
    }
    bool same = cJSON_IsArray(current) ? cJSON_Compare(out, current, true)
                                       : cJSON_GetArraySize(out) == 0;
    if (same)
        return NULL;
    return TAKE_PTR(out);
}

/* The new ownership list: the needed names no foreign entry serves, sorted. */
static char *new_owned(const struct permitted_want *w, const bool *conflict)
{
    const char **names = calloc(w->n + 1, sizeof(*names));
    struct buf b;
    buf_init(&b, 1u << 20);
    size_t n = 0;
    for (size_t i = 0; names && i < w->n; i++)
        if (!conflict[i])
            names[n++] = w->entries[i].resource;
    if (names)
        qsort(names, n, sizeof(*names), cmp_names);
    for (size_t i = 0; i < n; i++)
        (void)buf_printf(&b, "%s%s", i ? "," : "", names[i]);
    free(names);
    char *s = buf_take(&b);
    return s ? s : strdup("");
}

/* Assembles the merge patch of whatever changed (taking the rebuilt lists `built`, one per
 * kind, NULL where unchanged); NULL when nothing did. */
static char *patch_of(const cJSON *kubevirt, cJSON **built, const char *owned)
{
    bool owner_changed = strcmp(owned, owned_list(kubevirt)) != 0, lists_changed = false;
    for (size_t l = 0; l < N_LISTS; l++)
        lists_changed |= built[l] != NULL;
    if (!lists_changed && !owner_changed)
        return NULL;
    _cleanup_json_ cJSON *patch = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(patch, "metadata");
    cJSON_AddStringToObject(meta, "resourceVersion", kube_meta_str(kubevirt, "resourceVersion"));
    if (owner_changed) {
        cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
        if (owned[0])
            cJSON_AddStringToObject(ann, PERMITTED_OWNED_ANNOTATION, owned);
        else
            cJSON_AddNullToObject(ann, PERMITTED_OWNED_ANNOTATION);
    }
    if (lists_changed) {
        cJSON *phd = cJSON_AddObjectToObject(
                cJSON_AddObjectToObject(cJSON_AddObjectToObject(patch, "spec"), "configuration"),
                "permittedHostDevices");
        for (size_t l = 0; l < N_LISTS; l++)
            if (built[l] && cJSON_AddItemToObject(phd, lists[l], built[l]))
                built[l] = NULL; /* the patch's now */
    }
    return cJSON_PrintUnformatted(patch);
}

int permitted_plan(const cJSON *kubevirt, const struct permitted_want *w,
                   struct permitted_result *ret)
{
    *ret = (struct permitted_result){0};
    if (!kube_meta_str(kubevirt, "resourceVersion"))
        return -EINVAL;
    const cJSON *phd = json_field(json_field(json_field(kubevirt, "spec"), "configuration"),
                                  "permittedHostDevices");
    _cleanup_buf_ struct buf conflicts, adopted;
    buf_init(&conflicts, sizeof(ret->conflicts) - 1);
    buf_init(&adopted, sizeof(ret->adopted_names) - 1);
    bool *flags = calloc(3 * (w->n + 1), sizeof(*flags)); /* emitted, conflict, adopted */
    if (!flags)
        return -ENOMEM;
    struct pass p = {.w = w,
                     .owned = owned_list(kubevirt),
                     .emitted = flags,
                     .conflict = flags + w->n + 1,
                     .adopted = flags + 2 * (w->n + 1),
                     .res = ret,
                     .conflicts = &conflicts,
                     .adopted_names = &adopted};
    find_conflicts(&p, phd);
    cJSON *built[N_LISTS] = {NULL};
    for (size_t l = 0; l < N_LISTS; l++) {
        p.kind = (enum permitted_kind)l;
        built[l] = rebuild(&p, json_field(phd, lists[l]));
    }
    char *owned = new_owned(w, p.conflict);
    (void)snprintf(ret->conflicts, sizeof(ret->conflicts), "%s", buf_str(&conflicts));
    (void)snprintf(ret->adopted_names, sizeof(ret->adopted_names), "%s", buf_str(&adopted));
    ret->patch = owned ? patch_of(kubevirt, built, owned) : NULL;
    for (size_t l = 0; l < N_LISTS; l++)
        cJSON_Delete(built[l]); /* what the patch did not take */
    int r = owned ? 0 : -ENOMEM;
    free(owned);
    free(flags);
    return r;
}
