/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/vfio.c - vfio-pci binding and restoring, one observed step at a time, and the IOMMU
 * group checks (see vfio.h). Blocking (sysfs writes run driver remove and probe); no logging.
 */
#include "node/vfio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/holder.h"
#include "node/sysfs.h"

#define MAX_STEPS 8 /* more than any path needs (restore: clear, unbind, probe, bind) */

static void dev_path(char *out, size_t size, const char *address, const char *attr)
{
    (void)snprintf(out, size, "bus/pci/devices/%s/%s", address, attr);
}

static int read_group(int root_fd, const char *address, int *ret)
{
    char path[128], name[32];
    long long g;
    dev_path(path, sizeof(path), address, "iommu_group");
    int r = node_sysfs_read_link_in(root_fd, path, "kernel/iommu_groups", name, sizeof(name));
    *ret = -1;
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    if (node_sysfs_parse_int(name, 10, &g) < 0 || g < 0 || g > 0x7fffffff)
        return -EINVAL;
    *ret = (int)g;
    return 0;
}

/* The driver of `address`: "" when its link is absent or does not lead to a directory of
 * bus/pci/drivers (dangling, a loop, elsewhere). */
static int read_driver(int root_fd, const char *address, char *buf, size_t size)
{
    char path[128];
    dev_path(path, sizeof(path), address, "driver");
    int r = node_sysfs_read_link_in(root_fd, path, "bus/pci/drivers", buf, size);
    if (r == -ENOENT || r == -EXDEV || r == -ELOOP || r == -ENOTDIR)
        return 0;
    return r < 0 ? r : 0;
}

int node_vfio_observe(int root_fd, const char *address, struct node_vfio_dev *ret)
{
    char path[128];
    long long cls;
    struct node_vfio_dev d = {.iommu_group = -1};
    if (strlen(address) >= sizeof(d.address) || strchr(address, '/'))
        return -EINVAL;
    memcpy(d.address, address, strlen(address) + 1);
    dev_path(path, sizeof(path), address, "class");
    int r = node_sysfs_read_int(root_fd, path, 16, &cls);
    if (r == -ENOENT) {
        *ret = d;
        return 0;
    }
    if (r < 0)
        return r;
    d.present = true;
    d.class_id = (uint32_t)cls;
    r = read_driver(root_fd, address, d.driver, sizeof(d.driver));
    if (r < 0)
        return r;
    dev_path(path, sizeof(path), address, "driver_override");
    r = node_sysfs_read(root_fd, path, d.override, sizeof(d.override));
    if (r < 0 && r != -ENOENT)
        return r;
    if (strcmp(d.override, "(null)") == 0)
        d.override[0] = '\0';
    r = read_group(root_fd, address, &d.iommu_group);
    if (r < 0)
        return r;
    *ret = d;
    return 0;
}

static bool tried_step(unsigned tried, enum node_vfio_step s)
{
    return tried & (1u << s);
}

static enum node_vfio_step once(unsigned tried, enum node_vfio_step s)
{
    return tried_step(tried, s) ? NODE_VFIO_STUCK : s;
}

static enum node_vfio_step next_bind(const struct node_vfio_dev *d, unsigned tried)
{
    bool on_vfio = strcmp(d->driver, NODE_VFIO_DRIVER) == 0;
    bool override = strcmp(d->override, NODE_VFIO_DRIVER) == 0;
    if (on_vfio) /* keep the override too, so a re-probe lands on vfio-pci again */
        return override || tried_step(tried, NODE_VFIO_SET_OVERRIDE) ? NODE_VFIO_DONE
                                                                     : NODE_VFIO_SET_OVERRIDE;
    if (!override)
        return once(tried, NODE_VFIO_SET_OVERRIDE);
    if (d->driver[0])
        return once(tried, NODE_VFIO_UNBIND);
    return once(tried, NODE_VFIO_PROBE);
}

/* Back to vfio-pci, the driver the device had before the claim (vfio-pci.ids=, or an override
 * the admin wrote): on vfio-pci it stays, its override untouched (the admin's, or the bind's,
 * which only makes a re-probe land where the device is); unbound, by the bind's steps; on a
 * host driver it stays (moving it to vfio-pci takes a claim's checks). */
static enum node_vfio_step next_restore_vfio(const struct node_vfio_dev *d, unsigned tried)
{
    if (d->driver[0])
        return NODE_VFIO_DONE;
    return next_bind(d, tried);
}

