/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_ledger.c - binding/ledger: who holds each device, and the rule "one path at a
 * time" with the reasons and messages the claim reconciler and the DRA plugin gave before it
 * (word for word); a path's holdings replaced (begin, hold, end) and the release emitted once,
 * with the path, to a part that watches it; the addresses every path holds; an mdev instance
 * between the device plugin and DRA, and ledger_changed on every holding begun or ended.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controllers/binding/ledger.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"

static struct {
    int released, changed;
    enum ledger_path path, changed_path;
} W;

static void on_released(void *self, const struct watch_event *ev)
{
    (void)self;
    W.released++;
    W.path = *(const enum ledger_path *)ev->data;
}

static void on_changed(void *self, const struct watch_event *ev)
{
    (void)self;
    W.changed++;
    W.changed_path = *(const enum ledger_path *)ev->data;
}

static const struct watch watches[] = {{.topic = &ledger_released, .map = on_released},
                                       {.topic = &ledger_changed, .map = on_changed},
                                       {0}};
static const struct part_ops watcher = {.name = "watcher", .watches = watches};

static struct manager *mgr;

static struct ledger *setup(void)
{
    memset(&W, 0, sizeof(W));
    mgr = manager_new(NULL, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mgr);
    CU_ASSERT_EQUAL_FATAL(manager_add_watches(mgr, &watcher, NULL), 0);
    struct ledger *l = ledger_new(mgr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    return l;
}

static void teardown(struct ledger *l)
{
    ledger_free(l);
    mgr = manager_free(mgr);
}

static void test_one_path_at_a_time(void)
{
    struct ledger *l = setup();
    struct ledger_refusal why;
    const char *a = "0000:3b:00.0";
    CU_ASSERT_EQUAL(ledger_check(l, a, LEDGER_PCI_CLAIM, "n1-00003b000", &why), 0);
    CU_ASSERT_EQUAL(ledger_check(l, a, LEDGER_DRA, "uid-1", &why), 0);

    /* a DRA claim prepared with it: a PCIDeviceClaim waits */
    CU_ASSERT_EQUAL(ledger_hold(l, a, LEDGER_DRA, "uid-1", "ns/vm-a"), 0);
    CU_ASSERT_EQUAL(ledger_check(l, a, LEDGER_PCI_CLAIM, "n1-00003b000", &why), -EBUSY);
    CU_ASSERT_STRING_EQUAL(why.reason, "AllocatedByDRA");
    CU_ASSERT_STRING_EQUAL(
            why.message, "device 0000:3b:00.0 is prepared for ResourceClaim ns/vm-a (DRA driver "
                         "vfio-pci.hostdevd.io): this claim waits until that claim's Pod is gone");
    /* the same DRA claim again (a repeated call) holds it; another one is refused */
    CU_ASSERT_EQUAL(ledger_check(l, a, LEDGER_DRA, "uid-1", &why), 0);
    CU_ASSERT_EQUAL(ledger_check(l, a, LEDGER_DRA, "uid-2", &why), -EBUSY);
    CU_ASSERT_STRING_EQUAL(why.reason, "PreparedForResourceClaim");
    CU_ASSERT_STRING_EQUAL(why.message,
                           "device 0000:3b:00.0 is prepared for ResourceClaim ns/vm-a");
    /* another device is free */
    CU_ASSERT_EQUAL(ledger_check(l, "0000:3b:00.1", LEDGER_PCI_CLAIM, "x", &why), 0);

    /* a PCIDeviceClaim of it: a DRA claim that does not hold it is refused (one that does is
     * the one that came first, and keeps it) */
    CU_ASSERT_EQUAL(ledger_hold(l, a, LEDGER_PCI_CLAIM, "n1-00003b000", "n1-00003b000"), 0);
    CU_ASSERT_EQUAL(ledger_check(l, a, LEDGER_DRA, "uid-1", &why), 0);
    CU_ASSERT_EQUAL(ledger_check(l, a, LEDGER_DRA, "uid-2", &why), -EBUSY);
    CU_ASSERT_STRING_EQUAL(why.reason, "HeldByPCIDeviceClaim");
    CU_ASSERT_STRING_EQUAL(
            why.message,
            "device 0000:3b:00.0 is held by PCIDeviceClaim n1-00003b000: delete that claim first");
    ledger_release(l, a, LEDGER_DRA, "uid-1");
    CU_ASSERT_EQUAL(ledger_check(l, a, LEDGER_PCI_CLAIM, "n1-00003b000", &why), 0);
    CU_ASSERT_EQUAL(ledger_check(l, a, LEDGER_DRA, "uid-1", &why), -EBUSY);
    teardown(l);
}

/* A PCI parent with mediated device instances: a PCIDeviceClaim and a DRA claim of it wait, with
 * a message naming the instances and what to do; its last instance gone, both may take it. An
 * mdev parent is no claimed member of a group (ledger_addresses leaves it out). */
static void test_mdev_parent(void)
{
    struct ledger *l = setup();
    struct ledger_refusal why;
    const char *a = "0000:00:02.0";
    CU_ASSERT_EQUAL(ledger_hold(l, a, LEDGER_MDEV, a,
                                "instance 83b8f4f2-509f-382f-3c1e-e6bfe0fa1001 (VGPUDevice n-x-0)"),
                    0);
    CU_ASSERT_EQUAL(ledger_check(l, a, LEDGER_PCI_CLAIM, "n-000000020", &why), -EBUSY);
    CU_ASSERT_STRING_EQUAL(why.reason, "ParentHasInstances");
    CU_ASSERT_STRING_EQUAL(
            why.message,
            "device 0000:00:02.0 is the parent of mediated devices: instance "
            "83b8f4f2-509f-382f-3c1e-e6bfe0fa1001 (VGPUDevice n-x-0). Binding it to vfio-pci "
            "would remove them: disable or delete that VGPUDevice (or remove the instance) "
            "first, then this claim binds");
    CU_ASSERT_EQUAL(ledger_check(l, a, LEDGER_DRA, "uid-1", &why), -EBUSY);
    CU_ASSERT_STRING_EQUAL(why.reason, "ParentHasInstances");
    CU_ASSERT_PTR_NOT_NULL(strstr(why.message, "then this ResourceClaim can be prepared"));
    /* two instances: "their VGPUDevices" */
    CU_ASSERT_EQUAL(ledger_hold(l, a, LEDGER_MDEV, a, "instance u1 (VGPUDevice x), instance u2"),
                    0);
    CU_ASSERT_EQUAL(ledger_check(l, a, LEDGER_PCI_CLAIM, "n-000000020", &why), -EBUSY);
    CU_ASSERT_PTR_NOT_NULL(strstr(why.message, "disable or delete their VGPUDevices (or remove "
                                               "the instances) first, then this claim binds"));
    /* another device is free; the parent is no claimed address */
    CU_ASSERT_EQUAL(ledger_check(l, "0000:00:03.0", LEDGER_PCI_CLAIM, "x", &why), 0);
    char **v = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(ledger_addresses(l, &v, &n), 0);
    CU_ASSERT_EQUAL(n, 0);
    free(v);
    /* the last instance gone (a scan without it): released, and both may take it */
    ledger_begin(l, LEDGER_MDEV);
    ledger_end(l, LEDGER_MDEV);
    CU_ASSERT_EQUAL(W.released, 1);
    CU_ASSERT_EQUAL(W.path, LEDGER_MDEV);
    CU_ASSERT_EQUAL(ledger_check(l, a, LEDGER_PCI_CLAIM, "n-000000020", &why), 0);
    CU_ASSERT_EQUAL(ledger_check(l, a, LEDGER_DRA, "uid-1", &why), 0);
    teardown(l);
}

static void test_held_and_released(void)
{
    struct ledger *l = setup();
    char who[64] = "unchanged";
    const char *a = "0000:00:03.0";
    CU_ASSERT_FALSE(ledger_held(l, a, LEDGER_DRA, NULL, who, sizeof(who)));
    CU_ASSERT_STRING_EQUAL(who, "unchanged");
    CU_ASSERT_EQUAL(ledger_hold(l, a, LEDGER_DRA, "u1", "ns/a"), 0);
    CU_ASSERT_TRUE(ledger_held(l, a, LEDGER_DRA, NULL, who, sizeof(who)));
    CU_ASSERT_STRING_EQUAL(who, "ns/a");
    CU_ASSERT_FALSE(ledger_held(l, a, LEDGER_DRA, "u1", NULL, 0));
    CU_ASSERT_TRUE(ledger_held(l, a, LEDGER_DRA, "u2", NULL, 0));
    CU_ASSERT_FALSE(ledger_held(l, a, LEDGER_PCI_CLAIM, NULL, NULL, 0));
    /* a new id of the same path replaces the last */
    CU_ASSERT_EQUAL(ledger_hold(l, a, LEDGER_DRA, "u3", "ns/c"), 0);
    CU_ASSERT_TRUE(ledger_held(l, a, LEDGER_DRA, "u1", who, sizeof(who)));
    CU_ASSERT_STRING_EQUAL(who, "ns/c");

    /* a release of another id, or of another path, changes nothing and says nothing */
    ledger_release(l, a, LEDGER_DRA, "u1");
    ledger_release(l, a, LEDGER_PCI_CLAIM, NULL);
    ledger_release(l, "0000:00:04.0", LEDGER_DRA, NULL);
    CU_ASSERT_EQUAL(W.released, 0);
    CU_ASSERT_TRUE(ledger_held(l, a, LEDGER_DRA, NULL, NULL, 0));
    ledger_release(l, a, LEDGER_DRA, "u3");
    CU_ASSERT_EQUAL(W.released, 1);
    CU_ASSERT_EQUAL(W.path, LEDGER_DRA);
    CU_ASSERT_FALSE(ledger_held(l, a, LEDGER_DRA, NULL, NULL, 0));
    CU_ASSERT_EQUAL(ledger_hold(l, a, LEDGER_PCI_CLAIM, "c", "c"), 0);
    ledger_release(l, a, LEDGER_PCI_CLAIM, NULL);
    CU_ASSERT_EQUAL(W.released, 2);
    CU_ASSERT_EQUAL(W.path, LEDGER_PCI_CLAIM);
    teardown(l);
}

static void test_replaced_holdings(void)
{
    struct ledger *l = setup();
    CU_ASSERT_EQUAL(ledger_hold(l, "0000:00:01.0", LEDGER_DRA, "u1", "ns/a"), 0);
    CU_ASSERT_EQUAL(ledger_hold(l, "0000:00:02.0", LEDGER_DRA, "u1", "ns/a"), 0);
    CU_ASSERT_EQUAL(ledger_hold(l, "0000:00:02.0", LEDGER_PCI_CLAIM, "c2", "c2"), 0);
    CU_ASSERT_EQUAL(ledger_hold(l, "0000:00:03.0", LEDGER_PCI_CLAIM, "c3", "c3"), 0);

    /* the same holdings again: nothing released */
    ledger_begin(l, LEDGER_DRA);
    CU_ASSERT_EQUAL(ledger_hold(l, "0000:00:01.0", LEDGER_DRA, "u1", "ns/a"), 0);
    CU_ASSERT_EQUAL(ledger_hold(l, "0000:00:02.0", LEDGER_DRA, "u1", "ns/a"), 0);
    ledger_end(l, LEDGER_DRA);
    CU_ASSERT_EQUAL(W.released, 0);

    /* two of them gone (one whose address another path keeps): one emission */
    ledger_begin(l, LEDGER_DRA);
    CU_ASSERT_EQUAL(ledger_hold(l, "0000:00:04.0", LEDGER_DRA, "u2", "ns/b"), 0);
    ledger_end(l, LEDGER_DRA);
    CU_ASSERT_EQUAL(W.released, 1);
    CU_ASSERT_EQUAL(W.path, LEDGER_DRA);
    CU_ASSERT_FALSE(ledger_held(l, "0000:00:01.0", LEDGER_DRA, NULL, NULL, 0));
    CU_ASSERT_FALSE(ledger_held(l, "0000:00:02.0", LEDGER_DRA, NULL, NULL, 0));
    CU_ASSERT_TRUE(ledger_held(l, "0000:00:02.0", LEDGER_PCI_CLAIM, NULL, NULL, 0));
    CU_ASSERT_TRUE(ledger_held(l, "0000:00:03.0", LEDGER_PCI_CLAIM, NULL, NULL, 0));
    CU_ASSERT_TRUE(ledger_held(l, "0000:00:04.0", LEDGER_DRA, NULL, NULL, 0));

    /* every address some path holds, appended to what the caller has */
    char **v = calloc(1, sizeof(*v));
    size_t n = 1;
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    if (!v)
        return;
    v[0] = strdup("mine");
    CU_ASSERT_EQUAL(ledger_addresses(l, &v, &n), 0);
    CU_ASSERT_EQUAL(n, 4);
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        seen |= strcmp(v[i], "mine") == 0 ? 1 : 0;
        seen |= strcmp(v[i], "0000:00:02.0") == 0 ? 2 : 0;
        seen |= strcmp(v[i], "0000:00:03.0") == 0 ? 4 : 0;
        seen |= strcmp(v[i], "0000:00:04.0") == 0 ? 8 : 0;
        free(v[i]);
    }
    free(v);
    CU_ASSERT_EQUAL(seen, 15);
    teardown(l);
}

