/* SPDX-License-Identifier: Apache-2.0 */
/* What a scan found of one SR-IOV PF: its VFs in index order, the host's blockers without
 * SRIOVEnabled, the VFs in use, and the status they make. The PF's interface is one no host has
 * (netlink answers "no such interface": the VF settings stay unreported). */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/map.h"
#include "controllers/devices/pcidevice.h"
#include "controllers/sriov/sriovpf.h"

static struct pcidevice_spec *dev(struct map *m, const char *address, const char *physfn, int index,
                                  const char *driver)
{
    struct pcidevice_spec *s = calloc(1, sizeof(*s));
    (void)snprintf(s->address, sizeof(s->address), "%s", address);
    (void)snprintf(s->name, sizeof(s->name), "n-%.2s%.2s%.1s", address + 5, address + 8,
                   address + 11);
    (void)snprintf(s->class_id, sizeof(s->class_id), "0200");
    (void)snprintf(s->driver, sizeof(s->driver), "%s", driver);
    (void)snprintf(s->physfn, sizeof(s->physfn), "%s", physfn);
    s->sriov_totalvfs = physfn[0] ? -1 : 7;
    s->sriov_numvfs = physfn[0] ? -1 : 3;
    s->sriov_vf_index = index;
    CU_ASSERT_EQUAL(map_put(m, s->name, s), 0);
    return s;
}

static void test_facts_and_status(void)
{
    struct map *m = map_new(pcidevice_spec_free);
    struct pcidevice_spec *pf = dev(m, "0000:3b:00.0", "", -1, "igb");
    (void)snprintf(pf->netdev, sizeof(pf->netdev), "hdnosuch0");
    pf->n_blockers = 2;
    pf->blockers = calloc(2, sizeof(*pf->blockers));
    (void)snprintf(pf->blockers[0].reason, sizeof(pf->blockers[0].reason), "SRIOVEnabled");
    (void)snprintf(pf->blockers[1].reason, sizeof(pf->blockers[1].reason), "HostNetwork");
    (void)snprintf(pf->blockers[1].message, sizeof(pf->blockers[1].message), "it has 10.0.0.2");
    /* in the map's order, not the index's */
    dev(m, "0000:3b:10.4", "0000:3b:00.0", 2, "igbvf");
    dev(m, "0000:3b:10.0", "0000:3b:00.0", 0, "vfio-pci");
    dev(m, "0000:3b:10.2", "0000:3b:00.0", 1, "igbvf");
    dev(m, "0000:3c:10.0", "0000:3c:00.0", 0, "igbvf"); /* another PF's */
    struct pcidevice_spec *nvme = dev(m, "0000:5e:00.0", "", -1, "nvme");
    (void)snprintf(nvme->class_id, sizeof(nvme->class_id), "0108");
    CU_ASSERT_TRUE(sriovpf_is_network_pf(pf));
    CU_ASSERT_FALSE(sriovpf_is_network_pf(nvme));

    struct sriovpf *p = sriovpf_new("n-hdnosuch0", pf, m);
    if (!p) {
        CU_FAIL("sriovpf_new");
        map_free(m);
        return;
    }
    CU_ASSERT_EQUAL(p->n_vfs, 3);
    CU_ASSERT_STRING_EQUAL(p->vfs[0].address, "0000:3b:10.0");
    CU_ASSERT_STRING_EQUAL(p->vfs[2].address, "0000:3b:10.4");
    CU_ASSERT_EQUAL(p->n_blockers, 1);
    CU_ASSERT_STRING_EQUAL(p->blockers[0].reason, "HostNetwork");
    CU_ASSERT_FALSE(p->vfs[0].has_link);
    CU_ASSERT_PTR_NOT_NULL(strstr(p->links_error, "hdnosuch0"));

    struct buf b;
    buf_init(&b, 1024);
    sriovpf_in_use(p, NULL, &b);
    CU_ASSERT_STRING_EQUAL(buf_str(&b), "0000:3b:10.0 (on vfio-pci: a DRA claim or a VM has it)");
    buf_free(&b);

    cJSON *st = sriovpf_status(p, NULL, false, "VFsInUse", "busy");
    char *text = cJSON_PrintUnformatted(st);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"vfAddresses\":[\"0000:3b:10.0\",\"0000:3b:10.2\","
                                        "\"0000:3b:10.4\"]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"vfPCIDevices\":[\"n-3b100\",\"n-3b102\",\"n-3b104\"]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"status\":\"sriovNetworkDeviceEnabled\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"totalVFs\":7,\"numVFs\":3"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "{\"index\":1,\"address\":\"0000:3b:10.2\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"passthroughBlockers\":[{\"reason\":\"HostNetwork\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"status\":\"False\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"reason\":\"VFsInUse\",\"message\":\"busy\""));
    for (size_t i = 0; i < sriovpf_n_managed; i++) /* every field it writes is managed */
        CU_ASSERT_PTR_NOT_NULL(json_field(st, sriovpf_managed[i]));
    cJSON_free(text);
    cJSON_Delete(st);
    sriovpf_free(p);
    map_free(m);
}

