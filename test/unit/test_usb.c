/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_usb.c - node/usb on fake sysfs trees: the USB lines of
 * test/fixtures/sysfs/usb-server.txt, and small trees made per test and then damaged (files
 * removed, replaced, moved) to check skipped entries and problems.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/usb.h"
#include "sysfs_tree.h"

#define USB_SERVER FIXTURES "/sysfs/usb-server.txt"

static struct sysfs_tree server_tree;
static int server_root = -1;

static int suite_init(void)
{
    if (sysfs_tree_make(&server_tree, USB_SERVER) < 0)
        return -1;
    return sysfs_tree_open_root(&server_tree, &server_root);
}

static int suite_clean(void)
{
    sysfs_tree_close(&server_tree, &server_root);
    return 0;
}

/* The device of `port` in `res`, or NULL. */
static const struct node_usb_dev *find(const struct node_usb_scan_result *res, const char *port)
{
    for (size_t i = 0; i < res->n_devs; i++)
        if (strcmp(res->devs[i].port_path, port) == 0)
            return &res->devs[i];
    return NULL;
}

/* The skipped entry `name` in `res`, or NULL. */
static const struct node_sysfs_skip *find_skip(const struct node_usb_scan_result *res,
                                               const char *name)
{
    for (size_t i = 0; i < res->n_skipped; i++)
        if (strcmp(res->skipped[i].entry, name) == 0)
            return &res->skipped[i];
    return NULL;
}

static void test_server(void)
{
    static const char *const order[] = {"1-1", "1-1.2", "1-3", "1-4", "3-2"};
    struct node_usb_scan_result res = {0};
    struct err err = {""};
    CU_ASSERT_EQUAL_FATAL(node_usb_scan(server_root, &res, &err), 0);
    CU_ASSERT_EQUAL(res.n_skipped, 0);
    CU_ASSERT_EQUAL_FATAL(res.n_devs, 5);
    for (size_t i = 0; i < 5; i++) {
        CU_ASSERT_STRING_EQUAL(res.devs[i].port_path, order[i]);
        CU_ASSERT_STRING_EQUAL(res.devs[i].problem, "");
    }
    const struct node_usb_dev *d = find(&res, "1-1.2"); /* behind the hub, class 00 */
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_STRING_EQUAL(d->vendor_id, "046d");
    CU_ASSERT_STRING_EQUAL(d->product_id, "c52b");
    CU_ASSERT_EQUAL(d->busnum, 1);
    CU_ASSERT_EQUAL(d->devnum, 3);
    CU_ASSERT_STRING_EQUAL(d->dev_path, "/dev/bus/usb/001/003");
    CU_ASSERT_STRING_EQUAL(d->pci_address, "0000:00:14.0");
    CU_ASSERT_STRING_EQUAL(d->speed, "12");
    CU_ASSERT_STRING_EQUAL(d->class_code, "03");
    CU_ASSERT_STRING_EQUAL(d->product, "USB Receiver");
    CU_ASSERT_STRING_EQUAL(d->manufacturer, "Logitech");
    CU_ASSERT_STRING_EQUAL(d->serial, "");
    d = find(&res, "1-1");
    CU_ASSERT_STRING_EQUAL(d->class_code, "09");
    CU_ASSERT_STRING_EQUAL(d->product, "USB2.1 Hub");
    d = find(&res, "1-4"); /* the second of two identical devices */
    CU_ASSERT_STRING_EQUAL(d->vendor_id, "0627");
    CU_ASSERT_STRING_EQUAL(d->serial, "28754-0000:00:14.0-4");
    CU_ASSERT_STRING_EQUAL(d->dev_path, "/dev/bus/usb/001/005");
    d = find(&res, "3-2");
    CU_ASSERT_STRING_EQUAL(d->pci_address, "0000:af:00.2");
    CU_ASSERT_STRING_EQUAL(d->class_code, "08");
    CU_ASSERT_STRING_EQUAL(d->speed, "5000");
    CU_ASSERT_STRING_EQUAL(d->serial, "E0D55EA573DCF450E9A00B2C");
    CU_ASSERT_STRING_EQUAL(d->dev_path, "/dev/bus/usb/003/002");
    node_usb_scan_result_done(&res);
}

