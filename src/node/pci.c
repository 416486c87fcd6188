/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/pci.c - PCI discovery with libpci (the only includer of <pci/pci.h>). See pci.h.
 * Blocking (sysfs reads); no logging.
 *
 * Decisions:
 * - libpci's error callback cannot return. Calls into libpci run under a `struct guard`: the
 *   callback formats the message into the innermost guard of this thread and siglongjmp()s to
 *   it. Guards live in the heap-allocated `struct scan`, so nothing the jump skips over lives
 *   in a local variable. Each device's pci_fill_info() runs under a guard of its own, whose
 *   jump skips that device; libpci's warnings during it (an optional attribute it cannot read)
 *   become the device's problem. Other warnings and debug messages are dropped.
 * - bus/pci/devices is listed here, not by pci_scan_bus(): libpci's scan gives up (and leaks)
 *   on the first entry whose name is not an address. An entry is taken only when its name is an
 *   address exactly as the kernel prints it (so libpci, which formats the path from the
 *   numbers, reads the same directory) and it leads to a directory inside the root.
 * - Names: the udev hwdb is never asked (PCI_LOOKUP_NO_HWDB), so names come from the pci.ids
 *   file alone. libpci holds the whole file in memory once loaded (2 MB of heap), so it is
 *   loaded only while a scan meets ids it has not named before, and dropped (and the heap
 *   trimmed) when that scan ends; the names of the ids seen are cached (a node has tens of
 *   distinct ids), so a rescan of an unchanged node does not read pci.ids at all. An unknown
 *   subclass falls back to the class name, which libpci returns as "Name [cccc]"; the number
 *   is cut off. Names are cut at a UTF-8 character boundary when they do not fit.
 * - Absent optional attributes (driver, iommu_group, numa_node, physfn, sriov_*) give the
 *   "none" values; one that exists but cannot be read or parsed gives them too, and the
 *   device's problem names it. A driver, iommu_group or physfn link counts only when it leads to
 *   the directory of that name in bus/pci/drivers, kernel/iommu_groups or bus/pci/devices.
 * - The identity (serial, slot; not read for bridges) is best effort: what cannot be read is
 *   left empty and is no problem of the device (it says nothing of whether passthrough is
 *   safe). The DSN is read after the device's facts, under a guard of its own whose warnings
 *   are dropped: without root, sysfs gives 64 bytes of config space and the capability list
 *   reads as absent. A DSN of all zeros or all ones counts as none. The slots are read once a
 *   scan.
 */
#include "node/pci.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pci/pci.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/map.h"
#include "node/sysfs.h"

#define LOOKUP_FLAGS (PCI_LOOKUP_NO_NUMBERS | PCI_LOOKUP_NO_HWDB)

/* libpci takes parameter names as char *. */
static char sysfs_path_param[] = "sysfs.path";

struct node_pci {
    int root_fd; /* reopened at every scan: /sys may have been remounted */
    char *root_path;
    char *bus_path;           /* <root>/bus/pci, libpci's sysfs.path */
    char *ids_path;           /* pci.ids as given, or NULL for libpci's default */
    struct pci_access *names; /* pci.ids while a scan needs it (see Decisions); no devices */
    struct map *name_cache;   /* "vvvv:dddd:cccc" -> struct names */
};

/* What pci.ids says of one vendor, device and class. */
struct names {
    char vendor[sizeof(((struct node_pci_dev *)0)->vendor_name)];
    char device[sizeof(((struct node_pci_dev *)0)->device_name)];
    char class[sizeof(((struct node_pci_dev *)0)->class_name)];
};

/* Where libpci's error callback jumps to. While `collect` is set, warnings go to `notes`. */
struct guard {
    sigjmp_buf jmp;
    char message[256];
    bool collect;
    char notes[256];
    struct guard *prev;
};

static __thread struct guard *current_guard;

/* Appends `text` to the string in `dst`, after "; " when it is not empty; cut to fit. */
static void append(char *dst, size_t size, const char *text)
{
    size_t len = strnlen(dst, size);
    if (len + 1 >= size)
        return;
    (void)snprintf(dst + len, size - len, "%s%s", len ? "; " : "", text);
}

static void on_error(char *msg, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void on_error(char *msg, ...)
{
    va_list ap;
    va_start(ap, msg);
    struct guard *g = current_guard;
    if (!g)
        abort(); /* libpci failed outside a guard: this must not return, and exiting is worse */
    /* clang-analyzer 14 takes `ap` for uninitialized when it has analyzed another file before. */
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized)
    vsnprintf(g->message, sizeof(g->message), msg, ap);
    va_end(ap);
    siglongjmp(g->jmp, 1);
}

static void on_warning(char *msg, ...) __attribute__((format(printf, 1, 2)));
static void on_warning(char *msg, ...) /* NOLINT(readability-non-const-parameter): libpci's type */
{
    struct guard *g = current_guard;
    if (!g || !g->collect)
        return;
    char text[256];
    va_list ap;
    va_start(ap, msg);
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): clang-analyzer 14 false positive
    vsnprintf(text, sizeof(text), msg, ap);
    va_end(ap);
    append(g->notes, sizeof(g->notes), text);
}

static void on_debug(char *msg, ...) __attribute__((format(printf, 1, 2)));
static void on_debug(char *msg, ...) /* NOLINT(readability-non-const-parameter): libpci's type */
{
    (void)msg;
}

static void guard_push(struct guard *g)
{
    g->prev = current_guard;
    current_guard = g;
}

static void guard_pop(struct guard *g)
{
    current_guard = g->prev;
}

static struct pci_access *access_new(void)
{
    struct pci_access *a = pci_alloc();
    if (a) {
        a->error = on_error;
        a->warning = on_warning;
        a->debug = on_debug;
    }
    return a;
}

/* pci_load_name_list() under the guard `g`; 0 when it failed or libpci raised an error. */
static int load_names_guarded(struct guard *g, struct pci_access *a)
{
    if (sigsetjmp(g->jmp, 0) != 0)
        return 0;
    return pci_load_name_list(a);
}

/* Loads pci.ids into `a`. Returns 0 or -EINVAL. */
static int load_names(struct pci_access *a)
{
    struct guard *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    guard_push(g);
    int ok = load_names_guarded(g, a);
    guard_pop(g);
    free(g);
    return ok ? 0 : -EINVAL;
}

struct node_pci *node_pci_free(struct node_pci *p)
{
    if (!p)
        return NULL;
    if (p->names)
        pci_cleanup(p->names);
    map_free(p->name_cache);
    free(p->ids_path);
    if (p->root_fd >= 0)
        close(p->root_fd);
    free(p->bus_path);
    free(p->root_path);
    free(p);
    return NULL;
}

