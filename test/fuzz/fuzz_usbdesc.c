/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_usbdesc.c - a USB device's sysfs attributes through node_usb_scan() (the
 * agent's USB discovery, node/usb.c) and usbdevice_spec_from() (what it publishes), on
 * arbitrary bytes. The agent reads no binary `descriptors` file: the kernel's attributes
 * (idVendor, busnum, speed, bDeviceClass, the string descriptors, an interface's class) and the
 * device's link are all it parses.
 *
 * Input: parts separated by the byte 0x1e: the device's entry name in bus/usb/devices, the
 * component of its link before usbN (where the host controller's PCI address is), then the
 * contents of idVendor, idProduct, busnum, devnum, speed, bDeviceClass, product, manufacturer,
 * serial and the first interface's bInterfaceClass; a part that is the single byte 0x7f leaves
 * that file out. They are written to a sysfs tree in a temporary directory shaped like the
 * kernel's (bus/usb/devices/<name> -> ../../../devices/pci0000:00/<pci>/usb2/<name>). Checks
 * each device scanned: a port path, 4 lower-case hex digits of ids, bus and device numbers in
 * range and the device path made of them, a PCI address or "", speed of digits and dots, a
 * class of 2 hex digits or "", strings trimmed; and that it becomes a USBDevice status.
 */
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "controllers/devices/usbdevice.h"
#include "fuzzjson.h"
#include "fuzztmp.h"
#include "node/sysfs.h"
#include "node/usb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NAME_MAX_LEN 60
#define MAX_PATHS    24

static const char *const attrs[] = {"idVendor",     "idProduct", "busnum",       "devnum", "speed",
                                    "bDeviceClass", "product",   "manufacturer", "serial"};

static char root[64];
static char made[MAX_PATHS][400]; /* what this input created, removed in reverse */
static size_t n_made;

static void undo(void)
{
    while (n_made > 0) {
        const char *p = made[--n_made];
        if (unlink(p) < 0)
            (void)rmdir(p);
    }
}

static void cleanup(void)
{
    static const char *const dirs[] = {"bus/usb/devices", "bus/usb", "bus", "devices/pci0000:00",
                                       "devices"};
    char p[128];
    undo();
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        (void)snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
        (void)rmdir(p);
    }
    (void)rmdir(root);
}

static int setup(void)
{
    static const char *const dirs[] = {"devices", "devices/pci0000:00", "bus", "bus/usb",
                                       "bus/usb/devices"};
    char p[128];
    if (root[0])
        return 0;
    (void)snprintf(root, sizeof(root), "%s/fuzz-usb.XXXXXX", fuzz_tmpdir());
    if (!mkdtemp(root))
        return -1;
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        (void)snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
        if (mkdir(p, 0755) < 0)
            return -1;
    }
    atexit(cleanup);
    return 0;
}

/* Records `rel` (under the root) as made; returns its full path. */
static const char *track(const char *rel)
{
    if (n_made == MAX_PATHS)
        abort();
    (void)snprintf(made[n_made], sizeof(made[n_made]), "%s/%s", root, rel);
    return made[n_made++];
}

static void make_dir(const char *rel)
{
    if (mkdir(track(rel), 0755) < 0)
        n_made--;
}

/* A part as a single path component: non-empty, no '/' or NUL, not "." or "..", short. */
static void component(const struct fuzz_parts *p, size_t i, const char *fallback, char *buf)
{
    size_t n = p->n[i];
    if (n == 0 || n > NAME_MAX_LEN || memchr(p->p[i], '/', n) || memchr(p->p[i], '\0', n) ||
        (n <= 2 && memcmp(p->p[i], "..", n) == 0)) {
        (void)snprintf(buf, NAME_MAX_LEN + 1, "%s", fallback);
        return;
    }
    memcpy(buf, p->p[i], n);
    buf[n] = '\0';
}

