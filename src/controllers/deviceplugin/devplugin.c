/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/deviceplugin/devplugin.c - the device plugins' answers, pure (see devplugin.h).
 */
#include "controllers/deviceplugin/devplugin.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/un.h>

#define SOCKET_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

int devplugin_env_name(const char *prefix, const char *resource, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s_%s", prefix, resource);
    if (n < 0 || (size_t)n >= size)
        return -ENAMETOOLONG;
    for (char *p = buf + strlen(prefix) + 1; *p; p++) {
        int c = (unsigned char)*p;
        *p = (char)(c == '/' || c == '.' ? '_' : toupper(c));
    }
    return 0;
}

/* FNV-1a, for a short stable suffix of long resource names. */
static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

int devplugin_socket_name(const char *dir, const char *resource, char *buf, size_t size,
                          struct err *ret_err)
{
    size_t room = SOCKET_PATH_MAX - strlen(dir) - 1; /* what the name may take */
    size_t fixed = strlen(DEVPLUGIN_SOCKET_PREFIX) + strlen(".sock");
    size_t want = fixed + strlen(resource);
    if (strlen(dir) + 1 >= SOCKET_PATH_MAX || room < fixed + 9)
        return err_set(ret_err, -ENAMETOOLONG,
                       "no plugin socket fits in %s: a unix socket address holds %zu bytes; use "
                       "a shorter --kubelet-dir",
                       dir, SOCKET_PATH_MAX);
    int n = want <= room ? snprintf(buf, size, DEVPLUGIN_SOCKET_PREFIX "%s.sock", resource)
                         : snprintf(buf, size, DEVPLUGIN_SOCKET_PREFIX "%.*s-%08x.sock",
                                    (int)(room - fixed - 9), resource, fnv1a(resource));
    if (n < 0 || (size_t)n >= size)
        return err_set(ret_err, -ENAMETOOLONG, "socket name for %s is too long", resource);
    for (char *p = buf; *p; p++)
        if (*p == '/')
            *p = '_';
    return 0;
}

static const struct devplugin_dev *find(const struct devplugin_dev *devs, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(devs[i].id, id) == 0)
            return &devs[i];
    return NULL;
}

/* Adds `path` to the device nodes unless it is there. */
static int add_path(struct devplugin_alloc *a, const char *path)
{
    for (size_t i = 0; i < a->n_paths; i++)
        if (strcmp(a->paths[i], path) == 0)
            return 0;
    char(*p)[64] = realloc(a->paths, (a->n_paths + 1) * sizeof(*a->paths));
    if (!p)
        return -ENOMEM;
    a->paths = p;
    (void)snprintf(a->paths[a->n_paths++], sizeof(*a->paths), "%s", path);
    return 0;
}

static int add_device(struct devplugin_alloc *a, const struct devplugin_dev *d)
{
    char path[64];
    int r = buf_printf(&a->env_value, "%s", a->env_value.len ? "," : "");
    if (d->kind == DEVPLUGIN_USB) {
        if (r == 0)
            r = buf_printf(&a->env_value, "%d:%d", d->busnum, d->devnum);
        return r < 0 ? r : add_path(a, d->dev_path);
    }
    if (r == 0) /* a PCI address, or an mdev's UUID */
        r = buf_printf(&a->env_value, "%s", d->kind == DEVPLUGIN_MDEV ? d->id : d->address);
    if (r == 0)
        r = add_path(a, "/dev/vfio/vfio");
    (void)snprintf(path, sizeof(path), "/dev/vfio/%d", d->iommu_group);
    if (r == 0)
        r = add_path(a, path);
    if (r == 0 && d->vfio_cdev && d->vfio_cdev[0]) {
        (void)snprintf(path, sizeof(path), "/dev/vfio/devices/%s", d->vfio_cdev);
        r = add_path(a, path);
    }
    return r;
}

static const char *env_prefix(enum devplugin_kind kind)
{
    switch (kind) {
    case DEVPLUGIN_USB:
        return "USB_RESOURCE";
    case DEVPLUGIN_MDEV:
        return "MDEV_PCI_RESOURCE"; /* KubeVirt's v1.MDevResourcePrefix */
    case DEVPLUGIN_PCI:
    default:
        return "PCI_RESOURCE";
    }
}

