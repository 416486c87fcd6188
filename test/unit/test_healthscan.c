/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_healthscan.c - the scan's health decisions (controllers/devices/healthscan.h):
 * an AER fatal total that grows past the baseline, the baselines taken anew, a Removed device
 * back with its ids.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "controllers/devices/healthscan.h"

static struct pcidevice_spec dev(const char *vendor, const char *device, long long fatal)
{
    struct pcidevice_spec s = {.address = "0000:00:04.0", .aer = {fatal, 0, 0}};
    (void)snprintf(s.vendor_id, sizeof(s.vendor_id), "%s", vendor);
    (void)snprintf(s.device_id, sizeof(s.device_id), "%s", device);
    return s;
}

static struct healthscan_seen never(void)
{
    return (struct healthscan_seen){.fatal = -1};
}

static void test_fatal_grows(void)
{
    struct healthscan_seen seen = never();
    struct pcidevice_spec s = dev("8086", "10d3", 2);
    long long before = 0;
    /* first sight: the baseline (errors from before the agent are not a report) */
    CU_ASSERT_EQUAL(healthscan_present(&seen, false, &s, false, &before), 0);
    CU_ASSERT_EQUAL(seen.fatal, 2);
    CU_ASSERT_EQUAL(healthscan_present(&seen, true, &s, false, &before), 0);
    s.aer[1] = s.aer[2] = 500; /* nonfatal and correctable never report */
    CU_ASSERT_EQUAL(healthscan_present(&seen, true, &s, false, &before), 0);
    s.aer[0] = 3;
    CU_ASSERT_EQUAL(healthscan_present(&seen, true, &s, false, &before), HEALTHSCAN_AER_FATAL);
    CU_ASSERT_EQUAL(before, 2);
    /* reported once: the baseline moves, only a new error reports again */
    CU_ASSERT_EQUAL(healthscan_present(&seen, true, &s, false, &before), 0);
    s.aer[0] = 5;
    CU_ASSERT_EQUAL(healthscan_present(&seen, true, &s, false, &before), HEALTHSCAN_AER_FATAL);
    CU_ASSERT_EQUAL(before, 3);
}

static void test_new_baselines(void)
{
    struct healthscan_seen seen = never();
    struct pcidevice_spec s = dev("8086", "10d3", -1);
    long long before = 0;
    /* no counters, then counters: a baseline, not a report */
    CU_ASSERT_EQUAL(healthscan_present(&seen, false, &s, false, &before), 0);
    s.aer[0] = 4;
    CU_ASSERT_EQUAL(healthscan_present(&seen, true, &s, false, &before), 0);
    /* counters that went down (new in the kernel) */
    s.aer[0] = 1;
    CU_ASSERT_EQUAL(healthscan_present(&seen, true, &s, false, &before), 0);
    CU_ASSERT_EQUAL(seen.fatal, 1);
    /* another device at the address */
    struct pcidevice_spec other = dev("10de", "2204", 9);
    CU_ASSERT_EQUAL(healthscan_present(&seen, true, &other, false, &before), 0);
    CU_ASSERT_EQUAL(seen.fatal, 9);
    /* back after being gone: its counters started again */
    seen.gone = true;
    other.aer[0] = 12;
    CU_ASSERT_EQUAL(healthscan_present(&seen, true, &other, false, &before), 0);
    CU_ASSERT_FALSE(seen.gone);
    other.aer[0] = 13;
    CU_ASSERT_EQUAL(healthscan_present(&seen, true, &other, false, &before), HEALTHSCAN_AER_FATAL);
}

static void test_removed_back(void)
{
    struct healthscan_seen seen = never();
    struct pcidevice_spec s = dev("8086", "10d3", 0);
    long long before = 0;
    CU_ASSERT_EQUAL(healthscan_present(&seen, false, &s, false, &before), 0);
    /* gone (the part notes the ids it had), then back with them while the store says Removed */
    seen.gone = true;
    memcpy(seen.removed_vendor, "8086", 5);
    memcpy(seen.removed_device, "10d3", 5);
    CU_ASSERT_EQUAL(healthscan_present(&seen, true, &s, true, &before), HEALTHSCAN_BACK);
    CU_ASSERT_STRING_EQUAL(seen.removed_vendor, "");
    /* back with other ids: stays Removed, the removal's ids kept */
    seen.gone = true;
    memcpy(seen.removed_vendor, "8086", 5);
    memcpy(seen.removed_device, "10d3", 5);
    struct pcidevice_spec other = dev("8086", "1572", 0);
    CU_ASSERT_EQUAL(healthscan_present(&seen, true, &other, true, &before), 0);
    CU_ASSERT_STRING_EQUAL(seen.removed_device, "10d3");
    /* ... until it is not Removed any more (the administrator's recheck) */
    CU_ASSERT_EQUAL(healthscan_present(&seen, true, &other, false, &before), 0);
    CU_ASSERT_STRING_EQUAL(seen.removed_vendor, "");
    /* Removed with no ids known (never seen): not back */
    struct healthscan_seen fresh = never();
    CU_ASSERT_EQUAL(healthscan_present(&fresh, false, &s, true, &before), 0);
}

static CU_TestInfo tests[] = {
        {"an AER fatal total that grows reports once per growth", test_fatal_grows},
        {"baselines taken anew: first counters, reset, other ids, back", test_new_baselines},
        {"a Removed device back with its ids, not with others", test_removed_back},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo healthscan_suites[] = {
        {"healthscan", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
