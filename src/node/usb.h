/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/usb.h - USB device discovery on a configurable sysfs root.
 *
 * Lists bus/usb/devices through the root fd (node/sysfs: openat2 RESOLVE_IN_ROOT, so a fake
 * tree or a host /sys mounted at /host/sys works the same) and reads, per USB device (an entry
 * named "<bus>-<port>[.<port>...]": root hubs "usbN" and interfaces "<dev>:<cfg>.<if>" are left
 * out), the sysfs attributes the kernel documents in Documentation/ABI/stable/sysfs-bus-usb:
 * idVendor, idProduct, busnum, devnum, speed, bDeviceClass (and the first interface's
 * bInterfaceClass when that is 00), product, manufacturer, serial; the host controller's PCI
 * address from the device's link ("../../../devices/pci0000:00/0000:00:14.0/usb1/1-2": the
 * component before "usbN").
 *
 * Why not libudev's enumerator: sd-device refuses every syspath outside "/sys/"
 * (device_set_syspath), so it cannot read a fake tree or a host sysfs mounted elsewhere, and
 * every fact we need is a sysfs attribute (nothing comes from udev's database). libudev stays
 * the uevent source (node/udev.h), and node_udev_list_usb() enumerates the real /sys with it
 * so the end-to-end tests can check that both agree.
 *
 * One bad device never hides the others: an entry that is not a device directory or whose
 * identity (idVendor, idProduct, busnum, devnum) cannot be read is skipped and described in
 * `skipped`; a device whose other facts cannot be read is listed with what could be read and a
 * `problem` sentence. Blocking (sysfs reads), no logging, no global state.
 */
#pragma once

#include <stddef.h>

#include "base/err.h"
#include "node/sysfs.h"

#define NODE_USB_PORT_PATH_SIZE 32  /* "3-1.4.2", at most 7 tiers */
#define NODE_USB_STRING_SIZE    384 /* a string descriptor: 126 UTF-16 units, as UTF-8 */

struct node_usb_dev {
    char port_path[NODE_USB_PORT_PATH_SIZE]; /* the sysfs name, "2-1.4": stable per port */
    char vendor_id[5], product_id[5];        /* 4 lower-case hex digits */
    int busnum, devnum;                      /* decimal as sysfs says them */
    char dev_path[32];                       /* "/dev/bus/usb/BBB/DDD" from busnum/devnum */
    char pci_address[20];                    /* the host controller's, "" when not on PCI */
    char speed[8];                           /* Mbit/s as sysfs says it ("480", "1.5"), or "" */
    char class_code[3]; /* bDeviceClass, or the first interface's class when that is 00;
                           2 lower-case hex digits, "" when unknown */
    char product[NODE_USB_STRING_SIZE]; /* string descriptors, "" when the device has none */
    char manufacturer[NODE_USB_STRING_SIZE];
    char serial[NODE_USB_STRING_SIZE];
    char problem[256]; /* "" or what could not be read */
};

struct node_usb_scan_result {
    struct node_usb_dev *devs; /* sorted by port_path */
    size_t n_devs;
    struct node_sysfs_skip *skipped;
    size_t n_skipped;
};

/* Scans the USB devices under `root_fd` (node_sysfs_open_root). Returns 0 and fills `ret`
 * (free with node_usb_scan_result_done) or a negative errno with `ret_err` filled (bus/usb
 * cannot be listed). A tree without bus/usb (no USB at all) is an empty, successful scan. */
int node_usb_scan(int root_fd, struct node_usb_scan_result *ret, struct err *ret_err);
void node_usb_scan_result_done(struct node_usb_scan_result *r);

/* How many interfaces ("<port>:<cfg>.<if>") of device `port_path` are bound to `driver`:
 * "usbfs" counts those a program claimed through /dev/bus/usb (a VMM's usb-host takes every
 * interface it passes through), which is how the agent tells a USB device in use without reading
 * /proc. -ENOENT when the device is gone, other -errno when its directory cannot be listed. */
int node_usb_interfaces_bound(int root_fd, const char *port_path, const char *driver);

/* Asks the kernel to probe each interface of device `port_path` that has no driver
 * (bus/usb/drivers_probe), as libusb's reattach does when a VMM quits: a VMM killed before it
 * could reattach leaves its interfaces driverless (usbfs let go of them, nobody probed them).
 * Returns how many were probed, or -errno when the device's directory cannot be listed. A
 * blocking sysfs write per interface (a HID or storage probe: milliseconds). */
int node_usb_probe_unbound(int root_fd, const char *port_path);
