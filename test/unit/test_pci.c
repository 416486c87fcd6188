/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_pci.c - node/pci on fake sysfs trees built from the descriptions in
 * test/fixtures/sysfs/.
 *
 * Every device of the small server is checked against its line of the description, and its
 * names against a reading of /usr/share/misc/pci.ids made here, independently of libpci.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/pci.h"
#include "sysfs_tree.h"

#define PCI_IDS    "/usr/share/misc/pci.ids"
#define SMALL      FIXTURES "/sysfs/small-server.txt"
#define LARGE      FIXTURES "/sysfs/large-1024.txt"
#define MAX_EXPECT 1100

/* Values out-parameters must keep when a call fails. */
static struct node_pci_dev sentinel_dev;
static _Alignas(16) char sentinel_pci[64];
#define SENTINEL     (&sentinel_dev)
#define PCI_SENTINEL ((struct node_pci *)(void *)sentinel_pci)

/* One line of a description, with the defaults of hack/mk-sysfs-fixture.sh. */
struct expect {
    char address[32];
    unsigned class_id, prog_if, vendor, device, subv, subd, rev;
    char driver[64];
    int iommu, numa, totalvfs, numvfs;
    char physfn[32];
    char omit[64];
};

static struct sysfs_tree small_tree;
static struct node_pci *small_pci;
static struct node_pci_scan_result small_res;
static struct node_pci_dev *small_devs;
static size_t small_count;
static struct expect *small_expect;
static size_t small_expect_count;

static unsigned hex(const char *s)
{
    return (unsigned)strtoul(s, NULL, 16);
}

static int dec(const char *s)
{
    return (int)strtol(s, NULL, 10);
}

static void parse_key(struct expect *e, const char *kv)
{
    const char *v = strchr(kv, '=');
    if (!v)
        return;
    size_t klen = (size_t)(v - kv);
    v++;
#define KEY(k) (klen == strlen(k) && strncmp(kv, k, klen) == 0)
    if (KEY("sub"))
        e->subv = hex(v), e->subd = hex(v + 5);
    else if (KEY("rev"))
        e->rev = hex(v);
    else if (KEY("progif"))
        e->prog_if = hex(v);
    else if (KEY("driver"))
        snprintf(e->driver, sizeof(e->driver), "%s", v);
    else if (KEY("iommu"))
        e->iommu = dec(v);
    else if (KEY("numa"))
        e->numa = dec(v);
    else if (KEY("sriov_totalvfs"))
        e->totalvfs = dec(v);
    else if (KEY("sriov_numvfs"))
        e->numvfs = dec(v);
    else if (KEY("physfn"))
        snprintf(e->physfn, sizeof(e->physfn), "%s", v);
    else if (KEY("omit"))
        snprintf(e->omit, sizeof(e->omit), "%s", v);
#undef KEY
}

/* Parses one description line into `e`; false for comments and blank lines. */
static bool parse_line(char *line, struct expect *e)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    char cls[16], ids[16];
    int used = 0;
    if (sscanf(line, "%31s %15s %15s%n", e->address, cls, ids, &used) != 3)
        return false;
    unsigned c = hex(cls);
    e->class_id = strlen(cls) == 6 ? c >> 8 : c;
    e->prog_if = strlen(cls) == 6 ? c & 0xff : 0;
    e->vendor = hex(ids);
    e->device = hex(ids + 5);
    e->iommu = e->numa = e->totalvfs = e->numvfs = -1;
    char *save = NULL;
    for (char *kv = strtok_r(line + used, " \t\n", &save); kv; kv = strtok_r(NULL, " \t\n", &save))
        parse_key(e, kv);
    return true;
}

static size_t read_description(const char *path, struct expect *out, size_t max)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line[512];
    size_t n = 0;
    while (n < max && fgets(line, sizeof(line), f)) {
        memset(&out[n], 0, sizeof(out[n]));
        if (parse_line(line, &out[n]))
            n++;
    }
    fclose(f);
    return n;
}

static const struct expect *find_expect(const char *address)
{
    for (size_t i = 0; i < small_expect_count; i++)
        if (strcmp(small_expect[i].address, address) == 0)
            return &small_expect[i];
    return NULL;
}

static int suite_init(void)
{
    small_expect = calloc(MAX_EXPECT, sizeof(*small_expect));
    if (!small_expect)
        return -1;
    small_expect_count = read_description(SMALL, small_expect, MAX_EXPECT);
    if (sysfs_tree_make(&small_tree, SMALL) < 0)
        return -1;
    if (node_pci_new(small_tree.root, PCI_IDS, &small_pci) < 0)
        return -1;
    if (node_pci_scan(small_pci, &small_res, NULL) < 0 || small_res.n_skipped != 0)
        return -1;
    small_devs = small_res.devs;
    small_count = small_res.n_devs;
    return 0;
}

static int suite_clean(void)
{
    node_pci_scan_result_done(&small_res);
    small_devs = NULL;
    small_pci = node_pci_free(small_pci);
    sysfs_tree_remove(&small_tree);
    free(small_expect);
    small_expect = NULL;
    return 0;
}

/* Orders addresses as (domain, bus, device, function). */
static int address_cmp(const char *a, const char *b)
{
    for (int i = 0; i < 4; i++) {
        char *ea, *eb;
        unsigned long x = strtoul(a, &ea, 16), y = strtoul(b, &eb, 16);
        if (x != y)
            return x < y ? -1 : 1;
        a = *ea ? ea + 1 : ea;
        b = *eb ? eb + 1 : eb;
    }
    return 0;
}

static void check_device(const struct node_pci_dev *d, const struct expect *e)
{
    CU_ASSERT_EQUAL(d->vendor_id, e->vendor);
    CU_ASSERT_EQUAL(d->device_id, e->device);
    CU_ASSERT_EQUAL(d->subsystem_vendor_id, e->subv);
    CU_ASSERT_EQUAL(d->subsystem_device_id, e->subd);
    CU_ASSERT_EQUAL(d->class_id, e->class_id);
    CU_ASSERT_EQUAL(d->prog_if, e->prog_if);
    CU_ASSERT_EQUAL(d->revision, e->rev);
    CU_ASSERT_STRING_EQUAL(d->driver, e->driver);
    CU_ASSERT_EQUAL(d->iommu_group, e->iommu);
    CU_ASSERT_EQUAL(d->numa_node, e->numa);
    CU_ASSERT_STRING_EQUAL(d->physfn, e->physfn);
    CU_ASSERT_EQUAL(d->sriov_totalvfs, e->totalvfs);
    CU_ASSERT_EQUAL(d->sriov_numvfs, e->numvfs);
    CU_ASSERT_EQUAL(d->is_bridge, e->class_id == 0x0604);
    CU_ASSERT_STRING_EQUAL(d->problem, "");
    /* the fixture puts every device right below devices/pci<domain>:<bus of the device> */
    char root[24];
    (void)snprintf(root, sizeof(root), "pci%.*s", (int)(strrchr(d->address, ':') - d->address),
                   d->address);
    CU_ASSERT_STRING_EQUAL(d->pcie_root, root);
}

static void test_scan_matches_description(void)
{
    CU_ASSERT_EQUAL(small_expect_count, 41);
    CU_ASSERT_EQUAL(small_count, small_expect_count);
    for (size_t i = 0; i < small_count; i++) {
        const struct node_pci_dev *d = &small_devs[i];
        const struct expect *e = find_expect(d->address);
        CU_ASSERT_PTR_NOT_NULL(e);
        if (e)
            check_device(d, e);
        if (i > 0)
            CU_ASSERT_TRUE(address_cmp(small_devs[i - 1].address, d->address) < 0);
    }
    /* Sorted by number: the 5-digit domain comes last. */
    CU_ASSERT_STRING_EQUAL(small_devs[0].address, "0000:00:00.0");
    CU_ASSERT_STRING_EQUAL(small_devs[small_count - 1].address, "10000:01:00.0");
}

/* Names from pci.ids, read here line by line: vendor, device, and class or subclass. */
struct ids_oracle {
    char vendor[300], device[300], class_name[300], subclass[300];
};

