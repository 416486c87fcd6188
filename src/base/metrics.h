/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/metrics.h - a small Prometheus metrics registry: counters, gauges and histograms with
 * fixed buckets, each a family of series told apart by label values; rendered in the text
 * exposition format (version 0.0.4) that /metrics serves.
 *
 * Each module registers the families it owns into the process's registry and updates its
 * series; state that is cheaper to read on demand (a queue's depth, an informer's counters)
 * is copied into series by a collector that runs before every render. Registering a name
 * again with the same type and labels returns the existing family, so two controllers share
 * controller_runtime_reconcile_total and tell themselves apart by the `controller` label.
 *
 * Every function takes NULL for a family or series and then does nothing, so a failed
 * allocation loses a figure, never the process. Not thread-safe (the loop's). No I/O, no logs.
 */
#pragma once

#include <stddef.h>

struct buf;
struct metrics;
struct metrics_family;
struct metrics_series;

enum metrics_type { METRICS_COUNTER, METRICS_GAUGE, METRICS_HISTOGRAM };

#define METRICS_MAX_LABELS  4
#define METRICS_MAX_BUCKETS 48

struct metrics *metrics_new(void);
/* Frees the registry, its families and series. Takes NULL; returns NULL. */
struct metrics *metrics_free(struct metrics *m);

/*
 * Registers (or finds) the family `name`. `labels` is a NULL-terminated list of label names
 * (NULL: none), at most METRICS_MAX_LABELS; `buckets` the ascending upper bounds of a
 * histogram (+Inf is implicit), at most METRICS_MAX_BUCKETS. Returns NULL on OOM, on a bad
 * name, or when `name` is registered with another type or other labels.
 */
struct metrics_family *metrics_family(struct metrics *m, enum metrics_type type, const char *name,
                                      const char *help, const char *const *labels,
                                      const double *buckets, size_t n_buckets);

/* The series with these label values (one const char * per label of the family), made on
 * first use. NULL on OOM. */
struct metrics_series *metrics_series(struct metrics_family *f, ...);

/* The one series of a family without labels (a gauge or counter). NULL on failure. */
struct metrics_series *metrics_one(struct metrics *m, enum metrics_type type, const char *name,
                                   const char *help);
/* A family with one label and one series per value: ret[i] is the series of values[i] (a
 * NULL-terminated list); ret has room for them all. */
void metrics_enum(struct metrics *m, enum metrics_type type, const char *name, const char *help,
                  const char *label, const char *const *values, struct metrics_series **ret);

void metrics_inc(struct metrics_series *s);
/* Counters: adds v (>= 0). Gauges: adds v. */
void metrics_add(struct metrics_series *s, double v);
/* Gauges, and counters copied from a module's own counts by a collector. */
void metrics_set(struct metrics_series *s, double v);
/* Histograms: counts v in its bucket, the sum and the count. */
void metrics_observe(struct metrics_series *s, double v);
/* The value of a counter or gauge, the count of a histogram (tests). */
double metrics_value(const struct metrics_series *s);

/* Runs `collect(userdata)` before each render. Returns 0 or -ENOMEM. */
int metrics_add_collector(struct metrics *m, void (*collect)(void *userdata), void *userdata);
/* Removes a collector (a module going away before the registry). */
void metrics_remove_collector(struct metrics *m, void (*collect)(void *userdata), void *userdata);

/* Appends every family, in registration order, to `out`. Returns 0 or -ENOMEM. */
int metrics_render(struct metrics *m, struct buf *out);

/* Bucket sets: controller-runtime's reconcile_time_seconds buckets, and client-go's
 * workqueue duration buckets (10 ns to 1000 s, powers of ten). */
extern const double metrics_reconcile_buckets[];
extern const size_t metrics_reconcile_buckets_n;
extern const double metrics_workqueue_buckets[];
extern const size_t metrics_workqueue_buckets_n;
