/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_vfio.c - node/vfio: the step planner (pure), observation of fake sysfs trees,
 * group checks, and whole bind/restore convergences against a fake kernel: a step callback
 * that changes the tree as the kernel would (unbind removes the driver link, drivers_probe
 * links the override's driver or the device's normal one). A "crash" after any step (a
 * siglongjmp out of the callback) followed by a second convergence must end in the goal.
 */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/sysfs.h"
#include "node/holder.h"
#include "node/vfio.h"
#include "sysfs_tree.h"

static const char *const DESC = "0000:00:1c.0 0604 8086:a110 driver=pcieport iommu=5\n"
                                "0000:01:00.0 0300 10de:1eb8 driver=nvidia iommu=6\n"
                                "0000:01:00.1 0403 10de:10f8 driver=snd_hda_intel iommu=6\n"
                                "0000:02:00.0 0200 8086:10d3 driver=e1000e iommu=7\n"
                                "0000:02:00.1 0200 8086:10d3 iommu=7\n"
                                "0000:03:00.0 0200 8086:10d3 iommu=8\n"
                                "0000:04:00.0 0200 8086:10d3 driver=e1000e\n"
                                "0000:05:00.0 0200 8086:10d3 driver=vfio-pci iommu=9\n"
                                "0000:06:00.0 0604 8086:a111 iommu=6\n"
                                "0000:0c:00.0 0200 8086:10d3 driver=vfio-pci iommu=20\n"
                                "0000:0d:00.0 0200 8086:10d3 driver=vfio-pci iommu=21\n";

static struct node_vfio_dev dev(const char *driver, const char *override)
{
    struct node_vfio_dev d = {.present = true, .iommu_group = 7, .class_id = 0x020000};
    (void)snprintf(d.address, sizeof(d.address), "0000:02:00.0");
    (void)snprintf(d.driver, sizeof(d.driver), "%s", driver);
    (void)snprintf(d.override, sizeof(d.override), "%s", override);
    return d;
}

#define BIT(s) (1u << (s))

static void test_plan_bind(void)
{
    struct node_vfio_dev d = dev("e1000e", "");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_BIND, "", 0), NODE_VFIO_SET_OVERRIDE);
    d = dev("e1000e", "vfio-pci");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_BIND, "", 0), NODE_VFIO_UNBIND);
    d = dev("", "vfio-pci");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_BIND, "", 0), NODE_VFIO_PROBE);
    d = dev("vfio-pci", "vfio-pci");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_BIND, "", 0), NODE_VFIO_DONE);
    /* bound by someone else without an override: the override is added, once */
    d = dev("vfio-pci", "");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_BIND, "", 0), NODE_VFIO_SET_OVERRIDE);
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_BIND, "", BIT(NODE_VFIO_SET_OVERRIDE)),
                    NODE_VFIO_DONE);
    /* an unbind or probe that changed nothing is not repeated */
    d = dev("e1000e", "vfio-pci");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_BIND, "", BIT(NODE_VFIO_UNBIND)), NODE_VFIO_STUCK);
    d = dev("", "vfio-pci");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_BIND, "", BIT(NODE_VFIO_PROBE)), NODE_VFIO_STUCK);
    /* a device that is gone cannot be bound */
    d.present = false;
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_BIND, "", 0), NODE_VFIO_STUCK);
}

static void test_plan_restore(void)
{
    struct node_vfio_dev d = dev("vfio-pci", "vfio-pci");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "e1000e", 0), NODE_VFIO_CLEAR_OVERRIDE);
    d = dev("vfio-pci", "");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "e1000e", 0), NODE_VFIO_UNBIND);
    d = dev("", "");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "e1000e", 0), NODE_VFIO_PROBE);
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "e1000e", BIT(NODE_VFIO_PROBE)),
                    NODE_VFIO_BIND_ORIGINAL);
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "e1000e",
                                   BIT(NODE_VFIO_PROBE) | BIT(NODE_VFIO_BIND_ORIGINAL)),
                    NODE_VFIO_STUCK);
    /* no original driver: left unbound */
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "", 0), NODE_VFIO_DONE);
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, NULL, 0), NODE_VFIO_DONE);
    /* on a host driver already (after a reboot, or never bound): nothing to do */
    d = dev("e1000e", "");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "e1000e", 0), NODE_VFIO_DONE);
    /* an override someone else set is left alone */
    d = dev("e1000e", "pci-stub");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "e1000e", 0), NODE_VFIO_DONE);
    d.present = false;
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "e1000e", 0), NODE_VFIO_DONE);
    CU_ASSERT_STRING_EQUAL(node_vfio_step_name(NODE_VFIO_CLEAR_OVERRIDE), "clear-override");
    CU_ASSERT_STRING_EQUAL(node_vfio_step_name((enum node_vfio_step)99), "?");
}