#define XHCI "0000:00:14.0 0c0330 8086:a1af\n"

/* Builds a tree from `text` and scans it into `res`; returns the scan's result. */
static int scan_text(struct sysfs_tree *t, const char *text, struct node_usb_scan_result *res,
                     struct err *err)
{
    int root;
    if (sysfs_tree_make_text(t, text) < 0 || sysfs_tree_open_root(t, &root) < 0)
        return -1000;
    int r = node_usb_scan(root, res, err);
    close(root);
    return r;
}

static int rescan(const struct sysfs_tree *t, struct node_usb_scan_result *res)
{
    int root;
    struct err err = {""};
    if (sysfs_tree_open_root(t, &root) < 0)
        return -1000;
    node_usb_scan_result_done(res);
    int r = node_usb_scan(root, res, &err);
    close(root);
    return r;
}

static void test_sorted(void)
{
    struct sysfs_tree t;
    struct node_usb_scan_result res = {0};
    struct err err = {""};
    CU_ASSERT_EQUAL_FATAL(scan_text(&t,
                                    XHCI "usb 1-9 1111:0001 parent=0000:00:14.0\n"
                                         "usb 1-2 1111:0002\nusb 1-10 1111:0003\n"
                                         "usb 1-2.4.1 1111:0004\n",
                                    &res, &err),
                          0);
    CU_ASSERT_EQUAL_FATAL(res.n_devs, 4);
    CU_ASSERT_STRING_EQUAL(res.devs[0].port_path, "1-10");
    CU_ASSERT_STRING_EQUAL(res.devs[1].port_path, "1-2");
    CU_ASSERT_STRING_EQUAL(res.devs[2].port_path, "1-2.4.1"); /* no 1-2.4: under 1-2 */
    CU_ASSERT_STRING_EQUAL(res.devs[2].pci_address, "0000:00:14.0");
    CU_ASSERT_STRING_EQUAL(res.devs[3].port_path, "1-9");
    CU_ASSERT_EQUAL(res.devs[3].devnum, 2);
    CU_ASSERT_STRING_EQUAL(res.devs[3].class_code, "ff"); /* the fixture's default interface */
    struct stat st;
    char path[600];
    snprintf(path, sizeof(path), "%s/devices/pci0000:00/0000:00:14.0/usb1/1-2/1-2.4.1/idVendor",
             t.root);
    CU_ASSERT_EQUAL(stat(path, &st), 0);
    node_usb_scan_result_done(&res);
    sysfs_tree_remove(&t);
}

