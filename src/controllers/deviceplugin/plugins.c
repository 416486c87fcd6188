/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/deviceplugin/plugins.c - the agent's kubelet device plugins (see plugins.h): what is
 * offered (from the caches), one plugin per resource (gRPC server, registration, ListAndWatch
 * streams, the answers), and the watch on kubelet's directory.
 */
#include "controllers/deviceplugin/plugins.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <ev.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/log.h"
#include "base/map.h"
#include "base/metrics.h"
#include "controllers/binding/ledger.h"
#include "controllers/deviceplugin/devplugin.h"
#include "controllers/health/health.h"
#include "controllers/objects/caches.h"
#include "controllers/objects/kinds.h"
#include "controllers/objects/mdevobj.h"
#include "controllers/objects/pciobj.h"
#include "controllers/objects/usbobj.h"
#include "controllers/runtime/manager.h"
#include "controllers/runtime/part.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/names.h"
#include "kubelet/dpapi.h"
#include "kubelet/grpc.h"
#include "node/sysfs.h"

static void plugins_free(void *userdata);

#define KUBELET_SOCKET   "kubelet.sock"
#define REGISTER_TIMEOUT 5.0
/* kubelet.sock appears (inotify) when kubelet binds it, a moment before it listens: a
 * registration then is refused, and the first retry comes soon. */
#define RETRY_FIRST 0.1
#define RETRY_MAX   30.0
#define QEMU_UID    107 /* KubeVirt's non-root qemu user (util.NonRootUID) */

/* One offered device; `d`'s pointers lead into its own fields (pdev_link after a copy). */
struct pdev {
    struct devplugin_dev d;
    bool healthy;
    char id[254], address[20], cdev[32], dev_path[32]; /* id: an mdev's UUID */
};

struct offer { /* what one resource offers now */
    struct pdev *devs;
    size_t n;
};

struct stream { /* a ListAndWatch call */
    struct grpc_call *call;
    struct plugin *pl;
    struct stream *next;
};

struct plugin {
    struct plugins *ps;
    char resource[320];
    char socket_name[128], socket_path[PATH_MAX];
    struct grpc_server *srv;
    struct pdev *devs;
    size_t n;
    struct stream *streams;
    bool registering, registered, dead;
    double retry_in;
    ev_timer retry;
    char last_failure[160]; /* "<status> <message>" of the last refused registration */
};

struct plugins {
    struct plugins_config cfg;
    char dir[4096];              /* cfg.dir's copy */
    struct caches caches;        /* the process's */
    struct kube_informer *vgpus; /* the process's VGPUDevices of this node */
    struct ledger *ledger;       /* who holds each device (binding/ledger.h); may be NULL */
    struct health *health;       /* the node's device health (health/health.h); may be NULL */
    struct map *by_resource;     /* resource -> struct plugin */
    int sysfs_fd;
    int inotify_fd;
    ev_io inotify_io;
    ev_timer sync_timer;
    bool stopping;
    bool no_kubelet_said; /* "kubelet is not running" said, until kubelet.sock is seen */
    struct metrics_series *registrations, *register_errors, *allocations, *plugins, *devices;
};

static void pdev_link(struct pdev *p)
{
    p->d.id = p->id;
    p->d.address = p->address;
    p->d.vfio_cdev = p->cdev;
    p->d.dev_path = p->dev_path;
}

static int int_field(const cJSON *o, const char *name, int dflt)
{
    const cJSON *v = json_field(o, name);
    return cJSON_IsNumber(v) ? v->valueint : dflt;
}

/* --- what is offered -------------------------------------------------------------------------- */

/* Whether the health store has nothing against the PCI device at `address` (NULL: not PCI). */
static bool device_healthy(const struct plugins *p, const char *address)
{
    struct health_state s;
    return health_get(p->health, address, &s);
}

static void offer_free(void *v)
{
    struct offer *o = v;
    free(o->devs);
    free(o);
}

static struct pdev *offer_add(struct map *offers, const char *resource)
{
    struct offer *o = map_get(offers, resource);
    if (!o) {
        _cleanup_free_ struct offer *n = calloc(1, sizeof(*n));
        if (!n || map_put(offers, resource, n) < 0)
            return NULL;
        o = TAKE_PTR(n); /* the map's now */
    }
    struct pdev *d = realloc(o->devs, (o->n + 1) * sizeof(*d));
    if (!d)
        return NULL;
    o->devs = d;
    d = &o->devs[o->n++];
    *d = (struct pdev){.d = {.numa_node = -1, .iommu_group = -1}};
    return d;
}

/* The iommufd cdev of a PCI device bound to vfio-pci or of an mdev ("vfio0"), or "": in
 * `device`'s vfio-dev/ (bus/pci/devices/<address>, bus/mdev/devices/<uuid>). Only one with a `dev`
 * attribute is a character device: kernels 6.1 to 6.5 (and later ones without
 * CONFIG_VFIO_DEVICE_CDEV) list vfio-dev/vfio0 but make no /dev/vfio/devices/vfio0, and a
 * container asked to have a device that does not exist never starts. */
