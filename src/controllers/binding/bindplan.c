/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/binding/bindplan.c - the bind checks on the facts the worker observed (see
 * bindplan.h). Pure: no I/O, no logging.
 */
#include "controllers/binding/bindplan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "node/vfio.h"

static void set_outcome(struct bindplan_outcome *o, enum bindplan_outcome_kind kind,
                        const char *reason, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static void set_outcome(struct bindplan_outcome *o, enum bindplan_outcome_kind kind,
                        const char *reason, const char *fmt, ...)
{
    o->kind = kind;
    o->reason = reason;
    va_list ap;
    va_start(ap, fmt);
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): clang-analyzer 14 false positive
    (void)vsnprintf(o->message, sizeof(o->message), fmt, ap);
    va_end(ap);
}

/* The IOMMU group check: BINDPLAN_GO when no member stands in the way. */
static void check_group(const struct bindplan_facts *f, struct bindplan_outcome *o)
{
    int n = f->group_blockers;
    if (n < 0)
        set_outcome(o, BINDPLAN_REFUSED, "SysfsError",
                    "cannot read the members of IOMMU group %d in sysfs: %s", f->iommu_group,
                    strerror(-n));
    else if (n > 0 && f->unsafe && f->unsafe[0]) /* never suggest claiming those */
        set_outcome(o, BINDPLAN_REFUSED, "IOMMUGroupUnsafe",
                    "IOMMU group %d also holds devices the host needs: %s. The whole group "
                    "would go to the VM, so device %s cannot be passed through safely in this "
                    "slot: move the card to a slot with an IOMMU group of its own (or behind a "
                    "PCIe switch with ACS)",
                    f->iommu_group, f->unsafe, f->address);
    else if (n > 0)
        set_outcome(o, BINDPLAN_REFUSED, "IOMMUGroupIncomplete",
                    "IOMMU group %d also holds %s; the whole group goes to one VM, so claim %s "
                    "too (or bind %s to vfio-pci)",
                    f->iommu_group, f->blockers, n == 1 ? "that device" : "those devices",
                    n == 1 ? "it" : "them");
    else
        o->kind = BINDPLAN_GO;
}

/* The original driver to record: the current one, unless the device is on vfio-pci already:
 * then the driver at first sight when that names one, else vfio-pci itself (the admin put it
 * there: vfio-pci.ids=, a driver_override; its release leaves it there). As the DRA path
 * records it (draprep_original), and as harvester records the driver it finds. */
static const char *original_driver(const struct bindplan_facts *f)
{
    if (strcmp(f->driver, NODE_VFIO_DRIVER) == 0 && f->annotation && f->annotation[0])
        return f->annotation;
    return f->driver;
}

void bindplan_check_bind(const struct bindplan_facts *f, struct bindplan_outcome *ret)
{
    *ret = (struct bindplan_outcome){.group = f->iommu_group};
    if (f->read_error < 0)
        set_outcome(ret, BINDPLAN_REFUSED, "SysfsError", "cannot read device %s in sysfs: %s",
                    f->address, strerror(-f->read_error));
    else if (!f->present)
        set_outcome(ret, BINDPLAN_REFUSED, "DeviceNotFound", "there is no PCI device %s on node %s",
                    f->address, f->node);
    else if (f->iommu_group < 0)
        set_outcome(ret, BINDPLAN_REFUSED, "NoIOMMUGroup",
                    "device %s has no IOMMU group, so it cannot be passed through safely: turn "
                    "on the IOMMU (VT-d or AMD-Vi in the firmware, intel_iommu=on or "
                    "amd_iommu=on on the kernel command line) and reboot the node",
                    f->address);
    else if (f->platform)
        set_outcome(ret, BINDPLAN_REFUSED, "PlatformDevice",
                    "device %s is %s, which the host cannot give up: it is never passed through",
                    f->address, f->platform);
    else if (f->host_critical > 0)
        set_outcome(ret, BINDPLAN_REFUSED, "HostCritical",
                    "device %s is host-critical: %s; passing it through would cut the node "
                    "off. Move that use to another device first",
                    f->address, f->host_why);
    else if (f->host_critical < 0)
        set_outcome(ret, BINDPLAN_REFUSED, "HostCritical",
                    "cannot tell whether device %s is host-critical (%s); refusing to be safe",
                    f->address, strerror(-f->host_critical));
    else if (f->usb_enabled && f->usb_enabled[0] && strcmp(f->driver, NODE_VFIO_DRIVER) != 0)
        set_outcome(ret, BINDPLAN_REFUSED, "USBDevicesEnabled",
                    "USB host controller %s has USB devices enabled for passthrough behind it "
                    "(%s), which would go with it: delete their USBDeviceClaims first",
                    f->address, f->usb_enabled);
    else if (f->sriov_vfs > 0 && strcmp(f->driver, NODE_VFIO_DRIVER) != 0)
        set_outcome(ret, BINDPLAN_REFUSED, "SRIOVEnabled",
                    "device %s is an SR-IOV physical function with %d virtual functions, which "
                    "binding it to vfio-pci would remove: set spec.numVFs of its "
                    "SRIOVNetworkDevice to 0 first, or claim a virtual function instead",
                    f->address, f->sriov_vfs);
    else
        check_group(f, ret);
    if (ret->kind == BINDPLAN_GO && !f->recorded) {
        ret->kind = BINDPLAN_RECORD;
        (void)snprintf(ret->driver, sizeof(ret->driver), "%s", original_driver(f));
    }
}
