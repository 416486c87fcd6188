/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_pciaer.c - node/pciaer: the AER counters' totals from the kernel's files (the
 * 6.1 format of health-facts 3d), tolerant of anything else; and node/pci reading them in a scan
 * of a fake tree.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <string.h>

#include "node/pci.h"
#include "node/pciaer.h"
#include "sysfs_tree.h"

/* aer_dev_fatal as Linux 6.1 prints it, with one unnamed bit set. */
static const char fatal_61[] =
        "Undefined 0\nDLP 1\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 2\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\n"
        "MalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\n"
        "AtomicOpBlocked 0\nTLPBlockedErr 0\nPoisonTLPBlocked 0\nDMWrReqBlocked 0\nIDECheck 0\n"
        "MisIDETLP 0\nPCRC_CHECK 0\nTLPXlatBlocked 0\ndev_fatal_errs_bit[27] 1\n"
        "TOTAL_ERR_FATAL 4\n";

static int parse(const char *text, long long *v)
{
    return node_pciaer_parse(text, strlen(text), v);
}

static void test_parse_kernel_format(void)
{
    long long v = -1;
    CU_ASSERT_EQUAL(parse(fatal_61, &v), 0);
    CU_ASSERT_EQUAL(v, 4);
    CU_ASSERT_EQUAL(parse("RxErr 0\nBadTLP 0\nTOTAL_ERR_COR 18446744\n", &v), 0);
    CU_ASSERT_EQUAL(v, 18446744);
    /* the old long names of the ABI document are data too */
    CU_ASSERT_EQUAL(parse("Receiver Error 2\nBad TLP 0\nTOTAL_ERR_NONFATAL 0", &v), 0);
    CU_ASSERT_EQUAL(v, 0);
    /* the first TOTAL_ERR_ line counts */
    CU_ASSERT_EQUAL(parse("TOTAL_ERR_FATAL 7\nTOTAL_ERR_FATAL 9\n", &v), 0);
    CU_ASSERT_EQUAL(v, 7);
}

static void test_parse_malformed(void)
{
    long long v = 55;
    CU_ASSERT_EQUAL(parse("", &v), -EINVAL);
    CU_ASSERT_EQUAL(parse("DLP 1\nSDES 0\n", &v), -EINVAL); /* no total */
    CU_ASSERT_EQUAL(parse("TOTAL_ERR_FATAL\n", &v), -EINVAL);
    CU_ASSERT_EQUAL(parse("TOTAL_ERR_FATAL \n", &v), -EINVAL);
    CU_ASSERT_EQUAL(parse("TOTAL_ERR_FATAL -1\n", &v), -EINVAL);
    CU_ASSERT_EQUAL(parse("TOTAL_ERR_FATAL 1x\n", &v), -EINVAL);
    CU_ASSERT_EQUAL(parse("TOTAL_ERR_FATAL 99999999999999999999\n", &v), -ERANGE);
    CU_ASSERT_EQUAL(v, 55); /* untouched on failure */
    CU_ASSERT_EQUAL(node_pciaer_parse(NULL, 0, &v), -EINVAL);
    /* not NUL-terminated: only `len` bytes are read */
    CU_ASSERT_EQUAL(node_pciaer_parse("TOTAL_ERR_FATAL 12", 17, &v), 0);
    CU_ASSERT_EQUAL(v, 1);
    CU_ASSERT_STRING_EQUAL(node_pciaer_file(NODE_PCIAER_NONFATAL), "aer_dev_nonfatal");
    CU_ASSERT_STRING_EQUAL(node_pciaer_name(NODE_PCIAER_CORRECTABLE), "correctable");
    CU_ASSERT_STRING_EQUAL(node_pciaer_name(NODE_PCIAER_SEVERITIES), "");
}

#define AER_DEV   "0000:00:04.0"
#define AER_DIR   "devices/pci0000:00/" AER_DEV "/"
#define PLAIN_DEV "0000:00:05.0"

static const struct node_pci_dev *scan_find(struct node_pci *p, struct node_pci_scan_result *res,
                                            const char *address)
{
    if (node_pci_scan(p, res, NULL) < 0)
        return NULL;
    return node_pci_scan_find(res, address);
}

/* A scan reads the totals; a device without the files has -1; a malformed file is -1 for its
 * severity only and no problem of the device. */
static void test_scan_reads_totals(void)
{
    struct sysfs_tree t = {0};
    struct node_pci *p = NULL;
    struct node_pci_scan_result res = {0};
    if (sysfs_tree_make_text(&t, AER_DEV " 0200 8086:10d3 driver=e1000e iommu=3\n" PLAIN_DEV
                                         " 0200 8086:10d3 driver=e1000e iommu=4\n") < 0 ||
        node_pci_new(t.root, "/usr/share/misc/pci.ids", &p) < 0) {
        CU_FAIL("fake tree");
        return;
    }
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, AER_DIR "aer_dev_fatal", fatal_61, strlen(fatal_61)), 0);
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, AER_DIR "aer_dev_nonfatal", "TOTAL_ERR_NONFATAL 3\n", 21),
                    0);
    CU_ASSERT_EQUAL(
            sysfs_tree_put(&t, AER_DIR "aer_dev_correctable", "RxErr 2\nTOTAL_ERR_COR x\n", 24), 0);
    const struct node_pci_dev *d = scan_find(p, &res, AER_DEV);
    CU_ASSERT_PTR_NOT_NULL(d);
    if (d) {
        CU_ASSERT_EQUAL(d->aer.total[NODE_PCIAER_FATAL], 4);
        CU_ASSERT_EQUAL(d->aer.total[NODE_PCIAER_NONFATAL], 3);
        CU_ASSERT_EQUAL(d->aer.total[NODE_PCIAER_CORRECTABLE], -1);
        CU_ASSERT_STRING_EQUAL(d->problem, "");
    }
    d = node_pci_scan_find(&res, PLAIN_DEV);
    CU_ASSERT_PTR_NOT_NULL(d);
    for (int i = 0; d && i < NODE_PCIAER_SEVERITIES; i++)
        CU_ASSERT_EQUAL(d->aer.total[i], -1);
    node_pci_scan_result_done(&res);
    node_pci_free(p);
    sysfs_tree_remove(&t);
}

static CU_TestInfo tests[] = {
        {"parse: the kernel's format, names as data", test_parse_kernel_format},
        {"parse: malformed files are refused, never read past", test_parse_malformed},
        {"scan: totals per device, -1 without the files", test_scan_reads_totals},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo pciaer_suites[] = {
        {"pciaer", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
