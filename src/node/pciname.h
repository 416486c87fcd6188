/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/pciname.h - the resource name and the description of a PCI device, computed from what
 * libpci tells about it (ids and pci.ids names) exactly as harvester/pcidevices computes
 * PCIDevice status.resourceName and status.description from ghw/pcidb.
 *
 * The resource name is derived from pci.ids text, so it is cleaned, shortened for the device
 * plugin's unix socket, and finally checked: every name returned is a valid Kubernetes extended
 * resource name. Pure: no I/O, no logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Buffer size that holds any resource name: a 253-byte domain, '/', 63 bytes, NUL. */
#define NODE_PCINAME_RESOURCE_MAX 320

/* Longest pci.ids name accepted (bytes, without NUL); pci.ids names are under 256 bytes. */
#define NODE_PCINAME_NAME_MAX 1023

/*
 * What libpci reports about a device. The names come from pci.ids; NULL or "" means unknown
 * (libpci with PCI_LOOKUP_NO_NUMBERS returns NULL then). Borrowed for the call only.
 */
struct node_pciname_ids {
    uint16_t vendor_id;        /* 0x8086 */
    uint16_t device_id;        /* 0x0d4c */
    uint16_t class_id;         /* base class << 8 | subclass: 0x0200 */
    const char *vendor_name;   /* "Intel Corporation" */
    const char *device_name;   /* "Ethernet Connection (11) I219-LM" */
    const char *class_name;    /* "Network controller" */
    const char *subclass_name; /* "Ethernet controller" */
};

/*
 * The vendor part of resource names: the text inside the first "[...]" of the vendor name cut
 * at its first '/', or else the vendor name's first space-separated word; ASCII alphanumerics
 * only, lower-cased, plus ".com". "Intel Corporation" -> "intel.com", "Advanced Micro Devices,
 * Inc. [AMD/ATI]" -> "amd.com". An unknown (NULL or "") vendor gives "unknown.com", as ghw names
 * unknown vendors "unknown". When the rule gives no valid DNS subdomain (nothing alphanumeric,
 * a label over 63 bytes), the result is "unknown.com" too. Returns 0, -EINVAL when `ret` is
 * NULL, -ENAMETOOLONG when the domain does not fit in `size` bytes.
 */
int node_pciname_vendor_domain(const char *vendor_name, char *ret, size_t size);

/*
 * The pooled resource name "<vendor domain>/<product part>" shared by identical devices:
 * the device name trimmed, upper-cased, '/' and '.' turned into '_', runs of whitespace into
 * one '_', every other character outside [A-Za-z0-9_] dropped, trailing '_' '.' '-' trimmed:
 *   "Intel Corporation", "Ethernet Connection (11) I219-LM"
 *       -> "intel.com/ETHERNET_CONNECTION_11_I219LM"
 *   "NVIDIA Corporation", "GA104 [RTX A4500 Embedded GPU ]" ->
 * "nvidia.com/GA104_RTX_A4500_EMBEDDED_GPU" The device id in 4 lower-case hex digits replaces a
 * product part that is unknown or empty
 * ("intel.com/8d26", "test.com/5678" for "!!!"). When the device plugin's socket path,
 * computed as harvester does, would pass 108 bytes, VIRTUAL_FUNCTION becomes VF, and if that is
 * not enough the device id is used ("broadcom.com/16af"). Whatever is not a valid extended
 * resource name in the end (a leading '_', say) becomes "<vendor domain>/<device id>".
 * Returns 0, -EINVAL for NULL arguments or a name over NODE_PCINAME_NAME_MAX, -ENAMETOOLONG
 * when the name does not fit in `size` bytes (NODE_PCINAME_RESOURCE_MAX always does).
 */
int node_pciname_resource(const struct node_pciname_ids *ids, char *ret, size_t size);

/*
 * The per-device resource name of a claim with disableResourcePooling:
 * "<vendor domain>/<PCIDevice name>", e.g. "Intel Corporation", "titan-0000001f6" ->
 * "intel.com/titan-0000001f6". The PCIDevice name is used as it is (harvester does), so this
 * never falls back to a pooled name: returns 0, -EINVAL when the result is not a valid extended
 * resource name (a PCIDevice name over 63 bytes, from a long node name), -ENAMETOOLONG when the
 * device plugin's socket path would pass 108 bytes (vendor domain + name over 60 bytes) or the
 * name does not fit in `size` bytes.
 */
int node_pciname_resource_unpooled(const char *vendor_name, const char *pcidevice_name, char *ret,
                                   size_t size);

/*
 * The description "<subclass or class name>: <vendor name> <device name>", each unknown name
 * replaced by "Class 0200", "Vendor 8086", "Device 0d4c" (lower-case hex, as ghw reports ids):
 * "Ethernet controller: Intel Corporation Ethernet Connection (11) I219-LM". Never empty.
 * Returns 0, -EINVAL for NULL arguments, -ENAMETOOLONG when it does not fit in `size` bytes.
 */
int node_pciname_description(const struct node_pciname_ids *ids, char *ret, size_t size);
