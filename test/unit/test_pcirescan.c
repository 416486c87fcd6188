/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_pcirescan.c - rescans of some devices (node_pci_rescan_devices) and the
 * inventory's updates (controllers/devices/pciinv) against full scans.
 *
 * The key check: after any sequence of updates for the devices a change touched, the scan
 * result and every PCIDevice spec (blockers, SR-IOV numbers, parent names) equal those of a full
 * scan of the same tree. Each step builds the tree after the change with hack/mk-sysfs-fixture.sh
 * and turns a symbolic link, the sysfs root the inventories were opened on, to it, so that one
 * inventory is updated and another scans it whole.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/map.h"
#include "controllers/devices/pcidevice.h"
#include "controllers/devices/pciinv.h"
#include "node/pci.h"
#include "sysfs_tree.h"

#define PCI_IDS "/usr/share/misc/pci.ids"
#define PF2     "0000:af:00.0"

/* A node: a host port, a GPU and its audio in one IOMMU group, a bridge, an SR-IOV NIC with two
 * VFs, and a second SR-IOV PF without VFs (PF2). */
#define BASE                                                                                       \
    "0000:00:00.0 0600 8086:2020 iommu=0 numa=0\n"                                                 \
    "0000:00:1c.0 0604 8086:a190 driver=pcieport iommu=1 numa=0\n"                                 \
    "0000:00:1f.6 0200 8086:15bb driver=e1000e iommu=2 numa=0 netdev=hdfakehost0\n"                \
    "0000:01:00.0 0300 10de:1eb8 driver=nouveau iommu=3 numa=0\n"                                  \
    "0000:01:00.1 0403 10de:10f8 driver=snd_hda_intel iommu=3 numa=0\n"                            \
    "0000:3b:00.0 0200 8086:1592 driver=ice iommu=40 numa=0 netdev=hdfakepf0 sriov_totalvfs=64 "   \
    "sriov_numvfs=2\n"                                                                             \
    "0000:3b:01.0 0200 8086:1889 driver=iavf iommu=41 physfn=0000:3b:00.0\n"                       \
    "0000:3b:01.1 0200 8086:1889 driver=iavf iommu=42 physfn=0000:3b:00.0\n"

#define PF2_LINE(numvfs)                                                                           \
    "0000:af:00.0 0200 8086:1592 driver=ice iommu=60 numa=1 netdev=hdfakepf1 sriov_totalvfs=64 "   \
    "sriov_numvfs=" numvfs "\n"

/* The sysfs root both inventories use: a link turned from one tree to the next. */
static char dir[256], link_path[300], proc_root[300];
static struct sysfs_tree trees[2];
static int current = -1;
static struct pciinv *inc; /* updated */

/* The 64 VFs of PF2 as description lines (in `buf`) and their addresses. */
static char vf_addr[64][16];
static char vf_lines[64 * 96];

static void make_vfs(bool bound)
{
    size_t len = 0;
    for (int i = 0; i < 64; i++) {
        (void)snprintf(vf_addr[i], sizeof(vf_addr[i]), "0000:af:%02x.%x", 2 + i / 8, i % 8);
        len += (size_t)snprintf(vf_lines + len, sizeof(vf_lines) - len,
                                "%s 0200 8086:1889 %s iommu=%d numa=1 physfn=" PF2 "\n", vf_addr[i],
                                bound ? "driver=iavf" : "", 61 + i);
    }
}

