/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_pcibind.c - a deleted claim's node work (controllers/binding/pcibind.c,
 * run_restore) on a fake sysfs tree whose writes change nothing, as a kernel whose original driver
 * does not take the device back, and the decision on its outcome: a restore that did not take
 * effect says RestoreFailed and keeps the finalizer, so a device is never left on vfio-pci (or
 * driverless) without its claim.
 */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "controllers/binding/pcibind.h"
#include "controllers/claims/pciclaim.h"
#include "controllers/objects/pciobj.h"
#include "node/vfio.h"
#include "sysfs_tree.h"

static const char DESC[] = "0000:02:00.0 0200 8086:10d3 driver=vfio-pci iommu=7\n"
                           "0000:03:00.0 0200 8086:10d3 iommu=8\n"
                           "0000:04:00.0 0200 8086:10d3 driver=e1000e iommu=9\n"
                           "0000:05:00.0 0200 8086:10d3 driver=e1000e iommu=10\n"
                           "0000:05:00.1 0200 8086:10d3 iommu=10\n"
                           "0000:06:00.0 0200 8086:10d3 driver=e1000e\n"
                           "0000:07:00.0 0200 8086:10d3 driver=e1000e iommu=11\n"
                           "0000:00:1f.0 0601 8086:a1c1 iommu=12\n"
                           "0000:00:1f.3 0c0500 8086:a1a3 driver=i801_smbus iommu=12\n"
                           "0000:00:1f.6 0200 8086:15b7 driver=e1000e iommu=12\n"
                           "0000:08:00.0 0200 8086:10d3 driver=vfio-pci iommu=0\n"
                           "0000:0a:00.0 0200 8086:10d3 driver=e1000e iommu=14\n"
                           "0000:0a:00.1 0200 8086:10d3 driver=x iommu=14\n"
                           "0000:0b:00.0 0200 8086:10d3 driver=vfio-pci iommu=15\n"
                           "0000:0c:00.0 0200 8086:10d3 driver=vfio-pci iommu=16\n"
                           "0000:0d:00.0 0200 8086:10d3 driver=vfio-pci iommu=17\n";

static struct sysfs_tree tree;
static int root = -1;

static char proc[320];

/* vfio-pci's modules count as loaded (their sysfs directories exist), so a bind never loads
 * a module on this machine; a /proc with nothing mounted from the tree's devices. */
static int suite_init(void)
{
    static const char mounts[] = "22 1 0:21 / / rw - tmpfs tmpfs rw\n";
    if (sysfs_tree_make_text(&tree, DESC) < 0)
        return -1;
    if (sysfs_tree_open_root(&tree, &root) < 0)
        return -1;
    (void)snprintf(proc, sizeof(proc), "%s/proc", tree.dir);
    char path[400];
    (void)snprintf(path, sizeof(path), "%s/module", tree.root);
    if (mkdir(path, 0755) < 0)
        return -1;
    (void)snprintf(path, sizeof(path), "%s/module/vfio_iommu_type1", tree.root);
    if (mkdir(path, 0755) < 0)
        return -1;
    (void)snprintf(path, sizeof(path), "%s/1", proc);
    if (mkdir(proc, 0755) < 0 || mkdir(path, 0755) < 0)
        return -1;
    (void)snprintf(path, sizeof(path), "%s/1/mountinfo", proc);
    FILE *f = fopen(path, "we");
    if (!f || fputs(mounts, f) < 0 || fclose(f) != 0)
        return -1;
    static const char ov[] = "vfio-pci\n";
    if (sysfs_tree_put(&tree, "bus/pci/devices/0000:08:00.0/driver_override", ov, sizeof(ov) - 1))
        return -1;
    /* 0000:0c:00.0: put on vfio-pci by the admin with a driver_override (driverctl);
     * 0000:0d:00.0: by vfio-pci.ids=, no override */
    if (sysfs_tree_put(&tree, "bus/pci/devices/0000:0c:00.0/driver_override", ov, sizeof(ov) - 1))
        return -1;
    return sysfs_tree_put(&tree, "bus/pci/devices/0000:02:00.0/driver_override", ov,
                          sizeof(ov) - 1);
}

static int suite_clean(void)
{
    sysfs_tree_close(&tree, &root);
    return 0;
}

