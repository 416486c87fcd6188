/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/objects/kinds.h - the kinds a process caches once for every part that reads them
 * (runtime/manager.h): our six, narrowed to the agent's node where the kind says which node
 * it is on. Declared here once; a part names them in its runner and in its watches. A kind
 * one part alone reads (ResourceSlices, KubeVirt, Nodes) is declared in that part's file.
 */
#pragma once

#include "controllers/runtime/manager.h"

extern const struct cache_kind kind_pcidevices;          /* label nodename=<node> */
extern const struct cache_kind kind_usbdevices;          /* label nodename=<node> */
extern const struct cache_kind kind_sriovnetworkdevices; /* label nodename=<node> */
extern const struct cache_kind kind_pcideviceclaims;     /* field spec.nodeName=<node> */
extern const struct cache_kind kind_usbdeviceclaims;     /* every one (named after a device) */
extern const struct cache_kind kind_vgpudevices;         /* label nodename=<node> */
/* The controller's: the PCIDevices and USBDevices a claim names (a claim is named after its
 * device), of the whole cluster, and no other (manager.h keys_of): what the KubeVirt reconciler
 * reads of devices, in memory that follows the claims. */
extern const struct cache_kind kind_claimed_pcidevices;
extern const struct cache_kind kind_claimed_usbdevices;
