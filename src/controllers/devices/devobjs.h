/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/devobjs.h - what the PCIDevice and USBDevice reconcilers share, once: one
 * object per device of this node's last scan (`want`, name -> the kind's spec), an informer of
 * this node's objects (label nodename=<node>) on the shared runner, the writes carried out by
 * devwrite, the foreign-object note, the "inventory written" line, the start gate (a scan has
 * succeeded and the Node's uid was looked up: objects are made with their owner) and the part's
 * start and runner. A kind's reconciler has a `struct devobjs` as its first member and adds its
 * plan and whatever else it reads. Logs through devwrite and once on convergence.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "controllers/devices/devwrite.h"
#include "controllers/runtime/part.h"
#include "controllers/runtime/runner.h"

struct cJSON;
struct kube_informer;
struct cache_kind;
struct map;
struct nodeuid;
struct watch_event;

/* What a device-object reconciler is made with. */
struct devobjs_config {
    struct part_env env;        /* loop, API client, metrics, node and its paths (runtime/part.h) */
    const struct nodeuid *node; /* this node's Node uid (borrowed: the process's nodeuid part) */
};

/* What a scan hands the reconciler of its kind (the topic's data: pcidevices_scanned,
 * usbdevices_scanned): `want` (name -> the kind's spec), taken by the first watcher that keeps
 * it (NULL after), and `unreadable` (borrowed; NULL on OOM): the devices present but skipped
 * because their identity could not be read, whose objects are kept. */
struct devobjs_scan {
    struct map *want;
    const struct map *unreadable;
};

/* What a kind declares. */
struct devobjs_kind {
    const char *name;               /* the runner's: "pcidevice" */
    const char *kind;               /* "PCIDevice" */
    const struct cache_kind *cache; /* &kind_pcidevices (objects/kinds.h) */
    const char *written;            /* logged once converged: "PCI inventory written" */
    const char *gone; /* logged with each delete: "Deleting PCIDevice of a device that is gone" */
};

struct devobjs {
    struct devobjs_config cfg;
    const struct devobjs_kind *kind;
    struct runner *runner;
    struct map *want; /* name -> the kind's spec, from the last scan; NULL before one */
    /* The claims of this kind (the process's cache; NULL where the role has none): facts a new
     * object takes from its claim (PCI: the original driver the claim recorded). */
    struct kube_informer *claims;
    struct metrics_series *writes[DEVWRITE_VERBS];
};

/* A kind's reconciler of `size` bytes (zeroed, a struct devobjs first) with its runner on the
 * process's cache of the kind (`ops` called with the reconciler) and write counters. NULL on
 * OOM. */
void *devobjs_new(size_t size, const struct devobjs_config *cfg, const struct devobjs_kind *kind,
                  const struct runner_ops *ops);
/* The config of a reconciler made by the process (its env; the Node uid of its nodeuid part). */
struct devobjs_config devobjs_config_of(const struct part_env *env);

/* The write of one key's plan for the runner: `object` to create (taken, or NULL), the patches
 * (taken, or NULL), a delete of `uid`. NULL on OOM (what was taken is freed). */
struct devwrite *devobjs_write(const struct devobjs *o, struct cJSON *object, char *status_patch,
                               char *meta_patch, bool delete, const char *uid);

/* Takes the desired objects of a new scan and queues every key. */
void devobjs_take_want(struct devobjs *o, struct map *want);
/* Queues every key of the scan and of the cache. */
void devobjs_enqueue_all(struct devobjs *o);
/* The desired objects of the last scan (borrowed, replaced by the next), NULL before one. */
const struct map *devobjs_want(const struct devobjs *o);

/* runner_ops every kind uses as they are (`ctx` is the reconciler, `o` first in it). */
void devobjs_act(struct runner_job *job, void *plan, void *ctx);
void devobjs_plan_free(void *plan);
void devobjs_on_event(void *ctx, const char *key, const struct cJSON *obj, enum runner_event ev);
/* A watch's map: every key again (the Node's uid is known: objects get their owner). */
void devobjs_enqueue_all_watch(void *self, const struct watch_event *ev);
void devobjs_on_converged(void *ctx);
/* A scan has succeeded and the Node's uid has been looked up. */
bool devobjs_can_start(void *ctx);

/* part_ops hooks (`self` is the reconciler). */
int devobjs_start(void *self);
void devobjs_free(void *self);
struct runner *devobjs_runner(const void *self);
