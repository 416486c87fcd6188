/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_list.c - LIST pages through the informer's own code (kube/informer.c:
 * kube_informer_list_page(), kube_informer_diff()) on arbitrary bytes.
 *
 * Input: one byte of options (bit 0 keep managedFields, bit 1 metadata only), then the pages of
 * a first LIST separated by the byte 0x1e, then 0x1d, then the pages of a relist. Each LIST
 * takes pages as the informer does until one fails (the LIST is dropped), one has no continue
 * token (the LIST is complete) or the input ends (incomplete). Checks every accepted page: the
 * continue token non-empty, the resourceVersion there exactly on the last page, every cached
 * object an object stored under its own key, managedFields gone unless kept, nothing but
 * apiVersion, kind and metadata with metadata only. When both LISTs complete, the relist's diff
 * must add exactly the new keys, delete exactly the vanished ones and update only common ones.
 */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/map.h"
#include "kube/client.h"
#include "kube/informer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct counts {
    const struct map *store, *list;
    size_t adds, updates, deletes;
};

static void free_json(void *p)
{
    cJSON_Delete(p);
}

static void check_object(const char *key, const cJSON *o, unsigned opts)
{
    char want[512];
    if (!cJSON_IsObject(o) || kube_informer_key(o, want, sizeof(want)) < 0 || strcmp(want, key))
        abort();
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    if (!(opts & 1) && cJSON_GetObjectItemCaseSensitive(meta, "managedFields"))
        abort();
    for (const cJSON *c = o->child; (opts & 2) && c; c = c->next)
        if (strcmp(c->string, "metadata") && strcmp(c->string, "apiVersion") &&
            strcmp(c->string, "kind"))
            abort();
}

/* Takes the pages in [p, end) as one LIST. Returns the complete list, or NULL. */
static struct map *take_list(const uint8_t *p, const uint8_t *end, unsigned opts)
{
    struct map *pending = map_new(free_json);
    while (pending) {
        const uint8_t *sep = memchr(p, 0x1e, (size_t)(end - p));
        const uint8_t *stop = sep ? sep : end;
        char *cont = NULL, *rv = NULL;
        if (kube_informer_list_page((const char *)p, (size_t)(stop - p), opts & 1, opts & 2,
                                    pending, &cont, &rv) < 0)
            break;
        if ((cont && (!cont[0] || rv)) || (!cont && !rv))
            abort();
        free(rv);
        if (!cont)
            return pending;
        free(cont);
        if (!sep)
            break;
        p = sep + 1;
    }
    return map_free(pending);
}

static void on_add(const char *key, const cJSON *obj, void *userdata)
{
    struct counts *c = userdata;
    if (map_contains(c->store, key) || map_get(c->list, key) != obj)
        abort();
    c->adds++;
}

static void on_update(const char *key, const cJSON *old, const cJSON *obj, void *userdata)
{
    struct counts *c = userdata;
    if (map_get(c->store, key) != old || map_get(c->list, key) != obj)
        abort();
    c->updates++;
}

static void on_delete(const char *key, const cJSON *obj, void *userdata)
{
    struct counts *c = userdata;
    if (map_contains(c->list, key) || map_get(c->store, key) != obj)
        abort();
    c->deletes++;
}

static void check_list(const struct map *m, unsigned opts)
{
    size_t pos = 0;
    const char *key;
    void *v;
    while (map_next(m, &pos, &key, &v))
        check_object(key, v, opts);
}

static void check_diff(const struct map *store, const struct map *list)
{
    struct counts c = {.store = store, .list = list};
    struct kube_informer_handlers h = {
            .on_add = on_add, .on_update = on_update, .on_delete = on_delete};
    kube_informer_diff(store, list, &h, &c);
    size_t common = 0, pos = 0;
    const char *key;
    void *v;
    while (map_next(list, &pos, &key, &v))
        common += map_contains(store, key);
    if (c.adds != map_size(list) - common || c.deletes != map_size(store) - common ||
        c.updates > common)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1 << 20))
        return 0;
    unsigned opts = data[0];
    const uint8_t *p = data + 1, *end = data + size;
    const uint8_t *split = memchr(p, 0x1d, (size_t)(end - p));
    struct map *store = take_list(p, split ? split : end, opts);
    struct map *relist = split ? take_list(split + 1, end, opts) : NULL;
    if (store)
        check_list(store, opts);
    if (relist)
        check_list(relist, opts);
    if (store && relist)
        check_diff(store, relist);
    map_free(store);
    map_free(relist);
    return 0;
}
