/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/expect.c - write expectations (see expect.h).
 */
#include "controllers/expect.h"

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

void expect_write(struct expect *e, const char *key, const char *rv, const struct cJSON *cached,
                  double now)
{
    const char *have = kube_meta_str(cached, "resourceVersion");
    if ((!rv && !cached) || (rv && have && strcmp(rv, have) == 0)) {
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
    if (x && (deleted || (x->rv && rv && strcmp(rv, x->rv) == 0)))
        map_remove(e->m, key);
}