static enum node_vfio_step next_restore(const struct node_vfio_dev *d, const char *original,
                                        unsigned tried)
{
    if (strcmp(original, NODE_VFIO_DRIVER) == 0)
        return next_restore_vfio(d, tried);
    if (strcmp(d->override, NODE_VFIO_DRIVER) == 0)
        return once(tried, NODE_VFIO_CLEAR_OVERRIDE);
    if (strcmp(d->driver, NODE_VFIO_DRIVER) == 0)
        return once(tried, NODE_VFIO_UNBIND);
    if (d->driver[0] || !original[0])
        return NODE_VFIO_DONE; /* on a host driver (the original or another one), or none wanted */
    if (!tried_step(tried, NODE_VFIO_PROBE))
        return NODE_VFIO_PROBE;
    return once(tried, NODE_VFIO_BIND_ORIGINAL);
}

enum node_vfio_step node_vfio_next(const struct node_vfio_dev *d, enum node_vfio_goal goal,
                                   const char *original, unsigned tried)
{
    if (!d->present)
        return goal == NODE_VFIO_RESTORE ? NODE_VFIO_DONE : NODE_VFIO_STUCK;
    return goal == NODE_VFIO_BIND ? next_bind(d, tried)
                                  : next_restore(d, original ? original : "", tried);
}

const char *node_vfio_step_name(enum node_vfio_step step)
{
    static const char *const names[] = {
            [NODE_VFIO_DONE] = "done",
            [NODE_VFIO_SET_OVERRIDE] = "set-override",
            [NODE_VFIO_UNBIND] = "unbind",
            [NODE_VFIO_PROBE] = "probe",
            [NODE_VFIO_CLEAR_OVERRIDE] = "clear-override",
            [NODE_VFIO_BIND_ORIGINAL] = "bind-original",
            [NODE_VFIO_STUCK] = "stuck",
    };
    return (unsigned)step < sizeof(names) / sizeof(names[0]) ? names[step] : "?";
}