static void read_cdev(const struct plugins *p, const char *device, char *buf, size_t size)
{
    char dir[128], **names = NULL;
    size_t n = 0;
    buf[0] = '\0';
    (void)snprintf(dir, sizeof(dir), "%s/vfio-dev", device);
    if (node_sysfs_list(p->sysfs_fd, dir, &names, &n) == 0 && n > 0) {
        char dev[192], majmin[32];
        (void)snprintf(dev, sizeof(dev), "%s/%s/dev", dir, names[0]);
        if (node_sysfs_read(p->sysfs_fd, dev, majmin, sizeof(majmin)) >= 0 && majmin[0])
            (void)snprintf(buf, size, "%s", names[0]);
    }
    node_sysfs_names_free(names);
}

static void add_pci(struct plugins *p, struct map *offers, const char *name, const cJSON *claim)
{
    const cJSON *dev = kube_informer_get(p->caches.pci_devices, name);
    const char *address = pciobj_address(claim);
    char resource[320];
    if (!pciobj_bound(claim) || !address || !dev ||
        !pciobj_resource(claim, dev, name, resource, sizeof(resource)))
        return;
    const cJSON *ds = json_field(dev, "status");
    struct pdev *d = offer_add(offers, resource);
    if (!d)
        return;
    (void)snprintf(d->id, sizeof(d->id), "%s", address);
    (void)snprintf(d->address, sizeof(d->address), "%s", address);
    d->d.kind = DEVPLUGIN_PCI;
    const char *group = json_str(ds, "iommuGroup");
    d->d.iommu_group = group && group[0] ? (int)strtol(group, NULL, 10) : -1;
    d->d.numa_node = int_field(ds, "numaNode", -1);
    d->healthy =
            json_same(json_str(ds, "kernelDriverInUse"), "vfio-pci") && device_healthy(p, address);
    char sys[64];
    (void)snprintf(sys, sizeof(sys), "bus/pci/devices/%s", address);
    read_cdev(p, sys, d->cdev, sizeof(d->cdev));
}

/* Whether mdev `uuid` exists on the node (/sys/bus/mdev/devices/<uuid>): gone after a reboot
 * until the agent creates it again, or removed behind the agent's back. */
static bool mdev_exists(const struct plugins *p, const char *uuid)
{
    char path[96];
    (void)snprintf(path, sizeof(path), "bus/mdev/devices/%s", uuid);
    return node_sysfs_check_dir(p->sysfs_fd, path) == 0;
}

static void add_mdev(struct plugins *p, struct map *offers, const cJSON *vgpu)
{
    const char *uuid = NULL, *resource = NULL;
    if (!json_same(json_str(json_field(vgpu, "spec"), "nodeName"), p->cfg.env.node_name) ||
        !mdevobj_offered(vgpu, &uuid, &resource) || !uuid || !resource)
        return;
    struct pdev *d = offer_add(offers, resource);
    if (!d)
        return;
    (void)snprintf(d->id, sizeof(d->id), "%s", uuid);
    d->d.kind = DEVPLUGIN_MDEV;
    d->d.iommu_group = mdevobj_iommu_group(vgpu);
    /* an instance a DRA claim holds is not given out here: Unhealthy, kubelet allocates it to no
     * pod (binding/ledger.h); nor one of an unhealthy PCI parent */
    d->healthy = d->d.iommu_group >= 0 && mdev_exists(p, uuid) &&
                 !ledger_held(p->ledger, uuid, LEDGER_DRA, NULL, NULL, 0) &&
                 device_healthy(p, mdevobj_pci_parent_in_use(vgpu));
    char sys[96];
    (void)snprintf(sys, sizeof(sys), "bus/mdev/devices/%s", uuid);
    read_cdev(p, sys, d->cdev, sizeof(d->cdev));
}

static void add_usb(struct plugins *p, struct map *offers, const char *name, const cJSON *claim)
{
    char node[KUBE_NAME_MAX + 1];
    const cJSON *dev = kube_informer_get(p->caches.usb_devices, name);
    const cJSON *ds = json_field(dev, "status");
    const char *resource = json_str(ds, "resourceName"), *path = json_str(ds, "devicePath");
    if (kube_names_usbdevice_node(name, node, sizeof(node)) < 0 ||
        strcmp(node, p->cfg.env.node_name) != 0 || !usbobj_claim_holds(claim) || !resource || !path)
        return;
    struct pdev *d = offer_add(offers, resource);
    if (!d)
        return;
    (void)snprintf(d->id, sizeof(d->id), "%s", name);
    (void)snprintf(d->dev_path, sizeof(d->dev_path), "%s", path);
    d->d.kind = DEVPLUGIN_USB;
    d->d.busnum = int_field(ds, "busNum", 0);
    d->d.devnum = int_field(ds, "devNum", 0);
    d->healthy = !usbobj_device_orphaned(dev);
}

static struct map *compute_offers(struct plugins *p)
{
    struct map *offers = map_new(offer_free);
    size_t pos = 0;
    const char *key;
    const cJSON *obj;
    while (offers && p->caches.pci_claims &&
           kube_informer_next(p->caches.pci_claims, &pos, &key, &obj))
        add_pci(p, offers, key, obj);
    pos = 0;
    while (offers && p->caches.usb_claims &&
           kube_informer_next(p->caches.usb_claims, &pos, &key, &obj))
        add_usb(p, offers, key, obj);
    pos = 0;
    while (offers && p->vgpus && kube_informer_next(p->vgpus, &pos, &key, &obj))
        add_mdev(p, offers, obj);
    return offers;
}

