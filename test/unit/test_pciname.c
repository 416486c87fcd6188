/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_pciname.c - resource names and descriptions of PCI devices (node/pciname).
 *
 * The expected names are harvester's (a Go transcription of pcidevice.go gave the same for
 * every case here except the documented fallbacks). Every computed name is checked by the one
 * validator, base/names (its own cases are in test_names.c). The last test runs every
 * vendor/device pair of the system's pci.ids.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/names.h"
#include "node/pciname.h"

#ifndef FIXTURES
#define FIXTURES "test/fixtures"
#endif

struct name_case {
    const char *vendor;
    const char *device;
    unsigned vendor_id, device_id;
    const char *want;
};

static void check_cases(const struct name_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct name_case *c = &cases[i];
        struct node_pciname_ids ids = {.vendor_id = (uint16_t)c->vendor_id,
                                       .device_id = (uint16_t)c->device_id,
                                       .vendor_name = c->vendor,
                                       .device_name = c->device};
        char name[NODE_PCINAME_RESOURCE_MAX] = "";
        CU_ASSERT_EQUAL(node_pciname_resource(&ids, name, sizeof(name)), 0);
        if (strcmp(name, c->want) != 0)
            fprintf(stderr, "\n  \"%s\" \"%s\": got %s, want %s\n", c->vendor ? c->vendor : "",
                    c->device ? c->device : "", name, c->want);
        CU_ASSERT_STRING_EQUAL(name, c->want);
        CU_ASSERT_TRUE(names_is_extended_resource_name(name));
    }
}

