/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/expect.c - write expectations (see expect.h).
 *
 * resourceVersions are compared as the etcd revisions the API server gives them (unsigned
 * decimal integers, monotonic across the whole store: Kubernetes documents them as comparable
 * since KEP-5504). Anything else is compared for equality only, as before.
 */
#include "controllers/runtime/expect.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/map.h"
#include "kube/client.h"

struct expectation {
    char *rv; /* NULL: we deleted the object */
    double until;
};

struct expect {
    struct map *m;
};

static void free_expectation(void *p)
{
    struct expectation *x = p;
    if (x)
        free(x->rv);
    free(x);
}

struct expect *expect_new(void)
{
    struct expect *e = calloc(1, sizeof(*e));
    if (e && !(e->m = map_new(free_expectation))) {
        free(e);
        e = NULL;
    }
    return e;
}

struct expect *expect_free(struct expect *e)
{
    if (e)
        map_free(e->m);
    free(e);
    return NULL;
}

/* Whether `have` is at or after `want`: -1 when either is not a revision number. */
static int at_or_after(const char *have, const char *want)
{
    unsigned long long h, w;
    char *end;
    if (!have || !want || !*have || !*want || *have == '-' || *want == '-')
        return -1;
    errno = 0;
    h = strtoull(have, &end, 10);
    if (*end || errno)
        return -1;
    w = strtoull(want, &end, 10);
    if (*end || errno)
        return -1;
    return h >= w;
}

/* Whether an object at `have` shows our write at `want`. */
static bool shows(const char *have, const char *want)
{
    int r = at_or_after(have, want);
    return r < 0 ? (have && want && strcmp(have, want) == 0) : r == 1;
}

void expect_write(struct expect *e, const char *key, const char *rv, const struct cJSON *cached,
                  double now)
{
    const char *have = kube_meta_str(cached, "resourceVersion");
    if ((!rv && !cached) || (rv && shows(have, rv))) {
        map_remove(e->m, key); /* already seen */
        return;
    }
    struct expectation *x = calloc(1, sizeof(*x));
    if (!x)
        return;
    x->rv = rv ? strdup(rv) : NULL;
    x->until = now + EXPECT_TTL;
    if (map_put(e->m, key, x) < 0)
        free_expectation(x);
}

double expect_waiting(struct expect *e, const char *key, double now)
{
    const struct expectation *x = map_get(e->m, key);
    if (!x)
        return 0;
    if (now < x->until)
        return x->until - now;
    map_remove(e->m, key);
    return 0;
}

void expect_observed(struct expect *e, const char *key, const struct cJSON *obj, bool deleted)
{
    const struct expectation *x = map_get(e->m, key);
    const char *rv = kube_meta_str(obj, "resourceVersion");
    if (x && (deleted || (x->rv && shows(rv, x->rv))))
        map_remove(e->m, key);
}

void expect_caught_up(struct expect *e, const char *key, const struct cJSON *cached,
                      const char *informer_rv)
{
    const struct expectation *x = map_get(e->m, key);
    if (!x)
        return;
    if (x->rv ? (shows(kube_meta_str(cached, "resourceVersion"), x->rv) ||
                 at_or_after(informer_rv, x->rv) == 1)
              : !cached)
        map_remove(e->m, key);
}

size_t expect_pending(const struct expect *e, double now)
{
    size_t pos = 0, n = 0;
    const char *key;
    void *v;
    while (map_next(e->m, &pos, &key, &v))
        if (now < ((const struct expectation *)v)->until)
            n++;
    return n;
}