/* Loads pci.ids into p->names (NULL on failure). Returns 0 or -errno. */
static int names_open(struct node_pci *p)
{
    p->names = access_new();
    if (!p->names)
        return -ENOMEM;
    if (p->ids_path) {
        char *copy = strdup(p->ids_path);
        if (!copy)
            return -ENOMEM;
        pci_set_name_list_path(p->names, copy, 1);
    }
    int r = load_names(p->names);
    if (r == -EINVAL && access(p->names->id_file_name, R_OK) < 0)
        r = -errno; /* libpci has tried "pci.ids.gz", then "pci.ids": this is the last name */
    if (r < 0) {
        pci_cleanup(p->names);
        p->names = NULL;
    }
    return r;
}

/* Drops pci.ids and gives the heap it held back to the system. */
static void names_close(struct node_pci *p)
{
    if (!p->names)
        return;
    pci_cleanup(p->names);
    p->names = NULL;
    malloc_trim(0);
}

/* Opens the root and loads the names into the zeroed `p` (kept for the first scan). */
static int setup(struct node_pci *p, const char *sysfs_root, const char *ids_path)
{
    p->root_fd = node_sysfs_open_root(sysfs_root);
    if (p->root_fd < 0)
        return p->root_fd;
    p->root_path = strdup(sysfs_root);
    p->name_cache = map_new(free);
    if (!p->root_path || !p->name_cache)
        return -ENOMEM;
    if (asprintf(&p->bus_path, "%s/bus/pci", sysfs_root) < 0) {
        p->bus_path = NULL;
        return -ENOMEM;
    }
    if (ids_path && !(p->ids_path = strdup(ids_path)))
        return -ENOMEM;
    return names_open(p);
}

int node_pci_new(const char *sysfs_root, const char *ids_path, struct node_pci **ret)
{
    struct node_pci *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    int r = setup(p, sysfs_root ? sysfs_root : "/sys", ids_path);
    if (r < 0) {
        node_pci_free(p);
        return r;
    }
    *ret = p;
    return 0;
}

void node_pci_scan_result_done(struct node_pci_scan_result *r)
{
    if (!r)
        return;
    free(r->devs);
    free(r->skipped);
    memset(r, 0, sizeof(*r));
}

/* Names from pci.ids, into `n`. */
static void lookup_names(struct pci_access *a, const struct node_pci_dev *d, struct names *n)
{
    char buf[512];
    const char *s;
    s = pci_lookup_name(a, buf, sizeof(buf), PCI_LOOKUP_VENDOR | LOOKUP_FLAGS, d->vendor_id);
    node_sysfs_copy_name(n->vendor, sizeof(n->vendor), s);
    s = pci_lookup_name(a, buf, sizeof(buf), PCI_LOOKUP_DEVICE | LOOKUP_FLAGS, d->vendor_id,
                        d->device_id);
    node_sysfs_copy_name(n->device, sizeof(n->device), s);
    s = pci_lookup_name(a, buf, sizeof(buf), PCI_LOOKUP_CLASS | LOOKUP_FLAGS, d->class_id);
    node_sysfs_copy_name(n->class, sizeof(n->class), s);
    /* A class name found without its subclass comes as "Bridge [0680]". */
    char suffix[16];
    int len = snprintf(suffix, sizeof(suffix), " [%04x]", d->class_id);
    size_t have = strlen(n->class);
    if (have > (size_t)len && strcmp(n->class + have - (size_t)len, suffix) == 0)
        n->class[have - (size_t)len] = '\0';
}

/* The names of `out`'s ids, from the cache or pci.ids (loaded for this scan if need be). When
 * pci.ids cannot be read any more, the names stay empty, the device's problem says so, and
 * nothing is cached. */
static void name_device(struct node_pci *p, struct node_pci_dev *out)
{
    char key[32];
    snprintf(key, sizeof(key), "%04x:%04x:%04x", out->vendor_id, out->device_id, out->class_id);
    struct names *n = map_get(p->name_cache, key);
    if (!n) {
        int r = p->names ? 0 : names_open(p);
        if (r < 0) {
            append(out->problem, sizeof(out->problem), "names: cannot read pci.ids");
            return;
        }
        n = calloc(1, sizeof(*n));
        if (!n)
            return;
        lookup_names(p->names, out, n);
        if (map_put(p->name_cache, key, n) < 0) {
            free(n);
            return;
        }
    }
    memcpy(out->vendor_name, n->vendor, sizeof(out->vendor_name));
    memcpy(out->device_name, n->device, sizeof(out->device_name));
    memcpy(out->class_name, n->class, sizeof(out->class_name));
}

/* ---- the scan -------------------------------------------------------------------------------- */

/* An entry of bus/pci/devices that names a device directory. */
struct entry {
    unsigned domain, bus, dev, func;
    char address[NODE_PCI_ADDRESS_SIZE];
};

struct scan {
    struct guard guard;     /* setup and names: a jump fails the scan */
    struct guard dev_guard; /* one device's pci_fill_info(): a jump skips the device */
    struct node_pci *pci;
    struct pci_access *access;
    struct pci_dev *current; /* the libpci device being read; freed by the end of the scan */
    struct entry *entries;
    size_t n_entries, skipped_alloc;
    struct node_sysfs_dirmap *drivers, *groups; /* bus/pci/drivers, kernel/iommu_groups */
    struct node_pciident_slots *slots;          /* bus/pci/slots */
    int bus_fd; /* bus/pci/devices, for the links named after the devices; -1: go by path */
    int dev_fd; /* the directory of the device being read; its attributes are read below it */
    struct node_pci_scan_result res;
};

/* What went wrong, in words, for an -errno of node/sysfs. */
static const char *trouble(int r)
{
    return node_sysfs_trouble(r, "leads nowhere (a dangling link)");
}

/* Records that entry `name` of bus/pci/devices is left out, because of `why`. */
static int skip(struct scan *s, const char *name, const char *why)
{
    return node_sysfs_skip_add(&s->res.skipped, &s->res.n_skipped, &s->skipped_alloc, name, why);
}

