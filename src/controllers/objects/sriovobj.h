/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/objects/sriovobj.h - facts about SRIOVNetworkDevice objects, pure: what the spec
 * asks (the VF count and each VF's settings), and the plan that takes a PF from the count the
 * kernel has to the one asked, or says why it must not.
 *
 * The kernel changes a non-zero sriov_numvfs only through 0 (a write of N over M > 0 is refused
 * with EBUSY), and going through 0 removes every VF. So:
 *   want == current                 nothing to write
 *   want > totalVFs                 refused: TooManyVFs
 *   current > 0, some VF in use     refused: VFsInUse (any change removes every VF)
 *   want > current, PF blocked      refused: HostNeedsDevice (the host uses the PF)
 *   current == 0                    write want
 *   want == 0                       write 0
 *   else                            write 0, then want
 * No I/O, no logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "node/vflink.h"

struct cJSON;

/* The most VF entries spec.vfs may hold (the CRD's maxItems). */
#define SRIOVOBJ_VFS_MAX 1024

/* Reasons of the Ready condition. */
#define SRIOVOBJ_CONFIGURED          "Configured"
#define SRIOVOBJ_TOO_MANY_VFS        "TooManyVFs"
#define SRIOVOBJ_VFS_IN_USE          "VFsInUse"
#define SRIOVOBJ_HOST_NEEDS_DEVICE   "HostNeedsDevice"
#define SRIOVOBJ_WRITE_FAILED        "WriteFailed"
#define SRIOVOBJ_SETTING_UNSUPPORTED "SettingUnsupported"
#define SRIOVOBJ_INVALID_SETTING     "InvalidSetting"
#define SRIOVOBJ_SYSFS_UNREADABLE    "SysfsUnreadable"

/* status.status, as harvester writes it. */
#define SRIOVOBJ_ENABLED  "sriovNetworkDeviceEnabled"
#define SRIOVOBJ_DISABLED "sriovNetworkDeviceDisabled"

/* The annotation harvester puts on each object (sic: "harvesterhi"). */
#define SRIOVOBJ_INTERFACE_ANNOTATION "sriov.devices.harvesterhi.io/interface-name"

/* What an object's spec asks. */
struct sriovobj_spec {
    char address[20]; /* spec.address: the PF */
    int num_vfs;      /* spec.numVFs (absent: 0) */
    long long generation;
    struct node_vflink_want vfs[SRIOVOBJ_VFS_MAX]; /* spec.vfs, in their order */
    size_t n_vfs;
};

/*
 * Reads the spec of object `obj`. Returns 0, or -EINVAL with `why` saying what is wrong with it
 * and what to write instead (the CRD refuses such specs; this is for objects written before
 * it did): a numVFs that is not a whole number >= 0, a VF entry without an index or with an
 * index >= numVFs, a MAC that is not "aa:bb:cc:dd:ee:ff" or is multicast, a VLAN outside 0..4095,
 * a QoS outside 0..7 or above 0 without a VLAN, two entries for one index, more than
 * SRIOVOBJ_VFS_MAX. Each VF entry is a node_vflink_want (node/vflink.h): what is not asked is
 * < 0.
 */
int sriovobj_spec(const struct cJSON *obj, struct sriovobj_spec *ret, struct err *why);

/* What the plan of the VF count knows of the PF. */
struct sriovobj_facts {
    int total;                   /* sriov_totalvfs */
    int current;                 /* sriov_numvfs */
    const char *blocker_reason;  /* the PF's passthrough blocker when the host needs it, or NULL */
    const char *blocker_message; /* its message */
    const char *in_use;          /* the VFs in use, for people ("" or NULL: none) */
};

struct sriovobj_count_plan {
    int writes[2];      /* the values to write to sriov_numvfs, in order */
    int n_writes;       /* 0: nothing to write (or refused) */
    const char *reason; /* a refusal's reason (SRIOVOBJ_*), or NULL */
    char message[1536]; /* the refusal, for people: what is wrong and what to do */
};

/* Plans the VF count `want` for a PF with facts `f` (see the table above). */
void sriovobj_count_plan(int want, const struct sriovobj_facts *f, struct sriovobj_count_plan *ret);