/* Restore to vfio-pci (the device was on it before the claim): on vfio-pci it stays, with its
 * override, whoever wrote it; unbound, it goes back by the bind's steps; on a host driver it is
 * left there (moving it to vfio-pci would need the claim's host-critical checks). */
static void test_plan_restore_to_vfio(void)
{
    struct node_vfio_dev d = dev("vfio-pci", "vfio-pci");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "vfio-pci", 0), NODE_VFIO_DONE);
    d = dev("vfio-pci", ""); /* vfio-pci.ids= */
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "vfio-pci", 0), NODE_VFIO_DONE);
    d = dev("", "");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "vfio-pci", 0), NODE_VFIO_SET_OVERRIDE);
    d = dev("", "vfio-pci");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "vfio-pci", 0), NODE_VFIO_PROBE);
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "vfio-pci", BIT(NODE_VFIO_PROBE)),
                    NODE_VFIO_STUCK);
    d = dev("e1000e", "");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "vfio-pci", 0), NODE_VFIO_DONE);
    d = dev("e1000e", "vfio-pci");
    CU_ASSERT_EQUAL(node_vfio_next(&d, NODE_VFIO_RESTORE, "vfio-pci", 0), NODE_VFIO_DONE);
}

static struct sysfs_tree tree;
static int root_fd = -1;

static int suite_init(void)
{
    if (sysfs_tree_make_text(&tree, DESC) < 0)
        return -1;
    root_fd = node_sysfs_open_root(tree.root);
    return root_fd < 0 ? -1 : 0;
}

static int suite_clean(void)
{
    if (root_fd >= 0)
        close(root_fd);
    sysfs_tree_remove(&tree);
    return 0;
}

