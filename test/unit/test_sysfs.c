/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_sysfs.c - node/sysfs on the small-server fake tree: attributes, the 4 KiB cap,
 * newline handling, strict integers, links, listings, writes, and paths kept inside the root.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "node/sysfs.h"
#include "sysfs_tree.h"

static struct sysfs_tree tree;
static int root = -1;

static int suite_init(void)
{
    if (sysfs_tree_make(&tree, FIXTURES "/sysfs/small-server.txt") < 0)
        return -1;
    return sysfs_tree_open_root(&tree, &root);
}

static int suite_clean(void)
{
    sysfs_tree_close(&tree, &root);
    return 0;
}

#define PF "bus/pci/devices/0000:3b:00.0/"

static void test_open_root(void)
{
    CU_ASSERT_EQUAL(node_sysfs_open_root("/nonexistent/hostdevd"), -ENOENT);
    char file[400];
    snprintf(file, sizeof(file), "%s/" PF "vendor", tree.root);
    CU_ASSERT_EQUAL(node_sysfs_open_root(file), -ENOTDIR);
}

static void test_read_strips_newline(void)
{
    char buf[64];
    CU_ASSERT_EQUAL(node_sysfs_read(root, PF "vendor", buf, sizeof(buf)), 6);
    CU_ASSERT_STRING_EQUAL(buf, "0x15b3");
    CU_ASSERT_EQUAL(node_sysfs_read(root, PF "driver_override", buf, sizeof(buf)), 6);
    CU_ASSERT_STRING_EQUAL(buf, "(null)");
    /* Through the driver link into bus/pci/drivers. */
    CU_ASSERT_EQUAL(node_sysfs_read(root, PF "driver/bind", buf, sizeof(buf)), 0);
    CU_ASSERT_STRING_EQUAL(buf, "");
    CU_ASSERT_EQUAL(node_sysfs_read(root, PF "uevent", buf, sizeof(buf)), -EFBIG);
    CU_ASSERT_STRING_EQUAL(buf, "");
    CU_ASSERT_EQUAL(node_sysfs_read(root, PF "uevent", buf, 0), -EFBIG);
}

static void test_read_errors(void)
{
    char buf[64] = "stale";
    CU_ASSERT_EQUAL(node_sysfs_read(root, PF "nonexistent", buf, sizeof(buf)), -ENOENT);
    CU_ASSERT_STRING_EQUAL(buf, "");
    CU_ASSERT_EQUAL(node_sysfs_read(root, "/etc/passwd", buf, sizeof(buf)), -EINVAL);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "../etc/passwd", buf, sizeof(buf)), -EINVAL);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "bus/../bus/pci/drivers_probe", buf, sizeof(buf)),
                    -EINVAL);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "", buf, sizeof(buf)), -EINVAL);
    CU_ASSERT_EQUAL(node_sysfs_read(root, NULL, buf, sizeof(buf)), -EINVAL);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "bus/pci/devices", buf, sizeof(buf)), -EISDIR);
    /* "..." and "..x" are names, not parent references. */
    CU_ASSERT_EQUAL(node_sysfs_read(root, "bus/.../x", buf, sizeof(buf)), -ENOENT);
}

static void test_read_cap(void)
{
    static char big[NODE_SYSFS_ATTR_MAX + 2];
    static char out[NODE_SYSFS_ATTR_MAX + 8];
    memset(big, 'a', sizeof(big));
    CU_ASSERT_EQUAL(sysfs_tree_put(&tree, "cap", big, NODE_SYSFS_ATTR_MAX), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "cap", out, sizeof(out)), NODE_SYSFS_ATTR_MAX);
    CU_ASSERT_EQUAL(strlen(out), NODE_SYSFS_ATTR_MAX);
    /* Exactly the cap, but the value does not fit the buffer with its NUL. */
    CU_ASSERT_EQUAL(node_sysfs_read(root, "cap", out, NODE_SYSFS_ATTR_MAX), -EFBIG);
    big[NODE_SYSFS_ATTR_MAX - 1] = '\n';
    CU_ASSERT_EQUAL(sysfs_tree_put(&tree, "cap", big, NODE_SYSFS_ATTR_MAX), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "cap", out, NODE_SYSFS_ATTR_MAX),
                    NODE_SYSFS_ATTR_MAX - 1);
    CU_ASSERT_EQUAL(sysfs_tree_put(&tree, "cap", big, NODE_SYSFS_ATTR_MAX + 1), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "cap", out, sizeof(out)), -EFBIG);
    CU_ASSERT_STRING_EQUAL(out, "");
}

