/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_blockers.c - node/blockers: every reason a device cannot be passed through
 * (NoIOMMUGroup, IOMMUGroupShared, MountedFilesystem, Swap, HostNetwork) on a fake sysfs tree,
 * group members the host cannot give up, claimed members, the cap on returned blockers, and
 * errors.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/blockers.h"
#include "node/sysfs.h"
#include "sysfs_tree.h"

static const char description[] =
        "0000:00:00.0 0600 8086:2020 iommu=0\n"
        /* A GPU and its audio function on host drivers. */
        "0000:01:00.0 0300 10de:1eb8 driver=nvidia iommu=2\n"
        "0000:01:00.1 0403 10de:10f8 driver=snd_hda_intel iommu=2\n"
        /* Another one on vfio-pci already, behind a bridge in the same group. */
        "0000:02:00.0 0300 10de:1eb8 driver=vfio-pci iommu=3\n"
        "0000:02:00.1 0403 10de:10f8 driver=vfio-pci iommu=3\n"
        "0000:02:01.0 0604 8086:a110 driver=pcieport iommu=3\n"
        "0000:02:02.0 0200 8086:10d3 iommu=3\n"
        /* The chipset's functions in one group: LPC, audio, SMBus, NIC. */
        "0000:00:1f.0 0601 8086:a1c1 iommu=11\n"
        "0000:00:1f.3 0403 8086:a1f0 driver=snd_hda_intel iommu=11\n"
        "0000:00:1f.4 0c05 8086:a1a3 driver=i801_smbus iommu=11\n"
        "0000:00:1f.6 0200 8086:15b7 driver=e1000e iommu=11\n"
        /* Storage: the root disk, the swap disk. */
        "0000:03:00.0 0106 8086:2922 driver=ahci iommu=4\n"
        "0000:04:00.0 0106 8086:2922 driver=ahci iommu=5\n"
        /* NICs: with an address, idle, without an IOMMU group. */
        "0000:05:00.0 0200 8086:10d3 driver=e1000e iommu=6\n"
        "0000:06:00.0 0200 8086:10d3 iommu=7\n"
        "0000:07:00.0 0200 8086:10d3 driver=e1000e\n"
        /* A six-function card in one group. */
        "0000:08:00.0 0200 8086:1521 driver=igb iommu=8\n"
        "0000:08:00.1 0200 8086:1521 driver=igb iommu=8\n"
        "0000:08:00.2 0200 8086:1521 driver=igb iommu=8\n"
        "0000:08:00.3 0200 8086:1521 driver=igb iommu=8\n"
        "0000:08:00.4 0200 8086:1521 iommu=8\n"
        "0000:08:00.5 0200 8086:1521 driver=igb iommu=8\n"
        /* A GPU sharing its group with the NIC that carries the default route. */
        "0000:09:00.0 0300 10de:1eb8 driver=nvidia iommu=9\n"
        "0000:09:00.1 0200 8086:10d3 driver=e1000e iommu=9\n";

static struct sysfs_tree tree;
static int root = -1;

static struct node_hostuse_blk blk[] = {{8, 0, "/"}, {8, 16, "swap"}};
static struct node_hostuse_net net[] = {{"eth0", "address 192.168.1.10"},
                                        {"eth1", "address 10.0.0.2"},
                                        {"eth2", "default route"},
                                        {"eth3", "address 10.0.0.3"}};
static const struct node_hostuse use = {.blk = blk, .n_blk = 2, .net = net, .n_net = 4};

/* mkdir -p of `rel` below the tree's root. */
static int dir(const char *rel)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/%s", tree.root, rel);
    if (n < 0 || (size_t)n >= sizeof(path))
        return -1;
    for (char *p = path + strlen(tree.root) + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
            return -1;
        if (c == '\0')
            return 0;
        *p = c;
    }
}

/* Block device or interface `name` at `rel` below device `pci` ("pci0000:03/0000:03:00.0"), and
 * the link `link` to it. */
static int below(const char *pci, const char *rel, const char *link, const char *target_prefix)
{
    char d[512], l[512], target[512];
    snprintf(d, sizeof(d), "devices/%s/%s", pci, rel);
    snprintf(target, sizeof(target), "%sdevices/%s/%s", target_prefix, pci, rel);
    snprintf(l, sizeof(l), "%s", link);
    char *slash = strrchr(l, '/');
    if (slash) {
        *slash = '\0';
        if (dir(l) < 0)
            return -1;
        *slash = '/';
    }
    return dir(d) | sysfs_tree_link(&tree, link, target);
}