/* A pci.ids line "<hex id>  <name>": the id and where the name starts. */
static bool id_line(const char *s, unsigned *id, const char **name)
{
    char *end;
    *id = (unsigned)strtoul(s, &end, 16);
    if (end == s || *end != ' ')
        return false;
    *name = end + strspn(end, " ");
    return true;
}

static void ids_lookup(unsigned vendor, unsigned device, unsigned class_id, struct ids_oracle *o)
{
    memset(o, 0, sizeof(*o));
    FILE *f = fopen(PCI_IDS, "re");
    if (!f)
        return;
    char line[512];
    bool in_vendor = false, in_class = false;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        unsigned id;
        const char *name;
        if (line[0] == '#' || line[0] == '\0')
            continue;
        if (line[0] == 'C' && line[1] == ' ') {
            in_vendor = false;
            in_class = id_line(line + 2, &id, &name) && id == class_id >> 8;
            if (in_class)
                snprintf(o->class_name, sizeof(o->class_name), "%s", name);
        } else if (line[0] != '\t') {
            in_class = false;
            in_vendor = id_line(line, &id, &name) && id == vendor;
            if (in_vendor)
                snprintf(o->vendor, sizeof(o->vendor), "%s", name);
        } else if (line[1] != '\t' && id_line(line + 1, &id, &name)) {
            if (in_vendor && id == device)
                snprintf(o->device, sizeof(o->device), "%s", name);
            if (in_class && id == (class_id & 0xff))
                snprintf(o->subclass, sizeof(o->subclass), "%s", name);
        }
    }
    fclose(f);
}

static void test_names_from_pci_ids(void)
{
    for (size_t i = 0; i < small_count; i++) {
        const struct node_pci_dev *d = &small_devs[i];
        struct ids_oracle o;
        ids_lookup(d->vendor_id, d->device_id, d->class_id, &o);
        CU_ASSERT_STRING_EQUAL(d->vendor_name, o.vendor);
        CU_ASSERT_STRING_EQUAL(d->device_name, o.device);
        CU_ASSERT_STRING_EQUAL(d->class_name, o.subclass[0] ? o.subclass : o.class_name);
        /* Every id in the fixture exists in pci.ids. */
        CU_ASSERT_NOT_EQUAL(d->vendor_name[0], '\0');
        CU_ASSERT_NOT_EQUAL(d->device_name[0], '\0');
        CU_ASSERT_NOT_EQUAL(d->class_name[0], '\0');
    }
}

static const struct node_pci_dev *find_dev(const struct node_pci_dev *devs, size_t n,
                                           const char *address)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(devs[i].address, address) == 0)
            return &devs[i];
    return NULL;
}

static void test_names_spot_checks(void)
{
    const struct node_pci_dev *d = find_dev(small_devs, small_count, "0000:3b:00.2");
    CU_ASSERT_PTR_NOT_NULL(d);
    if (d) {
        CU_ASSERT_STRING_EQUAL(d->vendor_name, "Mellanox Technologies");
        CU_ASSERT_STRING_EQUAL(d->device_name, "MT27800 Family [ConnectX-5 Virtual Function]");
        CU_ASSERT_STRING_EQUAL(d->class_name, "Ethernet controller");
    }
    d = find_dev(small_devs, small_count, "0000:00:14.0");
    CU_ASSERT_PTR_NOT_NULL(d);
    if (d) {
        CU_ASSERT_STRING_EQUAL(d->class_name, "USB controller");
        CU_ASSERT_EQUAL(d->class_id, 0x0c03);
        CU_ASSERT_EQUAL(d->prog_if, 0x30);
    }
    d = find_dev(small_devs, small_count, "0000:18:00.1");
    CU_ASSERT_PTR_NOT_NULL(d);
    if (d) {
        CU_ASSERT_STRING_EQUAL(d->vendor_name, "NVIDIA Corporation");
        CU_ASSERT_STRING_EQUAL(d->device_name, "GA102 High Definition Audio Controller");
        CU_ASSERT_STRING_EQUAL(d->class_name, "Audio device");
    }
}

static void test_bridges(void)
{
    size_t bridges = 0, want = 0;
    for (size_t i = 0; i < small_expect_count; i++)
        want += small_expect[i].class_id == 0x0604;
    for (size_t i = 0; i < small_count; i++) {
        if (small_devs[i].is_bridge) {
            bridges++;
            CU_ASSERT_EQUAL(small_devs[i].class_id, 0x0604);
            CU_ASSERT_STRING_EQUAL(small_devs[i].class_name, "PCI bridge");
        }
    }
    CU_ASSERT_EQUAL(want, 8);
    CU_ASSERT_EQUAL(bridges, want);
    const struct node_pci_dev *d = find_dev(small_devs, small_count, "0000:00:00.0");
    CU_ASSERT_FALSE(d ? d->is_bridge : true); /* a host bridge is not a PCI-to-PCI bridge */
}

static void test_sriov(void)
{
    const struct node_pci_dev *pf = find_dev(small_devs, small_count, "0000:3b:00.0");
    CU_ASSERT_PTR_NOT_NULL(pf);
    if (pf) {
        CU_ASSERT_EQUAL(pf->sriov_totalvfs, 8);
        CU_ASSERT_EQUAL(pf->sriov_numvfs, 4);
        CU_ASSERT_STRING_EQUAL(pf->physfn, "");
    }
    const struct node_pci_dev *idle = find_dev(small_devs, small_count, "0000:3b:00.1");
    CU_ASSERT_EQUAL(idle ? idle->sriov_numvfs : -2, 0);
    size_t vfs = 0;
    for (size_t i = 0; i < small_count; i++) {
        const struct node_pci_dev *d = &small_devs[i];
        if (d->physfn[0] == '\0')
            continue;
        vfs++;
        CU_ASSERT_STRING_EQUAL(d->physfn, "0000:3b:00.0");
        CU_ASSERT_EQUAL(d->device_id, 0x1018);
        CU_ASSERT_EQUAL(d->sriov_totalvfs, -1);
        CU_ASSERT_EQUAL(d->sriov_numvfs, -1);
    }
    CU_ASSERT_EQUAL(vfs, 4);
    const struct node_pci_dev *vf = find_dev(small_devs, small_count, "0000:3b:00.4");
    CU_ASSERT_STRING_EQUAL(vf ? vf->driver : "", "vfio-pci");
}

static void test_unbound_and_no_iommu(void)
{
    const struct node_pci_dev *d = find_dev(small_devs, small_count, "0000:d8:00.2");
    CU_ASSERT_PTR_NOT_NULL(d);
    if (d) {
        CU_ASSERT_STRING_EQUAL(d->driver, "");
        CU_ASSERT_EQUAL(d->iommu_group, 73);
    }
    d = find_dev(small_devs, small_count, "10000:01:00.0");
    CU_ASSERT_PTR_NOT_NULL(d);
    if (d) {
        CU_ASSERT_EQUAL(d->iommu_group, -1);
        CU_ASSERT_STRING_EQUAL(d->driver, "nvme");
        CU_ASSERT_EQUAL(d->numa_node, 0);
    }
    /* The GPU and its audio function share a group. */
    const struct node_pci_dev *gpu = find_dev(small_devs, small_count, "0000:af:00.0");
    const struct node_pci_dev *audio = find_dev(small_devs, small_count, "0000:af:00.1");
    CU_ASSERT_EQUAL(gpu ? gpu->iommu_group : -2, audio ? audio->iommu_group : -3);
}

static bool dev_equal(const struct node_pci_dev *a, const struct node_pci_dev *b)
{
    return strcmp(a->address, b->address) == 0 && a->vendor_id == b->vendor_id &&
           a->device_id == b->device_id && a->subsystem_vendor_id == b->subsystem_vendor_id &&
           a->subsystem_device_id == b->subsystem_device_id && a->class_id == b->class_id &&
           a->prog_if == b->prog_if && a->revision == b->revision &&
           strcmp(a->vendor_name, b->vendor_name) == 0 &&
           strcmp(a->device_name, b->device_name) == 0 &&
           strcmp(a->class_name, b->class_name) == 0 && strcmp(a->driver, b->driver) == 0 &&
           a->iommu_group == b->iommu_group && a->numa_node == b->numa_node &&
           strcmp(a->physfn, b->physfn) == 0 && a->sriov_totalvfs == b->sriov_totalvfs &&
           a->sriov_numvfs == b->sriov_numvfs && a->is_bridge == b->is_bridge &&
           strcmp(a->problem, b->problem) == 0;
}

