/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_hostuse.c - node/hostuse: collecting what the host uses from a fake /proc (and
 * the real getifaddrs), and checking devices against it on a fake sysfs tree laid out as the
 * kernel does: disks and partitions under their controller, device-mapper and NVMe multipath
 * devices under devices/virtual with slaves/ and multipath/ links, NICs (and virtio-net, whose
 * interfaces sit under virtioN/) with upper_* links to bonds and bridges.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "node/hostuse.h"
#include "node/sysfs.h"
#include "sysfs_tree.h"

static struct sysfs_tree tree;
static int root = -1;

#define SATA  "devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda"
#define SATA2 "devices/pci0000:00/0000:00:06.0/ata2/host1/target1:0:0/1:0:0:0/block/sdb"
#define NVME  "devices/pci0000:01/0000:01:00.0/nvme/nvme0/nvme0n1"
#define HEAD  "devices/virtual/nvme-subsystem/nvme-subsys0/nvme1n1"
#define VNET  "devices/virtual/net"

static const char description[] = "0000:00:1f.2 0106 8086:2922 driver=ahci iommu=1\n"
                                  "0000:00:06.0 0106 8086:2922 driver=ahci iommu=2\n"
                                  "0000:01:00.0 0108 144d:a808 driver=nvme iommu=3\n"
                                  "0000:02:00.0 0108 144d:a808 driver=nvme iommu=4\n"
                                  "0000:00:03.0 0200 8086:100e driver=e1000 iommu=5\n"
                                  "0000:00:04.0 0200 8086:100e driver=e1000 iommu=6\n"
                                  "0000:00:05.0 0200 8086:100e driver=e1000 iommu=7\n"
                                  "0000:00:02.0 0200 1af4:1000 driver=virtio-pci iommu=8\n"
                                  "0000:00:08.0 0200 1af4:1000 driver=virtio-pci iommu=9\n"
                                  "0000:00:09.0 0200 8086:100e driver=e1000 iommu=10\n";