static void test_skipped(void)
{
    struct sysfs_tree t;
    struct node_usb_scan_result res = {0};
    struct err err = {""};
    CU_ASSERT_EQUAL_FATAL(scan_text(&t,
                                    XHCI "usb 1-1 1111:0001 parent=0000:00:14.0 omit=idVendor\n"
                                         "usb 1-2 1111:0002 omit=devnum\nusb 1-3 1111:0003\n"
                                         "usb 1-4 1111:0004\nusb 1-5 1111:0005\n",
                                    &res, &err),
                          0);
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, "bus/usb/devices/1-6", "x\n", 2), 0);
    CU_ASSERT_EQUAL(sysfs_tree_link(&t, "bus/usb/devices/hub-a", "1-3"), 0);
    CU_ASSERT_EQUAL(sysfs_tree_link(&t, "bus/usb/devices/1-7", "../../../devices/gone"), 0);
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, "bus/usb/devices/1-4/idProduct", "123456\n", 7), 0);
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, "bus/usb/devices/1-5/busnum", "0\n", 2), 0);
    CU_ASSERT_EQUAL_FATAL(rescan(&t, &res), 0);
    CU_ASSERT_EQUAL(res.n_devs, 1);
    CU_ASSERT_PTR_NOT_NULL(find(&res, "1-3"));
    CU_ASSERT_EQUAL(res.n_skipped, 7);
    static const char *const why[][2] = {
            {"1-1", "idVendor: absent"},      {"1-2", "devnum: absent"},
            {"1-4", "idProduct: too long"},   {"1-5", "busnum: out of range"},
            {"1-6", "not a directory"},       {"1-7", "leads nowhere"},
            {"hub-a", "not a USB port path"},
    };
    for (size_t i = 0; i < sizeof(why) / sizeof(why[0]); i++) {
        const struct node_sysfs_skip *k = find_skip(&res, why[i][0]);
        CU_ASSERT_PTR_NOT_NULL(k);
        if (!k)
            continue;
        if (!strstr(k->why, why[i][1]))
            fprintf(stderr, "\n%s: %s\n", k->entry, k->why);
        CU_ASSERT_PTR_NOT_NULL(strstr(k->why, why[i][1]));
    }
    node_usb_scan_result_done(&res);
    sysfs_tree_remove(&t);
}

static void test_problems(void)
{
    struct sysfs_tree t;
    struct node_usb_scan_result res = {0};
    struct err err = {""};
    char big[NODE_USB_STRING_SIZE + 20];
    memset(big, 'a', sizeof(big));
    CU_ASSERT_EQUAL_FATAL(scan_text(&t,
                                    XHCI "usb 1-1 ABCD:EF01 parent=0000:00:14.0 product=P "
                                         "serial=S\n"
                                         "usb 1-2 1111:0002 omit=speed,bDeviceClass\n",
                                    &res, &err),
                          0);
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, "bus/usb/devices/1-1/product", big, sizeof(big)), 0);
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, "bus/usb/devices/1-1/speed", "fast\n", 5), 0);
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, "bus/usb/devices/1-1/serial", "  S 1 \t\n", 8), 0);
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, "bus/usb/devices/1-1/bDeviceClass", "0g\n", 3), 0);
    CU_ASSERT_EQUAL_FATAL(rescan(&t, &res), 0);
    CU_ASSERT_EQUAL_FATAL(res.n_devs, 2);
    const struct node_usb_dev *d = &res.devs[0];
    CU_ASSERT_STRING_EQUAL(d->vendor_id, "abcd");
    CU_ASSERT_STRING_EQUAL(d->product_id, "ef01");
    CU_ASSERT_STRING_EQUAL(d->product, "");
    CU_ASSERT_STRING_EQUAL(d->speed, "");
    CU_ASSERT_STRING_EQUAL(d->class_code, "");
    CU_ASSERT_STRING_EQUAL(d->serial, "S 1");
    CU_ASSERT_STRING_EQUAL(d->problem,
                           "speed: malformed; bDeviceClass: malformed; product: too long");
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, "bus/usb/devices/1-1/speed", "unknown\n", 8), 0);
    CU_ASSERT_EQUAL_FATAL(rescan(&t, &res), 0);
    CU_ASSERT_STRING_EQUAL(res.devs[0].speed, ""); /* the kernel's USB_SPEED_UNKNOWN */
    CU_ASSERT_PTR_NULL(strstr(res.devs[0].problem, "speed"));
    d = &res.devs[1]; /* absent optional attributes are no problem */
    CU_ASSERT_STRING_EQUAL(d->speed, "");
    CU_ASSERT_STRING_EQUAL(d->class_code, "");
    CU_ASSERT_STRING_EQUAL(d->product, "");
    CU_ASSERT_STRING_EQUAL(d->problem, "");
    node_usb_scan_result_done(&res);
    sysfs_tree_remove(&t);
}

