/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_pcireset.c - reset and verification on release: node/pcireset's verdict (pure)
 * and its sysfs readers on a fake tree (reset_method, reset, the ids of config), a release's
 * node work (controllers/binding/pcibind.c run_restore) that resets a device on vfio-pci and
 * judges it, and what the findings call for (controllers/health/healthrelease.c).
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "controllers/binding/pcibind.h"
#include "controllers/health/health.h"
#include "controllers/health/healthrelease.h"
#include "node/pcireset.h"
#include "node/sysfs.h"
#include "sysfs_tree.h"

static const char DESC[] =
        "0000:02:00.0 0200 8086:10d3 driver=vfio-pci iommu=7 reset_method=flr,pm\n"
        "0000:03:00.0 0200 8086:10d3 driver=vfio-pci iommu=8\n"
        "0000:04:00.0 0200 8086:10d3 driver=vfio-pci iommu=9 reset_method=pm live_ids=ffff:ffff\n"
        "0000:05:00.0 0200 8086:10d3 driver=vfio-pci iommu=10 reset_method=none\n"
        "0000:06:00.0 0200 8086:10d3 driver=vfio-pci iommu=11 reset_method=bus live_ids=8086:10d4\n"
        "0000:07:00.0 0200 8086:10d3 driver=vfio-pci iommu=12 reset_method=pm reset_file=0\n"
        "0000:08:00.0 0200 8086:10d3 driver=vfio-pci iommu=13 reset_method=flr\n"
        "0000:09:00.0 0200 8086:10d3 driver=e1000e iommu=14 reset_method=flr\n";

static struct sysfs_tree tree;
static int root = -1;

static int suite_init(void)
{
    if (sysfs_tree_make_text(&tree, DESC) < 0 || sysfs_tree_open_root(&tree, &root) < 0)
        return -1;
    char path[400];
    (void)snprintf(path, sizeof(path), "%s/module", tree.root);
    if (mkdir(path, 0755) < 0)
        return -1;
    (void)snprintf(path, sizeof(path), "%s/module/vfio_iommu_type1", tree.root);
    return mkdir(path, 0755) < 0 ? -1 : 0;
}

static int suite_clean(void)
{
    (void)sysfs_tree_fail_write(NULL, 0);
    sysfs_tree_close(&tree, &root);
    return 0;
}

static bool has(const char *s, const char *part)
{
    bool ok = s && strstr(s, part);
    if (!ok)
        fprintf(stderr, "\n  \"%s\" not in \"%s\"\n", part, s ? s : "(null)");
    return ok;
}

/* --- the verdict ------------------------------------------------------------------------------ */

static struct node_pcireset_facts facts(void)
{
    return (struct node_pcireset_facts){.address = "0000:02:00.0",
                                        .present = true,
                                        .reset_tried = true,
                                        .methods = "flr pm",
                                        .vendor = 0x8086,
                                        .device = 0x10d3,
                                        .live_vendor = 0x8086,
                                        .live_device = 0x10d3,
                                        .driver = "e1000e",
                                        .original = "e1000e"};
}

static void test_judge_healthy(void)
{
    struct node_pcireset_facts f = facts();
    struct node_pcireset_verdict v;
    node_pcireset_judge(&f, &v);
    CU_ASSERT_PTR_NULL(v.reason);
    CU_ASSERT_STRING_EQUAL(v.method, "flr");
    CU_ASSERT(has(v.message, "device 0000:02:00.0 reset by the kernel (reset_method: flr pm)"));
    CU_ASSERT(has(v.message, "back on driver \"e1000e\""));
    CU_ASSERT(has(v.message, "it answers as 8086:10d3"));
    CU_ASSERT(!strstr(v.message, "needs a fix"));
    CU_ASSERT_STRING_EQUAL(v.summary,
                           "reset by the kernel (reset_method: flr pm); it answers as 8086:10d3");
    /* no method: not reset, said; healthy */
    f.reset_tried = false;
    f.methods = NULL;
    f.skipped = "the kernel knows no reset method for it (no reset_method)";
    node_pcireset_judge(&f, &v);
    CU_ASSERT_PTR_NULL(v.reason);
    CU_ASSERT_STRING_EQUAL(v.method, "");
    CU_ASSERT(has(v.summary, "not reset: the kernel knows no reset method for it"));
    /* a kernel before 5.15: reset without reset_method */
    f = facts();
    f.methods = NULL;
    node_pcireset_judge(&f, &v);
    CU_ASSERT_STRING_EQUAL(v.method, "default");
    CU_ASSERT(has(v.message, "reset_method: not listed by this kernel"));
    /* ids that cannot be read are not judged */
    f = facts();
    f.ids_error = -EACCES;
    node_pcireset_judge(&f, &v);
    CU_ASSERT_PTR_NULL(v.reason);
    CU_ASSERT(has(v.message, "its ids were not verified (config: Permission denied)"));
    /* gone: the scan reports that (Removed) */
    f.present = false;
    f.live_vendor = f.live_device = 0xffff;
    f.ids_error = 0;
    node_pcireset_judge(&f, &v);
    CU_ASSERT_PTR_NULL(v.reason);
    CU_ASSERT(has(v.message, "gone from the bus"));
    CU_ASSERT(has(v.summary, "gone from the bus"));
}

