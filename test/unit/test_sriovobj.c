/* SPDX-License-Identifier: Apache-2.0 */
/* SRIOVNetworkDevice facts: the spec as read, and the plan of the VF count (every transition,
 * every refusal). */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <string.h>

#include "controllers/objects/sriovobj.h"

static struct sriovobj_count_plan plan(int want, int current, int total, const char *blocker,
                                       const char *in_use)
{
    struct sriovobj_facts f = {.total = total,
                               .current = current,
                               .blocker_reason = blocker,
                               .blocker_message = blocker ? "enp0s5 has 10.0.2.15" : NULL,
                               .in_use = in_use};
    struct sriovobj_count_plan p;
    sriovobj_count_plan(want, &f, &p);
    return p;
}

static void assert_writes(struct sriovobj_count_plan p, int n, int first, int second)
{
    CU_ASSERT_PTR_NULL(p.reason);
    CU_ASSERT_EQUAL(p.n_writes, n);
    if (n > 0)
        CU_ASSERT_EQUAL(p.writes[0], first);
    if (n > 1)
        CU_ASSERT_EQUAL(p.writes[1], second);
}

static void test_transitions(void)
{
    assert_writes(plan(0, 0, 7, NULL, ""), 0, 0, 0); /* as it is */
    assert_writes(plan(4, 4, 7, NULL, ""), 0, 0, 0);
    assert_writes(plan(2, 0, 7, NULL, ""), 1, 2, 0); /* from 0: one write */
    assert_writes(plan(7, 0, 7, NULL, ""), 1, 7, 0); /* all of them */
    assert_writes(plan(0, 4, 7, NULL, ""), 1, 0, 0); /* to 0: one write */
    assert_writes(plan(4, 2, 7, NULL, ""), 2, 0, 4); /* up: through 0 */
    assert_writes(plan(2, 4, 7, NULL, ""), 2, 0, 2); /* down: through 0 */
    /* the host's PF: lowering and disabling are allowed */
    assert_writes(plan(0, 4, 7, "HostNetwork", ""), 1, 0, 0);
    assert_writes(plan(2, 4, 7, "HostNetwork", ""), 2, 0, 2);
    /* nothing asked of a VF in use when nothing changes */
    assert_writes(plan(4, 4, 7, NULL, "0000:00:05.1 (claimed)"), 0, 0, 0);
    /* raising from 0 while nothing exists: in_use cannot matter */
    assert_writes(plan(2, 0, 7, NULL, "stale"), 1, 2, 0);
}

static void assert_refused(struct sriovobj_count_plan p, const char *reason, const char *says)
{
    CU_ASSERT_EQUAL(p.n_writes, 0);
    CU_ASSERT_STRING_EQUAL(p.reason ? p.reason : "", reason);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.message, says));
}

static void test_refusals(void)
{
    assert_refused(plan(9, 0, 7, NULL, ""), SRIOVOBJ_TOO_MANY_VFS,
                   "spec.numVFs 9 is more than the 7 virtual functions this PF supports "
                   "(status.totalVFs): write 7 or less");
    assert_refused(plan(1, 0, 0, NULL, ""), SRIOVOBJ_TOO_MANY_VFS, "write 0 or less");
    const char *used = "0000:00:05.1 (PCIDeviceClaim qnode-000000051)";
    assert_refused(plan(2, 4, 7, NULL, used), SRIOVOBJ_VFS_IN_USE,
                   "from 4 to 2: the kernel changes it only through 0, which removes every VF, "
                   "and these are in use: 0000:00:05.1 (PCIDeviceClaim qnode-000000051)");
    assert_refused(plan(0, 4, 7, NULL, used), SRIOVOBJ_VFS_IN_USE, "from 4 to 0");
    assert_refused(plan(6, 4, 7, NULL, used), SRIOVOBJ_VFS_IN_USE, "from 4 to 6"); /* up too */
    assert_refused(plan(2, 0, 7, "HostNetwork", ""), SRIOVOBJ_HOST_NEEDS_DEVICE,
                   "cannot raise the VF count from 0 to 2: the host needs this PF (HostNetwork: "
                   "enp0s5 has 10.0.2.15)");
    assert_refused(plan(4, 2, 7, "HostNetwork", ""), SRIOVOBJ_HOST_NEEDS_DEVICE, "from 2 to 4");
    /* too many wins over in use: the first thing to fix */
    assert_refused(plan(9, 4, 7, NULL, used), SRIOVOBJ_TOO_MANY_VFS, "write 7");
}

static struct sriovobj_spec spec_of(const char *json, int *r, struct err *why)
{
    static struct sriovobj_spec s;
    cJSON *o = cJSON_Parse(json);
    *r = sriovobj_spec(o, &s, why);
    cJSON_Delete(o);
    return s;
}