static void test_observe(void)
{
    struct node_vfio_dev d;
    CU_ASSERT_EQUAL(node_vfio_observe(root_fd, "0000:01:00.1", &d), 0);
    CU_ASSERT(d.present);
    CU_ASSERT_STRING_EQUAL(d.driver, "snd_hda_intel");
    CU_ASSERT_STRING_EQUAL(d.override, ""); /* "(null)" */
    CU_ASSERT_EQUAL(d.iommu_group, 6);
    CU_ASSERT_EQUAL(d.class_id, 0x040300);
    CU_ASSERT_EQUAL(node_vfio_observe(root_fd, "0000:04:00.0", &d), 0);
    CU_ASSERT_EQUAL(d.iommu_group, -1);
    CU_ASSERT_EQUAL(node_vfio_observe(root_fd, "0000:03:00.0", &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "");
    CU_ASSERT_EQUAL(node_vfio_observe(root_fd, "0000:09:00.0", &d), 0);
    CU_ASSERT(!d.present);
    CU_ASSERT_EQUAL(d.iommu_group, -1);
    CU_ASSERT_STRING_EQUAL(d.driver, "");
    CU_ASSERT_EQUAL(node_vfio_observe(root_fd, "../../etc", &d), -EINVAL);
}

/* A link of 0000:03:00.0 replaced by one to `target`. */
static void relink(const char *name, const char *target)
{
    char path[512];
    (void)snprintf(path, sizeof(path), "%s/devices/pci0000:03/0000:03:00.0/%s", tree.root, name);
    (void)unlink(path);
    CU_ASSERT_EQUAL(symlink(target, path), 0);
}

/* A driver link that does not lead to bus/pci/drivers/<name> is no driver; an iommu_group link
 * that loops is an error of that device. */
static void test_observe_hostile_links(void)
{
    struct node_vfio_dev d;
    char dir[512];
    (void)snprintf(dir, sizeof(dir), "%s/devices/vfio-pci", tree.root);
    CU_ASSERT_EQUAL(mkdir(dir, 0755), 0);
    relink("driver", "../../vfio-pci"); /* named vfio-pci, but not the driver */
    CU_ASSERT_EQUAL(node_vfio_observe(root_fd, "0000:03:00.0", &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "");
    relink("driver", "driver");
    CU_ASSERT_EQUAL(node_vfio_observe(root_fd, "0000:03:00.0", &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "");
    relink("driver", "../../../bus/pci/drivers/vfio-pci");
    CU_ASSERT_EQUAL(node_vfio_observe(root_fd, "0000:03:00.0", &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "vfio-pci");
    /* a driver whose name does not fit: an error, not "no driver" */
    static const char long_name[] = "a-driver-with-a-name-much-longer-than-any-driver-has-"
                                    "0123456789abcdef";
    (void)snprintf(dir, sizeof(dir), "%s/bus/pci/drivers/%s", tree.root, long_name);
    CU_ASSERT_EQUAL(mkdir(dir, 0755), 0);
    char target[160];
    (void)snprintf(target, sizeof(target), "../../../bus/pci/drivers/%s", long_name);
    relink("driver", target);
    CU_ASSERT_EQUAL(node_vfio_observe(root_fd, "0000:03:00.0", &d), -EFBIG);
    relink("driver", "../../../bus/pci/drivers/vfio-pci");
    relink("iommu_group", "iommu_group");
    CU_ASSERT_EQUAL(node_vfio_observe(root_fd, "0000:03:00.0", &d), -ELOOP);
    struct node_vfio_dev *m = NULL;
    size_t n = 77;
    CU_ASSERT_EQUAL(node_vfio_group_members(root_fd, 8, &m, &n), -ELOOP); /* its group's list */
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_EQUAL(n, 77);
    relink("iommu_group", "../../vfio-pci");
    CU_ASSERT_EQUAL(node_vfio_observe(root_fd, "0000:03:00.0", &d), -EXDEV);
    /* a group that is not a number: an error, not "no group" */
    (void)snprintf(dir, sizeof(dir), "%s/kernel/iommu_groups/x8", tree.root);
    CU_ASSERT_EQUAL(mkdir(dir, 0755), 0);
    relink("iommu_group", "../../../kernel/iommu_groups/x8");
    CU_ASSERT_EQUAL(node_vfio_observe(root_fd, "0000:03:00.0", &d), -EINVAL);
    /* nor a negative one */
    (void)snprintf(dir, sizeof(dir), "%s/kernel/iommu_groups/-8", tree.root);
    CU_ASSERT_EQUAL(mkdir(dir, 0755), 0);
    relink("iommu_group", "../../../kernel/iommu_groups/-8");
    CU_ASSERT_EQUAL(node_vfio_observe(root_fd, "0000:03:00.0", &d), -EINVAL);
    /* As the tree had it. */
    relink("iommu_group", "../../../kernel/iommu_groups/8");
    (void)snprintf(dir, sizeof(dir), "%s/devices/pci0000:03/0000:03:00.0/driver", tree.root);
    CU_ASSERT_EQUAL(unlink(dir), 0);
    CU_ASSERT_EQUAL(node_vfio_observe(root_fd, "0000:03:00.0", &d), 0);
    CU_ASSERT_EQUAL(d.iommu_group, 8);
    CU_ASSERT_STRING_EQUAL(d.driver, "");
}

static struct node_vfio_dev member(const char *address, uint32_t class_id, const char *driver)
{
    struct node_vfio_dev d = {.present = true, .iommu_group = 11, .class_id = class_id};
    (void)snprintf(d.address, sizeof(d.address), "%s", address);
    (void)snprintf(d.driver, sizeof(d.driver), "%s", driver);
    return d;
}

/* Members the host cannot give up, by class. */
static void test_member_essential_classes(void)
{
    struct err e = {"unset"};
    struct node_vfio_dev lpc = member("0000:00:1f.0", 0x060100, "");
    CU_ASSERT_EQUAL(node_vfio_member_essential(root_fd, &lpc, NULL, &e), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "0000:00:1f.0 is an ISA/LPC bridge"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "which the host cannot give up"));
    struct node_vfio_dev smbus = member("0000:00:1f.4", 0x0c0500, "i801_smbus");
    CU_ASSERT_EQUAL(node_vfio_member_essential(root_fd, &smbus, NULL, &e), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "0000:00:1f.4 is an SMBus controller"));
    struct node_vfio_dev host = member("0000:00:00.0", 0x060000, "");
    CU_ASSERT_EQUAL(node_vfio_member_essential(root_fd, &host, NULL, &e), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "is a host bridge"));
    /* A bridge to other buses, an audio function, another bridge class: not by class. */
    static const uint32_t others[] = {0x060400, 0x040300, 0x068000, 0x0c0330, 0x020000};
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        struct node_vfio_dev m = member("0000:00:1f.3", others[i], "snd_hda_intel");
        (void)snprintf(e.msg, sizeof(e.msg), "unset");
        CU_ASSERT_EQUAL(node_vfio_member_essential(root_fd, &m, NULL, &e), 0);
        CU_ASSERT_STRING_EQUAL(e.msg, "unset");
    }
    CU_ASSERT_EQUAL(node_vfio_member_essential(root_fd, &lpc, NULL, NULL), 1);
}

static bool claimed_audio(const char *address, void *arg)
{
    (void)arg;
    return strcmp(address, "0000:01:00.1") == 0;
}