static void test_second_scan_identical(void)
{
    struct node_pci_scan_result res = {0};
    CU_ASSERT_EQUAL(node_pci_scan(small_pci, &res, NULL), 0);
    CU_ASSERT_EQUAL(res.n_devs, small_count);
    CU_ASSERT_EQUAL(res.n_skipped, 0);
    for (size_t i = 0; res.devs && i < res.n_devs && i < small_count; i++)
        CU_ASSERT_TRUE(dev_equal(&res.devs[i], &small_devs[i]));
    node_pci_scan_result_done(&res);
    node_pci_scan_result_done(NULL);
}

/* A tree from `text` and a node_pci on it (names from pci.ids). */
static int make_text(struct sysfs_tree *t, const char *text, struct node_pci **ret)
{
    if (sysfs_tree_make_text(t, text) < 0)
        return -1;
    if (node_pci_new(t->root, PCI_IDS, ret) < 0) {
        sysfs_tree_remove(t);
        return -1;
    }
    return 0;
}

/* ---- hostile trees: one bad device never hides the others ---------------------------------- */

#define BAD     "0000:00:01.0"
#define BAD_DIR "devices/pci0000:00/" BAD "/"
#define BAD_BUS "bus/pci/devices/" BAD

static const char hostile_text[] = "0000:00:00.0 0600 8086:2020 iommu=0 numa=0\n" BAD
                                   " 0200 8086:1521 driver=igb iommu=1 numa=0\n"
                                   "0000:00:02.0 0200 8086:1521 driver=igb iommu=2 numa=0\n";

static struct sysfs_tree hostile;
static struct node_pci *hostile_pci;

/* Before each hostile test: a fresh three-device tree; BAD is the one the test spoils. */
static bool hostile_open(void)
{
    memset(&hostile, 0, sizeof(hostile));
    hostile_pci = NULL;
    int r = make_text(&hostile, hostile_text, &hostile_pci);
    CU_ASSERT_EQUAL(r, 0);
    return r == 0;
}

static void hostile_close(void)
{
    node_pci_free(hostile_pci);
    hostile_pci = NULL;
    sysfs_tree_remove(&hostile);
}

static void put(const char *path, const char *text)
{
    CU_ASSERT_EQUAL(sysfs_tree_put(&hostile, path, text, strlen(text)), 0);
}

static void put_big(const char *path, size_t n)
{
    char *big = malloc(n);
    CU_ASSERT_PTR_NOT_NULL(big);
    if (!big)
        return;
    memset(big, '1', n);
    CU_ASSERT_EQUAL(sysfs_tree_put(&hostile, path, big, n), 0);
    free(big);
}

static void mkdir_in(const char *path)
{
    char full[512];
    snprintf(full, sizeof(full), "%s/%s", hostile.root, path);
    CU_ASSERT_EQUAL(mkdir(full, 0755), 0);
}

static void link_to(const char *path, const char *target)
{
    CU_ASSERT_EQUAL(sysfs_tree_link(&hostile, path, target), 0);
}

/* Scans the hostile tree, which always succeeds. */
static struct node_pci_scan_result scan_hostile(void)
{
    struct node_pci_scan_result res = {0};
    struct err err = {"untouched"};
    CU_ASSERT_EQUAL(node_pci_scan(hostile_pci, &res, &err), 0);
    CU_ASSERT_STRING_EQUAL(err.msg, "untouched");
    return res;
}

/* The other two devices are there and fine. */
static void check_others(const struct node_pci_scan_result *res)
{
    const struct node_pci_dev *a = find_dev(res->devs, res->n_devs, "0000:00:00.0");
    const struct node_pci_dev *b = find_dev(res->devs, res->n_devs, "0000:00:02.0");
    CU_ASSERT_PTR_NOT_NULL(a);
    CU_ASSERT_PTR_NOT_NULL(b);
    if (a && b) {
        CU_ASSERT_STRING_EQUAL(a->problem, "");
        CU_ASSERT_STRING_EQUAL(b->problem, "");
        CU_ASSERT_EQUAL(a->class_id, 0x0600);
        CU_ASSERT_STRING_EQUAL(b->driver, "igb");
        CU_ASSERT_EQUAL(b->iommu_group, 2);
    }
}

/* BAD was skipped with a reason containing `why`; the others are published. */
static void expect_skipped(const char *entry, const char *why)
{
    struct node_pci_scan_result res = scan_hostile();
    CU_ASSERT_EQUAL(res.n_devs, 2);
    CU_ASSERT_EQUAL(res.n_skipped, 1);
    check_others(&res);
    CU_ASSERT_PTR_NULL(find_dev(res.devs, res.n_devs, BAD));
    if (res.n_skipped == 1) {
        CU_ASSERT_STRING_EQUAL(res.skipped[0].entry, entry);
        CU_ASSERT_PTR_NOT_NULL(strstr(res.skipped[0].why, why));
        if (!strstr(res.skipped[0].why, why))
            fprintf(stderr, "\nskipped %s: \"%s\"\n", entry, res.skipped[0].why);
    }
    node_pci_scan_result_done(&res);
}

/* BAD is published with a problem containing `problem` ("" for none); returns a copy. */
static struct node_pci_dev expect_problem(const char *problem)
{
    struct node_pci_dev out = {.iommu_group = -2};
    struct node_pci_scan_result res = scan_hostile();
    CU_ASSERT_EQUAL(res.n_devs, 3);
    CU_ASSERT_EQUAL(res.n_skipped, 0);
    check_others(&res);
    const struct node_pci_dev *d = find_dev(res.devs, res.n_devs, BAD);
    CU_ASSERT_PTR_NOT_NULL(d);
    if (d) {
        out = *d;
        CU_ASSERT_EQUAL(d->vendor_id, 0x8086);
        CU_ASSERT_EQUAL(d->device_id, 0x1521);
        if (!problem[0])
            CU_ASSERT_STRING_EQUAL(d->problem, "");
        if (problem[0] && !strstr(d->problem, problem)) {
            CU_FAIL("problem");
            fprintf(stderr, "\nproblem of %s: \"%s\", want \"%s\"\n", BAD, d->problem, problem);
        }
    }
    node_pci_scan_result_done(&res);
    return out;
}

static void test_device_not_a_directory(void)
{
    if (!hostile_open())
        return;
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&hostile, BAD_BUS), 0);
    put(BAD_BUS, "a regular file\n");
    expect_skipped(BAD, BAD_BUS ": not a directory");
    /* A link to a regular file: the same. */
    link_to(BAD_BUS, "../../../" BAD_DIR "vendor");
    expect_skipped(BAD, "not a directory");
    hostile_close();
}

/* libpci reads "0xZZZZ" as vendor 0000: such an identity is skipped, with what is wrong. */
static void test_device_ident_malformed(void)
{
    if (!hostile_open())
        return;
    put(BAD_DIR "vendor", "0xZZZZ\n");
    expect_skipped(BAD, "vendor: malformed");
    put(BAD_DIR "vendor", "0x8086\n");
    put(BAD_DIR "device", "0x123456\n");
    expect_skipped(BAD, "device: out of range");
    hostile_close();
}

static void test_device_dangling_link(void)
{
    if (!hostile_open())
        return;
    link_to(BAD_BUS, "../../../devices/pci0000:00/gone");
    expect_skipped(BAD, "leads nowhere");
    hostile_close();
}

static void test_device_link_loop(void)
{
    if (!hostile_open())
        return;
    link_to(BAD_BUS, BAD);
    expect_skipped(BAD, "a symbolic link loop");
    link_to(BAD_BUS, "loop-a");
    link_to("bus/pci/devices/loop-a", BAD);
    struct node_pci_scan_result res = scan_hostile();
    CU_ASSERT_EQUAL(res.n_devs, 2);
    CU_ASSERT_EQUAL(res.n_skipped, 2); /* BAD (a loop) and loop-a (not an address) */
    check_others(&res);
    node_pci_scan_result_done(&res);
    hostile_close();
}