/* Many holdings of one path all gone: every one forgotten (the walk starts over after each). */
static void test_many_released(void)
{
    struct ledger *l = setup();
    char a[32];
    for (int i = 0; i < 64; i++) {
        (void)snprintf(a, sizeof(a), "0000:00:%02x.0", i);
        CU_ASSERT_EQUAL(ledger_hold(l, a, LEDGER_DRA, "u", "ns/a"), 0);
    }
    ledger_begin(l, LEDGER_DRA);
    ledger_end(l, LEDGER_DRA);
    CU_ASSERT_EQUAL(W.released, 1);
    char **v = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(ledger_addresses(l, &v, &n), 0);
    CU_ASSERT_EQUAL(n, 0);
    free(v);
    ledger_free(NULL); /* takes NULL */
    teardown(l);
}

/* An mdev instance: the device plugin may not give out one a DRA claim holds (the message names
 * the claim); the device plugin's Allocate does not refuse a DRA claim here (the DRA plugin
 * checks whether the instance is in use); each holding begun or ended is a change, once. */
static void test_mdev_between_plugin_and_dra(void)
{
    struct ledger *l = setup();
    struct ledger_refusal why;
    char who[64] = "";
    const char *u = "0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a71", *res = "devices.harvesterhci.io/mtty-2";
    CU_ASSERT_EQUAL(ledger_check(l, u, LEDGER_DEVICE_PLUGIN, res, &why), 0);
    CU_ASSERT_EQUAL(ledger_hold(l, u, LEDGER_DEVICE_PLUGIN, res, res), 0);
    CU_ASSERT_EQUAL(W.changed, 1);
    CU_ASSERT_EQUAL(W.changed_path, LEDGER_DEVICE_PLUGIN);
    CU_ASSERT_EQUAL(ledger_hold(l, u, LEDGER_DEVICE_PLUGIN, res, res), 0); /* again: no change */
    CU_ASSERT_EQUAL(W.changed, 1);
    CU_ASSERT_EQUAL(ledger_check(l, u, LEDGER_DRA, "uid-1", &why), 0);
    CU_ASSERT_TRUE(ledger_held(l, u, LEDGER_DEVICE_PLUGIN, NULL, who, sizeof(who)));
    CU_ASSERT_STRING_EQUAL(who, res);

    CU_ASSERT_EQUAL(ledger_hold(l, u, LEDGER_DRA, "uid-1", "vms/vm1-gpu"), 0);
    CU_ASSERT_EQUAL(W.changed, 2);
    CU_ASSERT_EQUAL(W.changed_path, LEDGER_DRA);
    why.reason = NULL;
    CU_ASSERT_EQUAL(ledger_check(l, u, LEDGER_DEVICE_PLUGIN, res, &why), -EBUSY);
    CU_ASSERT_STRING_EQUAL(why.reason ? why.reason : "(none)", "PreparedForResourceClaim");
    CU_ASSERT_STRING_EQUAL(why.message,
                           "mediated device 0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a71 is prepared for "
                           "ResourceClaim vms/vm1-gpu (DRA driver vfio-pci.hostdevd.io): the "
                           "device plugin gives it out again once that claim's Pod is gone");
    /* the device plugin's record forgotten (the claim took it), then the claim unprepared */
    ledger_release(l, u, LEDGER_DEVICE_PLUGIN, NULL);
    CU_ASSERT_EQUAL(W.changed, 3);
    CU_ASSERT_EQUAL(W.released, 1);
    CU_ASSERT_EQUAL(W.path, LEDGER_DEVICE_PLUGIN);
    ledger_begin(l, LEDGER_DRA);
    ledger_end(l, LEDGER_DRA);
    CU_ASSERT_EQUAL(W.changed, 4);
    CU_ASSERT_EQUAL(W.changed_path, LEDGER_DRA);
    CU_ASSERT_EQUAL(ledger_check(l, u, LEDGER_DEVICE_PLUGIN, res, &why), 0);
    teardown(l);
}

static CU_TestInfo tests[] = {
        {"an mdev between the device plugin and DRA", test_mdev_between_plugin_and_dra},
        {"many holdings gone at once: all forgotten", test_many_released},
        {"one path at a time, with the claims' and DRA's messages", test_one_path_at_a_time},
        {"a PCI parent with mdev instances: claims wait, then go on", test_mdev_parent},
        {"held, replaced, released by id and path", test_held_and_released},
        {"a path's holdings replaced: one release emitted", test_replaced_holdings},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo ledger_suites[] = {
        {"ledger", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
