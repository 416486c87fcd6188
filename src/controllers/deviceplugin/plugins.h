/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/deviceplugin/plugins.h - the agent's kubelet device plugins: one gRPC server
 * (kubelet/grpc.h) per resource name this node offers, in kubelet's device-plugin directory,
 * registered with kubelet and kept registered.
 *
 * What is offered comes from the caches (no API writes): a PCIDeviceClaim of this node that is
 * bound (pciobj_bound: passthroughEnabled and Ready; once deleted, until its agent lets go) offers
 * its device, ID = PCI address, under its PCIDevice's resourceName, or under "<vendor
 * domain>/<PCIDevice name>" when the claim says spec.disableResourcePooling; a USBDeviceClaim
 * whose agent enabled it (usbobj_claim_holds) offers its device, ID = USBDevice name, under the
 * USBDevice's resourceName; a VGPUDevice of this node whose instance is offered
 * (objects/mdevobj.h mdevobj_offered: status vGPUConfigured with a UUID and a resourceName, until
 * its agent has removed it) offers the instance, ID = its UUID, under status.resourceName (one
 * resource per mdev type). A device is Healthy while its PCIDevice says vfio-pci and the node's
 * health store has nothing against it (controllers/health/health.h; its USBDevice is plugged in;
 * the mdev exists in /sys/bus/mdev/devices, has an IOMMU group, no DRA ResourceClaim holds it
 * (binding/ledger.h) and its PCI parent is not unhealthy), Unhealthy otherwise: kubelet keeps an
 * Unhealthy device out of allocatable. A health_changed sends the lists again at once. Any change
 * of those caches recomputes the set (plugins_sync, coalesced): a new resource starts a plugin, a
 * changed device list is pushed to every ListAndWatch stream, and a resource nobody offers any more
 * keeps its plugin with an empty list (kubelet withdraws the devices at once).
 *
 * Answers (controllers/deviceplugin/devplugin.h): Allocate gives PCI_RESOURCE_<NAME> /
 * MDEV_PCI_RESOURCE_<NAME> / USB_RESOURCE_<NAME> and the device nodes with "mrw" (a USB node is
 * chowned to KubeVirt's qemu user 107:107 first); an ID we do not offer is NOT_FOUND, an mdev a
 * DRA claim holds FAILED_PRECONDITION naming the claim (PreStartContainer too); the mdevs given
 * out are recorded in the ledger (the DRA plugin names the device plugin when it refuses one
 * whose group is open).
 * GetPreferredAllocation keeps IOMMU groups whole and one NUMA node; PreStartContainer re-checks
 * that every PCI device is still on vfio-pci (USB: that its node exists; mdev: that it exists).
 *
 * Kubelet restarts are watched with inotify on the directory: kubelet.sock created, or one of our
 * sockets deleted (kubelet removes foreign sockets when it starts), makes the plugins serve a new
 * socket and register again at once; a failed Register is retried with backoff (1 s to 30 s).
 * Logs; registers hostdevd_plugin_* metrics.
 */
#pragma once

#include "controllers/runtime/part.h"

#include <stdbool.h>

struct buf;
struct ev_loop;
struct caches;
struct kube_informer;
struct metrics;
struct plugins;

struct plugins_config {
    struct part_env env; /* loop, API client, metrics, node and its paths (runtime/part.h) */
    const char *dir;     /* kubelet's device-plugin directory (kubelet.sock lives there) */
};

/* The offer is computed from the process's caches of our claims, devices and VGPUDevices
 * (runtime/manager.h), and
 * again after each of their events. */
struct plugins *plugins_new(const struct plugins_config *cfg);
/* Recomputes the offer soon (calls within one loop iteration are coalesced). */
void plugins_sync(struct plugins *p);

/* The part (controllers/runtime/part.h): start, stop, drain and free, as its own; `self` is
 * what plugins_new returned. */
extern const struct part_ops plugins_part;
