/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubelet/dpapi.c - kubelet's device-plugin API v1beta1 messages (dpapi.h) through protobuf-c and
 * the generated kubelet/deviceplugin.pb-c.h.
 */
#include "kubelet/dpapi.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kubelet/deviceplugin.pb-c.h"
#include "kubelet/pbmsg.h"

/* --- encoding ----------------------------------------------------------------------------------
 */

static void fill_options(const struct dpapi_options *o, V1beta1__DevicePluginOptions *m)
{
    v1beta1__device_plugin_options__init(m);
    m->pre_start_required = o && o->pre_start_required;
    m->get_preferred_allocation_available = o && o->get_preferred_allocation_available;
}

int dpapi_encode_register(const char *endpoint, const char *resource_name,
                          const struct dpapi_options *opts, struct buf *out)
{
    V1beta1__DevicePluginOptions o;
    fill_options(opts, &o);
    const V1beta1__RegisterRequest m = {
            .base = PROTOBUF_C_MESSAGE_INIT(&v1beta1__register_request__descriptor),
            .version = (char *)DPAPI_VERSION,
            .endpoint = (char *)endpoint,
            .resource_name = (char *)resource_name,
            .options = &o,
    };
    return pack(&m.base, out);
}

int dpapi_encode_options(const struct dpapi_options *opts, struct buf *out)
{
    V1beta1__DevicePluginOptions m;
    fill_options(opts, &m);
    return pack(&m.base, out);
}

int dpapi_encode_list(const struct dpapi_device *devs, size_t n, struct buf *out)
{
    V1beta1__Device *d = calloc(n ? n : 1, sizeof(*d));
    V1beta1__Device **dp = ptr_array(n);
    V1beta1__NUMANode *numa = calloc(n ? n : 1, sizeof(*numa));
    V1beta1__NUMANode **numap = ptr_array(n);
    V1beta1__TopologyInfo *topo = calloc(n ? n : 1, sizeof(*topo));
    int r = d && dp && numa && numap && topo ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        v1beta1__device__init(&d[i]);
        d[i].id = (char *)devs[i].id;
        d[i].health = (char *)(devs[i].healthy ? "Healthy" : "Unhealthy");
        if (devs[i].numa_node >= 0) {
            v1beta1__numanode__init(&numa[i]);
            numa[i].id = devs[i].numa_node;
            numap[i] = &numa[i];
            v1beta1__topology_info__init(&topo[i]);
            topo[i].n_nodes = 1;
            topo[i].nodes = &numap[i];
            d[i].topology = &topo[i];
        }
        dp[i] = &d[i];
    }
    const V1beta1__ListAndWatchResponse m = {
            .base = PROTOBUF_C_MESSAGE_INIT(&v1beta1__list_and_watch_response__descriptor),
            .n_devices = n,
            .devices = dp,
    };
    if (r == 0)
        r = pack(&m.base, out);
    free(d);
    free(dp);
    free(numa);
    free(numap);
    free(topo);
    return r;
}

/* The entries of one container's response, pointing into `c` (freed by free_container). */
struct container_parts {
    V1beta1__ContainerAllocateResponse msg;
    V1beta1__ContainerAllocateResponse__EnvsEntry *envs, **envp;
    V1beta1__DeviceSpec *devs, **devp;
};

static int fill_container(const struct dpapi_container_response *c, struct container_parts *p)
{
    v1beta1__container_allocate_response__init(&p->msg);
    p->envs = calloc(c->n_envs ? c->n_envs : 1, sizeof(*p->envs));
    p->envp = ptr_array(c->n_envs);
    p->devs = calloc(c->n_devices ? c->n_devices : 1, sizeof(*p->devs));
    p->devp = ptr_array(c->n_devices);
    if (!p->envs || !p->envp || !p->devs || !p->devp)
        return -ENOMEM;
    for (size_t i = 0; i < c->n_envs; i++) {
        v1beta1__container_allocate_response__envs_entry__init(&p->envs[i]);
        p->envs[i].key = (char *)c->envs[i].key;
        p->envs[i].value = (char *)c->envs[i].value;
        p->envp[i] = &p->envs[i];
    }
    for (size_t i = 0; i < c->n_devices; i++) {
        v1beta1__device_spec__init(&p->devs[i]);
        p->devs[i].container_path = (char *)c->devices[i].container_path;
        p->devs[i].host_path = (char *)c->devices[i].host_path;
        p->devs[i].permissions = (char *)c->devices[i].permissions;
        p->devp[i] = &p->devs[i];
    }
    p->msg.n_envs = c->n_envs;
    p->msg.envs = p->envp;
    p->msg.n_devices = c->n_devices;
    p->msg.devices = p->devp;
    return 0;
}