/* Lowercase hex digits at *p, `min` to `max` of them, then `end` (skipped). */
static bool hex_field(const char **p, size_t min, size_t max, char end, unsigned *ret)
{
    unsigned v = 0;
    size_t n = 0;
    const char *s = *p;
    for (; n < max && ((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')); n++)
        v = v * 16 + (unsigned)(s[n] <= '9' ? s[n] - '0' : s[n] - 'a' + 10);
    if (n < min || s[n] != end)
        return false;
    *p = s + n + (end ? 1 : 0);
    *ret = v;
    return true;
}

/* A PCI address exactly as the kernel names its devices: "0000:00:1f.6", "10000:01:00.0" (a
 * domain of more than 4 digits has no leading zero, so that libpci's "%04x" gives it back). */
static bool parse_address(const char *name, struct entry *ret)
{
    unsigned dom, bus, dev, func;
    const char *p = name;
    if (!hex_field(&p, 4, 8, ':', &dom) || !hex_field(&p, 2, 2, ':', &bus) ||
        !hex_field(&p, 2, 2, '.', &dev) || !hex_field(&p, 1, 1, '\0', &func))
        return false;
    size_t dom_len = strcspn(name, ":");
    if (dom > INT_MAX || dev > 0x1f || func > 7 || (dom_len > 4 && name[0] == '0'))
        return false;
    *ret = (struct entry){.domain = dom, .bus = bus, .dev = dev, .func = func};
    memcpy(ret->address, name, strlen(name) + 1);
    return true;
}

/* Takes entry `name` of bus/pci/devices as a device, or skips it. */
static int take_entry(struct scan *s, const char *name)
{
    struct entry e;
    char path[64];
    if (!parse_address(name, &e))
        return skip(s, name, "the name is not a PCI address");
    (void)snprintf(path, sizeof(path), "bus/pci/devices/%s", e.address);
    int r = node_sysfs_check_dir(s->pci->root_fd, path);
    if (r < 0) {
        char why[160];
        (void)snprintf(why, sizeof(why), "%s: %s", path, trouble(r));
        return skip(s, name, why);
    }
    s->entries[s->n_entries++] = e;
    return 0;
}

static int compare_entries(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->domain != y->domain)
        return x->domain < y->domain ? -1 : 1;
    if (x->bus != y->bus)
        return x->bus < y->bus ? -1 : 1;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return (int)x->func - (int)y->func;
}

/* Lists bus/pci/devices into s->entries (sorted) and s->res.skipped. */
static int list_entries(struct scan *s, struct err *ret_err)
{
    char **names = NULL;
    size_t n = 0;
    int r = node_sysfs_list(s->pci->root_fd, "bus/pci/devices", &names, &n);
    if (r < 0)
        return err_set(ret_err, r, "cannot list bus/pci/devices: %s", strerror(-r));
    s->entries = calloc(n ? n : 1, sizeof(*s->entries));
    if (!s->entries)
        r = -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++)
        r = take_entry(s, names[i]);
    node_sysfs_names_free(names);
    if (r < 0)
        return err_set(ret_err, r, "out of memory");
    qsort(s->entries, s->n_entries, sizeof(*s->entries), compare_entries);
    return 0;
}

/* Notes in out->problem that fact `name` could not be read. `dir`: where its link must lead. */
static void add_problem(struct node_pci_dev *out, const char *name, int r, const char *dir)
{
    char text[160];
    if (r == -EXDEV)
        (void)snprintf(text, sizeof(text), "%s: does not lead to a directory in %s", name, dir);
    else
        (void)snprintf(text, sizeof(text), "%s: %s", name, trouble(r));
    append(out->problem, sizeof(out->problem), text);
}

/* A link of the device that must lead to `<dir>/<name>`; its name into `buf`, "" when absent
 * or unusable. */
static void link_fact(struct scan *s, struct node_pci_dev *out, const char *name, const char *dir,
                      char *buf, size_t size)
{
    char path[128];
    (void)snprintf(path, sizeof(path), "bus/pci/devices/%s/%s", out->address, name);
    /* the two links every device has go through the scan's maps: a third of the calls */
    const struct node_sysfs_dirmap *m = strcmp(dir, "bus/pci/drivers") == 0       ? s->drivers
                                        : strcmp(dir, "kernel/iommu_groups") == 0 ? s->groups
                                                                                  : NULL;
    int r = m ? node_sysfs_read_link_via(s->pci->root_fd, path, m, buf, size)
              : node_sysfs_read_link_in(s->pci->root_fd, path, dir, buf, size);
    if (r < 0 && r != -ENOENT)
        add_problem(out, name, r, dir);
}

/* The device's IOMMU group: the number its link is named, -1 when absent or unusable. */
static void group_fact(struct scan *s, struct node_pci_dev *out)
{
    char name[32];
    long long v = -1;
    out->iommu_group = -1;
    link_fact(s, out, "iommu_group", "kernel/iommu_groups", name, sizeof(name));
    if (!name[0])
        return;
    int r = node_sysfs_parse_int(name, 10, &v);
    if (r == 0 && (v < 0 || v > INT_MAX))
        r = -ERANGE;
    if (r < 0)
        add_problem(out, "iommu_group", r, NULL);
    else
        out->iommu_group = (int)v;
}

/* A decimal attribute of the device in [min, max]; -1 when absent or unusable. */
static void int_fact(struct scan *s, struct node_pci_dev *out, const char *name, int min, int max,
                     int *ret)
{
    long long v;
    *ret = -1;
    int r = node_sysfs_read_int(s->dev_fd, name, 10, &v);
    if (r == -ENOENT)
        return;
    if (r == 0 && (v < min || v > max))
        r = -ERANGE;
    if (r < 0)
        add_problem(out, name, r, NULL);
    else
        *ret = (int)v;
}

/* Whether `e` (a path element of `len` bytes) is "pci<hex>:<hex>", a PCI root's directory. */
static bool is_root_element(const char *e, size_t len)
{
    size_t colon = 0;
    if (len < 6 || len > 20 || strncmp(e, "pci", 3) != 0)
        return false;
    for (size_t i = 3; i < len; i++) {
        if (e[i] == ':' && !colon && i > 3)
            colon = i;
        else if (!isxdigit((unsigned char)e[i]))
            return false;
    }
    return colon && colon + 1 < len;
}

/* The device's PCI root: the first "pci<domain>:<bus>" element of its link's target
 * (../../../devices/pci0000:00/0000:00:1c.0/0000:04:00.0); "" when there is none. */
static void root_fact(struct scan *s, struct node_pci_dev *out)
{
    char path[64], target[512];
    (void)snprintf(path, sizeof(path), "bus/pci/devices/%s", out->address);
    out->pcie_root[0] = '\0';
    int r = s->bus_fd >= 0
                    ? node_sysfs_read_link_target(s->bus_fd, out->address, target, sizeof(target))
                    : node_sysfs_read_link_target(s->pci->root_fd, path, target, sizeof(target));
    if (r < 0) {
        if (r != -ENOENT && r != -EINVAL) /* not a link: a tree without devices/ */
            add_problem(out, "PCI root", r, NULL);
        return;
    }
    for (const char *e = target; *e;) {
        size_t len = strcspn(e, "/");
        if (is_root_element(e, len)) {
            (void)snprintf(out->pcie_root, sizeof(out->pcie_root), "%.*s", (int)len, e);
            return;
        }
        e += len + (e[len] == '/');
    }
}

/* An SR-IOV PF's network interface: the first entry of its net/ directory, if any (a PF whose
 * driver is not a network driver, or is unbound, has none). */
static void netdev_fact(struct scan *s, struct node_pci_dev *out)
{
    char **names = NULL;
    size_t n = 0;
    int r = node_sysfs_list(s->dev_fd, "net", &names, &n);
    if (r < 0 && r != -ENOENT)
        add_problem(out, "net", r, NULL);
    else if (n > 0 && strlen(names[0]) < sizeof(out->netdev))
        memcpy(out->netdev, names[0], strlen(names[0]) + 1);
    else if (n > 0)
        add_problem(out, "net", -EFBIG, NULL);
    node_sysfs_names_free(names);
}

/* The facts libpci does not give (or caches): driver, IOMMU group, NUMA node, SR-IOV, root. */
static void read_facts(struct scan *s, struct node_pci_dev *out)
{
    root_fact(s, out);
    link_fact(s, out, "driver", "bus/pci/drivers", out->driver, sizeof(out->driver));
    link_fact(s, out, "physfn", "bus/pci/devices", out->physfn, sizeof(out->physfn));
    group_fact(s, out);
    int_fact(s, out, "numa_node", -1, INT_MAX, &out->numa_node);
    /* (the kernel's counts are 16-bit) */
    int_fact(s, out, "sriov_totalvfs", 0, 65535, &out->sriov_totalvfs);
    int_fact(s, out, "sriov_numvfs", 0, 65535, &out->sriov_numvfs);
    if (out->sriov_totalvfs >= 0 && out->sriov_numvfs > out->sriov_totalvfs) {
        append(out->problem, sizeof(out->problem), "sriov_numvfs: more than sriov_totalvfs");
        out->sriov_numvfs = -1; /* one of the two is wrong: the count cannot be told */
    }
    out->sriov_vf_index = -1;
    if (out->sriov_totalvfs > 0)
        netdev_fact(s, out);
}

#define FILL_FLAGS (PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_CLASS_EXT | PCI_FILL_SUBSYS)

/* pci_fill_info() under g; -EIO when libpci raised an error. */
static int fill_jump(struct guard *g, struct pci_dev *d)
{
    if (sigsetjmp(g->jmp, 0) != 0)
        return -EIO;
    pci_fill_info(d, FILL_FLAGS);
    return 0;
}

/* pci_fill_info() under the device guard, collecting libpci's warnings. */
static int fill_guarded(struct scan *s, struct pci_dev *d)
{
    struct guard *g = &s->dev_guard;
    g->message[0] = '\0';
    g->notes[0] = '\0';
    g->collect = true;
    guard_push(g);
    int r = fill_jump(g, d);
    guard_pop(g);
    g->collect = false;
    return r;
}

static void copy_ident(const struct pci_dev *d, struct node_pci_dev *out)
{
    out->vendor_id = d->vendor_id;
    out->device_id = d->device_id;
    out->subsystem_vendor_id = d->subsys_vendor_id;
    out->subsystem_device_id = d->subsys_id;
    out->class_id = d->device_class;
    out->prog_if = d->prog_if;
    out->revision = d->rev_id;
    out->is_bridge = d->device_class == PCI_CLASS_BRIDGE_PCI;
}

/* The Device Serial Number's two dwords (low, high) under g. Returns 1 with them, 0 when the
 * device has none, -EIO when libpci raised an error. */
static int dsn_jump(struct guard *g, struct pci_dev *d, uint32_t ret[2])
{
    if (sigsetjmp(g->jmp, 0) != 0)
        return -EIO;
    struct pci_cap *cap = pci_find_cap(d, PCI_EXT_CAP_ID_DSN, PCI_CAP_EXTENDED);
    if (!cap || cap->addr > 0xff0) /* (an offset in the 4096 bytes of config space) */
        return 0;
    int pos = (int)cap->addr;
    ret[0] = pci_read_long(d, pos + 4);
    ret[1] = pci_read_long(d, pos + 8);
    return 1;
}

/* Whether the device has a DSN (into `ret`): dsn_jump() under the device guard, its warnings
 * dropped. */
static bool dsn_guarded(struct scan *s, struct pci_dev *d, uint32_t ret[2])
{
    struct guard *g = &s->dev_guard;
    g->collect = false;
    guard_push(g);
    int r = dsn_jump(g, d, ret);
    guard_pop(g);
    bool none = (ret[0] == 0 && ret[1] == 0) || (ret[0] == UINT32_MAX && ret[1] == UINT32_MAX);
    return r > 0 && !none;
}

/* The serial and the slot (node/pciident): the DSN when `dsn`, else the function's own. */
static void identity_facts(struct scan *s, struct node_pci_dev *out, const uint32_t *dsn)
{
    const char *slot = node_pciident_slot_of(s->slots, out->address);
    if (slot)
        (void)snprintf(out->slot, sizeof(out->slot), "%s", slot);
    if (dsn) {
        char dsn_text[24];
        node_pciident_format_dsn(dsn[0], dsn[1], dsn_text);
        memcpy(out->serial, dsn_text, sizeof(dsn_text));
        out->serial_source = NODE_PCIIDENT_DSN;
    } else if (out->class_id >> 8 == 0x02 &&
               node_pciident_perm_mac(s->dev_fd, out->vendor_id == 0x1af4, out->serial,
                                      sizeof(out->serial)) == 0) {
        out->serial_source = NODE_PCIIDENT_MAC;
    } else if (out->class_id == 0x0108 &&
               node_pciident_nvme_serial(s->dev_fd, out->serial, sizeof(out->serial)) == 0) {
        out->serial_source = NODE_PCIIDENT_NVME;
    } else {
        out->serial[0] = '\0';
    }
}

/* libpci parses the vendor and device attributes with strtol, so "0xZZZZ" reads as 0000: they
 * are read again, strictly. Fills `why` and returns -EINVAL or -ERANGE for a malformed one; 0
 * otherwise (an attribute that cannot be read at all is libpci's to report). */
static int check_ident(struct scan *s, char *why, size_t size)
{
    static const char *const attrs[] = {"vendor", "device"};
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
        long long v = 0;
        int r = node_sysfs_read_int(s->dev_fd, attrs[i], 16, &v);
        if (r == 0 && v > 0xffff)
            r = -ERANGE;
        if (r == -EINVAL || r == -ERANGE) {
            (void)snprintf(why, size, "%s: %s", attrs[i], trouble(r));
            return r;
        }
    }
    return 0;
}

