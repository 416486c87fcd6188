/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/objects/sriovobj.c - facts about SRIOVNetworkDevice objects (see sriovobj.h).
 */
#include "controllers/objects/sriovobj.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"

/* A whole number in [min, max] from field `name` of `o`; `absent` when it has none. */
static int whole(const cJSON *o, const char *name, long long min, long long max, long long absent,
                 long long *ret)
{
    const cJSON *v = json_field(o, name);
    if (!v) {
        *ret = absent;
        return 0;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < (double)min || v->valuedouble > (double)max)
        return -EINVAL;
    *ret = (long long)v->valuedouble;
    return 0;
}

/* A boolean field as 0/1, -1 when absent; -EINVAL when not a boolean. */
static int flag(const cJSON *o, const char *name, int *ret)
{
    const cJSON *v = json_field(o, name);
    *ret = !v ? -1 : cJSON_IsTrue(v) ? 1 : 0;
    return !v || cJSON_IsBool(v) ? 0 : -EINVAL;
}

static int vf_entry(const cJSON *e, size_t i, int num_vfs, struct node_vflink_want *vf,
                    struct err *why)
{
    long long index, vlan, qos;
    *vf = (struct node_vflink_want){.vlan = -1, .qos = -1, .spoofchk = -1, .trust = -1};
    if (!cJSON_IsObject(e) || !json_field(e, "index") ||
        whole(e, "index", 0, 65535, -1, &index) < 0)
        return err_set(why, -EINVAL,
                       "spec.vfs[%zu] has no index: write the VF's index, 0 to numVFs-1", i);
    vf->index = (int)index;
    if (index >= num_vfs)
        return err_set(why, -EINVAL,
                       "spec.vfs[%zu].index %lld: the PF has only %d VFs (spec.numVFs); indexes "
                       "go from 0 to numVFs-1",
                       i, index, num_vfs);
    const char *mac = json_str(e, "mac");
    if (json_field(e, "mac") && (!mac || node_vflink_mac_parse(mac, vf->mac, NULL) < 0))
        return err_set(why, -EINVAL,
                       "spec.vfs[%zu].mac is not a unicast MAC address: write six pairs of hex "
                       "digits separated by colons, e.g. 52:54:00:12:34:56",
                       i);
    vf->has_mac = mac != NULL;
    if (whole(e, "vlan", 0, 4095, -1, &vlan) < 0)
        return err_set(why, -EINVAL, "spec.vfs[%zu].vlan must be 0 (none) to 4095", i);
    if (whole(e, "qos", 0, 7, -1, &qos) < 0 || (qos > 0 && vlan <= 0))
        return err_set(why, -EINVAL,
                       "spec.vfs[%zu].qos must be a VLAN priority 0 to 7, above 0 only with a "
                       "vlan beside it",
                       i);
    vf->vlan = (int)vlan;
    vf->qos = vlan < 0 ? -1 : qos < 0 ? 0 : (int)qos; /* the kernel sets both together */
    if (flag(e, "spoofCheck", &vf->spoofchk) < 0 || flag(e, "trust", &vf->trust) < 0)
        return err_set(why, -EINVAL, "spec.vfs[%zu]: spoofCheck and trust are true or false", i);
    return 0;
}

int sriovobj_spec(const cJSON *obj, struct sriovobj_spec *ret, struct err *why)
{
    const cJSON *spec = json_field(obj, "spec");
    long long n;
    memset(ret, 0, sizeof(*ret));
    const char *address = json_str(spec, "address");
    (void)snprintf(ret->address, sizeof(ret->address), "%s", address ? address : "");
    const cJSON *gen = json_field(json_field(obj, "metadata"), "generation");
    ret->generation = cJSON_IsNumber(gen) ? (long long)gen->valuedouble : 0;
    if (whole(spec, "numVFs", 0, 65535, 0, &n) < 0)
        return err_set(why, -EINVAL, "spec.numVFs must be a whole number from 0 (no VFs) up");
    ret->num_vfs = (int)n;
    const cJSON *vfs = json_field(spec, "vfs");
    if (vfs && !cJSON_IsArray(vfs))
        return err_set(why, -EINVAL, "spec.vfs must be a list of {index, mac, vlan, ...}");
    if (cJSON_GetArraySize(vfs) > SRIOVOBJ_VFS_MAX)
        return err_set(why, -EINVAL, "spec.vfs has more than %d entries", SRIOVOBJ_VFS_MAX);
    const cJSON *e;
    size_t i = 0;
    cJSON_ArrayForEach(e, vfs)
    {
        int r = vf_entry(e, i, ret->num_vfs, &ret->vfs[i], why);
        if (r < 0)
            return r;
        for (size_t k = 0; k < i; k++)
            if (ret->vfs[k].index == ret->vfs[i].index)
                return err_set(why, -EINVAL,
                               "spec.vfs[%zu] and spec.vfs[%zu] both set VF %d: write one entry "
                               "per VF",
                               k, i, ret->vfs[i].index);
        i++;
    }
    ret->n_vfs = i;
    return 0;
}

void sriovobj_count_plan(int want, const struct sriovobj_facts *f, struct sriovobj_count_plan *ret)
{
    *ret = (struct sriovobj_count_plan){.n_writes = 0};
    if (want == f->current)
        return;
    if (want > f->total) {
        ret->reason = SRIOVOBJ_TOO_MANY_VFS;
        (void)snprintf(ret->message, sizeof(ret->message),
                       "spec.numVFs %d is more than the %d virtual functions this PF supports "
                       "(status.totalVFs): write %d or less",
                       want, f->total, f->total);
        return;
    }
    if (f->current > 0 && f->in_use && f->in_use[0]) {
        ret->reason = SRIOVOBJ_VFS_IN_USE;
        (void)snprintf(ret->message, sizeof(ret->message),
                       "cannot change the VF count from %d to %d: the kernel changes it only "
                       "through 0, which removes every VF, and these are in use: %.1100s; release "
                       "them first (delete their claims, stop their VMs)",
                       f->current, want, f->in_use);
        return;
    }
    if (want > f->current && f->blocker_reason) {
        ret->reason = SRIOVOBJ_HOST_NEEDS_DEVICE;
        (void)snprintf(ret->message, sizeof(ret->message),
                       "cannot raise the VF count from %d to %d: the host needs this PF (%s: "
                       "%.1100s)",
                       f->current, want, f->blocker_reason,
                       f->blocker_message ? f->blocker_message : "");
        return;
    }
    if (f->current > 0 && want > 0)
        ret->writes[ret->n_writes++] = 0;
    ret->writes[ret->n_writes++] = want;
}
