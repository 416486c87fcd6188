/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/binding/pcibind.c - a claim's node work on the worker thread (see pcibind.h).
 */
#include "controllers/binding/pcibind.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "kube/names.h"
#include "node/hostuse.h"
#include "node/kmod.h"
#include "node/pcireset.h"
#include "node/sriov.h"
#include "node/sysfs.h"
#include "node/vfio.h"

void pcibind_fault_point(const char *goal, const char *step)
{
    const char *f = getenv("HOSTDEVD_FAULT");
    size_t n = strlen(goal);
    if (f && strncmp(f, goal, n) == 0 && f[n] == ':' && strcmp(f + n + 1, step) == 0) {
        log_warning("Fault point reached; aborting", KV_STR("goal", goal), KV_STR("step", step));
        (void)fflush(stderr);
        abort();
    }
}

static void on_vfio_step(const char *goal, const char *step, void *arg)
{
    (void)arg;
    pcibind_fault_point(goal, step);
}

void pcibind_job_done(struct pcibind_job *j)
{
    for (size_t i = 0; i < j->n_claimed; i++)
        free(j->claimed[i]);
    free(j->claimed);
    j->claimed = NULL;
    j->n_claimed = 0;
    free(j->usb_enabled);
    j->usb_enabled = NULL;
}

static bool is_claimed(const char *address, void *arg)
{
    const struct pcibind_job *j = arg;
    for (size_t i = 0; i < j->n_claimed; i++)
        if (strcmp(j->claimed[i], address) == 0)
            return true;
    return false;
}

/* Lists the group members that stand in the way: those a claim would clear in `out` as
 * "0000:01:00.1 (snd_hda_intel; claim name)", those the host cannot give up in `unsafe` as
 * "0000:00:1f.0 is an ISA/LPC bridge (...), which the host cannot give up" (one whose use
 * cannot be checked counts: refuse to be safe). Returns how many in all, or -errno. */
static int group_blockers(struct pcibind_job *j, int group, const struct node_hostuse *use,
                          struct buf *out, struct buf *unsafe)
{
    struct node_vfio_dev *m = NULL;
    size_t n = 0;
    int count = 0, r = node_vfio_group_members(j->env->sysfs_fd, group, &m, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++) {
        char name[KUBE_NAME_MAX + 1] = "";
        struct err why = {{0}};
        if (!node_vfio_member_blocks(&m[i], j->address, is_claimed, j))
            continue;
        count++;
        if (node_vfio_member_essential(j->env->sysfs_fd, &m[i], use, &why) != 0) {
            (void)buf_printf(unsafe, "%s%s", unsafe->len ? "; " : "", why.msg);
            continue;
        }
        (void)kube_names_pcidevice(j->env->node_name, m[i].address, name, sizeof(name));
        (void)buf_printf(out, "%s%s (%s; claim %s)", out->len ? ", " : "", m[i].address,
                         m[i].driver[0] ? m[i].driver : "no driver", name);
    }
    free(m);
    return count;
}

/* Observes the device and checks it; the outcome is REFUSED, RECORD or GO. */
static void check(struct pcibind_job *j, struct node_vfio_dev *d)
{
    int fd = j->env->sysfs_fd;
    struct err why = {{0}};
    struct buf blockers, unsafe;
    struct node_hostuse use = {0};
    struct bindplan_facts f = {.node = j->env->node_name,
                               .address = j->address,
                               .recorded = j->recorded,
                               .annotation = j->annotation,
                               .host_why = why.msg,
                               .blockers = "",
                               .usb_enabled = j->usb_enabled ? j->usb_enabled : ""};
    buf_init(&blockers, 4096);
    buf_init(&unsafe, 4096);
    f.read_error = node_vfio_observe(fd, j->address, d);
    if (f.read_error == 0) {
        f.present = d->present;
        f.iommu_group = d->iommu_group;
        f.driver = d->driver;
        f.platform = d->present ? node_vfio_platform_class(d->class_id) : NULL;
        int u = node_hostuse_collect(j->env->proc_root, &use);
        if (d->present && strcmp(d->driver, NODE_VFIO_DRIVER) != 0)
            f.host_critical = u < 0 ? u : node_hostuse_check(fd, j->address, &use, NULL, &why);
        if (d->present && d->iommu_group >= 0)
            f.group_blockers =
                    group_blockers(j, d->iommu_group, u == 0 ? &use : NULL, &blockers, &unsafe);
        f.blockers = buf_str(&blockers) ? buf_str(&blockers) : "";
        f.unsafe = buf_str(&unsafe) ? buf_str(&unsafe) : "";
        f.sriov_vfs = node_sriov_numvfs(fd, j->address);
    }
    bindplan_check_bind(&f, &j->out);
    node_hostuse_done(&use);
    buf_free(&blockers);
    buf_free(&unsafe);
}