static void test_read_newlines_and_nul(void)
{
    char buf[64];
    CU_ASSERT_EQUAL(sysfs_tree_put(&tree, "attr", "", 0), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "attr", buf, sizeof(buf)), 0);
    CU_ASSERT_EQUAL(sysfs_tree_put(&tree, "attr", "\n", 1), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "attr", buf, sizeof(buf)), 0);
    CU_ASSERT_STRING_EQUAL(buf, "");
    CU_ASSERT_EQUAL(sysfs_tree_put(&tree, "attr", "a\n\n", 3), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "attr", buf, sizeof(buf)), 2);
    CU_ASSERT_STRING_EQUAL(buf, "a\n");
    CU_ASSERT_EQUAL(sysfs_tree_put(&tree, "attr", "one\ntwo\n", 8), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "attr", buf, sizeof(buf)), 7);
    CU_ASSERT_STRING_EQUAL(buf, "one\ntwo");
    CU_ASSERT_EQUAL(sysfs_tree_put(&tree, "attr", "a\0b\n", 4), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "attr", buf, sizeof(buf)), -EINVAL);
    /* Exactly filling the buffer: 3 bytes and the NUL. */
    CU_ASSERT_EQUAL(sysfs_tree_put(&tree, "attr", "abc\n", 4), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "attr", buf, 4), 3);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "attr", buf, 3), -EFBIG);
}

static void test_chomp(void)
{
    char s[8];
    memcpy(s, "ab\n", 4);
    CU_ASSERT_EQUAL(node_sysfs_chomp(s, 3), 2);
    CU_ASSERT_STRING_EQUAL(s, "ab");
    CU_ASSERT_EQUAL(node_sysfs_chomp(s, 2), 2);
    CU_ASSERT_STRING_EQUAL(s, "ab");
    memcpy(s, "\n\n", 3);
    CU_ASSERT_EQUAL(node_sysfs_chomp(s, 2), 1);
    CU_ASSERT_STRING_EQUAL(s, "\n");
    CU_ASSERT_EQUAL(node_sysfs_chomp(s, 0), 0);
    CU_ASSERT_STRING_EQUAL(s, "");
}

struct int_case {
    const char *s;
    int base;
    int r;
    long long v;
};