static void test_judge_unhealthy(void)
{
    struct node_pcireset_facts f = facts();
    struct node_pcireset_verdict v;
    f.reset_error = -ENOTTY;
    node_pcireset_judge(&f, &v);
    CU_ASSERT_STRING_EQUAL(v.reason ? v.reason : "", NODE_PCIRESET_RESET_FAILED);
    CU_ASSERT(has(v.message, "its reset (reset_method: flr pm) failed: Inappropriate ioctl"));
    CU_ASSERT(has(v.message, "no method worked, or the device was not ready after it"));
    CU_ASSERT(has(v.message, "needs a fix on the host"));
    /* all ones says more than the failed reset */
    f.live_vendor = f.live_device = 0xffff;
    node_pcireset_judge(&f, &v);
    CU_ASSERT_STRING_EQUAL(v.reason ? v.reason : "", NODE_PCIRESET_NOT_RESPONDING);
    CU_ASSERT(has(v.message, "it does not respond: its config space reads all ones (ffff:ffff)"));
    /* another device answers */
    f = facts();
    f.live_device = 0x10d4;
    node_pcireset_judge(&f, &v);
    CU_ASSERT_STRING_EQUAL(v.reason ? v.reason : "", NODE_PCIRESET_ID_CHANGED);
    CU_ASSERT(has(v.message, "it answers as 8086:10d4, not as 8086:10d3"));
    /* only one half all ones: other ids, not silence */
    f.live_device = 0xffff;
    node_pcireset_judge(&f, &v);
    CU_ASSERT_STRING_EQUAL(v.reason ? v.reason : "", NODE_PCIRESET_ID_CHANGED);
    /* the driver did not take it back */
    f = facts();
    f.restore_error = -EIO;
    f.driver = "";
    node_pcireset_judge(&f, &v);
    CU_ASSERT_STRING_EQUAL(v.reason ? v.reason : "", NODE_PCIRESET_DRIVER_FAILED);
    CU_ASSERT(has(v.message, "its driver \"e1000e\" did not take it back (driver now: none)"));
    /* another failure of the restore (a write refused) is retried, not a verdict */
    f.restore_error = -EBUSY;
    node_pcireset_judge(&f, &v);
    CU_ASSERT_PTR_NULL(v.reason);
}

static void test_reasons_are_health_reasons(void)
{
    CU_ASSERT_STRING_EQUAL(NODE_PCIRESET_NOT_RESPONDING, HEALTH_NOT_RESPONDING);
    CU_ASSERT_STRING_EQUAL(NODE_PCIRESET_ID_CHANGED, HEALTH_ID_CHANGED);
    CU_ASSERT_STRING_EQUAL(NODE_PCIRESET_RESET_FAILED, HEALTH_RESET_FAILED);
    CU_ASSERT_STRING_EQUAL(NODE_PCIRESET_DRIVER_FAILED, HEALTH_DRIVER_FAILED);
}

/* --- the readers ------------------------------------------------------------------------------ */

