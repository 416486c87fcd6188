/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/part.h - what a part of a process declares, once: a const table of its
 * hooks (struct part_ops), and what every part is made with (struct part_env).
 *
 * A part is a reconciler, a scanner, a kubelet plugin, a Lease: anything the process must ask
 * whether it is ready, stop on SIGTERM, wait for while it drains, tell about SIGHUP and free at
 * the end. Its module defines `const struct part_ops <module>_part` beside its _new(); a role
 * makes the part with its config and hands both to process_add(). A reconciler on the shared
 * runner names its runner (`runner`) and leaves ready, stop and in_flight to it: the runner
 * answers from the readiness its runner_ops declare (runtime/runner.h). The process walks the
 * tables; nothing else about a part is typed again.
 */
#pragma once

#include <stdbool.h>

struct buf;
struct ev_loop;
struct kube_http;
struct metrics;
struct runner;

/* What the process hands every part: its loop, its API client, its metrics registry, and the
 * node the role runs for with the host paths it reads there (the agent's; NULL in the
 * controller). Borrowed: the strings outlive every part. */
struct part_env {
    struct ev_loop *loop;
    struct kube_http *http;
    struct metrics *metrics; /* where to register (may be NULL) */
    const char *node_name;
    const char *sysfs_root; /* "/sys" */
    const char *dev_root;   /* "/dev": /dev/vfio/<group>, /dev/bus/usb/BBB/DDD */
    const char *proc_root;  /* "/proc": mounts, swaps, routes (the host-critical check) */
};

/* A part's hooks; any may be NULL. `self` is what the part's _new returned. */
struct part_ops {
    const char *name; /* /readyz and logs: "pcidevices" */
    /* A reconciler's runner: ready, stop and in_flight the part leaves NULL are the runner's. */
    struct runner *(*runner)(const void *self);
    /* Starts the part's watches and timers, in the order the parts were added, once the role
     * has handed every part the caches it reads. Returns 0 or a negative errno. */
    int (*start)(void *self);
    /* Ready: true, or false and a short reason in `why`. */
    bool (*ready)(struct buf *why, void *self);
    void (*stop)(void *self);     /* SIGTERM: take no new work */
    int (*in_flight)(void *self); /* work still to finish before the process exits */
    void (*rescan)(void *self);   /* SIGHUP */
    void (*free)(void *self);     /* teardown, in reverse order of adding */
};
