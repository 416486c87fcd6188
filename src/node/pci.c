/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/pci.c - PCI discovery with libpci (the only includer of <pci/pci.h>). See pci.h.
 *
 * Decisions:
 * - libpci's error callback cannot return. Calls into libpci run under a `struct guard`: the
 *   callback formats the message into the innermost guard of this thread and siglongjmp()s to
 *   it. A guard is heap-allocated, so nothing the jump skips over lives in a local variable.
 *   Warnings and debug messages are dropped (a library layer does not log).
 * - libpci leaks in one error path we cannot reach: an entry of bus/pci/devices whose name is
 *   not an address (lib/sysfs.c allocates the device before parsing the name). The kernel never
 *   makes such entries.
 * - Names: the udev hwdb is never asked (PCI_LOOKUP_NO_HWDB), so names come from the pci.ids
 *   file alone. An unknown subclass falls back to the class name, which libpci returns as
 *   "Name [cccc]"; the number is cut off. Names are cut at a UTF-8 character boundary when they
 *   do not fit.
 * - Absent optional attributes (driver, iommu_group, numa_node, physfn, sriov_*) give the
 *   "none" values; one that exists but cannot be read or parsed fails the scan, naming it.
 */
#include "node/pci.h"

#include <errno.h>
#include <limits.h>
#include <pci/pci.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/sysfs.h"

#define LOOKUP_FLAGS (PCI_LOOKUP_NO_NUMBERS | PCI_LOOKUP_NO_HWDB)

/* libpci takes parameter names as char *. */
static char sysfs_path_param[] = "sysfs.path";

struct node_pci {
    int root_fd; /* reopened at every scan: /sys may have been remounted */
    char *root_path;
    char *bus_path;           /* <root>/bus/pci, libpci's sysfs.path */
    struct pci_access *names; /* pci.ids, loaded once; no devices */
};

/* Where libpci's error callback jumps to. */
struct guard {
    sigjmp_buf jmp;
    char message[256];
    struct guard *prev;
};

static __thread struct guard *current_guard;

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
        a->debug = on_warning;
    }
    return a;
}

/* Copies `message` into `err` (if the caller wants it) and returns r. */
static int set_err(struct node_pci_err *err, int r, const char *message)
{
    if (err)
        snprintf(err->message, sizeof(err->message), "%s", message);
    return r;
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
    if (p->root_fd >= 0)
        close(p->root_fd);
    free(p->bus_path);
    free(p->root_path);
    free(p);
    return NULL;
}

