/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/sriov/sriovnet.h - the SRIOVNetworkDevice reconciler: one object per SR-IOV
 * network PF of this node (PCI class 02xx with sriov_totalvfs > 0), named as harvester names it
 * ("<node>-<interface>" in lower case), kept from the PCI scans; and the node work that makes
 * the PF what the object's spec asks: its VF count (through 0, objects/sriovobj.h) and each VF's
 * MAC, VLAN, spoof check and trust (node/vflink.h), on the worker thread.
 *
 * - A new object takes the count the kernel has (adopting a PF never removes its VFs).
 * - A PF that has lost its interface (its driver unloaded) keeps its object, found by
 *   spec.address; a PF without an interface and without an object gets none yet.
 * - A VF is in use when a PCIDeviceClaim names it or it is on vfio-pci (a claim, a DRA claim or
 *   a VM holds it: the device plugins offer claimed functions only): then the count does not
 *   change, and the Ready condition says VFsInUse and names them.
 * - After each node write the PCI inventory is scanned again (`on_written`), so the VFs are
 *   published as PCIDevices at once rather than at the next resync; the kernel's uevents do the
 *   same on a real node.
 * - A failed node write is not tried again for the same generation and count (it is shown as the
 *   Ready condition); a new spec, a changed count or a restart tries again.
 * - Status: harvester's (vfAddresses, vfPCIDevices, status) and ours (interfaceName, driver,
 *   totalVFs, numVFs, vfs, passthroughBlockers, conditions, observedGeneration), written only
 *   where they differ: an idle node writes nothing.
 * Logs each node write and each refusal once.
 */
#pragma once

#include "controllers/runtime/part.h"

struct kube_informer;
struct map;
struct sriovnet;

/* The reconciler, made from what the process shares: its cache of SRIOVNetworkDevices, the
 * PCIDeviceClaims of this node (a claimed VF is in use), the Node's uid (the nodeuid part, for
 * the ownerReference) and the worker. After it changes the node it asks the inventory for a
 * scan (inventory_rescan_wanted). NULL on OOM. */
struct sriovnet *sriovnet_new(const struct part_env *env);

/* Takes the PFs and VFs of a PCI scan from `pci_want` (name -> struct pcidevice_spec, borrowed
 * for the call), reads each PF's VF settings (netlink) and queues every key. */
void sriovnet_sync(struct sriovnet *s, const struct map *pci_want);

/* The part (controllers/runtime/part.h); `self` is what sriovnet_new returned. It reads each
 * PCI scan's PFs (pcidevices_wanted) and looks at every PF again when a claim changes (a VF may
 * have become free or taken). */
extern const struct part_ops sriovnet_part;
