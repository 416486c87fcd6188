/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_names.c - the API's formats and object names.
 * The format cases come from test/fixtures/formats.txt, which the CRD integration test also
 * feeds to the real API server: the C rules and the schemas must agree value by value.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kube/names.h"

#ifndef FIXTURES
#define FIXTURES "test/fixtures"
#endif

static bool check(const char *format, const char *value)
{
    if (strcmp(format, "pci") == 0)
        return kube_names_is_pci_address(value);
    if (strcmp(format, "node") == 0)
        return kube_names_is_dns_subdomain(value);
    if (strcmp(format, "resource") == 0)
        return kube_names_is_extended_resource_name(value);
    if (strcmp(format, "hex4") == 0)
        return kube_names_is_hex4(value);
    if (strcmp(format, "usbport") == 0)
        return kube_names_is_usb_port_path(value);
    CU_FAIL("unknown format in formats.txt");
    return false;
}

static void test_formats_fixture(void)
{
    FILE *f = fopen(FIXTURES "/formats.txt", "re");
    CU_ASSERT_PTR_NOT_NULL(f);
    if (!f)
        return;
    char line[512];
    int cases = 0;
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        line[strcspn(line, "\n")] = '\0';
        char format[16], validity[16];
        int off = 0;
        if (sscanf(line, "%15s %15s %n", format, validity, &off) != 2 || off == 0) {
            CU_FAIL("malformed line in formats.txt");
            continue;
        }
        const char *value = strcmp(line + off, "<empty>") == 0 ? "" : line + off;
        bool want = strcmp(validity, "valid") == 0;
        if (check(format, value) != want)
            fprintf(stderr, "\n  format %s: \"%s\" should be %s\n", format, value, validity);
        CU_ASSERT_EQUAL(check(format, value), want);
        cases++;
    }
    fclose(f);
    CU_ASSERT(cases >= 50);
}

static void test_long_node_name(void)
{
    char node[300];
    memset(node, 'a', 253);
    node[253] = '\0';
    CU_ASSERT_FALSE(kube_names_is_dns_subdomain(node)); /* a label is at most 63 */
    for (int i = 63; i < 253; i += 64)
        node[i] = '.';
    CU_ASSERT_TRUE(kube_names_is_dns_subdomain(node));
    node[253] = 'a';
    node[254] = '\0';
    CU_ASSERT_FALSE(kube_names_is_dns_subdomain(node));
}

static void test_pcidevice_name(void)
{
    char name[KUBE_NAME_MAX + 1];
    CU_ASSERT_EQUAL(kube_names_pcidevice("titan", "0000:00:1f.6", name, sizeof(name)), 0);
    CU_ASSERT_STRING_EQUAL(name, "titan-0000001f6");
    CU_ASSERT_EQUAL(kube_names_pcidevice("TEST-NODE", "0000:08:00.0", name, sizeof(name)), -EINVAL);
    CU_ASSERT_EQUAL(kube_names_pcidevice("test-node", "0000:08:00.0", name, sizeof(name)), 0);
    CU_ASSERT_STRING_EQUAL(name, "test-node-000008000");
    CU_ASSERT_EQUAL(kube_names_pcidevice("n.example.com", "10000:e0:06.0", name, sizeof(name)), 0);
    CU_ASSERT_STRING_EQUAL(name, "n.example.com-10000e0060");
    CU_ASSERT_EQUAL(kube_names_pcidevice("titan", "00:1f.6", name, sizeof(name)), -EINVAL);
    char small[8];
    CU_ASSERT_EQUAL(kube_names_pcidevice("titan", "0000:00:1f.6", small, sizeof(small)),
                    -ENAMETOOLONG);
}

static void test_pcidevice_name_too_long(void)
{
    char node[256], name[KUBE_NAME_MAX + 1];
    memset(node, 'a', 250);
    node[250] = '\0';
    for (int i = 63; i < 250; i += 64)
        node[i] = '.';
    CU_ASSERT_TRUE(kube_names_is_dns_subdomain(node));
    CU_ASSERT_EQUAL(kube_names_pcidevice(node, "0000:00:1f.6", name, sizeof(name)), -ENAMETOOLONG);
}

static void test_usbdevice_name(void)
{
    char name[KUBE_NAME_MAX + 1];
    CU_ASSERT_EQUAL(kube_names_usbdevice("titan", "0951", "1666", "2-1.4", name, sizeof(name)), 0);
    CU_ASSERT_STRING_EQUAL(name, "titan-0951-1666-2-1-4");
    CU_ASSERT_EQUAL(kube_names_usbdevice("titan", "0951", "1666", "2-1", name, sizeof(name)), 0);
    CU_ASSERT_STRING_EQUAL(name, "titan-0951-1666-2-1");
    CU_ASSERT_EQUAL(kube_names_usbdevice("titan", "0951", "1666", "/dev/bus/usb/002/004", name,
                                         sizeof(name)),
                    -EINVAL);
    CU_ASSERT_EQUAL(kube_names_usbdevice("titan", "951", "1666", "2-1", name, sizeof(name)),
                    -EINVAL);
}

static CU_TestInfo tests[] = {
        {"formats fixture", test_formats_fixture},
        {"long node name", test_long_node_name},
        {"pcidevice name", test_pcidevice_name},
        {"pcidevice name too long", test_pcidevice_name_too_long},
        {"usbdevice name", test_usbdevice_name},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo names_suites[] = {
        {"names", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