static int put(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

/* A /proc for the host-use blockers: the root on a device no PCI function holds, a default
 * route through hdfakehost0. */
static int fake_proc(void)
{
    char p[400];
    (void)snprintf(proc_root, sizeof(proc_root), "%s/proc", dir);
    (void)snprintf(p, sizeof(p), "%s/1", proc_root);
    if (mkdir(proc_root, 0755) < 0 || mkdir(p, 0755) < 0)
        return -1;
    (void)snprintf(p, sizeof(p), "%s/net", proc_root);
    if (mkdir(p, 0755) < 0)
        return -1;
    (void)snprintf(p, sizeof(p), "%s/1/mountinfo", proc_root);
    int r = put(p, "22 1 0:21 / / rw - tmpfs tmpfs rw\n");
    (void)snprintf(p, sizeof(p), "%s/swaps", proc_root);
    r |= put(p, "Filename\tType\tSize\tUsed\tPriority\n");
    (void)snprintf(p, sizeof(p), "%s/net/route", proc_root);
    r |= put(p, "Iface\tDestination\tGateway\nhdfakehost0\t00000000\t0100000A\n");
    (void)snprintf(p, sizeof(p), "%s/net/ipv6_route", proc_root);
    r |= put(p, "");
    return r;
}

/* Builds the tree of `text` and turns the link to it (the previous tree is removed). */
static int flip(const char *text)
{
    int next = current == 0 ? 1 : 0;
    if (sysfs_tree_make_text(&trees[next], text) < 0)
        return -1;
    char tmp[320];
    (void)snprintf(tmp, sizeof(tmp), "%s.new", link_path);
    (void)unlink(tmp);
    if (symlink(trees[next].root, tmp) < 0 || rename(tmp, link_path) < 0)
        return -1;
    if (current >= 0)
        sysfs_tree_remove(&trees[current]);
    current = next;
    return 0;
}

static struct pciinv *open_inv(void)
{
    struct pciinv_config c = {.node_name = "node1",
                              .sysfs_root = link_path,
                              .proc_root = proc_root,
                              .pci_ids = PCI_IDS};
    struct pciinv *inv = NULL;
    return pciinv_new(&c, &inv) == 0 ? inv : NULL;
}

#define SAME(f)     (a->f == b->f)
#define SAME_STR(f) (strcmp(a->f, b->f) == 0)

/* Every field of two scanned functions. */
static bool dev_equal(const struct node_pci_dev *a, const struct node_pci_dev *b)
{
    return SAME_STR(address) && SAME(vendor_id) && SAME(device_id) && SAME(subsystem_vendor_id) &&
           SAME(subsystem_device_id) && SAME(class_id) && SAME(prog_if) && SAME(revision) &&
           SAME_STR(vendor_name) && SAME_STR(device_name) && SAME_STR(class_name) &&
           SAME_STR(driver) && SAME(iommu_group) && SAME(numa_node) && SAME_STR(pcie_root) &&
           SAME_STR(physfn) && SAME(sriov_totalvfs) && SAME(sriov_numvfs) && SAME(sriov_vf_index) &&
           SAME_STR(netdev) && SAME_STR(serial) && SAME(serial_source) && SAME_STR(slot) &&
           SAME(is_bridge) && SAME(aer.total[0]) && SAME(aer.total[1]) && SAME(aer.total[2]) &&
           SAME_STR(problem);
}

/* Describes how two scan results differ ("" when they are equal). */
static void diff_results(const struct node_pci_scan_result *a, const struct node_pci_scan_result *b,
                         char *out, size_t size)
{
    out[0] = '\0';
    if (a->n_devs != b->n_devs || a->n_skipped != b->n_skipped) {
        (void)snprintf(out, size, "%zu devices, %zu skipped against %zu, %zu", a->n_devs,
                       a->n_skipped, b->n_devs, b->n_skipped);
        return;
    }
    for (size_t i = 0; i < a->n_devs; i++)
        if (!dev_equal(&a->devs[i], &b->devs[i])) {
            (void)snprintf(out, size, "device %s (problem \"%s\") against %s (\"%s\")",
                           a->devs[i].address, a->devs[i].problem, b->devs[i].address,
                           b->devs[i].problem);
            return;
        }
    for (size_t i = 0; i < a->n_skipped; i++)
        if (strcmp(a->skipped[i].entry, b->skipped[i].entry) != 0 ||
            strcmp(a->skipped[i].why, b->skipped[i].why) != 0) {
            (void)snprintf(out, size, "skipped %s against %s", a->skipped[i].entry,
                           b->skipped[i].entry);
            return;
        }
}

/* Every field of two specs, their blockers too. */
static bool spec_equal(const struct pcidevice_spec *a, const struct pcidevice_spec *b)
{
    bool same = SAME_STR(name) && SAME_STR(node) && SAME_STR(address) && SAME_STR(vendor_id) &&
                SAME_STR(device_id) && SAME_STR(subsystem_vendor_id) &&
                SAME_STR(subsystem_device_id) && SAME_STR(class_id) && SAME_STR(revision) &&
                SAME_STR(iommu_group) && SAME(numa_node) && SAME_STR(pcie_root) &&
                SAME_STR(resource_name) && SAME_STR(description) && SAME_STR(driver) &&
                SAME_STR(physfn) && SAME(sriov_totalvfs) && SAME(sriov_numvfs) &&
                SAME(sriov_vf_index) && SAME_STR(netdev) && SAME_STR(sriov_parent) &&
                SAME_STR(serial) && SAME_STR(serial_source) && SAME_STR(slot) && SAME(n_blockers) &&
                SAME(aer[0]) && SAME(aer[1]) && SAME(aer[2]);
    for (int i = 0; same && i < a->n_blockers; i++)
        same = SAME_STR(blockers[i].reason) && SAME_STR(blockers[i].message);
    return same;
}

/* Describes how the specs of two inventories differ ("" when equal). */
static void diff_specs(const struct pciinv *a, const struct pciinv *b, char *out, size_t size)
{
    struct map *x = pciinv_want(a), *y = pciinv_want(b);
    out[0] = '\0';
    if (!x || !y || map_size(x) != map_size(y)) {
        (void)snprintf(out, size, "%zu specs against %zu", x ? map_size(x) : 0,
                       y ? map_size(y) : 0);
    } else {
        size_t pos = 0;
        const char *name;
        void *v;
        while (!out[0] && map_next(x, &pos, &name, &v)) {
            const struct pcidevice_spec *s = v, *t = map_get(y, name);
            if (!t)
                (void)snprintf(out, size, "%s only in the updated inventory", name);
            else if (!spec_equal(s, t))
                (void)snprintf(out, size,
                               "%s: driver %s, %d blockers (%s), parent \"%s\", VF %d "
                               "against %s, %d (%s), \"%s\", %d",
                               name, s->driver, s->n_blockers,
                               s->n_blockers ? s->blockers[0].message : "", s->sriov_parent,
                               s->sriov_vf_index, t->driver, t->n_blockers,
                               t->n_blockers ? t->blockers[0].message : "", t->sriov_parent,
                               t->sriov_vf_index);
        }
    }
    map_free(x);
    map_free(y);
}

/* How the updated inventory differs from a full scan of the current tree ("" when equal). */
static void diff_full(char *out, size_t size)
{
    struct pciinv *full = open_inv();
    struct err err = {{0}};
    if (!full || pciinv_scan(full, &err) < 0) {
        (void)snprintf(out, size, "full scan failed: %s", err.msg);
    } else {
        diff_results(pciinv_result(inc), pciinv_result(full), out, size);
        if (!out[0])
            diff_specs(inc, full, out, size);
    }
    pciinv_free(full);
}

/* One change: the tree becomes `text`, the inventory is updated for `addresses`; it must then
 * equal a full scan, after an update that was local (`local`) or a full scan instead. Returns
 * what was read. */
static size_t step(const char *text, const char *const *addresses, size_t n, bool local)
{
    CU_ASSERT_EQUAL_FATAL(flip(text), 0);
    struct err err = {{0}};
    int r = pciinv_update(inc, addresses, n, &err);
    CU_ASSERT_EQUAL(r, local ? 1 : 0);
    if (r != (local ? 1 : 0))
        fprintf(stderr, "\n  update: %d (%s)\n", r, err.msg);
    char why[1200];
    diff_full(why, sizeof(why));
    CU_ASSERT_STRING_EQUAL(why, "");
    if (why[0])
        fprintf(stderr, "\n  not as a full scan: %s\n", why);
    struct pciinv_work w;
    pciinv_last_work(inc, &w);
    return w.read;
}

/* The description of the current tree, a line per function, changed step by step. */
#define MAX_LINES 128
static char lines[MAX_LINES][200];
static size_t n_lines;
static char text[MAX_LINES * 200];

static const char *render(void)
{
    size_t len = 0;
    text[0] = '\0';
    for (size_t i = 0; i < n_lines; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "%s\n", lines[i]);
    return text;
}

static void add_lines(const char *block)
{
    for (const char *p = block; *p && n_lines < MAX_LINES;) {
        size_t len = strcspn(p, "\n");
        (void)snprintf(lines[n_lines++], sizeof(lines[0]), "%.*s", (int)len, p);
        p += len + (p[len] == '\n');
    }
}

static char *line_of(const char *address)
{
    for (size_t i = 0; i < n_lines; i++)
        if (strncmp(lines[i], address, strlen(address)) == 0 && lines[i][strlen(address)] == ' ')
            return lines[i];
    return NULL;
}

static void remove_line(const char *address)
{
    char *l = line_of(address);
    if (!l)
        return;
    size_t i = (size_t)(l - lines[0]) / sizeof(lines[0]);
    memmove(lines[i], lines[i + 1], (n_lines - i - 1) * sizeof(lines[0]));
    n_lines--;
}

/* Sets key=value on the function's line (value NULL: takes the key away). */
static void set_key(const char *address, const char *key, const char *value)
{
    char *l = line_of(address), out[200];
    if (!l)
        return;
    size_t len = 0, klen = strlen(key);
    out[0] = '\0';
    for (char *w = l; *w;) {
        size_t n = strcspn(w, " ");
        if (!(n > klen && strncmp(w, key, klen) == 0 && w[klen] == '='))
            len += (size_t)snprintf(out + len, sizeof(out) - len, "%s%.*s", len ? " " : "", (int)n,
                                    w);
        w += n + (w[n] == ' ');
    }
    if (value)
        (void)snprintf(out + len, sizeof(out) - len, " %s=%s", key, value);
    memcpy(l, out, sizeof(out));
}

/* --- the suite: one inventory, updated step after step -------------------------------------- */

static int suite_init(void)
{
    const char *tmp = getenv("TMPDIR");
    (void)snprintf(dir, sizeof(dir), "%s/hostdevd-rescan-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir) || fake_proc() < 0)
        return -1;
    (void)snprintf(link_path, sizeof(link_path), "%s/sys", dir);
    make_vfs(true);
    add_lines(BASE PF2_LINE("0"));
    struct err err = {{0}};
    if (flip(render()) < 0 || !(inc = open_inv()) || pciinv_scan(inc, &err) < 0)
        return -1;
    return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) < 0 ? -1 : 0;
}

static int remove_tree(const char *path)
{
    return nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS) < 0 ? -1 : 0;
}

