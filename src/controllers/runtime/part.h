/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/runtime/part.h - what a part of a process declares, once: a const table of its
 * hooks (struct part_ops), and what every part is made with (struct part_env).
 *
 * A part is a reconciler, a scanner, a kubelet plugin, a Lease: anything the process must ask
 * whether it is ready, stop on SIGTERM, wait for while it drains, tell about SIGHUP and free at
 * the end. Its module defines `const struct part_ops <module>_part` beside its _new(), with a
 * `make` hook that makes the part from the env alone: a role is a list of those tables
 * (process_add_parts). A part reads the caches it needs from the manager and finds the parts it
 * calls there (runtime/manager.h); it declares in `watches` which events of other kinds or
 * topics queue its own work. A reconciler on the shared runner names its runner (`runner`) and
 * leaves ready, stop and in_flight to it: the runner answers from the readiness its runner_ops
 * declare (runtime/runner.h). The process walks the tables; nothing else about a part is typed
 * again, and no part sets another's fields.
 */
#pragma once

#include <stdbool.h>

struct buf;
struct ev_loop;
struct kube_http;
struct manager;
struct metrics;
struct runner;
struct watch;

/* The role's options the parts read, from its command line (NULL or 0 where a role has none). */
struct part_options {
    const char *kubelet_dir;     /* agent: kubelet's root, "/var/lib/kubelet" */
    const char *cdi_dir;         /* agent: where the DRA plugin writes CDI specs */
    const char *pci_ids;         /* agent: pci.ids, NULL: libpci's */
    const char *usb_ids;         /* agent: usb.ids, NULL: the default */
    const char *uevent_source;   /* agent: "udev", "kernel", "none" */
    double resync;               /* agent: seconds between full scans */
    double heartbeat;            /* agent: its heartbeat Lease's duration, seconds */
    const char *taint_effect;    /* agent: an unhealthy device's ResourceSlice taint effect,
                                    "NoSchedule" or "NoExecute" (NULL: NoSchedule) */
    const char *namespace;       /* controller: where its leader Lease lives */
    const char *lease_namespace; /* where the agents' heartbeat Leases live */
    const char *kubevirt;        /* controller: the KubeVirt CR, "kubevirt/kubevirt" */
    const char *identity;        /* controller: this replica's name in its Lease */
    double lease_duration;       /* controller: its leader Lease's duration, seconds */
};

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
    struct manager *mgr;    /* the caches, watches and parts of the process */
    const struct part_options *opt;
};

/* A part's hooks; any may be NULL. `self` is what the part's _new returned. */
struct part_ops {
    const char *name; /* /readyz and logs: "pcidevices" */
    /* Makes the part from what the process hands every part (the role's options in env->opt,
     * the other parts it calls through env->mgr); NULL on failure (logged by the part). */
    void *(*make)(const struct part_env *env);
    /* Events of other kinds and topics that queue the part's work (runtime/manager.h), ended
     * by an entry whose map is NULL; NULL: none. */
    const struct watch *watches;
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

/* A role's list of parts as an X-macro, one line a part (`X(pciclaim_part)`):
 * `ROLE_PARTS(PART_DECLARE)` declares each table, `{ROLE_PARTS(PART_LIST) NULL}` is the array
 * process_add_parts() takes. Adding a part to a role is its one line. */
#define PART_DECLARE(p) extern const struct part_ops p;
#define PART_LIST(p)    &(p),