/* A device entry that leads out of the root, by an absolute link or by "..": it resolves
 * inside the root (where there is nothing), so the device is skipped and nothing outside is read;
 * the others are published. */
static void test_device_link_out_of_root(void)
{
    if (!hostile_open())
        return;
    link_to(BAD_BUS, "/proc/self");
    expect_skipped(BAD, "leads nowhere");
    link_to(BAD_BUS, "../../../../../../../../../../../../../../proc/self");
    expect_skipped(BAD, "leads nowhere");
    hostile_close();
}

/* An attribute that is a link out of the device's directory (to a number outside the root, or
 * to another device's attribute) is read below the opened directory, where it leads nowhere:
 * absent, as if there were none; nothing outside the directory is read. */
static void test_attribute_link_out_of_device(void)
{
    char outside[] = "/tmp/hostdevd-outside-XXXXXX";
    int fd = mkstemp(outside);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(write(fd, "7\n", 2), 2);
    close(fd);
    if (!hostile_open()) {
        unlink(outside);
        return;
    }
    put("devices/pci0000:00/0000:00:00.0/sriov_totalvfs", "4\n");
    link_to(BAD_DIR "numa_node", outside);
    link_to(BAD_DIR "sriov_totalvfs", "../0000:00:00.0/sriov_totalvfs");
    struct node_pci_dev d = expect_problem("");
    CU_ASSERT_EQUAL(d.numa_node, -1);
    CU_ASSERT_EQUAL(d.sriov_totalvfs, -1);
    /* a link that stays in the directory is followed */
    put(BAD_DIR "numa_real", "1\n");
    link_to(BAD_DIR "numa_node", "numa_real");
    CU_ASSERT_EQUAL(expect_problem("").numa_node, 1);
    hostile_close();
    unlink(outside);
}

/* The PCI root is the first pci<domain>:<bus> element of the device's real path. */
static void test_pcie_root(void)
{
    if (!hostile_open())
        return;
    mkdir_in("devices/pci0000:64");
    mkdir_in("devices/pci0000:64/0000:64:00.0");
    link_to(BAD_BUS, "../../../devices/pci0000:64/0000:64:00.0/../../pci0000:00/" BAD);
    CU_ASSERT_STRING_EQUAL(expect_problem("").pcie_root, "pci0000:64");
    link_to(BAD_BUS, "../../../devices/pci0000:00/" BAD);
    CU_ASSERT_STRING_EQUAL(expect_problem("").pcie_root, "pci0000:00");
    hostile_close();
}

static void test_entry_not_an_address(void)
{
    if (!hostile_open())
        return;
    /* Names libpci would read as some other device's address, or not at all. */
    static const char *const names[] = {"garbage",       "0000:00:1:0.0",    "0:00:03.0",
                                        "0000:00:03.0x", "0000:00:20.0",     "0000:00:03.8",
                                        "0000:0A:00.0",  "80000000:00:00.0", "00000:00:03.0",
                                        "+000:00:03.0",  "0000:00:03.0\n"};
    size_t n = sizeof(names) / sizeof(names[0]);
    for (size_t i = 0; i < n; i++) {
        char path[128];
        snprintf(path, sizeof(path), "bus/pci/devices/%s", names[i]);
        link_to(path, "../../../" BAD_DIR);
    }
    struct node_pci_scan_result res = scan_hostile();
    CU_ASSERT_EQUAL(res.n_devs, 3);
    CU_ASSERT_EQUAL(res.n_skipped, n);
    check_others(&res);
    for (size_t i = 0; i < res.n_skipped; i++)
        CU_ASSERT_STRING_EQUAL(res.skipped[i].why, "the name is not a PCI address");
    if (res.n_skipped == n)
        CU_ASSERT_STRING_EQUAL(res.skipped[n - 1].entry, "garbage"); /* in name order */
    node_pci_scan_result_done(&res);
    hostile_close();
}

static void test_identity_unreadable(void)
{
    if (!hostile_open())
        return;
    /* libpci cannot read a mandatory attribute: its error skips the device. */
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&hostile, BAD_DIR "vendor"), 0);
    expect_skipped(BAD, BAD "/vendor: No such file or directory");
    put_big(BAD_DIR "vendor", 2000);
    expect_skipped(BAD, BAD "/vendor too long");
    put(BAD_DIR "vendor", "0x8086\n");
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&hostile, BAD_DIR "class"), 0);
    mkdir_in(BAD_DIR "class");
    expect_skipped(BAD, BAD "/class");
    hostile_close();
}

static void test_bad_optional_attribute(void)
{
    if (!hostile_open())
        return;
    put(BAD_DIR "numa_node", "zero\n");
    struct node_pci_dev d = expect_problem("numa_node: malformed");
    CU_ASSERT_EQUAL(d.numa_node, -1);
    CU_ASSERT_EQUAL(d.iommu_group, 1); /* the rest is read */
    CU_ASSERT_STRING_EQUAL(d.driver, "igb");
    CU_ASSERT_STRING_EQUAL(d.vendor_name, "Intel Corporation");
    put(BAD_DIR "numa_node", "-2\n");
    CU_ASSERT_EQUAL(expect_problem("numa_node: out of range").numa_node, -1);
    put_big(BAD_DIR "numa_node", 5000); /* more than a sysfs page */
    d = expect_problem("numa_node: too long");
    CU_ASSERT_EQUAL(d.numa_node, -1);
    put(BAD_DIR "sriov_totalvfs", "8 VFs\n");
    d = expect_problem("numa_node: too long; sriov_totalvfs: malformed");
    CU_ASSERT_EQUAL(d.sriov_totalvfs, -1);
    put(BAD_DIR "numa_node", "1\n");
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&hostile, BAD_DIR "sriov_totalvfs"), 0);
    d = expect_problem("");
    CU_ASSERT_EQUAL(d.numa_node, 1);
    hostile_close();
}

/* libpci's warnings about optional attributes it reads become the problem. */
static void test_libpci_warning(void)
{
    if (!hostile_open())
        return;
    put_big(BAD_DIR "subsystem_vendor", 2000);
    struct node_pci_dev d = expect_problem(BAD "/subsystem_vendor too long");
    CU_ASSERT_EQUAL(d.subsystem_vendor_id, 0);
    CU_ASSERT_EQUAL(d.iommu_group, 1);
    hostile_close();
}

static void test_iommu_group_loop(void)
{
    if (!hostile_open())
        return;
    link_to(BAD_DIR "iommu_group", "iommu_group");
    struct node_pci_dev d = expect_problem("iommu_group: a symbolic link loop");
    CU_ASSERT_EQUAL(d.iommu_group, -1);
    CU_ASSERT_STRING_EQUAL(d.driver, "igb");
    CU_ASSERT_EQUAL(d.numa_node, 0);
    /* A loop further on, through a group directory that is a link to itself. */
    link_to(BAD_DIR "iommu_group", "../../../kernel/iommu_groups/7");
    link_to("kernel/iommu_groups/7", "7");
    d = expect_problem("iommu_group: a symbolic link loop");
    CU_ASSERT_EQUAL(d.iommu_group, -1);
    /* A link named like a group that leads elsewhere; a group that is not a number. */
    link_to(BAD_DIR "iommu_group",
            "../../../bus/pci/drivers/igb/../../../../kernel/iommu_groups/2");
    d = expect_problem("");
    CU_ASSERT_EQUAL(d.iommu_group, 2);
    mkdir_in("devices/7");
    link_to(BAD_DIR "iommu_group", "../../7");
    d = expect_problem("iommu_group: does not lead to a directory in kernel/iommu_groups");
    CU_ASSERT_EQUAL(d.iommu_group, -1);
    mkdir_in("kernel/iommu_groups/x");
    link_to(BAD_DIR "iommu_group", "../../../kernel/iommu_groups/x");
    d = expect_problem("iommu_group: malformed");
    CU_ASSERT_EQUAL(d.iommu_group, -1);
    hostile_close();
}

