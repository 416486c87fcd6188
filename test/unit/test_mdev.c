/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_mdev.c - node/mdev against fake sysfs trees (hack/mk-sysfs-fixture.sh's
 * mdev_type and mdev lines): a PCI parent with two types and the mtty sample's virtual parent
 * (mtty-1 24 available, mtty-2 12) with an instance each; the scan, find, create (the UUID in
 * the right create file; an existing instance of that type is a success that writes nothing),
 * remove, every refusal with its message, and trees broken on purpose (garbage in
 * available_instances, missing files, dangling links), which are skipped with a reason. The
 * UUID validator and generator.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "node/mdev.h"
#include "node/sysfs.h"
#include "sysfs_tree.h"

#define MTTY_UUID "8f3f6a52-3b4e-4a8e-9d1a-2f6f0c1b7e21"
#define GVT_UUID  "1c4a1f8e-3e0b-4c8b-8d3a-55aa00bb11cc"
#define NEW_UUID  "0b5e2a4c-7d1f-4e3a-9c2b-6a8d0e4f1a2b"
#define MTTY_DIR  "devices/virtual/mtty/mtty"
#define GVT_DIR   "devices/pci0000:00/0000:00:02.0"
#define TYPES     "/mdev_supported_types/"

static const char *const DESC =
        "0000:00:02.0 0300 8086:5917 driver=i915 iommu=1\n"
        "0000:00:03.0 0200 8086:10d3 driver=e1000e iommu=2\n"
        "mdev_type 0000:00:02.0 i915-GVTg_V5_4 available=2 name=GVTg%5fV5%5f4 "
        "description=low_gm_size:_128MB\n"
        "mdev_type 0000:00:02.0 i915-GVTg_V5_8 available=0\n"
        "mdev_type mtty mtty-1 available=24 name=Single_port_serial\n"
        "mdev_type mtty mtty-2 available=12 name=Dual_port_serial\n"
        "mdev " MTTY_UUID " mtty mtty-2 iommu=30\n"
        "mdev " GVT_UUID " 0000:00:02.0 i915-GVTg_V5_8 iommu=31\n";

static struct sysfs_tree tree;
static int root_fd = -1;

/* A fresh tree for each test: several of them break it. */
static int setup(void)
{
    if (sysfs_tree_make_text(&tree, DESC) < 0)
        return -1;
    return sysfs_tree_open_root(&tree, &root_fd);
}

static void fresh(void)
{
    sysfs_tree_close(&tree, &root_fd);
    CU_ASSERT_FATAL(setup() == 0);
}

static int suite_init(void)
{
    return setup();
}

static int suite_clean(void)
{
    sysfs_tree_close(&tree, &root_fd);
    (void)sysfs_tree_fail_write(NULL, 0);
    return 0;
}

/* What file `path` of the tree holds ("" when empty or absent). */
static const char *content(const char *path)
{
    static char buf[256];
    int r = node_sysfs_read(root_fd, path, buf, sizeof(buf));
    return r < 0 ? "" : buf;
}

static void put(const char *path, const char *text)
{
    CU_ASSERT_EQUAL_FATAL(sysfs_tree_put(&tree, path, text, strlen(text)), 0);
}

static void test_uuid_valid(void)
{
    CU_ASSERT_TRUE(node_mdev_uuid_valid(MTTY_UUID));
    CU_ASSERT_TRUE(node_mdev_uuid_valid("00000000-0000-0000-0000-000000000000"));
    CU_ASSERT_FALSE(node_mdev_uuid_valid("8F3F6A52-3B4E-4A8E-9D1A-2F6F0C1B7E21"));
    CU_ASSERT_FALSE(node_mdev_uuid_valid("8f3f6a52-3b4e-4a8e-9d1a-2f6f0c1b7e2"));
    CU_ASSERT_FALSE(node_mdev_uuid_valid("8f3f6a52-3b4e-4a8e-9d1a-2f6f0c1b7e211"));
    CU_ASSERT_FALSE(node_mdev_uuid_valid("8f3f6a523-b4e-4a8e-9d1a-2f6f0c1b7e21"));
    CU_ASSERT_FALSE(node_mdev_uuid_valid("8f3f6a52-3b4e-4a8e-9d1a-2f6f0c1b7g21"));
    CU_ASSERT_FALSE(node_mdev_uuid_valid("8f3f6a52-3b4e-4a8e-9d1a-2f6f0c1b7e2 "));
    CU_ASSERT_FALSE(node_mdev_uuid_valid("8f3f6a52_3b4e-4a8e-9d1a-2f6f0c1b7e21"));
    CU_ASSERT_FALSE(node_mdev_uuid_valid("{8f3f6a52-3b4e-4a8e-9d1a-2f6f0c1b7e2}"));
    CU_ASSERT_FALSE(node_mdev_uuid_valid("8f3f6a523b4e4a8e9d1a2f6f0c1b7e21"));
    CU_ASSERT_FALSE(node_mdev_uuid_valid(""));
}