/* mkdir -p of `rel` below `base`. */
static int mkdirs(const char *base, const char *rel)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/%s", base, rel);
    if (n < 0 || (size_t)n >= sizeof(path))
        return -1;
    for (char *p = path + strlen(base) + 1;; p++) {
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

/* A directory (with its parents) in the tree. */
static int dir(const char *rel)
{
    return mkdirs(tree.root, rel);
}

/* A link at `rel` (its directory made first) to `target`. */
static int lnk(const char *rel, const char *target)
{
    char path[PATH_MAX], parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", rel);
    char *slash = strrchr(parent, '/');
    if (slash) {
        *slash = '\0';
        if (dir(parent) < 0)
            return -1;
    }
    snprintf(path, sizeof(path), "%s/%s", tree.root, rel);
    return symlink(target, path);
}

static int make_disks(void)
{
    int r = 0;
    r |= dir(SATA "/sda1") | dir(SATA "/sda2") | dir(SATA2) | dir(NVME "/nvme0n1p1");
    r |= lnk("dev/block/8:0", "../../" SATA) | lnk("dev/block/8:1", "../../" SATA "/sda1");
    r |= lnk("dev/block/8:2", "../../" SATA "/sda2") | lnk("dev/block/8:16", "../../" SATA2);
    r |= lnk("dev/block/259:0", "../../" NVME);
    r |= lnk("dev/block/259:1", "../../" NVME "/nvme0n1p1");
    /* LVM on sda2 (dm-0), and a LUKS device on that (dm-1). */
    r |= lnk("devices/virtual/block/dm-0/slaves/sda2",
             "../../../../pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda/sda2");
    r |= lnk("devices/virtual/block/dm-1/slaves/dm-0", "../../dm-0");
    r |= lnk("dev/block/253:0", "../../devices/virtual/block/dm-0");
    r |= lnk("dev/block/253:1", "../../devices/virtual/block/dm-1");
    /* Native NVMe multipath: the namespace is virtual, its paths sit under the controllers. */
    r |= dir("devices/pci0000:02/0000:02:00.0/nvme/nvme1/nvme1c1n1");
    r |= lnk(HEAD "/multipath/nvme1c1n1",
             "../../../../../pci0000:02/0000:02:00.0/nvme/nvme1/nvme1c1n1");
    r |= lnk("dev/block/259:5", "../../" HEAD);
    /* Not a link: sysfs cannot be read as expected. */
    r |= sysfs_tree_put(&tree, "dev/block/8:99", "x", 1) < 0;
    return r;
}

/* Interface `ifname` of the device at `dev` (below devices/), and its class/net link. */
static int nic(const char *dev, const char *ifname)
{
    char rel[256], target[256];
    snprintf(rel, sizeof(rel), "devices/%s/net/%s", dev, ifname);
    snprintf(target, sizeof(target), "../../devices/%s/net/%s", dev, ifname);
    int r = dir(rel);
    snprintf(rel, sizeof(rel), "class/net/%s", ifname);
    return r | lnk(rel, target);
}

/* A link from interface directory `ifdir` (below devices/) to a virtual interface. */
static int upper(const char *ifdir, const char *name, const char *target)
{
    char rel[256];
    snprintf(rel, sizeof(rel), "devices/%s/upper_%s", ifdir, name);
    return lnk(rel, target);
}

static int make_nics(void)
{
    int r = nic("pci0000:00/0000:00:03.0", "eth0") | nic("pci0000:00/0000:00:04.0", "eth1");
    r |= nic("pci0000:00/0000:00:05.0", "eth2") | nic("pci0000:00/0000:00:02.0/virtio0", "eth4");
    r |= nic("pci0000:00/0000:00:08.0/virtio1", "eth5") | nic("pci0000:00/0000:00:09.0", "eth6");
    r |= nic("virtual", "bond0") | nic("virtual", "br0") | nic("virtual", "lpa");
    r |= nic("virtual", "lpb");
    /* eth2 is a slave of bond0, a port of br0; so is virtio's eth5. */
    r |= upper("pci0000:00/0000:00:05.0/net/eth2", "bond0", "../../../../virtual/net/bond0");
    r |= lnk(VNET "/bond0/lower_eth2", "../../../pci0000:00/0000:00:05.0/net/eth2");
    r |= upper("virtual/net/bond0", "br0", "../br0") | lnk(VNET "/br0/lower_bond0", "../bond0");
    r |= upper("pci0000:00/0000:00:08.0/virtio1/net/eth5", "br0", "../../../../../virtual/net/br0");
    /* A loop of uppers the kernel would refuse. */
    r |= upper("pci0000:00/0000:00:09.0/net/eth6", "lpa", "../../../../virtual/net/lpa");
    r |= upper("virtual/net/lpa", "lpb", "../lpb") | upper("virtual/net/lpb", "lpa", "../lpa");
    return r;
}

static int suite_init(void)
{
    if (sysfs_tree_make_text(&tree, description) < 0)
        return -1;
    if (make_disks() != 0 || make_nics() != 0)
        return -1;
    return sysfs_tree_open_root(&tree, &root);
}

static int suite_clean(void)
{
    sysfs_tree_close(&tree, &root);
    return 0;
}

/* node_hostuse_check() of `address` against `use`, expecting `want` and, when given, `reason`
 * and (for a finding) `kind`. */
static void expect_kind(const char *address, const struct node_hostuse *use, int want,
                        const char *reason, enum node_hostuse_kind kind)
{
    struct err e = {"unset"};
    enum node_hostuse_kind got = (enum node_hostuse_kind)99;
    int r = node_hostuse_check(root, address, use, &got, &e);
    CU_ASSERT_EQUAL(r, want);
    if (r != want)
        fprintf(stderr, "\n%s: got %d (%s), want %d\n", address, r, e.msg, want);
    if (reason) {
        CU_ASSERT_STRING_EQUAL(e.msg, reason);
        if (strcmp(e.msg, reason) != 0)
            fprintf(stderr, "\n%s: reason \"%s\"\n", address, e.msg);
    } else if (want == 0) {
        CU_ASSERT_STRING_EQUAL(e.msg, "unset"); /* written only for a finding or a failure */
    }
    if (want >= 0)
        CU_ASSERT_EQUAL(got, want > 0 ? kind : NODE_HOSTUSE_NONE);
}

/* What a reason says it holds. */
static enum node_hostuse_kind kind_of(const char *reason)
{
    if (!reason)
        return NODE_HOSTUSE_NONE;
    if (strstr(reason, "network interface"))
        return NODE_HOSTUSE_NETWORK;
    return strstr(reason, "backs swap") ? NODE_HOSTUSE_SWAP : NODE_HOSTUSE_MOUNT;
}

static void expect(const char *address, const struct node_hostuse *use, int want,
                   const char *reason)
{
    expect_kind(address, use, want, reason, kind_of(reason));
}

#define BLK(a)                                                                                     \
    {                                                                                              \
        .blk = (a), .n_blk = sizeof(a) / sizeof((a)[0])                                            \
    }
#define NET(a)                                                                                     \
    {                                                                                              \
        .net = (a), .n_net = sizeof(a) / sizeof((a)[0])                                            \
    }

static void test_root_disk(void)
{
    struct node_hostuse_blk blk[] = {{8, 1, "/"}};
    struct node_hostuse use = BLK(blk);
    expect("0000:00:1f.2", &use, 1, "it holds block device 8:1 (sda1), which backs the mount /");
    expect("0000:00:06.0", &use, 0, NULL);
    expect("0000:01:00.0", &use, 0, NULL);
    expect("0000:00:03.0", &use, 0, NULL);
    /* A shorter name that is only part of a path component does not match. */
    expect("0000:00:1f", &use, 0, NULL);
    expect("1f.2", &use, 0, NULL);
}

static void test_device_mapper(void)
{
    struct node_hostuse_blk lvm[] = {{253, 0, "/var"}};
    struct node_hostuse use = BLK(lvm);
    expect("0000:00:1f.2", &use, 1,
           "it holds block device sda2, below 253:0 (dm-0), which backs the mount /var");
    expect("0000:00:06.0", &use, 0, NULL);
    /* Two levels: dm-1 on dm-0 on sda2. */
    struct node_hostuse_blk luks[] = {{253, 1, "/home"}};
    struct node_hostuse use2 = BLK(luks);
    expect("0000:00:1f.2", &use2, 1,
           "it holds block device sda2, below 253:1 (dm-1), which backs the mount /home");
    expect("0000:01:00.0", &use2, 0, NULL);
}

static void test_nvme_multipath(void)
{
    struct node_hostuse_blk blk[] = {{259, 5, "/"}};
    struct node_hostuse use = BLK(blk);
    expect("0000:02:00.0", &use, 1,
           "it holds block device nvme1c1n1, below 259:5 (nvme1n1), which backs the mount /");
    expect("0000:01:00.0", &use, 0, NULL);
}

static void test_swap(void)
{
    struct node_hostuse_blk blk[] = {{8, 16, "swap"}};
    struct node_hostuse use = BLK(blk);
    expect("0000:00:06.0", &use, 1, "it holds block device 8:16 (sdb), which backs swap");
    expect("0000:00:1f.2", &use, 0, NULL);
}

static void test_unmounted_nvme(void)
{
    /* 7:0 (a loop device) has no dev/block link here: absent links mean "no". */
    struct node_hostuse_blk blk[] = {
            {8, 1, "/"}, {8, 16, "swap"}, {253, 1, "/home"}, {7, 0, "/snap/core"}, {259, 5, "/"}};
    struct node_hostuse_net net[] = {{"eth0", "address 10.0.2.15"}, {"br0", "default route"}};
    struct node_hostuse use = {.blk = blk, .n_blk = 5, .net = net, .n_net = 2};
    expect("0000:01:00.0", &use, 0, NULL);
    expect("0000:00:04.0", &use, 0, NULL);
    expect("0000:00:02.0", &use, 0, NULL);
    /* Not a device at all. */
    expect("0000:ff:00.0", &use, 0, NULL);
}

static void test_nic(void)
{
    struct node_hostuse_net net[] = {{"eth0", "address 10.0.2.15"}};
    struct node_hostuse use = NET(net);
    expect("0000:00:03.0", &use, 1, "it holds network interface eth0, which has address 10.0.2.15");
    expect("0000:00:04.0", &use, 0, NULL);
    expect("0000:00:05.0", &use, 0, NULL);
    /* An interface that is gone since. */
    struct node_hostuse_net gone[] = {{"eth9", "address 10.0.2.16"}, {"bad/name", "x"}};
    struct node_hostuse use2 = NET(gone);
    expect("0000:00:03.0", &use2, 0, NULL);
}

static void test_bond_lower(void)
{
    struct node_hostuse_net bond[] = {{"bond0", "address 10.0.0.5"}};
    struct node_hostuse use = NET(bond);
    expect("0000:00:05.0", &use, 1,
           "it holds network interface eth2, a lower device of bond0, which has address 10.0.0.5");
    expect("0000:00:03.0", &use, 0, NULL);
    expect("0000:00:08.0", &use, 0, NULL);
    /* Two levels up: eth2 -> bond0 -> br0; virtio's eth5 -> br0. */
    struct node_hostuse_net bridge[] = {{"br0", "default route"}};
    struct node_hostuse use2 = NET(bridge);
    expect("0000:00:05.0", &use2, 1,
           "it holds network interface eth2, a lower device of br0, which has default route");
    expect("0000:00:08.0", &use2, 1,
           "it holds network interface eth5, a lower device of br0, which has default route");
    /* A loop of upper links ends. */
    expect("0000:00:09.0", &use2, 0, NULL);
}

static void test_virtio_net(void)
{
    struct node_hostuse_net net[] = {{"eth4", "default route"}};
    struct node_hostuse use = NET(net);
    expect("0000:00:02.0", &use, 1, "it holds network interface eth4, which has default route");
    expect("0000:00:08.0", &use, 0, NULL);
}

static void test_no_use_and_bad_input(void)
{
    struct err e = {"unset"};
    enum node_hostuse_kind kind = NODE_HOSTUSE_MOUNT;
    struct node_hostuse empty = {0};
    CU_ASSERT_EQUAL(node_hostuse_check(root, "0000:00:1f.2", NULL, &kind, &e), 0);
    CU_ASSERT_EQUAL(kind, NODE_HOSTUSE_NONE);
    CU_ASSERT_STRING_EQUAL(e.msg, "unset");
    CU_ASSERT_EQUAL(node_hostuse_check(root, "0000:00:1f.2", &empty, &kind, &e), 0);
    CU_ASSERT_EQUAL(node_hostuse_check(root, "0000:00:1f.2", &empty, NULL, NULL), 0);
    static const char *const bad[] = {"", "..", ".", "0000:00/1f.2", "../0000:00:1f.2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        kind = NODE_HOSTUSE_MOUNT;
        CU_ASSERT_EQUAL(node_hostuse_check(root, bad[i], &empty, &kind, &e), -EINVAL);
        CU_ASSERT_EQUAL(kind, NODE_HOSTUSE_MOUNT); /* not written on failure */
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "is not a PCI address"));
    }
    CU_ASSERT_EQUAL(node_hostuse_check(root, NULL, &empty, NULL, &e), -EINVAL);
    /* No error detail wanted. */
    struct node_hostuse_blk blk[] = {{8, 1, "/"}};
    struct node_hostuse use = BLK(blk);
    CU_ASSERT_EQUAL(node_hostuse_check(root, "0000:00:1f.2", &use, NULL, NULL), 1);
    /* dev/block/8:99 is a file: sysfs is not what it should be. */
    struct node_hostuse_blk odd[] = {{8, 99, "/odd"}};
    struct node_hostuse use2 = BLK(odd);
    CU_ASSERT_EQUAL(node_hostuse_check(root, "0000:00:1f.2", &use2, &kind, &e), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "cannot follow the sysfs links of 0000:00:1f.2"));
    CU_ASSERT_EQUAL(node_hostuse_check(-1, "0000:00:1f.2", &use, NULL, &e), -EBADF);
}