static int suite_init(void)
{
    if (sysfs_tree_make_text(&tree, description) < 0)
        return -1;
    int r = below("pci0000:03/0000:03:00.0", "ata1/host0/target0:0:0/0:0:0:0/block/sda",
                  "dev/block/8:0", "../../");
    r |= below("pci0000:04/0000:04:00.0", "ata2/host1/target1:0:0/1:0:0:0/block/sdb",
               "dev/block/8:16", "../../");
    r |= below("pci0000:00/0000:00:1f.6", "net/eth0", "class/net/eth0", "../../");
    r |= below("pci0000:05/0000:05:00.0", "net/eth1", "class/net/eth1", "../../");
    r |= below("pci0000:09/0000:09:00.1", "net/eth2", "class/net/eth2", "../../");
    r |= below("pci0000:07/0000:07:00.0", "net/eth3", "class/net/eth3", "../../");
    /* Not a link: sysfs is not what it should be. */
    r |= sysfs_tree_put(&tree, "dev/block/8:99", "x", 1) < 0;
    if (r != 0)
        return -1;
    return sysfs_tree_open_root(&tree, &root);
}

static int suite_clean(void)
{
    sysfs_tree_close(&tree, &root);
    return 0;
}

/* The blockers of `address` (group, driver as the tree has them) against `use`. */
static int blockers(const char *address, int group, const char *driver,
                    bool (*claimed)(const char *, void *), struct node_blocker *b, size_t max)
{
    struct err e = {""};
    int r = node_blockers_for(root, address, group, driver, &use, claimed, NULL, b, max, &e);
    if (r < 0)
        fprintf(stderr, "\nblockers of %s: %d (%s)\n", address, r, e.msg);
    return r;
}

static void expect_message(const struct node_blocker *b, const char *part)
{
    bool ok = strstr(b->message, part) != NULL;
    CU_ASSERT_TRUE(ok);
    if (!ok)
        fprintf(stderr, "\n%s: \"%s\" lacks \"%s\"\n", b->reason, b->message, part);
}

static void test_none(void)
{
    struct node_blocker b[NODE_BLOCKERS_MAX];
    CU_ASSERT_EQUAL(blockers("0000:06:00.0", 7, "", NULL, b, NODE_BLOCKERS_MAX), 0);
}

/* The platform's own devices are never passed through, alone in their group or not. */
static void test_platform_device(void)
{
    struct node_blocker b[NODE_BLOCKERS_MAX];
    CU_ASSERT_EQUAL_FATAL(blockers("0000:00:00.0", 0, "", NULL, b, NODE_BLOCKERS_MAX), 1);
    CU_ASSERT_STRING_EQUAL(b[0].reason, "PlatformDevice");
    expect_message(&b[0], "is a host bridge (the PCI root complex)");
    int n = blockers("0000:00:1f.4", 11, "i801_smbus", NULL, b, NODE_BLOCKERS_MAX);
    CU_ASSERT(n >= 1);
    CU_ASSERT_STRING_EQUAL(b[0].reason, "PlatformDevice");
    expect_message(&b[0], "an SMBus controller");
}

static void test_no_iommu_group(void)
{
    struct node_blocker b[NODE_BLOCKERS_MAX];
    struct node_hostuse none = {0};
    int n = node_blockers_for(root, "0000:07:00.0", -1, "e1000e", &none, NULL, NULL, b,
                              NODE_BLOCKERS_MAX, NULL);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_STRING_EQUAL(b[0].reason, "NoIOMMUGroup");
    expect_message(&b[0], "device 0000:07:00.0 has no IOMMU group");
    expect_message(&b[0], "intel_iommu=on or amd_iommu=on");
}

static bool claimed_audio(const char *address, void *arg)
{
    (void)arg;
    return strcmp(address, "0000:01:00.1") == 0;
}