static void test_uuid_new(void)
{
    char prev[NODE_MDEV_UUID_SIZE] = "";
    for (int i = 0; i < 1000; i++) {
        char u[NODE_MDEV_UUID_SIZE];
        CU_ASSERT_EQUAL_FATAL(node_mdev_uuid_new(u), 0);
        CU_ASSERT_TRUE(node_mdev_uuid_valid(u));
        CU_ASSERT_EQUAL(u[14], '4');                   /* version 4 */
        CU_ASSERT_PTR_NOT_NULL(strchr("89ab", u[19])); /* the RFC 4122 variant */
        CU_ASSERT_STRING_NOT_EQUAL(u, prev);
        memcpy(prev, u, sizeof(u));
    }
}

static void check_type(const struct node_mdev_type *t, const char *id, const char *name,
                       const char *description, int available)
{
    CU_ASSERT_STRING_EQUAL(t->id, id);
    CU_ASSERT_STRING_EQUAL(t->name, name);
    CU_ASSERT_STRING_EQUAL(t->description, description);
    CU_ASSERT_STRING_EQUAL(t->device_api, "vfio-pci");
    CU_ASSERT_EQUAL(t->available, available);
}

static void check_instance(const struct node_mdev_instance *m, const char *uuid, const char *type,
                           const char *parent, int group)
{
    CU_ASSERT_STRING_EQUAL(m->uuid, uuid);
    CU_ASSERT_STRING_EQUAL(m->type, type);
    CU_ASSERT_STRING_EQUAL(m->parent, parent);
    CU_ASSERT_EQUAL(m->iommu_group, group);
}

static void test_scan(void)
{
    struct node_mdev_scan s;
    struct err e = {{0}};
    CU_ASSERT_EQUAL_FATAL(node_mdev_scan(root_fd, &s, &e), 0);
    bool shape = s.n_parents == 2 && s.parents[0].n_types == 2 && s.parents[1].n_types == 2 &&
                 s.n_instances == 2;
    CU_ASSERT_TRUE(shape); /* then the details (no fatal assert: the scan is freed below) */
    if (shape) {
        CU_ASSERT_STRING_EQUAL(s.parents[0].name, "0000:00:02.0");
        CU_ASSERT_TRUE(s.parents[0].pci);
        check_type(&s.parents[0].types[0], "i915-GVTg_V5_4", "GVTg_V5_4", "low gm size: 128MB", 2);
        check_type(&s.parents[0].types[1], "i915-GVTg_V5_8", "", "", 0);
        CU_ASSERT_STRING_EQUAL(s.parents[1].name, "mtty");
        CU_ASSERT_FALSE(s.parents[1].pci);
        check_type(&s.parents[1].types[0], "mtty-1", "Single port serial", "", 24);
        check_type(&s.parents[1].types[1], "mtty-2", "Dual port serial", "", 12);
        check_instance(&s.instances[0], GVT_UUID, "i915-GVTg_V5_8", "0000:00:02.0", 31);
        check_instance(&s.instances[1], MTTY_UUID, "mtty-2", "mtty", 30);
    }
    CU_ASSERT_EQUAL(s.n_skipped, 0);
    node_mdev_scan_done(&s);
    CU_ASSERT_PTR_NULL(s.parents);
    node_mdev_scan_done(NULL);
}

/* PCI parents are known by either sign: a path under devices/pci* (without a subsystem link
 * here), or a subsystem link to bus/pci (with a path elsewhere). */