static void test_parse_int(void)
{
    static const struct int_case cases[] = {
            {"0x15b3", 16, 0, 0x15b3},
            {"15b3", 16, 0, 0x15b3},
            {"0X1F\n", 16, 0, 31},
            {"0x020000\n", 16, 0, 0x20000},
            {"-1\n", 10, 0, -1},
            {"0", 10, 0, 0},
            {"007", 10, 0, 7},
            {"2147483648", 10, 0, 2147483648LL},
            {"-9223372036854775808", 10, 0, LLONG_MIN},
            {"0x7fffffffffffffff", 16, 0, LLONG_MAX},
            {"9223372036854775808", 10, -ERANGE, 0},
            {"0x8000000000000000", 16, -ERANGE, 0},
            {"99999999999999999999999", 10, -ERANGE, 0},
            {"", 10, -EINVAL, 0},
            {"\n", 10, -EINVAL, 0},
            {"12\n\n", 10, -EINVAL, 0},
            {" 12", 10, -EINVAL, 0},
            {"12 ", 10, -EINVAL, 0},
            {"+12", 10, -EINVAL, 0},
            {"-", 10, -EINVAL, 0},
            {"--1", 10, -EINVAL, 0},
            {"1a", 10, -EINVAL, 0},
            {"0x10", 10, -EINVAL, 0},
            {"-1", 16, -EINVAL, 0},
            {"0x", 16, -EINVAL, 0},
            {"0x-1", 16, -EINVAL, 0},
            {"0x0x1", 16, -EINVAL, 0},
            {"(null)", 16, -EINVAL, 0},
            {"12", 8, -EINVAL, 0},
            {"12", 0, -EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        long long v = 12345;
        int r = node_sysfs_parse_int(cases[i].s, cases[i].base, &v);
        CU_ASSERT_EQUAL(r, cases[i].r);
        CU_ASSERT_EQUAL(v, r == 0 ? cases[i].v : 12345);
        if (r != cases[i].r)
            fprintf(stderr, "parse_int(\"%s\", %d) = %d\n", cases[i].s, cases[i].base, r);
    }
}

static void test_read_int(void)
{
    long long v = 0;
    CU_ASSERT_EQUAL(node_sysfs_read_int(root, PF "vendor", 16, &v), 0);
    CU_ASSERT_EQUAL(v, 0x15b3);
    CU_ASSERT_EQUAL(node_sysfs_read_int(root, PF "class", 16, &v), 0);
    CU_ASSERT_EQUAL(v, 0x020000);
    CU_ASSERT_EQUAL(node_sysfs_read_int(root, PF "sriov_numvfs", 10, &v), 0);
    CU_ASSERT_EQUAL(v, 4);
    CU_ASSERT_EQUAL(node_sysfs_read_int(root, "bus/pci/devices/10000:01:00.0/irq", 10, &v), 0);
    CU_ASSERT_EQUAL(v, 0);
    CU_ASSERT_EQUAL(node_sysfs_read_int(root, "bus/pci/devices/0000:00:00.0/numa_node", 10, &v), 0);
    CU_ASSERT_EQUAL(node_sysfs_read_int(root, "bus/pci/devices/0000:af:00.0/numa_node", 10, &v), 0);
    CU_ASSERT_EQUAL(v, 1);
    v = 77;
    CU_ASSERT_EQUAL(node_sysfs_read_int(root, PF "driver_override", 16, &v), -EINVAL);
    CU_ASSERT_EQUAL(node_sysfs_read_int(root, PF "uevent", 10, &v), -EFBIG);
    CU_ASSERT_EQUAL(node_sysfs_read_int(root, PF "nonexistent", 10, &v), -ENOENT);
    CU_ASSERT_EQUAL(v, 77);
}

static void test_read_link(void)
{
    char buf[64];
    CU_ASSERT_EQUAL(node_sysfs_read_link(root, PF "driver", buf, sizeof(buf)), 9);
    CU_ASSERT_STRING_EQUAL(buf, "mlx5_core");
    CU_ASSERT_EQUAL(node_sysfs_read_link(root, PF "iommu_group", buf, sizeof(buf)), 2);
    CU_ASSERT_STRING_EQUAL(buf, "40");
    CU_ASSERT_EQUAL(node_sysfs_read_link(root, PF "virtfn2", buf, sizeof(buf)), 12);
    CU_ASSERT_STRING_EQUAL(buf, "0000:3b:00.4");
    CU_ASSERT_EQUAL(
            node_sysfs_read_link(root, "bus/pci/devices/0000:3b:00.3/physfn", buf, sizeof(buf)),
            12);
    CU_ASSERT_STRING_EQUAL(buf, "0000:3b:00.0");
    /* The device directory itself is reached through bus/pci/devices/<bdf>, a link. */
    CU_ASSERT_EQUAL(node_sysfs_read_link(root, "bus/pci/devices/0000:3b:00.0", buf, sizeof(buf)),
                    12);
    CU_ASSERT_STRING_EQUAL(buf, "0000:3b:00.0");
    /* Unbound device, device without IOMMU group. */
    CU_ASSERT_EQUAL(
            node_sysfs_read_link(root, "bus/pci/devices/0000:d8:00.2/driver", buf, sizeof(buf)),
            -ENOENT);
    CU_ASSERT_STRING_EQUAL(buf, "");
    CU_ASSERT_EQUAL(node_sysfs_read_link(root, "bus/pci/devices/10000:01:00.0/iommu_group", buf,
                                         sizeof(buf)),
                    -ENOENT);
    CU_ASSERT_EQUAL(node_sysfs_read_link(root, PF "vendor", buf, sizeof(buf)), -EINVAL);
    CU_ASSERT_EQUAL(node_sysfs_read_link(root, PF "driver", buf, 9), -EFBIG);
    CU_ASSERT_EQUAL(node_sysfs_read_link(root, PF "driver/", buf, sizeof(buf)), -EINVAL);
    CU_ASSERT_EQUAL(node_sysfs_read_link(root, "/sys/bus", buf, sizeof(buf)), -EINVAL);
}

static void test_read_link_target(void)
{
    char buf[128];
    int n = node_sysfs_read_link_target(root, PF "driver", buf, sizeof(buf));
    CU_ASSERT_EQUAL(n, (int)strlen("../../../bus/pci/drivers/mlx5_core"));
    CU_ASSERT_STRING_EQUAL(buf, "../../../bus/pci/drivers/mlx5_core");
    CU_ASSERT_EQUAL(node_sysfs_read_link_target(root, PF "driver", buf, 10), -EFBIG);
    CU_ASSERT_STRING_EQUAL(buf, "");
    CU_ASSERT_EQUAL(node_sysfs_read_link_target(root, "bus/pci/devices/0000:d8:00.2/driver", buf,
                                                sizeof(buf)),
                    -ENOENT);
    CU_ASSERT_EQUAL(node_sysfs_read_link_target(root, PF "vendor", buf, sizeof(buf)), -EINVAL);
    CU_ASSERT_EQUAL(node_sysfs_read_link_target(root, "../etc", buf, sizeof(buf)), -EINVAL);
}

static void test_read_link_odd_targets(void)
{
    char path[400], buf[64];
    snprintf(path, sizeof(path), "%s/toplink", tree.root);
    CU_ASSERT_EQUAL(symlink("a/b/name//", path), 0);
    CU_ASSERT_EQUAL(node_sysfs_read_link(root, "toplink", buf, sizeof(buf)), 4);
    CU_ASSERT_STRING_EQUAL(buf, "name");
    unlink(path);
    CU_ASSERT_EQUAL(symlink("/", path), 0);
    CU_ASSERT_EQUAL(node_sysfs_read_link(root, "toplink", buf, sizeof(buf)), -EINVAL);
    unlink(path);
    CU_ASSERT_EQUAL(symlink("../..", path), 0);
    CU_ASSERT_EQUAL(node_sysfs_read_link(root, "toplink", buf, sizeof(buf)), -EINVAL);
    unlink(path);
}

static void test_read_link_in(void)
{
    char buf[64], path[400];
    CU_ASSERT_EQUAL(node_sysfs_read_link_in(root, PF "driver", "bus/pci/drivers", buf, sizeof(buf)),
                    9);
    CU_ASSERT_STRING_EQUAL(buf, "mlx5_core");
    CU_ASSERT_EQUAL(node_sysfs_read_link_in(root, PF "iommu_group", "kernel/iommu_groups", buf,
                                            sizeof(buf)),
                    2);
    CU_ASSERT_STRING_EQUAL(buf, "40");
    CU_ASSERT_EQUAL(node_sysfs_read_link_in(root, "bus/pci/devices/0000:3b:00.3/physfn",
                                            "bus/pci/devices", buf, sizeof(buf)),
                    12);
    /* Absent; leads to a directory elsewhere; the right name in the wrong directory. */
    CU_ASSERT_EQUAL(node_sysfs_read_link_in(root, "bus/pci/devices/0000:d8:00.2/driver",
                                            "bus/pci/drivers", buf, sizeof(buf)),
                    -ENOENT);
    CU_ASSERT_EQUAL(
            node_sysfs_read_link_in(root, PF "driver", "kernel/iommu_groups", buf, sizeof(buf)),
            -EXDEV);
    CU_ASSERT_STRING_EQUAL(buf, "");
    CU_ASSERT_EQUAL(
            node_sysfs_read_link_in(root, PF "iommu_group", "bus/pci/drivers", buf, sizeof(buf)),
            -EXDEV);
    /* Too small a buffer; not a link. */
    CU_ASSERT_EQUAL(node_sysfs_read_link_in(root, PF "driver", "bus/pci/drivers", buf, 9), -EFBIG);
    CU_ASSERT_EQUAL(node_sysfs_read_link_in(root, PF "vendor", "bus/pci/drivers", buf, sizeof(buf)),
                    -EINVAL);
    /* Dangling, a loop, a file. */
    snprintf(path, sizeof(path), "%s/linkin", tree.root);
    CU_ASSERT_EQUAL(symlink("bus/pci/drivers/gone", path), 0);
    CU_ASSERT_EQUAL(node_sysfs_read_link_in(root, "linkin", "bus/pci/drivers", buf, sizeof(buf)),
                    -ENOENT);
    unlink(path);
    CU_ASSERT_EQUAL(symlink("linkin", path), 0);
    CU_ASSERT_EQUAL(node_sysfs_read_link_in(root, "linkin", ".", buf, sizeof(buf)), -ELOOP);
    unlink(path);
    CU_ASSERT_EQUAL(symlink(PF "vendor", path), 0);
    CU_ASSERT_EQUAL(node_sysfs_read_link_in(root, "linkin", PF, buf, sizeof(buf)), -ENOTDIR);
    unlink(path);
}

/* Renames a file back and forth until told to stop: a rename that lands while a concurrent
 * openat2(RESOLVE_IN_ROOT) steps through ".." makes it fail with EAGAIN. */
struct renamer {
    char a[400], b[400];
    volatile int stop;
    volatile long renames;
};

static void *rename_loop(void *arg)
{
    struct renamer *rn = arg;
    while (!rn->stop) {
        (void)rename(rn->a, rn->b);
        (void)rename(rn->b, rn->a);
        rn->renames += 2;
    }
    return NULL;
}

/* Reads through links full of ".." succeed while renames race them (EAGAIN is retried). A race
 * needs both threads running at once; on an idle machine a few percent of lookups meet one. */
static void test_reads_survive_renames(void)
{
    struct renamer rn = {.stop = 0};
    snprintf(rn.a, sizeof(rn.a), "%s/rename-a", tree.dir);
    snprintf(rn.b, sizeof(rn.b), "%s/rename-b", tree.dir);
    int fd = open(rn.a, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    CU_ASSERT(fd >= 0);
    if (fd >= 0)
        close(fd);
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, rename_loop, &rn), 0);
    long failed = 0, reads = 0;
    char buf[64];
    /* At least 20000 reads, and renames all along (up to 200000 reads on a busy machine). */
    for (; reads < 20000 || (rn.renames < 20000 && reads < 200000); reads++)
        failed += node_sysfs_read(root, PF "numa_node", buf, sizeof(buf)) != 1;
    rn.stop = 1;
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(failed, 0);
    (void)unlink(rn.a);
    (void)unlink(rn.b);
}

