/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/metrics.c - the metrics registry (see metrics.h). Families keep their series in a
 * small array (a handful per family): a lookup is a scan, a render is in creation order.
 */
#include "base/metrics.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

struct metrics_series {
    const struct metrics_family *family;
    char *values[METRICS_MAX_LABELS];
    double value; /* counter, gauge; a histogram's sum */
    double count; /* histogram */
    double *bucket_counts;
};

struct metrics_family {
    enum metrics_type type;
    char *name, *help;
    char *labels[METRICS_MAX_LABELS];
    size_t n_labels;
    double buckets[METRICS_MAX_BUCKETS];
    size_t n_buckets;
    struct metrics_series **series;
    size_t n_series, alloc;
};

struct collector {
    void (*collect)(void *userdata);
    void *userdata;
};

struct metrics {
    struct metrics_family **families;
    size_t n_families, alloc;
    struct collector *collectors;
    size_t n_collectors, alloc_collectors;
};

const double metrics_reconcile_buckets[] = {
        0.005, 0.01, 0.025, 0.05, 0.1,  0.15, 0.2,  0.25, 0.3,  0.35, 0.4,  0.45, 0.5, 0.6,
        0.7,   0.8,  0.9,   1.0,  1.25, 1.5,  1.75, 2.0,  2.5,  3.0,  3.5,  4.0,  4.5, 5.0,
        6.0,   7.0,  8.0,   9.0,  10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0};
const size_t metrics_reconcile_buckets_n =
        sizeof(metrics_reconcile_buckets) / sizeof(metrics_reconcile_buckets[0]);
const double metrics_workqueue_buckets[] = {1e-8, 1e-7, 1e-6, 1e-5, 1e-4,  1e-3,
                                            1e-2, 1e-1, 1.0,  10.0, 100.0, 1000.0};
const size_t metrics_workqueue_buckets_n =
        sizeof(metrics_workqueue_buckets) / sizeof(metrics_workqueue_buckets[0]);

/* Grows an array of `size`-byte elements (pointers, collectors) to hold one more. */
static int grow(void **items, size_t *alloc, size_t n, size_t size)
{
    if (n < *alloc)
        return 0;
    size_t a = *alloc ? *alloc * 2 : 8;
    void *p = realloc(*items, a * size);
    if (!p)
        return -ENOMEM;
    *items = p;
    *alloc = a;
    return 0;
}

static void series_free(struct metrics_series *s)
{
    for (size_t i = 0; i < METRICS_MAX_LABELS; i++)
        free(s->values[i]);
    free(s->bucket_counts);
    free(s);
}

static void family_free(struct metrics_family *f)
{
    for (size_t i = 0; i < f->n_series; i++)
        series_free(f->series[i]);
    for (size_t i = 0; i < f->n_labels; i++)
        free(f->labels[i]);
    free(f->series);
    free(f->name);
    free(f->help);
    free(f);
}

struct metrics *metrics_new(void)
{
    return calloc(1, sizeof(struct metrics));
}

struct metrics *metrics_free(struct metrics *m)
{
    if (!m)
        return NULL;
    for (size_t i = 0; i < m->n_families; i++)
        family_free(m->families[i]);
    free(m->families);
    free(m->collectors);
    free(m);
    return NULL;
}

static bool valid_name(const char *s)
{
    if (!s || !*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == ':'))
            return false;
    return true;
}

static size_t count_labels(const char *const *labels)
{
    size_t n = 0;
    while (labels && labels[n])
        n++;
    return n;
}

/* Whether an existing family matches a new registration. */
static bool same_shape(const struct metrics_family *f, enum metrics_type type,
                       const char *const *labels)
{
    if (f->type != type || f->n_labels != count_labels(labels))
        return false;
    for (size_t i = 0; i < f->n_labels; i++)
        if (strcmp(f->labels[i], labels[i]) != 0)
            return false;
    return true;
}

