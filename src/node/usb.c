/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/usb.c - USB device discovery on a sysfs root (see usb.h). Blocking (sysfs reads); no
 * logging.
 *
 * Decisions:
 * - Entries are taken in the order node_sysfs_list() gives them (strcmp), which is the
 *   port_path order the header promises: the result needs no sort of its own.
 * - Names are checked here (port paths, PCI addresses) rather than with kube/names: node/ may
 *   not include kube/ (make lint), and the rules are the same few lines.
 * - Every attribute is read into a buffer just big enough for a valid value, so a value that
 *   does not fit is -EFBIG ("too long") without a larger copy; the string descriptors use the
 *   header's NODE_USB_STRING_SIZE.
 * - Strings are trimmed of white space at both ends, as the anchor's strings.TrimSpace does (the
 *   description appends the product string; a difference would rename nothing but show).
 * - The interface class, when the device class is 00, is the first interface directory
 *   "<port>:<cfg>.<if>" (in strcmp order, as Go's os.ReadDir) whose bInterfaceClass is two hex
 *   digits; none is "" without a problem (an unconfigured device has no interface).
 */
#include "node/usb.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/sysfs.h"

#define DEVICES    "bus/usb/devices"
#define BUSNUM_MAX 9999 /* keeps dev_path within its field; the kernel stops at 64 buses */
#define DEVNUM_MAX 9999 /* the kernel's are 1..127 */

struct scan {
    int root_fd;
    size_t skipped_alloc;
    struct node_usb_scan_result res;
};

/* Appends `text` to the string in `dst`, after "; " when it is not empty; cut to fit. */
static void append(char *dst, size_t size, const char *text)
{
    size_t len = strnlen(dst, size);
    if (len + 1 >= size)
        return;
    (void)snprintf(dst + len, size - len, "%s%s", len ? "; " : "", text);
}

/* What went wrong, in words, for an -errno of node/sysfs. */
static const char *trouble(int r)
{
    return node_sysfs_trouble(r, "absent");
}

/* Notes in out->problem that attribute `name` could not be used. */
static void add_problem(struct node_usb_dev *out, const char *name, int r)
{
    char text[96];
    (void)snprintf(text, sizeof(text), "%s: %s", name, trouble(r));
    append(out->problem, sizeof(out->problem), text);
}

/* Records that entry `name` of bus/usb/devices is left out, because of `why`. */
static int skip(struct scan *s, const char *name, const char *why)
{
    return node_sysfs_skip_add(&s->res.skipped, &s->res.n_skipped, &s->skipped_alloc, name, why);
}

static size_t run_of(const char *s, int (*is)(int))
{
    size_t n = 0;
    while (s[n] && is((unsigned char)s[n]))
        n++;
    return n;
}

/* "2-1.4": bus, '-', then ports separated by '.'; short enough for the result's field. */
static bool is_port_path(const char *s)
{
    if (strlen(s) >= NODE_USB_PORT_PATH_SIZE)
        return false;
    size_t n = run_of(s, isdigit);
    if (n == 0 || s[n] != '-')
        return false;
    for (s += n + 1;; s += n + 1) {
        n = run_of(s, isdigit);
        if (n == 0)
            return false;
        if (s[n] == '\0')
            return true;
        if (s[n] != '.')
            return false;
    }
}

static int is_lower_hex(int c)
{
    return isdigit(c) || (c >= 'a' && c <= 'f');
}

/* A PCI address as sysfs writes it: "0000:00:1f.6" (as kube_names_is_pci_address()). */
static bool is_pci_address(const char *s, size_t len)
{
    size_t d = 0;
    while (d < len && is_lower_hex((unsigned char)s[d]))
        d++;
    if (d < 4 || d > 8 || len != d + 8 || s[d] != ':')
        return false;
    s += d + 1;
    return is_lower_hex(s[0]) && is_lower_hex(s[1]) && s[2] == ':' && s[3] >= '0' && s[3] <= '1' &&
           is_lower_hex(s[4]) && s[5] == '.' && s[6] >= '0' && s[6] <= '7';
}

/* Exactly `n` hex digits, lower-cased in place. */
static bool lower_hex(char *s, size_t n)
{
    if (strlen(s) != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!isxdigit((unsigned char)s[i]))
            return false;
        s[i] = (char)tolower((unsigned char)s[i]);
    }
    return true;
}

