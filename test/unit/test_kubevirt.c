/* SPDX-License-Identifier: Apache-2.0 */
/* test/unit/test_kubevirt.c - which KubeVirt CR the controller manages
 * (controllers/kubevirt/kubevirt.h). */
#include <CUnit/CUnit.h>
#include <stddef.h>

#include "controllers/kubevirt/kubevirt.h"

static void test_the_only_one(void)
{
    CU_ASSERT_TRUE(kvpermit_manages(NULL, "kubevirt/kubevirt", 1));
    /* two or more, without --kubevirt: none of them, whichever is asked about */
    for (size_t n = 2; n <= 3; n++) {
        CU_ASSERT_FALSE(kvpermit_manages(NULL, "kubevirt/kubevirt", n));
        CU_ASSERT_FALSE(kvpermit_manages(NULL, "harvester-system/kubevirt", n));
    }
    CU_ASSERT_FALSE(kvpermit_manages(NULL, "kubevirt/kubevirt", 0));
}

static void test_the_named_one(void)
{
    const char *named = "harvester-system/kubevirt";
    for (size_t n = 1; n <= 2; n++) {
        CU_ASSERT_TRUE(kvpermit_manages(named, "harvester-system/kubevirt", n));
        CU_ASSERT_FALSE(kvpermit_manages(named, "kubevirt/kubevirt", n)); /* even the only one */
        CU_ASSERT_FALSE(kvpermit_manages(named, "harvester-system/kubevirt-2", n));
        CU_ASSERT_FALSE(kvpermit_manages(named, "harvester-system/kube", n));
    }
}

static CU_TestInfo tests[] = {
        {"the only one; two or more: none", test_the_only_one},
        {"the one --kubevirt names, exactly", test_the_named_one},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo kubevirt_suites[] = {
        {"kubevirt", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