/* --- ListAndWatch ----------------------------------------------------------------------------- */

static int encode_list(const struct plugin *pl, struct buf *out)
{
    struct dpapi_device *list = calloc(pl->n ? pl->n : 1, sizeof(*list));
    if (!list)
        return -ENOMEM;
    for (size_t i = 0; i < pl->n; i++)
        list[i] = (struct dpapi_device){.id = pl->devs[i].id,
                                        .healthy = pl->devs[i].healthy,
                                        .numa_node = pl->devs[i].d.numa_node};
    int r = dpapi_encode_list(list, pl->n, out);
    free(list);
    return r;
}

static void send_list(struct plugin *pl, struct grpc_call *call)
{
    _cleanup_buf_ struct buf b;
    buf_init(&b, GRPC_MAX_MESSAGE);
    if (encode_list(pl, &b) == 0)
        (void)grpc_call_reply(call, (const uint8_t *)buf_str(&b), b.len);
}

static void push_lists(struct plugin *pl)
{
    for (struct stream *s = pl->streams; s; s = s->next)
        send_list(pl, s->call);
}

static void on_stream_cancel(struct grpc_call *call, void *ud)
{
    struct plugin *pl = ud;
    (void)call;
    for (struct stream **sp = &pl->streams; *sp; sp = &(*sp)->next) {
        if ((*sp)->call == call) {
            struct stream *s = *sp;
            *sp = s->next;
            free(s);
            return;
        }
    }
}