static void test_check_dir(void)
{
    char path[400];
    CU_ASSERT_EQUAL(node_sysfs_check_dir(root, "bus/pci/devices/0000:3b:00.0"), 0);
    CU_ASSERT_EQUAL(node_sysfs_check_dir(root, PF "driver"), 0);
    CU_ASSERT_EQUAL(node_sysfs_check_dir(root, PF "vendor"), -ENOTDIR);
    CU_ASSERT_EQUAL(node_sysfs_check_dir(root, "bus/pci/devices/0000:99:00.0"), -ENOENT);
    CU_ASSERT_EQUAL(node_sysfs_check_dir(root, "../"), -EINVAL);
    snprintf(path, sizeof(path), "%s/loop", tree.root);
    CU_ASSERT_EQUAL(symlink("loop", path), 0);
    CU_ASSERT_EQUAL(node_sysfs_check_dir(root, "loop"), -ELOOP);
    unlink(path);
}

/* Whether this kernel (or valgrind) has openat2; without it links are followed as usual. */
static bool have_openat2(void)
{
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
    long fd = syscall(SYS_openat2, root, ".", &how, sizeof(how));
    if (fd >= 0)
        close((int)fd);
    return fd >= 0 || (errno != ENOSYS && errno != EPERM);
}

/* Links that point outside the tree resolve inside it (openat2 RESOLVE_IN_ROOT). */
static void test_links_stay_in_root(void)
{
    char path[400], buf[64];
    snprintf(path, sizeof(path), "%s/escape-abs", tree.root);
    CU_ASSERT_EQUAL(symlink("/proc/self/comm", path), 0);
    snprintf(path, sizeof(path), "%s/escape-rel", tree.root);
    CU_ASSERT_EQUAL(symlink("../../../../../../../../../../proc/self/comm", path), 0);
    snprintf(path, sizeof(path), "%s/inside-abs", tree.root);
    CU_ASSERT_EQUAL(symlink("/" PF "vendor", path), 0);
    if (!have_openat2()) {
        /* The fallback follows links like open(2): they reach /proc. */
        CU_ASSERT_TRUE(node_sysfs_read(root, "escape-abs", buf, sizeof(buf)) > 0);
        return;
    }
    CU_ASSERT_EQUAL(node_sysfs_read(root, "escape-abs", buf, sizeof(buf)), -ENOENT);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "escape-rel", buf, sizeof(buf)), -ENOENT);
    /* An absolute link inside the tree means the tree's own path. */
    CU_ASSERT_EQUAL(node_sysfs_read(root, "inside-abs", buf, sizeof(buf)), 6);
}

