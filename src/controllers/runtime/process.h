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
 * A role makes a process, adds its parts (each declared once: runtime/part.h), and runs it. Logs
 * setup failures and signals.
 */
#pragma once

#include <stdbool.h>

#include "controllers/runtime/part.h"

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
    const char *node;       /* the node the role serves (its caches narrowed to it), or NULL */
};

/* Loads the configuration, makes the loop's HTTP client, the metrics registry and the
 * endpoint. Returns 0 and the process, or a negative errno after logging why. */
int process_new(const struct process_config *cfg, struct process **ret);

struct ev_loop *process_loop(const struct process *p);
struct kube_http *process_http(const struct process *p);
struct metrics *process_metrics(const struct process *p);
/* What the parts share: caches, watches, parts, the worker thread (runtime/manager.h). */
struct manager *process_manager(const struct process *p);
/* Whether SIGTERM or SIGINT came. */
bool process_stopping(const struct process *p);

/* What the process hands every part it makes (runtime/part.h): the loop, the client, the
 * metrics, the manager; the role adds its node and its options. */
struct part_env process_env(const struct process *p);

/* Adds a part: `self`, as its module's _new made it (NULL: that failed, -ENOMEM), and its
 * declared hooks (its watches go to the manager). Returns 0, or -ENOMEM after freeing the
 * part. */
int process_add(struct process *p, const struct part_ops *ops, void *self);
/* Makes and adds each part of `parts` (ended by NULL) in order, from `env`, by its `make`
 * hook; a failure is logged once, naming the role and the part. Returns 0 or a negative
 * errno. */
int process_add_parts(struct process *p, const struct part_ops *const *parts,
                      const struct part_env *env);

/* Starts the parts in the order they were added, then runs the loop until stopped and
 * drained. Returns the process exit code (1 when a part cannot start: logged). */
int process_run(struct process *p);

/* Frees the parts (newest first), the worker, the endpoint, the client. Takes NULL. */
struct process *process_free(struct process *p);