/* Which kind a finding has: a mount, swap or an interface. */
static void test_kinds(void)
{
    struct node_hostuse_blk blk[] = {{8, 16, "swap"}, {8, 1, "/var/lib"}};
    struct node_hostuse_net net[] = {{"eth0", "address 10.0.2.15"}};
    struct node_hostuse use = {.blk = blk, .n_blk = 2, .net = net, .n_net = 1};
    expect_kind("0000:00:06.0", &use, 1, NULL, NODE_HOSTUSE_SWAP);
    expect_kind("0000:00:1f.2", &use, 1, NULL, NODE_HOSTUSE_MOUNT);
    expect_kind("0000:00:03.0", &use, 1, NULL, NODE_HOSTUSE_NETWORK);
    expect_kind("0000:01:00.0", &use, 0, NULL, NODE_HOSTUSE_NONE);
    /* Through device-mapper and a bond: the kind of what is on top. */
    struct node_hostuse_blk lvm[] = {{253, 0, "swap"}};
    struct node_hostuse_net bond[] = {{"bond0", "default route"}};
    struct node_hostuse use2 = {.blk = lvm, .n_blk = 1, .net = bond, .n_net = 1};
    expect_kind("0000:00:1f.2", &use2, 1, NULL, NODE_HOSTUSE_SWAP);
    expect_kind("0000:00:05.0", &use2, 1, NULL, NODE_HOSTUSE_NETWORK);
}