static void test_scan_pci(void)
{
    fresh();
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&tree, GVT_DIR "/subsystem"), 0);
    CU_ASSERT_EQUAL(sysfs_tree_link(&tree, MTTY_DIR "/subsystem", "../../../../bus/pci"), 0);
    struct node_mdev_scan s;
    CU_ASSERT_EQUAL_FATAL(node_mdev_scan(root_fd, &s, NULL), 0);
    CU_ASSERT_EQUAL(s.n_parents, 2);
    CU_ASSERT_TRUE(s.n_parents == 2 && s.parents[0].pci);
    CU_ASSERT_TRUE(s.n_parents == 2 && s.parents[1].pci);
    node_mdev_scan_done(&s);
}

static void test_find(void)
{
    struct node_mdev_instance m;
    struct err e = {{0}};
    CU_ASSERT_EQUAL(node_mdev_find(root_fd, MTTY_UUID, &m, &e), 1);
    check_instance(&m, MTTY_UUID, "mtty-2", "mtty", 30);
    CU_ASSERT_EQUAL(node_mdev_find(root_fd, NEW_UUID, &m, &e), 0);
    CU_ASSERT_EQUAL(node_mdev_find(root_fd, "8F3F6A52-3B4E-4A8E-9D1A-2F6F0C1B7E21", &m, &e),
                    -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "lowercase hex digits"));
    CU_ASSERT_EQUAL(node_mdev_find(root_fd, "../../../etc", &m, NULL), -EINVAL);
}

static void test_create(void)
{
    struct err e = {{0}};
    fresh();
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "mtty", "mtty-1", NEW_UUID, &e), 0);
    CU_ASSERT_STRING_EQUAL(content(MTTY_DIR TYPES "mtty-1/create"), NEW_UUID);
    CU_ASSERT_STRING_EQUAL(content(MTTY_DIR TYPES "mtty-2/create"), "");
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "0000:00:02.0", "i915-GVTg_V5_4", GVT_UUID "", &e),
                    -EEXIST);
    char u[NODE_MDEV_UUID_SIZE];
    CU_ASSERT_EQUAL_FATAL(node_mdev_uuid_new(u), 0);
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "0000:00:02.0", "i915-GVTg_V5_4", u, &e), 0);
    CU_ASSERT_STRING_EQUAL(content(GVT_DIR TYPES "i915-GVTg_V5_4/create"), u);
    CU_ASSERT_STRING_EQUAL(content(GVT_DIR TYPES "i915-GVTg_V5_8/create"), "");
}

/* The instance exists (after a restart; or the kernel made it from our earlier write): the same
 * type and parent is a success that writes nothing; another type or parent is refused. */
static void test_create_existing(void)
{
    struct err e = {{0}};
    fresh();
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "mtty", "mtty-2", MTTY_UUID, &e), 1);
    CU_ASSERT_STRING_EQUAL(content(MTTY_DIR TYPES "mtty-2/create"), "");
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "mtty", "mtty-1", MTTY_UUID, &e), -EEXIST);
    CU_ASSERT_STRING_EQUAL(e.msg, "mdev " MTTY_UUID " exists already as type mtty-2 on mtty, not "
                                  "mtty-1 on mtty: remove it first or use another UUID");
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "0000:00:02.0", "mtty-2", MTTY_UUID, &e), -EEXIST);
    CU_ASSERT_STRING_EQUAL(content(MTTY_DIR TYPES "mtty-1/create"), "");
    /* the instance is there but its type link dangles: refused, with what to do */
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&tree, MTTY_DIR TYPES "mtty-2"), 0);
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "mtty", "mtty-2", MTTY_UUID, &e), -EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "exists but cannot be read (mdev_type: a dangling link)"));
}