/* A VF whose index cannot be read, and a count that cannot: the status has what can be read and
 * nothing the CRD rejects (an entry of status.vfs without its index key, a negative count), and
 * sriovpf_unreadable() says what is missing. */
static void test_unreadable(void)
{
    struct map *m = map_new(pcidevice_spec_free);
    struct pcidevice_spec *pf = dev(m, "0000:3b:00.0", "", -1, "igb");
    dev(m, "0000:3b:10.4", "0000:3b:00.0", -1, "igbvf"); /* its virtfn link unreadable */
    dev(m, "0000:3b:10.0", "0000:3b:00.0", 0, "igbvf");
    struct sriovpf *p = sriovpf_new("n-pf", pf, m);
    CU_ASSERT_PTR_NOT_NULL(p);
    if (!p) {
        map_free(m);
        return;
    }
    CU_ASSERT_EQUAL(p->n_vfs, 2);
    CU_ASSERT_EQUAL(p->vfs[0].index, 0); /* the unreadable last */
    CU_ASSERT_EQUAL(p->vfs[1].index, -1);
    struct buf b;
    buf_init(&b, 1024);
    CU_ASSERT_EQUAL(sriovpf_unreadable(p, &b), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&b), "cannot read the index of VF 0000:3b:10.4 of "
                                               "0000:3b:00.0"));
    buf_free(&b);
    cJSON *st = sriovpf_status(p, NULL, false, "SysfsUnreadable", "x");
    char *text = cJSON_PrintUnformatted(st);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"vfAddresses\":[\"0000:3b:10.0\",\"0000:3b:10.4\"]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"vfs\":[{\"index\":0,\"address\":\"0000:3b:10.0\""));
    CU_ASSERT_PTR_NULL(strstr(text, "\"address\":\"0000:3b:10.4\"")); /* not in status.vfs */
    const cJSON *vfs = json_field(st, "vfs");
    for (const cJSON *e = vfs ? vfs->child : NULL; e; e = e->next)
        CU_ASSERT_PTR_NOT_NULL(json_field(e, "index"));
    cJSON_free(text);
    cJSON_Delete(st);
    sriovpf_free(p);

    pf->sriov_numvfs = -1; /* the count cannot be read */
    p = sriovpf_new("n-pf", pf, m);
    CU_ASSERT_PTR_NOT_NULL(p);
    if (!p) {
        map_free(m);
        return;
    }
    CU_ASSERT_EQUAL(p->current, -1);
    buf_init(&b, 1024);
    CU_ASSERT_EQUAL(sriovpf_unreadable(p, &b), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&b), "cannot read the VF count of 0000:3b:00.0"));
    buf_free(&b);
    st = sriovpf_status(p, NULL, false, "SysfsUnreadable", "x");
    CU_ASSERT_PTR_NULL(json_field(st, "numVFs"));
    CU_ASSERT_PTR_NOT_NULL(json_field(st, "totalVFs"));
    CU_ASSERT_TRUE(json_same(json_str(st, "status"), "sriovNetworkDeviceEnabled")); /* VFs seen */
    cJSON_Delete(st);
    sriovpf_free(p);
    map_free(m);
}

static CU_TestInfo tests[] = {
        {"a PF's VFs, blockers, VFs in use and status", test_facts_and_status},
        {"what cannot be read: a VF's index, the count", test_unreadable},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo sriovpf_suites[] = {
        {"sriovpf", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