/* The restore of `address` with `original` recorded (NULL: nothing recorded). */
static struct bindplan_outcome restore(const char *address, const char *original)
{
    struct pcibind_env env = {.sysfs_fd = root, .node_name = "n", .dev_root = tree.dir};
    struct pcibind_job j = {.env = &env, .deleting = true, .recorded = original != NULL};
    (void)snprintf(j.address, sizeof(j.address), "%s", address);
    (void)snprintf(j.original, sizeof(j.original), "%s", original ? original : "");
    pcibind_run(&j.wj);
    pcibind_job_done(&j);
    return j.out;
}

/* The decision on `o` for a deleted claim of `address` that recorded e1000e and is bound. */
static void decide(const char *address, const struct bindplan_outcome *o,
                   struct pciclaim_decision *d)
{
    char text[1024];
    (void)snprintf(text, sizeof(text),
                   "{\"metadata\":{\"name\":\"n-x\",\"uid\":\"u1\",\"generation\":1,"
                   "\"finalizers\":[\"" PCIOBJ_FINALIZER "\"],"
                   "\"deletionTimestamp\":\"2026-11-25T10:00:00Z\"},"
                   "\"spec\":{\"address\":\"%s\",\"nodeName\":\"n\"},"
                   "\"status\":{\"kernelDriverToUnbind\":\"e1000e\",\"passthroughEnabled\":true}}",
                   address);
    cJSON *c = cJSON_Parse(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    pciclaim_decide(c, o, d);
    if (d->write_status) {
        char *patch = pciclaim_status_patch(c, &d->status, "2026-11-25T10:00:01Z");
        CU_ASSERT_PTR_NOT_NULL(patch);
        CU_ASSERT_PTR_NOT_NULL(patch ? strstr(patch, "\"reason\":\"RestoreFailed\"") : NULL);
        free(patch);
    }
    cJSON_Delete(c);
}

static void expect_failed(const char *address, const char *state)
{
    struct bindplan_outcome o = restore(address, "e1000e");
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_FAILED);
    CU_ASSERT_STRING_EQUAL(o.reason ? o.reason : "", "RestoreFailed");
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, "did not take effect"));
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, state));
    struct pciclaim_decision d;
    decide(address, &o, &d);
    CU_ASSERT(!d.remove_finalizer);
    CU_ASSERT(d.write_status);
    CU_ASSERT(d.retry);
    CU_ASSERT_STRING_EQUAL(d.status.reason ? d.status.reason : "", "RestoreFailed");
    CU_ASSERT_STRING_EQUAL(d.event_reason ? d.event_reason : "", "RestoreFailed");
}

/* The kernel keeps the device on vfio-pci (unbind changes nothing): the claim stays. */
static void test_restore_stays_on_vfio(void)
{
    expect_failed("0000:02:00.0", "driver=vfio-pci");
    struct node_vfio_dev d;
    CU_ASSERT_EQUAL(node_vfio_observe(root, "0000:02:00.0", &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "vfio-pci");
}

/* Unbound, and neither drivers_probe nor drivers/e1000e/bind brings e1000e back: the claim
 * stays, saying so, instead of "restored to driver \"\"". */
static void test_restore_driver_does_not_come_back(void)
{
    expect_failed("0000:03:00.0", "driver=(none)");
}

/* On the original driver already, a restore is done; never recorded, released. */
static void test_restore_done_and_released(void)
{
    struct bindplan_outcome o = restore("0000:04:00.0", "e1000e");
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_RESTORED);
    CU_ASSERT_STRING_EQUAL(o.driver, "e1000e");
    CU_ASSERT_EQUAL(o.group, 9);
    struct pciclaim_decision d;
    decide("0000:04:00.0", &o, &d);
    CU_ASSERT(d.remove_finalizer);
    o = restore("0000:03:00.0", NULL);
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_RELEASED);
    /* nothing wanted: unbound is restored */
    o = restore("0000:03:00.0", "");
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_RESTORED);
    o = restore("0000:09:00.0", "e1000e"); /* gone: nothing to give back */
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_RESTORED);
    /* sysfs that cannot be read: said, and nothing tried */
    CU_ASSERT_EQUAL(
            sysfs_tree_link(&tree, "devices/pci0000:0b/0000:0b:00.0/iommu_group", "iommu_group"),
            0);
    o = restore("0000:0b:00.0", "e1000e");
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_FAILED);
    CU_ASSERT_STRING_EQUAL(o.reason ? o.reason : "", "RestoreFailed");
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, "cannot read device 0000:0b:00.0 in sysfs"));
    CU_ASSERT_EQUAL(o.group, -1);
}