static struct metrics_family *family_make(enum metrics_type type, const char *name,
                                          const char *help, const char *const *labels,
                                          const double *buckets, size_t n_buckets)
{
    struct metrics_family *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->type = type;
    f->name = strdup(name);
    f->help = strdup(help ? help : "");
    bool ok = f->name && f->help;
    for (; ok && labels && labels[f->n_labels]; f->n_labels++)
        ok = valid_name(labels[f->n_labels]) &&
             (f->labels[f->n_labels] = strdup(labels[f->n_labels]));
    if (type == METRICS_HISTOGRAM && n_buckets > 0) {
        memcpy(f->buckets, buckets, n_buckets * sizeof(*buckets));
        f->n_buckets = n_buckets;
    }
    if (!ok) {
        family_free(f);
        return NULL;
    }
    return f;
}

struct metrics_family *metrics_family(struct metrics *m, enum metrics_type type, const char *name,
                                      const char *help, const char *const *labels,
                                      const double *buckets, size_t n_buckets)
{
    if (!m || !valid_name(name) || count_labels(labels) > METRICS_MAX_LABELS ||
        n_buckets > METRICS_MAX_BUCKETS || (n_buckets && !buckets))
        return NULL;
    for (size_t i = 0; i < m->n_families; i++)
        if (strcmp(m->families[i]->name, name) == 0)
            return same_shape(m->families[i], type, labels) ? m->families[i] : NULL;
    if (grow((void **)&m->families, &m->alloc, m->n_families, sizeof(void *)) < 0)
        return NULL;
    struct metrics_family *f = family_make(type, name, help, labels, buckets, n_buckets);
    if (f)
        m->families[m->n_families++] = f;
    return f;
}

static struct metrics_series *series_make(struct metrics_family *f, const char **values)
{
    if (grow((void **)&f->series, &f->alloc, f->n_series, sizeof(void *)) < 0)
        return NULL;
    struct metrics_series *s = calloc(1, sizeof(*s));
    bool ok = s != NULL;
    if (ok)
        s->family = f;
    for (size_t i = 0; ok && i < f->n_labels; i++)
        ok = (s->values[i] = strdup(values[i])) != NULL;
    if (ok && f->type == METRICS_HISTOGRAM)
        ok = (s->bucket_counts = calloc(f->n_buckets + 1, sizeof(double))) != NULL;
    if (!ok) {
        if (s)
            series_free(s);
        return NULL;
    }
    f->series[f->n_series++] = s;
    return s;
}

struct metrics_series *metrics_series(struct metrics_family *f, ...)
{
    if (!f)
        return NULL;
    const char *values[METRICS_MAX_LABELS] = {0};
    va_list ap;
    va_start(ap, f);
    for (size_t i = 0; i < f->n_labels; i++) {
        // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): clang-analyzer 14 false positive
        values[i] = va_arg(ap, const char *);
        if (!values[i])
            values[i] = "";
    }
    va_end(ap);
    for (size_t i = 0; i < f->n_series; i++) {
        size_t k = 0;
        while (k < f->n_labels && strcmp(f->series[i]->values[k], values[k]) == 0)
            k++;
        if (k == f->n_labels)
            return f->series[i];
    }
    return series_make(f, values);
}

struct metrics_series *metrics_one(struct metrics *m, enum metrics_type type, const char *name,
                                   const char *help)
{
    return metrics_series(metrics_family(m, type, name, help, NULL, NULL, 0));
}

void metrics_enum(struct metrics *m, enum metrics_type type, const char *name, const char *help,
                  const char *label, const char *const *values, struct metrics_series **ret)
{
    const char *const labels[] = {label, NULL};
    struct metrics_family *f = metrics_family(m, type, name, help, labels, NULL, 0);
    for (size_t i = 0; values[i]; i++)
        ret[i] = metrics_series(f, values[i]);
}

void metrics_inc(struct metrics_series *s)
{
    metrics_add(s, 1);
}

void metrics_add(struct metrics_series *s, double v)
{
    if (s)
        s->value += v;
}

void metrics_set(struct metrics_series *s, double v)
{
    if (s)
        s->value = v;
}

void metrics_observe(struct metrics_series *s, double v)
{
    if (!s || !s->bucket_counts)
        return;
    const struct metrics_family *f = s->family;
    size_t i = 0;
    while (i < f->n_buckets && v > f->buckets[i])
        i++;
    s->bucket_counts[i]++; /* per bucket here; cumulative when rendered */
    s->value += v;
    s->count++;
}

double metrics_value(const struct metrics_series *s)
{
    if (!s)
        return 0;
    return s->bucket_counts ? s->count : s->value;
}

