/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/dra/draplugin.c - the agent's kubelet DRA plugin (see draplugin.h): the two sockets,
 * the calls (claims read on the loop), the node work (on the worker thread, one call at a
 * time, on a copy of the checkpoint that replaces the loop's when it is done).
 */
#include "controllers/dra/draplugin.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/log.h"
#include "base/map.h"
#include "base/metrics.h"
#include "controllers/binding/ledger.h"
#include "controllers/binding/pcibind.h"
#include "controllers/devices/devobjs.h"
#include "controllers/devices/pcidevice.h"
#include "controllers/dra/draprep.h"
#include "controllers/dra/draslices.h"
#include "controllers/health/health.h"
#include "controllers/health/healthrelease.h"
#include "controllers/objects/kinds.h"
#include "controllers/objects/pciobj.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "controllers/runtime/worker.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "kube/names.h"
#include "kubelet/draapi.h"
#include "kubelet/grpc.h"
#include "kubelet/regapi.h"
#include "node/mdev.h"
#include "node/sysfs.h"
#include "node/vfio.h"

static void draplugin_free(void *userdata);

#define ERROR_SIZE 1024

struct call;

struct dclaim { /* one claim of a call */
    struct call *call;
    const struct draapi_claim *ref;
    struct draprep_claim c;
    bool known;             /* unprepare: the checkpoint knows it */
    char error[ERROR_SIZE]; /* "" while fine */
    char (*annotation)[64]; /* per device: the PCIDevice's driver at first sight */
    char (*given)[128];     /* per device: an mdev's resource, when the device plugin gave it out */
    bool checked;           /* prepare: checked, nothing else holds its devices (loop only) */
    cJSON **attrs;          /* per device: its slice attributes (or NULL) */
    struct cdi_ids {
        char device[DRAPREP_NAME_SIZE + 128], metadata[DRAPREP_NAME_SIZE + 128];
    } * cdi; /* per device: its CDI ids (prepared) */

    struct bindplan_release *released; /* unprepare, per device: what its release found */
};

struct call {
    struct draplugin *p;
    struct grpc_call *gc; /* NULL once kubelet went away */
    bool prepare;
    struct draapi_claims claims;
    struct dclaim *dc;
    int pending; /* GETs in flight */
    struct call *next;
    /* the node work */
    struct worker_job wj;
    cJSON *ck;      /* the checkpoint the job works on, and leaves */
    char **claimed; /* addresses PCIDeviceClaims or other DRA claims hold */
    size_t n_claimed;
};

static void sync_ledger(struct draplugin *p);

/* A kubelet's NodeWatchResources stream. */
struct hstream {
    struct grpc_call *call;
    struct hstream *next;
};

struct draplugin {
    struct draplugin_config cfg;
    struct hstream *hstreams; /* kubelet's health streams */
    ev_timer health_timer;    /* resends the list within kubelet's timeout, while one is open */
    struct kube_informer *pci_devices;
    struct kube_informer *vgpus; /* this node's VGPUDevices: an mdev's attributes */
    char plugin_dir[PATH_MAX], socket[PATH_MAX], reg_socket[PATH_MAX], ck_path[PATH_MAX + 32];
    char cdi_dir[PATH_MAX];
    struct grpc_server *srv, *reg;
    cJSON *ck;
    struct call *queue, *running;
    int calls;
    bool started, stopping;
    struct metrics_series *prepare_ok, *prepare_err, *unprepare_ok, *unprepare_err, *registered,
            *register_err, *claims_gauge, *health_streams, *health_sent;
    struct kube_recorder *events; /* a release's reset and verification, on the PCIDevice */
    struct health *health;        /* ... and an unhealthy device's word; kubelet's health list */
};

/* A path into `buf`; one that does not fit is cut (then nothing of that name is found or made
 * where it should be: the caller's later open or bind fails and says which path). */
__attribute__((format(printf, 3, 4))) static void fmt_path(char *buf, size_t size, const char *fmt,
                                                           ...)
{
    va_list ap;
    va_start(ap, fmt);
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): clang-analyzer 14 false positive
    (void)vsnprintf(buf, size, fmt, ap);
    va_end(ap);
}

/* --- files (worker thread, and the start) -------------------------------------------------------
 */

static int write_atomic(const char *path, const char *text)
{
    char tmp[PATH_MAX + 8];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), r = 0;
    if (fd < 0)
        return -errno;
    size_t len = strlen(text), off = 0;
    while (r == 0 && off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno != EINTR)
            r = -errno;
        else if (n > 0)
            off += (size_t)n;
    }
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0)
        (void)unlink(tmp);
    return r;
}

static int write_json(const char *path, const cJSON *j, bool pretty)
{
    char *s = pretty ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
    if (!s)
        return -ENOMEM;
    size_t n = strlen(s);
    char *t = realloc(s, n + 2);
    if (!t)
        return free(s), -ENOMEM;
    memcpy(t + n, "\n", 2);
    int r = write_atomic(path, t);
    free(t);
    return r;
}