/* ---- collecting from a fake /proc ---------------------------------------------------------- */

/* A temporary directory playing /proc, removed by sysfs_tree_remove(). */
static int fake_proc(struct sysfs_tree *p)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(p->dir, sizeof(p->dir), "%s/hostdevd-proc-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(p->dir)) {
        p->dir[0] = '\0';
        return -1;
    }
    snprintf(p->root, sizeof(p->root), "%s", p->dir);
    return 0;
}

/* `path` with the escapes /proc writes for spaces, tabs, newlines and backslashes. */
static void escape(char *out, size_t size, const char *path)
{
    size_t n = 0;
    for (const char *p = path; *p && n + 5 < size; p++) {
        if (strchr(" \t\n\\", *p))
            n += (size_t)snprintf(out + n, size - n, "\\%03o", (unsigned char)*p);
        else
            out[n++] = *p;
    }
    out[n] = '\0';
}

static const char mountinfo[] =
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "23 22 0:21 / /proc rw,nosuid - proc proc rw\n"
        "24 22 0:22 / /run rw shared:2 - tmpfs tmpfs rw,mode=755\n"
        "30 22 8:1 /var/lib/kubelet /var/lib/kubelet rw shared:5 - ext4 /dev/sda1 rw\n"
        "31 22 8:2 / /data/my\\040disk rw - xfs /dev/sda2 rw\n"
        "32 22 253:0 / /var/lib/longhorn rw master:3 - ext4 /dev/mapper/vg-lh rw\n"
        "33 32 253:0 /sub /srv rw - ext4 /dev/mapper/vg-lh rw\n"
        "34 22 259:1 /x /mnt/a\\134b\\9c rw - ext4 /dev/nvme0n1p1 rw\n"
        "garbage\n"
        "\n"
        "1 2 8:x / /bad1 rw - ext4 /dev/x rw\n"
        "1 2 8 / /bad2 rw - ext4 /dev/x rw\n"
        "1 2 8:3 / /bad3 rw\n"
        "1 2 8:4 / bad4 rw - ext4 /dev/x rw\n"
        "1 2 99999999999:1 / /bad5 rw - ext4 /dev/x rw\n"
        "1 2 8:5 / /bad6 rw shared:1 ext4 /dev/x rw\n"
        "1 2 :6 / /bad7 rw - ext4 /dev/x rw\n"
        "1 2 8:7 / /bad8 rw - ext4\n"
        "1 2 8:8 / /a b c d e f g h i j k l m n o p q r s t u v w x y z 1 2 3 4 5 6 - ext4 x r\n"
        "50 22 0:45 / /btr rw - btrfs /dev/nonexistent-hostdevd rw\n"
        "51 22 0:46 / /nul rw - ext4 /dev/null rw\n";

/* Some block device in /dev (a loop device, a disk), for a mount of a 0:N filesystem such as a
 * btrfs subvolume: "" when there is none. */
static void find_block_device(char *path, size_t size, dev_t *ret)
{
    static const char *const names[] = {"loop0", "vda", "sda", "nvme0n1", "xvda", "loop7"};
    struct stat st;
    path[0] = '\0';
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, size, "/dev/%s", names[i]);
        if (stat(path, &st) == 0 && S_ISBLK(st.st_mode)) {
            *ret = st.st_rdev;
            return;
        }
    }
    path[0] = '\0';
}

static int write_mountinfo(const struct sysfs_tree *p, const char *name, const char *subvol_dev)
{
    /* A line too long to read, one with a NUL byte, and a last line without a newline. */
    static const char nul_line[] = "61 22 9:2 / /nul rw - ext4 /dev/x rw\0 x\n";
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", p->root, name);
    FILE *f = fopen(path, "we");
    if (!f)
        return -errno;
    fputs(mountinfo, f);
    if (subvol_dev[0])
        fprintf(f, "52 22 0:47 /@home /btrfs-subvol rw - btrfs %s rw\n", subvol_dev);
    fputs("70 22 9:9 / /long rw - ext4 /dev/x rw ", f);
    for (int i = 0; i < 40000; i++)
        fputc('x', f);
    fputc('\n', f);
    fwrite(nul_line, 1, sizeof(nul_line) - 1, f);
    fputs("60 22 9:1 / /last rw - ext4 /dev/md1 rw", f);
    return fclose(f) == 0 ? 0 : -errno;
}