static size_t blockers(int group, const char *address, bool (*claimed)(const char *, void *))
{
    struct node_vfio_dev *m = NULL;
    size_t n = 0, b = 0;
    CU_ASSERT_EQUAL(node_vfio_group_members(root_fd, group, &m, &n), 0);
    for (size_t i = 0; i < n; i++)
        b += node_vfio_member_blocks(&m[i], address, claimed, NULL);
    free(m);
    return b;
}

static void test_groups(void)
{
    struct node_vfio_dev *m = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(node_vfio_group_members(root_fd, 6, &m, &n), 0);
    CU_ASSERT_EQUAL(n, 3);
    if (n == 3) {
        CU_ASSERT_STRING_EQUAL(m[0].address, "0000:01:00.0");
        CU_ASSERT_STRING_EQUAL(m[2].address, "0000:06:00.0");
    }
    free(m);
    /* the GPU's audio function stands in the way until it is claimed; the bridge never does */
    CU_ASSERT_EQUAL(blockers(6, "0000:01:00.0", NULL), 1);
    CU_ASSERT_EQUAL(blockers(6, "0000:01:00.0", claimed_audio), 0);
    /* an unbound sibling blocks too: a driver could bind it at any time */
    CU_ASSERT_EQUAL(blockers(7, "0000:02:00.0", NULL), 1);
    CU_ASSERT_EQUAL(blockers(8, "0000:03:00.0", NULL), 0);
    CU_ASSERT_EQUAL(blockers(5, "0000:03:00.0", NULL), 0); /* pcieport */
    /* only a PCI-to-PCI bridge (0x0604) is passed over: classes after it block like any other */
    static const uint32_t after[] = {0x068000, 0x0c0330, 0x0c0500, 0xff0000};
    for (size_t i = 0; i < sizeof(after) / sizeof(after[0]); i++) {
        struct node_vfio_dev sib = member("0000:01:00.2", after[i], "xhci_hcd");
        CU_ASSERT_TRUE(node_vfio_member_blocks(&sib, "0000:01:00.0", NULL, NULL));
    }
    struct node_vfio_dev bridge = member("0000:01:00.2", 0x060400, "");
    CU_ASSERT_FALSE(node_vfio_member_blocks(&bridge, "0000:01:00.0", NULL, NULL));
    CU_ASSERT_EQUAL(node_vfio_group_members(root_fd, 77, &m, &n), -ENOENT);
}

static int open_fds(void)
{
    int n = 0;
    DIR *dir = opendir("/proc/self/fd");
    if (!dir) {
        CU_FAIL("opendir /proc/self/fd");
        return -1;
    }
    while (readdir(dir))
        n++;
    closedir(dir);
    return n;
}

static void test_busy(void)
{
    CU_ASSERT_EQUAL(node_vfio_group_busy(tree.dir, 6), 0); /* absent */
    char path[512];
    (void)snprintf(path, sizeof(path), "%s/vfio", tree.dir);
    CU_ASSERT_EQUAL(mkdir(path, 0755), 0);
    (void)snprintf(path, sizeof(path), "%s/vfio/6", tree.dir);
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    CU_ASSERT(fd >= 0);
    if (fd >= 0)
        close(fd);
    CU_ASSERT_EQUAL(node_vfio_group_busy(tree.dir, 6), 0); /* opens: not busy */
    /* ... and closes what it opened */
    int before = open_fds();
    for (int i = 0; i < 8; i++)
        CU_ASSERT_EQUAL(node_vfio_group_busy(tree.dir, 6), 0);
    CU_ASSERT_EQUAL(open_fds(), before);
    /* a failure other than EBUSY or ENOENT is an error, not "busy" */
    (void)snprintf(path, sizeof(path), "%s/vfio/9", tree.dir);
    CU_ASSERT_EQUAL(mkdir(path, 0755), 0);
    CU_ASSERT_EQUAL(node_vfio_group_busy(tree.dir, 9), -EISDIR);
}

/* A fake /proc below the tree: process `pid` named `comm` with descriptor 7 linked to
 * `target`. */
static void fake_process(const char *pid, const char *comm, const char *target)
{
    char path[512];
    (void)snprintf(path, sizeof(path), "%s/proc", tree.dir);
    (void)mkdir(path, 0755);
    (void)snprintf(path, sizeof(path), "%s/proc/%s", tree.dir, pid);
    CU_ASSERT_EQUAL(mkdir(path, 0755), 0);
    (void)snprintf(path, sizeof(path), "%s/proc/%s/fd", tree.dir, pid);
    CU_ASSERT_EQUAL(mkdir(path, 0755), 0);
    (void)snprintf(path, sizeof(path), "%s/proc/%s/fd/7", tree.dir, pid);
    CU_ASSERT_EQUAL(symlink(target, path), 0);
    (void)snprintf(path, sizeof(path), "%s/proc/%s/comm", tree.dir, pid);
    FILE *f = fopen(path, "we");
    if (f) {
        (void)fprintf(f, "%s\n", comm);
        (void)fclose(f);
    }
}

