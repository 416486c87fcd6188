/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/claims/pcibind.h - a claim's node work, on the process's worker thread: reads the
 * device and its IOMMU group in sysfs, gathers the facts the pure bind checks need
 * (bindplan_check_bind), loads vfio-pci (libkmod, once), binds or restores (node/vfio) and
 * reports the outcome. Touches no loop state: a job reads its own inputs and writes its own
 * outcome. Does not log, except before a fault point aborts the process.
 *
 * HOSTDEVD_FAULT=<goal>:<step> aborts the process right after that step (crash tests; see
 * pciclaim.h for the list).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "controllers/claims/bindplan.h"
#include "controllers/runtime/worker.h"
#include "node/pci.h"

/* What every job of one agent shares. */
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

/* Runs the job on the worker thread: `wj.run` of a pcibind_job. */
void pcibind_run(struct worker_job *wj);
/* Frees the inputs' allocations (not the job). */
void pcibind_job_done(struct pcibind_job *j);
/* Aborts the process when HOSTDEVD_FAULT names goal:step. */
void pcibind_fault_point(const char *goal, const char *step);