static void test_spec(void)
{
    struct err why = {{0}};
    int r;
    struct sriovobj_spec s = spec_of(
            "{\"metadata\":{\"generation\":3},\"spec\":{\"address\":\"0000:00:05.0\","
            "\"nodeName\":\"q\",\"numVFs\":4,\"vfs\":[{\"index\":1,\"mac\":\"52:54:00:AA:bb:01\","
            "\"vlan\":100,\"trust\":true,\"spoofCheck\":false},{\"index\":3,\"vlan\":7,\"qos\":5}]}"
            "}",
            &r, &why);
    CU_ASSERT_EQUAL(r, 0);
    CU_ASSERT_STRING_EQUAL(s.address, "0000:00:05.0");
    CU_ASSERT_EQUAL(s.num_vfs, 4);
    CU_ASSERT_EQUAL(s.generation, 3);
    CU_ASSERT_EQUAL(s.n_vfs, 2);
    CU_ASSERT_EQUAL(s.vfs[0].index, 1);
    CU_ASSERT_TRUE(s.vfs[0].has_mac);
    CU_ASSERT_EQUAL(s.vfs[0].mac[3], 0xaa);
    CU_ASSERT_EQUAL(s.vfs[0].vlan, 100);
    CU_ASSERT_EQUAL(s.vfs[0].qos, 0);
    CU_ASSERT_EQUAL(s.vfs[0].trust, 1);
    CU_ASSERT_EQUAL(s.vfs[0].spoofchk, 0);
    CU_ASSERT_FALSE(s.vfs[1].has_mac);
    CU_ASSERT_EQUAL(s.vfs[1].qos, 5);
    CU_ASSERT_EQUAL(s.vfs[1].trust, -1);
    /* harvester's spec: no vfs, numVFs may be absent */
    s = spec_of("{\"spec\":{\"address\":\"0000:00:05.0\",\"nodeName\":\"q\"}}", &r, &why);
    CU_ASSERT_EQUAL(r, 0);
    CU_ASSERT_EQUAL(s.num_vfs, 0);
    CU_ASSERT_EQUAL(s.n_vfs, 0);

    static const struct {
        const char *spec, *says;
    } bad[] = {
            {"{\"numVFs\":-1}", "spec.numVFs must be a whole number"},
            {"{\"numVFs\":1.5}", "spec.numVFs must be a whole number"},
            {"{\"numVFs\":\"2\"}", "spec.numVFs must be a whole number"},
            {"{\"numVFs\":2,\"vfs\":{}}", "spec.vfs must be a list"},
            {"{\"numVFs\":2,\"vfs\":[{\"mac\":\"52:54:00:00:00:01\"}]}",
             "spec.vfs[0] has no index"},
            {"{\"numVFs\":2,\"vfs\":[{\"index\":2}]}",
             "spec.vfs[0].index 2: the PF has only 2 VFs"},
            {"{\"numVFs\":2,\"vfs\":[{\"index\":0,\"mac\":\"01:00:5e:00:00:01\"}]}",
             "spec.vfs[0].mac is not a unicast MAC address"},
            {"{\"numVFs\":2,\"vfs\":[{\"index\":0,\"mac\":\"52-54-00-00-00-01\"}]}",
             "e.g. 52:54:00:12:34:56"},
            {"{\"numVFs\":2,\"vfs\":[{\"index\":0,\"vlan\":4096}]}",
             "vlan must be 0 (none) to 4095"},
            {"{\"numVFs\":2,\"vfs\":[{\"index\":0,\"qos\":3}]}", "with a vlan beside it"},
            {"{\"numVFs\":2,\"vfs\":[{\"index\":0,\"vlan\":1,\"qos\":8}]}", "priority 0 to 7"},
            {"{\"numVFs\":2,\"vfs\":[{\"index\":0,\"trust\":\"yes\"}]}", "true or false"},
            {"{\"numVFs\":2,\"vfs\":[{\"index\":1},{\"index\":1}]}",
             "spec.vfs[0] and spec.vfs[1] both set VF 1"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char json[512];
        (void)snprintf(json, sizeof(json), "{\"spec\":%s}", bad[i].spec);
        why = (struct err){{0}};
        (void)spec_of(json, &r, &why);
        CU_ASSERT_EQUAL(r, -EINVAL);
        if (!strstr(why.msg, bad[i].says))
            CU_FAIL_FATAL(bad[i].spec);
    }
}

static CU_TestInfo tests[] = {
        {"the VF count: every transition", test_transitions},
        {"the VF count: every refusal", test_refusals},
        {"the spec as read, and each wrong one", test_spec},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo sriovobj_suites[] = {
        {"sriovobj", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