static int suite_clean(void)
{
    inc = pciinv_free(inc);
    for (int i = 0; i < 2; i++)
        sysfs_tree_remove(&trees[i]);
    return remove_tree(dir);
}

/* The GPU bound to vfio-pci: its audio function's IOMMUGroupShared blocker names the new driver,
 * so the peer is described again though it was not read. */
static void test_driver_changed(void)
{
    static const char *const a[] = {"0000:01:00.0"};
    set_key("0000:01:00.0", "driver", "vfio-pci");
    CU_ASSERT_EQUAL(step(render(), a, 1, true), 1);
    struct pciinv_work w;
    pciinv_last_work(inc, &w);
    CU_ASSERT_EQUAL(w.described, 2);
}

static void test_device_removed(void)
{
    static const char *const a[] = {"0000:00:1f.6"};
    remove_line("0000:00:1f.6");
    CU_ASSERT_EQUAL(step(render(), a, 1, true), 1);
    CU_ASSERT_PTR_NULL(node_pci_scan_find(pciinv_result(inc), "0000:00:1f.6"));
}

static void test_device_added(void)
{
    static const char *const a[] = {"0000:5e:00.0"};
    add_lines("0000:5e:00.0 010802 144d:a808 driver=nvme iommu=50 numa=0");
    CU_ASSERT_EQUAL(step(render(), a, 1, true), 1);
    CU_ASSERT_PTR_NOT_NULL(node_pci_scan_find(pciinv_result(inc), "0000:5e:00.0"));
}