static void on_list_and_watch(struct grpc_call *call, const uint8_t *msg, size_t len, void *ud)
{
    struct plugin *pl = ud;
    struct stream *s = calloc(1, sizeof(*s));
    (void)msg;
    (void)len;
    if (!s) {
        grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    *s = (struct stream){.call = call, .pl = pl, .next = pl->streams};
    pl->streams = s;
    grpc_call_on_cancel(call, on_stream_cancel, pl);
    log_info("kubelet watches the devices", KV_STR("resource", pl->resource),
             KV_INT("devices", pl->n));
    send_list(pl, call);
}

/* --- unary answers ---------------------------------------------------------------------------- */

static void reply(struct grpc_call *call, const struct buf *b)
{
    if (grpc_call_reply(call, (const uint8_t *)buf_str(b), b->len) < 0)
        grpc_call_finish(call, GRPC_INTERNAL, "cannot send the answer");
    else
        grpc_call_finish(call, GRPC_OK, NULL);
}

static void on_options(struct grpc_call *call, const uint8_t *msg, size_t len, void *ud)
{
    struct dpapi_options o = {.pre_start_required = true,
                              .get_preferred_allocation_available = true};
    _cleanup_buf_ struct buf b;
    (void)msg;
    (void)len;
    (void)ud;
    buf_init(&b, 64);
    if (dpapi_encode_options(&o, &b) < 0)
        grpc_call_finish(call, GRPC_INTERNAL, "cannot encode the options");
    else
        reply(call, &b);
}

static void chown_usb(const struct plugin *pl, const struct devplugin_alloc *a)
{
    char path[PATH_MAX];
    for (size_t i = 0; i < a->n_paths; i++) {
        if (strncmp(a->paths[i], "/dev/bus/usb/", 13) != 0)
            continue;
        (void)snprintf(path, sizeof(path), "%s%s", pl->ps->cfg.env.dev_root, a->paths[i] + 4);
        if (chown(path, QEMU_UID, QEMU_UID) < 0)
            log_warning("Cannot hand a USB device node to KubeVirt's qemu user",
                        KV_STR("path", path), KV_ERRNO(-errno));
    }
}

/* One container's answer into `c` (kv and specs point into `a`, `kv` and `specs`). */
static void container_response(const struct devplugin_alloc *a, struct dpapi_kv *kv,
                               struct dpapi_devspec *specs, struct dpapi_container_response *c)
{
    *kv = (struct dpapi_kv){.key = a->env_key, .value = buf_str(&a->env_value)};
    for (size_t i = 0; i < a->n_paths; i++)
        specs[i] = (struct dpapi_devspec){a->paths[i], a->paths[i], "mrw"};
    *c = (struct dpapi_container_response){kv, 1, specs, a->n_paths};
}

struct answer { /* an Allocate answer being built */
    struct devplugin_alloc *allocs;
    struct dpapi_kv *kvs;
    struct dpapi_devspec **specs;
    struct dpapi_container_response *resp;
    size_t n;
};

static void answer_done(struct answer *an)
{
    for (size_t i = 0; i < an->n; i++) {
        devplugin_alloc_done(&an->allocs[i]);
        free(an->specs[i]);
    }
    free(an->allocs);
    free(an->kvs);
    free(an->specs);
    free(an->resp);
}

/* One path at a time: an mdev a DRA claim holds is not given out (-EBUSY, the ledger's
 * message naming the claim). */
static int refuse_held(const struct plugin *pl, const struct dpapi_request *req, struct err *e)
{
    struct ledger_refusal why;
    for (size_t i = 0; pl->ps->ledger && i < req->n_containers; i++)
        for (size_t j = 0; j < req->containers[i].n; j++)
            if (ledger_check(pl->ps->ledger, req->containers[i].ids[j], LEDGER_DEVICE_PLUGIN,
                             pl->resource, &why) < 0)
                return err_set(e, -EBUSY, "%s", why.message);
    return 0;
}

/* The mdevs an Allocate gave out, in the ledger: a DRA claim of one is refused while a process
 * holds its group (the DRA plugin's check), and says the device plugin gave it out. */
static void record_given(const struct plugin *pl, const struct dpapi_request *req)
{
    for (size_t i = 0; pl->ps->ledger && i < req->n_containers; i++)
        for (size_t j = 0; j < req->containers[i].n; j++)
            for (size_t k = 0; k < pl->n; k++)
                if (pl->devs[k].d.kind == DEVPLUGIN_MDEV &&
                    strcmp(pl->devs[k].id, req->containers[i].ids[j]) == 0)
                    (void)ledger_hold(pl->ps->ledger, pl->devs[k].id, LEDGER_DEVICE_PLUGIN,
                                      pl->resource, pl->resource);
}

static int build_answer(struct plugin *pl, const struct dpapi_request *req, struct answer *an,
                        struct err *e)
{
    size_t n = req->n_containers;
    an->allocs = calloc(n ? n : 1, sizeof(*an->allocs));
    an->kvs = calloc(n ? n : 1, sizeof(*an->kvs));
    an->specs = calloc(n ? n : 1, sizeof(void *));
    an->resp = calloc(n ? n : 1, sizeof(*an->resp));
    if (!an->allocs || !an->kvs || !an->specs || !an->resp)
        return err_set(e, -ENOMEM, "out of memory");
    struct devplugin_dev *devs = calloc(pl->n ? pl->n : 1, sizeof(*devs));
    for (size_t i = 0; devs && i < pl->n; i++)
        devs[i] = pl->devs[i].d;
    int r = devs ? 0 : err_set(e, -ENOMEM, "out of memory");
    for (size_t i = 0; r == 0 && i < n; i++) {
        r = devplugin_allocate(pl->resource, devs, pl->n,
                               (const char *const *)req->containers[i].ids, req->containers[i].n,
                               &an->allocs[i], e);
        if (r < 0)
            break;
        an->n = i + 1;
        struct dpapi_devspec *specs = calloc(an->allocs[i].n_paths + 1, sizeof(*specs));
        if (!specs) {
            r = err_set(e, -ENOMEM, "out of memory");
            break;
        }
        an->specs[i] = specs;
        container_response(&an->allocs[i], &an->kvs[i], specs, &an->resp[i]);
        chown_usb(pl, &an->allocs[i]);
    }
    free(devs);
    return r;
}

static void on_allocate(struct grpc_call *call, const uint8_t *msg, size_t len, void *ud)
{
    struct plugin *pl = ud;
    _cleanup_buf_ struct buf b;
    struct answer an = {0};
    _cleanup_(dpapi_request_done) struct dpapi_request req = {0}; /* zeroed by a failed decoder */
    struct err e = {""};
    buf_init(&b, GRPC_MAX_MESSAGE);
    int r = dpapi_decode_allocate(msg, len, &req, &e);
    if (r == 0)
        r = refuse_held(pl, &req, &e);
    if (r == 0)
        r = build_answer(pl, &req, &an, &e);
    if (r == 0)
        r = dpapi_encode_allocate(an.resp, an.n, &b);
    if (r == 0) {
        record_given(pl, &req);
        metrics_inc(pl->ps->allocations);
        log_info("Allocated devices", KV_STR("resource", pl->resource),
                 KV_INT("containers", req.n_containers));
        reply(call, &b);
    } else {
        log_warning("Refused an Allocate", KV_STR("resource", pl->resource),
                    KV_STR("message", e.msg));
        grpc_call_finish(call,
                         r == -ENOENT  ? GRPC_NOT_FOUND
                         : r == -EBUSY ? GRPC_FAILED_PRECONDITION
                                       : GRPC_INVALID_ARGUMENT,
                         e.msg[0] ? e.msg : strerror(-r));
    }
    answer_done(&an); /* not a cleanup: clang-analyzer does not see cleanups (a false leak) */
}

static struct devplugin_dev *plain_devs(const struct plugin *pl)
{
    struct devplugin_dev *devs = calloc(pl->n ? pl->n : 1, sizeof(*devs));
    for (size_t i = 0; devs && i < pl->n; i++)
        devs[i] = pl->devs[i].d;
    return devs;
}

static int prefer_all(struct plugin *pl, const struct dpapi_request *req, struct dpapi_ids *out)
{
    struct devplugin_dev *devs = plain_devs(pl);
    int r = devs ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < req->n_containers; i++) {
        size_t size = (size_t)req->sizes[i];
        out[i].ids = calloc(size ? size : 1, sizeof(char *));
        if (!out[i].ids) {
            r = -ENOMEM;
            break;
        }
        out[i].n = devplugin_prefer(devs, pl->n, (const char *const *)req->containers[i].ids,
                                    req->containers[i].n,
                                    (const char *const *)req->must_include[i].ids,
                                    req->must_include[i].n, size, (const char **)out[i].ids);
    }
    free(devs);
    return r;
}