static const char route[] =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "hdtest0\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0   \n"
        "hdtest1\t0002A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n"
        "hdtest2\t00000000\t0102A8C0\t0003\t0\t0\t100\t00FFFFFF\t0\t0\t0\n"
        "lo\t00000000\t00000000\t0001\t0\t0\t0\t00000000\t0\t0\t0\n"
        "badline\n"
        "averyveryverylongifname0\t00000000\t0\t0\t0\t0\t0\t00000000\t0\t0\t0\n"
        "../x\t00000000\t0\t0\t0\t0\t0\t00000000\t0\t0\t0\n";

static const char route6[] =
        "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
        "fe800000000000000000000000000001 00000400 00000001 00000000 00000003 hdtest6\n"
        "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 "
        "00000000000000000000000000000000 00000100 00000001 00000000 00000001 hdtest7\n"
        "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
        "00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo\n"
        "0000 00 short\n"
        "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
        "fe800000000000000000000000000001 00000400 00000001 00000000 00000003 hdtest0\n";

static const struct node_hostuse_blk *find_blk(const struct node_hostuse *u, unsigned major,
                                               unsigned minor)
{
    for (size_t i = 0; i < u->n_blk; i++)
        if (u->blk[i].major == major && u->blk[i].minor == minor)
            return &u->blk[i];
    return NULL;
}

static const struct node_hostuse_net *find_net(const struct node_hostuse *u, const char *name)
{
    for (size_t i = 0; i < u->n_net; i++)
        if (strcmp(u->net[i].ifname, name) == 0)
            return &u->net[i];
    return NULL;
}

static void expect_blk(const struct node_hostuse *u, unsigned major, unsigned minor,
                       const char *what)
{
    const struct node_hostuse_blk *b = find_blk(u, major, minor);
    if (!what) {
        CU_ASSERT_PTR_NULL(b);
        return;
    }
    CU_ASSERT_PTR_NOT_NULL(b);
    CU_ASSERT_STRING_EQUAL(b ? b->what : "", what);
}

/* The btrfs-like mount (0:N) counts through its source, a block device. */
static void check_subvol(const struct node_hostuse *u, const char *path, dev_t dev)
{
    if (!path[0])
        return; /* no block device in /dev to try it with */
    const struct node_hostuse_blk *b = find_blk(u, major(dev), minor(dev));
    CU_ASSERT_PTR_NOT_NULL(b);
    bool clash = major(dev) == 8 || major(dev) == 9 || major(dev) == 253 || major(dev) == 259;
    if (b && !clash) {
        CU_ASSERT_STRING_EQUAL(b->what, "/btrfs-subvol");
    }
}

static size_t count_mounts(const struct node_hostuse *u)
{
    size_t n = 0;
    for (size_t i = 0; i < u->n_blk; i++)
        n += u->blk[i].what[0] == '/';
    return n;
}

static void check_fake_blk(const struct node_hostuse *u, const char *swapfile, bool subvol)
{
    expect_blk(u, 8, 1, "/");
    expect_blk(u, 8, 2, "/data/my disk");
    expect_blk(u, 253, 0, "/srv");
    expect_blk(u, 259, 1, "/mnt/a\\b\\9c");
    expect_blk(u, 9, 1, "/last");
    static const unsigned absent[][2] = {{8, 3}, {8, 4}, {8, 5}, {8, 6}, {8, 7},
                                         {8, 8}, {9, 2}, {9, 9}, {0, 1}, {1, 3}};
    for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
        expect_blk(u, absent[i][0], absent[i][1], NULL);
    for (size_t i = 0; i < u->n_blk; i++)
        CU_ASSERT_NOT_EQUAL(u->blk[i].major, 0);
    /* The swap file counts through the device of its filesystem (none on tmpfs/overlay). */
    struct stat st;
    CU_ASSERT_EQUAL(stat(swapfile, &st), 0);
    size_t swaps = 0;
    for (size_t i = 0; i < u->n_blk; i++)
        swaps += strcmp(u->blk[i].what, "swap") == 0;
    size_t mounts = count_mounts(u);
    CU_ASSERT_TRUE(mounts == 5 || (subvol && mounts == 6));
    CU_ASSERT_TRUE(swaps <= 1);
    if (major(st.st_dev) == 0) {
        CU_ASSERT_EQUAL(swaps, 0);
    } else {
        CU_ASSERT_PTR_NOT_NULL(find_blk(u, major(st.st_dev), minor(st.st_dev)));
    }
    CU_ASSERT_EQUAL(u->n_blk, mounts + swaps);
}