/* A directory opened once: a link to it that leads out of the root resolves inside the root;
 * what is read below it stays in it (links in it that lead out, by ".." or an absolute target,
 * lead nowhere); and it is the directory opened that is read, even when its path is replaced
 * (by a link out of the root) between the open and the reads. */
static void test_open_dir(void)
{
    char path[PATH_MAX + 16], moved[PATH_MAX + 32], devdir[PATH_MAX], buf[64];
    if (!have_openat2())
        return; /* (the fallback follows links like open(2)) */
    CU_ASSERT_EQUAL(node_sysfs_open_dir(root, PF "vendor"), -ENOTDIR);
    CU_ASSERT_EQUAL(node_sysfs_open_dir(root, "../x"), -EINVAL);
    snprintf(path, sizeof(path), "%s/dir-out-abs", tree.root);
    CU_ASSERT_EQUAL(symlink("/proc/self", path), 0);
    CU_ASSERT_EQUAL(node_sysfs_open_dir(root, "dir-out-abs"), -ENOENT);
    unlink(path);
    snprintf(path, sizeof(path), "%s/dir-out-rel", tree.root);
    CU_ASSERT_EQUAL(symlink("../../../../../../../../../../proc/self", path), 0);
    CU_ASSERT_EQUAL(node_sysfs_open_dir(root, "dir-out-rel"), -ENOENT);
    unlink(path);

    snprintf(path, sizeof(path), "%s/bus/pci/devices/0000:3b:00.0", tree.root);
    CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(path, devdir));
    int dev = node_sysfs_open_dir(root, "bus/pci/devices/0000:3b:00.0");
    CU_ASSERT_FATAL(dev >= 0);
    CU_ASSERT_EQUAL(node_sysfs_read(dev, "vendor", buf, sizeof(buf)), 6);
    CU_ASSERT_STRING_EQUAL(buf, "0x15b3");
    CU_ASSERT_EQUAL(node_sysfs_read(dev, "../0000:3b:00.1/vendor", buf, sizeof(buf)), -EINVAL);
    snprintf(path, sizeof(path), "%s/out-abs", devdir);
    CU_ASSERT_EQUAL(symlink("/proc/self/comm", path), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(dev, "out-abs", buf, sizeof(buf)), -ENOENT);
    unlink(path);
    snprintf(path, sizeof(path), "%s/out-rel", devdir);
    CU_ASSERT_EQUAL(symlink("../0000:3b:00.1/vendor", path), 0); /* another device's */
    CU_ASSERT_EQUAL(node_sysfs_read(dev, "out-rel", buf, sizeof(buf)), -ENOENT);
    unlink(path);

    /* the directory renamed away and a link out of the root put in its place */
    snprintf(path, sizeof(path), "%s", devdir);
    snprintf(moved, sizeof(moved), "%s.moved", devdir);
    CU_ASSERT_EQUAL_FATAL(rename(path, moved), 0);
    CU_ASSERT_EQUAL(symlink("/proc/self", path), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(dev, "vendor", buf, sizeof(buf)), 6);
    CU_ASSERT_STRING_EQUAL(buf, "0x15b3");
    CU_ASSERT_EQUAL(node_sysfs_read(dev, "comm", buf, sizeof(buf)), -ENOENT);
    CU_ASSERT_EQUAL(node_sysfs_open_dir(root, "bus/pci/devices/0000:3b:00.0"), -ENOENT);
    unlink(path);
    CU_ASSERT_EQUAL(rename(moved, path), 0);
    close(dev);
}

