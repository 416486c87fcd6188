/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/usbdevice.h - the USBDevice reconciler: what a node's USBDevice objects
 * should be (pure: no I/O, no logging, unit-tested) and the reconciler on the runner that writes
 * them.
 *
 * Identity is the port: an object is named "<node>-<vid>-<pid>-<port path, '.' -> '-'>", so a
 * device re-plugged into the same port (or found again after a reboot) is the same object,
 * whose devicePath, busNum and devNum are updated in place; two identical dongles in two ports
 * are two objects.
 *
 * The agent is the only writer of its node's USBDevices. Besides discovery it keeps
 * status.enabled equal to "a USBDeviceClaim holds the device" (usbobj_claim_holds(): the claim is
 * alive, carries our finalizer and its agent made it Ready, or it waits for the device to come
 * back). A device that is gone from the scan is
 *   - deleted (uid precondition) when no claim holds it: an unplug, or its host controller
 *     passed through to a VM (the devices vanish from the host then, and are found again, with
 *     the same names, when the controller comes back);
 *   - kept as status.status "orphaned" with a message saying what happened and what to do when
 *     a claim holds it; when a device with the same ids comes back to the same port it is the
 *     same object again, still claimed, and the orphan mark is cleared.
 */
#pragma once

#include "controllers/runtime/part.h"

#include <stdbool.h>

struct cJSON;
struct node_usb_dev;
struct node_usbids;

/* The desired state of one USBDevice, as discovery computed it. */
struct usbdevice_spec {
    char name[254]; /* "<node>-<vid>-<pid>-<port path with '-'>" */
    char node[254];
    char port_path[32]; /* "2-1.4" */
    char vendor_id[5], product_id[5];
    int busnum, devnum;
    char dev_path[32];    /* "/dev/bus/usb/002/004" */
    char pci_address[20]; /* the host controller's, "" when not on PCI */
    char resource_name[320];
    char description[1024];
    char class_type[64]; /* "HID", "Mass Storage", ... "" when unknown */
    char serial[384];    /* "" when the device has none */
    char speed[8];       /* Mbit/s, "" when unknown */
};

/* What the agent knows about a device that is gone from the scan, for the orphan message. */
struct usbdevice_gone {
    bool controller_passed_through; /* its host controller is on vfio-pci now */
};

struct usbdevice_plan {
    bool create;        /* POST new_object, then PATCH status_patch on /status */
    bool delete;        /* DELETE with the uid precondition */
    bool orphan;        /* the status patch marks the device orphaned */
    char uid[64];       /* of the existing object ("" when none) */
    char *meta_patch;   /* merge patch of metadata (labels, ownerReferences) or NULL */
    char *status_patch; /* merge patch on /status with only what differs, or NULL */
};

/* The spec of a discovered device `d` of node `node`, with names from `ids` (may be NULL).
 * Returns 0; 1 when "kubevirt.io/<name>" is not a valid extended resource name (its name part
 * is over 63 characters: a long node name), so the spec has no resource name; -EINVAL when no
 * valid object name can be made from the device. */
int usbdevice_spec_from(const char *node, const struct node_usb_dev *d,
                        const struct node_usbids *ids, struct usbdevice_spec *ret);

/* The status object `s` should have (the discovered fields; not enabled, status, message).
 * NULL on OOM. */
struct cJSON *usbdevice_status(const struct usbdevice_spec *s);

/* The object to create for `s` (metadata only: status goes through /status). `node_uid` may
 * be NULL when the Node's uid is not known yet (no ownerReference then). NULL on OOM. */
struct cJSON *usbdevice_new_object(const struct usbdevice_spec *s, const char *node_uid);

/*
 * Plans the writes that make `have` (the cached object, NULL when there is none) match `want`
 * (NULL when the device is gone from the scan), given `claim` (the cached USBDeviceClaim of the
 * same name, NULL when none) and, for a gone device, `gone`. `node` is this agent's node.
 * Returns 0 (ret filled; an empty plan means nothing to write) or -ENOMEM. Free the plan with
 * usbdevice_plan_done().
 */
int usbdevice_plan(const struct usbdevice_spec *want, const struct cJSON *have,
                   const struct cJSON *claim, const struct usbdevice_gone *gone, const char *node,
                   const char *node_uid, struct usbdevice_plan *ret);
bool usbdevice_plan_empty(const struct usbdevice_plan *p);
void usbdevice_plan_done(struct usbdevice_plan *p);

/* --- the reconciler (logs; runs on the loop) ------------------------------------------------ */

struct buf;
struct ev_loop;
struct kube_http;
struct kube_informer;
struct map;
struct metrics;
struct runner;
struct usbdevices;

struct devobjs;
struct devobjs_config;

struct usbdevices *usbdevices_new(const struct devobjs_config *cfg);
/* An empty map for devobjs_take_want(): name -> struct usbdevice_spec (malloc'd). */
struct map *usbdevices_new_want(void);
/* As pcidevices_keep_unreadable(), for the port paths a USB scan skipped. */
void usbdevices_keep_unreadable(const struct usbdevices *d, struct map *want,
                                const struct map *unreadable);
void usbdevices_enqueue(struct usbdevices *d, const char *key);
/* Its device-object core (devices/devobjs.h: set_want, enqueue_all, runner). */
struct devobjs *usbdevices_objs(struct usbdevices *d);

/* The part (controllers/runtime/part.h): start, stop, drain and free, as its own; `self` is
 * what usbdevices_new returned. */
extern const struct part_ops usbdevices_part;
/* What the inventory emits with a USB scan (a struct devobjs_scan whose `want` the part
 * takes). */
struct topic;
extern const struct topic usbdevices_scanned;