static void test_create_refused(void)
{
    struct err e = {{0}};
    fresh();
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "mtty", "mtty-1", "not-a-uuid", &e), -EINVAL);
    CU_ASSERT_STRING_EQUAL(e.msg,
                           "\"not-a-uuid\" is not a UUID as mdevs are named: 8-4-4-4-12 "
                           "lowercase hex digits, e.g. 8f3f6a52-3b4e-4a8e-9d1a-2f6f0c1b7e21");
    CU_ASSERT_EQUAL(
            node_mdev_create(root_fd, "mtty", "mtty-1", "0B5E2A4C-7D1F-4E3A-9C2B-6A8D0E4F1A2B", &e),
            -EINVAL);
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "..", "mtty-1", NEW_UUID, &e), -EINVAL);
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "mtty", "../mtty-1", NEW_UUID, &e), -EINVAL);
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "", "mtty-1", NEW_UUID, &e), -EINVAL);
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "mdpy", "mdpy-1", NEW_UUID, &e), -ENODEV);
    CU_ASSERT_STRING_EQUAL(e.msg, "no mdev parent mdpy (class/mdev_bus/mdpy: absent): "
                                  "load its driver, or use one of the mdev parents: "
                                  "0000:00:02.0, mtty");
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "0000:00:03.0", "x", NEW_UUID, &e), -ENODEV);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "PCI device 0000:00:03.0 is not an mdev parent"));
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "mtty", "mtty-3", NEW_UUID, &e), -ENOENT);
    CU_ASSERT_STRING_EQUAL(e.msg, "parent mtty has no type mtty-3; its types are mtty-1, mtty-2");
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "0000:00:02.0", "i915-GVTg_V5_8", NEW_UUID, &e),
                    -ENOSPC);
    CU_ASSERT_STRING_EQUAL(e.msg, "type i915-GVTg_V5_8 on 0000:00:02.0 has no instance left "
                                  "(available_instances 0): remove an instance on 0000:00:02.0 "
                                  "first, or use another parent");
    /* nothing was written anywhere */
    CU_ASSERT_STRING_EQUAL(content(MTTY_DIR TYPES "mtty-1/create"), "");
    CU_ASSERT_STRING_EQUAL(content(MTTY_DIR TYPES "mtty-2/create"), "");
    CU_ASSERT_STRING_EQUAL(content(GVT_DIR TYPES "i915-GVTg_V5_4/create"), "");
    CU_ASSERT_STRING_EQUAL(content(GVT_DIR TYPES "i915-GVTg_V5_8/create"), "");
}

/* The kernel refuses the write: its errno, with what it means. */
static void test_create_kernel_refuses(void)
{
    struct err e = {{0}};
    fresh();
    CU_ASSERT_EQUAL(sysfs_tree_fail_write(MTTY_DIR TYPES "mtty-1/create", EUSERS), 0);
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "mtty", "mtty-1", NEW_UUID, &e), -EUSERS);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no instance of that type left on the parent"));
    (void)sysfs_tree_fail_write(NULL, 0);
}

/* Garbage or nothing in a type's files: create says so, the scan skips the type with why. */
static void test_malformed_type(void)
{
    struct err e = {{0}};
    struct node_mdev_scan s;
    fresh();
    put(MTTY_DIR TYPES "mtty-2/available_instances", "many\n");
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "mtty", "mtty-2", NEW_UUID, &e), -EIO);
    CU_ASSERT_STRING_EQUAL(e.msg,
                           "cannot read type mtty-2 on mtty: available_instances: malformed");
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&tree, GVT_DIR TYPES "i915-GVTg_V5_4/device_api"), 0);
    put(GVT_DIR TYPES "i915-GVTg_V5_8/available_instances", "-1\n");
    CU_ASSERT_EQUAL_FATAL(node_mdev_scan(root_fd, &s, &e), 0);
    bool shape = s.n_parents == 2 && s.parents[0].n_types == 0 && s.parents[1].n_types == 1 &&
                 s.n_skipped == 3;
    CU_ASSERT_TRUE(shape);
    if (shape) {
        CU_ASSERT_STRING_EQUAL(s.parents[1].types[0].id, "mtty-1");
        CU_ASSERT_STRING_EQUAL(s.skipped[0].entry, "0000:00:02.0/i915-GVTg_V5_4");
        CU_ASSERT_STRING_EQUAL(s.skipped[0].why, "device_api: absent");
        CU_ASSERT_STRING_EQUAL(s.skipped[1].entry, "0000:00:02.0/i915-GVTg_V5_8");
        CU_ASSERT_STRING_EQUAL(s.skipped[1].why, "available_instances: out of range");
        CU_ASSERT_STRING_EQUAL(s.skipped[2].entry, "mtty/mtty-2");
        CU_ASSERT_STRING_EQUAL(s.skipped[2].why, "available_instances: malformed");
    }
    CU_ASSERT_EQUAL(s.n_instances, 2); /* instances of skipped types are still there */
    node_mdev_scan_done(&s);
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&tree, MTTY_DIR TYPES "mtty-1/available_instances"), 0);
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "mtty", "mtty-1", NEW_UUID, &e), -EIO);
    CU_ASSERT_STRING_EQUAL(e.msg, "cannot read type mtty-1 on mtty: available_instances: absent");
    CU_ASSERT_STRING_EQUAL(content(MTTY_DIR TYPES "mtty-1/create"), "");
}