/* Every example of the reference (harvester-pcidevices.md §1.10). */
static void test_reference_examples(void)
{
    static const struct name_case cases[] = {
            {"Intel Corporation", "Ethernet Connection (11) I219-LM", 0x8086, 0x0d4c,
             "intel.com/ETHERNET_CONNECTION_11_I219LM"},
            {"NVIDIA Corporation", "GA100 [A100 SXM4 40GB]", 0x10de, 0x20b0,
             "nvidia.com/GA100_A100_SXM4_40GB"},
            /* harvester#10108: no trailing '_' from the space before ']' */
            {"NVIDIA Corporation", "GA104 [RTX A4500 Embedded GPU ]", 0x10de, 0x24fa,
             "nvidia.com/GA104_RTX_A4500_EMBEDDED_GPU"},
            {"Mellanox Technologies", "MT2892 Family [ConnectX-6 Dx Flash Recovery]", 0x15b3,
             0x0212, "mellanox.com/MT2892_FAMILY_CONNECTX6_DX_FLASH_RECOVERY"},
            {"Advanced Micro Devices, Inc. [AMD/ATI]", "Navi 21 [Radeon RX 6800/6800 XT / 6900 XT]",
             0x1002, 0x73bf, "amd.com/NAVI_21_RADEON_RX_6800_6800_XT___6900_XT"},
            {"Test Vendor", "!!!", 0x1234, 0x5678, "test.com/5678"},
            {"Intel Corporation", NULL, 0x8086, 0x8d26, "intel.com/8d26"},
            {"Intel Corporation", "", 0x8086, 0x8d26, "intel.com/8d26"},
            /* socket guard: 48 + 12 + 56 > 108, so VIRTUAL_FUNCTION -> VF */
            {"Broadcom Inc. and subsidiaries",
             "NetXtreme II BCM57810 10 Gigabit Ethernet Virtual Function", 0x14e4, 0x16af,
             "broadcom.com/NETXTREME_II_BCM57810_10_GIGABIT_ETHERNET_VF"},
            /* still too long with VF: the device id */
            {"Broadcom Inc. and subsidiaries",
             "NetXtreme II BCM57810 10 Gigabit Ethernet Converged Network Adapter Virtual Function",
             0x14e4, 0x16af, "broadcom.com/16af"},
    };
    check_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

/* Tricky entries of /usr/share/misc/pci.ids (2023.04.10). */
static void test_pci_ids_examples(void)
{
    static const struct name_case cases[] = {
            {"Advanced Micro Devices, Inc. [AMD]", "Starship/Matisse Root Complex", 0x1022, 0x1480,
             "amd.com/STARSHIP_MATISSE_ROOT_COMPLEX"},
            /* slashes and a long bracket: over the socket limit, no VIRTUAL_FUNCTION */
            {"Advanced Micro Devices, Inc. [AMD/ATI]",
             "Navi 22 [Radeon RX 6700/6700 XT/6750 XT / 6800M/6850M XT]", 0x1002, 0x73df,
             "amd.com/73df"},
            {"Advanced Micro Devices, Inc. [AMD/ATI]", "RV280/M9+ [Mobility Radeon 9200 AGP]",
             0x1002, 0x5c61, "amd.com/RV280_M9_MOBILITY_RADEON_9200_AGP"},
            {"Advanced Micro Devices, Inc. [AMD/ATI]", "SB300 AC'97 Audio Controller", 0x1002,
             0x4361, "amd.com/SB300_AC97_AUDIO_CONTROLLER"},
            {"Advanced Micro Devices, Inc. [AMD/ATI]", "SB200 OHCI USB Controller #1", 0x1002,
             0x4347, "amd.com/SB200_OHCI_USB_CONTROLLER_1"},
            /* non-ASCII (a subsystem name of 1002:6798) */
            {"Advanced Micro Devices, Inc. [AMD/ATI]", "HD 7970 IceQ X\u00b2", 0x1002, 0x6798,
             "amd.com/HD_7970_ICEQ_X"},
            /* " - " leaves two underscores */
            {"Compaq Computer Corporation", "Remote Insight II board - Lights-Out", 0x0e11, 0x005a,
             "compaq.com/REMOTE_INSIGHT_II_BOARD__LIGHTSOUT"},
            {"Fn-Link Technology Limited", "6252CPUB 802.11ax PCIe Wireless Network Adapter",
             0x0018, 0x6252, "fnlink.com/6252CPUB_802_11AX_PCIE_WIRELESS_NETWORK_ADAPTER"},
            {"AT&T GIS (NCR)", "BYNET BIC2M/BIC4M/BYA4M", 0x101a, 0x0007,
             "att.com/BYNET_BIC2M_BIC4M_BYA4M"},
            {"Hilscher Gesellschaft f\u00fcr Systemautomation mbH", "CIFX PCI/PCIe", 0x15cf, 0x0000,
             "hilscher.com/CIFX_PCI_PCIE"},
            /* comma dropped, trailing dot trimmed */
            {"ULi Electronics Inc.", "ULi 1689,1573 integrated ethernet.", 0x10b9, 0x5263,
             "uli.com/ULI_16891573_INTEGRATED_ETHERNET"},
            {"Embedded Intelligence, Inc.",
             "PCIe-CAN-02 Dual CAN bus (9-pin male). PCI Express x1.", 0x1cc5, 0x0100,
             "embedded.com/PCIECAN02_DUAL_CAN_BUS_9PIN_MALE__PCI_EXPRESS_X1"},
            /* 117-byte name */
            {"Dini Group",
             "Virtex5 PCIe ASIC Emulator Large BARs [DN9000K10PCIe8T/DN9002K10PCIe8T/"
             "DN9200K10PCIe8T/DN7006K10PCIe8T/DN7406K10PCIe8T]",
             0x17df, 0x1901, "dini.com/1901"},
            /* VIRTUAL_FUNCTION inside brackets: VF is not short enough */
            {"Mellanox Technologies",
             "MT27500/MT27520 Family [ConnectX-3/ConnectX-3 Pro Virtual Function]", 0x15b3, 0x1004,
             "mellanox.com/1004"},
            {"Mellanox Technologies", "MT27710 [ConnectX-4 Lx Programmable Virtual Function] EN",
             0x15b3, 0x0263, "mellanox.com/MT27710_CONNECTX4_LX_PROGRAMMABLE_VF_EN"},
            {"Utimaco IS GmbH",
             "u.trust Anchor Hardware Security Module cs7.3 Series Virtual Function", 0x168a,
             0xc072, "utimaco.com/c072"},
            {"Solarflare Communications",
             "XtremeScale SFC9250 10/25/40/50/100G Ethernet Controller (Virtual Function)", 0x1924,
             0x1b03, "solarflare.com/1b03"},
            {"Cavium, Inc.", "Octeon Tx2 Loopback Interface Virtual Function (LBKVF)", 0x177d,
             0xa0f8, "cavium.com/OCTEON_TX2_LOOPBACK_INTERFACE_VF_LBKVF"},
            {"Broadcom / LSI", "SAS3416 Fusion-MPT Tri-Mode I/O Controller Chip (IOC)", 0x1000,
             0x00ac, "broadcom.com/00ac"},
            {"3Dfx Interactive, Inc.", "Voodoo 2", 0x121a, 0x0002, "3dfx.com/VOODOO_2"},
            {"Hewlett-Packard Company", "J2585A DeskDirect 10/100VG NIC", 0x103c, 0x1030,
             "hewlettpackard.com/J2585A_DESKDIRECT_10_100VG_NIC"},
            {"Google, Inc.", "Compute Engine Virtual Ethernet [gVNIC]", 0x1ae0, 0x0042,
             "google.com/COMPUTE_ENGINE_VIRTUAL_ETHERNET_GVNIC"},
            {"Allied Telesis, Inc (Wrong ID)", "AT-2500TX V3 Ethernet", 0x0010, 0x8139,
             "allied.com/AT2500TX_V3_ETHERNET"},
            {"Intel Corporation", "Ethernet Controller E810-C for QSFP", 0x8086, 0x1592,
             "intel.com/ETHERNET_CONTROLLER_E810C_FOR_QSFP"},
    };
    check_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

/* Go's TrimSpace/ToUpper/\s semantics, and the fallbacks where harvester's output is invalid. */
static void test_edge_cases(void)
{
    static const struct name_case cases[] = {
            /* harvester gives "test.com/_FOO", not a valid name: the device id instead */
            {"Test Vendor", "- Foo", 0x1234, 0x5678, "test.com/5678"},
            /* TrimSpace trims Unicode white space (NBSP, EM SPACE) */
            {"Test Vendor", "\u00a0 Foo Bar\u2003", 0x1234, 0x5678, "test.com/FOO_BAR"},
            /* ToUpper: dotless i and long s become ASCII */
            {"Test Vendor", "W\u0131f\u0131 \u017fuper", 0x1234, 0x5678, "test.com/WIFI_SUPER"},
            /* RE2's \s has no \v: it is dropped, \f becomes '_' */
            {"Test Vendor", "A\vB\fC", 0x1234, 0x5678, "test.com/AB_C"},
            /* a dropped character splits a white-space run */
            {"Test Vendor", "A \u00e9 B", 0x1234, 0x5678, "test.com/A__B"},
            {"Test Vendor", "foo.-_", 0x1234, 0x5678, "test.com/FOO"},
            {"Test Vendor", "   ", 0x1234, 0x5678, "test.com/5678"},
            /* ghw names an unknown vendor "unknown" */
            {NULL, NULL, 0xabcd, 0x0001, "unknown.com/0001"},
            {"", "Some Device", 0xabcd, 0x0001, "unknown.com/SOME_DEVICE"},
            /* invalid UTF-8 is dropped */
            {"Test Vendor", "X\xff\xfeY", 0x1234, 0x5678, "test.com/XY"},
    };
    check_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_vendor_domains(void)
{
    static const char *const cases[][2] = {
            {"Intel Corporation", "intel.com"},
            {"NVIDIA Corporation", "nvidia.com"},
            {"Advanced Micro Devices, Inc. [AMD/ATI]", "amd.com"},
            {"Advanced Micro Devices, Inc. [AMD]", "amd.com"},
            {"Mellanox Technologies", "mellanox.com"},
            {"Test Vendor", "test.com"},
            {"LG Electronics [Lucky Goldstar Co. Ltd]", "luckygoldstarcoltd.com"},
            {"T1042 [Freescale]", "freescale.com"},
            {"?Young Micro Systems", "young.com"},
            {"Silicon Integrated Systems [SiS]", "sis.com"},
            {"Broadcom / LSI", "broadcom.com"},
            /* the leftmost "[x...]": an empty "[]" does not match */
            {"Foo [] [Bar/Baz] Inc", "bar.com"},
            {"Foo [A [B] C]", "ab.com"},
            /* no "[...]" match (harvester's regexp match is nil and it panics): first word */
            {"Foo[ Bar", "foo.com"},
            {"Foo [/ATI]", "unknown.com"},
            {"!!!", "unknown.com"},
            {" Leading space", "unknown.com"},
            {"", "unknown.com"},
            {"Abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcd Inc", "unknown.com"},
            {"Abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabc Inc",
             "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabc.com"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char domain[NODE_PCINAME_RESOURCE_MAX] = "";
        CU_ASSERT_EQUAL(node_pciname_vendor_domain(cases[i][0], domain, sizeof(domain)), 0);
        if (strcmp(domain, cases[i][1]) != 0)
            fprintf(stderr, "\n  vendor \"%s\": got %s\n", cases[i][0], domain);
        CU_ASSERT_STRING_EQUAL(domain, cases[i][1]);
        CU_ASSERT_TRUE(names_is_dns_subdomain(domain));
    }
    char domain[NODE_PCINAME_RESOURCE_MAX] = "";
    CU_ASSERT_EQUAL(node_pciname_vendor_domain(NULL, domain, sizeof(domain)), 0);
    CU_ASSERT_STRING_EQUAL(domain, "unknown.com");
    char small[9] = "x";
    CU_ASSERT_EQUAL(node_pciname_vendor_domain("Intel Corporation", small, sizeof(small)),
                    -ENAMETOOLONG);
    CU_ASSERT_STRING_EQUAL(small, "x");
    CU_ASSERT_EQUAL(node_pciname_vendor_domain("Intel Corporation", NULL, 0), -EINVAL);
}

static void test_resource_errors(void)
{
    struct node_pciname_ids ids = {.vendor_id = 0x8086,
                                   .device_id = 0x0d4c,
                                   .vendor_name = "Intel Corporation",
                                   .device_name = "Ethernet Connection (11) I219-LM"};
    char name[NODE_PCINAME_RESOURCE_MAX] = "x";
    CU_ASSERT_EQUAL(node_pciname_resource(NULL, name, sizeof(name)), -EINVAL);
    CU_ASSERT_EQUAL(node_pciname_resource(&ids, NULL, 0), -EINVAL);
    char fits[sizeof("intel.com/ETHERNET_CONNECTION_11_I219LM")];
    CU_ASSERT_EQUAL(node_pciname_resource(&ids, fits, sizeof(fits)), 0);
    CU_ASSERT_STRING_EQUAL(fits, "intel.com/ETHERNET_CONNECTION_11_I219LM");
    char small[sizeof(fits) - 1] = "x";
    CU_ASSERT_EQUAL(node_pciname_resource(&ids, small, sizeof(small)), -ENAMETOOLONG);
    CU_ASSERT_STRING_EQUAL(small, "x");

    static char longest[NODE_PCINAME_NAME_MAX + 2];
    memset(longest, 'a', NODE_PCINAME_NAME_MAX);
    longest[NODE_PCINAME_NAME_MAX] = '\0';
    ids.device_name = longest;
    CU_ASSERT_EQUAL(node_pciname_resource(&ids, name, sizeof(name)), 0);
    CU_ASSERT_STRING_EQUAL(name, "intel.com/0d4c");
    longest[NODE_PCINAME_NAME_MAX] = 'a';
    longest[NODE_PCINAME_NAME_MAX + 1] = '\0';
    CU_ASSERT_EQUAL(node_pciname_resource(&ids, name, sizeof(name)), -EINVAL);
    CU_ASSERT_STRING_EQUAL(name, "intel.com/0d4c");
}

static void test_unpooled(void)
{
    char name[NODE_PCINAME_RESOURCE_MAX] = "";
    CU_ASSERT_EQUAL(node_pciname_resource_unpooled("Intel Corporation", "titan-0000001f6", name,
                                                   sizeof(name)),
                    0);
    CU_ASSERT_STRING_EQUAL(name, "intel.com/titan-0000001f6");
    CU_ASSERT_TRUE(names_is_extended_resource_name(name));
    CU_ASSERT_EQUAL(node_pciname_resource_unpooled("Advanced Micro Devices, Inc. [AMD/ATI]",
                                                   "n1.example.com-000003000", name, sizeof(name)),
                    0);
    CU_ASSERT_STRING_EQUAL(name, "amd.com/n1.example.com-000003000");
    CU_ASSERT_TRUE(names_is_extended_resource_name(name));
    CU_ASSERT_EQUAL(node_pciname_resource_unpooled(NULL, "titan-0000001f6", name, sizeof(name)), 0);
    CU_ASSERT_STRING_EQUAL(name, "unknown.com/titan-0000001f6");

    /* 64 bytes: not a valid name part; never a silent fallback to the pooled name */
    const char *too_long = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-0000001f6";
    CU_ASSERT_EQUAL(strlen(too_long), 64);
    name[0] = 'x';
    name[1] = '\0';
    CU_ASSERT_EQUAL(
            node_pciname_resource_unpooled("Intel Corporation", too_long, name, sizeof(name)),
            -EINVAL);
    CU_ASSERT_STRING_EQUAL(name, "x");
    CU_ASSERT_EQUAL(
            node_pciname_resource_unpooled("Intel Corporation", "Titan_", name, sizeof(name)),
            -EINVAL);
    CU_ASSERT_EQUAL(node_pciname_resource_unpooled("Intel Corporation", NULL, name, sizeof(name)),
                    -EINVAL);
    /* intel.com (9) + 51 = 60 fits the socket path; mellanox.com (12) + 51 does not */
    const char *fifty_one = "node-with-a-rather-long-name-0123456789ab-0000001f6";
    CU_ASSERT_EQUAL(strlen(fifty_one), 51);
    CU_ASSERT_EQUAL(
            node_pciname_resource_unpooled("Intel Corporation", fifty_one, name, sizeof(name)), 0);
    CU_ASSERT_TRUE(names_is_extended_resource_name(name));
    CU_ASSERT_EQUAL(
            node_pciname_resource_unpooled("Mellanox Technologies", fifty_one, name, sizeof(name)),
            -ENAMETOOLONG);
    char small[16];
    CU_ASSERT_EQUAL(node_pciname_resource_unpooled("Intel Corporation", "titan-0000001f6", small,
                                                   sizeof(small)),
                    -ENAMETOOLONG);
}

static void test_description(void)
{
    struct node_pciname_ids ids = {.vendor_id = 0x8086,
                                   .device_id = 0x0d4c,
                                   .class_id = 0x0200,
                                   .vendor_name = "Intel Corporation",
                                   .device_name = "Ethernet Connection (11) I219-LM",
                                   .class_name = "Network controller",
                                   .subclass_name = "Ethernet controller"};
    char d[256] = "";
    CU_ASSERT_EQUAL(node_pciname_description(&ids, d, sizeof(d)), 0);
    CU_ASSERT_STRING_EQUAL(d, "Ethernet controller: Intel Corporation Ethernet Connection (11) "
                              "I219-LM");
    ids.subclass_name = "";
    CU_ASSERT_EQUAL(node_pciname_description(&ids, d, sizeof(d)), 0);
    CU_ASSERT_STRING_EQUAL(d, "Network controller: Intel Corporation Ethernet Connection (11) "
                              "I219-LM");
    struct node_pciname_ids unknown = {
            .vendor_id = 0xabcd, .device_id = 0x1f2e, .class_id = 0xff00};
    CU_ASSERT_EQUAL(node_pciname_description(&unknown, d, sizeof(d)), 0);
    CU_ASSERT_STRING_EQUAL(d, "Class ff00: Vendor abcd Device 1f2e");
    ids.class_name = NULL;
    ids.device_name = NULL;
    CU_ASSERT_EQUAL(node_pciname_description(&ids, d, sizeof(d)), 0);
    CU_ASSERT_STRING_EQUAL(d, "Class 0200: Intel Corporation Device 0d4c");

    char fits[sizeof("Class 0200: Intel Corporation Device 0d4c")] = "";
    CU_ASSERT_EQUAL(node_pciname_description(&ids, fits, sizeof(fits)), 0);
    char small[sizeof(fits) - 1] = "x";
    CU_ASSERT_EQUAL(node_pciname_description(&ids, small, sizeof(small)), -ENAMETOOLONG);
    CU_ASSERT_STRING_EQUAL(small, "x");
    CU_ASSERT_EQUAL(node_pciname_description(NULL, d, sizeof(d)), -EINVAL);
    CU_ASSERT_EQUAL(node_pciname_description(&ids, NULL, 0), -EINVAL);
}

static bool is_hex4(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* Checks one vendor/device pair of pci.ids; returns false when something is wrong. */
static bool check_pair(unsigned vid, const char *vendor, unsigned did, const char *device)
{
    struct node_pciname_ids ids = {.vendor_id = (uint16_t)vid,
                                   .device_id = (uint16_t)did,
                                   .class_id = 0x0200,
                                   .vendor_name = vendor,
                                   .device_name = device};
    char name[NODE_PCINAME_RESOURCE_MAX], desc[2200], want[2200];
    if (node_pciname_resource(&ids, name, sizeof(name)) != 0 ||
        !names_is_extended_resource_name(name)) {
        fprintf(stderr, "\n  %04x:%04x \"%s\" \"%s\": bad name\n", vid, did, vendor, device);
        return false;
    }
    snprintf(want, sizeof(want), "Class 0200: %s %s", vendor, device);
    if (node_pciname_description(&ids, desc, sizeof(desc)) != 0 || desc[0] == '\0' ||
        strcmp(desc, want) != 0) {
        fprintf(stderr, "\n  %04x:%04x: bad description\n", vid, did);
        return false;
    }
    return true;
}

static FILE *open_pci_ids(void)
{
    static const char *const paths[] = {"/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        FILE *f = fopen(paths[i], "re");
        if (f)
            return f;
    }
    return NULL;
}

/* Every vendor/device pair of the system's pci.ids gives a valid name and a description. */
static void test_all_pci_ids(void)
{
    FILE *f = open_pci_ids();
    CU_ASSERT_PTR_NOT_NULL(f);
    if (!f)
        return;
    char line[1024], vendor[1024] = "";
    unsigned vid = 0, pairs = 0, bad = 0;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (is_hex4(line) && strncmp(line + 4, "  ", 2) == 0) {
            snprintf(vendor, sizeof(vendor), "%s", line + 6);
            vid = (unsigned)strtoul(line, NULL, 16);
        } else if (line[0] == '\t' && is_hex4(line + 1) && strncmp(line + 5, "  ", 2) == 0) {
            if (!check_pair(vid, vendor, (unsigned)strtoul(line + 1, NULL, 16), line + 7))
                bad++;
            pairs++;
        }
    }
    fclose(f);
    printf("(%u pci.ids pairs) ", pairs);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(pairs > 10000);
}

static CU_TestInfo tests[] = {
        {"reference examples", test_reference_examples},
        {"pci.ids examples", test_pci_ids_examples},
        {"edge cases", test_edge_cases},
        {"vendor domains", test_vendor_domains},
        {"resource errors", test_resource_errors},
        {"unpooled", test_unpooled},
        {"description", test_description},
        {"all of pci.ids", test_all_pci_ids},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo pciname_suites[] = {
        {"pciname", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
