/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/dra/draplugin.h - the agent's kubelet DRA plugin for driver vfio-pci.hostdevd.io
 * (docs/dra.md), on the C gRPC server (kubelet/grpc.h) with the messages of kubelet/draapi.h.
 *
 * Registration: a socket in <kubelet dir>/plugins_registry (vfio-pci.hostdevd.io-reg.sock)
 * answers kubelet's GetInfo with {DRAPlugin, vfio-pci.hostdevd.io, <plugin dir>/dra.sock,
 * [v1.DRAPlugin, v1.DRAResourceHealth]}; kubelet dials the DRA socket and says whether it
 * registered (NotifyRegistrationStatus, logged and counted). The plugin directory is <kubelet
 * dir>/plugins/vfio-pci.hostdevd.io; it holds the checkpoint and the metadata files.
 *
 * NodePrepareResources: for each claim, the allocation (GET of the ResourceClaim; a claim the
 * checkpoint says is prepared is answered from it, with no API call) names the devices of our
 * driver in this node's pool. A device a PCIDeviceClaim holds or another prepared claim holds
 * is an error for that claim; an mdev is held in the ledger from then on (the device plugin lists
 * it Unhealthy), and one whose /dev/vfio/<group> a process has open (a device-plugin pod's VMM)
 * is an error naming the holder (checked on the worker; nothing of it is kept). Then, on the
 * worker thread and one call at a time: each device's original driver is recorded in the
 * checkpoint (written atomically) before anything changes, the device is bound with the
 * PCIDeviceClaim's verified steps (controllers/binding/pcibind.h: the host-critical and
 * whole-IOMMU-group checks, vfio-pci loaded, bind, verify), then the metadata files and the CDI
 * spec are written and the claim is marked prepared. The answer gives each device its two CDI
 * ids (the VFIO device nodes, the metadata mount). A failure is that claim's error (kubelet
 * retries); the devices this attempt bound are restored.
 * Preparing a prepared claim again (kubelet repeats calls after restarts) binds nothing twice
 * and answers the same.
 *
 * NodeUnprepareResources: a claim the checkpoint does not know is done. Otherwise, if a
 * process holds the IOMMU group of one of its devices (/dev/vfio/<group> open), the claim's
 * error says so and nothing changes (kubelet retries); else each device gets its original
 * driver back (none to restore when it was on vfio-pci before), the CDI spec and metadata
 * files go and the entry leaves the checkpoint.
 *
 * Resource health (KEP-4680, kubelet 1.36+): /v1.DRAResourceHealth/NodeWatchResources on the
 * DRA socket is a server stream of the complete list of the pool's devices (every PCI function of
 * the last scan, the checkpoint's devices gone from it, the mdev instances), each HEALTHY, or
 * UNHEALTHY with "<reason>: <message>" from the node's health store (health/health.h; an mdev
 * takes its parent's). Sent when kubelet opens the stream, on every health_changed and scan, and
 * every 10 s while a stream is open (kubelet takes a device not reported for 30 s as Unknown).
 * Kubelet shows it in pod.status.containerStatuses[].allocatedResourcesStatus of the pods whose
 * claims hold the device.
 *
 * The checkpoint's claims are the device ledger's DRA holdings (binding/ledger.h): the
 * PCIDeviceClaim reconciler refuses a claim on them, and an unprepare that frees devices tells
 * the claims that waited (ledger_released). Logs; metrics hostdevd_dra_*.
 */
#pragma once

#include "controllers/runtime/part.h"

#include <stdbool.h>
#include <stddef.h>

struct devobjs;
struct buf;
struct ev_loop;
struct kube_http;
struct kube_informer;
struct metrics;
struct ledger;
struct pcibind_env;
struct worker;
struct draplugin;

struct draplugin_config {
    struct part_env env; /* loop, API client, metrics, node and its paths (runtime/part.h) */
    struct worker *worker;
    struct pcibind_env *bind;      /* the node work's env (binding/pcibind.h), borrowed */
    const char *kubelet_dir;       /* plugins_registry/ and plugins/ below it */
    const char *cdi_dir;           /* where CDI specs go (/var/run/cdi) */
    const struct devobjs *devices; /* the last PCI scan: the metadata's attributes */
    struct ledger *ledger;         /* who holds each device (binding/ledger.h) */
};

/* The process makes it (part `make`) with its worker, its nodework and ledger parts, its
 * pcidevices part (the last scan) and the role's kubelet and CDI directories; it reads this
 * node's PCIDevices from the process's cache. Its checkpoint's claims are the ledger's DRA
 * holdings (after loading it and after each call): a claim on a device another path holds is
 * refused there, and a release lets waiting PCIDeviceClaims go on. */
struct draplugin *draplugin_new(const struct draplugin_config *cfg);

/* The part (controllers/runtime/part.h): start, stop, drain and free, as its own; `self` is
 * what draplugin_new returned. */
extern const struct part_ops draplugin_part;
