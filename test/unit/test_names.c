/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_names.c - the Kubernetes name rules (base/names) and the API's formats and
 * object names (kube/names).
 * The format cases come from test/fixtures/formats.txt, which the CRD integration test also
 * feeds to the real API server: the C rules and the schemas must agree value by value.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/names.h"
#include "kube/names.h"

#ifndef FIXTURES
#define FIXTURES "test/fixtures"
#endif

static bool check(const char *format, const char *value)
{
    if (strcmp(format, "pci") == 0)
        return kube_names_is_pci_address(value);
    if (strcmp(format, "node") == 0)
        return names_is_dns_subdomain(value);
    if (strcmp(format, "resource") == 0)
        return names_is_extended_resource_name(value);
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
    CU_ASSERT_FALSE(names_is_dns_subdomain(node)); /* a label is at most 63 */
    for (int i = 63; i < 253; i += 64)
        node[i] = '.';
    CU_ASSERT_TRUE(names_is_dns_subdomain(node));
    node[253] = 'a';
    node[254] = '\0';
    CU_ASSERT_FALSE(names_is_dns_subdomain(node));
}

static void test_dns_label(void)
{
    char label[80];
    memset(label, 'a', 63);
    label[63] = '\0';
    CU_ASSERT_TRUE(names_is_dns_label(label));
    label[63] = 'a';
    label[64] = '\0';
    CU_ASSERT_FALSE(names_is_dns_label(label));
    CU_ASSERT_TRUE(names_is_dns_label("node-a"));
    CU_ASSERT_TRUE(names_is_dns_label("0"));
    CU_ASSERT_TRUE(names_is_dns_label("a--b"));
    static const char *const bad[] = {"", "-a", "a-", "A", "a.b", "a_b", "a b", "\xc3\xa4"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CU_ASSERT_FALSE(names_is_dns_label(bad[i]));
    CU_ASSERT_FALSE(names_is_dns_label(NULL));
    CU_ASSERT_FALSE(names_is_dns_subdomain(NULL));
}

static void test_qualified_name_part(void)
{
    char part[80];
    memset(part, 'A', 63);
    part[63] = '\0';
    CU_ASSERT_TRUE(names_is_qualified_name_part(part));
    part[63] = 'A';
    part[64] = '\0';
    CU_ASSERT_FALSE(names_is_qualified_name_part(part));
    static const char *const good[] = {"I219LM", "A.b-C_d", "0", "titan-0000001f6"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        CU_ASSERT_TRUE(names_is_qualified_name_part(good[i]));
    static const char *const bad[] = {"", "_X", "X_", ".X", "X-", "X Y", "a/b", "X\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CU_ASSERT_FALSE(names_is_qualified_name_part(bad[i]));
    CU_ASSERT_FALSE(names_is_qualified_name_part(NULL));
}

/* Edge cases beyond formats.txt (once checked twice, by node/pciname and kube/names). */
static void test_extended_resource_name(void)
{
    static const struct {
        const char *name;
        bool valid;
    } cases[] = {
            {"intel.com/I219LM", true},
            {"a.b.c/x", true},
            {"x-y.com/A.b-C_d", true},
            {"kubernetes.io.com/X", true},
            {"xkubernetes.io/X", true},
            {".com/X", false},
            {"intel..com/X", false},
            {"-intel.com/X", false},
            {"intel-.com/X", false},
            {"INTEL.com/X", false},
            {"intel.com/X_", false},
            {"intel.com/-X", false},
            {"intel.com/X Y", false},
            {"kubernetes.io/X", false},
            {"a.kubernetes.io/X", false},
            {"intel.com/", false},
            {"/X", false},
            {"", false},
            {"intel.com", false},
            {"intel.com./X", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (names_is_extended_resource_name(cases[i].name) != cases[i].valid)
            fprintf(stderr, "\n  resource \"%s\" should be %s\n", cases[i].name,
                    cases[i].valid ? "valid" : "invalid");
        CU_ASSERT_EQUAL(names_is_extended_resource_name(cases[i].name), cases[i].valid);
    }
    CU_ASSERT_FALSE(names_is_extended_resource_name(NULL));
    /* A 253-byte domain is the longest: one more byte and it is refused. */
    char name[NAMES_DNS_SUBDOMAIN_MAX + 8];
    memset(name, 'a', NAMES_DNS_SUBDOMAIN_MAX + 1);
    for (int i = 63; i < NAMES_DNS_SUBDOMAIN_MAX; i += 64)
        name[i] = '.';
    memcpy(name + NAMES_DNS_SUBDOMAIN_MAX, "/X", 3);
    CU_ASSERT_TRUE(names_is_extended_resource_name(name));
    name[NAMES_DNS_SUBDOMAIN_MAX] = 'a'; /* the last label grows to 62 bytes */
    memcpy(name + NAMES_DNS_SUBDOMAIN_MAX + 1, "/X", 3);
    CU_ASSERT_FALSE(names_is_extended_resource_name(name));
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
    CU_ASSERT_TRUE(names_is_dns_subdomain(node));
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
        {"dns label", test_dns_label},
        {"qualified name part", test_qualified_name_part},
        {"extended resource name", test_extended_resource_name},
        {"pcidevice name", test_pcidevice_name},
        {"pcidevice name too long", test_pcidevice_name_too_long},
        {"usbdevice name", test_usbdevice_name},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo names_suites[] = {
        {"names", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