/* libpci reads an empty or malformed class attribute as 0: it is read again, strictly, so that
 * such a device is published with the problem (and the blockers' checks, which take the class
 * from the scan, read it themselves and fail as they would). */
static void check_class(struct scan *s, struct node_pci_dev *out)
{
    long long v = 0;
    int r = node_sysfs_read_int(s->dev_fd, "class", 16, &v);
    if (r == 0 && v > 0xffffff)
        r = -ERANGE;
    if (r < 0 && r != -ENOENT) /* (absent: libpci's to report) */
        add_problem(out, "class", r, NULL);
}

/* Reads the device of entry `e` (its directory open in s->dev_fd) into the next slot of
 * s->res.devs, or skips it. */
static int read_opened(struct scan *s, const struct entry *e)
{
    struct node_pci_dev *out = &s->res.devs[s->res.n_devs];
    memset(out, 0, sizeof(*out));
    s->current = pci_get_dev(s->access, (int)e->domain, (int)e->bus, (int)e->dev, (int)e->func);
    int r = fill_guarded(s, s->current);
    uint32_t dsn[2] = {0, 0};
    bool has_dsn = false;
    if (r == 0) {
        memcpy(out->address, e->address, sizeof(out->address));
        copy_ident(s->current, out);
        append(out->problem, sizeof(out->problem), s->dev_guard.notes);
        has_dsn = !out->is_bridge && dsn_guarded(s, s->current, dsn);
    }
    pci_free_dev(s->current);
    s->current = NULL;
    if (r < 0)
        return skip(s, e->address, s->dev_guard.message);
    char why[64];
    if (check_ident(s, why, sizeof(why)) < 0)
        return skip(s, e->address, why);
    name_device(s->pci, out);
    check_class(s, out);
    read_facts(s, out);
    if (!out->is_bridge)
        identity_facts(s, out, has_dsn ? dsn : NULL);
    out->aer = (struct node_pciaer){{-1, -1, -1}};
    if (!out->is_bridge)
        (void)node_pciaer_read(s->dev_fd, &out->aer);
    s->res.n_devs++;
    return 0;
}