static void test_driver_link_outside_drivers(void)
{
    if (!hostile_open())
        return;
    /* Named like a driver, but leads to another directory. */
    mkdir_in("devices/igb");
    link_to(BAD_DIR "driver", "../../igb");
    struct node_pci_dev d =
            expect_problem("driver: does not lead to a directory in bus/pci/drivers");
    CU_ASSERT_STRING_EQUAL(d.driver, "");
    CU_ASSERT_EQUAL(d.iommu_group, 1);
    link_to(BAD_DIR "driver", "../../../kernel/iommu_groups/1");
    d = expect_problem("driver: does not lead to a directory in bus/pci/drivers");
    CU_ASSERT_STRING_EQUAL(d.driver, "");
    link_to(BAD_DIR "driver", "driver");
    d = expect_problem("driver: a symbolic link loop");
    CU_ASSERT_STRING_EQUAL(d.driver, "");
    /* Dangling (the driver went away): unbound, nothing wrong. */
    link_to(BAD_DIR "driver", "../../../bus/pci/drivers/gone");
    d = expect_problem("");
    CU_ASSERT_STRING_EQUAL(d.driver, "");
    hostile_close();
}

static void test_physfn_outside_devices(void)
{
    if (!hostile_open())
        return;
    link_to(BAD_DIR "physfn", "../../../kernel/iommu_groups/0");
    struct node_pci_dev d =
            expect_problem("physfn: does not lead to a directory in bus/pci/devices");
    CU_ASSERT_STRING_EQUAL(d.physfn, "");
    link_to(BAD_DIR "physfn", "../0000:00:02.0");
    /* (a VF that no virtfnN link of its PF leads to: its index cannot be read) */
    d = expect_problem("VF index: no virtfnN link of its PF leads to it");
    CU_ASSERT_STRING_EQUAL(d.physfn, "0000:00:02.0");
    CU_ASSERT_EQUAL(d.sriov_vf_index, -1);
    hostile_close();
}

#define VF     "0000:00:02.0"
#define VF_DIR "devices/pci0000:00/" VF "/"

/* Scans the hostile tree with BAD a PF and VF its VF: the PF's and the VF's facts, and the
 * third device fine. */
static void scan_sriov(int total, int numvfs, const char *pf_problem, int index, const char *physfn,
                       const char *vf_problem)
{
    struct node_pci_scan_result res = scan_hostile();
    CU_ASSERT_EQUAL(res.n_devs, 3);
    CU_ASSERT_EQUAL(res.n_skipped, 0);
    const struct node_pci_dev *pf = find_dev(res.devs, res.n_devs, BAD);
    const struct node_pci_dev *vf = find_dev(res.devs, res.n_devs, VF);
    const struct node_pci_dev *other = find_dev(res.devs, res.n_devs, "0000:00:00.0");
    CU_ASSERT_PTR_NOT_NULL(other);
    CU_ASSERT_STRING_EQUAL(other ? other->problem : "-", "");
    CU_ASSERT_PTR_NOT_NULL(pf);
    CU_ASSERT_PTR_NOT_NULL(vf);
    if (!pf || !vf) {
        node_pci_scan_result_done(&res);
        return;
    }
    CU_ASSERT_EQUAL(pf->sriov_totalvfs, total);
    CU_ASSERT_EQUAL(pf->sriov_numvfs, numvfs);
    CU_ASSERT_EQUAL(vf->sriov_vf_index, index);
    CU_ASSERT_STRING_EQUAL(vf->physfn, physfn);
    if ((pf_problem[0] ? !strstr(pf->problem, pf_problem) : pf->problem[0] != '\0') ||
        (vf_problem[0] ? !strstr(vf->problem, vf_problem) : vf->problem[0] != '\0')) {
        CU_FAIL("problems");
        fprintf(stderr, "\nPF: \"%s\" (want \"%s\"); VF: \"%s\" (want \"%s\")\n", pf->problem,
                pf_problem, vf->problem, vf_problem);
    }
    node_pci_scan_result_done(&res);
}

/* The SR-IOV corruptions: each gives the facts that can be read and a problem for the rest,
 * on the device whose sysfs is wrong; none hides a device. */
static void test_sriov_hostile(void)
{
    if (!hostile_open())
        return;
    static const char *const no_index = "VF index: no virtfnN link of its PF leads to it";
    put(BAD_DIR "sriov_totalvfs", "4\n");
    put(BAD_DIR "sriov_numvfs", "1\n");
    link_to(VF_DIR "physfn", "../" BAD);
    link_to(BAD_DIR "virtfn0", "../" VF);
    scan_sriov(4, 1, "", 0, BAD, "");
    /* virtfn links: missing, dangling, leading elsewhere, a loop */
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&hostile, BAD_DIR "virtfn0"), 0);
    scan_sriov(4, 1, "", -1, BAD, no_index);
    link_to(BAD_DIR "virtfn0", "../0000:00:07.0"); /* (dangling: as absent) */
    scan_sriov(4, 1, "", -1, BAD, no_index);
    link_to(BAD_DIR "virtfn0", "../0000:00:00.0");
    scan_sriov(4, 1, "", -1, BAD, no_index);
    link_to(BAD_DIR "virtfn0", "virtfn0");
    scan_sriov(4, 1, "virtfn: ", -1, BAD, no_index);
    link_to(BAD_DIR "virtfn0", "../" VF);
    /* the counts: garbage, negative, huge, more VFs than the total; the index still read */
    put(BAD_DIR "sriov_numvfs", "abc\n");
    scan_sriov(4, -1, "sriov_numvfs: malformed", 0, BAD, "");
    put(BAD_DIR "sriov_numvfs", "-3\n");
    scan_sriov(4, -1, "sriov_numvfs: out of range", 0, BAD, "");
    put(BAD_DIR "sriov_numvfs", "99999999999\n");
    scan_sriov(4, -1, "sriov_numvfs: out of range", 0, BAD, "");
    put(BAD_DIR "sriov_numvfs", "9\n");
    scan_sriov(4, -1, "sriov_numvfs: more than sriov_totalvfs", 0, BAD, "");
    put(BAD_DIR "sriov_numvfs", "1\n");
    put(BAD_DIR "sriov_totalvfs", "many\n");
    scan_sriov(-1, 1, "sriov_totalvfs: malformed", 0, BAD, "");
    put(BAD_DIR "sriov_totalvfs", "70000\n");
    scan_sriov(-1, 1, "sriov_totalvfs: out of range", 0, BAD, "");
    put(BAD_DIR "sriov_totalvfs", "4\n");
    /* physfn: missing (not a VF then), dangling */
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&hostile, VF_DIR "physfn"), 0);
    scan_sriov(4, 1, "", -1, "", "");
    link_to(VF_DIR "physfn", "../0000:00:09.0"); /* (dangling: as absent) */
    scan_sriov(4, 1, "", -1, "", "");
    /* the PF's interface: there, then gone (as between the PF's facts and its net/ listing),
     * then net/ not a directory */
    link_to(VF_DIR "physfn", "../" BAD);
    char net[sizeof(hostile.root) + 64];
    (void)snprintf(net, sizeof(net), "%s/" BAD_DIR "net", hostile.root);
    CU_ASSERT_EQUAL(mkdir(net, 0755), 0);
    put(BAD_DIR "net/hdbad0", "");

    struct node_pci_scan_result res = scan_hostile();
    const struct node_pci_dev *pf = find_dev(res.devs, res.n_devs, BAD);
    CU_ASSERT_STRING_EQUAL(pf ? pf->netdev : "-", "hdbad0");
    node_pci_scan_result_done(&res);
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&hostile, BAD_DIR "net"), 0);
    scan_sriov(4, 1, "", 0, BAD, "");
    put(BAD_DIR "net", "x\n");
    scan_sriov(4, 1, "net: ", 0, BAD, "");
    hostile_close();
}

