/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/names.h - object names and the formats of the devices.harvesterhci.io API.
 *
 * The same rules as the CRD schemas in crds/ (patterns and CEL), so the agent never writes an
 * object the API server would reject: PCI addresses, 4-hex ids, USB port paths, and the names
 * of PCIDevice/USBDevice objects. Node names (DNS subdomains) and extended resource names are
 * checked by base/names.h. Pure: no I/O.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/names.h"

/* Longest object name the API server accepts (DNS subdomain). */
#define KUBE_NAME_MAX NAMES_DNS_SUBDOMAIN_MAX

/* The PCIDevice annotation with the driver the device had when the agent first saw it
 * (harvester's name; written on create only; a claim of a device already on vfio-pci takes
 * the driver to restore from it). */
#define KUBE_PCIDEVICE_DRIVER_ANNOTATION "harvesterhci.io/pcideviceDriver"

/* A PCI address as sysfs writes it: "0000:00:1f.6" (domain of 4-8 hex digits, lower case). */
bool kube_names_is_pci_address(const char *s);

/* Exactly four lower-case hex digits ("8086"). */
bool kube_names_is_hex4(const char *s);

/* A USB port path as sysfs names the device: "2-1.4" (bus, then ports separated by '.'). */
bool kube_names_is_usb_port_path(const char *s);

/*
 * The PCIDevice (and PCIDeviceClaim) name for a device: "<node>-<address without ':' and '.'>",
 * e.g. node "titan", address "0000:00:1f.6" -> "titan-0000001f6". Writes it to `ret` (of `size`
 * bytes). Returns 0, -EINVAL when the node or address is malformed, -ENAMETOOLONG when the name
 * would be longer than KUBE_NAME_MAX or than `size` allows.
 */
int kube_names_pcidevice(const char *node, const char *address, char *ret, size_t size);

/*
 * The USBDevice (and USBDeviceClaim) name: "<node>-<vid>-<pid>-<port path, '.' -> '-'>",
 * e.g. "titan", "0951", "1666", "2-1.4" -> "titan-0951-1666-2-1-4". The port path is stable
 * across re-plug and reboot, unlike /dev/bus/usb/BBB/DDD. Returns as kube_names_pcidevice().
 */
int kube_names_usbdevice(const char *node, const char *vid, const char *pid, const char *port_path,
                         char *ret, size_t size);

/*
 * The SRIOVNetworkDevice name of an SR-IOV PF, as harvester names it: "<node>-<interface>" in
 * lower case, e.g. "titan", "enp3s0f0" -> "titan-enp3s0f0". Returns 0, -EINVAL when the node is
 * malformed or the result is not a DNS subdomain (an interface named with '_' or '@'),
 * -ENAMETOOLONG as kube_names_pcidevice().
 */
int kube_names_sriovnetdev(const char *node, const char *ifname, char *ret, size_t size);

/*
 * The node of a USBDevice (or USBDeviceClaim) name: the name without its
 * "-<vid>-<pid>-<bus>-<port>[-<port>...]" suffix, found as the admission policies find it (the
 * leftmost '-' where such a suffix starts and runs to the end; the 4-digit ids cannot be
 * mistaken for port groups of at most 3 digits, so only one node fits). Returns 0, or -EINVAL
 * when the name has no such suffix or what precedes it is not a node name.
 */
int kube_names_usbdevice_node(const char *name, char *ret, size_t size);