static void on_preferred(struct grpc_call *call, const uint8_t *msg, size_t len, void *ud)
{
    struct plugin *pl = ud;
    _cleanup_buf_ struct buf b;
    _cleanup_(dpapi_request_done) struct dpapi_request req = {0};
    struct err e = {""};
    buf_init(&b, GRPC_MAX_MESSAGE);
    int r = dpapi_decode_preferred(msg, len, &req, &e);
    struct dpapi_ids *out = r == 0 ? calloc(req.n_containers + 1, sizeof(*out)) : NULL;
    if (r == 0)
        r = out ? prefer_all(pl, &req, out) : -ENOMEM;
    if (r == 0)
        r = dpapi_encode_preferred(out, req.n_containers, &b);
    if (r == 0)
        reply(call, &b);
    else
        grpc_call_finish(call, GRPC_INVALID_ARGUMENT, e.msg[0] ? e.msg : strerror(-r));
    for (size_t i = 0; out && i < req.n_containers; i++)
        free(out[i].ids); /* (the IDs themselves are the request's) */
    free(out);
}

/* An mdev given out is still there and still ours: a DRA claim prepared with it since the
 * Allocate (the scheduler does not see this plugin's pods) takes it first. */
static int mdev_ready(const struct plugin *pl, const char *uuid, struct err *e)
{
    struct ledger_refusal why;
    if (!mdev_exists(pl->ps, uuid))
        return err_set(e, -ENODEV,
                       "mediated device %s does not exist on this node (any more): its "
                       "VGPUDevice's agent creates it again",
                       uuid);
    if (pl->ps->ledger &&
        ledger_check(pl->ps->ledger, uuid, LEDGER_DEVICE_PLUGIN, pl->resource, &why) < 0)
        return err_set(e, -ENODEV, "%s", why.message);
    return 0;
}

/* Whether device `id` is still where Allocate put it: a PCI device on vfio-pci, a USB node, an
 * mdev that exists. */
static int still_ready(const struct plugin *pl, const char *id, struct err *e)
{
    char path[PATH_MAX], link[256];
    for (size_t i = 0; i < pl->n; i++) {
        const struct pdev *d = &pl->devs[i];
        if (strcmp(d->id, id) != 0)
            continue;
        if (d->d.kind == DEVPLUGIN_USB) {
            struct stat st;
            (void)snprintf(path, sizeof(path), "%s%s", pl->ps->cfg.env.dev_root, d->dev_path + 4);
            return stat(path, &st) == 0 ? 0 : err_set(e, -ENODEV, "%s is gone", d->dev_path);
        }
        if (d->d.kind == DEVPLUGIN_MDEV)
            return mdev_ready(pl, d->id, e);
        (void)snprintf(path, sizeof(path), "bus/pci/devices/%s/driver", d->address);
        int r = node_sysfs_read_link(pl->ps->sysfs_fd, path, link, sizeof(link));
        if (r < 0 || strcmp(link, "vfio-pci") != 0)
            return err_set(e, -ENODEV, "device %s is no longer bound to vfio-pci", d->address);
        return 0;
    }
    return err_set(e, -ENOENT, "device %s is not offered as %s", id, pl->resource);
}

static void on_pre_start(struct grpc_call *call, const uint8_t *msg, size_t len, void *ud)
{
    struct plugin *pl = ud;
    _cleanup_(dpapi_request_done) struct dpapi_request req = {0};
    struct err e = {""};
    int r = dpapi_decode_pre_start(msg, len, &req, &e);
    for (size_t i = 0; r == 0 && i < req.containers[0].n; i++)
        r = still_ready(pl, req.containers[0].ids[i], &e);
    if (r == 0) {
        struct buf empty;
        buf_init(&empty, 1);
        reply(call, &empty);
    } else {
        log_warning("Refused PreStartContainer", KV_STR("resource", pl->resource),
                    KV_STR("message", e.msg));
        grpc_call_finish(call, r == -ENODEV ? GRPC_FAILED_PRECONDITION : GRPC_INVALID_ARGUMENT,
                         e.msg);
    }
}

/* --- a plugin's life -------------------------------------------------------------------------- */

static void register_plugin(struct plugin *pl);

static void plugin_free(struct plugin *pl)
{
    ev_timer_stop(pl->ps->cfg.env.loop, &pl->retry);
    pl->srv = grpc_server_free(pl->srv); /* cancels the streams: on_stream_cancel frees them */
    free(pl->devs);
    if (pl->registering)
        pl->dead = true; /* on_registered frees it */
    else
        free(pl);
}

static void retry_later(struct plugin *pl)
{
    pl->retry_in = pl->retry_in > 0 ? pl->retry_in * 2 : RETRY_FIRST;
    if (pl->retry_in > RETRY_MAX)
        pl->retry_in = RETRY_MAX;
    ev_timer_stop(pl->ps->cfg.env.loop, &pl->retry);
    ev_timer_set(&pl->retry, pl->retry_in, 0.);
    ev_timer_start(pl->ps->cfg.env.loop, &pl->retry);
}