/* The bind side of a claim's node work for `address`: recorded (original e1000e) or not,
 * checks only or not, with `claimed` (NULL: none) the node's other claims. */
static const char *node_name = "n";

static struct bindplan_outcome bind(const char *address, bool recorded, bool check_only,
                                    const char *claimed, const char *usb, const char *proc_root)
{
    struct pcibind_env env = {
            .sysfs_fd = root, .node_name = node_name, .dev_root = tree.dir, .proc_root = proc_root};
    struct pcibind_job j = {.env = &env, .recorded = recorded, .check_only = check_only};
    (void)snprintf(j.address, sizeof(j.address), "%s", address);
    (void)snprintf(j.original, sizeof(j.original), "%s", recorded ? "e1000e" : "");
    (void)snprintf(j.annotation, sizeof(j.annotation), "e1000e");
    if (claimed) {
        j.claimed = calloc(1, sizeof(*j.claimed));
        j.claimed[0] = strdup(claimed);
        j.n_claimed = 1;
    }
    if (usb)
        j.usb_enabled = strdup(usb);
    pcibind_run(&j.wj);
    pcibind_job_done(&j);
    CU_ASSERT_PTR_NULL(j.claimed);
    return j.out;
}

static void expect(const struct bindplan_outcome *o, enum bindplan_outcome_kind kind,
                   const char *reason, const char *in_message)
{
    CU_ASSERT_EQUAL(o->kind, kind);
    if (reason)
        CU_ASSERT_STRING_EQUAL(o->reason ? o->reason : "", reason);
    if (in_message && !strstr(o->message, in_message)) {
        CU_FAIL("message");
        fprintf(stderr, "\nmessage: %s (wanted %s)\n", o->message, in_message);
    }
}

/* What the checks find in sysfs, in the order a claim meets them. */
static void test_bind_checks(void)
{
    struct bindplan_outcome o = bind("0000:09:00.0", false, true, NULL, NULL, proc);
    expect(&o, BINDPLAN_REFUSED, "DeviceNotFound", "there is no PCI device 0000:09:00.0 on node n");
    o = bind("0000:06:00.0", false, true, NULL, NULL, proc);
    expect(&o, BINDPLAN_REFUSED, "NoIOMMUGroup", "device 0000:06:00.0 has no IOMMU group");
    o = bind("0000:00:1f.0", false, true, NULL, NULL, proc);
    expect(&o, BINDPLAN_REFUSED, "PlatformDevice", "is an ISA/LPC bridge");
    o = bind("0000:05:00.0", false, true, NULL, NULL, proc);
    expect(&o, BINDPLAN_REFUSED, "IOMMUGroupIncomplete",
           "IOMMU group 10 also holds 0000:05:00.1 (no driver; claim n-000005001); the whole "
           "group goes to one VM, so claim that device too");
    o = bind("0000:05:00.0", false, true, "0000:05:00.7", NULL, proc); /* another claim */
    expect(&o, BINDPLAN_REFUSED, "IOMMUGroupIncomplete", "0000:05:00.1 (no driver;");
    o = bind("0000:00:1f.6", false, true, NULL, NULL, proc);
    /* every sibling the host needs, each with what it is; no claim suggested for any */
    expect(&o, BINDPLAN_REFUSED, "IOMMUGroupUnsafe",
           "IOMMU group 12 also holds devices the host needs: 0000:00:1f.0 is an ISA/LPC bridge");
    CU_ASSERT_PTR_NOT_NULL(strstr(o.message, "; 0000:00:1f.3 is an SMBus controller"));
    CU_ASSERT_PTR_NULL(strstr(o.message, "claim"));
    o = bind("0000:0a:00.0", false, true, NULL, NULL, proc); /* a one-letter driver */
    expect(&o, BINDPLAN_REFUSED, "IOMMUGroupIncomplete", "0000:0a:00.1 (x; claim n-00000a001)");
    /* the longest node name a device name has room for (243 bytes): the claim is named */
    char node[244], want[300];
    memset(node, 'a', sizeof(node) - 1);
    node[63] = node[127] = node[191] = '.';
    node[sizeof(node) - 1] = '\0';
    node_name = node;
    o = bind("0000:0a:00.0", false, true, NULL, NULL, proc);
    node_name = "n";
    (void)snprintf(want, sizeof(want), "(x; claim %s-00000a001)", node);
    expect(&o, BINDPLAN_REFUSED, "IOMMUGroupIncomplete", want);
    o = bind("0000:05:00.0", false, true, "0000:05:00.1", NULL, proc);
    expect(&o, BINDPLAN_RECORD, NULL, NULL);
    CU_ASSERT_STRING_EQUAL(o.driver, "e1000e");
    CU_ASSERT_EQUAL(o.group, 10);
    o = bind("0000:07:00.0", false, true, NULL, "n-1-1", proc);
    expect(&o, BINDPLAN_REFUSED, "USBDevicesEnabled", "(n-1-1)");
    /* what the host uses cannot be read: refused, to be safe */
    o = bind("0000:07:00.0", false, true, NULL, NULL, "/nonexistent/hostdevd-proc");
    expect(&o, BINDPLAN_REFUSED, "HostCritical", "cannot tell whether device 0000:07:00.0");
    o = bind("../x", false, true, NULL, NULL, proc);
    expect(&o, BINDPLAN_REFUSED, "SysfsError", "cannot read device ../x in sysfs");
}

