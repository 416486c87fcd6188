/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/binding/bindplan.h - the pure planning of a PCI device's node work: the facts the
 * worker observed in sysfs, the bind checks that judge them (readable, present, IOMMU group,
 * not a platform device, not host-critical, no USB devices enabled behind it, group complete,
 * the original driver recorded first), and the outcome the worker reports (checked, refused,
 * bound, restored with what the release's reset and verification found, ...). What pcibind
 * (the worker's side) and the PCIDeviceClaim reconciler
 * (the decision on the outcome) both speak. Pure: no I/O, no logging; unit-tested.
 */
#pragma once

#include <stdbool.h>

#define BINDPLAN_MESSAGE_SIZE 1024

/* What the worker observed in sysfs about a claimed device, for the bind checks. */
struct bindplan_facts {
    const char *node, *address;
    int read_error;       /* < 0: the device could not be read (then nothing else is set) */
    bool present;         /* the device exists */
    int iommu_group;      /* -1: none */
    const char *driver;   /* "" when unbound */
    const char *platform; /* what the device is when the platform needs it (host bridge, ...) */
    int host_critical;    /* 1 yes (why in host_why), 0 no, < 0 cannot tell */
    const char *host_why;
    int group_blockers;      /* members in the way (< 0: the group cannot be read) */
    const char *blockers;    /* "0000:01:00.1 (snd_hda_intel; claim n-000010001), ...": those a
                                claim (or vfio-pci) would clear */
    const char *unsafe;      /* the members the host cannot give up, each with why: "0000:00:1f.0
                                is an ISA/LPC bridge (...), which the host cannot give up; ..."; ""
                                or NULL when none */
    const char *usb_enabled; /* USB devices enabled for passthrough behind this device (a USB
                                host controller): "titan-0627-0001-1-1, ...", "" none */
    int sriov_vfs;           /* an SR-IOV PF's VFs now (sriov_numvfs), else 0 */
    bool recorded;           /* the claim recorded the original driver already */
    const char *annotation;  /* the PCIDevice's driver at first sight, "" unknown */
};

/* The outcome of a claim's node work, as the worker found or made it. */
enum bindplan_outcome_kind {
    BINDPLAN_GO,       /* the checks passed (bind) or there is something to restore; after a
                          bind (not check_only) with reason "RemovalPending": left alone, the
                          kernel is removing the device (message), nothing to write */
    BINDPLAN_REFUSED,  /* a safety check failed: reason, message */
    BINDPLAN_RECORD,   /* record `driver` as the original driver before touching anything */
    BINDPLAN_BOUND,    /* bound to vfio-pci and verified: group */
    BINDPLAN_FAILED,   /* bind or restore failed: reason, message */
    BINDPLAN_BUSY,     /* deleting, and a VM holds /dev/vfio/<group> (message: which process,
                          "qemu-system-x86 (pid 412)", or "" when it cannot be told) */
    BINDPLAN_RESTORED, /* restored to `driver` and verified */
    BINDPLAN_RELEASED, /* deleting, and the claim never touched the device: nothing restored */
};

/* What a restore did to the device and saw after it (node/pcireset.h's verdict): the reset
 * when the device was on vfio-pci and free, then the ids it answers with and its driver. */
struct bindplan_release {
    bool checked;       /* the release judged the device (then the rest is set) */
    bool reset;         /* a reset was done (and worked) */
    int reset_us;       /* how long the write to reset took */
    char method[32];    /* the method the kernel tries first ("flr"), "" when not reset */
    const char *health; /* NULL healthy, else the reason (a HEALTH_* of health.h) */
    char message[BINDPLAN_MESSAGE_SIZE]; /* what was done and seen; unhealthy: what to do */
    char summary[640];                   /* the reset and the ids only ("not reset: ...; it
                                            answers as 8086:10d3") */
};

struct bindplan_outcome {
    enum bindplan_outcome_kind kind;
    const char *reason;
    char message[BINDPLAN_MESSAGE_SIZE];
    char driver[64];
    int group;
    int bind_us;                     /* BINDPLAN_BOUND: how long the bind steps and verification
                                        took */
    struct bindplan_release release; /* BINDPLAN_RESTORED, BINDPLAN_FAILED of a restore */
};

/* The bind checks, in order: readable, present, IOMMU group, not host-critical (unless it is
 * on vfio-pci already), no USB devices enabled behind it and no SR-IOV VFs on it (unless it is
 * on vfio-pci already), group complete; then the original driver is recorded first. Sets
 * BINDPLAN_REFUSED, BINDPLAN_RECORD or BINDPLAN_GO. */
void bindplan_check_bind(const struct bindplan_facts *f, struct bindplan_outcome *ret);