static void test_holder(void)
{
    char proc[512], buf[128] = "";
    (void)snprintf(proc, sizeof(proc), "%s/proc", tree.dir);
    CU_ASSERT_EQUAL(node_vfio_group_holder(tree.dir, proc, 3, buf, sizeof(buf)), -ENOENT);
    fake_process("17", "sleep", "/dev/null");
    fake_process("412", "qemu-system-x86", "/dev/vfio/3");
    fake_process("self", "not-a-pid", "/dev/vfio/4");
    CU_ASSERT_EQUAL(node_vfio_group_holder(tree.dir, proc, 3, buf, sizeof(buf)), 1);
    CU_ASSERT_STRING_EQUAL(buf, "qemu-system-x86 (pid 412)");
    CU_ASSERT_EQUAL(node_vfio_group_holder(tree.dir, proc, 4, buf, sizeof(buf)),
                    0); /* only numbers */
    CU_ASSERT_EQUAL(node_vfio_group_holder(tree.dir, proc, 33, buf, sizeof(buf)),
                    0);                                      /* not a prefix */
    fake_process("530", "qemu-kvm", "/dev/bus/usb/001/004"); /* any device node: a USB one */
    CU_ASSERT_EQUAL(node_holder_find(proc, "/dev/bus/usb/001/004", NULL, buf, sizeof(buf)), 1);
    CU_ASSERT_STRING_EQUAL(buf, "qemu-kvm (pid 530)");
    CU_ASSERT_EQUAL(node_holder_find(proc, "/dev/bus/usb/001/00", NULL, buf, sizeof(buf)), 0);
    /* the same device spelled another way (a chroot's or another mount namespace's path, as
     * KubeVirt's launcher in the qemu node has it): found by the device node's number */
    fake_process("610", "qemu-system-x86", "/dev/./zero");
    CU_ASSERT_EQUAL(node_holder_find(proc, "/dev/vfio/5", NULL, buf, sizeof(buf)), 0);
    CU_ASSERT_EQUAL(node_holder_find(proc, "/dev/vfio/5", "/dev/zero", buf, sizeof(buf)), 1);
    CU_ASSERT_STRING_EQUAL(buf, "qemu-system-x86 (pid 610)");
    CU_ASSERT_EQUAL(node_holder_find(proc, "/dev/vfio/5", "/dev/full", buf, sizeof(buf)), 0);
    CU_ASSERT_EQUAL(node_holder_find(proc, "/dev/vfio/5", tree.dir, buf, sizeof(buf)), 0);
    int before = open_fds();
    for (int i = 0; i < 8; i++)
        (void)node_vfio_group_holder(tree.dir, proc, 3, buf, sizeof(buf));
    CU_ASSERT_EQUAL(open_fds(), before);
}

/* Driver names as the kernel writes them (one character is a name) and path tricks refused. */
static void test_apply_driver_names(void)
{
    struct node_vfio_dev d = {.present = true, .address = "0000:09:00.0", .driver = "x"};
    CU_ASSERT_NOT_EQUAL(node_vfio_apply(root_fd, &d, NODE_VFIO_UNBIND, NULL), -EINVAL);
    CU_ASSERT_NOT_EQUAL(node_vfio_apply(root_fd, &d, NODE_VFIO_BIND_ORIGINAL, "x"), -EINVAL);
    static const char *const bad[] = {"", ".", "..", "a/b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CU_ASSERT_EQUAL(node_vfio_apply(root_fd, &d, NODE_VFIO_BIND_ORIGINAL, bad[i]), -EINVAL);
        (void)snprintf(d.driver, sizeof(d.driver), "%s", bad[i]);
        CU_ASSERT_EQUAL(node_vfio_apply(root_fd, &d, NODE_VFIO_UNBIND, NULL), -EINVAL);
    }
    CU_ASSERT_EQUAL(node_vfio_apply(root_fd, &d, NODE_VFIO_BIND_ORIGINAL, NULL), -EINVAL);
}

/* --- a fake kernel ------------------------------------------------------------------------- */

struct fake_kernel {
    const char *address, *normal_driver; /* what drivers_probe binds without an override */
    const char *original;                /* the driver to restore (NULL: e1000e) */
    const char *crash_at;                /* "bind:unbind": longjmp after that step */
    bool deaf_probe;                     /* drivers_probe binds nothing */
    sigjmp_buf crashed;
    int steps;
};