static void test_scan_errors(void)
{
    if (!hostile_open())
        return;
    struct node_pci_scan_result res = {.n_devs = 77};
    struct err err = {""};
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&hostile, "bus/pci/devices"), 0);
    CU_ASSERT_EQUAL(node_pci_scan(hostile_pci, &res, &err), -ENOENT);
    CU_ASSERT_EQUAL(res.n_devs, 77);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "cannot list bus/pci/devices"));
    CU_ASSERT_EQUAL(node_pci_scan(hostile_pci, &res, NULL), -ENOENT);
    hostile_close();
    /* Scans after a jump out of libpci work as before. */
    CU_ASSERT_EQUAL(node_pci_scan(small_pci, &res, NULL), 0);
    CU_ASSERT_EQUAL(res.n_devs, small_count);
    node_pci_scan_result_done(&res);
}

static void test_unknown_ids_and_class_fallback(void)
{
    struct sysfs_tree t = {0};
    struct node_pci *p = NULL;
    int r = make_text(&t,
                      "0000:00:01.0 0b80 0bad:1234\n"  /* unknown vendor, subclass */
                      "0000:00:02.0 ff00 8086:0bad\n"  /* known vendor, unknown device */
                      "0000:00:03.0 0600 8086:2020\n", /* all known */
                      &p);
    CU_ASSERT_EQUAL(r, 0);
    if (r < 0)
        return;
    struct node_pci_scan_result res = {0};
    CU_ASSERT_EQUAL(node_pci_scan(p, &res, NULL), 0);
    const struct node_pci_dev *devs = res.devs;
    CU_ASSERT_EQUAL(res.n_devs, 3);
    if (devs && res.n_devs == 3) {
        CU_ASSERT_STRING_EQUAL(devs[0].vendor_name, "");
        CU_ASSERT_STRING_EQUAL(devs[0].device_name, "");
        CU_ASSERT_STRING_EQUAL(devs[0].class_name, "Processor");
        CU_ASSERT_STRING_EQUAL(devs[1].vendor_name, "Intel Corporation");
        CU_ASSERT_STRING_EQUAL(devs[1].device_name, "");
        CU_ASSERT_STRING_EQUAL(devs[1].class_name, "Unassigned class");
        CU_ASSERT_STRING_EQUAL(devs[2].class_name, "Host bridge");
        /* Defaults of a bare line: unbound, no group, NUMA unknown, no subsystem. */
        CU_ASSERT_STRING_EQUAL(devs[0].driver, "");
        CU_ASSERT_EQUAL(devs[0].iommu_group, -1);
        CU_ASSERT_EQUAL(devs[0].numa_node, -1);
        CU_ASSERT_EQUAL(devs[0].subsystem_vendor_id, 0);
    }
    node_pci_scan_result_done(&res);
    node_pci_free(p);
    sysfs_tree_remove(&t);
}

/* Names come from the given file alone (no udev hwdb), cut at a UTF-8 character boundary. */
static void test_own_ids_file(void)
{
    struct sysfs_tree t = {0};
    CU_ASSERT_EQUAL(sysfs_tree_make_text(&t, "0000:00:00.0 0200 8086:1234\n"), 0);
    if (!t.dir[0])
        return;
    char long_name[300], ids[800];
    memset(long_name, 'x', 126);
    memcpy(long_name + 126, "\xc3\xa9tail", 7); /* "é" across the 127-byte limit */
    snprintf(ids, sizeof(ids), "8086  %s\n\t1234  Test Device\nC 02  Net\n\t00  Eth\n", long_name);
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, "../pci.ids", ids, strlen(ids)), 0);
    char path[400];
    snprintf(path, sizeof(path), "%s/pci.ids", t.dir);
    struct node_pci *p = NULL;
    CU_ASSERT_EQUAL(node_pci_new(t.root, path, &p), 0);
    struct node_pci_scan_result res = {0};
    CU_ASSERT_EQUAL(p ? node_pci_scan(p, &res, NULL) : -1, 0);
    const struct node_pci_dev *devs = res.devs;
    if (devs && res.n_devs == 1) {
        CU_ASSERT_EQUAL(strlen(devs[0].vendor_name), 126);
        CU_ASSERT_EQUAL(strspn(devs[0].vendor_name, "x"), 126);
        CU_ASSERT_STRING_EQUAL(devs[0].device_name, "Test Device");
        CU_ASSERT_STRING_EQUAL(devs[0].class_name, "Eth");
    }
    node_pci_scan_result_done(&res);
    node_pci_free(p);
    sysfs_tree_remove(&t);
}

/* One scan of `p`; the device at `address` in `res`, or NULL. */
static const struct node_pci_dev *scan_find(struct node_pci *p, struct node_pci_scan_result *res,
                                            const char *address)
{
    node_pci_scan_result_done(res);
    if (node_pci_scan(p, res, NULL) < 0)
        return NULL;
    for (size_t i = 0; i < res->n_devs; i++)
        if (strcmp(res->devs[i].address, address) == 0)
            return &res->devs[i];
    return NULL;
}

/* node_pci_scan_find finds each function of a slot with eight, and only that function: the
 * address's function is part of the key (a lookup that ignored it would find .0 for all). */
static void test_scan_find_functions(void)
{
    struct sysfs_tree t = {0};
    CU_ASSERT_EQUAL(sysfs_tree_make_text(&t, "0000:00:00.0 0600 8086:2020\n"
                                             "0000:00:03.0 0200 8086:1521\n"
                                             "0000:00:03.1 0200 8086:1521\n"
                                             "0000:00:03.2 0200 8086:1521\n"
                                             "0000:00:03.3 0200 8086:1521\n"
                                             "0000:00:03.4 0200 8086:1521\n"
                                             "0000:00:03.5 0200 8086:1521\n"
                                             "0000:00:03.6 0200 8086:1521\n"
                                             "0000:00:03.7 0200 8086:1521\n"
                                             "0000:00:04.0 0200 8086:10d3\n"
                                             "0000:01:03.2 0200 8086:10d3\n"),
                    0);
    if (!t.dir[0])
        return;
    struct node_pci *p = NULL;
    struct node_pci_scan_result res = {0};
    CU_ASSERT_EQUAL_FATAL(node_pci_new(t.root, PCI_IDS, &p), 0);
    CU_ASSERT_EQUAL(node_pci_scan(p, &res, NULL), 0);
    for (int f = 0; f < 8; f++) {
        char a[32];
        snprintf(a, sizeof(a), "0000:00:03.%d", f);
        const struct node_pci_dev *d = node_pci_scan_find(&res, a);
        CU_ASSERT_STRING_EQUAL(d ? d->address : "(none)", a);
    }
    const struct node_pci_dev *d = node_pci_scan_find(&res, "0000:01:03.2");
    CU_ASSERT_STRING_EQUAL(d ? d->address : "(none)", "0000:01:03.2"); /* the bus counts too */
    CU_ASSERT_PTR_NULL(node_pci_scan_find(&res, "0000:00:04.1"));      /* .0 is no .1 */
    CU_ASSERT_PTR_NULL(node_pci_scan_find(&res, "0000:00:05.0"));
    CU_ASSERT_PTR_NULL(node_pci_scan_find(&res, "0001:00:03.0")); /* another domain */
    CU_ASSERT_PTR_NULL(node_pci_scan_find(&res, "garbage"));
    node_pci_scan_result_done(&res);
    node_pci_free(p);
    sysfs_tree_remove(&t);
}

/* pci.ids is read only for ids not named before: a rescan of known devices does not read it, a
 * new device's ids are looked up in it again, and a new device whose ids it can no longer name
 * gets empty names and a problem (the known ones keep theirs). */
