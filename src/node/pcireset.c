/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/pcireset.c - reset and verify a PCI device on release (see pcireset.h). Blocking (a
 * reset runs the kernel's reset methods); no logging.
 */
#include "node/pcireset.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "node/pci.h"
#include "node/sysfs.h"

static int dev_path(char *out, size_t size, const char *address, const char *attr)
{
    if (strlen(address) >= NODE_PCI_ADDRESS_SIZE || strchr(address, '/'))
        return -EINVAL;
    (void)snprintf(out, size, "bus/pci/devices/%s/%s", address, attr);
    return 0;
}

int node_pcireset_methods(int root_fd, const char *address, char *buf, size_t size)
{
    char path[128];
    int r = dev_path(path, sizeof(path), address, "reset_method");
    if (r == 0)
        r = node_sysfs_read(root_fd, path, buf, size);
    return r < 0 ? r : 0;
}

bool node_pcireset_can_reset(int root_fd, const char *address)
{
    char path[128];
    int fd;
    if (dev_path(path, sizeof(path), address, "") < 0 ||
        (fd = node_sysfs_open_dir(root_fd, path)) < 0)
        return false;
    bool ok = faccessat(fd, "reset", F_OK, 0) == 0;
    close(fd);
    return ok;
}

int node_pcireset_reset(int root_fd, const char *address)
{
    char path[128];
    int r = dev_path(path, sizeof(path), address, "reset");
    return r < 0 ? r : node_sysfs_write(root_fd, path, "1");
}

int node_pcireset_live_ids(int root_fd, const char *address, uint16_t *ret_vendor,
                           uint16_t *ret_device)
{
    char path[128];
    unsigned char b[4];
    int r = dev_path(path, sizeof(path), address, "");
    int dfd = r < 0 ? r : node_sysfs_open_dir(root_fd, path);
    if (dfd < 0)
        return dfd;
    int fd = openat(dfd, "config", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    r = fd < 0 ? -errno : 0;
    close(dfd);
    if (r < 0)
        return r;
    ssize_t n;
    do
        n = pread(fd, b, sizeof(b), 0);
    while (n < 0 && errno == EINTR);
    r = n < 0 ? -errno : n < (ssize_t)sizeof(b) ? -EIO : 0;
    close(fd);
    if (r < 0)
        return r;
    *ret_vendor = (uint16_t)(b[0] | b[1] << 8);
    *ret_device = (uint16_t)(b[2] | b[3] << 8);
    return 0;
}

static int read_id(int root_fd, const char *address, const char *attr, uint16_t *ret)
{
    char path[128];
    long long v;
    int r = dev_path(path, sizeof(path), address, attr);
    if (r == 0)
        r = node_sysfs_read_int(root_fd, path, 16, &v);
    if (r == 0 && (v < 0 || v > 0xffff))
        r = -ERANGE;
    if (r == 0)
        *ret = (uint16_t)v;
    return r;
}

int node_pcireset_probe_ids(int root_fd, const char *address, uint16_t *ret_vendor,
                            uint16_t *ret_device)
{
    uint16_t v = 0, d = 0; /* (set when r == 0; the analyzer cannot tell) */
    int r = read_id(root_fd, address, "vendor", &v);
    if (r == 0)
        r = read_id(root_fd, address, "device", &d);
    if (r < 0)
        return r;
    *ret_vendor = v;
    *ret_device = d;
    return 0;
}

/* --- the verdict (pure) ----------------------------------------------------------------------- */

#define WHAT_TO_DO                                                                                 \
    "; the device needs a fix on the host (a host reboot or power cycle, a firmware update, "      \
    "reseating the card) before it is used again"

/* What the release did about the reset: "reset by the kernel (reset_method: flr pm)", "not
 * reset: ...", "the reset failed: ...". */
static void say_reset(const struct node_pcireset_facts *f, char *out, size_t size)
{
    const char *m = f->methods ? f->methods : "";
    const char *list = f->methods ? m : "not listed by this kernel";
    if (!f->reset_tried)
        (void)snprintf(out, size, "not reset: %s", f->skipped ? f->skipped : "no reset method");
    else if (f->reset_error == 0)
        (void)snprintf(out, size, "reset by the kernel (reset_method: %s)", list);
    else
        (void)snprintf(out, size, "its reset (reset_method: %s) failed: %s%s", list,
                       strerror(-f->reset_error),
                       f->reset_error == -ENOTTY ? " (no method worked, or the device was not "
                                                   "ready after it)"
                                                 : "");
}

static void say_driver(const struct node_pcireset_facts *f, char *out, size_t size)
{
    const char *orig = f->original ? f->original : "", *drv = f->driver ? f->driver : "";
    if (f->restore_error == -EIO)
        (void)snprintf(out, size, "its driver \"%s\" did not take it back (driver now: %s)", orig,
                       drv[0] ? drv : "none");
    else if (drv[0])
        (void)snprintf(out, size, "back on driver \"%s\"", drv);
    else
        (void)snprintf(out, size, "left without a driver%s", orig[0] ? "" : " (it had none)");
}

static void first_method(const struct node_pcireset_facts *f, char *out, size_t size)
{
    const char *m = f->reset_tried && f->methods ? f->methods : "";
    size_t n = strcspn(m, " \n");
    if (n >= size)
        n = size - 1;
    memcpy(out, m, n);
    out[n] = '\0';
    if (f->reset_tried && !f->methods)
        (void)snprintf(out, size, "default");
}

void node_pcireset_judge(const struct node_pcireset_facts *f, struct node_pcireset_verdict *ret)
{
    char reset[320], driver[200], ids[200];
    bool ids_ok = f->ids_error == 0;
    bool dead = ids_ok && f->live_vendor == 0xffff && f->live_device == 0xffff;
    bool other = ids_ok && !dead && (f->live_vendor != f->vendor || f->live_device != f->device);
    *ret = (struct node_pcireset_verdict){0};
    first_method(f, ret->method, sizeof(ret->method));
    if (!f->present) {
        (void)snprintf(ret->message, sizeof(ret->message),
                       "device %s is gone from the bus: nothing to verify", f->address);
        (void)snprintf(ret->summary, sizeof(ret->summary), "it is gone from the bus");
        return;
    }
    say_reset(f, reset, sizeof(reset));
    say_driver(f, driver, sizeof(driver));
    if (!ids_ok)
        (void)snprintf(ids, sizeof(ids), "its ids were not verified (config: %s)",
                       strerror(-f->ids_error));
    else if (dead)
        (void)snprintf(ids, sizeof(ids),
                       "it does not respond: its config space reads all ones (ffff:ffff)");
    else if (other)
        (void)snprintf(ids, sizeof(ids),
                       "it answers as %04x:%04x, not as %04x:%04x (what the kernel found at boot)",
                       f->live_vendor, f->live_device, f->vendor, f->device);
    else
        (void)snprintf(ids, sizeof(ids), "it answers as %04x:%04x", f->live_vendor, f->live_device);
    ret->reason = dead                               ? NODE_PCIRESET_NOT_RESPONDING
                  : other                            ? NODE_PCIRESET_ID_CHANGED
                  : f->reset_tried && f->reset_error ? NODE_PCIRESET_RESET_FAILED
                  : f->restore_error == -EIO         ? NODE_PCIRESET_DRIVER_FAILED
                                                     : NULL;
    (void)snprintf(ret->message, sizeof(ret->message), "device %s %s; %s; %s%s", f->address, reset,
                   driver, ids, ret->reason ? WHAT_TO_DO : "");
    (void)snprintf(ret->summary, sizeof(ret->summary), "%s; %s", reset, ids);
}