static void test_interface_class(void)
{
    struct sysfs_tree t;
    struct node_usb_scan_result res = {0};
    struct err err = {""};
    const char *dev = "bus/usb/devices/1-2";
    char path[128];
    CU_ASSERT_EQUAL_FATAL(
            scan_text(&t, XHCI "usb 1-2 1111:0001 parent=0000:00:14.0 class=00 ifclass=03\n", &res,
                      &err),
            0);
    CU_ASSERT_STRING_EQUAL(res.devs[0].class_code, "03");
    /* a second interface: the first in name order wins; without its class, the next */
    snprintf(path, sizeof(path), "%s/1-2:1.1", dev);
    char full[700];
    snprintf(full, sizeof(full), "%s/%s", t.root, path);
    CU_ASSERT_EQUAL_FATAL(mkdir(full, 0755), 0);
    snprintf(path, sizeof(path), "%s/1-2:1.1/bInterfaceClass", dev);
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, path, "0A\n", 3), 0);
    CU_ASSERT_EQUAL_FATAL(rescan(&t, &res), 0);
    CU_ASSERT_STRING_EQUAL(res.devs[0].class_code, "03");
    snprintf(path, sizeof(path), "%s/1-2:1.0/bInterfaceClass", dev);
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&t, path), 0);
    CU_ASSERT_EQUAL_FATAL(rescan(&t, &res), 0);
    CU_ASSERT_STRING_EQUAL(res.devs[0].class_code, "0a");
    /* a file that looks like an interface is not one; no interface: "" without a problem */
    snprintf(path, sizeof(path), "%s/1-2:1.1", dev);
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&t, path), 0);
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, path, "x", 1), 0);
    CU_ASSERT_EQUAL_FATAL(rescan(&t, &res), 0);
    CU_ASSERT_STRING_EQUAL(res.devs[0].class_code, "");
    CU_ASSERT_STRING_EQUAL(res.devs[0].problem, "");
    node_usb_scan_result_done(&res);
    sysfs_tree_remove(&t);
}

/* Interfaces a program claimed through usbfs (a VMM's usb-host) are told by their driver. */
static void test_interfaces_bound(void)
{
    struct sysfs_tree t;
    struct node_usb_scan_result res = {0};
    struct err err = {""};
    int root = -1;
    CU_ASSERT_EQUAL_FATAL(
            scan_text(&t, XHCI "usb 1-2 1111:0001 parent=0000:00:14.0 class=00 ifclass=03\n", &res,
                      &err),
            0);
    CU_ASSERT_EQUAL_FATAL(sysfs_tree_open_root(&t, &root), 0);
    CU_ASSERT_EQUAL(node_usb_interfaces_bound(root, "1-2", "usbfs"), 0); /* no driver */
    CU_ASSERT_EQUAL(sysfs_tree_link(&t, "bus/usb/devices/1-2/1-2:1.0/driver",
                                    "../../../../../../bus/usb/drivers/usbhid"),
                    0);
    CU_ASSERT_EQUAL(node_usb_interfaces_bound(root, "1-2", "usbfs"), 0);
    CU_ASSERT_EQUAL(node_usb_interfaces_bound(root, "1-2", "usbhid"), 1);
    char path[128], full[700];
    snprintf(path, sizeof(path), "bus/usb/devices/1-2/1-2:1.1");
    snprintf(full, sizeof(full), "%s/%s", t.root, path);
    CU_ASSERT_EQUAL_FATAL(mkdir(full, 0755), 0);
    CU_ASSERT_EQUAL(sysfs_tree_link(&t, "bus/usb/devices/1-2/1-2:1.1/driver",
                                    "../../../../../../bus/usb/drivers/usbfs"),
                    0);
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&t, "bus/usb/devices/1-2/1-2:1.0/driver"), 0);
    CU_ASSERT_EQUAL(sysfs_tree_link(&t, "bus/usb/devices/1-2/1-2:1.0/driver",
                                    "../../../../../../bus/usb/drivers/usbfs"),
                    0);
    CU_ASSERT_EQUAL(node_usb_interfaces_bound(root, "1-2", "usbfs"), 2);
    CU_ASSERT_EQUAL(node_usb_interfaces_bound(root, "1-3", "usbfs"), -ENOENT); /* gone */
    CU_ASSERT_EQUAL(node_usb_interfaces_bound(root, "../..", "usbfs"), -EINVAL);
    sysfs_tree_close(&t, &root);
    node_usb_scan_result_done(&res);
}