static void set_driver(const char *address, const char *driver)
{
    char link[512], target[128];
    (void)snprintf(link, sizeof(link), "%s/bus/pci/devices/%s/driver", tree.root, address);
    (void)unlink(link);
    if (!driver || !driver[0])
        return;
    (void)snprintf(target, sizeof(target), "../../../bus/pci/drivers/%s", driver);
    CU_ASSERT_EQUAL(symlink(target, link), 0);
}

static void kernel_step(const char *goal, const char *step, void *arg)
{
    struct fake_kernel *k = arg;
    struct node_vfio_dev d;
    char what[64];
    k->steps++;
    CU_ASSERT_EQUAL(node_vfio_observe(root_fd, k->address, &d), 0);
    if (strcmp(step, "unbind") == 0)
        set_driver(k->address, NULL);
    else if (strcmp(step, "probe") == 0 && !d.driver[0] && !k->deaf_probe)
        set_driver(k->address, d.override[0] ? d.override : k->normal_driver);
    else if (strcmp(step, "bind-original") == 0)
        set_driver(k->address, k->normal_driver);
    (void)snprintf(what, sizeof(what), "%s:%s", goal, step);
    if (k->crash_at && strcmp(what, k->crash_at) == 0)
        siglongjmp(k->crashed, 1);
}

static int converge(struct fake_kernel *k, enum node_vfio_goal goal, struct node_vfio_dev *d)
{
    struct err err = {""};
    const char *original = k->original ? k->original : "e1000e";
    int r = node_vfio_converge(root_fd, k->address, goal, original, kernel_step, k, d, &err);
    if (r < 0)
        fprintf(stderr, "converge: %s\n", err.msg);
    return r;
}