static void test_names_cached(void)
{
    struct sysfs_tree t = {0};
    CU_ASSERT_EQUAL(sysfs_tree_make_text(&t, "0000:00:00.0 0200 8086:1234\n"
                                             "0000:00:01.0 0200 8086:5678\n"
                                             "0000:00:02.0 0200 8086:9abc\n"),
                    0);
    if (!t.dir[0])
        return;
    static const char ids[] = "8086  Vendor\n\t1234  Test Device\n\t5678  Other Device\n"
                              "C 02  Net\n\t00  Eth\n";
    static const char renamed[] = "8086  Vendor\n\t1234  Renamed\n\t5678  Other Renamed\n"
                                  "C 02  Net\n\t00  Eth\n";
    char path[400];
    snprintf(path, sizeof(path), "%s/pci.ids", t.dir);
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, "../pci.ids", ids, strlen(ids)), 0);
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&t, "bus/pci/devices/0000:00:01.0"), 0);
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&t, "bus/pci/devices/0000:00:02.0"), 0);
    struct node_pci *p = NULL;
    struct node_pci_scan_result res = {0};
    CU_ASSERT_EQUAL(node_pci_new(t.root, path, &p), 0);
    const struct node_pci_dev *d = p ? scan_find(p, &res, "0000:00:00.0") : NULL;
    CU_ASSERT_STRING_EQUAL(d ? d->device_name : "", "Test Device");
    /* pci.ids changes: the known device keeps the name read before (the file is not read). */
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, "../pci.ids", renamed, strlen(renamed)), 0);
    d = p ? scan_find(p, &res, "0000:00:00.0") : NULL;
    CU_ASSERT_STRING_EQUAL(d ? d->device_name : "", "Test Device");
    /* A new device: its ids are looked up in the file as it is now. */
    CU_ASSERT_EQUAL(sysfs_tree_link(&t, "bus/pci/devices/0000:00:01.0",
                                    "../../../devices/pci0000:00/0000:00:01.0"),
                    0);
    d = p ? scan_find(p, &res, "0000:00:01.0") : NULL;
    CU_ASSERT_STRING_EQUAL(d ? d->device_name : "", "Other Renamed");
    CU_ASSERT_STRING_EQUAL(d ? d->problem : "x", "");
    /* pci.ids gone: known devices keep their names; a new one has none, and a problem. */
    CU_ASSERT_EQUAL(sysfs_tree_unlink(&t, "../pci.ids"), 0);
    CU_ASSERT_EQUAL(sysfs_tree_link(&t, "bus/pci/devices/0000:00:02.0",
                                    "../../../devices/pci0000:00/0000:00:02.0"),
                    0);
    d = p ? scan_find(p, &res, "0000:00:02.0") : NULL;
    CU_ASSERT_STRING_EQUAL(d ? d->device_name : "x", "");
    CU_ASSERT_STRING_EQUAL(d ? d->vendor_name : "x", "");
    CU_ASSERT_PTR_NOT_NULL(d ? strstr(d->problem, "pci.ids") : NULL);
    d = p ? scan_find(p, &res, "0000:00:01.0") : NULL;
    CU_ASSERT_STRING_EQUAL(d ? d->device_name : "", "Other Renamed");
    CU_ASSERT_STRING_EQUAL(d ? d->vendor_name : "", "Vendor");
    CU_ASSERT_STRING_EQUAL(d ? d->class_name : "", "Eth");
    node_pci_scan_result_done(&res);
    node_pci_free(p);
    sysfs_tree_remove(&t);
}

static void test_new_errors(void)
{
    struct node_pci *p = PCI_SENTINEL;
    CU_ASSERT_EQUAL(node_pci_new("/nonexistent/hostdevd", PCI_IDS, &p), -ENOENT);
    CU_ASSERT_EQUAL(node_pci_new(small_tree.root, "/nonexistent/pci.ids", &p), -ENOENT);
    char path[400];
    snprintf(path, sizeof(path), "%s/not-pci.ids", small_tree.dir);
    FILE *f = fopen(path, "we");
    CU_ASSERT_PTR_NOT_NULL(f);
    if (f) {
        fputs("this is not a pci.ids file\n", f);
        fclose(f);
    }
    CU_ASSERT_EQUAL(node_pci_new(small_tree.root, path, &p), -EINVAL);
    CU_ASSERT_PTR_EQUAL(p, PCI_SENTINEL);
    CU_ASSERT_PTR_NULL(node_pci_free(NULL));
    node_pci_scan_result_done(NULL);
    /* The default root and names (on this machine, whatever its /sys holds). */
    CU_ASSERT_EQUAL(node_pci_new(NULL, NULL, &p), 0);
    if (p != PCI_SENTINEL)
        node_pci_free(p);
}

static void test_empty_tree(void)
{
    struct sysfs_tree t = {0};
    struct node_pci *p = NULL;
    int r = make_text(&t, "# nothing\n", &p);
    CU_ASSERT_EQUAL(r, 0);
    if (r < 0)
        return;
    struct node_pci_scan_result res = {.devs = SENTINEL, .n_devs = 77};
    CU_ASSERT_EQUAL(node_pci_scan(p, &res, NULL), 0);
    CU_ASSERT_EQUAL(res.n_devs, 0);
    CU_ASSERT_PTR_NULL(res.devs);
    CU_ASSERT_EQUAL(res.n_skipped, 0);
    CU_ASSERT_PTR_NULL(res.skipped);
    node_pci_free(p);
    sysfs_tree_remove(&t);
}

static void test_large_tree(void)
{
    static struct expect want[MAX_EXPECT];
    size_t lines = read_description(LARGE, want, MAX_EXPECT);
    size_t want_vfs = 0, want_bridges = 0;
    for (size_t i = 0; i < lines; i++) {
        want_vfs += want[i].physfn[0] != '\0';
        want_bridges += want[i].class_id == 0x0604;
    }
    CU_ASSERT_EQUAL(lines, 1024);
    struct sysfs_tree t = {0};
    struct node_pci *p = NULL;
    CU_ASSERT_EQUAL(sysfs_tree_make(&t, LARGE), 0);
    CU_ASSERT_EQUAL(t.dir[0] ? node_pci_new(t.root, PCI_IDS, &p) : -1, 0);
    struct node_pci_scan_result res = {0};
    size_t vfs = 0, bridges = 0;
    CU_ASSERT_EQUAL(p ? node_pci_scan(p, &res, NULL) : -1, 0);
    const struct node_pci_dev *devs = res.devs;
    size_t n = res.n_devs;
    CU_ASSERT_EQUAL(n, 1024);
    CU_ASSERT_EQUAL(res.n_skipped, 0);
    for (size_t i = 0; devs && i < n; i++) {
        vfs += devs[i].physfn[0] != '\0';
        bridges += devs[i].is_bridge;
        if (i > 0)
            CU_ASSERT_TRUE(address_cmp(devs[i - 1].address, devs[i].address) < 0);
    }
    CU_ASSERT_EQUAL(vfs, want_vfs);
    CU_ASSERT_EQUAL(bridges, want_bridges);
    node_pci_scan_result_done(&res);
    node_pci_free(p);
    sysfs_tree_remove(&t);
}

/* A card of two functions with a DSN in slot 7, an NVMe drive that reports its serial in slot
 * 12, a NIC with a permanent MAC address, one whose address was set (not the card's), and a GPU
 * that reports nothing. */
#define IDENT_DESC                                                                                 \
    "0000:00:00.0 0600 8086:29c0\n"                                                                \
    "0000:00:1c.0 0604 8086:a190 driver=pcieport slot=3\n"                                         \
    "0000:3b:00.0 0200 8086:1521 driver=igb dsn=0011223344556677 slot=7 netdev=hdid0 "             \
    "mac=52:54:00:00:00:01\n"                                                                      \
    "0000:3b:00.1 0200 8086:1521 driver=igb dsn=0011223344556677 slot=7\n"                         \
    "0000:5e:00.0 010802 144d:a808 driver=nvme nvme_serial=S4EWNX0R123456______ slot=12\n"         \
    "0000:60:00.0 0200 8086:10d3 driver=e1000e netdev=hdid2 mac=52:54:00:AB:CD:03\n"               \
    "0000:61:00.0 0200 8086:10d3 driver=e1000e netdev=hdid3 mac=52:54:00:00:00:04 mac_assign=3\n"  \
    "0000:62:00.0 0300 10de:2204 driver=vfio-pci\n"                                                \
    "0000:63:00.0 0200 1af4:1041 driver=virtio-pci\n"