/* A host controller that is not a PCI device: pci_address "". */
static void test_platform_controller(void)
{
    struct sysfs_tree t;
    struct node_usb_scan_result res = {0};
    struct err err = {""};
    char from[700], to[700];
    CU_ASSERT_EQUAL_FATAL(scan_text(&t, XHCI "usb 1-2 1111:0001 parent=0000:00:14.0\n", &res, &err),
                          0);
    snprintf(to, sizeof(to), "%s/devices/platform", t.root);
    CU_ASSERT_EQUAL_FATAL(mkdir(to, 0755), 0);
    snprintf(to, sizeof(to), "%s/devices/platform/xhci-hcd.0", t.root);
    CU_ASSERT_EQUAL_FATAL(mkdir(to, 0755), 0);
    snprintf(from, sizeof(from), "%s/devices/pci0000:00/0000:00:14.0/usb1", t.root);
    snprintf(to, sizeof(to), "%s/devices/platform/xhci-hcd.0/usb1", t.root);
    CU_ASSERT_EQUAL_FATAL(rename(from, to), 0);
    CU_ASSERT_EQUAL(sysfs_tree_link(&t, "bus/usb/devices/1-2",
                                    "../../../devices/platform/xhci-hcd.0/usb1/1-2"),
                    0);
    CU_ASSERT_EQUAL_FATAL(rescan(&t, &res), 0);
    CU_ASSERT_EQUAL_FATAL(res.n_devs, 1);
    CU_ASSERT_STRING_EQUAL(res.devs[0].pci_address, "");
    CU_ASSERT_STRING_EQUAL(res.devs[0].problem, "");
    node_usb_scan_result_done(&res);
    sysfs_tree_remove(&t);
}

static void test_no_usb(void)
{
    struct sysfs_tree t;
    struct node_usb_scan_result res = {0};
    struct err err = {""};
    CU_ASSERT_EQUAL(scan_text(&t, XHCI, &res, &err), 0);
    CU_ASSERT_EQUAL(res.n_devs, 0);
    CU_ASSERT_EQUAL(res.n_skipped, 0);
    CU_ASSERT_PTR_NULL(res.devs);
    node_usb_scan_result_done(&res);
    /* bus/usb/devices that cannot be listed fails the scan, with words */
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, "bus/usb", "x", 1), 0);
    int root;
    CU_ASSERT_EQUAL_FATAL(sysfs_tree_open_root(&t, &root), 0);
    res.n_devs = 42;
    CU_ASSERT_EQUAL(node_usb_scan(root, &res, &err), -ENOTDIR);
    CU_ASSERT_EQUAL(res.n_devs, 42); /* untouched on failure */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bus/usb/devices"));
    close(root);
    sysfs_tree_remove(&t);
}

static CU_TestInfo tests[] = {
        {"usb-server fixture", test_server},
        {"sorted by port path, nested hubs", test_sorted},
        {"skipped entries", test_skipped},
        {"problems", test_problems},
        {"class from the first interface", test_interface_class},
        {"controller not on PCI", test_platform_controller},
        {"interfaces claimed through usbfs", test_interfaces_bound},
        {"no bus/usb", test_no_usb},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo usb_suites[] = {
        {"usb", suite_init, suite_clean, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