static void check_fake_net(const struct node_hostuse *u)
{
    const struct node_hostuse_net *n = find_net(u, "hdtest0");
    CU_ASSERT_PTR_NOT_NULL(n);
    CU_ASSERT_STRING_EQUAL(n ? n->what : "", "default route");
    n = find_net(u, "hdtest6");
    CU_ASSERT_PTR_NOT_NULL(n);
    CU_ASSERT_STRING_EQUAL(n ? n->what : "", "default route");
    CU_ASSERT_PTR_NULL(find_net(u, "hdtest1"));
    CU_ASSERT_PTR_NULL(find_net(u, "hdtest2"));
    CU_ASSERT_PTR_NULL(find_net(u, "hdtest7"));
    CU_ASSERT_PTR_NULL(find_net(u, "lo"));
    CU_ASSERT_PTR_NULL(find_net(u, "../x"));
    size_t fakes = 0;
    for (size_t i = 0; i < u->n_net; i++) {
        fakes += strncmp(u->net[i].ifname, "hdtest", 6) == 0;
        CU_ASSERT_PTR_NULL(strstr(u->net[i].what, "address fe80:"));
        CU_ASSERT_PTR_NULL(strstr(u->net[i].what, "address 127."));
        CU_ASSERT_PTR_NULL(strchr(u->net[i].ifname, ':'));
    }
    CU_ASSERT_EQUAL(fakes, 2); /* hdtest0 once, although it has two default routes */
}

static void test_collect_fake_proc(void)
{
    struct sysfs_tree p = {.dir = ""};
    char swapfile[400], escaped[1700], swaps[2048], link[400];
    CU_ASSERT_EQUAL(fake_proc(&p), 0);
    CU_ASSERT_EQUAL(mkdirs(p.dir, "1") | mkdirs(p.dir, "net"), 0);
    snprintf(link, sizeof(link), "%s/1/root", p.dir);
    CU_ASSERT_EQUAL(symlink("/", link), 0);
    snprintf(swapfile, sizeof(swapfile), "%s/swap file", p.dir);
    CU_ASSERT_EQUAL(sysfs_tree_put(&p, "swap file", "", 0), 0);
    escape(escaped, sizeof(escaped), swapfile);
    snprintf(swaps, sizeof(swaps),
             "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
             "%s                          file\t1048572\t\t0\t\t-2\n"
             "/nonexistent/hostdevd-swap\tpartition\t1\t0\t-3\n"
             "short line\n",
             escaped);
    char subvol[64];
    dev_t subvol_dev = 0;
    find_block_device(subvol, sizeof(subvol), &subvol_dev);
    CU_ASSERT_EQUAL(write_mountinfo(&p, "1/mountinfo", subvol), 0);
    CU_ASSERT_EQUAL(sysfs_tree_put(&p, "swaps", swaps, strlen(swaps)), 0);
    CU_ASSERT_EQUAL(sysfs_tree_put(&p, "net/route", route, strlen(route)), 0);
    CU_ASSERT_EQUAL(sysfs_tree_put(&p, "net/ipv6_route", route6, strlen(route6)), 0);

    struct node_hostuse u = {0};
    CU_ASSERT_EQUAL(node_hostuse_collect(p.dir, &u), 0);
    check_fake_blk(&u, swapfile, subvol[0] != '\0');
    check_subvol(&u, subvol, subvol_dev);
    check_fake_net(&u);
    node_hostuse_done(&u);
    CU_ASSERT_PTR_NULL(u.blk);
    CU_ASSERT_EQUAL(u.n_net, 0);
    node_hostuse_done(&u);
    node_hostuse_done(NULL);
    sysfs_tree_remove(&p);
}

/* <proc>/1/mountinfo unreadable: <proc>/self/mountinfo; no swaps or route files: none. */
static void test_collect_fallback(void)
{
    struct sysfs_tree p = {.dir = ""};
    static const char one[] = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n";
    struct node_hostuse u = {0}, sentinel = {.n_blk = 77};
    CU_ASSERT_EQUAL(fake_proc(&p), 0);
    u = sentinel;
    CU_ASSERT_EQUAL(node_hostuse_collect(p.dir, &u), -ENOENT);
    CU_ASSERT_EQUAL(u.n_blk, 77);
    CU_ASSERT_EQUAL(mkdirs(p.dir, "self"), 0);
    CU_ASSERT_EQUAL(sysfs_tree_put(&p, "self/mountinfo", one, strlen(one)), 0);
    CU_ASSERT_EQUAL(node_hostuse_collect(p.dir, &u), 0);
    CU_ASSERT_EQUAL(u.n_blk, 1);
    expect_blk(&u, 8, 1, "/");
    CU_ASSERT_PTR_NULL(find_net(&u, "lo"));
    node_hostuse_done(&u);
    sysfs_tree_remove(&p);
}

/* More block devices than the cap: an error, not a list cut short. */
static void test_collect_cap(void)
{
    struct sysfs_tree p = {.dir = ""};
    size_t n = 5000, size = n * 64, len = 0;
    char *buf = malloc(size);
    CU_ASSERT_PTR_NOT_NULL(buf);
    CU_ASSERT_EQUAL(fake_proc(&p), 0);
    if (!buf)
        return;
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, size - len, "%zu 1 8:%zu / /m%zu rw - ext4 x rw\n", i, i,
                                i);
    CU_ASSERT_EQUAL(mkdirs(p.dir, "1"), 0);
    CU_ASSERT_EQUAL(sysfs_tree_put(&p, "1/mountinfo", buf, len), 0);
    struct node_hostuse u = {.n_net = 5};
    CU_ASSERT_EQUAL(node_hostuse_collect(p.dir, &u), -E2BIG);
    CU_ASSERT_EQUAL(u.n_net, 5);
    free(buf);
    sysfs_tree_remove(&p);
}