static void free_container(struct container_parts *p)
{
    free(p->envs);
    free(p->envp);
    free(p->devs);
    free(p->devp);
}

int dpapi_encode_allocate(const struct dpapi_container_response *c, size_t n, struct buf *out)
{
    struct container_parts *parts = calloc(n ? n : 1, sizeof(*parts));
    V1beta1__ContainerAllocateResponse **cp = ptr_array(n);
    int r = parts && cp ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        r = fill_container(&c[i], &parts[i]);
        cp[i] = &parts[i].msg;
    }
    const V1beta1__AllocateResponse m = {
            .base = PROTOBUF_C_MESSAGE_INIT(&v1beta1__allocate_response__descriptor),
            .n_container_responses = n,
            .container_responses = cp,
    };
    if (r == 0)
        r = pack(&m.base, out);
    for (size_t i = 0; parts && i < n; i++)
        free_container(&parts[i]);
    free(parts);
    free(cp);
    return r;
}

int dpapi_encode_preferred(const struct dpapi_ids *c, size_t n, struct buf *out)
{
    V1beta1__ContainerPreferredAllocationResponse *cr = calloc(n ? n : 1, sizeof(*cr));
    V1beta1__ContainerPreferredAllocationResponse **cp = ptr_array(n);
    int r = cr && cp ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        v1beta1__container_preferred_allocation_response__init(&cr[i]);
        cr[i].n_deviceids = c[i].n;
        cr[i].deviceids = c[i].ids;
        cp[i] = &cr[i];
    }
    const V1beta1__PreferredAllocationResponse m = {
            .base = PROTOBUF_C_MESSAGE_INIT(&v1beta1__preferred_allocation_response__descriptor),
            .n_container_responses = n,
            .container_responses = cp,
    };
    if (r == 0)
        r = pack(&m.base, out);
    free(cr);
    free(cp);
    return r;
}

/* --- decoding ----------------------------------------------------------------------------------
 */

void dpapi_request_done(struct dpapi_request *r)
{
    for (size_t i = 0; i < r->n_containers; i++) {
        for (size_t j = 0; r->containers && j < r->containers[i].n; j++)
            free(r->containers[i].ids[j]);
        for (size_t j = 0; r->must_include && j < r->must_include[i].n; j++)
            free(r->must_include[i].ids[j]);
        if (r->containers)
            free(r->containers[i].ids);
        if (r->must_include)
            free(r->must_include[i].ids);
    }
    free(r->containers);
    free(r->must_include);
    free(r->sizes);
    *r = (struct dpapi_request){0};
}

/* Copies `n` IDs into `ret`, checking the limits. */
static int copy_ids(char **ids, size_t n, struct dpapi_ids *ret, struct err *ret_err)
{
    if (n > DPAPI_MAX_IDS)
        return err_set(ret_err, -EINVAL, "%zu device IDs in one container (at most %d)", n,
                       DPAPI_MAX_IDS);
    ret->ids = calloc(n ? n : 1, sizeof(*ret->ids));
    if (!ret->ids)
        return err_set(ret_err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        size_t len = strnlen(ids[i], DPAPI_MAX_ID + 1);
        if (len == 0 || len > DPAPI_MAX_ID)
            return err_set(ret_err, -EINVAL, "a device ID is %s",
                           len ? "longer than 256 bytes" : "empty");
        if (!(ret->ids[i] = strdup(ids[i])))
            return err_set(ret_err, -ENOMEM, "out of memory");
        ret->n = i + 1;
    }
    return 0;
}

static int start_request(size_t n, bool preferred, struct dpapi_request *ret, struct err *ret_err)
{
    *ret = (struct dpapi_request){0};
    if (n > DPAPI_MAX_CONTAINERS)
        return err_set(ret_err, -EINVAL, "%zu containers in one request (at most %d)", n,
                       DPAPI_MAX_CONTAINERS);
    ret->containers = calloc(n ? n : 1, sizeof(*ret->containers));
    if (preferred) {
        ret->must_include = calloc(n ? n : 1, sizeof(*ret->must_include));
        ret->sizes = calloc(n ? n : 1, sizeof(*ret->sizes));
    }
    if (!ret->containers || (preferred && (!ret->must_include || !ret->sizes)))
        return err_set(ret_err, -ENOMEM, "out of memory");
    ret->n_containers = n;
    return 0;
}

/* Unpacks a request of descriptor `d` and copies it into `ret` with `copy`; on any error `ret` is
 * left empty. */
static int decode_request(const ProtobufCMessageDescriptor *d,
                          int (*copy)(const ProtobufCMessage *m, struct dpapi_request *ret,
                                      struct err *ret_err),
                          const uint8_t *msg, size_t len, struct dpapi_request *ret,
                          struct err *ret_err)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, msg);
    if (!m) {
        *ret = (struct dpapi_request){0};
        return unpack_failed(d->short_name, ret_err);
    }
    int r = copy(m, ret, ret_err);
    protobuf_c_message_free_unpacked(m, NULL);
    if (r < 0)
        dpapi_request_done(ret);
    return r;
}