/* Opens the root and loads the names into the zeroed `p`. */
static int setup(struct node_pci *p, const char *sysfs_root, const char *ids_path)
{
    p->root_fd = node_sysfs_open_root(sysfs_root);
    if (p->root_fd < 0)
        return p->root_fd;
    p->root_path = strdup(sysfs_root);
    if (!p->root_path)
        return -ENOMEM;
    if (asprintf(&p->bus_path, "%s/bus/pci", sysfs_root) < 0) {
        p->bus_path = NULL;
        return -ENOMEM;
    }
    p->names = access_new();
    if (!p->names)
        return -ENOMEM;
    if (ids_path) {
        char *copy = strdup(ids_path);
        if (!copy)
            return -ENOMEM;
        pci_set_name_list_path(p->names, copy, 1);
    }
    int r = load_names(p->names);
    if (r == -EINVAL && access(p->names->id_file_name, R_OK) < 0)
        r = -errno; /* libpci has tried "pci.ids.gz", then "pci.ids": this is the last name */
    return r;
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

void node_pci_devs_free(struct node_pci_dev *devs)
{
    free(devs);
}

/* Copies `src` (NULL = "") into `dst`, cutting it at a UTF-8 character boundary if needed. */
static void copy_name(char *dst, size_t size, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= size) {
        n = size - 1;
        while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
            n--;
    }
    if (n > 0)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

static void lookup_names(struct pci_access *a, struct node_pci_dev *out)
{
    char buf[512];
    const char *s;
    s = pci_lookup_name(a, buf, sizeof(buf), PCI_LOOKUP_VENDOR | LOOKUP_FLAGS, out->vendor_id);
    copy_name(out->vendor_name, sizeof(out->vendor_name), s);
    s = pci_lookup_name(a, buf, sizeof(buf), PCI_LOOKUP_DEVICE | LOOKUP_FLAGS, out->vendor_id,
                        out->device_id);
    copy_name(out->device_name, sizeof(out->device_name), s);
    s = pci_lookup_name(a, buf, sizeof(buf), PCI_LOOKUP_CLASS | LOOKUP_FLAGS, out->class_id);
    copy_name(out->class_name, sizeof(out->class_name), s);
    /* A class name found without its subclass comes as "Bridge [0680]". */
    char suffix[16];
    int n = snprintf(suffix, sizeof(suffix), " [%04x]", out->class_id);
    size_t len = strlen(out->class_name);
    if (len > (size_t)n && strcmp(out->class_name + len - (size_t)n, suffix) == 0)
        out->class_name[len - (size_t)n] = '\0';
}

/* libpci's devices in our order. */
struct sort_entry {
    struct pci_dev *dev;
};

struct scan {
    struct guard guard;
    struct node_pci *pci;
    struct pci_access *access;
    struct node_pci_dev *devs;
    struct sort_entry *order;
    size_t count;
    char message[256]; /* for errors of our own */
};

/* Records a failed read of attribute `name` of `addr`. Returns r. */
static int attr_failed(struct scan *s, int r, const char *addr, const char *name)
{
    snprintf(s->message, sizeof(s->message), "cannot read bus/pci/devices/%s/%s: %s", addr, name,
             strerror(-r));
    return r;
}

/* The name a link of device `addr` points to, "" when absent. */
static int dev_link(struct scan *s, const char *addr, const char *name, char *buf, size_t size)
{
    char path[128];
    snprintf(path, sizeof(path), "bus/pci/devices/%s/%s", addr, name);
    int r = node_sysfs_read_link(s->pci->root_fd, path, buf, size);
    if (r == -ENOENT)
        return 0;
    return r < 0 ? attr_failed(s, r, addr, name) : 0;
}

/* A decimal attribute (or, with link = true, the name of a link) of device `addr` in
 * [min, INT_MAX]; -1 when absent. */
static int dev_int(struct scan *s, const char *addr, const char *name, bool link, int min, int *ret)
{
    char path[128], buf[32];
    long long v;
    snprintf(path, sizeof(path), "bus/pci/devices/%s/%s", addr, name);
    int r = link ? node_sysfs_read_link(s->pci->root_fd, path, buf, sizeof(buf))
                 : node_sysfs_read_int(s->pci->root_fd, path, 10, &v);
    if (r == -ENOENT) {
        *ret = -1;
        return 0;
    }
    if (r >= 0 && link)
        r = node_sysfs_parse_int(buf, 10, &v);
    if (r >= 0 && (v < min || v > INT_MAX))
        r = -ERANGE;
    if (r < 0)
        return attr_failed(s, r, addr, name);
    *ret = (int)v;
    return 0;
}

/* The facts libpci does not give (or caches): driver, IOMMU group, NUMA node, SR-IOV. */
static int read_facts(struct scan *s, struct node_pci_dev *out)
{
    const char *a = out->address;
    int r = dev_link(s, a, "driver", out->driver, sizeof(out->driver));
    if (r == 0)
        r = dev_link(s, a, "physfn", out->physfn, sizeof(out->physfn));
    if (r == 0)
        r = dev_int(s, a, "iommu_group", true, 0, &out->iommu_group);
    if (r == 0)
        r = dev_int(s, a, "numa_node", false, -1, &out->numa_node);
    if (r == 0)
        r = dev_int(s, a, "sriov_totalvfs", false, 0, &out->sriov_totalvfs);
    if (r == 0)
        r = dev_int(s, a, "sriov_numvfs", false, 0, &out->sriov_numvfs);
    return r;
}

static int fill_device(struct scan *s, struct pci_dev *d, struct node_pci_dev *out)
{
    pci_fill_info(d, PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_CLASS_EXT | PCI_FILL_SUBSYS);
    snprintf(out->address, sizeof(out->address), "%04x:%02x:%02x.%u", (unsigned)d->domain, d->bus,
             d->dev, d->func);
    out->vendor_id = d->vendor_id;
    out->device_id = d->device_id;
    out->subsystem_vendor_id = d->subsys_vendor_id;
    out->subsystem_device_id = d->subsys_id;
    out->class_id = d->device_class;
    out->prog_if = d->prog_if;
    out->revision = d->rev_id;
    out->is_bridge = d->device_class == PCI_CLASS_BRIDGE_PCI;
    lookup_names(s->pci->names, out);
    return read_facts(s, out);
}

static int compare_devs(const void *a, const void *b)
{
    const struct pci_dev *x = ((const struct sort_entry *)a)->dev;
    const struct pci_dev *y = ((const struct sort_entry *)b)->dev;
    if (x->domain != y->domain)
        return x->domain < y->domain ? -1 : 1;
    if (x->bus != y->bus)
        return x->bus < y->bus ? -1 : 1;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return (int)x->func - (int)y->func;
}

/* The scan proper; runs under s->guard, leaves everything it allocates in `s`. */
static int scan_devices(struct scan *s)
{
    struct pci_access *a = s->access = access_new();
    if (!a)
        return -ENOMEM;
    a->method = PCI_ACCESS_SYS_BUS_PCI;
    if (pci_set_param(a, sysfs_path_param, s->pci->bus_path) < 0)
        return -EINVAL;
    pci_init(a);
    pci_scan_bus(a);
    size_t n = 0;
    for (struct pci_dev *d = a->devices; d; d = d->next)
        n++;
    if (n == 0)
        return 0;
    s->order = calloc(n, sizeof(*s->order));
    s->devs = calloc(n, sizeof(*s->devs));
    if (!s->order || !s->devs)
        return -ENOMEM;
    for (struct pci_dev *d = a->devices; d; d = d->next)
        s->order[s->count++].dev = d;
    qsort(s->order, n, sizeof(*s->order), compare_devs);
    for (size_t i = 0; i < n; i++) {
        int r = fill_device(s, s->order[i].dev, &s->devs[i]);
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

int node_pci_scan(struct node_pci *p, struct node_pci_dev **ret_devs, size_t *ret_count,
                  struct node_pci_err *err)
{
    /* A fresh root every time, so a scan never reads through a stale directory (the root
     * replaced or remounted since the last scan), as libpci, going by path, would not. */
    int fd = node_sysfs_open_root(p->root_path);
    if (fd < 0)
        return set_err(err, fd, "cannot open the sysfs root");
    close(p->root_fd);
    p->root_fd = fd;
    struct scan *s = calloc(1, sizeof(*s));
    if (!s)
        return set_err(err, -ENOMEM, "out of memory");
    s->pci = p;
    guard_push(&s->guard);
    int r = scan_guarded(s);
    guard_pop(&s->guard);
    if (s->access)
        pci_cleanup(s->access);
    if (r == 0) {
        *ret_devs = s->devs;
        s->devs = NULL;
        *ret_count = s->count;
    } else if (s->guard.message[0]) {
        set_err(err, r, s->guard.message);
    } else {
        set_err(err, r, s->message[0] ? s->message : strerror(-r));
    }
    free(s->devs);
    free(s->order);
    free(s);
    return r;
}
