/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/mdev/mdevledger.h - the VGPUDevice reconciler's part of the device ledger
 * (binding/ledger.h): every PCI parent of this node that has mediated device instances (in the
 * last scan, or being created on the worker now) is held as LEDGER_MDEV, named with its
 * instances and their VGPUDevices, so that a PCIDeviceClaim or DRA claim of it waits; a parent
 * whose last instance went is released there (the claims that waited go on). A virtual parent
 * ("mtty") is no PCI device and is never held. Runs on the loop; no I/O, no logging.
 */
#pragma once

#include <stdbool.h>

#include "node/mdev.h"

struct kube_informer;
struct ledger;
struct mdevledger;

/* Made for node `node` (copied) and the process's ledger. NULL on OOM. */
struct mdevledger *mdevledger_new(struct ledger *l, const char *node);
void mdevledger_free(struct mdevledger *m);

/* A create of instance `uuid` on `parent` for object `name` started (its parent is held from
 * now, before the kernel has it), or ended (the next scan tells). */
void mdevledger_creating(struct mdevledger *m, const char *name, const char *parent,
                         const char *uuid);
void mdevledger_created(struct mdevledger *m, const char *name);

/* The object of `objects` (this node's VGPUDevices) that names instance `uuid` (status.uuid or
 * spec.uuid), or NULL. */
const char *mdevledger_object_of(struct kube_informer *objects, const char *uuid);

/* The holdings again, from `scan` and the creates now, each instance named with its object in
 * `objects`, else (once `synced`) the adopted object the agent publishes for it. */
void mdevledger_sync(struct mdevledger *m, const struct node_mdev_scan *scan,
                     struct kube_informer *objects, bool synced);