/* Reads the device of entry `e`: its directory is opened once, inside the root, and its
 * attributes read below that directory (the one opened, whatever its path leads to later). */
static int read_device(struct scan *s, const struct entry *e)
{
    char path[64];
    (void)snprintf(path, sizeof(path), "bus/pci/devices/%s", e->address);
    s->dev_fd = node_sysfs_open_dir(s->pci->root_fd, path);
    if (s->dev_fd < 0) { /* (gone, or replaced, since the listing) */
        char why[160];
        (void)snprintf(why, sizeof(why), "%s: %s", path, trouble(s->dev_fd));
        return skip(s, e->address, why);
    }
    int r = read_opened(s, e);
    close(s->dev_fd);
    s->dev_fd = -1;
    return r;
}

/* The scan proper, after the listing; runs under s->guard, leaves what it allocates in `s`. */
/* libpci's access to the root's bus/pci, into s->access (under s->guard). */
static int access_setup(struct scan *s)
{
    struct pci_access *a = s->access = access_new();
    if (!a)
        return -ENOMEM;
    a->method = PCI_ACCESS_SYS_BUS_PCI;
    if (pci_set_param(a, sysfs_path_param, s->pci->bus_path) < 0)
        return -EINVAL;
    pci_init(a);
    return 0;
}

static int scan_devices(struct scan *s)
{
    int r = access_setup(s);
    if (r < 0)
        return r;
    if (s->n_entries == 0)
        return 0;
    s->res.devs = calloc(s->n_entries, sizeof(*s->res.devs));
    if (!s->res.devs)
        return -ENOMEM;
    for (size_t i = 0; i < s->n_entries; i++) {
        r = read_device(s, &s->entries[i]);
        if (r < 0)
            return r;
    }
    return 0;
}

/* scan_devices() under s->guard: -EIO with s->guard.message when libpci raised an error. */
static int scan_guarded(struct scan *s)
{
    if (sigsetjmp(s->guard.jmp, 0) != 0)
        return -EIO;
    return scan_devices(s);
}

/* The order of two addresses as the kernel names devices (parse_address): a domain of more
 * digits is a greater number (beyond 4 digits it has no leading zero); of as many digits, and
 * with the rest of fixed width in lowercase hex, the bytes' order is the numbers'. No parsing:
 * the scan's lookups make a million comparisons. */
static int compare_addresses(const char *a, const char *b)
{
    size_t x = strcspn(a, ":"), y = strcspn(b, ":");
    if (x != y)
        return x < y ? -1 : 1;
    return strcmp(a, b);
}

/* bsearch(3)'s order of an entry (the key) against a device of a scan's result. */
static int compare_key_dev(const void *key, const void *dev)
{
    return compare_addresses(((const struct entry *)key)->address,
                             ((const struct node_pci_dev *)dev)->address);
}

const struct node_pci_dev *node_pci_scan_find(const struct node_pci_scan_result *r,
                                              const char *address)
{
    struct entry key;
    if (!r || !r->devs || strlen(address) >= sizeof(key.address) || !parse_address(address, &key))
        return NULL;
    return bsearch(&key, r->devs, r->n_devs, sizeof(*r->devs), compare_key_dev);
}

/* Each VF's index: the N of the virtfnN link of its PF that leads to it, for N below the PF's
 * count (sriov_totalvfs when sriov_numvfs cannot be read). A link that cannot be read says so on
 * the PF; a VF that no link of its PF leads to (missing, dangling, elsewhere) keeps its index at
 * -1 and says so itself. (A linear search: a node has few VFs, and mixed domain widths do not
 * sort as strings.) */