static int copy_allocate(const ProtobufCMessage *pm, struct dpapi_request *ret, struct err *ret_err)
{
    const V1beta1__AllocateRequest *m = (const V1beta1__AllocateRequest *)pm;
    int r = start_request(m->n_container_requests, false, ret, ret_err);
    for (size_t i = 0; r == 0 && i < m->n_container_requests; i++)
        r = copy_ids(m->container_requests[i]->devices_ids, m->container_requests[i]->n_devices_ids,
                     &ret->containers[i], ret_err);
    return r;
}

int dpapi_decode_allocate(const uint8_t *msg, size_t len, struct dpapi_request *ret,
                          struct err *ret_err)
{
    return decode_request(&v1beta1__allocate_request__descriptor, copy_allocate, msg, len, ret,
                          ret_err);
}

static int copy_pre_start(const ProtobufCMessage *pm, struct dpapi_request *ret,
                          struct err *ret_err)
{
    const V1beta1__PreStartContainerRequest *m = (const V1beta1__PreStartContainerRequest *)pm;
    int r = start_request(1, false, ret, ret_err);
    if (r == 0)
        r = copy_ids(m->devices_ids, m->n_devices_ids, &ret->containers[0], ret_err);
    return r;
}

int dpapi_decode_pre_start(const uint8_t *msg, size_t len, struct dpapi_request *ret,
                           struct err *ret_err)
{
    return decode_request(&v1beta1__pre_start_container_request__descriptor, copy_pre_start, msg,
                          len, ret, ret_err);
}

static int copy_preferred(const ProtobufCMessage *pm, struct dpapi_request *ret,
                          struct err *ret_err)
{
    const V1beta1__PreferredAllocationRequest *m = (const V1beta1__PreferredAllocationRequest *)pm;
    int r = start_request(m->n_container_requests, true, ret, ret_err);
    for (size_t i = 0; r == 0 && i < m->n_container_requests; i++) {
        const V1beta1__ContainerPreferredAllocationRequest *c = m->container_requests[i];
        r = copy_ids(c->available_deviceids, c->n_available_deviceids, &ret->containers[i],
                     ret_err);
        if (r == 0)
            r = copy_ids(c->must_include_deviceids, c->n_must_include_deviceids,
                         &ret->must_include[i], ret_err);
        if (r == 0 && (c->allocation_size < 0 || c->allocation_size > DPAPI_MAX_IDS))
            r = err_set(ret_err, -EINVAL, "allocation_size %d is out of range",
                        (int)c->allocation_size);
        ret->sizes[i] = c->allocation_size;
    }
    return r;
}

int dpapi_decode_preferred(const uint8_t *msg, size_t len, struct dpapi_request *ret,
                           struct err *ret_err)
{
    return decode_request(&v1beta1__preferred_allocation_request__descriptor, copy_preferred, msg,
                          len, ret, ret_err);
}

void dpapi_devices_free(struct dpapi_device *d, size_t n)
{
    for (size_t i = 0; d && i < n; i++)
        free((char *)d[i].id);
    free(d);
}

int dpapi_decode_list(const uint8_t *msg, size_t len, struct dpapi_device **ret, size_t *ret_n,
                      struct err *ret_err)
{
    V1beta1__ListAndWatchResponse *m = v1beta1__list_and_watch_response__unpack(NULL, len, msg);
    *ret = NULL;
    *ret_n = 0;
    if (!m)
        return unpack_failed("ListAndWatchResponse", ret_err);
    struct dpapi_device *d = calloc(m->n_devices ? m->n_devices : 1, sizeof(*d));
    if (!d) {
        v1beta1__list_and_watch_response__free_unpacked(m, NULL);
        return err_set(ret_err, -ENOMEM, "out of memory");
    }
    int r = 0;
    for (size_t i = 0; r == 0 && i < m->n_devices; i++) {
        const V1beta1__Device *dev = m->devices[i];
        d[i].id = strdup(dev->id);
        d[i].healthy = strcmp(dev->health, "Healthy") == 0;
        d[i].numa_node =
                dev->topology && dev->topology->n_nodes > 0 ? (int)dev->topology->nodes[0]->id : -1;
        if (!d[i].id)
            r = err_set(ret_err, -ENOMEM, "out of memory");
    }
    if (r == 0) {
        *ret = d;
        *ret_n = m->n_devices;
    } else {
        dpapi_devices_free(d, m->n_devices);
    }
    v1beta1__list_and_watch_response__free_unpacked(m, NULL);
    return r;
}