static void on_registered(enum grpc_status status, const char *message, const uint8_t *resp,
                          size_t len, void *ud)
{
    struct plugin *pl = ud;
    (void)resp;
    (void)len;
    pl->registering = false;
    if (pl->dead) {
        free(pl);
        return;
    }
    if (status != GRPC_OK) {
        char failure[sizeof(pl->last_failure)];
        (void)snprintf(failure, sizeof(failure), "%d %s", (int)status, message ? message : "");
        bool repeat = strcmp(failure, pl->last_failure) == 0;
        (void)snprintf(pl->last_failure, sizeof(pl->last_failure), "%s", failure);
        metrics_inc(pl->ps->register_errors);
        retry_later(pl);
        if (repeat) /* the same refusal again: said once at warning level */
            log_v(1, "kubelet did not take the registration again; retrying",
                  KV_STR("resource", pl->resource), KV_INT("status", status),
                  KV_INT("retryInMilliseconds", (long long)(pl->retry_in * 1000)));
        else
            log_warning("kubelet did not take the registration; retrying (the same refusal "
                        "again is logged at -v 1)",
                        KV_STR("resource", pl->resource), KV_INT("status", status),
                        KV_STR("message", message ? message : ""),
                        KV_INT("retryInMilliseconds", (long long)(pl->retry_in * 1000)));
        return;
    }
    pl->last_failure[0] = 0;
    pl->registered = true;
    pl->retry_in = 0;
    ev_timer_stop(pl->ps->cfg.env.loop, &pl->retry);
    metrics_inc(pl->ps->registrations);
    log_info("Registered device plugin with kubelet", KV_STR("resource", pl->resource),
             KV_STR("socket", pl->socket_path));
}

static void register_plugin(struct plugin *pl)
{
    char kubelet[PATH_MAX];
    struct stat st;
    if (pl->registering || !pl->srv)
        return;
    (void)snprintf(kubelet, sizeof(kubelet), "%s/" KUBELET_SOCKET, pl->ps->cfg.dir);
    pl->registered = false;
    if (ev_is_active(&pl->ps->inotify_io) && (stat(kubelet, &st) < 0 || !S_ISSOCK(st.st_mode))) {
        /* no kubelet is a state: the directory's watch registers when kubelet.sock appears */
        if (!pl->ps->no_kubelet_said)
            log_info("kubelet is not running on this node (no kubelet.sock): the device plugins "
                     "register when it appears",
                     KV_STR("kubelet", kubelet));
        pl->ps->no_kubelet_said = true;
        ev_timer_stop(pl->ps->cfg.env.loop, &pl->retry);
        return;
    }
    pl->ps->no_kubelet_said = false;
    _cleanup_buf_ struct buf b;
    buf_init(&b, 4096);
    struct dpapi_options o = {.pre_start_required = true,
                              .get_preferred_allocation_available = true};
    int r = dpapi_encode_register(pl->socket_name, pl->resource, &o, &b);
    if (r == 0)
        r = grpc_unary(pl->ps->cfg.env.loop, kubelet, DPAPI_REGISTER, (const uint8_t *)buf_str(&b),
                       b.len, REGISTER_TIMEOUT, on_registered, pl);
    if (r == 0) {
        /* this registration replaces a retry still pending (kubelet.sock was created while an
         * attempt to reach the kubelet before waited): a second one would be refused by kubelet
         * ("device plugin already connected") and retried for ever */
        ev_timer_stop(pl->ps->cfg.env.loop, &pl->retry);
        pl->registering = true;
        return;
    }
    log_v(1, "Cannot reach kubelet yet", KV_STR("resource", pl->resource),
          KV_STR("kubelet", kubelet), KV_ERRNO(r));
    retry_later(pl);
}

static void plugin_serve(struct plugin *pl);

static void on_retry(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct plugin *pl = w->data;
    (void)loop;
    (void)revents;
    if (pl->srv)
        register_plugin(pl);
    else
        plugin_serve(pl);
}

/* Serves a new socket (kubelet removed ours, or the first start) and registers. */
static void plugin_serve(struct plugin *pl)
{
    const struct grpc_method methods[] = {
            {DPAPI_OPTIONS, false, on_options, pl},
            {DPAPI_LIST_AND_WATCH, true, on_list_and_watch, pl},
            {DPAPI_ALLOCATE, false, on_allocate, pl},
            {DPAPI_PREFERRED, false, on_preferred, pl},
            {DPAPI_PRE_START, false, on_pre_start, pl},
    };
    struct err e = {""};
    pl->srv = grpc_server_free(pl->srv);
    int r = grpc_server_new(pl->ps->cfg.env.loop, pl->socket_path, methods,
                            sizeof(methods) / sizeof(methods[0]), &pl->srv, &e);
    if (r < 0) {
        log_error("Cannot serve the device plugin", KV_STR("resource", pl->resource),
                  KV_STR("socket", pl->socket_path), KV_STR("message", e.msg));
        retry_later(pl); /* (register_plugin does nothing without a server: serve again) */
        return;
    }
    pl->retry_in = 0;
    register_plugin(pl);
}

static struct plugin *plugin_new(struct plugins *ps, const char *resource)
{
    struct err e = {""};
    _cleanup_free_ struct plugin *pl = calloc(1, sizeof(*pl));
    if (!pl)
        return NULL;
    pl->ps = ps;
    (void)snprintf(pl->resource, sizeof(pl->resource), "%s", resource);
    if (devplugin_socket_name(ps->cfg.dir, resource, pl->socket_name, sizeof(pl->socket_name), &e) <
        0) {
        log_error("Cannot offer a resource", KV_STR("resource", resource),
                  KV_STR("message", e.msg));
        return NULL;
    }
    (void)snprintf(pl->socket_path, sizeof(pl->socket_path), "%s/%s", ps->cfg.dir, pl->socket_name);
    ev_timer_init(&pl->retry, on_retry, RETRY_FIRST, 0.);
    pl->retry.data = pl;
    return TAKE_PTR(pl);
}