static void index_vfs(struct scan *s)
{
    for (size_t i = 0; i < s->res.n_devs; i++) {
        struct node_pci_dev *pf = &s->res.devs[i];
        int n = pf->sriov_numvfs >= 0 ? pf->sriov_numvfs : pf->sriov_totalvfs;
        for (int k = 0; k < n; k++) {
            char path[128], vf[NODE_PCI_ADDRESS_SIZE];
            (void)snprintf(path, sizeof(path), "bus/pci/devices/%s/virtfn%d", pf->address, k);
            int r = node_sysfs_read_link_in(s->pci->root_fd, path, "bus/pci/devices", vf,
                                            sizeof(vf));
            if (r == -ENOENT) /* not made yet (the count just written), or gone */
                continue;
            if (r < 0) {
                add_problem(pf, "virtfn", r, "bus/pci/devices");
                continue;
            }
            struct node_pci_dev *d = (struct node_pci_dev *)node_pci_scan_find(&s->res, vf);
            if (d && strcmp(d->physfn, pf->address) == 0)
                d->sriov_vf_index = k;
        }
    }
    for (size_t i = 0; i < s->res.n_devs; i++) {
        struct node_pci_dev *d = &s->res.devs[i];
        if (d->physfn[0] && d->sriov_vf_index < 0)
            append(d->problem, sizeof(d->problem),
                   "VF index: no virtfnN link of its PF leads to it");
    }
}

static int compare_skips(const void *a, const void *b)
{
    return strcmp(((const struct node_sysfs_skip *)a)->entry,
                  ((const struct node_sysfs_skip *)b)->entry);
}

/* The skipped entries in the order of their names (those skipped when listed and those skipped
 * when read, mixed), so that a rescan of some devices can keep the same order. */
static void sort_skipped(struct node_pci_scan_result *r)
{
    if (r->n_skipped > 1)
        qsort(r->skipped, r->n_skipped, sizeof(*r->skipped), compare_skips);
}

/* Lists and reads the devices into s->res. */
static int run_scan(struct scan *s, struct err *ret_err)
{
    int r = list_entries(s, ret_err);
    if (r < 0)
        return r;
    /* absent (no driver loaded, IOMMU off): no map, and every link "leads elsewhere" */
    if (node_sysfs_dirmap_new(s->pci->root_fd, "bus/pci/drivers", &s->drivers) < 0)
        s->drivers = NULL;
    if (node_sysfs_dirmap_new(s->pci->root_fd, "kernel/iommu_groups", &s->groups) < 0)
        s->groups = NULL;
    s->bus_fd = node_sysfs_open_dir(s->pci->root_fd, "bus/pci/devices");
    if (node_pciident_slots_read(s->pci->root_fd, &s->slots) < 0)
        return err_set(ret_err, -ENOMEM, "out of memory");
    guard_push(&s->guard);
    r = scan_guarded(s);
    guard_pop(&s->guard);
    if (s->current)
        pci_free_dev(s->current);
    if (s->dev_fd >= 0) /* (a libpci error jumped out of read_opened) */
        close(s->dev_fd);
    if (s->access)
        pci_cleanup(s->access);
    if (r == -EIO && s->guard.message[0])
        return err_set(ret_err, r, "libpci: %s", s->guard.message);
    if (r < 0)
        return err_set(ret_err, r, "cannot scan bus/pci/devices: %s", strerror(-r));
    index_vfs(s);
    sort_skipped(&s->res);
    if (s->res.n_devs == 0) {
        free(s->res.devs);
        s->res.devs = NULL;
    }
    return 0;
}

/* A fresh root every time, so a scan never reads through a stale directory (the root replaced
 * or remounted since the last scan), as libpci, going by path, would not. */
static int reopen_root(struct node_pci *p, struct err *ret_err)
{
    int fd = node_sysfs_open_root(p->root_path);
    if (fd < 0)
        return err_set(ret_err, fd, "cannot open the sysfs root %s: %s", p->root_path,
                       strerror(-fd));
    close(p->root_fd);
    p->root_fd = fd;
    return 0;
}

int node_pci_scan(struct node_pci *p, struct node_pci_scan_result *ret, struct err *ret_err)
{
    int r = reopen_root(p, ret_err);
    if (r < 0)
        return r;
    struct scan *s = calloc(1, sizeof(*s));
    if (!s)
        return err_set(ret_err, -ENOMEM, "out of memory");
    s->pci = p;
    s->bus_fd = s->dev_fd = -1;
    r = run_scan(s, ret_err);
    names_close(p);
    if (r == 0) {
        *ret = s->res;
        memset(&s->res, 0, sizeof(s->res));
    }
    node_pci_scan_result_done(&s->res);
    node_sysfs_dirmap_free(s->drivers);
    node_sysfs_dirmap_free(s->groups);
    node_pciident_slots_free(s->slots);
    if (s->bus_fd >= 0)
        close(s->bus_fd);
    free(s->entries);
    free(s);
    return r;
}

/* ---- a rescan of some devices ---------------------------------------------------------------- */

/* One SR-IOV PF's virtfnN links, read once by a rescan of some devices: vf[k] is where virtfnK
 * leads ("" when absent or unusable). */
struct pf_links {
    char pf[NODE_PCI_ADDRESS_SIZE];
    int n;
    char (*vf)[NODE_PCI_ADDRESS_SIZE];
};

/* What a rescan of some devices works with, on the heap with its scan (a libpci error jumps over
 * the functions that fill it). s->entries are the devices read again, in rounds; s->res what
 * the current round read. `now` is the caller's result brought up to date (copied first: the
 * caller's is left alone until the end), `fresh` tells which of its devices were read again. */
struct some {
    struct scan *s;
    size_t entries_alloc;
    struct node_pci_scan_result now;
    bool *fresh;
    struct pf_links *pfs;
    size_t n_pfs;
};

/* Whether `address` is one of the entries read again. */
static bool is_entry(const struct scan *s, const char *address)
{
    for (size_t i = 0; i < s->n_entries; i++)
        if (strcmp(s->entries[i].address, address) == 0)
            return true;
    return false;
}