/* The running system: it works, and loopback is never listed. */
static void test_collect_real(void)
{
    struct node_hostuse u = {0};
    CU_ASSERT_EQUAL(node_hostuse_collect(NULL, &u), 0);
    for (size_t i = 0; i < u.n_net; i++) {
        CU_ASSERT_STRING_NOT_EQUAL(u.net[i].ifname, "lo");
        CU_ASSERT_PTR_NULL(strstr(u.net[i].what, "address 127."));
        CU_ASSERT_STRING_NOT_EQUAL(u.net[i].what, "address ::1");
    }
    for (size_t i = 0; i < u.n_blk; i++)
        CU_ASSERT_NOT_EQUAL(u.blk[i].major, 0);
    node_hostuse_done(&u);
}

/* A fake /proc with one root mount, `swaps`, `route` and `route6` (NULL: no such file). */
static void proc_files(struct sysfs_tree *p, const char *swaps, const char *route4,
                       const char *route6_text)
{
    static const char one[] = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n";
    CU_ASSERT_EQUAL(sysfs_tree_put(p, "1/mountinfo", one, strlen(one)), 0);
    (void)sysfs_tree_unlink(p, "swaps");
    (void)sysfs_tree_unlink(p, "net/route");
    (void)sysfs_tree_unlink(p, "net/ipv6_route");
    if (swaps)
        CU_ASSERT_EQUAL(sysfs_tree_put(p, "swaps", swaps, strlen(swaps)), 0);
    if (route4)
        CU_ASSERT_EQUAL(sysfs_tree_put(p, "net/route", route4, strlen(route4)), 0);
    if (route6_text)
        CU_ASSERT_EQUAL(sysfs_tree_put(p, "net/ipv6_route", route6_text, strlen(route6_text)), 0);
}

/* Collects from the fake /proc `p` and checks `address` on the suite's tree. */
static void collect_expect(const struct sysfs_tree *p, const char *address, int want,
                           const char *reason)
{
    struct node_hostuse u = {0};
    CU_ASSERT_EQUAL(node_hostuse_collect(p->dir, &u), 0);
    expect(address, &u, want, reason);
    node_hostuse_done(&u);
}

static const char route4_eth1[] =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "eth1\t0002A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n"
        "eth1\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n";
static const char route4_local[] =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "eth1\t0002A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n";
/* IPv6 on eth1, but only its on-link prefix and the kernel's reject route: no default. */
static const char route6_local[] =
        "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 "
        "00000000000000000000000000000000 00000100 00000001 00000000 00000001 eth1\n"
        "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
        "00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo\n";

/* A node whose default route exists only in IPv4 (an IPv6 table without one, or none at all):
 * the NIC carrying it is host-critical; without that route it is not. */
static void test_collect_ipv4_default_route(void)
{
    struct sysfs_tree p = {.dir = ""};
    static const char *const why = "it holds network interface eth1, which has default route";
    CU_ASSERT_EQUAL(fake_proc(&p), 0);
    CU_ASSERT_EQUAL(mkdirs(p.dir, "1") | mkdirs(p.dir, "net"), 0);
    proc_files(&p, NULL, route4_eth1, route6_local);
    collect_expect(&p, "0000:00:04.0", 1, why);
    proc_files(&p, NULL, route4_eth1, NULL); /* IPv6 off: no ipv6_route at all */
    collect_expect(&p, "0000:00:04.0", 1, why);
    proc_files(&p, NULL, route4_local, route6_local);
    collect_expect(&p, "0000:00:04.0", 0, NULL);
    sysfs_tree_remove(&p);
}

/* A block device node for swap: /dev/hdswap (8:16, the tree's sdb under 0000:00:06.0) in the
 * fake /proc's 1/root when mknod is allowed, else a block device of this machine whose
 * dev/block link is made in the tree (and put back afterwards). The /proc/swaps path, or "". */
static void swap_device(const struct sysfs_tree *p, char *path, size_t size, char *link,
                        char *saved, size_t saved_size)
{
    char node[PATH_MAX];
    dev_t dev = 0;
    link[0] = saved[0] = '\0';
    snprintf(node, sizeof(node), "%s/1/root/dev/hdswap", p->dir);
    if (mkdirs(p->dir, "1/root/dev") == 0 && mknod(node, S_IFBLK | 0600, makedev(8, 16)) == 0) {
        snprintf(path, size, "/dev/hdswap");
        return;
    }
    find_block_device(path, size, &dev);
    if (!path[0])
        return;
    char full[PATH_MAX];
    snprintf(link, 64, "dev/block/%u:%u", major(dev), minor(dev));
    snprintf(full, sizeof(full), "%s/%s", tree.root, link);
    ssize_t n = readlink(full, saved, saved_size - 1);
    saved[n > 0 ? n : 0] = '\0';
    CU_ASSERT_EQUAL(sysfs_tree_link(&tree, link, "../../" SATA2), 0);
}

/* A swap area on a block device (a partition, not a file): the disk under it is host-critical,
 * and says it backs swap. */