int metrics_add_collector(struct metrics *m, void (*collect)(void *userdata), void *userdata)
{
    if (!m)
        return -EINVAL;
    if (grow((void **)&m->collectors, &m->alloc_collectors, m->n_collectors,
             sizeof(*m->collectors)) < 0)
        return -ENOMEM;
    m->collectors[m->n_collectors++] = (struct collector){collect, userdata};
    return 0;
}

/* The pointers are compared, never written through; cppcheck would have them const. */
// cppcheck-suppress constParameter
void metrics_remove_collector(struct metrics *m, void (*collect)(void *userdata), void *userdata)
{
    for (size_t i = 0; m && i < m->n_collectors; i++)
        if (m->collectors[i].collect == collect && m->collectors[i].userdata == userdata) {
            memmove(&m->collectors[i], &m->collectors[i + 1],
                    (m->n_collectors - i - 1) * sizeof(*m->collectors));
            m->n_collectors--;
            return;
        }
}

/* Writes `s` as a label value: backslash, double quote and newline escaped. */
static void add_escaped(struct buf *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            (void)buf_printf(out, "\\%c", *s);
        else if (*s == '\n')
            (void)buf_adds(out, "\\n");
        else
            (void)buf_add(out, s, 1);
    }
}

/* {a="x",b="y"} plus an optional le="..." for histogram buckets; nothing when empty. */
static void add_labels(struct buf *out, const struct metrics_family *f,
                       const struct metrics_series *s, const char *le)
{
    if (f->n_labels == 0 && !le)
        return;
    (void)buf_adds(out, "{");
    for (size_t i = 0; i < f->n_labels; i++) {
        (void)buf_printf(out, "%s%s=\"", i ? "," : "", f->labels[i]);
        add_escaped(out, s->values[i]);
        (void)buf_adds(out, "\"");
    }
    if (le)
        (void)buf_printf(out, "%sle=\"%s\"", f->n_labels ? "," : "", le);
    (void)buf_adds(out, "}");
}

static void render_histogram(struct buf *out, const struct metrics_family *f,
                             const struct metrics_series *s)
{
    double cumulative = 0;
    char le[32];
    for (size_t i = 0; i <= f->n_buckets; i++) {
        cumulative += s->bucket_counts[i];
        if (i < f->n_buckets)
            (void)snprintf(le, sizeof(le), "%.9g", f->buckets[i]);
        else
            (void)snprintf(le, sizeof(le), "+Inf");
        (void)buf_printf(out, "%s_bucket", f->name);
        add_labels(out, f, s, le);
        (void)buf_printf(out, " %.15g\n", cumulative);
    }
    (void)buf_printf(out, "%s_sum", f->name);
    add_labels(out, f, s, NULL);
    (void)buf_printf(out, " %.15g\n%s_count", s->value, f->name);
    add_labels(out, f, s, NULL);
    (void)buf_printf(out, " %.15g\n", s->count);
}

static void render_family(struct buf *out, const struct metrics_family *f)
{
    static const char *const types[] = {"counter", "gauge", "histogram"};
    (void)buf_printf(out, "# HELP %s ", f->name);
    for (const char *h = f->help; *h; h++) { /* HELP escapes backslash and newline */
        if (*h == '\\' || *h == '\n')
            (void)buf_adds(out, *h == '\\' ? "\\\\" : "\\n");
        else
            (void)buf_add(out, h, 1);
    }
    (void)buf_printf(out, "\n# TYPE %s %s\n", f->name, types[f->type]);
    for (size_t i = 0; i < f->n_series; i++) {
        const struct metrics_series *s = f->series[i];
        if (f->type == METRICS_HISTOGRAM) {
            render_histogram(out, f, s);
            continue;
        }
        (void)buf_adds(out, f->name);
        add_labels(out, f, s, NULL);
        (void)buf_printf(out, " %.15g\n", s->value);
    }
}

int metrics_render(struct metrics *m, struct buf *out)
{
    if (!m)
        return 0;
    for (size_t i = 0; i < m->n_collectors; i++)
        m->collectors[i].collect(m->collectors[i].userdata);
    for (size_t i = 0; i < m->n_families; i++)
        if (m->families[i]->n_series > 0)
            render_family(out, m->families[i]);
    return 0;
}