/* Dangling, misdirected and missing links and stray entries are skipped with a reason. */
static void test_broken_links(void)
{
    struct node_mdev_scan s;
    fresh();
    CU_ASSERT_EQUAL(sysfs_tree_link(&tree, "class/mdev_bus/gone", "../../devices/virtual/gone"), 0);
    CU_ASSERT_EQUAL(sysfs_tree_link(&tree, "class/mdev_bus/abs", "/devices/virtual/mtty/mtty"), 0);
    CU_ASSERT_EQUAL(sysfs_tree_link(&tree, "class/mdev_bus/up", "../../../../x"), 0);
    CU_ASSERT_EQUAL(sysfs_tree_link(&tree, "bus/mdev/devices/" NEW_UUID, "../../../nowhere"), 0);
    CU_ASSERT_EQUAL(sysfs_tree_link(&tree, "bus/mdev/devices/junk", "../../../devices"), 0);
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&tree, GVT_DIR "/" GVT_UUID "/mdev_type"), 0);
    CU_ASSERT_EQUAL(sysfs_tree_link(&tree, MTTY_DIR "/" MTTY_UUID "/iommu_group", "remove"), 0);
    CU_ASSERT_EQUAL_FATAL(node_mdev_scan(root_fd, &s, NULL), 0);
    CU_ASSERT_EQUAL(s.n_parents, 2);
    CU_ASSERT_EQUAL(s.n_instances, 0);
    const char *const want[][2] = {
            {"abs", "class/mdev_bus/abs: a link that leads outside sysfs"},
            {"gone", "class/mdev_bus/gone: a dangling link"},
            {"up", "class/mdev_bus/up: a link that leads outside sysfs"},
            {NEW_UUID, "bus/mdev/devices/" NEW_UUID ": a dangling link"},
            {GVT_UUID, "mdev_type: absent"},
            {MTTY_UUID, "iommu_group: not a directory"},
            {"junk", "not a lowercase UUID"},
    };
    CU_ASSERT_EQUAL(s.n_skipped, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < s.n_skipped && i < sizeof(want) / sizeof(want[0]); i++) {
        CU_ASSERT_STRING_EQUAL(s.skipped[i].entry, want[i][0]);
        CU_ASSERT_STRING_EQUAL(s.skipped[i].why, want[i][1]);
    }
    node_mdev_scan_done(&s);
    struct node_mdev_instance m;
    struct err e = {{0}};
    CU_ASSERT_EQUAL(node_mdev_find(root_fd, GVT_UUID, &m, &e), -ENOENT);
    CU_ASSERT_STRING_EQUAL(e.msg, "mdev_type: absent");
}

/* mdev_type leading somewhere that is not <parent>/mdev_supported_types/<type>. */
static void test_type_link_elsewhere(void)
{
    struct node_mdev_instance m;
    struct err e = {{0}};
    fresh();
    CU_ASSERT_EQUAL(sysfs_tree_link(&tree, MTTY_DIR "/" MTTY_UUID "/mdev_type", ".."), 0);
    CU_ASSERT_EQUAL(node_mdev_find(root_fd, MTTY_UUID, &m, &e), -EXDEV);
    CU_ASSERT_STRING_EQUAL(e.msg, "mdev_type: does not lead to a parent's "
                                  "mdev_supported_types/<type>");
}

/* An iommu_group link that leads nowhere is no group, as for PCI devices (node/vfio.c); one
 * that leads elsewhere is an error. */