static int mkdir_p(const char *dir)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p))
        return -ENAMETOOLONG;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    return mkdir(p, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

static int rm_rf(const char *dir)
{
    if (nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

static void metadata_dir(const struct draplugin *p, const struct draprep_claim *c, char *buf,
                         size_t size)
{
    fmt_path(buf, size, "%s/dra-device-metadata/%s_%s", p->plugin_dir, c->namespace_, c->name);
}

static void cdi_path(const struct draplugin *p, const char *uid, char *buf, size_t size)
{
    fmt_path(buf, size, "%s/%s-%s.json", p->cdi_dir, DRASLICES_DRIVER, uid);
}

/* --- node work (worker thread) ------------------------------------------------------------------
 */

static int save(struct call *k, char *error)
{
    int r = write_json(k->p->ck_path, k->ck, false);
    if (r < 0)
        (void)snprintf(error, ERROR_SIZE, "cannot write the checkpoint %.900s: %s", k->p->ck_path,
                       strerror(-r));
    return r;
}

/* What pcibind needs of one device of the call: it, its original driver and, for a bind, its
 * driver at first sight and what else is claimed. */
static struct pcibind_request request(const struct call *k, const char *address,
                                      const char *original, const char *annotation)
{
    return (struct pcibind_request){.address = address,
                                    .original = original,
                                    .annotation = annotation,
                                    .claimed = k->claimed,
                                    .n_claimed = k->n_claimed};
}

/* Gives devices [0, n) of `c` their original drivers back (those not on vfio-pci before);
 * what each release found in `released` (NULL: not kept). */
static int restore_devices(struct call *k, const struct draprep_claim *c, const char *const *orig,
                           char *error, struct bindplan_release *released)
{
    int failed = 0;
    for (size_t i = 0; i < c->n; i++) {
        struct bindplan_outcome o;
        if (strcmp(orig[i], NODE_VFIO_DRIVER) == 0)
            continue;
        struct pcibind_request req = request(k, c->devices[i].address, orig[i], NULL);
        pcibind_restore_device(k->p->cfg.bind, &req, &o);
        if (released)
            released[i] = o.release;
        if (o.kind != BINDPLAN_RESTORED && o.kind != BINDPLAN_RELEASED && failed++ == 0) {
            bool busy = o.kind == BINDPLAN_BUSY;
            (void)snprintf(error, ERROR_SIZE, "device %s: %s: %.900s%s", c->devices[i].address,
                           busy ? "DeviceInUse" : o.reason,
                           busy && !o.message[0] ? "a process" : o.message,
                           busy ? " holds its IOMMU group" : "");
        }
    }
    return failed ? -EBUSY : 0;
}

static int write_files(struct call *k, struct dclaim *d, const int *groups)
{
    char dir[PATH_MAX], path[PATH_MAX + 300], base[DRAPREP_NAME_SIZE];
    const struct draprep_claim *c = &d->c;
    metadata_dir(k->p, c, dir, sizeof(dir));
    int r = 0;
    for (size_t i = 0; r == 0 && i < c->n; i++) {
        draprep_base_request(c->devices[i].request, base, sizeof(base));
        cJSON *m = draprep_metadata(c, base, DRASLICES_DRIVER, k->p->cfg.env.node_name,
                                    (const cJSON *const *)d->attrs);
        (void)snprintf(path, sizeof(path), "%s/%s", dir, base);
        r = m ? mkdir_p(path) : -ENOMEM;
        (void)snprintf(path, sizeof(path), "%s/%s/metadata.json", dir, base);
        if (r == 0)
            r = write_json(path, m, false);
        cJSON_Delete(m);
        draprep_cdi_ids(c, i, d->cdi[i].device, d->cdi[i].metadata, sizeof(d->cdi[i].device));
    }
    cJSON *spec = r == 0 ? draprep_cdi_spec(c, groups, k->p->cfg.env.dev_root, dir) : NULL;
    cdi_path(k->p, c->uid, path, sizeof(path));
    if (r == 0)
        r = spec ? mkdir_p(k->p->cdi_dir) : -ENOMEM;
    if (r == 0)
        r = write_json(path, spec, true);
    cJSON_Delete(spec);
    if (r < 0)
        (void)snprintf(d->error, sizeof(d->error),
                       "cannot write the CDI spec or metadata of %s: %s", c->uid, strerror(-r));
    return r;
}

/* The IOMMU group of mdev `uuid` (nothing to bind: the kernel made it a VFIO device), or -1 with
 * the claim's error. */
static int mdev_group(struct call *k, const char *uuid, char *error)
{
    struct node_mdev_instance inst;
    struct err e = {""};
    int r = node_mdev_find(k->p->cfg.bind->sysfs_fd, uuid, &inst, &e);
    if (r == 1 && inst.iommu_group >= 0)
        return inst.iommu_group;
    (void)snprintf(error, ERROR_SIZE, "mediated device %s: %.900s", uuid,
                   r < 0    ? e.msg
                   : r == 0 ? "there is no such instance on this node (any more): its VGPUDevice's "
                              "agent creates it again (status.vGPUStatus vGPUConfigured)"
                            : "it has no IOMMU group");
    return -1;
}

/* One path at a time: an mdev whose group a process holds (a VMM of a device-plugin pod, or
 * one started by hand) is not prepared for another VM. true when it is free; else the claim's
 * error names the holder. (Kubelet does not tell a device plugin when its pod is gone: an
 * instance the device plugin gave out counts as in use while its group is open.) */
static bool mdev_free(struct call *k, struct dclaim *d, size_t i, int group)
{
    const char *uuid = d->c.devices[i].address;
    char holder[128] = "";
    if (node_vfio_group_busy(k->p->cfg.env.dev_root, group) <= 0)
        return true;
    if (node_vfio_group_holder(k->p->cfg.env.dev_root, k->p->cfg.env.proc_root, group, holder,
                               sizeof(holder)) <= 0)
        holder[0] = 0;
    (void)snprintf(d->error, sizeof(d->error),
                   "mediated device %s is held by %s: /dev/vfio/%d (its IOMMU group) is open%s%s; "
                   "this claim is prepared once it is let go (delete the Pod that holds it, or "
                   "ask for another instance)",
                   uuid, holder[0] ? holder : "a process", group,
                   d->given[i][0] ? ", given out by the device plugin as " : "", d->given[i]);
    return false;
}

/* A prepare that failed part way: the devices back on their drivers, then the checkpoint entry
 * gone (kept when a restore fails, so the next unprepare or start tries again). */
static void undo_prepare(struct call *k, const struct draprep_claim *c, const char *const *orig)
{
    char ignored[ERROR_SIZE];
    if (restore_devices(k, c, orig, ignored, NULL) == 0) {
        draprep_checkpoint_remove(k->ck, c->uid);
        (void)save(k, ignored);
    }
}

static void prepare_claim(struct call *k, struct dclaim *d)
{
    const struct draprep_claim *c = &d->c;
    const char *orig[DRAPREP_MAX_DEVICES];
    char seen[DRAPREP_MAX_DEVICES][64];
    int groups[DRAPREP_MAX_DEVICES];
    /* prepared before (kubelet repeats calls): its VM may hold its mdevs now */
    bool again = cJSON_IsTrue(json_field(draprep_checkpoint_claim(k->ck, c->uid), "prepared"));
    for (size_t i = 0; i < c->n; i++) {
        struct node_vfio_dev dev;
        groups[i] = -1;
        /* A copy: draprep_checkpoint_put() below replaces (frees) the entry it points into. */
        const char *known = draprep_checkpoint_original(k->ck, c->uid, c->devices[i].address);
        orig[i] = seen[i];
        if (known || draprep_is_mdev(c->devices[i].address)) {
            /* an mdev has no driver to change: nothing to restore, as a device on vfio-pci */
            (void)snprintf(seen[i], sizeof(seen[i]), "%s", known ? known : NODE_VFIO_DRIVER);
            continue;
        }
        int r = pcibind_observe(k->p->cfg.bind, c->devices[i].address, &dev);
        if (r < 0 || !dev.present) {
            (void)snprintf(d->error, sizeof(d->error), "device %s: %s", c->devices[i].address,
                           r < 0 ? strerror(-r) : "there is no such PCI device on this node");
            return;
        }
        (void)snprintf(seen[i], sizeof(seen[i]), "%s",
                       draprep_original(dev.driver, d->annotation[i]));
    }
    /* The originals are on disk before anything changes. */
    if (draprep_checkpoint_put(k->ck, c, orig, groups, false) < 0 || save(k, d->error) < 0) {
        if (!d->error[0])
            (void)snprintf(d->error, sizeof(d->error), "out of memory");
        return;
    }
    for (size_t i = 0; i < c->n; i++) {
        struct bindplan_outcome o;
        if (draprep_is_mdev(c->devices[i].address)) {
            if ((groups[i] = mdev_group(k, c->devices[i].address, d->error)) >= 0 &&
                (again || mdev_free(k, d, i, groups[i])))
                continue;
            undo_prepare(k, c, orig);
            return;
        }
        struct pcibind_request req = request(k, c->devices[i].address, orig[i], d->annotation[i]);
        pcibind_bind_device(k->p->cfg.bind, &req, &o);
        if (o.kind == BINDPLAN_BOUND) {
            groups[i] = o.group;
            continue;
        }
        (void)snprintf(d->error, sizeof(d->error), "device %s: %s: %.900s", c->devices[i].address,
                       o.reason ? o.reason : "BindFailed", o.message);
        undo_prepare(k, c, orig);
        return;
    }
    if (write_files(k, d, groups) == 0 && draprep_checkpoint_put(k->ck, c, orig, groups, true) == 0)
        (void)save(k, d->error);
}

static void unprepare_claim(struct call *k, struct dclaim *d)
{
    cJSON *entry = draprep_checkpoint_claim(k->ck, d->ref->uid);
    const char **orig = NULL;
    int *groups = NULL;
    if (!entry)
        return;
    d->known = true;
    if (draprep_checkpoint_entry(entry, d->ref->uid, &d->c, &orig, &groups) < 0) {
        (void)snprintf(d->error, sizeof(d->error), "the checkpoint's entry of %s is malformed",
                       d->ref->uid);
        goto out;
    }
    for (size_t i = 0; i < d->c.n; i++) {
        if (strcmp(orig[i], NODE_VFIO_DRIVER) != 0 && groups[i] >= 0 &&
            node_vfio_group_busy(k->p->cfg.env.dev_root, groups[i]) > 0) {
            char holder[128]; /* who: read only now that the group is known busy */
            if (node_vfio_group_holder(k->p->cfg.env.dev_root, k->p->cfg.env.proc_root, groups[i],
                                       holder, sizeof(holder)) <= 0)
                holder[0] = 0;
            draprep_busy_error(d->c.devices[i].address, groups[i], holder, orig[i], d->error,
                               sizeof(d->error));
            goto out;
        }
    }
    d->released = calloc(d->c.n ? d->c.n : 1, sizeof(*d->released));
    if (restore_devices(k, &d->c, orig, d->error, d->released) < 0)
        goto out;
    char path[PATH_MAX + 300];
    cdi_path(k->p, d->ref->uid, path, sizeof(path));
    if (unlink(path) < 0 && errno != ENOENT)
        log_warning("Cannot remove a CDI spec", KV_STR("path", path), KV_ERRNO(-errno));
    metadata_dir(k->p, &d->c, path, sizeof(path));
    (void)rm_rf(path);
    draprep_checkpoint_remove(k->ck, d->ref->uid);
    (void)save(k, d->error);
out:
    free(orig);
    free(groups);
}

static void run_call(struct worker_job *wj)
{
    struct call *k = (struct call *)((char *)wj - offsetof(struct call, wj));
    for (size_t i = 0; i < k->claims.n; i++) {
        struct dclaim *d = &k->dc[i];
        if (k->prepare && !d->error[0] && d->c.n > 0)
            prepare_claim(k, d);
        else if (!k->prepare)
            unprepare_claim(k, d);
    }
}

/* --- calls (loop)
 * ---------------------------------------------------------------------------------- */

static void call_free(struct call *k)
{
    for (size_t i = 0; k->dc && i < k->claims.n; i++) {
        struct dclaim *d = &k->dc[i];
        for (size_t j = 0; d->attrs && j < d->c.n; j++)
            cJSON_Delete(d->attrs[j]);
        free(d->attrs);
        free(d->annotation);
        free(d->given);
        free(d->cdi);
        free(d->released);
        draprep_claim_done(&d->c);
    }
    for (size_t i = 0; i < k->n_claimed; i++)
        free(k->claimed[i]);
    free(k->claimed);
    free(k->dc);
    cJSON_Delete(k->ck);
    draapi_claims_done(&k->claims);
    k->p->calls--;
    free(k);
}

static void on_call_cancel(struct grpc_call *gc, void *ud)
{
    struct call *k = ud;
    (void)gc;
    k->gc = NULL; /* the work goes on: the checkpoint must say what was done */
}

static void answer(struct call *k)
{
    size_t nc = k->claims.n ? k->claims.n : 1;
    struct draapi_answer *a = calloc(nc, sizeof(*a));
    struct draapi_device *devs = calloc((size_t)DRAPREP_MAX_DEVICES * nc, sizeof(*devs));
    const char **ptrs = calloc((size_t)DRAPREP_MAX_DEVICES * 3 * nc, sizeof(*ptrs));
    struct buf out;
    buf_init(&out, 1 << 20);
    int r = a && devs && ptrs ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < k->claims.n; i++) {
        struct dclaim *d = &k->dc[i];
        a[i].uid = k->claims.v[i].uid;
        a[i].error = d->error[0] ? d->error : NULL;
        a[i].devices = &devs[i * DRAPREP_MAX_DEVICES];
        for (size_t j = 0; k->prepare && !d->error[0] && j < d->c.n; j++) {
            const char **pp = &ptrs[(i * DRAPREP_MAX_DEVICES + j) * 3];
            pp[0] = d->c.devices[j].request;
            pp[1] = d->cdi[j].device;
            pp[2] = d->cdi[j].metadata;
            devs[i * DRAPREP_MAX_DEVICES + j] =
                    (struct draapi_device){.requests = &pp[0],
                                           .n_requests = 1,
                                           .pool = k->p->cfg.env.node_name,
                                           .name = d->c.devices[j].name,
                                           .cdi_ids = &pp[1],
                                           .n_cdi_ids = 2};
            a[i].n_devices = j + 1;
        }
    }
    if (r == 0)
        r = k->prepare ? draapi_encode_prepared(a, k->claims.n, &out)
                       : draapi_encode_unprepared(a, k->claims.n, &out);
    if (k->gc && r == 0 && grpc_call_reply(k->gc, (const uint8_t *)out.data, out.len) == 0)
        grpc_call_finish(k->gc, GRPC_OK, NULL);
    else if (k->gc)
        grpc_call_finish(k->gc, GRPC_INTERNAL, "cannot encode the answer");
    k->gc = NULL;
    buf_free(&out);
    free(a);
    free(devs);
    free(ptrs);
}

static void log_results(const struct call *k)
{
    struct draplugin *p = k->p;
    for (size_t i = 0; i < k->claims.n; i++) {
        const struct dclaim *d = &k->dc[i];
        const struct draapi_claim *c = &k->claims.v[i];
        if (d->error[0]) {
            log_warning(k->prepare ? "Cannot prepare a ResourceClaim"
                                   : "Cannot unprepare a ResourceClaim",
                        KV_STR("claim", c->name), KV_STR("namespace", c->namespace_),
                        KV_STR("uid", c->uid), KV_STR("message", d->error));
            metrics_inc(k->prepare ? p->prepare_err : p->unprepare_err);
        } else if (k->prepare || d->known) {
            log_info(k->prepare ? "Prepared a ResourceClaim" : "Unprepared a ResourceClaim",
                     KV_STR("claim", c->name), KV_STR("namespace", c->namespace_),
                     KV_STR("uid", c->uid), KV_INT("devices", d->c.n));
            metrics_inc(k->prepare ? p->prepare_ok : p->unprepare_ok);
        }
    }
}

static void start_next(struct draplugin *p);

/* What the unprepare's releases found (healthrelease.h), on each device's PCIDevice: the
 * agent writes Events in "default" only (manifests/agent-rbac.yaml), not in a claim's
 * namespace. */
static void say_releases(const struct call *k)
{
    struct draplugin *p = k->p;
    for (size_t i = 0; !k->prepare && i < k->claims.n; i++) {
        const struct dclaim *d = &k->dc[i];
        for (size_t j = 0; d->released && j < d->c.n; j++) {
            char name[KUBE_NAME_MAX + 1];
            const char *a = d->c.devices[j].address;
            if (kube_names_pcidevice(p->cfg.env.node_name, a, name, sizeof(name)) < 0)
                continue;
            const cJSON *dev = p->pci_devices ? kube_informer_get(p->pci_devices, name) : NULL;
            struct kube_event_ref ref = {.api_version = "devices.harvesterhci.io/v1beta1",
                                         .kind = "PCIDevice",
                                         .name = name,
                                         .uid = kube_meta_str(dev, "uid")};
            healthrelease_say(p->events, p->health, &ref, p->cfg.env.node_name, a, &d->released[j],
                              false);
        }
    }
}

/* The mdevs a claim was prepared with are no longer the device plugin's to give out (their
 * group was free: its pod, if any, had let go). */
static void forget_given(const struct call *k)
{
    for (size_t i = 0; k->prepare && i < k->claims.n; i++)
        for (size_t j = 0; !k->dc[i].error[0] && j < k->dc[i].c.n; j++)
            if (draprep_is_mdev(k->dc[i].c.devices[j].address))
                ledger_release(k->p->cfg.ledger, k->dc[i].c.devices[j].address,
                               LEDGER_DEVICE_PLUGIN, NULL);
}

static void on_call_done(struct worker_job *wj, bool cancelled)
{
    struct call *k = (struct call *)((char *)wj - offsetof(struct call, wj));
    struct draplugin *p = k->p;
    if (cancelled)
        for (size_t i = 0; i < k->claims.n; i++)
            if (!k->dc[i].error[0])
                (void)snprintf(k->dc[i].error, sizeof(k->dc[i].error), "the agent is stopping");
    if (!cancelled) { /* the job's checkpoint is now the one on disk */
        cJSON_Delete(p->ck);
        p->ck = k->ck;
        k->ck = NULL;
    }
    log_results(k);
    if (!cancelled)
        say_releases(k);
    forget_given(k);
    answer(k);
    metrics_set(p->claims_gauge, cJSON_GetArraySize(json_field(p->ck, "claims")));
    p->running = NULL;
    call_free(k);
    sync_ledger(p); /* a release lets the claims that waited go on */
    start_next(p);
}

/* The mdevs of the claims being prepared (checked, not prepared yet): held from the check on,
 * so that the device plugin does not give one out meanwhile. (`checked`, not `error`: the worker
 * may be writing the running call's errors.) */
static void hold_preparing(struct draplugin *p, const struct call *k)
{
    char who[2 * DRAPREP_NAME_SIZE];
    for (size_t i = 0; k && k->prepare && i < k->claims.n; i++) {
        const struct dclaim *d = &k->dc[i];
        (void)snprintf(who, sizeof(who), "%s/%s", d->ref->namespace_, d->ref->name);
        for (size_t j = 0; d->checked && j < d->c.n; j++)
            if (draprep_is_mdev(d->c.devices[j].address))
                (void)ledger_hold(p->cfg.ledger, d->c.devices[j].address, LEDGER_DRA, d->ref->uid,
                                  who);
    }
}

/* The checkpoint's claims are the ledger's DRA holdings, with the mdevs of the claims being
 * prepared: a device one lets go is released there (the ledger tells whoever waited). */
static void sync_ledger(struct draplugin *p)
{
    const cJSON *e, *d;
    ledger_begin(p->cfg.ledger, LEDGER_DRA);
    hold_preparing(p, p->running);
    for (const struct call *k = p->queue; k; k = k->next)
        hold_preparing(p, k);
    cJSON_ArrayForEach(e, json_field(p->ck, "claims"))
    {
        char who[2 * DRAPREP_NAME_SIZE];
        (void)snprintf(who, sizeof(who), "%s/%s", json_str(e, "namespace"), json_str(e, "name"));
        cJSON_ArrayForEach(d, json_field(e, "devices"))
        {
            const char *a = json_str(d, "address");
            if (a)
                (void)ledger_hold(p->cfg.ledger, a, LEDGER_DRA, e->string, who);
        }
    }
    ledger_end(p->cfg.ledger, LEDGER_DRA);
}

/* The addresses other holders keep: PCIDeviceClaims of this node and the checkpoint's (the
 * ledger's). */
static int collect_claimed(struct call *k)
{
    return ledger_addresses(k->p->cfg.ledger, &k->claimed, &k->n_claimed);
}

static void start_next(struct draplugin *p)
{
    if (p->running || !p->queue)
        return;
    struct call *k = p->queue;
    p->queue = k->next;
    p->running = k;
    if (!(k->ck = cJSON_Duplicate(p->ck, true)) || collect_claimed(k) < 0) {
        for (size_t i = 0; i < k->claims.n; i++)
            (void)snprintf(k->dc[i].error, sizeof(k->dc[i].error), "out of memory");
        on_call_done(&k->wj, true);
        return;
    }
    k->wj.run = run_call;
    k->wj.done = on_call_done;
    worker_submit(p->cfg.worker, &k->wj);
}

static void enqueue(struct call *k)
{
    struct call **t = &k->p->queue;
    while (*t)
        t = &(*t)->next;
    *t = k;
    start_next(k->p);
}

/* The slice entry of mdev `uuid` from its VGPUDevice, or NULL (the metadata then has only
 * mdevUUID). */
static cJSON *mdev_entry(const struct draplugin *p, const char *uuid)
{
    size_t pos = 0;
    const char *key;
    const cJSON *o;
    while (p->vgpus && kube_informer_next(p->vgpus, &pos, &key, &o)) {
        struct draslices_mdev m;
        if (draslices_mdev_of(o, p->cfg.env.node_name, &m) && strcmp(m.uuid, uuid) == 0)
            return draslices_mdev_device(&m);
    }
    return NULL;
}

/* What the loop knows about each device: who else holds it, its first driver, its attributes. */
static void check_devices(struct call *k, struct dclaim *d)
{
    struct draplugin *p = k->p;
    d->annotation = calloc(d->c.n ? d->c.n : 1, sizeof(*d->annotation));
    d->attrs = calloc(d->c.n ? d->c.n : 1, sizeof(cJSON *));
    d->cdi = calloc(d->c.n ? d->c.n : 1, sizeof(*d->cdi));
    d->given = calloc(d->c.n ? d->c.n : 1, sizeof(*d->given));
    if (!d->annotation || !d->attrs || !d->cdi || !d->given) {
        (void)snprintf(d->error, sizeof(d->error), "out of memory");
        return;
    }
    const struct map *scan = p->cfg.devices ? devobjs_want(p->cfg.devices) : NULL;
    for (size_t i = 0; i < d->c.n && !d->error[0]; i++) {
        const char *a = d->c.devices[i].address;
        char name[KUBE_NAME_MAX + 1] = "";
        struct ledger_refusal why;
        (void)kube_names_pcidevice(p->cfg.env.node_name, a, name, sizeof(name));
        if (ledger_check(p->cfg.ledger, a, LEDGER_DRA, d->c.uid, &why) < 0)
            (void)snprintf(d->error, sizeof(d->error), "%s", why.message);
        (void)draprep_unhealthy(p->health, a, name, d->error, sizeof(d->error));
        (void)ledger_held(p->cfg.ledger, a, LEDGER_DEVICE_PLUGIN, NULL, d->given[i],
                          sizeof(d->given[i]));
        const cJSON *dev = p->pci_devices ? kube_informer_get(p->pci_devices, name) : NULL;
        const char *ann = pciobj_first_driver(dev);
        (void)snprintf(d->annotation[i], sizeof(d->annotation[i]), "%s", ann ? ann : "");
        const struct pcidevice_spec *spec = scan ? map_get(scan, name) : NULL;
        cJSON *entry = draprep_is_mdev(a) ? mdev_entry(p, a) : spec ? draslices_device(spec) : NULL;
        d->attrs[i] = entry ? cJSON_DetachItemFromObjectCaseSensitive(entry, "attributes") : NULL;
        cJSON_Delete(entry);
    }
    d->checked = !d->error[0];
}

static void claims_read(struct call *k)
{
    struct draplugin *p = k->p;
    for (size_t i = 0; i < k->claims.n; i++)
        if (!k->dc[i].error[0])
            check_devices(k, &k->dc[i]);
    enqueue(k); /* (may run and answer it at once: `k` is not used after) */
    sync_ledger(p);
}

static void on_claim(const struct kube_err *err, const cJSON *obj, void *userdata)
{
    struct dclaim *d = userdata;
    struct call *k = d->call;
    struct err e = {""};
    if (err)
        (void)snprintf(d->error, sizeof(d->error), "cannot read ResourceClaim %s/%s: %.500s",
                       d->ref->namespace_, d->ref->name,
                       err->message[0] ? err->message : err->reason);
    else if (draprep_parse(obj, d->ref->uid, DRASLICES_DRIVER, k->p->cfg.env.node_name, &d->c, &e) <
             0)
        (void)snprintf(d->error, sizeof(d->error), "%s", e.msg);
    if (--k->pending == 0)
        claims_read(k);
}

static struct call *call_new(struct draplugin *p, struct grpc_call *gc, bool prepare,
                             const uint8_t *msg, size_t len)
{
    struct err e = {""};
    struct call *k = calloc(1, sizeof(*k));
    if (!k) {
        grpc_call_finish(gc, GRPC_RESOURCE_EXHAUSTED, "out of memory");
        return NULL;
    }
    k->p = p;
    p->calls++;
    int r = draapi_decode_claims(msg, len, prepare, &k->claims, &e);
    if (r == 0 && !(k->dc = calloc(k->claims.n ? k->claims.n : 1, sizeof(*k->dc)))) {
        (void)err_set(&e, -ENOMEM, "out of memory");
        r = -ENOMEM;
    }
    if (r < 0 || !k->dc) {
        log_warning("Refused a malformed DRA request", KV_STR("message", e.msg));
        grpc_call_finish(gc, r == -ENOMEM ? GRPC_RESOURCE_EXHAUSTED : GRPC_INVALID_ARGUMENT, e.msg);
        call_free(k);
        return NULL;
    }
    k->gc = gc;
    k->prepare = prepare;
    for (size_t i = 0; i < k->claims.n; i++) {
        k->dc[i].call = k;
        k->dc[i].ref = &k->claims.v[i];
    }
    grpc_call_on_cancel(gc, on_call_cancel, k);
    return k;
}

/* A claim the checkpoint says is prepared: the devices from there, no API call. */
static bool from_checkpoint(struct call *k, struct dclaim *d)
{
    const cJSON *entry = draprep_checkpoint_claim(k->p->ck, d->ref->uid);
    const char **orig = NULL;
    int *groups = NULL;
    if (!entry || !cJSON_IsTrue(json_field(entry, "prepared")))
        return false;
    bool ok = draprep_checkpoint_entry(entry, d->ref->uid, &d->c, &orig, &groups) == 0;
    if (!ok)
        draprep_claim_done(&d->c);
    free(orig);
    free(groups);
    return ok;
}

static void on_prepare(struct grpc_call *gc, const uint8_t *msg, size_t len, void *ud)
{
    struct draplugin *p = ud;
    struct call *k = call_new(p, gc, true, msg, len);
    if (!k)
        return;
    k->pending = 1; /* (held while the GETs start) */
    for (size_t i = 0; i < k->claims.n; i++) {
        struct dclaim *d = &k->dc[i];
        if (from_checkpoint(k, d))
            continue;
        k->pending++;
        int r = kube_client_get(p->cfg.env.http, &kube_res_resourceclaims, d->ref->namespace_,
                                d->ref->name, on_claim, d);
        if (r < 0) {
            k->pending--;
            (void)snprintf(d->error, sizeof(d->error), "cannot read ResourceClaim %s/%s: %s",
                           d->ref->namespace_, d->ref->name, strerror(-r));
        }
    }
    if (--k->pending == 0)
        claims_read(k);
}

static void on_unprepare(struct grpc_call *gc, const uint8_t *msg, size_t len, void *ud)
{
    struct call *k = call_new(ud, gc, false, msg, len);
    if (k)
        enqueue(k);
}

/* --- resource health (KEP-4680) -------------------------------------------------------------
 */

/* Kubelet takes a device whose last report is older than 30 s (its default timeout, which the
 * list leaves as it is) as Unknown: the list goes again every DRAPLUGIN_HEALTH_PERIOD seconds
 * while a stream is open, a third of that so that a late loop on a loaded node stays within it.
 * This is the contract, not a poll: nothing is read for it, and a change is sent at once. */
#define DRAPLUGIN_HEALTH_PERIOD 10.0

/* The list being built: each device's name and message owned here. */
struct hlist {
    struct draapi_device_health *v;
    char (*names)[80];
    char **messages;
    size_t n, cap;
};

static void hlist_free(struct hlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->messages[i]);
    free(l->v);
    free(l->names);
    free(l->messages);
}

static bool hlist_grow(struct hlist *l)
{
    if (l->n < l->cap)
        return true;
    size_t cap = l->cap ? 2 * l->cap : 64;
    struct draapi_device_health *v = realloc(l->v, cap * sizeof(*v));
    if (v)
        l->v = v;
    char(*names)[80] = realloc(l->names, cap * sizeof(*names));
    if (names)
        l->names = names;
    char **messages = realloc(l->messages, cap * sizeof(*messages));
    if (messages)
        l->messages = messages;
    if (!v || !names || !messages)
        return false;
    l->cap = cap;
    return true;
}

/* Device `name` of the pool, with the health the store has of PCI device `address` (an mdev's:
 * its parent's; NULL: healthy). */
static int hlist_add(struct draplugin *p, struct hlist *l, const char *name, const char *address)
{
    struct health_state st;
    if (!hlist_grow(l))
        return -ENOMEM;
    size_t i = l->n;
    char *m = NULL;
    (void)snprintf(l->names[i], sizeof(l->names[i]), "%s", name);
    if (address && !health_get(p->health, address, &st)) {
        size_t len = strlen(st.reason) + strlen(st.message) + 64;
        if (!(m = malloc(len)))
            return -ENOMEM;
        (void)snprintf(m, len, "%s: %s", st.reason, st.message);
    }
    l->messages[i] = m;
    l->v[i] = (struct draapi_device_health){.pool = p->cfg.env.node_name,
                                            .name = l->names[i],
                                            .health = m ? DRAAPI_HEALTH_UNHEALTHY
                                                        : DRAAPI_HEALTH_HEALTHY,
                                            .updated = (int64_t)time(NULL),
                                            .message = m};
    l->n++;
    return 0;
}

/* The devices the checkpoint holds that the scan no longer has (a device removed while prepared:
 * the pods that hold it are told). */
static int hlist_add_gone(struct draplugin *p, struct hlist *l, const struct map *scan)
{
    const cJSON *e, *d;
    int r = 0;
    cJSON_ArrayForEach(e, json_field(p->ck, "claims"))
    {
        cJSON_ArrayForEach(d, json_field(e, "devices"))
        {
            const char *a = json_str(d, "address"), *name = json_str(d, "name");
            char obj[KUBE_NAME_MAX + 1] = "";
            if (!a || !name || draprep_is_mdev(a))
                continue;
            (void)kube_names_pcidevice(p->cfg.env.node_name, a, obj, sizeof(obj));
            if (r == 0 && !(scan && map_get(scan, obj)))
                r = hlist_add(p, l, name, a);
        }
    }
    return r;
}

/* Every device of this node's pool that the plugin may have prepared: the PCI functions of the
 * last scan (those a PCIDeviceClaim holds too: harmless), the checkpoint's devices gone from it,
 * and the mediated device instances. */
static int health_list(struct draplugin *p, struct hlist *l)
{
    const struct map *scan = p->cfg.devices ? devobjs_want(p->cfg.devices) : NULL;
    size_t pos = 0;
    const char *key;
    void *v;
    const cJSON *o;
    char name[80];
    int r = 0;
    while (r == 0 && scan && map_next(scan, &pos, &key, &v)) {
        const struct pcidevice_spec *s = v;
        if (draslices_device_name(s->address, name, sizeof(name)) == 0)
            r = hlist_add(p, l, name, s->address);
    }
    if (r == 0)
        r = hlist_add_gone(p, l, scan);
    pos = 0;
    while (r == 0 && p->vgpus && kube_informer_next(p->vgpus, &pos, &key, &o)) {
        struct draslices_mdev m;
        if (draslices_mdev_of(o, p->cfg.env.node_name, &m) &&
            draslices_mdev_name(m.uuid, name, sizeof(name)) == 0)
            r = hlist_add(p, l, name, m.parent);
    }
    return r;
}

/* The streams' gauge, and the timer: running while a stream is open. */
static void health_streams_changed(struct draplugin *p)
{
    size_t n = 0;
    for (const struct hstream *s = p->hstreams; s; s = s->next)
        n++;
    metrics_set(p->health_streams, (double)n);
    if (!n)
        ev_timer_stop(p->cfg.env.loop, &p->health_timer);
    else if (!ev_is_active(&p->health_timer))
        ev_timer_again(p->cfg.env.loop, &p->health_timer);
}

static void health_stream_remove(struct draplugin *p, const struct grpc_call *call)
{
    for (struct hstream **sp = &p->hstreams; *sp; sp = &(*sp)->next) {
        if ((*sp)->call == call) {
            struct hstream *s = *sp;
            *sp = s->next;
            free(s);
            break;
        }
    }
    health_streams_changed(p);
}

/* Sends the list on `call` (NULL: on every stream). */
static void health_send(struct draplugin *p, const struct grpc_call *call)
{
    struct hlist l = {0};
    struct buf out;
    buf_init(&out, GRPC_MAX_MESSAGE);
    int r = health_list(p, &l);
    if (r == 0)
        r = draapi_encode_health(l.v, l.n, &out);
    if (r < 0)
        log_error("Cannot make the DRA devices' health list", KV_ERRNO(r));
    for (struct hstream *s = p->hstreams, *next; r == 0 && s; s = next) {
        next = s->next;
        if (call && s->call != call)
            continue;
        int e = grpc_call_reply(s->call, (const uint8_t *)out.data, out.len);
        if (e == -ENOBUFS || e == -E2BIG || e == -ENOMEM) {
            /* kubelet opens it again 5 s after it ends */
            log_warning("Ended a DRA health stream kubelet does not read", KV_ERRNO(e));
            struct grpc_call *gc = s->call;
            health_stream_remove(p, gc);
            grpc_call_finish(gc, GRPC_RESOURCE_EXHAUSTED, "the health list is not read");
        } else if (e == 0) {
            metrics_inc(p->health_sent);
        }
    }
    buf_free(&out);
    hlist_free(&l);
}

static void on_health_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    health_send(w->data, NULL);
}