/* Writes part `i` to the file `dir`/`name`, unless it is the single byte 0x7f. */
static void put(const char *dir, const char *name, const struct fuzz_parts *p, size_t i)
{
    char rel[360];
    if (p->n[i] == 1 && p->p[i][0] == 0x7f)
        return;
    (void)snprintf(rel, sizeof(rel), "%s/%s", dir, name);
    int fd = open(track(rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        n_made--;
        return;
    }
    if (p->n[i] && write(fd, p->p[i], p->n[i]) != (ssize_t)p->n[i])
        abort();
    close(fd);
}

static void make_tree(const struct fuzz_parts *p)
{
    char port[NAME_MAX_LEN + 1], pci[NAME_MAX_LEN + 1], dir[160], rel[300], target[300];
    component(p, 0, "2-1.4", port);
    component(p, 1, "0000:00:14.0", pci);
    (void)snprintf(dir, sizeof(dir), "devices/pci0000:00/%s", pci);
    make_dir(dir);
    (void)snprintf(dir, sizeof(dir), "devices/pci0000:00/%s/usb2", pci);
    make_dir(dir);
    (void)snprintf(dir, sizeof(dir), "devices/pci0000:00/%s/usb2/%s", pci, port);
    make_dir(dir);
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++)
        put(dir, attrs[i], p, 2 + i);
    (void)snprintf(rel, sizeof(rel), "%s/%s:1.0", dir, port);
    make_dir(rel);
    put(rel, "bInterfaceClass", p, 11);
    (void)snprintf(target, sizeof(target), "../../../%s", dir);
    (void)snprintf(rel, sizeof(rel), "bus/usb/devices/%s", port);
    if (symlink(target, track(rel)) < 0)
        n_made--;
}

static bool all(const char *s, const char *set)
{
    return strspn(s, set) == strlen(s);
}

static void check_dev(const struct node_usb_dev *d)
{
    char want[32];
    const char *hex = "0123456789abcdef";
    if (!all(d->vendor_id, hex) || strlen(d->vendor_id) != 4 || !all(d->product_id, hex) ||
        strlen(d->product_id) != 4 || d->busnum < 1 || d->busnum > 9999 || d->devnum < 1 ||
        d->devnum > 9999)
        abort();
    (void)snprintf(want, sizeof(want), "/dev/bus/usb/%03d/%03d", d->busnum, d->devnum);
    if (strcmp(want, d->dev_path) != 0 || !strchr(d->port_path, '-') ||
        !all(d->port_path, "0123456789-.") || !all(d->speed, "0123456789.") ||
        (d->class_code[0] && (strlen(d->class_code) != 2 || !all(d->class_code, hex))) ||
        (d->pci_address[0] && strlen(d->pci_address) < 12))
        abort();
    const char *strings[] = {d->product, d->manufacturer, d->serial};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strnlen(strings[i], NODE_USB_STRING_SIZE);
        if (n == NODE_USB_STRING_SIZE || (n && (isspace((unsigned char)strings[i][0]) ||
                                                isspace((unsigned char)strings[i][n - 1]))))
            abort();
    }
    struct usbdevice_spec spec;
    if (usbdevice_spec_from("titan", d, NULL, &spec) < 0)
        abort(); /* a device the scan accepts has a name */
    cJSON *st = usbdevice_status(&spec);
    if (!st)
        abort();
    cJSON_Delete(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_parts p;
    if (size > 65536 || setup() < 0)
        return 0;
    fuzz_split(data, size, &p);
    make_tree(&p);
    int fd = node_sysfs_open_root(root);
    if (fd < 0)
        abort();
    struct node_usb_scan_result res;
    struct err e = {""};
    if (node_usb_scan(fd, &res, &e) == 0) {
        if (res.n_devs + res.n_skipped > 1)
            abort(); /* one entry */
        for (size_t i = 0; i < res.n_devs; i++)
            check_dev(&res.devs[i]);
        node_usb_scan_result_done(&res);
    } else if (!e.msg[0]) {
        abort();
    }
    close(fd);
    undo();
    return 0;
}
