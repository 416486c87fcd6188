/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/process.h - the skeleton every hostdevd role runs in (agent, controller):
 *   - the API server configuration (--kubeconfig, $KUBECONFIG, else in-cluster) and one HTTP
 *     client on one libev loop;
 *   - the /healthz /readyz /metrics endpoint: /readyz asks every part's readiness check and
 *     names the first that is not ready; /metrics renders the process's metrics registry,
 *     into which each part registers its families;
 *   - signals: SIGTERM and SIGINT stop every part (no new work), then the loop ends once no
 *     part has work in flight, or after a deadline; SIGHUP calls the parts' rescan hooks;
 *   - one worker thread for blocking node work, shared by every reconciler, with every
 *     signal blocked in it;
 *   - teardown in the reverse order of setup.
 * A role makes a process, adds its parts, and runs it. Logs setup failures and signals.
 */
#pragma once

#include <stdbool.h>

struct buf;
struct ev_loop;
struct kube_http;
struct metrics;
struct process;
struct worker;

struct process_config {
    const char *role;       /* "agent", "controller": logged */
    const char *kubeconfig; /* NULL: $KUBECONFIG, else in-cluster */
    const char *listen;     /* the endpoint, "0.0.0.0:9808" */
    double drain_timeout;   /* seconds to wait for work in flight after SIGTERM; <= 0: 10 */
};

/* One part of a process (a reconciler, a scanner). Every hook may be NULL. */
struct process_part {
    const char *name;
    /* Ready: true, or false and a short reason in `why`. */
    bool (*ready)(struct buf *why, void *userdata);
    void (*stop)(void *userdata);     /* SIGTERM: take no new work */
    int (*in_flight)(void *userdata); /* work still to finish before the process exits */
    void (*rescan)(void *userdata);   /* SIGHUP */
    void (*free)(void *userdata);     /* teardown, in reverse order of adding */
    void *userdata;
};

/* Loads the configuration, makes the loop's HTTP client, the metrics registry and the
 * endpoint. Returns 0 and the process, or a negative errno after logging why. */
int process_new(const struct process_config *cfg, struct process **ret);

struct ev_loop *process_loop(const struct process *p);
struct kube_http *process_http(const struct process *p);
struct metrics *process_metrics(const struct process *p);
/* The process's worker thread, started on first use; NULL on failure. */
struct worker *process_worker(struct process *p);
/* Whether SIGTERM or SIGINT came. */
bool process_stopping(const struct process *p);

/* Adds a part (copied). Returns 0, or -ENOMEM after freeing the part. */
int process_add_part(struct process *p, const struct process_part *part);

/* Runs the loop until stopped and drained. Returns the process exit code. */
int process_run(struct process *p);

/* Frees the parts (newest first), the worker, the endpoint, the client. Takes NULL. */
struct process *process_free(struct process *p);
