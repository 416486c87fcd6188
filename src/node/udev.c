/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/udev.c - kernel device events through a libudev monitor, and libudev's list of the USB
 * devices (see udev.h).
 */
#include "node/udev.h"

#include <errno.h>
#include <libudev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/sysfs.h"

/* A burst of uevents (a driver probe of many functions, an SR-IOV change creating 64 VFs)
 * must not overflow the socket; the kernel's default is ~200 KiB. Only raised as far as
 * rmem_max allows unless we have CAP_NET_ADMIN (libudev then uses SO_RCVBUFFORCE). */
#define RECEIVE_BUFFER (4 * 1024 * 1024)

struct node_udev {
    struct udev *udev;
    struct udev_monitor *mon;
};

struct node_udev *node_udev_free(struct node_udev *u)
{
    if (!u)
        return NULL;
    if (u->mon)
        udev_monitor_unref(u->mon);
    if (u->udev)
        udev_unref(u->udev);
    free(u);
    return NULL;
}

int node_udev_source_from_string(const char *s, enum node_udev_source *ret)
{
    if (strcmp(s, "kernel") == 0)
        *ret = NODE_UDEV_KERNEL;
    else if (strcmp(s, "udev") == 0)
        *ret = NODE_UDEV_UDEV;
    else
        return -EINVAL;
    return 0;
}

static int open_monitor(struct node_udev *u, enum node_udev_source source,
                        const char *const *subsystems)
{
    errno = 0;
    u->udev = udev_new();
    if (!u->udev)
        return errno ? -errno : -ENOMEM;
    u->mon = udev_monitor_new_from_netlink(u->udev, source == NODE_UDEV_UDEV ? "udev" : "kernel");
    if (!u->mon)
        return errno ? -errno : -EPROTONOSUPPORT;
    for (const char *const *s = subsystems; s && *s; s++) {
        int r = udev_monitor_filter_add_match_subsystem_devtype(u->mon, *s, NULL);
        if (r < 0)
            return r;
    }
    (void)udev_monitor_set_receive_buffer_size(u->mon, RECEIVE_BUFFER); /* best effort */
    return udev_monitor_enable_receiving(u->mon);
}

int node_udev_new(enum node_udev_source source, const char *const *subsystems,
                  struct node_udev **ret)
{
    struct node_udev *u = calloc(1, sizeof(*u));
    if (!u)
        return -ENOMEM;
    int r = open_monitor(u, source, subsystems);
    if (r < 0) {
        node_udev_free(u);
        return r;
    }
    *ret = u;
    return 0;
}

int node_udev_fd(const struct node_udev *u)
{
    return udev_monitor_get_fd(u->mon);
}

static void copy(char *dst, size_t size, const char *src)
{
    (void)snprintf(dst, size, "%s", src ? src : "");
}

/* Messages skipped in one call at most; the fd stays readable, so the caller comes back. */
#define MAX_SKIPPED 64

int node_udev_receive(struct node_udev *u, struct node_uevent *ret)
{
    for (int skipped = 0; skipped < MAX_SKIPPED; skipped++) {
        errno = 0;
        struct udev_device *d = udev_monitor_receive_device(u->mon);
        if (!d) {
            int e = errno;
            if (e == 0 || e == EAGAIN || e == EWOULDBLOCK)
                return 0;
            /* Only a lost-events overflow and a broken socket end the stream. Anything else
             * is one message libudev could not take (a malformed one fails with whatever its
             * parser said: EINVAL, ENODEV, ENOMEM, ...): it was read off the socket, so the
             * next one comes next. */
            if (e == ENOBUFS || e == EBADF || e == ENOTSOCK || e == EFAULT)
                return -e;
            continue;
        }
        copy(ret->action, sizeof(ret->action), udev_device_get_action(d));
        copy(ret->subsystem, sizeof(ret->subsystem), udev_device_get_subsystem(d));
        copy(ret->sysname, sizeof(ret->sysname), udev_device_get_sysname(d));
        copy(ret->driver, sizeof(ret->driver), udev_device_get_driver(d));
        copy(ret->mdev_state, sizeof(ret->mdev_state),
             udev_device_get_property_value(d, "MDEV_STATE"));
        udev_device_unref(d);
        return 1;
    }
    return 0;
}

/* ---- enumeration ----------------------------------------------------------------------------- */

/* A growing NULL-terminated list of names. */
struct names {
    char **v;
    size_t n, alloc;
};

static int names_add(struct names *l, const char *name)
{
    if (l->n + 1 >= l->alloc) {
        size_t n = l->alloc ? l->alloc * 2 : 16;
        char **p = reallocarray(l->v, n, sizeof(*p));
        if (!p)
            return -ENOMEM;
        l->v = p;
        l->alloc = n;
    }
    l->v[l->n] = strdup(name);
    if (!l->v[l->n])
        return -ENOMEM;
    l->v[++l->n] = NULL;
    return 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds the sysname (the syspath's last component) of every entry that is not a root hub. */
static int collect(struct udev_enumerate *e, struct names *l)
{
    struct udev_list_entry *entry;
    udev_list_entry_foreach(entry, udev_enumerate_get_list_entry(e))
    {
        const char *syspath = udev_list_entry_get_name(entry);
        const char *slash = syspath ? strrchr(syspath, '/') : NULL;
        const char *name = slash ? slash + 1 : syspath;
        if (!name || !name[0] || strncmp(name, "usb", 3) == 0)
            continue;
        int r = names_add(l, name);
        if (r < 0)
            return r;
    }
    return 0;
}

static int enumerate_usb(struct udev *udev, struct names *l)
{
    errno = 0;
    struct udev_enumerate *e = udev_enumerate_new(udev);
    if (!e)
        return errno ? -errno : -ENOMEM;
    int r = udev_enumerate_add_match_subsystem(e, "usb");
    if (r >= 0)
        r = udev_enumerate_add_match_property(e, "DEVTYPE", "usb_device");
    if (r >= 0)
        r = udev_enumerate_scan_devices(e);
    if (r >= 0)
        r = collect(e, l);
    udev_enumerate_unref(e);
    return r < 0 ? r : 0;
}

int node_udev_list_usb(char ***ret_names, size_t *ret_count)
{
    struct names l = {0};
    errno = 0;
    struct udev *udev = udev_new();
    if (!udev)
        return errno ? -errno : -ENOMEM;
    int r = enumerate_usb(udev, &l);
    udev_unref(udev);
    if (r == 0 && !l.v && !(l.v = calloc(1, sizeof(*l.v)))) /* an empty list has its NULL */
        r = -ENOMEM;
    if (r < 0) {
        node_sysfs_names_free(l.v);
        return r;
    }
    if (l.n > 1)
        qsort(l.v, l.n, sizeof(*l.v), compare_names);
    *ret_names = l.v;
    *ret_count = l.n;
    return 0;
}