/* 64 VFs appear on PF2 in one burst: 64 uevents, none for the PF, whose sriov_numvfs the
 * update reads anyway (it is what each VF hangs off). */
static void test_64_vfs_appear(void)
{
    const char *a[64];
    for (int i = 0; i < 64; i++)
        a[i] = vf_addr[i];
    set_key(PF2, "sriov_numvfs", "64");
    add_lines(vf_lines);
    CU_ASSERT_EQUAL(step(render(), a, 64, true), 65);
    const struct node_pci_dev *pf = node_pci_scan_find(pciinv_result(inc), PF2);
    const struct node_pci_dev *last = node_pci_scan_find(pciinv_result(inc), vf_addr[63]);
    CU_ASSERT_TRUE(pf && pf->sriov_numvfs == 64);
    CU_ASSERT_TRUE(last && last->sriov_vf_index == 63);
}

/* Two VFs unbound, their uevents repeated (a storm of 1,000 events), coalesced: each function
 * read once. */
static void test_storm_coalesced(void)
{
    const char *a[1000];
    for (int i = 0; i < 1000; i++)
        a[i] = i % 2 ? vf_addr[5] : vf_addr[6];
    set_key(vf_addr[5], "driver", NULL);
    set_key(vf_addr[6], "driver", NULL);
    /* the two VFs and their PF */
    CU_ASSERT_EQUAL(step(render(), a, 1000, true), 3);
}

/* The PF renamed its interface: its VFs' parent SRIOVNetworkDevice changes with it, though
 * none of them was read again. */
static void test_pf_netdev_renamed(void)
{
    static const char *const a[] = {PF2};
    set_key(PF2, "netdev", "hdfakepfx");
    CU_ASSERT_EQUAL(step(render(), a, 1, true), 1);
    struct pciinv_work w;
    pciinv_last_work(inc, &w);
    CU_ASSERT_EQUAL(w.described, 65);
}