static int load_modules(struct pcibind_job *j)
{
    static const char *const mods[] = {"vfio-pci", "vfio_iommu_type1", NULL};
    struct err err = {{0}};
    if (j->env->modules_loaded)
        return 0;
    /* Registered already (loaded before, or built in): nothing to load. */
    if (node_sysfs_check_dir(j->env->sysfs_fd, "bus/pci/drivers/vfio-pci") == 0 &&
        node_sysfs_check_dir(j->env->sysfs_fd, "module/vfio_iommu_type1") == 0) {
        j->env->modules_loaded = true;
        return 0;
    }
    int r = node_kmod_load(mods, &err);
    char **names = NULL;
    size_t n = 0;
    if (r == 0 &&
        (r = node_sysfs_list(j->env->sysfs_fd, "bus/pci/drivers/vfio-pci", &names, &n)) < 0)
        (void)err_set(&err, r,
                      "the vfio-pci driver is not registered (no bus/pci/drivers/vfio-pci in "
                      "sysfs) although its module loaded: %s",
                      strerror(-r));
    node_sysfs_names_free(names);
    if (r < 0) {
        j->out.kind = BINDPLAN_FAILED;
        j->out.reason = "VFIOUnavailable";
        (void)snprintf(j->out.message, sizeof(j->out.message), "%s", err.msg);
        return r;
    }
    j->env->modules_loaded = true;
    return 0;
}

/* On no driver while a VM holds its group: the kernel is taking the device away (a removal
 * unbinds it first, then waits in vfio-pci's remove until the VM lets go, holding the device's
 * lock). Reading driver_override (node_vfio_observe) or any write would wait as long: only the
 * lock-free links are read here. */
static bool removal_pending(struct pcibind_job *j)
{
    char path[128], name[64];
    int fd = j->env->sysfs_fd;
    (void)snprintf(path, sizeof(path), "bus/pci/devices/%s/driver", j->address);
    if (node_sysfs_read_link_in(fd, path, "bus/pci/drivers", name, sizeof(name)) != -ENOENT)
        return false; /* on a driver (or cannot tell) */
    (void)snprintf(path, sizeof(path), "bus/pci/devices/%s/iommu_group", j->address);
    if (node_sysfs_read_link_in(fd, path, "kernel/iommu_groups", name, sizeof(name)) <= 0)
        return false; /* absent, or no group */
    int group = (int)strtol(name, NULL, 10);
    if (node_vfio_group_busy(j->env->dev_root, group) <= 0)
        return false;
    j->out = (struct bindplan_outcome){
            .kind = BINDPLAN_GO, .group = group, .reason = "RemovalPending"};
    (void)snprintf(j->out.message, sizeof(j->out.message),
                   "device %s has no driver while /dev/vfio/%d is held: the kernel is removing it "
                   "and waits for the VM to let go; not bound again",
                   j->address, group);
    return true;
}