static void test_readers(void)
{
    char m[64];
    uint16_t v = 0, d = 0;
    CU_ASSERT_EQUAL(node_pcireset_methods(root, "0000:02:00.0", m, sizeof(m)), 0);
    CU_ASSERT_STRING_EQUAL(m, "flr pm");
    CU_ASSERT_EQUAL(node_pcireset_methods(root, "0000:05:00.0", m, sizeof(m)), 0);
    CU_ASSERT_STRING_EQUAL(m, "");
    CU_ASSERT_EQUAL(node_pcireset_methods(root, "0000:03:00.0", m, sizeof(m)), -ENOENT);
    CU_ASSERT_EQUAL(node_pcireset_methods(root, "../x", m, sizeof(m)), -EINVAL);
    CU_ASSERT(node_pcireset_can_reset(root, "0000:02:00.0"));
    CU_ASSERT(!node_pcireset_can_reset(root, "0000:03:00.0"));
    CU_ASSERT(!node_pcireset_can_reset(root, "0000:07:00.0"));
    CU_ASSERT(!node_pcireset_can_reset(root, "0000:99:00.0"));
    CU_ASSERT_EQUAL(node_pcireset_live_ids(root, "0000:02:00.0", &v, &d), 0);
    CU_ASSERT(v == 0x8086 && d == 0x10d3);
    CU_ASSERT_EQUAL(node_pcireset_live_ids(root, "0000:04:00.0", &v, &d), 0);
    CU_ASSERT(v == 0xffff && d == 0xffff);
    CU_ASSERT_EQUAL(node_pcireset_live_ids(root, "0000:06:00.0", &v, &d), 0);
    CU_ASSERT(v == 0x8086 && d == 0x10d4);
    CU_ASSERT_EQUAL(node_pcireset_probe_ids(root, "0000:06:00.0", &v, &d), 0);
    CU_ASSERT(v == 0x8086 && d == 0x10d3);
    CU_ASSERT_EQUAL(node_pcireset_live_ids(root, "0000:99:00.0", &v, &d), -ENOENT);
    /* a config shorter than the ids */
    CU_ASSERT_EQUAL(sysfs_tree_put(&tree, "bus/pci/devices/0000:08:00.0/config", "\x86", 1), 0);
    CU_ASSERT_EQUAL(node_pcireset_live_ids(root, "0000:08:00.0", &v, &d), -EIO);
    CU_ASSERT_EQUAL(
            sysfs_tree_put(&tree, "bus/pci/devices/0000:08:00.0/config", "\x86\x80\xd3\x10", 4), 0);
    /* the reset: a write of 1, the kernel's errno back */
    CU_ASSERT_EQUAL(node_pcireset_reset(root, "0000:02:00.0"), 0);
    CU_ASSERT_EQUAL(node_sysfs_read(root, "bus/pci/devices/0000:02:00.0/reset", m, sizeof(m)), 1);
    CU_ASSERT_STRING_EQUAL(m, "1");
    CU_ASSERT_EQUAL(sysfs_tree_fail_write("bus/pci/devices/0000:02:00.0/reset", ENOTTY), 0);
    CU_ASSERT_EQUAL(node_pcireset_reset(root, "0000:02:00.0"), -ENOTTY);
    (void)sysfs_tree_fail_write(NULL, 0);
}

/* --- a release's node work -------------------------------------------------------------------- */

static struct bindplan_outcome release(const char *address, const char *original)
{
    struct pcibind_env env = {.sysfs_fd = root, .node_name = "n", .dev_root = tree.dir};
    struct pcibind_request req = {.address = address, .original = original};
    struct bindplan_outcome o;
    pcibind_restore_device(&env, &req, &o);
    return o;
}

static void reset_file_clear(const char *address)
{
    char path[128];
    (void)snprintf(path, sizeof(path), "bus/pci/devices/%s/reset", address);
    CU_ASSERT_EQUAL(sysfs_tree_put(&tree, path, "", 0), 0);
}

static bool was_reset(const char *address)
{
    char path[128], v[8] = "";
    (void)snprintf(path, sizeof(path), "bus/pci/devices/%s/reset", address);
    return node_sysfs_read(root, path, v, sizeof(v)) == 1 && strcmp(v, "1") == 0;
}