static void test_collect_swap_partition(void)
{
    struct sysfs_tree p = {.dir = ""};
    char path[PATH_MAX], link[64], saved[PATH_MAX], swaps[PATH_MAX + 128];
    CU_ASSERT_EQUAL(fake_proc(&p), 0);
    CU_ASSERT_EQUAL(mkdirs(p.dir, "1") | mkdirs(p.dir, "net"), 0);
    swap_device(&p, path, sizeof(path), link, saved, sizeof(saved));
    CU_ASSERT_FATAL(path[0] != '\0'); /* neither mknod nor a block device in /dev */
    snprintf(swaps, sizeof(swaps),
             "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
             "%s                               partition\t8388604\t\t0\t\t-2\n",
             path);
    proc_files(&p, swaps, NULL, NULL);
    struct node_hostuse u = {0};
    CU_ASSERT_EQUAL(node_hostuse_collect(p.dir, &u), 0);
    expect_kind("0000:00:06.0", &u, 1, NULL, NODE_HOSTUSE_SWAP);
    size_t swap_entries = 0;
    for (size_t i = 0; i < u.n_blk; i++)
        swap_entries += strcmp(u.blk[i].what, "swap") == 0;
    CU_ASSERT_EQUAL(swap_entries, 1);
    expect_kind("0000:01:00.0", &u, 0, NULL, NODE_HOSTUSE_NONE);
    node_hostuse_done(&u);
    proc_files(&p, NULL, NULL, NULL); /* no swap: not critical */
    collect_expect(&p, "0000:00:06.0", 0, NULL);
    int r = 0;
    if (link[0])
        r = saved[0] ? sysfs_tree_link(&tree, link, saved) : sysfs_tree_unlink(&tree, link);
    CU_ASSERT_EQUAL(r, 0);
    sysfs_tree_remove(&p);
}

/* What cannot be read of /proc counts for nothing, and is not made up: a swap area whose path
 * is gone; a mount point with "\\000" keeps it (the kernel never writes a NUL). */
static void test_collect_gone_and_nul(void)
{
    struct sysfs_tree p = {.dir = ""};
    static const char swaps[] = "Filename\tType\tSize\tUsed\tPriority\n"
                                "/nonexistent/hostdevd-swap partition 1 0 -2\n";
    static const char mounts[] = "22 1 8:1 / /a\\000b rw - ext4 /dev/sda1 rw\n"
                                 "23 1 0:50 / /sub rw - btrfs /nonexistent/hostdevd-dev rw\n";
    CU_ASSERT_EQUAL(fake_proc(&p), 0);
    CU_ASSERT_EQUAL(mkdirs(p.dir, "1") | mkdirs(p.dir, "net"), 0);
    proc_files(&p, swaps, NULL, NULL);
    CU_ASSERT_EQUAL(sysfs_tree_put(&p, "1/mountinfo", mounts, strlen(mounts)), 0);
    /* a btrfs-like 0:N mount whose source is a block device of this machine: no 1/root here,
     * so the device is found through the path as it is */
    char blkdev[64];
    dev_t dev = 0;
    find_block_device(blkdev, sizeof(blkdev), &dev);
    if (blkdev[0]) {
        char line[320];
        snprintf(line, sizeof(line), "%s24 1 0:51 / /btr rw - btrfs %s rw\n", mounts, blkdev);
        CU_ASSERT_EQUAL(sysfs_tree_put(&p, "1/mountinfo", line, strlen(line)), 0);
    }
    struct node_hostuse u = {0};
    CU_ASSERT_EQUAL(node_hostuse_collect(p.dir, &u), 0);
    CU_ASSERT_EQUAL(u.n_blk, blkdev[0] ? 2 : 1);
    expect_blk(&u, 8, 1, "/a\\000b");
    if (blkdev[0])
        expect_blk(&u, major(dev), minor(dev), "/btr");
    node_hostuse_done(&u);
    sysfs_tree_remove(&p);
}

/* A virtio device whose virtioN is not a directory: sysfs is not what it should be, an error
 * even when another virtioN reads well. */
static void test_virtio_unreadable(void)
{
    struct node_hostuse_net net[] = {{"eth1", "default route"}};
    struct node_hostuse use = NET(net);
    CU_ASSERT_EQUAL(sysfs_tree_put(&tree, "devices/pci0000:00/0000:00:09.0/virtio0", "x", 1), 0);
    CU_ASSERT_EQUAL(dir("devices/pci0000:00/0000:00:09.0/virtio1/net"), 0);
    struct err e = {""};
    CU_ASSERT_EQUAL(node_hostuse_check(root, "0000:00:09.0", &use, NULL, &e), -ENOTDIR);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "cannot follow the sysfs links of 0000:00:09.0"));
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&tree, "devices/pci0000:00/0000:00:09.0/virtio0"), 0);
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&tree, "devices/pci0000:00/0000:00:09.0/virtio1"), 0);
    CU_ASSERT_EQUAL(node_hostuse_check(root, "0000:00:09.0", &use, NULL, &e), 0);
}

static CU_TestInfo tests[] = {
        {"disk holding the root mount", test_root_disk},
        {"device-mapper on a partition", test_device_mapper},
        {"NVMe multipath namespace", test_nvme_multipath},
        {"swap partition", test_swap},
        {"unmounted NVMe and idle NICs", test_unmounted_nvme},
        {"NIC with an address", test_nic},
        {"bond and bridge lower devices", test_bond_lower},
        {"virtio-net", test_virtio_net},
        {"no use, bad input, errors", test_no_use_and_bad_input},
        {"what a finding holds", test_kinds},
        {"collect from a fake /proc", test_collect_fake_proc},
        {"collect falls back to self/mountinfo", test_collect_fallback},
        {"collect caps entries", test_collect_cap},
        {"collect from the running system", test_collect_real},
        {"collect: a default route only in IPv4", test_collect_ipv4_default_route},
        {"collect: swap on a block device", test_collect_swap_partition},
        {"collect: gone paths and \\000", test_collect_gone_and_nul},
        {"a virtio device with an unreadable virtioN", test_virtio_unreadable},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo hostuse_suites[] = {
        {"hostuse", suite_init, suite_clean, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