int devplugin_allocate(const char *resource, const struct devplugin_dev *devs, size_t n,
                       const char *const *ids, size_t n_ids, struct devplugin_alloc *ret,
                       struct err *ret_err)
{
    *ret = (struct devplugin_alloc){0};
    buf_init(&ret->env_value, (size_t)64 * 1024);
    int r = 0;
    for (size_t i = 0; r == 0 && i < n_ids; i++) {
        const struct devplugin_dev *d = find(devs, n, ids[i]);
        if (!d)
            r = err_set(ret_err, -ENOENT, "device %s is not offered as %s on this node", ids[i],
                        resource);
        else if (i == 0 && devplugin_env_name(env_prefix(d->kind), resource, ret->env_key,
                                              sizeof(ret->env_key)) < 0)
            r = err_set(ret_err, -ENAMETOOLONG, "resource name %s is too long", resource);
        else if ((r = add_device(ret, d)) < 0)
            (void)err_set(ret_err, r, "cannot build the answer: %s", strerror(-r));
    }
    if (r == 0 && n_ids == 0)
        r = err_set(ret_err, -EINVAL, "no device IDs requested for %s", resource);
    if (r < 0)
        devplugin_alloc_done(ret);
    return r;
}

void devplugin_alloc_done(struct devplugin_alloc *a)
{
    buf_free(&a->env_value);
    free(a->paths);
    a->paths = NULL;
    a->n_paths = 0;
}

/* --- preferred allocation ----------------------------------------------------------------------
 */

struct choice {
    const char **out;
    size_t n, size;
};

static bool chosen(const struct choice *c, const char *id)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->out[i], id) == 0)
            return true;
    return false;
}

static void take(struct choice *c, const char *id)
{
    if (c->n < c->size && !chosen(c, id))
        c->out[c->n++] = id;
}

/* Adds the available devices that share an IOMMU group with a chosen one. */
static void take_groups(struct choice *c, const struct devplugin_dev *devs, size_t n,
                        const char *const *avail, size_t n_avail)
{
    for (size_t i = 0; i < c->n && c->n < c->size; i++) {
        const struct devplugin_dev *d = find(devs, n, c->out[i]);
        for (size_t j = 0; d && d->kind == DEVPLUGIN_PCI && j < n_avail; j++) {
            const struct devplugin_dev *o = find(devs, n, avail[j]);
            if (o && o->kind == DEVPLUGIN_PCI && o->iommu_group == d->iommu_group)
                take(c, avail[j]);
        }
    }
}

/* The NUMA node to fill from: the one most chosen devices are on, else the one with the most
 * available devices; -1 when none is known. */
static int numa_target(const struct choice *c, const struct devplugin_dev *devs, size_t n,
                       const char *const *avail, size_t n_avail)
{
    int best = -1, best_count = 0;
    for (size_t pass = 0; pass < 2 && best < 0; pass++) {
        size_t m = pass == 0 ? c->n : n_avail;
        for (size_t i = 0; i < m; i++) {
            const struct devplugin_dev *d = find(devs, n, pass == 0 ? c->out[i] : avail[i]);
            int node = d ? d->numa_node : -1, count = 0;
            for (size_t j = 0; node >= 0 && j < m; j++) {
                const struct devplugin_dev *o = find(devs, n, pass == 0 ? c->out[j] : avail[j]);
                count += o && o->numa_node == node;
            }
            if (node >= 0 && (count > best_count || (count == best_count && node < best))) {
                best = node;
                best_count = count;
            }
        }
    }
    return best;
}

size_t devplugin_prefer(const struct devplugin_dev *devs, size_t n, const char *const *available,
                        size_t n_available, const char *const *must, size_t n_must, size_t size,
                        const char **out)
{
    struct choice c = {.out = out, .size = size};
    for (size_t i = 0; i < n_must; i++)
        take(&c, must[i]);
    take_groups(&c, devs, n, available, n_available);
    int node = numa_target(&c, devs, n, available, n_available);
    for (size_t i = 0; node >= 0 && i < n_available && c.n < c.size; i++) {
        const struct devplugin_dev *d = find(devs, n, available[i]);
        if (d && d->numa_node == node) {
            take(&c, available[i]);
            take_groups(&c, devs, n, available, n_available);
        }
    }
    for (size_t i = 0; i < n_available && c.n < c.size; i++)
        take(&c, available[i]);
    return c.n;
}