static void test_group_shared(void)
{
    struct node_blocker b[NODE_BLOCKERS_MAX];
    CU_ASSERT_EQUAL(blockers("0000:01:00.0", 2, "nvidia", NULL, b, NODE_BLOCKERS_MAX), 1);
    CU_ASSERT_STRING_EQUAL(b[0].reason, "IOMMUGroupShared");
    CU_ASSERT_STRING_EQUAL(b[0].message,
                           "IOMMU group 2 also holds 0000:01:00.1 (snd_hda_intel), which is not on "
                           "vfio-pci; the whole group goes to one VM, so claim that device too (or "
                           "bind it to vfio-pci)");
    /* The audio function claimed too: nothing in the way. */
    CU_ASSERT_EQUAL(blockers("0000:01:00.0", 2, "nvidia", claimed_audio, b, NODE_BLOCKERS_MAX), 0);
    /* Members on vfio-pci and bridges are fine; an unbound one is not (a driver may bind it). */
    CU_ASSERT_EQUAL(blockers("0000:02:00.0", 3, "vfio-pci", NULL, b, NODE_BLOCKERS_MAX), 1);
    expect_message(&b[0], "also holds 0000:02:02.0 (no driver), which is not on vfio-pci");
    /* Six functions: four are named, the rest counted. */
    CU_ASSERT_EQUAL(blockers("0000:08:00.0", 8, "igb", NULL, b, NODE_BLOCKERS_MAX), 1);
    expect_message(&b[0], "also holds 0000:08:00.1 (igb), 0000:08:00.2 (igb), 0000:08:00.3 (igb), "
                          "0000:08:00.4 (no driver) and 1 more, which are not on vfio-pci");
    expect_message(&b[0], "claim those devices too (or bind them to vfio-pci)");
}

static void test_group_member_host_keeps(void)
{
    struct node_blocker b[NODE_BLOCKERS_MAX];
    /* The chipset's audio shares its group with the LPC bridge and the SMBus controller. */
    CU_ASSERT_EQUAL(blockers("0000:00:1f.3", 11, "snd_hda_intel", NULL, b, NODE_BLOCKERS_MAX), 1);
    CU_ASSERT_STRING_EQUAL(b[0].reason, "IOMMUGroupShared");
    expect_message(&b[0], "0000:00:1f.0 is an ISA/LPC bridge");
    expect_message(&b[0], "which the host cannot give up, so device 0000:00:1f.3 cannot be passed "
                          "through safely in this slot");
    expect_message(&b[0], "(in another slot, or behind a switch with ACS, it may get an IOMMU "
                          "group of its own)");
    CU_ASSERT_PTR_NULL(strstr(b[0].message, "claim"));
    /* The GPU shares its group with the NIC of the default route. */
    CU_ASSERT_EQUAL(blockers("0000:09:00.0", 9, "nvidia", NULL, b, NODE_BLOCKERS_MAX), 1);
    expect_message(&b[0], "0000:09:00.1 is host-critical: it holds network interface eth2, which "
                          "has default route");
    expect_message(&b[0], "cannot be passed through safely in this slot");
    /* Without host use known, the NIC is one to claim too. */
    int n = node_blockers_for(root, "0000:09:00.0", 9, "nvidia", NULL, NULL, NULL, b,
                              NODE_BLOCKERS_MAX, NULL);
    CU_ASSERT_EQUAL(n, 1);
    expect_message(&b[0], "so claim that device too");
}

static void test_host_use(void)
{
    struct node_blocker b[NODE_BLOCKERS_MAX];
    CU_ASSERT_EQUAL(blockers("0000:03:00.0", 4, "ahci", NULL, b, NODE_BLOCKERS_MAX), 1);
    CU_ASSERT_STRING_EQUAL(b[0].reason, "MountedFilesystem");
    CU_ASSERT_STRING_EQUAL(b[0].message,
                           "device 0000:03:00.0 is host-critical: it holds block device 8:0 (sda), "
                           "which backs the mount /; passing it through would take that "
                           "filesystem away from the node: move it to another device first");
    CU_ASSERT_EQUAL(blockers("0000:04:00.0", 5, "ahci", NULL, b, NODE_BLOCKERS_MAX), 1);
    CU_ASSERT_STRING_EQUAL(b[0].reason, "Swap");
    expect_message(&b[0], "it holds block device 8:16 (sdb), which backs swap");
    expect_message(&b[0], "swapoff");
    CU_ASSERT_EQUAL(blockers("0000:05:00.0", 6, "e1000e", NULL, b, NODE_BLOCKERS_MAX), 1);
    CU_ASSERT_STRING_EQUAL(b[0].reason, "HostNetwork");
    expect_message(&b[0], "it holds network interface eth1, which has address 10.0.0.2");
    /* On vfio-pci already: the host has let it go; host use is not checked. */
    CU_ASSERT_EQUAL(blockers("0000:03:00.0", 4, "vfio-pci", NULL, b, NODE_BLOCKERS_MAX), 0);
}