/* Whether the offer differs from what the plugin offers now (IDs, health, topology). */
static bool changed(const struct plugin *pl, const struct offer *o)
{
    if (pl->n != o->n)
        return true;
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(pl->devs[i].id, o->devs[i].id) != 0 ||
            pl->devs[i].healthy != o->devs[i].healthy ||
            pl->devs[i].d.numa_node != o->devs[i].d.numa_node)
            return true;
    return false;
}

/* Hands the offer's devices to the plugin (taking them) and tells kubelet when they changed. */
static void plugin_offer(struct plugin *pl, struct offer *o)
{
    bool news = changed(pl, o);
    free(pl->devs);
    pl->devs = o->devs;
    pl->n = o->n;
    o->devs = NULL;
    o->n = 0;
    for (size_t i = 0; i < pl->n; i++)
        pdev_link(&pl->devs[i]);
    if (news) {
        log_info("Offering devices", KV_STR("resource", pl->resource), KV_INT("devices", pl->n));
        push_lists(pl);
    }
}

/* --- the set of plugins ----------------------------------------------------------------------- */

/* A resource nobody offers any more keeps its plugin with an empty list (kubelet withdraws the
 * devices at once: allocatable 0), ready for the next claim of it; plugins are not stopped while
 * the agent runs (a closed socket would leave kubelet to mark the devices unhealthy only after
 * its grace period). */
static void empty_unoffered(struct plugins *ps, const struct map *offers)
{
    const char *key = NULL;
    void *v = NULL;
    size_t pos = 0;
    while (map_next(ps->by_resource, &pos, &key, &v)) {
        struct plugin *pl = v;
        if (map_get(offers, key) || pl->n == 0)
            continue;
        log_info("No device offered as this resource any more", KV_STR("resource", pl->resource));
        free(pl->devs);
        pl->devs = NULL;
        pl->n = 0;
        push_lists(pl);
    }
}

static void sync_now(struct plugins *ps)
{
    struct map *offers = compute_offers(ps);
    const char *key;
    void *v;
    size_t pos = 0, devices = 0;
    if (!offers)
        return;
    empty_unoffered(ps, offers);
    while (map_next(offers, &pos, &key, &v)) {
        struct plugin *pl = map_get(ps->by_resource, key);
        if (!pl && (pl = plugin_new(ps, key)) && map_put(ps->by_resource, key, pl) < 0) {
            plugin_free(pl);
            pl = NULL;
        }
        if (!pl)
            continue;
        devices += ((struct offer *)v)->n;
        plugin_offer(pl, v);
        if (!pl->srv && !pl->registering && !ev_is_active(&pl->retry))
            plugin_serve(pl);
    }
    map_free(offers);
    metrics_set(ps->plugins, (double)map_size(ps->by_resource));
    metrics_set(ps->devices, (double)devices);
}

static void on_sync(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct plugins *ps = w->data;
    (void)loop;
    (void)revents;
    if (!ps->stopping)
        sync_now(ps);
}

void plugins_sync(struct plugins *ps)
{
    if (ps && !ps->stopping && !ev_is_active(&ps->sync_timer))
        ev_timer_start(ps->cfg.env.loop, &ps->sync_timer);
}

/* --- kubelet's directory ---------------------------------------------------------------------- */

static void restart_all(struct plugins *ps, const char *why)
{
    const char *key = NULL;
    void *v = NULL;
    size_t pos = 0;
    log_info("kubelet restarted; registering the device plugins again", KV_STR("why", why),
             KV_INT("plugins", map_size(ps->by_resource)));
    while (map_next(ps->by_resource, &pos, &key, &v))
        plugin_serve(v);
}

static void on_dir_event(struct plugins *ps, const struct inotify_event *ev)
{
    struct stat st;
    const char *key = NULL;
    void *v = NULL;
    size_t pos = 0;
    if (!ev->len)
        return;
    if (strcmp(ev->name, KUBELET_SOCKET) == 0 && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
        restart_all(ps, "kubelet.sock created");
        return;
    }
    if (!(ev->mask & (IN_DELETE | IN_MOVED_FROM)))
        return;
    while (map_next(ps->by_resource, &pos, &key, &v)) {
        struct plugin *pl = v;
        /* our own replacement of a stale socket shows as a delete too: only a socket that is
         * really gone counts */
        if (strcmp(pl->socket_name, ev->name) == 0 && stat(pl->socket_path, &st) < 0) {
            log_info("Our device plugin socket was removed (kubelet restarted); serving again",
                     KV_STR("resource", pl->resource));
            plugin_serve(pl);
        }
    }
}

static void on_inotify(struct ev_loop *loop, ev_io *w, int revents)
{
    struct plugins *ps = w->data;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    (void)loop;
    (void)revents;
    for (;;) {
        ssize_t n = read(ps->inotify_fd, buf, sizeof(buf));
        if (n <= 0)
            return;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
            if (ev->mask & IN_Q_OVERFLOW)
                restart_all(ps, "inotify queue overflowed");
            else
                on_dir_event(ps, ev);
            p += sizeof(*ev) + ev->len;
        }
    }
}

