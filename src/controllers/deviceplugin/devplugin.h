/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/deviceplugin/devplugin.h - what the agent's kubelet device plugins answer, pure (no
 * I/O, no logging, unit-tested): the socket name of a resource, the environment variable KubeVirt's
 * virt-launcher reads, the Allocate answer for PCI, USB and mediated devices, and the preferred
 * allocation. The plugins themselves (gRPC on kubelet/grpc.h, registration, ListAndWatch) use
 * these.
 *
 * The KubeVirt contract (pkg/util/util.go ResourceNameToEnvVar, hostdevice/addresspool.go):
 * `PCI_RESOURCE_<NAME>` holds comma-joined PCI addresses (full domain), `MDEV_PCI_RESOURCE_<NAME>`
 * comma-joined mdev UUIDs (hostdevice/generic/addresspool.go: the pool of v1.MDevResourcePrefix,
 * tried after the PCI pool), `USB_RESOURCE_<NAME>` comma-joined decimal `bus:device`; `<NAME>` is
 * the resource name upper-cased with every '/' and '.' replaced by '_' (nothing else changes:
 * "devices.harvesterhci.io/mtty-2" -> "MDEV_PCI_RESOURCE_DEVICES_HARVESTERHCI_IO_MTTY-2"). PCI
 * devices and mdevs get `/dev/vfio/vfio`, `/dev/vfio/<group>` of every group and
 * `/dev/vfio/devices/vfioN` when the kernel has the iommufd cdev; USB devices their
 * `/dev/bus/usb/BBB/DDD`; all with permissions "mrw".
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"

#define DEVPLUGIN_SOCKET_PREFIX "hostdevd-"

enum devplugin_kind { DEVPLUGIN_PCI, DEVPLUGIN_USB, DEVPLUGIN_MDEV };

/* One device a plugin offers: its ID (the PCI address, the USBDevice name, or an mdev's UUID)
 * and the facts Allocate and the preference need. */
struct devplugin_dev {
    const char *id;
    const char *address;   /* PCI: "0000:00:04.0" */
    const char *vfio_cdev; /* PCI, mdev: "vfio0" when the device's vfio-dev/ has one, or "" */
    const char *dev_path;  /* USB: "/dev/bus/usb/002/004" */
    enum devplugin_kind kind;
    int iommu_group;    /* PCI, mdev: >= 0 */
    int busnum, devnum; /* USB: decimal */
    int numa_node;      /* < 0: unknown */
};

/* "<prefix>_<resource upper-cased, '/' and '.' as '_'>", e.g. ("PCI_RESOURCE",
 * "intel.com/82574L") -> "PCI_RESOURCE_INTEL_COM_82574L". Returns 0 or -ENAMETOOLONG. */
int devplugin_env_name(const char *prefix, const char *resource, char *buf, size_t size);

/* The plugin socket's file name for `resource` in directory `dir`:
 * "hostdevd-<resource with '/' as '_'>.sock", or, when "<dir>/<that>" would not fit a unix
 * socket address (107 bytes and the NUL), the resource cut short and a hash of the whole name
 * ("hostdevd-intel.com_8257-1a2b3c4d.sock"): every resource gets a socket, distinct and stable.
 * Returns 0, or -ENAMETOOLONG (with a message in ret_err) when `dir` leaves no room for one. */
int devplugin_socket_name(const char *dir, const char *resource, char *buf, size_t size,
                          struct err *ret_err);

/* The answer to one container's Allocate of `ids` (each must be one of the `n` devices of
 * `devs`; an unknown ID is -ENOENT with the ID named in ret_err). `resource` names the env
 * variable. Fills `ret` (free with devplugin_alloc_done). */
struct devplugin_alloc {
    char env_key[320];
    struct buf env_value; /* comma-joined addresses, UUIDs or bus:device */
    char (*paths)[64];    /* device nodes, each once */
    size_t n_paths;
};

int devplugin_allocate(const char *resource, const struct devplugin_dev *devs, size_t n,
                       const char *const *ids, size_t n_ids, struct devplugin_alloc *ret,
                       struct err *ret_err);
void devplugin_alloc_done(struct devplugin_alloc *a);

/* GetPreferredAllocation for one container: `size` IDs out of `available` (IDs of `devs`),
 * always including `must`; then whole IOMMU groups of what is chosen, then devices on the NUMA
 * node most of the choice is on, then the rest in `available`'s order. Writes up to `size`
 * pointers into `out` (borrowed from `available`/`must`) and returns how many. */
size_t devplugin_prefer(const struct devplugin_dev *devs, size_t n, const char *const *available,
                        size_t n_available, const char *const *must, size_t n_must, size_t size,
                        const char **out);