/* Reads bus/usb/devices/<port>/<name> (`name` may name a file in a subdirectory). */
static int read_attr(int root_fd, const char *port, const char *name, char *buf, size_t size)
{
    char path[160];
    (void)snprintf(path, sizeof(path), DEVICES "/%s/%s", port, name);
    return node_sysfs_read(root_fd, path, buf, size);
}

/* A hex attribute of `digits` digits into `buf` (of digits + 1 bytes at least). */
static int read_hex(int root_fd, const char *port, const char *name, char *buf, size_t digits)
{
    char tmp[8];
    int r = read_attr(root_fd, port, name, tmp, digits + 2);
    if (r >= 0 && !lower_hex(tmp, digits))
        r = -EINVAL;
    if (r >= 0)
        memcpy(buf, tmp, digits + 1);
    return r;
}

/* busnum or devnum: decimal in [1, max]. */
static int read_num(int root_fd, const char *port, const char *name, int max, int *ret)
{
    char path[160];
    long long v;
    (void)snprintf(path, sizeof(path), DEVICES "/%s/%s", port, name);
    int r = node_sysfs_read_int(root_fd, path, 10, &v);
    if (r == 0 && (v < 1 || v > max))
        r = -ERANGE;
    if (r == 0)
        *ret = (int)v;
    return r;
}

/* The identity: idVendor, idProduct, busnum, devnum. Returns 0, or -errno with `why`. */
static int read_identity(int root_fd, struct node_usb_dev *out, char *why, size_t size)
{
    const char *what = "idVendor";
    int r = read_hex(root_fd, out->port_path, what, out->vendor_id, 4);
    if (r >= 0) {
        what = "idProduct";
        r = read_hex(root_fd, out->port_path, what, out->product_id, 4);
    }
    if (r >= 0) {
        what = "busnum";
        r = read_num(root_fd, out->port_path, what, BUSNUM_MAX, &out->busnum);
    }
    if (r >= 0) {
        what = "devnum";
        r = read_num(root_fd, out->port_path, what, DEVNUM_MAX, &out->devnum);
    }
    if (r < 0) {
        (void)snprintf(why, size, "%s: %s", what, trouble(r));
        return r;
    }
    (void)snprintf(out->dev_path, sizeof(out->dev_path), "/dev/bus/usb/%03d/%03d", out->busnum,
                   out->devnum);
    return 0;
}

/* The component of the device's link before the last "usbN": the host controller. */
static void read_pci_address(int root_fd, struct node_usb_dev *out)
{
    char path[80], target[512];
    (void)snprintf(path, sizeof(path), DEVICES "/%s", out->port_path);
    int r = node_sysfs_read_link_target(root_fd, path, target, sizeof(target));
    if (r < 0) {
        add_problem(out, "link", r);
        return;
    }
    const char *prev = NULL, *prev_end = NULL, *found = NULL, *found_end = NULL;
    for (const char *c = target; *c;) {
        const char *end = c + strcspn(c, "/");
        size_t len = (size_t)(end - c);
        if (len > 3 && strncmp(c, "usb", 3) == 0 && strspn(c + 3, "0123456789") == len - 3) {
            found = prev;
            found_end = prev_end;
        }
        prev = c;
        prev_end = end;
        c = *end ? end + 1 : end;
    }
    if (found && is_pci_address(found, (size_t)(found_end - found)))
        memcpy(out->pci_address, found, (size_t)(found_end - found));
}

/* speed: "1.5", "12", "480", "5000", ...: digits and dots; the kernel says "unknown" for a
 * device whose speed it does not know (USB_SPEED_UNKNOWN), which is not a problem. */
