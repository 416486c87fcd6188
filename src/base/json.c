/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/json.c - strict JSON parsing: one value, whitespace around it, nothing else; and the
 * NULL-safe accessors of parsed objects. See json.h. Pure: no I/O, no logging.
 */
#include "base/json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/map.h"

#define INTERN_KEY_MAX  64
#define INTERN_KEYS_MAX 4096

static bool is_json_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* The 1-based line of byte `off` of `s`. */
static int line_at(const char *s, size_t off)
{
    int no = 1;
    for (size_t i = 0; i < off; i++)
        no += s[i] == '\n';
    return no;
}

int json_parse_strict(const char *s, size_t len, struct cJSON **ret, struct err *ret_err)
{
    if (!s || len == 0)
        return err_set(ret_err, -EBADMSG, "line 1: empty JSON document");
    const char *end = NULL;
    _cleanup_json_ cJSON *root = cJSON_ParseWithLengthOpts(s, len, &end, false);
    size_t off = end && end >= s && end <= s + len ? (size_t)(end - s) : 0;
    if (!root)
        return err_set(ret_err, -EBADMSG, "line %d: invalid JSON", line_at(s, off));
    while (off < len && is_json_space(s[off]))
        off++;
    if (off < len)
        return err_set(ret_err, -EBADMSG, "line %d: unexpected text after the JSON document",
                       line_at(s, off));
    *ret = TAKE_PTR(root);
    return 0;
}

const cJSON *json_field(const cJSON *o, const char *name)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, name) : NULL;
}

const char *json_str(const cJSON *o, const char *name)
{
    return cJSON_GetStringValue(json_field(o, name));
}

void cJSON_Deletep(cJSON **p)
{
    cJSON_Delete(*p);
}

bool json_same(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* --- shared member names -------------------------------------------------------------------- */

static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
static struct map *intern_names; /* name -> its shared copy (never freed) */

/* The shared copy of `name`, or NULL (too long, the table full, out of memory). Locked. */
static const char *interned(const char *name)
{
    if (strlen(name) > INTERN_KEY_MAX)
        return NULL;
    if (!intern_names && !(intern_names = map_new(NULL)))
        return NULL;
    char *copy = map_get(intern_names, name);
    if (copy || map_size(intern_names) >= INTERN_KEYS_MAX)
        return copy;
    copy = strdup(name);
    if (copy && map_put(intern_names, name, copy) < 0) {
        free(copy);
        copy = NULL;
    }
    return copy;
}

static void intern_tree(cJSON *o)
{
    for (cJSON *c = o ? o->child : NULL; c; c = c->next) {
        const char *shared;
        if (c->string && !(c->type & cJSON_StringIsConst) && (shared = interned(c->string))) {
            free(c->string);
            c->string = (char *)shared; /* cJSON's field is not const; it is never written */
            c->type |= cJSON_StringIsConst;
        }
        intern_tree(c);
    }
}

void json_intern_keys(cJSON *o)
{
    (void)pthread_mutex_lock(&intern_lock);
    intern_tree(o);
    (void)pthread_mutex_unlock(&intern_lock);
}