static void test_several_and_cap(void)
{
    struct node_blocker b[NODE_BLOCKERS_MAX];
    CU_ASSERT_EQUAL(blockers("0000:07:00.0", -1, "e1000e", NULL, b, NODE_BLOCKERS_MAX), 2);
    CU_ASSERT_STRING_EQUAL(b[0].reason, "NoIOMMUGroup");
    CU_ASSERT_STRING_EQUAL(b[1].reason, "HostNetwork");
    /* Room for one: the count still says two. */
    struct node_blocker one[2] = {{"unset", ""}, {"unset", ""}};
    CU_ASSERT_EQUAL(blockers("0000:07:00.0", -1, "e1000e", NULL, one, 1), 2);
    CU_ASSERT_STRING_EQUAL(one[0].reason, "NoIOMMUGroup");
    CU_ASSERT_STRING_EQUAL(one[1].reason, "unset");
    /* An LPC bridge in the group and an address on its interface: one blocker each. */
    CU_ASSERT_EQUAL(blockers("0000:00:1f.6", 11, "e1000e", NULL, b, NODE_BLOCKERS_MAX), 2);
    CU_ASSERT_STRING_EQUAL(b[0].reason, "IOMMUGroupShared");
    CU_ASSERT_STRING_EQUAL(b[1].reason, "HostNetwork");
}

static void test_errors(void)
{
    struct node_blocker b[1] = {{"unset", ""}};
    struct err e = {""};
    /* A group that is not in sysfs. */
    int r = node_blockers_for(root, "0000:06:00.0", 77, "", &use, NULL, NULL, b, 1, &e);
    CU_ASSERT_EQUAL(r, -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "cannot read the members of IOMMU group 77"));
    CU_ASSERT_STRING_EQUAL(b[0].reason, "unset");
    /* Host use that cannot be checked. */
    struct node_hostuse_blk odd[] = {{8, 99, "/odd"}};
    struct node_hostuse bad = {.blk = odd, .n_blk = 1};
    r = node_blockers_for(root, "0000:06:00.0", 7, "", &bad, NULL, NULL, b, 1, &e);
    CU_ASSERT_EQUAL(r, -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(
            strstr(e.msg, "cannot tell whether device 0000:06:00.0 is host-critical"));
    /* ... also for a member of the group, and the error says why */
    (void)snprintf(e.msg, sizeof(e.msg), "unset");
    r = node_blockers_for(root, "0000:01:00.0", 2, "nvidia", &bad, NULL, NULL, b, 1, &e);
    CU_ASSERT_EQUAL(r, -EINVAL);
    CU_ASSERT_STRING_EQUAL(b[0].reason, "unset");
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "cannot follow the sysfs links of 0000:01:00.1"));
    r = node_blockers_for(root, "../x", 7, "", &use, NULL, NULL, b, 1, NULL);
    CU_ASSERT_EQUAL(r, -EINVAL);
}

/* A scanned device of the GPU's group (group 2): `driver` as the scan read it. */
static struct node_pci_dev scanned(const char *address, uint16_t class_id, const char *driver)
{
    struct node_pci_dev d = {.class_id = class_id, .iommu_group = 2, .sriov_numvfs = -1};
    snprintf(d.address, sizeof(d.address), "%s", address);
    snprintf(d.driver, sizeof(d.driver), "%s", driver);
    return d;
}

/* node_blockers_for_scanned takes the members from the scan when it read them whole, and reads
 * from sysfs a member it read with a problem or skipped, which still stands in the way. */
