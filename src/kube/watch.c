/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/watch.c - frames and decodes watch streams. See watch.h. No I/O, no logging, no globals.
 *
 * Framing: a consume offset walks the caller's bytes and memchr finds each '\n'. Complete lines
 * are decoded in place; only the unfinished last line is copied into the framer's buffer, which
 * therefore holds at most one line (cap + 1 bytes) and is emptied at most once per feed, when
 * the next feed brings that line's end.
 */
#include "kube/watch.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/json.h"

static const char *const type_names[_KUBE_WATCH_TYPE_MAX] = {
        [KUBE_WATCH_ADDED] = "ADDED",     [KUBE_WATCH_MODIFIED] = "MODIFIED",
        [KUBE_WATCH_DELETED] = "DELETED", [KUBE_WATCH_BOOKMARK] = "BOOKMARK",
        [KUBE_WATCH_ERROR] = "ERROR",
};

const char *kube_watch_type_name(enum kube_watch_type t)
{
    if ((int)t < 0 || t >= _KUBE_WATCH_TYPE_MAX)
        return "UNKNOWN";
    return type_names[t];
}

void kube_watch_framer_init(struct kube_watch_framer *f, size_t max_line)
{
    buf_init(&f->line, max_line < SIZE_MAX ? max_line + 1 : max_line);
    f->error = NULL;
}

void kube_watch_framer_free(struct kube_watch_framer *f)
{
    buf_free(&f->line);
}

bool kube_watch_framer_pending(const struct kube_watch_framer *f)
{
    return f->line.len > 0;
}

static size_t max_line(const struct kube_watch_framer *f)
{
    return f->line.cap - 1;
}

/* The member `name` of `obj`, or NULL when `obj` is not an object. */
static const cJSON *field(const cJSON *obj, const char *name)
{
    return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, name) : NULL;
}

static const char *nonempty_string(const cJSON *item)
{
    const char *s = cJSON_GetStringValue(item);
    return s && s[0] != '\0' ? s : NULL;
}

static int parse_type(const cJSON *item)
{
    const char *s = cJSON_GetStringValue(item);
    for (int t = 0; s && t < _KUBE_WATCH_TYPE_MAX; t++)
        if (strcmp(s, type_names[t]) == 0)
            return t;
    return -EBADMSG;
}

/* Sets *why to what is wrong with an event that is not one. */
static int bad(const char **why, const char *what)
{
    *why = what;
    return -EBADMSG;
}

static int event_from_json(const cJSON *root, struct kube_watch_event *ret, const char **why)
{
    int type = parse_type(field(root, "type"));
    const cJSON *object = field(root, "object");
    if (type < 0)
        return bad(why, "an event whose type is missing or unknown");
    if (!cJSON_IsObject(object))
        return bad(why, "an event whose object is missing or not an object");
    const cJSON *meta = field(object, "metadata");
    const char *rv = nonempty_string(field(meta, "resourceVersion"));
    switch (type) {
    case KUBE_WATCH_ERROR:
        rv = NULL;
        break;
    case KUBE_WATCH_BOOKMARK:
        if (!rv)
            return bad(why, "a BOOKMARK without metadata.resourceVersion");
        break;
    default:
        if (!nonempty_string(field(meta, "name")))
            return bad(why, "an object without metadata.name");
    }
    *ret = (struct kube_watch_event){.type = type, .object = object, .resource_version = rv};
    return 0;
}

static int decode(const char *line, size_t len, struct kube_watch_event *ret,
                  struct cJSON **ret_root, const char **why)
{
    _cleanup_json_ cJSON *root = NULL;
    int r = json_parse_strict(line, len, &root, NULL);
    if (r < 0)
        return bad(why, "a line that is not JSON");
    struct kube_watch_event ev;
    r = event_from_json(root, &ev, why);
    if (r < 0)
        return r;
    *ret = ev;
    *ret_root = TAKE_PTR(root);
    return 0;
}

int kube_watch_decode(const char *line, size_t len, struct kube_watch_event *ret,
                      struct cJSON **ret_root)
{
    const char *why;
    return decode(line, len, ret, ret_root, &why);
}

/* Decodes a complete line (without its '\n'). *ret_root stays NULL for an empty line. */
static int decode_line(struct kube_watch_framer *f, const char *line, size_t len,
                       struct kube_watch_event *ret, cJSON **ret_root)
{
    if (len > 0 && line[len - 1] == '\r')
        len--;
    if (len == 0)
        return 0;
    if (len > max_line(f))
        return -EMSGSIZE;
    return decode(line, len, ret, ret_root, &f->error);
}

/* Hands a decoded event to the callback and frees it; nothing for an empty line. */
static int dispatch(cJSON *root, const struct kube_watch_event *ev, kube_watch_cb cb,
                    void *userdata)
{
    if (!root)
        return 0;
    int r = cb(ev, userdata);
    cJSON_Delete(root);
    return r < 0 ? r : 0;
}

/* Appends to the buffered line. Past the cap only a last '\r' may stand, dropped if a '\n'
 * follows; anything else cannot end under the cap, so it fails now. */
static int add_partial(struct kube_watch_framer *f, const char *data, size_t n)
{
    int r = buf_add(&f->line, data, n);
    if (r == -E2BIG)
        return -EMSGSIZE;
    if (r < 0)
        return r;
    if (f->line.len == f->line.cap && f->line.data[f->line.len - 1] != '\r')
        return -EMSGSIZE;
    return 0;
}

/* Adds the start of `data` to the buffered line; if it holds the line's end, handles the line
 * and empties the buffer. Sets *consumed to the bytes used. */
static int finish_partial(struct kube_watch_framer *f, const char *data, size_t len,
                          size_t *consumed, kube_watch_cb cb, void *userdata)
{
    const char *nl = memchr(data, '\n', len);
    size_t n = nl ? (size_t)(nl - data) : len;
    *consumed = nl ? n + 1 : len;
    int r = add_partial(f, data, n);
    if (r < 0 || !nl)
        return r;
    struct kube_watch_event ev;
    cJSON *root = NULL;
    r = decode_line(f, f->line.data, f->line.len, &ev, &root);
    buf_reset(&f->line);
    if (r < 0)
        return r;
    return dispatch(root, &ev, cb, userdata);
}

static int feed(struct kube_watch_framer *f, const char *data, size_t len, kube_watch_cb cb,
                void *userdata)
{
    size_t off = 0;
    int r = 0;
    if (f->line.len > 0)
        r = finish_partial(f, data, len, &off, cb, userdata);
    while (r == 0 && off < len) {
        const char *nl = memchr(data + off, '\n', len - off);
        if (!nl)
            return add_partial(f, data + off, len - off);
        size_t n = (size_t)(nl - (data + off));
        struct kube_watch_event ev;
        cJSON *root = NULL;
        r = decode_line(f, data + off, n, &ev, &root);
        if (r == 0)
            r = dispatch(root, &ev, cb, userdata);
        off += n + 1;
    }
    return r;
}

int kube_watch_feed(struct kube_watch_framer *f, const char *data, size_t len, kube_watch_cb cb,
                    void *userdata)
{
    f->error = NULL;
    if (len == 0)
        return 0;
    int r = feed(f, data, len, cb, userdata);
    if (r == -EMSGSIZE)
        f->error = "an event line over the size cap";
    if (r < 0)
        buf_free(&f->line);
    return r;
}