static void test_list(void)
{
    char **names = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(node_sysfs_list(root, "bus/pci/drivers/vfio-pci", &names, &n), 0);
    static const char *const want[] = {"0000:18:00.0", "0000:18:00.1", "0000:3b:00.4",
                                       "0000:d8:00.3", "bind",         "new_id",
                                       "remove_id",    "uevent",       "unbind"};
    CU_ASSERT_EQUAL(n, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; names && i < n && i < sizeof(want) / sizeof(want[0]); i++)
        CU_ASSERT_STRING_EQUAL(names[i], want[i]);
    CU_ASSERT_PTR_NULL(names ? names[n] : NULL);
    node_sysfs_names_free(names);

    CU_ASSERT_EQUAL(node_sysfs_list(root, PF "iommu_group/devices", &names, &n), 0);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_STRING_EQUAL(names ? names[0] : "", "0000:3b:00.0");
    node_sysfs_names_free(names);
    CU_ASSERT_EQUAL(node_sysfs_list(root, "kernel/iommu_groups/61/devices", &names, &n), 0);
    CU_ASSERT_EQUAL(n, 4);
    node_sysfs_names_free(names);
    CU_ASSERT_EQUAL(node_sysfs_list(root, "bus/pci/devices", &names, &n), 0);
    CU_ASSERT_EQUAL(n, 41);
    node_sysfs_names_free(names);
}