static void read_speed(int root_fd, struct node_usb_dev *out)
{
    int r = read_attr(root_fd, out->port_path, "speed", out->speed, sizeof(out->speed));
    if (r > 0 && strcmp(out->speed, "unknown") == 0)
        r = -ENOENT;
    else if (r == 0 || (r > 0 && strspn(out->speed, "0123456789.") != (size_t)r))
        r = -EINVAL;
    if (r < 0) {
        out->speed[0] = '\0';
        if (r != -ENOENT)
            add_problem(out, "speed", r);
    }
}

/* Whether `name` is an interface of device `port`: "<port>:<cfg>.<if>". */
static bool is_interface(const char *name, const char *port)
{
    size_t plen = strlen(port);
    if (strlen(name) > 64 || strncmp(name, port, plen) != 0 || name[plen] != ':')
        return false;
    const char *p = name + plen + 1;
    size_t cfg = run_of(p, isdigit);
    if (cfg == 0 || p[cfg] != '.')
        return false;
    size_t ifn = run_of(p + cfg + 1, isdigit);
    return ifn > 0 && p[cfg + 1 + ifn] == '\0';
}

/* Calls `fn(root_fd, interface, driver, arg)` for each interface "<port>:<cfg>.<if>" of device
 * `port_path` (`driver` "" when it has none) and returns the sum of what it returned, or -errno
 * when the device's directory cannot be listed. */
static int each_interface(int root_fd, const char *port_path,
                          int (*fn)(int root_fd, const char *iface, const char *driver, void *arg),
                          void *arg)
{
    char path[80], **names = NULL;
    size_t n = 0;
    if (strlen(port_path) >= NODE_USB_PORT_PATH_SIZE || strchr(port_path, '/'))
        return -EINVAL;
    (void)snprintf(path, sizeof(path), DEVICES "/%s", port_path);
    int r = node_sysfs_list(root_fd, path, &names, &n);
    if (r < 0)
        return r;
    int sum = 0;
    for (size_t i = 0; i < n; i++) {
        char link[96], name[64] = "";
        if (!is_interface(names[i], port_path))
            continue;
        (void)snprintf(link, sizeof(link), "%s/%s/driver", path, names[i]);
        if (node_sysfs_read_link(root_fd, link, name, sizeof(name)) <= 0)
            name[0] = '\0';
        sum += fn(root_fd, names[i], name, arg);
    }
    node_sysfs_names_free(names);
    return sum;
}

static int bound_to(int root_fd, const char *iface, const char *driver, void *arg)
{
    (void)root_fd;
    (void)iface;
    return driver[0] && strcmp(driver, arg) == 0;
}

int node_usb_interfaces_bound(int root_fd, const char *port_path, const char *driver)
{
    return each_interface(root_fd, port_path, bound_to, (void *)driver);
}

/* An interface with no driver is probed (one bound, usbfs too, is a program's or the host's). */
static int probe_unbound(int root_fd, const char *iface, const char *driver, void *arg)
{
    (void)arg;
    return !driver[0] && node_sysfs_write(root_fd, "bus/usb/drivers_probe", iface) == 0;
}

int node_usb_probe_unbound(int root_fd, const char *port_path)
{
    return each_interface(root_fd, port_path, probe_unbound, NULL);
}

/* The first interface "<port>:<cfg>.<if>" with a class; "" when none. */
static void interface_class(int root_fd, struct node_usb_dev *out)
{
    char path[80], **names = NULL;
    size_t n = 0;
    (void)snprintf(path, sizeof(path), DEVICES "/%s", out->port_path);
    int r = node_sysfs_list(root_fd, path, &names, &n);
    if (r < 0) {
        add_problem(out, "interfaces", r);
        return;
    }
    for (size_t i = 0; i < n && !out->class_code[0]; i++) {
        if (!is_interface(names[i], out->port_path))
            continue;
        char attr[96];
        (void)snprintf(attr, sizeof(attr), "%s/bInterfaceClass", names[i]);
        if (read_hex(root_fd, out->port_path, attr, out->class_code, 2) < 0)
            out->class_code[0] = '\0';
    }
    node_sysfs_names_free(names);
}