static void run_bind(struct pcibind_job *j)
{
    struct node_vfio_dev d;
    if (!j->check_only && j->recorded && removal_pending(j))
        return; /* (BINDPLAN_GO with a reason: the caller writes nothing; the removal's uevent
                 * brings the claim back) */
    check(j, &d);
    if (j->out.kind != BINDPLAN_GO || j->check_only || load_modules(j) < 0)
        return;
    struct err err = {{0}};
    struct timespec t0, t1;
    (void)clock_gettime(CLOCK_MONOTONIC, &t0);
    int r = node_vfio_converge(j->env->sysfs_fd, j->address, NODE_VFIO_BIND, j->original,
                               on_vfio_step, NULL, &d, &err);
    (void)clock_gettime(CLOCK_MONOTONIC, &t1);
    j->out.bind_us = (int)((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000);
    (void)snprintf(j->out.message, sizeof(j->out.message), "%s", err.msg);
    j->out.kind = r < 0 ? BINDPLAN_FAILED : BINDPLAN_BOUND;
    j->out.reason = r < 0 ? "BindFailed" : "Bound";
}

/* The release's reset (node/pcireset.h): a device on vfio-pci whose group nobody holds (the
 * caller checked) is reset when the kernel knows a method for it. A release that crashed after
 * the reset finds the device on vfio-pci again and resets it again: harmless. One that crashed
 * after the unbind finds it on its driver: no reset then (said in the facts). */
static void reset_device(struct pcibind_job *j, const struct node_vfio_dev *d,
                         struct node_pcireset_facts *f, char *methods, size_t size)
{
    struct timespec t0, t1;
    int fd = j->env->sysfs_fd;
    int r = node_pcireset_methods(fd, j->address, methods, size);
    f->methods = r == 0 ? methods : NULL;
    if (!d->present || strcmp(d->driver, NODE_VFIO_DRIVER) != 0)
        f->skipped = "it was not on vfio-pci when this release began (a release resumed)";
    else if (r == 0 && !methods[0])
        f->skipped = "its reset methods are turned off (reset_method is empty)";
    else if (r < 0 && (r != -ENOENT || !node_pcireset_can_reset(fd, j->address)))
        f->skipped = r == -ENOENT ? "the kernel knows no reset method for it (no reset_method)"
                                  : "its reset_method cannot be read";
    if (f->skipped)
        return;
    f->reset_tried = true;
    (void)clock_gettime(CLOCK_MONOTONIC, &t0);
    f->reset_error = node_pcireset_reset(fd, j->address);
    (void)clock_gettime(CLOCK_MONOTONIC, &t1);
    j->out.release.reset_us =
            (int)((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000);
    pcibind_fault_point("restore", "reset");
}

/* After the restore (`restore_error` its -errno): the ids the device answers with, its driver,
 * and the verdict on all of it in the outcome. */
static void judge_release(struct pcibind_job *j, int restore_error, struct node_pcireset_facts *f)
{
    struct node_vfio_dev now;
    struct node_pcireset_verdict v;
    struct bindplan_release *rel = &j->out.release;
    int fd = j->env->sysfs_fd, r = node_vfio_observe(fd, j->address, &now);
    f->address = j->address;
    f->present = r < 0 || now.present;
    f->driver = r == 0 ? now.driver : "";
    f->original = j->original;
    f->restore_error = restore_error;
    f->ids_error = r < 0 ? r : node_pcireset_probe_ids(fd, j->address, &f->vendor, &f->device);
    if (f->ids_error == 0)
        f->ids_error = node_pcireset_live_ids(fd, j->address, &f->live_vendor, &f->live_device);
    node_pcireset_judge(f, &v);
    rel->checked = true;
    rel->reset = f->reset_tried && f->reset_error == 0;
    rel->health = v.reason;
    (void)snprintf(rel->method, sizeof(rel->method), "%s", v.method);
    (void)snprintf(rel->summary, sizeof(rel->summary), "%s", v.summary);
    (void)snprintf(rel->message, sizeof(rel->message), "%s", v.message);
}

static void run_restore(struct pcibind_job *j)
{
    struct node_vfio_dev d;
    int fd = j->env->sysfs_fd;
    j->out = (struct bindplan_outcome){.kind = BINDPLAN_RELEASED};
    if (!j->recorded) /* never touched: nothing to restore */
        return;
    int r = node_vfio_observe(fd, j->address, &d);
    j->out.group = r == 0 ? d.iommu_group : -1;
    if (r < 0) {
        j->out.kind = BINDPLAN_FAILED;
        j->out.reason = "RestoreFailed";
        (void)snprintf(j->out.message, sizeof(j->out.message), "cannot read device %s in sysfs: %s",
                       j->address, strerror(-r));
        return;
    }
    if (pcibind_group_held(j->env, &d, j->out.message, sizeof(j->out.message))) {
        j->out.kind = BINDPLAN_BUSY; /* the message: who holds it, when that can be told */
        return;
    }
    struct err err = {{0}};
    struct node_pcireset_facts f = {0};
    char methods[128];
    reset_device(j, &d, &f, methods, sizeof(methods));
    r = node_vfio_converge(fd, j->address, NODE_VFIO_RESTORE, j->original, on_vfio_step, NULL, &d,
                           &err);
    (void)snprintf(j->out.message, sizeof(j->out.message), "%s", err.msg);
    j->out.kind = r < 0 ? BINDPLAN_FAILED : BINDPLAN_RESTORED;
    j->out.reason = r < 0 ? "RestoreFailed" : "Restored";
    if (r == 0)
        (void)snprintf(j->out.driver, sizeof(j->out.driver), "%s", d.driver);
    judge_release(j, r, &f);
}

void pcibind_run(struct worker_job *wj)
{
    struct pcibind_job *j = (struct pcibind_job *)wj;
    if (j->deleting)
        run_restore(j);
    else
        run_bind(j);
}

/* A job of the caller's request, run at once on this thread. */
static void run_device(struct pcibind_env *env, const struct pcibind_request *req, bool restore,
                       struct bindplan_outcome *ret)
{
    struct pcibind_job j = {.env = env,
                            .deleting = restore,
                            .recorded = true,
                            .claimed = req->claimed,
                            .n_claimed = req->n_claimed};
    (void)snprintf(j.address, sizeof(j.address), "%s", req->address);
    (void)snprintf(j.original, sizeof(j.original), "%s", req->original);
    (void)snprintf(j.annotation, sizeof(j.annotation), "%s",
                   req->annotation ? req->annotation : "");
    pcibind_run(&j.wj);
    *ret = j.out;
}

void pcibind_bind_device(struct pcibind_env *env, const struct pcibind_request *req,
                         struct bindplan_outcome *ret)
{
    run_device(env, req, false, ret);
}

void pcibind_restore_device(struct pcibind_env *env, const struct pcibind_request *req,
                            struct bindplan_outcome *ret)
{
    run_device(env, req, true, ret);
}

bool pcibind_group_held(const struct pcibind_env *env, const struct node_vfio_dev *d, char *who,
                        size_t size)
{
    if (!d->present || strcmp(d->driver, NODE_VFIO_DRIVER) != 0 || d->iommu_group < 0 ||
        node_vfio_group_busy(env->dev_root, d->iommu_group) <= 0)
        return false;
    if (node_vfio_group_holder(env->dev_root, env->proc_root, d->iommu_group, who, size) <= 0)
        who[0] = '\0';
    return true;
}

int pcibind_observe(const struct pcibind_env *env, const char *address, struct node_vfio_dev *ret)
{
    return node_vfio_observe(env->sysfs_fd, address, ret);
}

struct pcibind_env *pcibind_env_new(const struct part_env *env)
{
    struct pcibind_env *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    *e = (struct pcibind_env){.sysfs_fd = node_sysfs_open_root(env->sysfs_root),
                              .node_name = env->node_name,
                              .dev_root = env->dev_root,
                              .proc_root = env->proc_root};
    if (e->sysfs_fd >= 0)
        return e;
    log_error("Cannot open sysfs for the node work", KV_STR("sysfs", env->sysfs_root),
              KV_ERRNO(e->sysfs_fd));
    free(e);
    return NULL;
}

static void env_free(void *self)
{
    struct pcibind_env *e = self;
    close(e->sysfs_fd);
    free(e);
}

static void *env_make(const struct part_env *env)
{
    return pcibind_env_new(env);
}

const struct part_ops pcibind_env_part = {.name = "nodework", .make = env_make, .free = env_free};
