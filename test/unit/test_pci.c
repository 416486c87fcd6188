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
    struct node_pci_err err;
    return node_pci_scan(small_pci, &small_devs, &small_count, &err) < 0 ? -1 : 0;
}

static int suite_clean(void)
{
    node_pci_devs_free(small_devs);
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
           a->sriov_numvfs == b->sriov_numvfs && a->is_bridge == b->is_bridge;
}

static void test_second_scan_identical(void)
{
    struct node_pci_dev *devs = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(node_pci_scan(small_pci, &devs, &n, NULL), 0);
    CU_ASSERT_EQUAL(n, small_count);
    for (size_t i = 0; devs && i < n && i < small_count; i++)
        CU_ASSERT_TRUE(dev_equal(&devs[i], &small_devs[i]));
    node_pci_devs_free(devs);
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

static void test_missing_vendor(void)
{
    struct sysfs_tree t = {0};
    struct node_pci *p = NULL;
    int r = make_text(&t,
                      "0000:00:00.0 0600 8086:2020\n"
                      "0000:3b:00.0 0200 15b3:1017 driver=mlx5_core iommu=40\n"
                      "0000:3b:00.2 0200 15b3:1018 physfn=0000:3b:00.0 omit=vendor\n"
                      "0000:3b:00.3 0200 15b3:1018 physfn=0000:3b:00.0\n",
                      &p);
    CU_ASSERT_EQUAL(r, 0);
    if (r < 0)
        return;
    struct node_pci_dev *devs = SENTINEL;
    size_t n = 77;
    struct node_pci_err err = {"stale"};
    CU_ASSERT_EQUAL(node_pci_scan(p, &devs, &n, &err), -EIO);
    CU_ASSERT_PTR_EQUAL(devs, SENTINEL);
    CU_ASSERT_EQUAL(n, 77);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.message, "0000:3b:00.2/vendor"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.message, "No such file or directory"));
    /* Still failing, and still not leaking, on a second try; no error buffer is fine too. */
    CU_ASSERT_EQUAL(node_pci_scan(p, &devs, &n, NULL), -EIO);
    node_pci_free(p);
    sysfs_tree_remove(&t);
    /* Scans after a jump out of libpci work as before. */
    CU_ASSERT_EQUAL(node_pci_scan(small_pci, &devs, &n, NULL), 0);
    CU_ASSERT_EQUAL(n, small_count);
    if (devs != SENTINEL)
        node_pci_devs_free(devs);
}

static void test_bad_optional_attribute(void)
{
    struct sysfs_tree t = {0};
    struct node_pci *p = NULL;
    int r = make_text(&t, "0000:00:00.0 0600 8086:2020 numa=0\n", &p);
    CU_ASSERT_EQUAL(r, 0);
    if (r < 0)
        return;
    struct node_pci_dev *devs = NULL;
    size_t n = 0;
    struct node_pci_err err;
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, "devices/pci0000:00/0000:00:00.0/numa_node", "zero\n", 5),
                    0);
    CU_ASSERT_EQUAL(node_pci_scan(p, &devs, &n, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.message, "0000:00:00.0/numa_node"));
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, "devices/pci0000:00/0000:00:00.0/numa_node", "-2\n", 3), 0);
    CU_ASSERT_EQUAL(node_pci_scan(p, &devs, &n, &err), -ERANGE);
    CU_ASSERT_EQUAL(sysfs_tree_put(&t, "devices/pci0000:00/0000:00:00.0/numa_node", "1\n", 2), 0);
    CU_ASSERT_EQUAL(node_pci_scan(p, &devs, &n, &err), 0);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_EQUAL(devs ? devs[0].numa_node : -2, 1);
    node_pci_devs_free(devs);
    node_pci_free(p);
    sysfs_tree_remove(&t);
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
    struct node_pci_dev *devs = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(node_pci_scan(p, &devs, &n, NULL), 0);
    CU_ASSERT_EQUAL(n, 3);
    if (devs && n == 3) {
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
    node_pci_devs_free(devs);
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
    struct node_pci_dev *devs = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(p ? node_pci_scan(p, &devs, &n, NULL) : -1, 0);
    if (devs && n == 1) {
        CU_ASSERT_EQUAL(strlen(devs[0].vendor_name), 126);
        CU_ASSERT_EQUAL(strspn(devs[0].vendor_name, "x"), 126);
        CU_ASSERT_STRING_EQUAL(devs[0].device_name, "Test Device");
        CU_ASSERT_STRING_EQUAL(devs[0].class_name, "Eth");
    }
    node_pci_devs_free(devs);
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
    node_pci_devs_free(NULL);
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
    struct node_pci_dev *devs = SENTINEL;
    size_t n = 77;
    CU_ASSERT_EQUAL(node_pci_scan(p, &devs, &n, NULL), 0);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_PTR_NULL(devs);
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
    struct node_pci_dev *devs = NULL;
    size_t n = 0, vfs = 0, bridges = 0;
    CU_ASSERT_EQUAL(p ? node_pci_scan(p, &devs, &n, NULL) : -1, 0);
    CU_ASSERT_EQUAL(n, 1024);
    for (size_t i = 0; devs && i < n; i++) {
        vfs += devs[i].physfn[0] != '\0';
        bridges += devs[i].is_bridge;
        if (i > 0)
            CU_ASSERT_TRUE(address_cmp(devs[i - 1].address, devs[i].address) < 0);
    }
    CU_ASSERT_EQUAL(vfs, want_vfs);
    CU_ASSERT_EQUAL(bridges, want_bridges);
    node_pci_devs_free(devs);
    node_pci_free(p);
    sysfs_tree_remove(&t);
}

static CU_TestInfo tests[] = {
        {"scan matches the description", test_scan_matches_description},
        {"names from pci.ids", test_names_from_pci_ids},
        {"names spot checks", test_names_spot_checks},
        {"bridges flagged", test_bridges},
        {"SR-IOV PF and VFs", test_sriov},
        {"unbound device and no IOMMU group", test_unbound_and_no_iommu},
        {"second scan identical", test_second_scan_identical},
        {"missing vendor gives -EIO", test_missing_vendor},
        {"bad optional attribute fails the scan", test_bad_optional_attribute},
        {"unknown ids and class fallback", test_unknown_ids_and_class_fallback},
        {"own pci.ids file", test_own_ids_file},
        {"new errors", test_new_errors},
        {"empty tree", test_empty_tree},
        {"1024-function tree", test_large_tree},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo pci_suites[] = {
        {"pci", suite_init, suite_clean, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