/* Adds `address` to the entries to read (once). -EINVAL when it is not a PCI address. */
static int add_entry(struct some *m, const char *address)
{
    struct scan *s = m->s;
    struct entry e;
    if (strlen(address) >= sizeof(e.address) || !parse_address(address, &e))
        return -EINVAL;
    if (is_entry(s, address))
        return 0;
    if (s->n_entries == m->entries_alloc) {
        size_t a = m->entries_alloc ? m->entries_alloc * 2 : 8;
        struct entry *v = reallocarray(s->entries, a, sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->entries = v;
        m->entries_alloc = a;
    }
    s->entries[s->n_entries++] = e;
    return 0;
}

/* Reads entry `e` as a full scan would: nothing when bus/pci/devices has no such entry, a
 * skipped entry when it does not lead to a directory, else the device (or why it was skipped).
 * s->res.devs has room for it. */
static int read_entry(struct scan *s, const struct entry *e)
{
    struct stat st;
    if (fstatat(s->bus_fd, e->address, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
        return 0; /* gone */
    char path[64];
    (void)snprintf(path, sizeof(path), "bus/pci/devices/%s", e->address);
    int r = node_sysfs_check_dir(s->pci->root_fd, path);
    if (r < 0) {
        char why[160];
        (void)snprintf(why, sizeof(why), "%s: %s", path, trouble(r));
        return skip(s, e->address, why);
    }
    return read_device(s, e);
}

static int compare_devs(const void *a, const void *b)
{
    return compare_addresses(((const struct node_pci_dev *)a)->address,
                             ((const struct node_pci_dev *)b)->address);
}

/* Brings m->now up to date with the round that read entries [from, s->n_entries) into s->res
 * (which is emptied): their old devices and skipped entries replaced by what was read. */
static int merge(struct some *m, size_t from)
{
    struct scan *s = m->s;
    struct node_pci_scan_result *now = &m->now, *got = &s->res;
    size_t n = now->n_devs + got->n_devs;
    struct node_pci_dev *devs = calloc(n ? n : 1, sizeof(*devs));
    bool *fresh = calloc(n ? n : 1, sizeof(*fresh));
    if (!devs || !fresh) {
        free(devs);
        free(fresh);
        return -ENOMEM;
    }
    if (got->n_devs > 1)
        qsort(got->devs, got->n_devs, sizeof(*got->devs), compare_devs);
    size_t k = 0, j = 0;
    for (size_t i = 0; i <= now->n_devs; i++) {
        const struct node_pci_dev *d = i < now->n_devs ? &now->devs[i] : NULL;
        for (; j < got->n_devs && (!d || compare_devs(&got->devs[j], d) < 0); j++) {
            devs[k] = got->devs[j];
            fresh[k++] = true;
        }
        bool again = false;
        for (size_t e = from; d && e < s->n_entries && !again; e++)
            again = strcmp(s->entries[e].address, d->address) == 0;
        if (d && !again) {
            devs[k] = *d;
            fresh[k++] = m->fresh[i];
        }
    }
    free(now->devs);
    free(m->fresh);
    now->devs = devs;
    now->n_devs = k;
    m->fresh = fresh;
    got->n_devs = 0;
    /* the skipped entries: those not read again, then those this round skipped */
    size_t kept = 0;
    for (size_t i = 0; i < now->n_skipped; i++) {
        bool again = false;
        for (size_t e = from; e < s->n_entries && !again; e++)
            again = strcmp(s->entries[e].address, now->skipped[i].entry) == 0;
        if (!again)
            now->skipped[kept++] = now->skipped[i];
    }
    now->n_skipped = kept;
    size_t alloc = kept;
    for (size_t i = 0; i < got->n_skipped; i++)
        if (node_sysfs_skip_add(&now->skipped, &now->n_skipped, &alloc, got->skipped[i].entry,
                                got->skipped[i].why) < 0)
            return -ENOMEM;
    got->n_skipped = 0;
    sort_skipped(now);
    return 0;
}

/* Reads entries [from, s->n_entries) and merges them into m->now. */
static int read_round(struct some *m, size_t from)
{
    struct scan *s = m->s;
    free(s->res.devs);
    s->res.devs = calloc(s->n_entries - from + 1, sizeof(*s->res.devs));
    if (!s->res.devs)
        return -ENOMEM;
    s->res.n_devs = 0;
    for (size_t i = from; i < s->n_entries; i++) {
        int r = read_entry(s, &s->entries[i]);
        if (r < 0)
            return r;
    }
    return merge(m, from);
}

/* Reads the virtfnN links of the PF m->now.devs[i] (read again) into m->pfs, noting on the PF
 * those that cannot be read, as index_vfs() does. */
static int read_pf_links(struct some *m, size_t i)
{
    struct node_pci_dev *pf = &m->now.devs[i];
    int n = pf->sriov_numvfs >= 0 ? pf->sriov_numvfs : pf->sriov_totalvfs;
    struct pf_links *v = reallocarray(m->pfs, m->n_pfs + 1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    m->pfs = v;
    struct pf_links *l = &m->pfs[m->n_pfs];
    *l = (struct pf_links){.n = n > 0 ? n : 0};
    memcpy(l->pf, pf->address, sizeof(l->pf));
    l->vf = calloc(l->n ? (size_t)l->n : 1, sizeof(*l->vf));
    if (!l->vf)
        return -ENOMEM;
    m->n_pfs++;
    for (int k = 0; k < l->n; k++) {
        char path[128];
        (void)snprintf(path, sizeof(path), "bus/pci/devices/%s/virtfn%d", pf->address, k);
        int r = node_sysfs_read_link_in(m->s->pci->root_fd, path, "bus/pci/devices", l->vf[k],
                                        sizeof(l->vf[k]));
        if (r < 0)
            l->vf[k][0] = '\0';
        if (r < 0 && r != -ENOENT)
            add_problem(pf, "virtfn", r, "bus/pci/devices");
    }
    return 0;
}

/* The index the links of the PF read again give the device `d` whose physfn is that PF's
 * address: the last N of a virtfnN link leading to it, -1 when none does or the PF is gone. */
static int index_from_links(const struct some *m, const struct node_pci_dev *d)
{
    int index = -1;
    for (size_t p = 0; p < m->n_pfs; p++)
        if (strcmp(m->pfs[p].pf, d->physfn) == 0)
            for (int k = 0; k < m->pfs[p].n; k++)
                if (strcmp(m->pfs[p].vf[k], d->address) == 0)
                    index = k;
    return index;
}

/* Rereads the VFs not read again whose PF was and whose index that PF now gives otherwise (a
 * link added or gone, the PF itself gone): the next round. -EAGAIN when one of them turns out
 * to hang off another PF (not local: the caller scans everything). */
static int reread_vfs(struct some *m)
{
    struct scan *s = m->s;
    size_t from = s->n_entries;
    for (size_t i = 0; i < m->now.n_devs; i++) {
        const struct node_pci_dev *d = &m->now.devs[i];
        char address[NODE_PCI_ADDRESS_SIZE];
        if (m->fresh[i] || !d->physfn[0] || !is_entry(s, d->physfn) ||
            index_from_links(m, d) == d->sriov_vf_index)
            continue;
        memcpy(address, d->address, sizeof(address));
        int r = add_entry(m, address);
        if (r < 0)
            return r;
    }
    if (s->n_entries == from)
        return 0;
    int r = read_round(m, from);
    for (size_t i = 0; r == 0 && i < m->now.n_devs; i++) {
        const struct node_pci_dev *d = &m->now.devs[i];
        bool asked = false;
        for (size_t e = from; e < s->n_entries && !asked; e++)
            asked = strcmp(s->entries[e].address, d->address) == 0;
        if (asked && ((d->physfn[0] && !is_entry(s, d->physfn)) || d->sriov_totalvfs > 0))
            r = -EAGAIN;
    }
    return r;
}

/* The rescan proper, under s->guard (see node_pci_rescan_devices). */
static int some_run(struct some *m, const char *const *addresses, size_t n,
                    const struct node_pci_scan_result *old)
{
    struct scan *s = m->s;
    int r = access_setup(s);
    for (size_t i = 0; r == 0 && i < n; i++) {
        r = add_entry(m, addresses[i]);
        const struct node_pci_dev *d = r == 0 ? node_pci_scan_find(old, addresses[i]) : NULL;
        if (d && d->physfn[0])
            r = add_entry(m, d->physfn); /* its PF, as it was */
    }
    /* the devices asked for, then the PFs they now hang off, until no PF is new */
    for (size_t from = 0; r == 0 && from < s->n_entries;) {
        size_t to = s->n_entries;
        r = read_round(m, from);
        for (size_t i = 0; r == 0 && i < m->now.n_devs; i++)
            if (m->fresh[i] && m->now.devs[i].physfn[0] &&
                parse_address(m->now.devs[i].physfn, &(struct entry){0}))
                r = add_entry(m, m->now.devs[i].physfn);
        from = to;
    }
    for (size_t i = 0; r == 0 && i < m->now.n_devs; i++) {
        const struct node_pci_dev *d = &m->now.devs[i];
        if (m->fresh[i] && (d->sriov_numvfs >= 0 ? d->sriov_numvfs : d->sriov_totalvfs) > 0)
            r = read_pf_links(m, i);
    }
    if (r == 0)
        r = reread_vfs(m);
    for (size_t i = 0; r == 0 && i < m->now.n_devs; i++) {
        struct node_pci_dev *d = &m->now.devs[i];
        if (!m->fresh[i] || !d->physfn[0])
            continue;
        d->sriov_vf_index = index_from_links(m, d);
        if (d->sriov_vf_index < 0)
            append(d->problem, sizeof(d->problem),
                   "VF index: no virtfnN link of its PF leads to it");
    }
    return r;
}

/* some_run() under s->guard: -EIO with s->guard.message when libpci raised an error. */
static int some_guarded(struct some *m, const char *const *addresses, size_t n,
                        const struct node_pci_scan_result *old)
{
    if (sigsetjmp(m->s->guard.jmp, 0) != 0)
        return -EIO;
    return some_run(m, addresses, n, old);
}

/* m->now starts as a copy of `old`. */
static int some_setup(struct some *m, const struct node_pci_scan_result *old)
{
    struct scan *s = m->s;
    size_t n = old->n_devs;
    m->now.devs = malloc((n ? n : 1) * sizeof(*m->now.devs));
    m->fresh = calloc(n ? n : 1, sizeof(*m->fresh));
    m->now.skipped = malloc((old->n_skipped ? old->n_skipped : 1) * sizeof(*m->now.skipped));
    if (!m->now.devs || !m->fresh || !m->now.skipped)
        return -ENOMEM;
    if (n)
        memcpy(m->now.devs, old->devs, n * sizeof(*old->devs));
    if (old->n_skipped)
        memcpy(m->now.skipped, old->skipped, old->n_skipped * sizeof(*old->skipped));
    m->now.n_devs = n;
    m->now.n_skipped = old->n_skipped;
    s->bus_fd = node_sysfs_open_dir(s->pci->root_fd, "bus/pci/devices");
    if (s->bus_fd < 0)
        return s->bus_fd;
    if (node_pciident_slots_read(s->pci->root_fd, &s->slots) < 0)
        return -ENOMEM;
    return 0;
}

static void some_done(struct some *m)
{
    struct scan *s = m->s;
    if (s->current)
        pci_free_dev(s->current);
    if (s->dev_fd >= 0)
        close(s->dev_fd);
    if (s->access)
        pci_cleanup(s->access);
    node_pci_scan_result_done(&s->res);
    node_pciident_slots_free(s->slots);
    if (s->bus_fd >= 0)
        close(s->bus_fd);
    free(s->entries);
    free(s);
    node_pci_scan_result_done(&m->now);
    free(m->fresh);
    for (size_t i = 0; i < m->n_pfs; i++)
        free(m->pfs[i].vf);
    free(m->pfs);
}

int node_pci_rescan_devices(struct node_pci *p, struct node_pci_scan_result *res,
                            const char *const *addresses, size_t n,
                            char (**ret_read)[NODE_PCI_ADDRESS_SIZE], size_t *ret_n_read,
                            struct err *ret_err)
{
    int r = reopen_root(p, ret_err);
    if (r < 0)
        return r;
    struct some m = {.s = calloc(1, sizeof(*m.s))};
    if (!m.s)
        return err_set(ret_err, -ENOMEM, "out of memory");
    m.s->pci = p;
    m.s->bus_fd = m.s->dev_fd = -1;
    r = some_setup(&m, res);
    if (r == 0) {
        guard_push(&m.s->guard);
        r = some_guarded(&m, addresses, n, res);
        guard_pop(&m.s->guard);
    }
    names_close(p);
    char(*read)[NODE_PCI_ADDRESS_SIZE] = NULL;
    if (r == 0 && ret_read) {
        read = calloc(m.s->n_entries ? m.s->n_entries : 1, sizeof(*read));
        r = read ? 0 : -ENOMEM;
        for (size_t i = 0; read && i < m.s->n_entries; i++)
            memcpy(read[i], m.s->entries[i].address, sizeof(read[i]));
    }
    if (r == 0) {
        if (ret_read) {
            *ret_read = read;
            *ret_n_read = m.s->n_entries;
        }
        node_pci_scan_result_done(res);
        *res = m.now;
        if (res->n_devs == 0) {
            free(res->devs);
            res->devs = NULL;
        }
        if (res->n_skipped == 0) {
            free(res->skipped);
            res->skipped = NULL;
        }
        memset(&m.now, 0, sizeof(m.now));
    }
    if (r == -EIO && m.s->guard.message[0])
        (void)err_set(ret_err, r, "libpci: %s", m.s->guard.message);
    else if (r == -EINVAL)
        (void)err_set(ret_err, r, "not a PCI address as the kernel names devices");
    else if (r == -EAGAIN)
        (void)err_set(ret_err, r, "a VF moved to another PF: not a local change");
    else if (r < 0)
        (void)err_set(ret_err, r, "cannot read the devices again: %s", strerror(-r));
    some_done(&m);
    return r;
}