/* Recorded: a check-only job changes nothing; a bind on a kernel that ignores the writes
 * fails with what sysfs shows, after writing the override. */
static void test_bind_fails_on_a_deaf_kernel(void)
{
    struct bindplan_outcome o = bind("0000:07:00.0", true, true, NULL, NULL, proc);
    expect(&o, BINDPLAN_GO, NULL, NULL);
    struct node_vfio_dev d;
    CU_ASSERT_EQUAL(node_vfio_observe(root, "0000:07:00.0", &d), 0);
    CU_ASSERT_STRING_EQUAL(d.override, "");
    o = bind("0000:07:00.0", true, false, NULL, NULL, proc);
    expect(&o, BINDPLAN_FAILED, "BindFailed",
           "bind of 0000:07:00.0 did not take effect: driver=e1000e driver_override=vfio-pci");
    CU_ASSERT_EQUAL(node_vfio_observe(root, "0000:07:00.0", &d), 0);
    CU_ASSERT_STRING_EQUAL(d.override, "vfio-pci");
    CU_ASSERT_STRING_EQUAL(d.driver, "e1000e");
    /* the override written fails: the step and the error are named */
    CU_ASSERT_EQUAL(sysfs_tree_fail_write("bus/pci/devices/0000:07:00.0/driver_override", EIO), 0);
    (void)sysfs_tree_put(&tree, "bus/pci/devices/0000:07:00.0/driver_override", "(null)\n", 7);
    o = bind("0000:07:00.0", true, false, NULL, NULL, proc);
    expect(&o, BINDPLAN_FAILED, "BindFailed", "step set-override failed");
    CU_ASSERT_EQUAL(sysfs_tree_fail_write(NULL, 0), 0);
}

/* On vfio-pci with the override already (a restarted agent): bound at once, in group 0. */
static void test_bind_done(void)
{
    struct bindplan_outcome o = bind("0000:08:00.0", true, false, NULL, NULL, proc);
    expect(&o, BINDPLAN_BOUND, "Bound", NULL);
    CU_ASSERT_EQUAL(o.group, 0);
    CU_ASSERT(o.bind_us > 0 && o.bind_us < 10 * 1000 * 1000); /* it read sysfs: microseconds */
}

/* A whole claim of a device found on vfio-pci (first seen there): what the checks record,
 * the bind, and the restore of the deleted claim, with the original driver the way
 * pciclaim.c passes it (the annotation, then the recorded driver). */
static struct bindplan_outcome claim_job(const char *address, bool deleting, bool recorded,
                                         const char *original)
{
    struct pcibind_env env = {
            .sysfs_fd = root, .node_name = "n", .dev_root = tree.dir, .proc_root = proc};
    struct pcibind_job j = {.env = &env, .deleting = deleting, .recorded = recorded};
    (void)snprintf(j.address, sizeof(j.address), "%s", address);
    (void)snprintf(j.original, sizeof(j.original), "%s", original);
    (void)snprintf(j.annotation, sizeof(j.annotation), "vfio-pci");
    pcibind_run(&j.wj);
    pcibind_job_done(&j);
    return j.out;
}

