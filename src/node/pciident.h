/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/pciident.h - what identifies a PCI function when its address changes: a serial number
 * (the PCIe Device Serial Number, read by node/pci.c from config space, else what the function
 * itself reports: a network function's permanent MAC address, an NVMe controller's serial) and
 * the physical slot it sits in (bus/pci/slots).
 *
 * The readers take a rooted sysfs (node/sysfs) and a device address; the permanent MAC address
 * is asked of the kernel with the ethtool ioctl (ETHTOOL_GPERMADDR) only when the interface's
 * ifindex in the tree is the one the kernel gives that name (so a fake tree never reads the
 * host's interfaces), else taken from net/<if>/address when addr_assign_type says it is the
 * permanent one (0). Blocking (sysfs reads, one ioctl); no logging; thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where a serial number came from. */
enum node_pciident_source {
    NODE_PCIIDENT_NONE,
    NODE_PCIIDENT_DSN,  /* the PCIe Device Serial Number capability (one per card) */
    NODE_PCIIDENT_MAC,  /* a network function's permanent MAC address */
    NODE_PCIIDENT_NVME, /* an NVMe controller's serial number */
};

/* Room for a serial or a slot name and its NUL (the API's limit of a string attribute). */
#define NODE_PCIIDENT_SERIAL_SIZE 65
#define NODE_PCIIDENT_SLOT_SIZE   65

/* "DSN", "PermanentMAC", "NVMeSerial"; "" for NODE_PCIIDENT_NONE. */
const char *node_pciident_source_name(enum node_pciident_source s);

/* The DSN's two dwords (low at offset 4 of the capability, high at 8) as lspci and the kernel
 * print it, most significant byte first: "00-11-22-33-44-55-66-77" (24 bytes with the NUL). */
void node_pciident_format_dsn(uint32_t low, uint32_t high, char buf[24]);

/* Whether a slot's address ("DDDD:BB:SS", the kernel's bus/pci/slots/<name>/address) is that of
 * the device at `address` ("DDDD:BB:SS.F"). A slot address without a device number
 * ("DDDD:BB") matches nothing. */
bool node_pciident_slot_matches(const char *slot_address, const char *address);

/* The slots of a tree: read once per scan. */
struct node_pciident_slots;

/* Reads bus/pci/slots/<name>/address. No directory is no slots (0 and an empty list); a slot
 * whose address cannot be read is left out. Returns 0 or -ENOMEM. */
int node_pciident_slots_read(int root_fd, struct node_pciident_slots **ret);

/* The name of the slot the device at `address` sits in, NULL when none. */
const char *node_pciident_slot_of(const struct node_pciident_slots *s, const char *address);

/* Takes NULL. */
void node_pciident_slots_free(struct node_pciident_slots *s);

/* An NVMe controller's serial (nvme/nvme<N>/serial of the device, trailing spaces cut) into
 * `buf`. `dev_fd` is the device's directory, from node_sysfs_open_dir(). Returns 0, -ENOENT
 * when it has none, -EINVAL when it is not printable ASCII, or the errno of node/sysfs. */
int node_pciident_nvme_serial(int dev_fd, char *buf, size_t size);

/* A network function's permanent MAC address ("52:54:00:12:34:56") of its first interface (the
 * first entry of net/, or of virtio<N>/net/ for a virtio function, `virtio`: vendor 0x1af4) into
 * `buf`; `dev_fd` is the device's directory, from node_sysfs_open_dir(). Returns 0, -ENOENT
 * when it has no interface or no permanent address can be told (an all-zero one included), or the
 * errno of node/sysfs. */
int node_pciident_perm_mac(int dev_fd, bool virtio, char *buf, size_t size);