static void test_list_empty_and_errors(void)
{
    char **names = NULL;
    size_t n = 99;
    CU_ASSERT_EQUAL(node_sysfs_list(root, "bus/pci/slots", &names, &n), 0);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_PTR_NOT_NULL(names);
    CU_ASSERT_PTR_NULL(names ? names[0] : NULL);
    node_sysfs_names_free(names);
    node_sysfs_names_free(NULL);
    names = NULL;
    CU_ASSERT_EQUAL(node_sysfs_list(root, "nonexistent", &names, &n), -ENOENT);
    CU_ASSERT_EQUAL(node_sysfs_list(root, PF "vendor", &names, &n), -ENOTDIR);
    CU_ASSERT_EQUAL(node_sysfs_list(root, "../", &names, &n), -EINVAL);
    CU_ASSERT_PTR_NULL(names);
}

static void test_write(void)
{
    char buf[64];
    const char *ov = "bus/pci/devices/0000:d8:00.2/driver_override";
    CU_ASSERT_EQUAL(node_sysfs_write(root, ov, "vfio-pci"), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(root, ov, buf, sizeof(buf)), 8);
    CU_ASSERT_STRING_EQUAL(buf, "vfio-pci");
    CU_ASSERT_EQUAL(node_sysfs_write(root, ov, "\n"), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(root, ov, buf, sizeof(buf)), 0);
    CU_ASSERT_EQUAL(node_sysfs_write(root, ov, "(null)\n"), 0);
    CU_ASSERT_EQUAL(node_sysfs_write(root, ov, ""), -EINVAL);
    CU_ASSERT_EQUAL(node_sysfs_write(root, "bus/pci/drivers_probe", "0000:d8:00.2"), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "bus/pci/drivers_probe", buf, sizeof(buf)), 12);
    CU_ASSERT_EQUAL(node_sysfs_write(root, PF "driver/unbind", "0000:3b:00.0"), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "bus/pci/drivers/mlx5_core/unbind", buf, sizeof(buf)),
                    12);
    /* Never creates files. */
    CU_ASSERT_EQUAL(node_sysfs_write(root, "bus/pci/drivers/nonexistent/bind", "x"), -ENOENT);
    CU_ASSERT_EQUAL(node_sysfs_write(root, PF "not_an_attribute", "x"), -ENOENT);
    CU_ASSERT_EQUAL(node_sysfs_write(root, "bus/pci", "x"), -EISDIR);
    CU_ASSERT_EQUAL(node_sysfs_write(root, "/bus/pci/drivers_probe", "x"), -EINVAL);
}

static CU_TestInfo tests[] = {
        {"open root", test_open_root},
        {"read strips the newline", test_read_strips_newline},
        {"read errors and bad paths", test_read_errors},
        {"read cap of 4 KiB", test_read_cap},
        {"read newlines and NUL bytes", test_read_newlines_and_nul},
        {"chomp", test_chomp},
        {"strict integer parsing", test_parse_int},
        {"read integers", test_read_int},
        {"read links", test_read_link},
        {"read links with odd targets", test_read_link_odd_targets},
        {"read a whole link target", test_read_link_target},
        {"links stay in the root", test_links_stay_in_root},
        {"a directory opened once", test_open_dir},
        {"list directories", test_list},
        {"list empty directories and errors", test_list_empty_and_errors},
        {"write attributes", test_write},
        {"read a link that must lead into a directory", test_read_link_in},
        {"check a directory", test_check_dir},
        {"reads survive concurrent renames", test_reads_survive_renames},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo sysfs_suites[] = {
        {"sysfs", suite_init, suite_clean, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