static void expect_state(const char *address, const char *driver, const char *override)
{
    struct node_vfio_dev d;
    CU_ASSERT_EQUAL_FATAL(node_vfio_observe(root, address, &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, driver);
    CU_ASSERT_STRING_EQUAL(d.override, override);
}

/* The admin put the device on vfio-pci (a driver_override as driverctl writes it, or
 * vfio-pci.ids=): the claim records vfio-pci, binds, and its release leaves the device on
 * vfio-pci with the override in place (the tree's writes change no driver link: a restore
 * that unbinds fails here). */
static void test_claim_of_a_vfio_original(void)
{
    static const char *const addresses[] = {"0000:0c:00.0", "0000:0d:00.0"};
    for (size_t i = 0; i < 2; i++) {
        const char *a = addresses[i];
        struct bindplan_outcome o = claim_job(a, false, false, "");
        expect(&o, BINDPLAN_RECORD, NULL, NULL);
        CU_ASSERT_STRING_EQUAL(o.driver, "vfio-pci");
        o = claim_job(a, false, true, "vfio-pci");
        expect(&o, BINDPLAN_BOUND, "Bound", NULL);
        expect_state(a, "vfio-pci", "vfio-pci"); /* the override of the bind, or the admin's */
        o = claim_job(a, true, true, "vfio-pci");
        expect(&o, BINDPLAN_RESTORED, "Restored", NULL);
        CU_ASSERT_STRING_EQUAL(o.driver, "vfio-pci");
        expect_state(a, "vfio-pci", "vfio-pci");
        o = claim_job(a, true, true, "vfio-pci"); /* again (a crash before the finalizer went) */
        expect(&o, BINDPLAN_RESTORED, "Restored", NULL);
        expect_state(a, "vfio-pci", "vfio-pci");
    }
}

/* HOSTDEVD_FAULT aborts only at the goal:step it names exactly (the qemu node's crash tests
 * use it); anything else leaves the job alone. */
/* The way in of a caller on the worker thread (the DRA plugin): one device, recorded already. */
static void test_device_requests(void)
{
    struct pcibind_env env = {
            .sysfs_fd = root, .node_name = "n", .dev_root = tree.dir, .proc_root = proc};
    struct pcibind_request req = {.address = "0000:08:00.0", .original = "vfio-pci"};
    struct bindplan_outcome o;
    pcibind_bind_device(&env, &req, &o);
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_BOUND);
    CU_ASSERT_EQUAL(o.group, 0);
    struct node_vfio_dev d;
    CU_ASSERT_EQUAL(pcibind_observe(&env, "0000:08:00.0", &d), 0);
    CU_ASSERT_STRING_EQUAL(d.driver, "vfio-pci");
    req = (struct pcibind_request){.address = "0000:06:00.0", .original = "e1000e"};
    pcibind_bind_device(&env, &req, &o); /* no IOMMU group */
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_REFUSED);
    req = (struct pcibind_request){.address = "0000:03:00.0", .original = "e1000e"};
    pcibind_restore_device(&env, &req, &o); /* the driver does not come back */
    CU_ASSERT_EQUAL(o.kind, BINDPLAN_FAILED);
}

static void test_fault_names(void)
{
    static const char *const others[] = {"xind:set-override", "bind;set-override",
                                         "set-override:bind", "bind:set-overridex", "bind:"};
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        CU_ASSERT_EQUAL(setenv("HOSTDEVD_FAULT", others[i], 1), 0);
        (void)sysfs_tree_put(&tree, "bus/pci/devices/0000:07:00.0/driver_override", "(null)\n", 7);
        struct bindplan_outcome o = bind("0000:07:00.0", true, false, NULL, NULL, proc);
        expect(&o, BINDPLAN_FAILED, "BindFailed", "did not take effect");
    }
    CU_ASSERT_EQUAL(unsetenv("HOSTDEVD_FAULT"), 0);
}

static CU_TestInfo tests[] = {
        {"restore that leaves the device on vfio-pci", test_restore_stays_on_vfio},
        {"restore whose driver does not come back", test_restore_driver_does_not_come_back},
        {"restore done, claim released", test_restore_done_and_released},
        {"bind: the checks on sysfs", test_bind_checks},
        {"bind: a kernel that ignores the writes", test_bind_fails_on_a_deaf_kernel},
        {"bind: on vfio-pci already", test_bind_done},
        {"claim and release of a device the admin put on vfio-pci", test_claim_of_a_vfio_original},
        {"one device, for a caller on the worker thread", test_device_requests},
        {"fault points name goal and step exactly", test_fault_names},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo pcibind_suites[] = {
        {"pcibind", suite_init, suite_clean, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