static void read_class(int root_fd, struct node_usb_dev *out)
{
    int r = read_hex(root_fd, out->port_path, "bDeviceClass", out->class_code, 2);
    if (r < 0) {
        out->class_code[0] = '\0';
        if (r != -ENOENT)
            add_problem(out, "bDeviceClass", r);
        return;
    }
    if (strcmp(out->class_code, "00") == 0) {
        out->class_code[0] = '\0';
        interface_class(root_fd, out);
    }
}

/* An optional string descriptor: "" when absent, trimmed of white space at both ends. */
static void read_string(int root_fd, struct node_usb_dev *out, const char *name, char *buf,
                        size_t size)
{
    int r = read_attr(root_fd, out->port_path, name, buf, size);
    if (r < 0) {
        buf[0] = '\0';
        if (r != -ENOENT)
            add_problem(out, name, r);
        return;
    }
    size_t len = (size_t)r, start = 0;
    while (len > 0 && isspace((unsigned char)buf[len - 1]))
        len--;
    while (start < len && isspace((unsigned char)buf[start]))
        start++;
    memmove(buf, buf + start, len - start);
    buf[len - start] = '\0';
}

/* Takes entry `name` of bus/usb/devices into the next slot of s->res.devs, or skips it. */
static int take_entry(struct scan *s, const char *name)
{
    char path[96], why[192];
    if (strncmp(name, "usb", 3) == 0 || strchr(name, ':'))
        return 0; /* root hubs and interfaces */
    if (!is_port_path(name))
        return skip(s, name, "the name is not a USB port path");
    (void)snprintf(path, sizeof(path), DEVICES "/%s", name);
    int r = node_sysfs_check_dir(s->root_fd, path);
    if (r < 0) {
        (void)snprintf(why, sizeof(why), "%s: %s", path,
                       node_sysfs_trouble(r, "leads nowhere (a dangling link)"));
        return skip(s, name, why);
    }
    struct node_usb_dev *out = &s->res.devs[s->res.n_devs];
    memset(out, 0, sizeof(*out));
    memcpy(out->port_path, name, strlen(name) + 1);
    if (read_identity(s->root_fd, out, why, sizeof(why)) < 0)
        return skip(s, name, why);
    read_pci_address(s->root_fd, out);
    read_speed(s->root_fd, out);
    read_class(s->root_fd, out);
    read_string(s->root_fd, out, "product", out->product, sizeof(out->product));
    read_string(s->root_fd, out, "manufacturer", out->manufacturer, sizeof(out->manufacturer));
    read_string(s->root_fd, out, "serial", out->serial, sizeof(out->serial));
    s->res.n_devs++;
    return 0;
}

/* Lists and reads bus/usb/devices into s->res. */
static int run_scan(struct scan *s, struct err *ret_err)
{
    char **names = NULL;
    size_t n = 0;
    int r = node_sysfs_list(s->root_fd, DEVICES, &names, &n);
    if (r == -ENOENT)
        return 0; /* no USB at all */
    if (r < 0)
        return err_set(ret_err, r, "cannot list " DEVICES ": %s", strerror(-r));
    if (n > 0) {
        s->res.devs = calloc(n, sizeof(*s->res.devs));
        if (!s->res.devs)
            r = -ENOMEM;
    }
    for (size_t i = 0; r == 0 && i < n; i++)
        r = take_entry(s, names[i]);
    node_sysfs_names_free(names);
    if (r < 0)
        return err_set(ret_err, r, "out of memory");
    if (s->res.n_devs == 0) {
        free(s->res.devs);
        s->res.devs = NULL;
    }
    return 0;
}

int node_usb_scan(int root_fd, struct node_usb_scan_result *ret, struct err *ret_err)
{
    struct scan s = {.root_fd = root_fd};
    int r = run_scan(&s, ret_err);
    if (r < 0) {
        node_usb_scan_result_done(&s.res);
        return r;
    }
    *ret = s.res;
    return 0;
}

void node_usb_scan_result_done(struct node_usb_scan_result *r)
{
    if (!r)
        return;
    free(r->devs);
    free(r->skipped);
    memset(r, 0, sizeof(*r));
}
