/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/binding/pcibind.h - a claim's node work, on the process's worker thread: reads the
 * device and its IOMMU group in sysfs, gathers the facts the pure bind checks need
 * (bindplan_check_bind), loads vfio-pci (libkmod, once), binds or restores (node/vfio) and
 * reports the outcome. Touches no loop state: a job reads its own inputs and writes its own
 * outcome. Does not log, except before a fault point aborts the process.
 *
 * Two ways in: the PCIDeviceClaim reconciler submits a pcibind_job to the worker (its inputs
 * filled on the loop); a caller already on the worker thread (the DRA plugin's node work) asks
 * for one device at a time with pcibind_bind_device() and pcibind_restore_device(), on the
 * pcibind_env it was handed, and reads the bindplan_outcome.
 *
 * HOSTDEVD_FAULT=<goal>:<step> aborts the process right after that step (crash tests; see
 * pciclaim.h for the list).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "controllers/binding/bindplan.h"
#include "controllers/runtime/part.h"
#include "controllers/runtime/worker.h"
#include "node/pci.h"

struct node_vfio_dev;

/* What every job of one agent shares: the claim reconciler's and the DRA plugin's (tests make
 * their own). */
struct pcibind_env {
    int sysfs_fd;
    const char *node_name;
    const char *dev_root;  /* /dev/vfio/<group> */
    const char *proc_root; /* mounts, swaps, routes */
    bool modules_loaded;   /* the worker thread's */
};

struct pcibind_job {
    struct worker_job wj;
    struct pcibind_env *env;
    /* inputs, filled on the loop */
    bool deleting;
    char address[NODE_PCI_ADDRESS_SIZE];
    bool recorded;       /* the claim recorded the original driver */
    char original[64];   /* ... which is this */
    char annotation[64]; /* the PCIDevice's driver at first sight */
    char **claimed;      /* addresses of this node's live claims: group members that count */
    size_t n_claimed;
    char *usb_enabled; /* USB devices enabled behind this device (a USB controller), "" none */
    bool check_only;   /* observe and check, never bind (a new claim's first phase) */
    /* output */
    struct bindplan_outcome out;
};

/* One device's node work for a caller on the worker thread, the original driver recorded already
 * (by the caller: the DRA checkpoint). Borrowed. */
struct pcibind_request {
    const char *address;
    const char *original;   /* the original driver: what a restore gives back */
    const char *annotation; /* bind: the PCIDevice's driver at first sight, or NULL */
    char **claimed;         /* bind: addresses other claims hold: group members that count */
    size_t n_claimed;
};

/* Binds the device of `req` now: the bind checks, vfio-pci loaded, bind, verify. The outcome is
 * BINDPLAN_BOUND (with its group), BINDPLAN_REFUSED or BINDPLAN_FAILED (reason, message). */
void pcibind_bind_device(struct pcibind_env *env, const struct pcibind_request *req,
                         struct bindplan_outcome *ret);
/* Gives the device of `req` its original driver back now. The outcome is BINDPLAN_RESTORED,
 * BINDPLAN_BUSY (a process holds its IOMMU group) or BINDPLAN_FAILED (reason, message). */
void pcibind_restore_device(struct pcibind_env *env, const struct pcibind_request *req,
                            struct bindplan_outcome *ret);
/* Whether a process (a VM) holds the IOMMU group of `d`, a device on vfio-pci: its
 * /dev/vfio/<group> answers EBUSY. Then `who` says which process ("qemu-system-x86 (pid 4242)"),
 * or is "" when /proc does not tell. What a restore waits for. */
bool pcibind_group_held(const struct pcibind_env *env, const struct node_vfio_dev *d, char *who,
                        size_t size);
/* Reads the device at `address` in sysfs (node_vfio_observe() on the env's sysfs). */
int pcibind_observe(const struct pcibind_env *env, const char *address, struct node_vfio_dev *ret);

/* The agent's env, from the roots of `env` (sysfs opened once). NULL when sysfs cannot be
 * opened (logged) or on OOM. A part (controllers/runtime/part.h) whose only hook frees it: add
 * it before the parts that are handed it. */
struct pcibind_env *pcibind_env_new(const struct part_env *env);
extern const struct part_ops pcibind_env_part;

/* Runs the job on the worker thread: `wj.run` of a pcibind_job. */
void pcibind_run(struct worker_job *wj);
/* Frees the inputs' allocations (not the job). */
void pcibind_job_done(struct pcibind_job *j);
/* Aborts the process when HOSTDEVD_FAULT names goal:step. */
void pcibind_fault_point(const char *goal, const char *step);
