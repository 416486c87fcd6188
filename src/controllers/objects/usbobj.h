/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/objects/usbobj.h - facts about our USB custom resources (USBDeviceClaim,
 * USBDevice) that both their reconcilers (and the device plugins, KubeVirt, the PCI claims'
 * USB-controller check) read, each in one place: the claim's finalizer, whether a claim holds
 * its device, whether a device is enabled (behind a given host controller) or orphaned, and the
 * words both sides write (the unplugged reason, the orphaned mark, the message size).
 * Pure: no I/O, no logging; unit-tested.
 */
#pragma once

#include <stdbool.h>

struct cJSON;

/* The USBDeviceClaim's finalizer: its agent releases the device before it goes. */
#define USBOBJ_FINALIZER "devices.harvesterhci.io/release-usb"
/* The size of a Ready message or an orphan message, NUL included. */
#define USBOBJ_MESSAGE_SIZE 1024
/* The claim's Ready=False reason while its device is unplugged: it still holds the device. */
#define USBOBJ_REASON_UNPLUGGED "DeviceUnplugged"
/* The claim's Ready=False reason while it is deleted and a program (a VM's VMM) still has the
 * device: it holds the device until the program lets go. */
#define USBOBJ_REASON_IN_USE "DeviceInUse"
/* The USBDevice's status.status while a claim holds it and it is gone from the scan. */
#define USBOBJ_ORPHANED "orphaned"

/* Whether `claim` (a cached USBDeviceClaim, or NULL) holds its device: with our finalizer, and
 * made Ready by its agent (or waiting for the device to be plugged back in, or deleted while a
 * VM still has it). A deleted claim holds its device until its agent writes that it lets go:
 * the device stays enabled, offered and permitted while a VM may use it. The USBDevice's
 * status.enabled is exactly this. */
bool usbobj_claim_holds(const struct cJSON *claim);

/* Whether a cached USBDevice (or NULL) is marked orphaned / enabled. */
bool usbobj_device_orphaned(const struct cJSON *dev);
bool usbobj_device_enabled(const struct cJSON *dev);

/* Whether a cached USBDevice is enabled and behind the USB host controller at PCI address
 * `pci_address`. */
bool usbobj_enabled_behind(const struct cJSON *dev, const char *pci_address);