static void test_from_scan(void)
{
    struct node_blocker b[NODE_BLOCKERS_MAX];
    struct node_pci_dev devs[2] = {scanned("0000:01:00.0", 0x0300, "nvidia"),
                                   scanned("0000:01:00.1", 0x0403, "vfio-pci")};
    struct node_pci_scan_result res = {.devs = devs, .n_devs = 2};
    /* sysfs has the audio function on snd_hda_intel; the scan saw it on vfio-pci */
    int n = node_blockers_for_scanned(root, &res, &devs[0], NULL, NULL, NULL, b, NODE_BLOCKERS_MAX,
                                      NULL);
    CU_ASSERT_EQUAL(n, 0);
    /* read with a problem: read again from sysfs */
    snprintf(devs[1].problem, sizeof(devs[1].problem), "driver: a symbolic link loop");
    n = node_blockers_for_scanned(root, &res, &devs[0], NULL, NULL, NULL, b, NODE_BLOCKERS_MAX,
                                  NULL);
    CU_ASSERT_EQUAL(n, 1);
    if (n == 1)
        expect_message(&b[0], "0000:01:00.1 (snd_hda_intel)");
    /* skipped by the scan: the same */
    res.n_devs = 1;
    n = node_blockers_for_scanned(root, &res, &devs[0], NULL, NULL, NULL, b, NODE_BLOCKERS_MAX,
                                  NULL);
    CU_ASSERT_EQUAL(n, 1);
    /* the SR-IOV VF count is the scan's */
    devs[0].sriov_numvfs = 3;
    n = node_blockers_for_scanned(root, &res, &devs[0], NULL, NULL, NULL, b, NODE_BLOCKERS_MAX,
                                  NULL);
    CU_ASSERT_EQUAL(n, 2);
    if (n == 2)
        CU_ASSERT_STRING_EQUAL(b[1].reason, "SRIOVEnabled");
}

/* Blockers from a real scan of the tree equal blockers read fresh from sysfs, for every device of
 * the groups with a host bridge (group 0), with an ISA/LPC bridge and an SMBus controller
 * (group 11) and with a PCI bridge (group 3): what the scan keeps of the members (class, driver,
 * group) must be what the checks read (a class kept in 16 bits would lose PlatformDevice). */
static void test_scan_equals_fresh(void)
{
    static const char *const addresses[] = {"0000:00:00.0", "0000:00:1f.0", "0000:00:1f.3",
                                            "0000:00:1f.4", "0000:00:1f.6", "0000:02:00.0",
                                            "0000:02:00.1", "0000:02:01.0", "0000:02:02.0"};
    struct node_pci *p = NULL;
    struct node_pci_scan_result res = {0};
    CU_ASSERT_EQUAL_FATAL(node_pci_new(tree.root, "/usr/share/misc/pci.ids", &p), 0);
    CU_ASSERT_EQUAL(node_pci_scan(p, &res, NULL), 0);
    int platform = 0;
    for (size_t i = 0; i < sizeof(addresses) / sizeof(addresses[0]); i++) {
        const struct node_pci_dev *d = node_pci_scan_find(&res, addresses[i]);
        CU_ASSERT_PTR_NOT_NULL(d);
        if (!d)
            continue;
        struct node_blocker fresh[NODE_BLOCKERS_MAX], got[NODE_BLOCKERS_MAX];
        int nf = node_blockers_for(root, d->address, d->iommu_group, d->driver, &use, NULL, NULL,
                                   fresh, NODE_BLOCKERS_MAX, NULL);
        int ns = node_blockers_for_scanned(root, &res, d, &use, NULL, NULL, got, NODE_BLOCKERS_MAX,
                                           NULL);
        CU_ASSERT_EQUAL(ns, nf);
        for (int k = 0; k < nf && k < ns && k < NODE_BLOCKERS_MAX; k++) {
            CU_ASSERT_STRING_EQUAL(got[k].reason, fresh[k].reason);
            CU_ASSERT_STRING_EQUAL(got[k].message, fresh[k].message);
            platform += strcmp(fresh[k].reason, "PlatformDevice") == 0;
            if (strcmp(got[k].message, fresh[k].message) != 0)
                fprintf(stderr, "\n%s: scan: %s\nfresh: %s\n", d->address, got[k].message,
                        fresh[k].message);
        }
    }
    CU_ASSERT(platform >= 3); /* the host bridge, the ISA bridge, the SMBus controller at least */
    node_pci_scan_result_done(&res);
    node_pci_free(p);
}

static CU_TestInfo tests[] = {
        {"nothing in the way", test_none},
        {"PlatformDevice: the platform's own devices", test_platform_device},
        {"NoIOMMUGroup", test_no_iommu_group},
        {"IOMMUGroupShared: members to claim too", test_group_shared},
        {"IOMMUGroupShared: members the host cannot give up", test_group_member_host_keeps},
        {"MountedFilesystem, Swap, HostNetwork", test_host_use},
        {"several blockers and the cap", test_several_and_cap},
        {"errors", test_errors},
        {"members taken from the scan, unless it could not read them", test_from_scan},
        {"blockers from a scan equal blockers read fresh (host, ISA, PCI bridges, SMBus)",
         test_scan_equals_fresh},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo blockers_suites[] = {
        {"blockers", suite_init, suite_clean, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