static bool valid_driver_name(const char *s)
{
    return s[0] && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

int node_vfio_apply(int root_fd, const struct node_vfio_dev *d, enum node_vfio_step step,
                    const char *original)
{
    char path[160];
    switch (step) {
    case NODE_VFIO_SET_OVERRIDE:
        dev_path(path, sizeof(path), d->address, "driver_override");
        return node_sysfs_write(root_fd, path, NODE_VFIO_DRIVER);
    case NODE_VFIO_CLEAR_OVERRIDE:
        dev_path(path, sizeof(path), d->address, "driver_override");
        return node_sysfs_write(root_fd, path, "\n");
    case NODE_VFIO_UNBIND:
        if (!valid_driver_name(d->driver))
            return -EINVAL;
        (void)snprintf(path, sizeof(path), "bus/pci/drivers/%s/unbind", d->driver);
        return node_sysfs_write(root_fd, path, d->address);
    case NODE_VFIO_PROBE:
        return node_sysfs_write(root_fd, "bus/pci/drivers_probe", d->address);
    case NODE_VFIO_BIND_ORIGINAL:
        if (!original || !valid_driver_name(original))
            return -EINVAL;
        (void)snprintf(path, sizeof(path), "bus/pci/drivers/%s/bind", original);
        return node_sysfs_write(root_fd, path, d->address);
    default:
        return -EINVAL;
    }
}

static void describe(const struct node_vfio_dev *d, char *out, size_t size)
{
    (void)snprintf(out, size, "driver=%s driver_override=%s", d->driver[0] ? d->driver : "(none)",
                   d->override[0] ? d->override : "(none)");
}

/* Bind: on vfio-pci. Restore: gone, or on a host driver (the original or another one), or
 * unbound when no driver was wanted; unbound while `original` names one is a restore that did
 * not take effect. Restore to vfio-pci: gone, or on any driver (vfio-pci, or a host driver
 * that took the device meanwhile). */
static bool goal_reached(const struct node_vfio_dev *d, enum node_vfio_goal goal,
                         const char *original)
{
    bool on_vfio = strcmp(d->driver, NODE_VFIO_DRIVER) == 0;
    bool want_vfio = original && strcmp(original, NODE_VFIO_DRIVER) == 0;
    if (goal == NODE_VFIO_BIND)
        return d->present && on_vfio;
    if (want_vfio)
        return !d->present || d->driver[0];
    return !d->present || (!on_vfio && (d->driver[0] || !original || !original[0]));
}

/* Errors a step may meet because the kernel moved first (a driver bound or unbound on its
 * own): observe again and carry on. */
static bool benign(enum node_vfio_step step, int r)
{
    return (step == NODE_VFIO_UNBIND && r == -ENODEV) ||
           (step == NODE_VFIO_BIND_ORIGINAL && r == -EBUSY);
}

/* The error of a convergence that ended on `d` without reaching `goal`. */
static int not_reached(const struct node_vfio_dev *d, const char *goal_name, struct err *ret_err)
{
    char state[160];
    if (!d->present)
        return err_set(ret_err, -ENODEV, "PCI device %s does not exist", d->address);
    describe(d, state, sizeof(state));
    return err_set(ret_err, -EIO, "%s of %s did not take effect: %s", goal_name, d->address, state);
}

int node_vfio_converge(int root_fd, const char *address, enum node_vfio_goal goal,
                       const char *original, node_vfio_step_fn after_step, void *arg,
                       struct node_vfio_dev *ret, struct err *ret_err)
{
    const char *goal_name = goal == NODE_VFIO_BIND ? "bind" : "restore";
    struct node_vfio_dev d;
    char state[160];
    unsigned tried = 0;
    for (int i = 0; i < MAX_STEPS; i++) {
        int r = node_vfio_observe(root_fd, address, &d);
        if (r < 0)
            return err_set(ret_err, r, "cannot read %s in sysfs: %s", address, strerror(-r));
        enum node_vfio_step step = node_vfio_next(&d, goal, original, tried);
        if (step == NODE_VFIO_DONE || step == NODE_VFIO_STUCK) {
            if (!goal_reached(&d, goal, original))
                return not_reached(&d, goal_name, ret_err);
            *ret = d;
            return 0;
        }
        r = node_vfio_apply(root_fd, &d, step, original);
        if (r < 0 && !benign(step, r)) {
            describe(&d, state, sizeof(state));
            return err_set(ret_err, r, "%s of %s: step %s failed: %s (%s)", goal_name, address,
                           node_vfio_step_name(step), strerror(-r), state);
        }
        tried |= 1u << step;
        if (after_step)
            after_step(goal_name, node_vfio_step_name(step), arg);
    }
    return err_set(ret_err, -EIO, "%s of %s did not converge in %d steps", goal_name, address,
                   MAX_STEPS);
}

int node_vfio_group_members(int root_fd, int group, struct node_vfio_dev **ret, size_t *ret_n)
{
    char path[96], **names = NULL;
    size_t n = 0;
    (void)snprintf(path, sizeof(path), "kernel/iommu_groups/%d/devices", group);
    int r = node_sysfs_list(root_fd, path, &names, &n);
    if (r < 0)
        return r;
    struct node_vfio_dev *devs = calloc(n ? n : 1, sizeof(*devs));
    if (!devs) {
        node_sysfs_names_free(names);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n && r == 0; i++)
        r = node_vfio_observe(root_fd, names[i], &devs[i]);
    node_sysfs_names_free(names);
    if (r < 0) {
        free(devs);
        return r;
    }
    *ret = devs;
    *ret_n = n;
    return 0;
}

bool node_vfio_member_blocks(const struct node_vfio_dev *member, const char *address,
                             bool (*claimed)(const char *address, void *arg), void *arg)
{
    if (!member->present || strcmp(member->address, address) == 0)
        return false;
    if ((member->class_id >> 8) == 0x0604 || strcmp(member->driver, "pcieport") == 0)
        return false; /* bridges cannot go to vfio-pci and do not need to */
    if (strcmp(member->driver, NODE_VFIO_DRIVER) == 0)
        return false;
    return !(claimed && claimed(member->address, arg));
}

const char *node_vfio_platform_class(uint32_t class_id)
{
    switch (class_id >> 8) {
    case 0x0600:
        return "a host bridge (the PCI root complex)";
    case 0x0601:
        return "an ISA/LPC bridge (the platform's legacy devices, TPM and firmware flash hang off "
               "it)";
    case 0x0c05:
        return "an SMBus controller (sensors and memory SPD hang off it)";
    default:
        return NULL;
    }
}

int node_vfio_member_essential(int root_fd, const struct node_vfio_dev *m,
                               const struct node_hostuse *use, struct err *ret_err)
{
    const char *what = node_vfio_platform_class(m->class_id);
    if (what)
        return err_set(ret_err, 1, "%s is %s, which the host cannot give up", m->address, what);
    struct err why;
    int r = node_hostuse_check(root_fd, m->address, use, NULL, &why);
    if (r < 0)
        return err_set(ret_err, r, "%s", why.msg);
    if (r > 0)
        return err_set(ret_err, 1, "%s is host-critical: %s", m->address, why.msg);
    return 0;
}

int node_vfio_group_busy(const char *dev_root, int group)
{
    char path[4096];
    (void)snprintf(path, sizeof(path), "%s/vfio/%d", dev_root, group);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    if (errno == EBUSY)
        return 1;
    return errno == ENOENT ? 0 : -errno;
}

int node_vfio_group_holder(const char *dev_root, const char *proc_root, int group, char *buf,
                           size_t size)
{
    char target[32], node[4096];
    (void)snprintf(target, sizeof(target), "/dev/vfio/%d", group);
    (void)snprintf(node, sizeof(node), "%s/vfio/%d", dev_root, group);
    return node_holder_find(proc_root, target, node, buf, size);
}
