/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzzjson.h - what the object fuzz targets share: the input cut into parts at the
 * byte 0x1e, each part parsed as the informer parses what the API server sends
 * (json_parse_strict), a patch checked to be JSON, and a JSON merge patch (RFC 7386) applied as
 * the API server applies it, so a target can check that what a reconciler writes is what it
 * wants next time (a second plan writes nothing).
 */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

#define FUZZ_PARTS 12

struct fuzz_parts {
    const uint8_t *p[FUZZ_PARTS];
    size_t n[FUZZ_PARTS];
};

/* Cuts `data` at 0x1e into at most FUZZ_PARTS parts (the last takes the rest); missing parts
 * are empty. */
static inline void fuzz_split(const uint8_t *data, size_t size, struct fuzz_parts *ret)
{
    *ret = (struct fuzz_parts){0};
    size_t part = 0, start = 0;
    for (size_t i = 0; i <= size && part < FUZZ_PARTS; i++) {
        if (i == size || (data[i] == 0x1e && part < FUZZ_PARTS - 1)) {
            ret->p[part] = data + start;
            ret->n[part++] = i - start;
            start = i + 1;
        }
    }
}

/* Whether an object anywhere in `j` repeats a key. The API server re-encodes every object it
 * stores (Go's encoding/json: the last of repeated keys wins), so what it sends has none. */
static inline bool fuzz_repeats_keys(const cJSON *j)
{
    for (const cJSON *c = j ? j->child : NULL; c; c = c->next) {
        if (cJSON_IsObject(j))
            for (const cJSON *d = c->next; d; d = d->next)
                if (strcmp(c->string, d->string) == 0)
                    return true;
        if (fuzz_repeats_keys(c))
            return true;
    }
    return false;
}

/* Part `i` as a JSON object, or NULL (empty, not JSON, not an object, or keys repeated: see
 * fuzz_repeats_keys). */
static inline cJSON *fuzz_object(const struct fuzz_parts *parts, size_t i)
{
    cJSON *j = NULL;
    if (!parts->n[i] || json_parse_strict((const char *)parts->p[i], parts->n[i], &j, NULL) < 0)
        return NULL;
    if (!cJSON_IsObject(j) || fuzz_repeats_keys(j)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* Parses a patch a reconciler made: it must be JSON (of `type` cJSON_Object or cJSON_Array). */
static inline cJSON *fuzz_patch(const char *patch, int type)
{
    cJSON *j = NULL;
    if (json_parse_strict(patch, strlen(patch), &j, NULL) < 0 || (j->type & 0xff) != type)
        abort(); /* a patch that is not JSON would be refused for ever */
    return j;
}

/* Applies the merge patch `patch` to `target` (changed in place; objects only). */
static inline void fuzz_merge(cJSON *target, const cJSON *patch)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, patch)
    {
        cJSON *have = cJSON_GetObjectItemCaseSensitive(target, m->string);
        if (cJSON_IsNull(m)) {
            cJSON_DeleteItemFromObjectCaseSensitive(target, m->string);
        } else if (cJSON_IsObject(m) && cJSON_IsObject(have)) {
            fuzz_merge(have, m);
        } else {
            cJSON *copy = cJSON_IsObject(m) ? cJSON_CreateObject() : cJSON_Duplicate(m, 1);
            if (!copy)
                abort();
            if (cJSON_IsObject(m))
                fuzz_merge(copy, m); /* drops nulls inside, as the server does */
            if (have)
                cJSON_ReplaceItemInObjectCaseSensitive(target, m->string, copy);
            else
                cJSON_AddItemToObject(target, m->string, copy);
        }
    }
}

/* A copy of `obj` with the merge patch text `patch` applied. */
static inline cJSON *fuzz_apply(const cJSON *obj, const char *patch)
{
    cJSON *p = fuzz_patch(patch, cJSON_Object);
    cJSON *copy = cJSON_Duplicate(obj, 1);
    if (!copy)
        abort();
    fuzz_merge(copy, p);
    cJSON_Delete(p);
    return copy;
}

/* Checks that a JSON patch (RFC 6902) a reconciler made is a JSON array, and frees it. */
static inline void fuzz_check_json_patch(char *patch)
{
    if (patch)
        cJSON_Delete(fuzz_patch(patch, cJSON_Array));
    free(patch);
}