static void on_health_cancel(struct grpc_call *gc, void *ud)
{
    health_stream_remove(ud, gc);
}

static void on_watch_health(struct grpc_call *gc, const uint8_t *msg, size_t len, void *ud)
{
    struct draplugin *p = ud;
    struct hstream *s = calloc(1, sizeof(*s));
    (void)msg; /* NodeWatchResourcesRequest: reserved, empty */
    (void)len;
    if (!s) {
        grpc_call_finish(gc, GRPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    *s = (struct hstream){.call = gc, .next = p->hstreams};
    p->hstreams = s;
    grpc_call_on_cancel(gc, on_health_cancel, p);
    health_streams_changed(p);
    size_t bad = 0;
    (void)health_unhealthy(p->health, &bad);
    log_info("Kubelet watches the DRA devices' health", KV_STR("driver", DRASLICES_DRIVER),
             KV_INT("unhealthy", bad));
    health_send(p, gc);
}

/* A device's health changed, or the scan did: the list goes now. */
static void on_health_changed(void *self, const struct watch_event *ev)
{
    struct draplugin *p = self;
    (void)ev;
    if (p->hstreams)
        health_send(p, NULL);
}

/* --- registration ------------------------------------------------------------------------------
 */

static void on_get_info(struct grpc_call *gc, const uint8_t *msg, size_t len, void *ud)
{
    struct draplugin *p = ud;
    struct buf out;
    (void)msg;
    (void)len;
    buf_init(&out, 4096);
    if (draapi_encode_info(DRASLICES_DRIVER, p->socket, &out) == 0 &&
        grpc_call_reply(gc, (const uint8_t *)out.data, out.len) == 0)
        grpc_call_finish(gc, GRPC_OK, NULL);
    else
        grpc_call_finish(gc, GRPC_INTERNAL, "cannot encode PluginInfo");
    buf_free(&out);
}

static void on_notify(struct grpc_call *gc, const uint8_t *msg, size_t len, void *ud)
{
    struct draplugin *p = ud;
    struct err e = {""};
    char why[512] = "";
    bool ok = false;
    struct buf out;
    buf_init(&out, 64);
    if (regapi_decode_status(msg, len, &ok, why, sizeof(why), &e) < 0) {
        log_warning("Malformed registration status from kubelet", KV_STR("message", e.msg));
        grpc_call_finish(gc, GRPC_INVALID_ARGUMENT, e.msg);
        buf_free(&out);
        return;
    }
    if (ok) {
        log_info("Kubelet registered the DRA plugin", KV_STR("driver", DRASLICES_DRIVER),
                 KV_STR("socket", p->socket));
        metrics_inc(p->registered);
    } else {
        log_error("Kubelet refused the DRA plugin", KV_STR("driver", DRASLICES_DRIVER),
                  KV_STR("message", why));
        metrics_inc(p->register_err);
    }
    if (regapi_encode_status_response(&out) == 0 &&
        grpc_call_reply(gc, (const uint8_t *)out.data, out.len) == 0)
        grpc_call_finish(gc, GRPC_OK, NULL);
    else
        grpc_call_finish(gc, GRPC_INTERNAL, "cannot encode the response");
    buf_free(&out);
}

/* --- the part ----------------------------------------------------------------------------------
 */

static void register_metrics(struct draplugin *p)
{
    struct metrics *m = p->cfg.env.metrics;
    static const char *const results[] = {"ok", "error", NULL};
    struct metrics_series *s[2];
    metrics_enum(m, METRICS_COUNTER, "hostdevd_dra_prepare_total",
                 "Claims NodePrepareResources answered, by result.", "result", results, s);
    p->prepare_ok = s[0];
    p->prepare_err = s[1];
    metrics_enum(m, METRICS_COUNTER, "hostdevd_dra_unprepare_total",
                 "Claims NodeUnprepareResources released, by result.", "result", results, s);
    p->unprepare_ok = s[0];
    p->unprepare_err = s[1];
    metrics_enum(m, METRICS_COUNTER, "hostdevd_dra_registrations_total",
                 "Registration statuses kubelet sent the DRA plugin, by result.", "result", results,
                 s);
    p->registered = s[0];
    p->register_err = s[1];
    p->claims_gauge = metrics_one(m, METRICS_GAUGE, "hostdevd_dra_prepared_claims",
                                  "ResourceClaims the checkpoint holds on this node.");
    p->health_streams =
            metrics_one(m, METRICS_GAUGE, "hostdevd_dra_health_streams",
                        "Kubelet's open DRA resource health streams (NodeWatchResources).");
    p->health_sent = metrics_one(m, METRICS_COUNTER, "hostdevd_dra_health_reports_total",
                                 "Device health lists sent to kubelet.");
}

struct draplugin *draplugin_new(const struct draplugin_config *cfg)
{
    struct draplugin *p = calloc(1, sizeof(*p));
    char kd[PATH_MAX];
    if (!p)
        return NULL;
    p->cfg = *cfg;
    if (!realpath(cfg->kubelet_dir, kd))
        (void)snprintf(kd, sizeof(kd), "%s", cfg->kubelet_dir);
    fmt_path(p->plugin_dir, sizeof(p->plugin_dir), "%s/plugins/%s", kd, DRASLICES_DRIVER);
    fmt_path(p->socket, sizeof(p->socket), "%s/dra.sock", p->plugin_dir);
    fmt_path(p->reg_socket, sizeof(p->reg_socket), "%s/plugins_registry/%s-reg.sock", kd,
             DRASLICES_DRIVER);
    (void)snprintf(p->ck_path, sizeof(p->ck_path), "%s/checkpoint.json", p->plugin_dir);
    (void)snprintf(p->cdi_dir, sizeof(p->cdi_dir), "%s", cfg->cdi_dir);
    p->pci_devices = manager_cache(cfg->env.mgr, &kind_pcidevices);
    p->vgpus = manager_cache(cfg->env.mgr, &kind_vgpudevices);
    p->health = manager_part(cfg->env.mgr, &health_part);
    ev_timer_init(&p->health_timer, on_health_timer, DRAPLUGIN_HEALTH_PERIOD,
                  DRAPLUGIN_HEALTH_PERIOD);
    p->health_timer.data = p;
    char instance[300];
    (void)snprintf(instance, sizeof(instance), "hostdevd-agent-%s", cfg->env.node_name);
    struct kube_recorder_config rc = {.controller = "hostdevd.io/agent", .instance = instance};
    p->events = kube_recorder_new(cfg->env.loop, cfg->env.http, &rc);
    if (!cfg->bind || !cfg->worker || !cfg->ledger || !p->events) {
        log_error("Cannot make the DRA plugin", KV_ERRNO(-EINVAL));
        draplugin_free(p);
        return NULL;
    }
    register_metrics(p);
    return p;
}

static int load_checkpoint(struct draplugin *p)
{
    FILE *f = fopen(p->ck_path, "re");
    struct err e = {""};
    if (!f) {
        int r = -errno;
        if (r != -ENOENT) {
            log_error("Cannot read the DRA checkpoint", KV_STR("path", p->ck_path), KV_ERRNO(r));
            return r;
        }
        return (p->ck = draprep_checkpoint_new()) ? 0 : -ENOMEM;
    }
    struct buf b;
    char chunk[8192];
    size_t n;
    buf_init(&b, 64u << 20);
    int r = 0;
    while (r == 0 && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        r = buf_add(&b, chunk, n);
    (void)fclose(f);
    if (r == 0)
        r = draprep_checkpoint_parse(buf_str(&b) ? buf_str(&b) : "", &p->ck, &e);
    buf_free(&b);
    if (r < 0) {
        /* Kept for a person to read: its originals are not guessed. */
        char bad[PATH_MAX + 64];
        (void)snprintf(bad, sizeof(bad), "%s.bad", p->ck_path);
        (void)rename(p->ck_path, bad);
        log_error("The DRA checkpoint is malformed: set aside, starting empty", KV_STR("path", bad),
                  KV_STR("message", e.msg));
        return (p->ck = draprep_checkpoint_new()) ? 0 : -ENOMEM;
    }
    return 0;
}

static int draplugin_start(void *self)
{
    struct draplugin *p = self;
    const struct grpc_method dra[] = {{DRAAPI_PREPARE, false, on_prepare, p},
                                      {DRAAPI_UNPREPARE, false, on_unprepare, p},
                                      {DRAAPI_WATCH_HEALTH, true, on_watch_health, p}};
    const struct grpc_method reg[] = {{DRAAPI_GET_INFO, false, on_get_info, p},
                                      {DRAAPI_NOTIFY, false, on_notify, p}};
    struct err e = {""};
    char dir[PATH_MAX];
    struct stat st;
    (void)snprintf(dir, sizeof(dir), "%s", p->reg_socket);
    *strrchr(dir, '/') = '\0';
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        /* No kubelet here (kubelet makes its registry when it starts, before any agent Pod). */
        log_warning("No kubelet plugin registry: the DRA plugin is not served", KV_STR("dir", dir),
                    KV_STR("hint", "--kubelet-dir: kubelet's root directory"));
        p->started = true;
        return 0;
    }
    int r = mkdir_p(p->plugin_dir);
    if (r < 0) {
        log_error("Cannot make the DRA plugin's directories", KV_STR("dir", p->plugin_dir),
                  KV_ERRNO(r));
        return r;
    }
    if ((r = load_checkpoint(p)) < 0)
        return r;
    sync_ledger(p);
    metrics_set(p->claims_gauge, cJSON_GetArraySize(json_field(p->ck, "claims")));
    r = grpc_server_new(p->cfg.env.loop, p->socket, dra, 3, &p->srv, &e);
    if (r == 0) /* registration last: kubelet dials the DRA socket at once */
        r = grpc_server_new(p->cfg.env.loop, p->reg_socket, reg, 2, &p->reg, &e);
    if (r < 0) {
        log_error("Cannot serve the DRA plugin", KV_STR("message", e.msg));
        return r;
    }
    p->started = true;
    log_info("Serving the DRA plugin", KV_STR("driver", DRASLICES_DRIVER),
             KV_STR("socket", p->socket), KV_STR("registration", p->reg_socket),
             KV_INT("preparedClaims", cJSON_GetArraySize(json_field(p->ck, "claims"))));
    return 0;
}

static bool draplugin_ready(struct buf *why, void *userdata)
{
    const struct draplugin *p = userdata;
    if (!p->started)
        (void)buf_printf(why, "the DRA plugin does not serve yet");
    return p->started;
}

static void draplugin_stop(void *userdata)
{
    struct draplugin *p = userdata;
    p->stopping = true;
    /* No new registration: kubelet stops sending calls (the DRA socket stays for those in
     * flight). */
    p->reg = grpc_server_free(p->reg);
    kube_recorder_flush(p->events);
}

static int draplugin_in_flight(void *userdata)
{
    const struct draplugin *p = userdata;
    return p->calls + (int)kube_recorder_in_flight(p->events);
}

static void draplugin_free(void *userdata)
{
    struct draplugin *p = userdata;
    if (!p)
        return;
    bool served = p->srv != NULL;
    p->reg = grpc_server_free(p->reg);
    p->srv = grpc_server_free(p->srv); /* (cancels the health streams) */
    ev_timer_stop(p->cfg.env.loop, &p->health_timer);
    if (served) {
        /* Nothing of ours left in kubelet's plugins directory once we are gone (helm uninstall
         * left it empty): only empty directories go; a checkpoint of prepared claims or a
         * metadata file keeps them for the next agent. */
        char meta[PATH_MAX + 32];
        (void)snprintf(meta, sizeof(meta), "%s/dra-device-metadata", p->plugin_dir);
        (void)rmdir(meta);
        (void)rmdir(p->plugin_dir);
    }
    cJSON_Delete(p->ck);
    p->events = kube_recorder_free(p->events);
    free(p);
}

static void *make(const struct part_env *env)
{
    struct draplugin_config c = {.env = *env,
                                 .worker = manager_worker(env->mgr),
                                 .bind = manager_part(env->mgr, &pcibind_env_part),
                                 .kubelet_dir = env->opt->kubelet_dir,
                                 .cdi_dir = env->opt->cdi_dir,
                                 .devices = manager_part(env->mgr, &pcidevices_part),
                                 .ledger = manager_part(env->mgr, &ledger_part)};
    return draplugin_new(&c);
}

static const struct watch watches[] = {
        {.topic = &health_changed, .map = on_health_changed},
        {.topic = &pcidevices_scanned, .map = on_health_changed},
        {0},
};

const struct part_ops draplugin_part = {.name = "draplugin",
                                        .make = make,
                                        .watches = watches,
                                        .start = draplugin_start,
                                        .ready = draplugin_ready,
                                        .stop = draplugin_stop,
                                        .in_flight = draplugin_in_flight,
                                        .free = draplugin_free};