static void expect_ident(const struct node_pci_scan_result *res, const char *address,
                         const char *serial, enum node_pciident_source source, const char *slot)
{
    const struct node_pci_dev *d = find_dev(res->devs, res->n_devs, address);
    CU_ASSERT_PTR_NOT_NULL(d);
    if (!d)
        return;
    CU_ASSERT_STRING_EQUAL(d->serial, serial);
    CU_ASSERT_EQUAL(d->serial_source, source);
    CU_ASSERT_STRING_EQUAL(d->slot, slot);
    CU_ASSERT_STRING_EQUAL(d->problem, "");
}

static void test_identity(void)
{
    struct sysfs_tree t = {0};
    struct node_pci *p = NULL;
    struct node_pci_scan_result res = {0};
    CU_ASSERT_EQUAL_FATAL(sysfs_tree_make_text(&t, IDENT_DESC), 0);
    CU_ASSERT_EQUAL_FATAL(node_pci_new(t.root, PCI_IDS, &p), 0);
    CU_ASSERT_EQUAL_FATAL(node_pci_scan(p, &res, NULL), 0);
    /* the DSN wins over the MAC address; both functions of the card carry it */
    expect_ident(&res, "0000:3b:00.0", "00-11-22-33-44-55-66-77", NODE_PCIIDENT_DSN, "7");
    expect_ident(&res, "0000:3b:00.1", "00-11-22-33-44-55-66-77", NODE_PCIIDENT_DSN, "7");
    expect_ident(&res, "0000:5e:00.0", "S4EWNX0R123456", NODE_PCIIDENT_NVME, "12");
    expect_ident(&res, "0000:60:00.0", "52:54:00:ab:cd:03", NODE_PCIIDENT_MAC, "");
    expect_ident(&res, "0000:61:00.0", "", NODE_PCIIDENT_NONE, "");
    expect_ident(&res, "0000:62:00.0", "", NODE_PCIIDENT_NONE, "");
    expect_ident(&res, "0000:63:00.0", "", NODE_PCIIDENT_NONE, ""); /* no interface yet */
    /* a bridge's identity is not read (bridges are not published) */
    expect_ident(&res, "0000:00:1c.0", "", NODE_PCIIDENT_NONE, "");
    node_pci_scan_result_done(&res);
    /* config space cut to the 64 bytes others than root read: no DSN, the MAC then */
    char config[64] = {0};
    CU_ASSERT_EQUAL(
            sysfs_tree_put(&t, "devices/pci0000:3b/0000:3b:00.0/config", config, sizeof(config)),
            0);
    /* a virtio NIC's interface hangs off its virtio device */
    char dir[512];
    const char *vdir = "devices/pci0000:63/0000:63:00.0/virtio0";
    (void)snprintf(dir, sizeof(dir), "%s/%s", t.root, vdir);
    CU_ASSERT_EQUAL(mkdir(dir, 0755), 0);
    (void)snprintf(dir, sizeof(dir), "%s/%s/net", t.root, vdir);
    CU_ASSERT_EQUAL(mkdir(dir, 0755), 0);
    (void)snprintf(dir, sizeof(dir), "%s/%s/net/eth9", t.root, vdir);
    CU_ASSERT_EQUAL(mkdir(dir, 0755), 0);
    (void)snprintf(dir, sizeof(dir), "%s/net/eth9/address", vdir);
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, dir, "52:54:00:00:02:00\n", 18), 0);
    (void)snprintf(dir, sizeof(dir), "%s/net/eth9/addr_assign_type", vdir);
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, dir, "0\n", 2), 0);
    CU_ASSERT_EQUAL_FATAL(node_pci_scan(p, &res, NULL), 0);
    expect_ident(&res, "0000:3b:00.0", "52:54:00:00:00:01", NODE_PCIIDENT_MAC, "7");
    expect_ident(&res, "0000:63:00.0", "52:54:00:00:02:00", NODE_PCIIDENT_MAC, "");
    expect_ident(&res, "0000:3b:00.1", "00-11-22-33-44-55-66-77", NODE_PCIIDENT_DSN, "7");
    node_pci_scan_result_done(&res);
    node_pci_free(p);
    sysfs_tree_remove(&t);
}

static void test_identity_pure(void)
{
    char buf[24];
    node_pciident_format_dsn(0x44556677u, 0x00112233u, buf);
    CU_ASSERT_STRING_EQUAL(buf, "00-11-22-33-44-55-66-77");
    /* qemu's e1000e makes its DSN of its MAC address 52:54:00:12:34:56 */
    node_pciident_format_dsn(0xff123456u, 0x525400ffu, buf);
    CU_ASSERT_STRING_EQUAL(buf, "52-54-00-ff-ff-12-34-56");
    CU_ASSERT_TRUE(node_pciident_slot_matches("0000:3b:00", "0000:3b:00.1"));
    CU_ASSERT_TRUE(node_pciident_slot_matches("10000:01:00", "10000:01:00.0"));
    CU_ASSERT_FALSE(node_pciident_slot_matches("0000:3b:00", "0000:3b:01.0"));
    CU_ASSERT_FALSE(node_pciident_slot_matches("0000:3b", "0000:3b:00.0")); /* no device number */
    CU_ASSERT_FALSE(node_pciident_slot_matches("0000:3b:0", "0000:3b:00.0"));
    CU_ASSERT_FALSE(node_pciident_slot_matches("0000:3b:00.0", "0000:3b:00.0"));
    CU_ASSERT_FALSE(node_pciident_slot_matches("", "0000:3b:00.0"));
    CU_ASSERT_STRING_EQUAL(node_pciident_source_name(NODE_PCIIDENT_DSN), "DSN");
    CU_ASSERT_STRING_EQUAL(node_pciident_source_name(NODE_PCIIDENT_MAC), "PermanentMAC");
    CU_ASSERT_STRING_EQUAL(node_pciident_source_name(NODE_PCIIDENT_NVME), "NVMeSerial");
    CU_ASSERT_STRING_EQUAL(node_pciident_source_name(NODE_PCIIDENT_NONE), "");
}

static CU_TestInfo tests[] = {
        {"scan matches the description", test_scan_matches_description},
        {"names from pci.ids", test_names_from_pci_ids},
        {"names spot checks", test_names_spot_checks},
        {"names cached, pci.ids read for new ids only", test_names_cached},
        {"node_pci_scan_find: each of a slot's eight functions, by its function",
         test_scan_find_functions},
        {"bridges flagged", test_bridges},
        {"SR-IOV PF and VFs", test_sriov},
        {"unbound device and no IOMMU group", test_unbound_and_no_iommu},
        {"second scan identical", test_second_scan_identical},
        {"hostile: device entry not a directory", test_device_not_a_directory},
        {"device identity malformed", test_device_ident_malformed},
        {"hostile: device entry a dangling link", test_device_dangling_link},
        {"PCI root from the device's real path", test_pcie_root},
        {"hostile: device entry a link loop", test_device_link_loop},
        {"hostile: device entry a link out of the root", test_device_link_out_of_root},
        {"hostile: attribute a link out of the device", test_attribute_link_out_of_device},
        {"hostile: entries that are not addresses", test_entry_not_an_address},
        {"hostile: identity unreadable (libpci error)", test_identity_unreadable},
        {"hostile: bad optional attributes", test_bad_optional_attribute},
        {"hostile: libpci warning", test_libpci_warning},
        {"hostile: iommu_group link loop", test_iommu_group_loop},
        {"hostile: driver link outside bus/pci/drivers", test_driver_link_outside_drivers},
        {"hostile: physfn link outside bus/pci/devices", test_physfn_outside_devices},
        {"hostile: SR-IOV links and counts", test_sriov_hostile},
        {"scan errors", test_scan_errors},
        {"unknown ids and class fallback", test_unknown_ids_and_class_fallback},
        {"own pci.ids file", test_own_ids_file},
        {"new errors", test_new_errors},
        {"empty tree", test_empty_tree},
        {"1024-function tree", test_large_tree},
        {"identity: DSN, MAC, NVMe serial, slot", test_identity},
        {"identity: DSN format, slot match", test_identity_pure},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo pci_suites[] = {
        {"pci", suite_init, suite_clean, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