/* The VFs go (sriov_numvfs 0): 64 remove events. */
static void test_64_vfs_removed(void)
{
    const char *a[64];
    for (int i = 0; i < 64; i++) {
        a[i] = vf_addr[i];
        remove_line(vf_addr[i]);
    }
    set_key(PF2, "sriov_numvfs", "0");
    CU_ASSERT_EQUAL(step(render(), a, 64, true), 65);
    CU_ASSERT_EQUAL(pciinv_result(inc)->n_devs, n_lines);
}

/* The PF's virtfn1 link gone (its uevent alone): the VF it led to, not named, is read again, as
 * its index now reads otherwise. */
static void test_vf_link_gone(void)
{
    static const char *const a[] = {"0000:3b:00.0"};
    CU_ASSERT_EQUAL_FATAL(flip(render()), 0);
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&trees[current], "devices/pci0000:3b/0000:3b:00.0/virtfn1"),
                    0);
    struct err err = {{0}};
    CU_ASSERT_EQUAL(pciinv_update(inc, a, 1, &err), 1);
    char why[1200];
    diff_full(why, sizeof(why));
    CU_ASSERT_STRING_EQUAL(why, "");
    if (why[0])
        fprintf(stderr, "\n  not as a full scan: %s\n", why);
    const struct node_pci_dev *vf = node_pci_scan_find(pciinv_result(inc), "0000:3b:01.1");
    CU_ASSERT_TRUE(vf && vf->sriov_vf_index == -1 && strstr(vf->problem, "VF index"));
    struct pciinv_work w;
    pciinv_last_work(inc, &w);
    CU_ASSERT_EQUAL(w.read, 2);
}

/* A bridge's change is not local: a full scan instead. So is a name that is not a PCI address
 * (a uevent of another subsystem's device handed on by mistake). */
static void test_not_local(void)
{
    static const char *const bridge[] = {"0000:00:1c.0"};
    static const char *const usb[] = {"1-2"};
    set_key("0000:00:1c.0", "driver", NULL);
    step(render(), bridge, 1, false);
    step(render(), usb, 1, false);
}

/* The check itself: an update told of the wrong device differs from a full scan. */
static void test_check_catches_a_missed_change(void)
{
    static const char *const a[] = {"0000:01:00.1"};
    set_key("0000:3b:01.0", "driver", NULL);
    CU_ASSERT_EQUAL_FATAL(flip(render()), 0);
    struct err err = {{0}};
    CU_ASSERT_EQUAL(pciinv_update(inc, a, 1, &err), 1);
    char why[1200];
    diff_full(why, sizeof(why));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "0000:3b:01.0"));
    /* and told of it, it catches up */
    static const char *const b[] = {"0000:3b:01.0"};
    CU_ASSERT_EQUAL(pciinv_update(inc, b, 1, &err), 1);
    diff_full(why, sizeof(why));
    CU_ASSERT_STRING_EQUAL(why, "");
}

/* node_pci_rescan_devices on its own: a bad address leaves the result alone. */
static void test_bad_address(void)
{
    struct node_pci *p = NULL;
    CU_ASSERT_EQUAL_FATAL(node_pci_new(link_path, PCI_IDS, &p), 0);
    struct node_pci_scan_result res = {0};
    CU_ASSERT_EQUAL_FATAL(node_pci_scan(p, &res, NULL), 0);
    size_t n = res.n_devs;
    static const char *const a[] = {"0000:01:00.0", "0000:1:00.0"};
    struct err err = {{0}};
    CU_ASSERT_EQUAL(node_pci_rescan_devices(p, &res, a, 2, NULL, NULL, &err), -EINVAL);
    CU_ASSERT_EQUAL(res.n_devs, n);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a PCI address"));
    node_pci_scan_result_done(&res);
    node_pci_free(p);
}

static CU_TestInfo tests[] = {
        {"one device's driver changed (and its IOMMU group peer)", test_driver_changed},
        {"a device removed", test_device_removed},
        {"a device added", test_device_added},
        {"64 VFs appear in one burst", test_64_vfs_appear},
        {"a uevent storm coalesced", test_storm_coalesced},
        {"a PF's interface renamed: its VFs' parent", test_pf_netdev_renamed},
        {"64 VFs removed", test_64_vfs_removed},
        {"a VF's index link gone", test_vf_link_gone},
        {"not local: a bridge, a name not a PCI address", test_not_local},
        {"the check catches a change missed", test_check_catches_a_missed_change},
        {"a bad address leaves the result alone", test_bad_address},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo pcirescan_suites[] = {
        {"pcirescan", suite_init, suite_clean, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
