/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/binding/ledger.h - who holds each device of this node, by path: a
 * PCIDeviceClaim, a DRA ResourceClaim (prepared, or being prepared), an Allocate of kubelet's
 * device plugin (a mediated device instance), mediated device instances on a PCI parent, and the
 * rule that a device goes one path at a time, written down once. The claim reconciler records
 * its claims as its cache shows them; the DRA plugin records its checkpoint after loading it and
 * after each call, and the claims it is preparing; the device plugins record the mdev instances
 * Allocate gave out; the VGPUDevice reconciler records the PCI parents that have instances after
 * each scan of the node's mdevs (and while it creates one). Each asks ledger_check() before it
 * takes a device, and gets the refusal's reason and message from here. When a holder lets go (a
 * DRA claim unprepared, a parent's last instance removed), ledger_released is emitted so that
 * what waited goes on; every change of a holding emits ledger_changed. Node-local, in memory
 * (rebuilt from the claims, the checkpoint and the scan at start; an Allocate is forgotten by a
 * restart); runs on the loop; does not log.
 *
 * An Allocate is not a holding kubelet ever ends (a device plugin is not told when its pod is
 * gone): the DRA plugin takes one as still in use only while the instance's /dev/vfio/<group> is
 * open (its own check, off the loop), and forgets it when it prepares the instance.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct manager;
struct part_ops;
struct topic;

/* The paths a device can take to a VM. */
enum ledger_path {
    LEDGER_PCI_CLAIM,     /* a PCIDeviceClaim (id and who: its name) */
    LEDGER_DRA,           /* a prepared DRA ResourceClaim (id: its uid; who: namespace/name) */
    LEDGER_DEVICE_PLUGIN, /* an mdev an Allocate gave out (id and who: the resource name) */
    LEDGER_MDEV,          /* mediated device instances on a PCI parent (id: the parent's address;
                             who: "instance <uuid> (VGPUDevice <name>), ...") */
    LEDGER_PATHS
};

struct ledger;

/* Why a path may not take a device: the claim's reason and a message that says what to do. */
struct ledger_refusal {
    const char *reason; /* "AllocatedByDRA", "HeldByPCIDeviceClaim", "PreparedForResourceClaim",
                           "ParentHasInstances" */
    char message[1024];
};

struct ledger *ledger_new(struct manager *m);
void ledger_free(struct ledger *l);

/* Records that `id` of `path` (shown as `who`) holds `address` (one holder per path and
 * address: a new id replaces the last). Returns 0 or -ENOMEM. */
int ledger_hold(struct ledger *l, const char *address, enum ledger_path path, const char *id,
                const char *who);
/* Forgets `path`'s holding of `address` (any id when `id` is NULL); emits ledger_released when
 * there was one. */
void ledger_release(struct ledger *l, const char *address, enum ledger_path path, const char *id);
/* A path's holdings replaced by a new list: ledger_begin() marks every one of `path`,
 * ledger_hold() keeps or adds, ledger_end() forgets the ones not held again (emitting
 * ledger_released once when there were any). */
void ledger_begin(struct ledger *l, enum ledger_path path);
void ledger_end(struct ledger *l, enum ledger_path path);

/* Whether `path` holds `address` (by an id other than `except_id` when given); its `who` in
 * `buf`. */
bool ledger_held(const struct ledger *l, const char *address, enum ledger_path path,
                 const char *except_id, char *buf, size_t size);
/* Every address a PCIDeviceClaim or a DRA claim holds (those that go to vfio-pci: an mdev
 * parent stays on its driver), in *ret (malloc'd array of malloc'd strings, *ret_n of them;
 * appended to what is there). Returns 0 or -ENOMEM. */
int ledger_addresses(const struct ledger *l, char ***ret, size_t *ret_n);

/* One path at a time: may `id` of `path` take `address`? 0, or -EBUSY with the refusal. A
 * PCIDeviceClaim (recorded as long as it exists) waits while a DRA claim is prepared with the
 * device; a DRA claim that does not hold the device yet is refused while a PCIDeviceClaim of it
 * exists or another DRA claim holds it; the device plugin may not give out an instance a DRA
 * claim holds. (A DRA claim is not refused here for the device plugin's Allocate: whether that
 * is still in use is the DRA plugin's check of the instance's group.) A PCIDeviceClaim and a DRA
 * claim both wait while the device is the parent of mediated device instances (binding it to
 * vfio-pci would remove them). LEDGER_MDEV takes nothing here: the VGPUDevice reconciler asks
 * ledger_held() of the others. */
int ledger_check(const struct ledger *l, const char *address, enum ledger_path path, const char *id,
                 struct ledger_refusal *ret);

/* Emitted with the path (enum ledger_path *) that let a device go. */
extern const struct topic ledger_released;
/* Emitted with the path (enum ledger_path *) whose holding of a device began, changed its id or
 * ended. */
extern const struct topic ledger_changed;
/* The part (runtime/part.h): made with the process's manager; find it with manager_part(). */
extern const struct part_ops ledger_part;