static int watch_dir(struct plugins *ps)
{
    ps->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (ps->inotify_fd < 0)
        return -errno;
    if (inotify_add_watch(ps->inotify_fd, ps->cfg.dir,
                          IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM) < 0)
        return -errno;
    ev_io_init(&ps->inotify_io, on_inotify, ps->inotify_fd, EV_READ);
    ps->inotify_io.data = ps;
    ev_io_start(ps->cfg.env.loop, &ps->inotify_io);
    return 0;
}

/* --- life ------------------------------------------------------------------------------------- */

static void plugin_map_free(void *v)
{
    plugin_free(v);
}

struct plugins *plugins_new(const struct plugins_config *cfg)
{
    struct plugins *ps = calloc(1, sizeof(*ps));
    if (!ps)
        return NULL;
    ps->cfg = *cfg;
    (void)snprintf(ps->dir, sizeof(ps->dir), "%s", cfg->dir);
    ps->cfg.dir = ps->dir;
    ps->caches = (struct caches){manager_cache(cfg->env.mgr, &kind_pcideviceclaims),
                                 manager_cache(cfg->env.mgr, &kind_pcidevices),
                                 manager_cache(cfg->env.mgr, &kind_usbdeviceclaims),
                                 manager_cache(cfg->env.mgr, &kind_usbdevices)};
    ps->vgpus = manager_cache(cfg->env.mgr, &kind_vgpudevices);
    ps->ledger = manager_part(cfg->env.mgr, &ledger_part);
    ps->health = manager_part(cfg->env.mgr, &health_part);
    ps->inotify_fd = -1;
    ps->sysfs_fd = node_sysfs_open_root(cfg->env.sysfs_root);
    ps->by_resource = map_new(plugin_map_free);
    if (ps->sysfs_fd < 0 || !ps->by_resource) {
        plugins_free(ps);
        return NULL;
    }
    ev_timer_init(&ps->sync_timer, on_sync, 0., 0.);
    ps->sync_timer.data = ps;
    struct metrics *m = cfg->env.metrics;
    ps->registrations = metrics_one(m, METRICS_COUNTER, "hostdevd_plugin_registrations_total",
                                    "Device plugin registrations kubelet accepted.");
    ps->register_errors = metrics_one(m, METRICS_COUNTER, "hostdevd_plugin_register_errors_total",
                                      "Device plugin registrations that failed (retried).");
    ps->allocations = metrics_one(m, METRICS_COUNTER, "hostdevd_plugin_allocations_total",
                                  "Allocate calls answered with devices.");
    ps->plugins = metrics_one(m, METRICS_GAUGE, "hostdevd_plugins", "Device plugins served.");
    ps->devices =
            metrics_one(m, METRICS_GAUGE, "hostdevd_plugin_devices", "Devices offered to kubelet.");
    return ps;
}

/* A claim or a device changed: the offer (a device's health is its driver; a claimed one is
 * offered). */
static void on_change(void *self, const struct watch_event *ev)
{
    (void)ev;
    plugins_sync(self);
}

static void *make(const struct part_env *env)
{
    char dir[4096];
    (void)snprintf(dir, sizeof(dir), "%s/device-plugins", env->opt->kubelet_dir);
    struct plugins_config c = {.env = *env, .dir = dir};
    return plugins_new(&c);
}

/* A DRA claim took an instance or let it go: its health. */
static void on_ledger(void *self, const struct watch_event *ev)
{
    if (*(const enum ledger_path *)ev->data == LEDGER_DRA)
        plugins_sync(self);
}

static const struct watch watches[] = {
        {.kind = &kind_pcidevices, .map = on_change},
        {.kind = &kind_usbdevices, .map = on_change},
        {.kind = &kind_usbdeviceclaims, .map = on_change},
        {.kind = &kind_pcideviceclaims, .map = on_change},
        {.kind = &kind_vgpudevices, .map = on_change},
        {.topic = &ledger_changed, .map = on_ledger},
        {.topic = &health_changed, .map = on_change}, /* a device's health: sent at once */
        {0},
};

static int plugins_start(void *self)
{
    struct plugins *ps = self;
    int r = watch_dir(ps);
    if (r < 0)
        log_warning("Cannot watch kubelet's device-plugin directory; kubelet restarts are noticed "
                    "only when a registration fails",
                    KV_STR("dir", ps->cfg.dir), KV_ERRNO(r));
    plugins_sync(ps);
    return 0;
}

static void plugins_stop(void *userdata)
{
    struct plugins *ps = userdata;
    ps->stopping = true;
    ev_timer_stop(ps->cfg.env.loop, &ps->sync_timer);
}

static void plugins_free(void *userdata)
{
    struct plugins *ps = userdata;
    if (!ps)
        return;
    ps->stopping = true;
    ev_timer_stop(ps->cfg.env.loop, &ps->sync_timer);
    if (ps->inotify_fd >= 0) {
        ev_io_stop(ps->cfg.env.loop, &ps->inotify_io);
        close(ps->inotify_fd);
    }
    map_free(ps->by_resource);
    if (ps->sysfs_fd >= 0)
        close(ps->sysfs_fd);
    free(ps);
}

const struct part_ops plugins_part = {.name = "deviceplugins",
                                      .make = make,
                                      .watches = watches,
                                      .start = plugins_start,
                                      .stop = plugins_stop,
                                      .free = plugins_free};