static void test_group_dangling(void)
{
    struct node_mdev_instance m;
    fresh();
    CU_ASSERT_EQUAL(sysfs_tree_link(&tree, MTTY_DIR "/" MTTY_UUID "/iommu_group", "../nowhere"), 0);
    CU_ASSERT_EQUAL(node_mdev_find(root_fd, MTTY_UUID, &m, NULL), 1);
    CU_ASSERT_EQUAL(m.iommu_group, -1);
    /* one that leads to some other directory is an error */
    struct err e = {{0}};
    CU_ASSERT_EQUAL(sysfs_tree_link(&tree, MTTY_DIR "/" MTTY_UUID "/iommu_group",
                                    "../../../../../kernel/iommu_groups/30/devices"),
                    0);
    CU_ASSERT_EQUAL(node_mdev_find(root_fd, MTTY_UUID, &m, &e), -EXDEV);
    CU_ASSERT_STRING_EQUAL(e.msg, "iommu_group: leads outside kernel/iommu_groups");
}

static void test_remove(void)
{
    struct err e = {{0}};
    fresh();
    CU_ASSERT_EQUAL(node_mdev_remove(root_fd, MTTY_UUID, &e), 0);
    CU_ASSERT_STRING_EQUAL(content(MTTY_DIR "/" MTTY_UUID "/remove"), "1");
    CU_ASSERT_STRING_EQUAL(content(GVT_DIR "/" GVT_UUID "/remove"), "");
    CU_ASSERT_EQUAL(node_mdev_remove(root_fd, NEW_UUID, &e), 1); /* absent: nothing to do */
    CU_ASSERT_EQUAL(node_mdev_remove(root_fd, "../" MTTY_UUID, &e), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "is not a UUID as mdevs are named"));
    CU_ASSERT_EQUAL(sysfs_tree_fail_write("bus/mdev/devices/" GVT_UUID "/remove", EBUSY), 0);
    CU_ASSERT_EQUAL(node_mdev_remove(root_fd, GVT_UUID, &e), -EBUSY);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "stop the VM that holds it first"));
    (void)sysfs_tree_fail_write(NULL, 0);
    /* gone between the look and the write */
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&tree, GVT_DIR "/" GVT_UUID "/remove"), 0);
    CU_ASSERT_EQUAL(node_mdev_remove(root_fd, GVT_UUID, &e), 1);
}

/* No mdev module: nothing, and create says there are no parents. */
static void test_no_mdev(void)
{
    struct node_mdev_scan s;
    struct err e = {{0}};
    sysfs_tree_close(&tree, &root_fd);
    CU_ASSERT_EQUAL_FATAL(sysfs_tree_make_text(&tree, "0000:00:03.0 0200 8086:10d3\n"), 0);
    CU_ASSERT_EQUAL_FATAL(sysfs_tree_open_root(&tree, &root_fd), 0);
    CU_ASSERT_EQUAL_FATAL(node_mdev_scan(root_fd, &s, &e), 0);
    CU_ASSERT_EQUAL(s.n_parents + s.n_instances + s.n_skipped, 0);
    node_mdev_scan_done(&s);
    CU_ASSERT_EQUAL(node_mdev_create(root_fd, "mtty", "mtty-1", NEW_UUID, &e), -ENODEV);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "mdev parents: none"));
    CU_ASSERT_EQUAL(node_mdev_remove(root_fd, NEW_UUID, &e), 1);
}

static CU_TestInfo tests[] = {
        {"uuid_valid", test_uuid_valid},
        {"uuid_new", test_uuid_new},
        {"scan", test_scan},
        {"scan_pci", test_scan_pci},
        {"find", test_find},
        {"create", test_create},
        {"create_existing", test_create_existing},
        {"create_refused", test_create_refused},
        {"create_kernel_refuses", test_create_kernel_refuses},
        {"malformed_type", test_malformed_type},
        {"broken_links", test_broken_links},
        {"type_link_elsewhere", test_type_link_elsewhere},
        {"group_dangling", test_group_dangling},
        {"remove", test_remove},
        {"no_mdev", test_no_mdev},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo mdev_suites[] = {
        {"mdev", suite_init, suite_clean, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