static void test_release_resets_and_verifies(void)
{
    reset_file_clear("0000:02:00.0");
    struct bindplan_outcome o = release("0000:02:00.0", "vfio-pci");
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_RESTORED);
    CU_ASSERT(o.release.checked && o.release.reset);
    CU_ASSERT(was_reset("0000:02:00.0"));
    CU_ASSERT_PTR_NULL(o.release.health);
    CU_ASSERT_STRING_EQUAL(o.release.method, "flr");
    CU_ASSERT(has(o.release.summary, "reset by the kernel (reset_method: flr pm)"));
    /* no reset_method, no reset: said, healthy */
    o = release("0000:03:00.0", "vfio-pci");
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_RESTORED);
    CU_ASSERT(o.release.checked && !o.release.reset && !o.release.health);
    CU_ASSERT(has(o.release.summary, "not reset: the kernel knows no reset method for it"));
    /* the admin turned every method off */
    o = release("0000:05:00.0", "vfio-pci");
    CU_ASSERT(!o.release.reset && !o.release.health);
    CU_ASSERT(has(o.release.summary, "reset_method is empty"));
    /* all ones after the release: NotResponding, the way back said */
    reset_file_clear("0000:04:00.0");
    o = release("0000:04:00.0", "vfio-pci");
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_RESTORED);
    CU_ASSERT(was_reset("0000:04:00.0"));
    CU_ASSERT_STRING_EQUAL(o.release.health ? o.release.health : "", HEALTH_NOT_RESPONDING);
    CU_ASSERT(has(o.release.message, "config space reads all ones"));
    char msg[BINDPLAN_MESSAGE_SIZE];
    healthrelease_message("n", "0000:04:00.0", &o.release, msg, sizeof(msg));
    CU_ASSERT(has(msg, "config space reads all ones (ffff:ffff); the device needs a fix on the "
                       "host"));
    CU_ASSERT(has(msg, "; once fixed: kubectl annotate --overwrite pcidevice n-000004000 "
                       "hostdevd.io/recheck-health=$(date +%s)"));
    /* other ids */
    o = release("0000:06:00.0", "vfio-pci");
    CU_ASSERT_STRING_EQUAL(o.release.health ? o.release.health : "", HEALTH_ID_CHANGED);
    /* the reset refused: ResetFailed, and the device still goes back */
    CU_ASSERT_EQUAL(sysfs_tree_fail_write("bus/pci/devices/0000:08:00.0/reset", EINVAL), 0);
    o = release("0000:08:00.0", "vfio-pci");
    (void)sysfs_tree_fail_write(NULL, 0);
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_RESTORED);
    CU_ASSERT(!o.release.reset);
    CU_ASSERT_STRING_EQUAL(o.release.health ? o.release.health : "", HEALTH_RESET_FAILED);
    CU_ASSERT(has(o.release.message, "failed: Invalid argument"));
    /* not on vfio-pci (a release resumed after its unbind): no reset */
    reset_file_clear("0000:09:00.0");
    o = release("0000:09:00.0", "e1000e");
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_RESTORED);
    CU_ASSERT(!was_reset("0000:09:00.0"));
    CU_ASSERT(has(o.release.summary, "not on vfio-pci when this release began"));
}

/* The tree's writes change no driver link: the original driver never takes the device back. */
static void test_release_driver_failed(void)
{
    struct bindplan_outcome o = release("0000:02:00.0", "e1000e");
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_FAILED);
    CU_ASSERT_STRING_EQUAL(o.reason ? o.reason : "", "RestoreFailed");
    CU_ASSERT(o.release.checked);
    CU_ASSERT_STRING_EQUAL(o.release.health ? o.release.health : "", HEALTH_DRIVER_FAILED);
    CU_ASSERT(has(o.release.message, "its driver \"e1000e\" did not take it back"));
}

/* --- what the findings call for --------------------------------------------------------------- */

static void test_events(void)
{
    struct bindplan_release r = {0};
    bool warning = true;
    CU_ASSERT_PTR_NULL(healthrelease_event(&r, false, &warning)); /* not checked */
    CU_ASSERT(!warning);
    r.checked = true;
    CU_ASSERT_PTR_NULL(healthrelease_event(&r, true, &warning));
    CU_ASSERT_STRING_EQUAL(healthrelease_event(&r, false, &warning), HEALTHRELEASE_RESTORED);
    CU_ASSERT(!warning);
    r.reset = true;
    CU_ASSERT_STRING_EQUAL(healthrelease_event(&r, true, &warning), HEALTHRELEASE_RESET);
    CU_ASSERT(!warning);
    r.health = HEALTH_NOT_RESPONDING;
    CU_ASSERT_STRING_EQUAL(healthrelease_event(&r, true, &warning), HEALTH_NOT_RESPONDING);
    CU_ASSERT(warning);
}

static CU_TestInfo tests[] = {
        {"verdict: healthy", test_judge_healthy},
        {"verdict: unhealthy, in order", test_judge_unhealthy},
        {"verdict reasons are the health store's", test_reasons_are_health_reasons},
        {"readers: reset_method, reset, ids", test_readers},
        {"release: reset and verify", test_release_resets_and_verifies},
        {"release: the driver did not take it back", test_release_driver_failed},
        {"release: the Event the findings call for", test_events},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo pcireset_suites[] = {
        {"pcireset", suite_init, suite_clean, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
