/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/events.h - a small recorder of events.k8s.io/v1 Events that aggregates repeats: the
 * first occurrence creates an Event; repeats of the same (object, type, reason, action, note)
 * within the series window only count, and the count is written as `series` at most once per
 * flush interval, so a flapping condition costs a few writes, not one per occurrence.
 * Events of cluster-scoped objects go to a configured namespace ("default"), as kubectl
 * describe expects. Runs on the loop through kube/client; best effort: failures are counted,
 * never retried in a loop. Does not log.
 */
#pragma once

#include <stdbool.h>

struct ev_loop;
struct kube_http;
struct kube_recorder;

struct kube_recorder_config {
    const char *controller; /* reportingController, e.g. "hostdevd.io/agent" */
    const char *instance;   /* reportingInstance, e.g. "hostdevd-agent-titan" */
    const char *namespace;  /* for cluster-scoped objects; NULL = "default" */
    double flush_interval;  /* seconds between series writes; 0 = 30 */
    double series_window;   /* repeats within this many seconds join the series; 0 = 600 */
};

/* The object an event is about. */
struct kube_event_ref {
    const char *api_version; /* e.g. "devices.harvesterhci.io/v1beta1" */
    const char *kind;
    const char *namespace; /* NULL for cluster-scoped */
    const char *name;
    const char *uid; /* may be NULL */
};

struct kube_recorder_stats {
    unsigned long emitted; /* calls to kube_recorder_emit */
    unsigned long created; /* Events created */
    unsigned long series;  /* series writes */
    unsigned long failed;  /* failed writes */
};

struct kube_recorder *kube_recorder_new(struct ev_loop *loop, struct kube_http *http,
                                        const struct kube_recorder_config *cfg);

/* Frees; pending series counts are dropped. Takes NULL; returns NULL. */
struct kube_recorder *kube_recorder_free(struct kube_recorder *r);

/* Records an event (type Warning when `warning`, else Normal). `reason` and `action` are
 * CamelCase identifiers; `note` is for people (truncated to 1 KiB). Returns 0 or -errno. */
int kube_recorder_emit(struct kube_recorder *r, const struct kube_event_ref *regarding,
                       bool warning, const char *reason, const char *action, const char *note);

/* Writes pending series counts now (e.g. before shutdown). */
void kube_recorder_flush(struct kube_recorder *r);

/* Requests still in flight (wait for 0 before freeing at shutdown). */
unsigned kube_recorder_in_flight(const struct kube_recorder *r);

void kube_recorder_get_stats(const struct kube_recorder *r, struct kube_recorder_stats *ret);
