/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/mdev/vgpudev.h - the VGPUDevice reconciler: the agent's lifecycle of this node's
 * mediated devices (mdev).
 *
 * - Publishes one disabled object, a free slot, per mdev parent with capacity left, named
 *   "<node>-<parent>-<k>" (objects/mdevobj.h; k the smallest index no object of the node has),
 *   with the parent's types and capacity in status; deletes extra disabled slots.
 * - An object enabled with a type gets its instance: the UUID (spec.uuid, else status.uuid, else
 *   a new one) is written to status.uuid first, then the instance is created on the worker
 *   thread, then the status says Created with the resource name and IOMMU group. Refusals
 *   (mdev/mdevplan.h) set Ready=False with a reason and what to write instead, and change
 *   nothing else.
 * - A disabled or deleted object's instance is removed on the worker thread, after checking that
 *   no process holds its /dev/vfio/<group> (the kernel's remove would block until the VMM lets
 *   go): while one does, Ready=False DeviceInUse names it, and the check is made again every few
 *   seconds. Enabled objects carry the finalizer devices.harvesterhci.io/mdev, removed once the
 *   instance is gone.
 * - An instance on the node that no object names (made by hand, by mdevctl) is published as an
 *   enabled object "<node>-<uuid's first 8>", so `kubectl get vgpudevices` is the truth.
 * - After a restart instances are found by status.uuid and nothing is written (an idle node
 *   writes nothing); after a reboot an enabled object's instance is created again with the same
 *   UUID.
 * The node's mdevs are scanned (node/mdev.h: quick reads) at start, at each PCI inventory scan,
 * after the kernel's events that say a parent registered or unregistered or an instance came or
 * went (inventory_mdevs_changed: a module loaded after the agent started is seen at once), and
 * after each create or remove. Logs each create, remove and refusal once.
 */
#pragma once

#include "controllers/runtime/part.h"

/* The part (controllers/runtime/part.h). */
extern const struct part_ops vgpudev_part;