static void test_converge_round_trip(void)
{
    struct fake_kernel k = {.address = "0000:02:00.0", .normal_driver = "e1000e"};
    struct node_vfio_dev d;
    CU_ASSERT_EQUAL(converge(&k, NODE_VFIO_BIND, &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "vfio-pci");
    CU_ASSERT_STRING_EQUAL(d.override, "vfio-pci");
    CU_ASSERT_EQUAL(k.steps, 3); /* set-override, unbind, probe */
    k.steps = 0;
    CU_ASSERT_EQUAL(converge(&k, NODE_VFIO_BIND, &d), 0); /* idempotent */
    CU_ASSERT_EQUAL(k.steps, 0);
    CU_ASSERT_EQUAL(converge(&k, NODE_VFIO_RESTORE, &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "e1000e");
    CU_ASSERT_STRING_EQUAL(d.override, "");
    CU_ASSERT_EQUAL(k.steps, 3); /* clear-override, unbind, probe */
}

/* From the opposite state, moves towards `g`, crashing after step `point`; then converges
 * again (as the restarted agent would) and checks the goal. */
static void crash_then_converge(enum node_vfio_goal g, const char *point)
{
    struct fake_kernel k = {.address = "0000:02:00.0", .normal_driver = "e1000e"};
    struct node_vfio_dev d;
    CU_ASSERT_EQUAL(converge(&k, g == NODE_VFIO_BIND ? NODE_VFIO_RESTORE : NODE_VFIO_BIND, &d), 0);
    k.crash_at = point;
    if (sigsetjmp(k.crashed, 0) == 0) {
        (void)converge(&k, g, &d);
        CU_FAIL("no crash");
    }
    k.crash_at = NULL;
    CU_ASSERT_EQUAL(converge(&k, g, &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, g == NODE_VFIO_BIND ? "vfio-pci" : "e1000e");
}

static void test_converge_crash_at_every_step(void)
{
    static const char *const bind[] = {"bind:set-override", "bind:unbind", "bind:probe"};
    static const char *const restore[] = {"restore:clear-override", "restore:unbind",
                                          "restore:probe"};
    for (size_t i = 0; i < 3; i++) {
        crash_then_converge(NODE_VFIO_BIND, bind[i]);
        crash_then_converge(NODE_VFIO_RESTORE, restore[i]);
    }
}

/* 0000:0c:00.0, whose original driver is vfio-pci, found unbound with no override: restored
 * to vfio-pci, also when the agent crashes after step `point` (NULL: none) and converges
 * again. */
static void unbound_then_restore_to_vfio(const char *point)
{
    struct fake_kernel k = {.address = "0000:0c:00.0",
                            .normal_driver = "e1000e",
                            .original = "vfio-pci",
                            .crash_at = point};
    struct node_vfio_dev d;
    set_driver(k.address, NULL);
    CU_ASSERT_EQUAL(
            sysfs_tree_put(&tree, "bus/pci/devices/0000:0c:00.0/driver_override", "(null)\n", 7),
            0);
    if (point) {
        if (sigsetjmp(k.crashed, 0) == 0) {
            (void)converge(&k, NODE_VFIO_RESTORE, &d);
            CU_FAIL("no crash");
        }
        k.crash_at = NULL;
    }
    CU_ASSERT_EQUAL(converge(&k, NODE_VFIO_RESTORE, &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "vfio-pci");
    CU_ASSERT_STRING_EQUAL(d.override, "vfio-pci");
}

/* Devices the admin put on vfio-pci: 0000:0c:00.0 with a driver_override (driverctl; without
 * it e1000e would take the device), 0000:0d:00.0 by vfio-pci.ids= (drivers_probe binds
 * vfio-pci with no override). A claim binds each and its release gives vfio-pci back, the
 * override in place, touching nothing; unbound meanwhile, it goes back to vfio-pci, also after
 * a crash at any step. */
static void test_converge_restore_to_vfio(void)
{
    struct fake_kernel k = {
            .address = "0000:0c:00.0", .normal_driver = "e1000e", .original = "vfio-pci"};
    struct node_vfio_dev d;
    CU_ASSERT_EQUAL(
            sysfs_tree_put(&tree, "bus/pci/devices/0000:0c:00.0/driver_override", "vfio-pci\n", 9),
            0);
    CU_ASSERT_EQUAL(converge(&k, NODE_VFIO_BIND, &d), 0);
    CU_ASSERT_EQUAL(converge(&k, NODE_VFIO_RESTORE, &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "vfio-pci");
    CU_ASSERT_STRING_EQUAL(d.override, "vfio-pci");
    CU_ASSERT_EQUAL(k.steps, 0);
    k = (struct fake_kernel){
            .address = "0000:0d:00.0", .normal_driver = "vfio-pci", .original = "vfio-pci"};
    CU_ASSERT_EQUAL(converge(&k, NODE_VFIO_BIND, &d), 0);
    CU_ASSERT_EQUAL(k.steps, 1); /* set-override: a re-probe lands on vfio-pci */
    k.steps = 0;
    CU_ASSERT_EQUAL(converge(&k, NODE_VFIO_RESTORE, &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "vfio-pci");
    CU_ASSERT_STRING_EQUAL(d.override, "vfio-pci"); /* the bind's, kept as the DRA path does */
    CU_ASSERT_EQUAL(k.steps, 0);
    unbound_then_restore_to_vfio(NULL);
    unbound_then_restore_to_vfio("restore:set-override");
    unbound_then_restore_to_vfio("restore:probe");
    /* on a host driver: left there */
    k = (struct fake_kernel){.address = "0000:0c:00.0", .original = "vfio-pci"};
    set_driver(k.address, "e1000e");
    k.steps = 0;
    CU_ASSERT_EQUAL(converge(&k, NODE_VFIO_RESTORE, &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "e1000e");
    CU_ASSERT_EQUAL(k.steps, 0);
}

static void test_converge_failures(void)
{
    /* a kernel that ignores drivers_probe: restore falls back to bind-original, bind fails
     * with a message naming the state */
    struct fake_kernel k = {.address = "0000:03:00.0", .normal_driver = NULL};
    struct node_vfio_dev d = {.iommu_group = 77};
    struct err err = {""};
    int r = node_vfio_converge(root_fd, "0000:09:00.0", NODE_VFIO_BIND, "", NULL, NULL, &d, &err);
    CU_ASSERT_EQUAL(r, -ENODEV);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "does not exist"));
    CU_ASSERT_EQUAL(d.iommu_group, 77); /* not written on failure */
    r = node_vfio_converge(root_fd, "0000:09:00.0", NODE_VFIO_RESTORE, "e1000e", NULL, NULL, &d,
                           NULL);
    CU_ASSERT_EQUAL(r, 0); /* nothing to restore on a device that is gone */
    r = node_vfio_converge(root_fd, "0000:04:00.0", NODE_VFIO_BIND, "", NULL, NULL, &d, &err);
    CU_ASSERT_EQUAL(r, -EIO); /* the fake tree's unbind changes nothing */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "driver=e1000e driver_override=vfio-pci"));
    r = node_vfio_converge(root_fd, "../x", NODE_VFIO_BIND, "", NULL, NULL, &d, &err);
    CU_ASSERT_EQUAL(r, -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "cannot read ../x in sysfs"));
    k.address = "0000:04:00.0";
    k.normal_driver = "e1000e";
    CU_ASSERT_EQUAL(converge(&k, NODE_VFIO_RESTORE, &d), 0);
    CU_ASSERT_STRING_EQUAL(d.override, "");
}

/* Converges 0000:02:00.0 towards `goal` with the write to `path` failing with EBUSY: the
 * convergence stops at that step, says which, and leaves the write's fault removed. */
static void busy_at(struct fake_kernel *k, enum node_vfio_goal goal, const char *path,
                    const char *step)
{
    struct node_vfio_dev d;
    struct err err = {""};
    char want[64];
    CU_ASSERT_EQUAL(sysfs_tree_fail_write(path, EBUSY), 0);
    int r = node_vfio_converge(root_fd, k->address, goal, "e1000e", kernel_step, k, &d, &err);
    CU_ASSERT_EQUAL(r, -EBUSY);
    (void)snprintf(want, sizeof(want), "step %s failed", step);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
    CU_ASSERT_EQUAL(sysfs_tree_fail_write(path, 0), 0);
}

#define OVERRIDE "bus/pci/devices/0000:02:00.0/driver_override"
#define PROBE    "bus/pci/drivers_probe"

/* EBUSY from a sysfs write: only bind-original may meet it (another probe bound the device
 * first: observe and go on); at every other step of bind and restore it is an error naming the
 * step. A restore that leaves the device unbound while an original driver is wanted did not
 * take effect. */
static void test_converge_ebusy(void)
{
    struct fake_kernel k = {.address = "0000:02:00.0", .normal_driver = "e1000e"};
    struct node_vfio_dev d;
    CU_ASSERT_EQUAL(converge(&k, NODE_VFIO_RESTORE, &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "e1000e");
    busy_at(&k, NODE_VFIO_BIND, OVERRIDE, "set-override");
    busy_at(&k, NODE_VFIO_BIND, "bus/pci/drivers/e1000e/unbind", "unbind");
    busy_at(&k, NODE_VFIO_BIND, PROBE, "probe");
    CU_ASSERT_EQUAL(converge(&k, NODE_VFIO_BIND, &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "vfio-pci");
    busy_at(&k, NODE_VFIO_RESTORE, OVERRIDE, "clear-override");
    busy_at(&k, NODE_VFIO_RESTORE, "bus/pci/drivers/vfio-pci/unbind", "unbind");
    busy_at(&k, NODE_VFIO_RESTORE, PROBE, "probe");
    /* unbound, override clear; drivers_probe binds nothing, and the explicit bind meets EBUSY
     * because the driver took the device meanwhile: restored */
    k.deaf_probe = true;
    CU_ASSERT_EQUAL(sysfs_tree_fail_write("bus/pci/drivers/e1000e/bind", EBUSY), 0);
    k.steps = 0;
    CU_ASSERT_EQUAL(converge(&k, NODE_VFIO_RESTORE, &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "e1000e");
    CU_ASSERT_EQUAL(k.steps, 2); /* probe, bind-original */
    /* the same with no driver taking it: the restore did not take effect */
    set_driver(k.address, NULL);
    k.normal_driver = NULL;
    struct err err = {""};
    int r = node_vfio_converge(root_fd, k.address, NODE_VFIO_RESTORE, "e1000e", kernel_step, &k, &d,
                               &err);
    CU_ASSERT_EQUAL(r, -EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "restore of 0000:02:00.0 did not take effect"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "driver=(none)"));
    CU_ASSERT_EQUAL(sysfs_tree_fail_write(NULL, 0), 0);
    /* with no original driver, unbound is the goal */
    CU_ASSERT_EQUAL(
            node_vfio_converge(root_fd, k.address, NODE_VFIO_RESTORE, "", NULL, NULL, &d, NULL), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "");
    k.normal_driver = "e1000e";
    k.deaf_probe = false;
    CU_ASSERT_EQUAL(converge(&k, NODE_VFIO_RESTORE, &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "e1000e");
}

static CU_TestInfo tests[] = {
        {"plan: bind", test_plan_bind},
        {"plan: restore", test_plan_restore},
        {"plan: restore to vfio-pci", test_plan_restore_to_vfio},
        {"observe a fake tree", test_observe},
        {"IOMMU group members and blockers", test_groups},
        {"observe: hostile driver and iommu_group links", test_observe_hostile_links},
        {"apply: one-character driver names, path tricks refused", test_apply_driver_names},
        {"members the host cannot give up, by class", test_member_essential_classes},
        {"group busy check", test_busy},
        {"who holds a group", test_holder},
        {"bind and restore round trip", test_converge_round_trip},
        {"crash after every step, then converge", test_converge_crash_at_every_step},
        {"restore to vfio-pci: the admin's binding kept", test_converge_restore_to_vfio},
        {"failures say what sysfs shows", test_converge_failures},
        {"EBUSY: only bind-original tolerates it", test_converge_ebusy},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo vfio_suites[] = {
        {"vfio", suite_init, suite_clean, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
