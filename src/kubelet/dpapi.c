/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubelet/dpapi.c - kubelet's plugin API messages through protobuf-c: the device-plugin API
 * (dpapi.h), the DRA plugin API and plugin registration (draapi.h). The only file that includes
 * protobuf-c and its generated code.
 */
#include "kubelet/dpapi.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kubelet/deviceplugin.pb-c.h"
#include "kubelet/draapi.h"
#include "kubelet/draapi.pb-c.h"
#include "kubelet/pluginreg.pb-c.h"

/* --- encoding ----------------------------------------------------------------------------------
 */

/* protobuf-c's output buffer, appending to a struct buf. */
struct sink {
    ProtobufCBuffer base;
    struct buf *out;
    int err;
};

static void sink_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
    struct sink *s = (struct sink *)b;
    if (s->err == 0 && len > 0)
        s->err = buf_add(s->out, data, len);
}

/* An array of `n` pointers (at least one element, so calloc never returns NULL for 0). */
static void *ptr_array(size_t n)
{
    return calloc(n ? n : 1, sizeof(void *));
}

static int pack(const ProtobufCMessage *m, struct buf *out)
{
    struct sink s = {.base = {.append = sink_append}, .out = out};
    buf_reset(out);
    (void)protobuf_c_message_pack_to_buffer(m, &s.base);
    return s.err;
}

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

static int unpack_failed(const char *what, struct err *ret_err)
{
    return err_set(ret_err, -EINVAL, "malformed %s: not a valid protobuf message", what);
}

int dpapi_decode_allocate(const uint8_t *msg, size_t len, struct dpapi_request *ret,
                          struct err *ret_err)
{
    V1beta1__AllocateRequest *m = v1beta1__allocate_request__unpack(NULL, len, msg);
    if (!m) {
        *ret = (struct dpapi_request){0};
        return unpack_failed("AllocateRequest", ret_err);
    }
    int r = start_request(m->n_container_requests, false, ret, ret_err);
    for (size_t i = 0; r == 0 && i < m->n_container_requests; i++)
        r = copy_ids(m->container_requests[i]->devices_ids, m->container_requests[i]->n_devices_ids,
                     &ret->containers[i], ret_err);
    v1beta1__allocate_request__free_unpacked(m, NULL);
    if (r < 0)
        dpapi_request_done(ret);
    return r;
}

int dpapi_decode_pre_start(const uint8_t *msg, size_t len, struct dpapi_request *ret,
                           struct err *ret_err)
{
    V1beta1__PreStartContainerRequest *m =
            v1beta1__pre_start_container_request__unpack(NULL, len, msg);
    if (!m) {
        *ret = (struct dpapi_request){0};
        return unpack_failed("PreStartContainerRequest", ret_err);
    }
    int r = start_request(1, false, ret, ret_err);
    if (r == 0)
        r = copy_ids(m->devices_ids, m->n_devices_ids, &ret->containers[0], ret_err);
    v1beta1__pre_start_container_request__free_unpacked(m, NULL);
    if (r < 0)
        dpapi_request_done(ret);
    return r;
}

int dpapi_decode_preferred(const uint8_t *msg, size_t len, struct dpapi_request *ret,
                           struct err *ret_err)
{
    V1beta1__PreferredAllocationRequest *m =
            v1beta1__preferred_allocation_request__unpack(NULL, len, msg);
    if (!m) {
        *ret = (struct dpapi_request){0};
        return unpack_failed("PreferredAllocationRequest", ret_err);
    }
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
    v1beta1__preferred_allocation_request__free_unpacked(m, NULL);
    if (r < 0)
        dpapi_request_done(ret);
    return r;
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

/* An array of `n` elements of `size` (at least one, so calloc never returns NULL for 0). */
static void *array(size_t n, size_t size)
{
    return calloc(n ? n : 1, size);
}

/* --- DRA plugin and plugin registration (kubelet/draapi.h) ------------------------------------ */

/* The generated names are long: the package is k8s.io.kubelet.pkg.apis.dra.v1. */
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim Claim;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device Device;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest PrepareRequest;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest UnprepareRequest;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse PrepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry
        PrepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse PrepareOne;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse UnprepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry
        UnprepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse UnprepareOne;
#define DESC(name) (&k8s__io__kubelet__pkg__apis__dra__v1__##name##__descriptor)

int draapi_encode_info(const char *name, const char *endpoint, struct buf *out)
{
    char *versions[] = {(char *)DRAAPI_SERVICE};
    const Pluginregistration__PluginInfo m = {
            .base = PROTOBUF_C_MESSAGE_INIT(&pluginregistration__plugin_info__descriptor),
            .type = (char *)DRAAPI_PLUGIN_TYPE,
            .name = (char *)name,
            .endpoint = (char *)endpoint,
            .n_supported_versions = 1,
            .supported_versions = versions,
    };
    return pack(&m.base, out);
}

int draapi_encode_status_response(struct buf *out)
{
    Pluginregistration__RegistrationStatusResponse m =
            PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
    return pack(&m.base, out);
}

/* The devices of one answer, pointing into `a` (freed by the caller). */
static int fill_devices(const struct draapi_answer *a, PrepareOne *one, Device **devs,
                        Device ***devp)
{
    *devs = array(a->n_devices, sizeof(**devs));
    *devp = ptr_array(a->n_devices);
    if (!*devs || !*devp)
        return -ENOMEM;
    for (size_t i = 0; i < a->n_devices; i++) {
        Device *d = &(*devs)[i];
        protobuf_c_message_init(DESC(device), d);
        d->n_request_names = a->devices[i].n_requests;
        d->request_names = (char **)a->devices[i].requests;
        d->pool_name = (char *)a->devices[i].pool;
        d->device_name = (char *)a->devices[i].name;
        d->n_cdi_device_ids = a->devices[i].n_cdi_ids;
        d->cdi_device_ids = (char **)a->devices[i].cdi_ids;
        (*devp)[i] = d;
    }
    one->n_devices = a->n_devices;
    one->devices = *devp;
    return 0;
}

int draapi_encode_prepared(const struct draapi_answer *a, size_t n, struct buf *out)
{
    PrepareEntry *e = array(n, sizeof(*e));
    PrepareEntry **ep = ptr_array(n);
    PrepareOne *one = array(n, sizeof(*one));
    Device **devs = ptr_array(n);
    Device ***devp = ptr_array(n);
    int r = e && ep && one && devs && devp ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        protobuf_c_message_init(DESC(node_prepare_resource_response), &one[i]);
        if (a[i].error && a[i].error[0])
            one[i].error = (char *)a[i].error;
        else
            r = fill_devices(&a[i], &one[i], &devs[i], &devp[i]);
        protobuf_c_message_init(DESC(node_prepare_resources_response__claims_entry), &e[i]);
        e[i].key = (char *)a[i].uid;
        e[i].value = &one[i];
        ep[i] = &e[i];
    }
    PrepareResponse m;
    protobuf_c_message_init(DESC(node_prepare_resources_response), &m);
    m.n_claims = n;
    m.claims = ep;
    if (r == 0)
        r = pack(&m.base, out);
    for (size_t i = 0; devs && devp && i < n; i++) {
        free(devs[i]);
        free(devp[i]);
    }
    free(e);
    free(ep);
    free(one);
    free(devs);
    free(devp);
    return r;
}

int draapi_encode_unprepared(const struct draapi_answer *a, size_t n, struct buf *out)
{
    UnprepareEntry *e = array(n, sizeof(*e));
    UnprepareEntry **ep = ptr_array(n);
    UnprepareOne *one = array(n, sizeof(*one));
    int r = e && ep && one ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        protobuf_c_message_init(DESC(node_unprepare_resource_response), &one[i]);
        if (a[i].error)
            one[i].error = (char *)a[i].error;
        protobuf_c_message_init(DESC(node_unprepare_resources_response__claims_entry), &e[i]);
        e[i].key = (char *)a[i].uid;
        e[i].value = &one[i];
        ep[i] = &e[i];
    }
    UnprepareResponse m;
    protobuf_c_message_init(DESC(node_unprepare_resources_response), &m);
    m.n_claims = n;
    m.claims = ep;
    if (r == 0)
        r = pack(&m.base, out);
    free(e);
    free(ep);
    free(one);
    return r;
}

int draapi_encode_claims(const struct draapi_claim *c, size_t n, bool prepare, struct buf *out)
{
    Claim *cl = array(n, sizeof(*cl));
    Claim **cp = ptr_array(n);
    int r = cl && cp ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        protobuf_c_message_init(DESC(claim), &cl[i]);
        cl[i].namespace_ = c[i].namespace_;
        cl[i].uid = c[i].uid;
        cl[i].name = c[i].name;
        cp[i] = &cl[i];
    }
    if (r == 0 && prepare) {
        PrepareRequest m;
        protobuf_c_message_init(DESC(node_prepare_resources_request), &m);
        m.n_claims = n;
        m.claims = cp;
        r = pack(&m.base, out);
    } else if (r == 0) {
        UnprepareRequest m;
        protobuf_c_message_init(DESC(node_unprepare_resources_request), &m);
        m.n_claims = n;
        m.claims = cp;
        r = pack(&m.base, out);
    }
    free(cl);
    free(cp);
    return r;
}

/* (decoding) */

void draapi_claims_done(struct draapi_claims *c)
{
    for (size_t i = 0; c->v && i < c->n; i++) {
        free(c->v[i].namespace_);
        free(c->v[i].uid);
        free(c->v[i].name);
    }
    free(c->v);
    *c = (struct draapi_claims){0};
}

/* A copy of one field of a claim, checked. */
static int copy_field(const char *what, const char *s, bool required, char **ret,
                      struct err *ret_err)
{
    size_t len = strnlen(s, DRAAPI_MAX_FIELD + 1);
    if (len > DRAAPI_MAX_FIELD)
        return err_set(ret_err, -EINVAL, "a claim's %s is longer than %d bytes", what,
                       DRAAPI_MAX_FIELD);
    if (required && len == 0)
        return err_set(ret_err, -EINVAL, "a claim has an empty %s", what);
    for (size_t i = 0; i < len; i++)
        if (s[i] == '/' || (unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return err_set(ret_err, -EINVAL, "a claim's %s holds a '/' or a control character",
                           what);
    return (*ret = strdup(s)) ? 0 : err_set(ret_err, -ENOMEM, "out of memory");
}

int draapi_decode_claims(const uint8_t *msg, size_t len, bool prepare, struct draapi_claims *ret,
                         struct err *ret_err)
{
    const char *what = prepare ? "NodePrepareResourcesRequest" : "NodeUnprepareResourcesRequest";
    const ProtobufCMessageDescriptor *d =
            prepare ? DESC(node_prepare_resources_request) : DESC(node_unprepare_resources_request);
    *ret = (struct draapi_claims){0};
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, msg);
    if (!m)
        return unpack_failed(what, ret_err);
    size_t n = prepare ? ((PrepareRequest *)m)->n_claims : ((UnprepareRequest *)m)->n_claims;
    Claim **claims = prepare ? ((PrepareRequest *)m)->claims : ((UnprepareRequest *)m)->claims;
    int r = 0;
    if (n > DRAAPI_MAX_CLAIMS)
        r = err_set(ret_err, -EINVAL, "%zu claims in one %s (at most %d)", n, what,
                    DRAAPI_MAX_CLAIMS);
    else if (!(ret->v = array(n, sizeof(*ret->v))))
        r = err_set(ret_err, -ENOMEM, "out of memory");
    for (size_t i = 0; r == 0 && i < n; i++) {
        ret->n = i + 1;
        r = copy_field("namespace", claims[i]->namespace_, true, &ret->v[i].namespace_, ret_err);
        if (r == 0)
            r = copy_field("uid", claims[i]->uid, true, &ret->v[i].uid, ret_err);
        if (r == 0)
            r = copy_field("name", claims[i]->name, true, &ret->v[i].name, ret_err);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    if (r < 0)
        draapi_claims_done(ret);
    return r;
}

static void copy_cut(char *dst, size_t size, const char *src)
{
    if (size == 0)
        return;
    size_t n = strnlen(src, size - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

int draapi_decode_status(const uint8_t *msg, size_t len, bool *registered, char *error, size_t size,
                         struct err *ret_err)
{
    Pluginregistration__RegistrationStatus *m =
            pluginregistration__registration_status__unpack(NULL, len, msg);
    if (!m)
        return unpack_failed("RegistrationStatus", ret_err);
    *registered = m->plugin_registered;
    copy_cut(error, size, m->error);
    pluginregistration__registration_status__free_unpacked(m, NULL);
    return 0;
}

int draapi_decode_info(const uint8_t *msg, size_t len, char *type, char *name, char *endpoint,
                       size_t size, bool *v1, struct err *ret_err)
{
    Pluginregistration__PluginInfo *m = pluginregistration__plugin_info__unpack(NULL, len, msg);
    if (!m)
        return unpack_failed("PluginInfo", ret_err);
    copy_cut(type, size, m->type);
    copy_cut(name, size, m->name);
    copy_cut(endpoint, size, m->endpoint);
    *v1 = false;
    for (size_t i = 0; i < m->n_supported_versions; i++)
        *v1 = *v1 || strcmp(m->supported_versions[i], DRAAPI_SERVICE) == 0;
    pluginregistration__plugin_info__free_unpacked(m, NULL);
    return 0;
}

void draapi_results_free(struct draapi_result *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++) {
        for (size_t j = 0; j < r[i].n_devices; j++) {
            struct draapi_result_device *d = &r[i].devices[j];
            for (size_t k = 0; k < d->n_requests; k++)
                free(d->requests[k]);
            for (size_t k = 0; k < d->n_cdi_ids; k++)
                free(d->cdi_ids[k]);
            free(d->requests);
            free(d->cdi_ids);
            free(d->pool);
            free(d->name);
        }
        free(r[i].devices);
        free(r[i].uid);
        free(r[i].error);
    }
    free(r);
}

static char **copy_strings(char **s, size_t n, size_t *ret_n)
{
    char **v = array(n, sizeof(*v));
    for (size_t i = 0; v && i < n; i++) {
        if (!(v[i] = strdup(s[i]))) {
            for (size_t j = 0; j < i; j++)
                free(v[j]);
            free(v);
            return NULL;
        }
    }
    *ret_n = v ? n : 0;
    return v;
}

static int copy_device(const Device *d, struct draapi_result_device *ret)
{
    ret->pool = strdup(d->pool_name);
    ret->name = strdup(d->device_name);
    ret->requests = copy_strings(d->request_names, d->n_request_names, &ret->n_requests);
    ret->cdi_ids = copy_strings(d->cdi_device_ids, d->n_cdi_device_ids, &ret->n_cdi_ids);
    return ret->pool && ret->name && ret->requests && ret->cdi_ids ? 0 : -ENOMEM;
}

static int copy_prepared(const PrepareEntry *e, struct draapi_result *ret)
{
    const PrepareOne *one = e->value;
    if (!(ret->uid = strdup(e->key)))
        return -ENOMEM;
    if (!one)
        return 0;
    if (one->error[0] && !(ret->error = strdup(one->error)))
        return -ENOMEM;
    if (!(ret->devices = array(one->n_devices, sizeof(*ret->devices))))
        return -ENOMEM;
    for (size_t i = 0; i < one->n_devices; i++) {
        ret->n_devices = i + 1;
        if (copy_device(one->devices[i], &ret->devices[i]) < 0)
            return -ENOMEM;
    }
    return 0;
}

int draapi_decode_answers(const uint8_t *msg, size_t len, bool prepare, struct draapi_result **ret,
                          size_t *ret_n, struct err *ret_err)
{
    const ProtobufCMessageDescriptor *d = prepare ? DESC(node_prepare_resources_response)
                                                  : DESC(node_unprepare_resources_response);
    *ret = NULL;
    *ret_n = 0;
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, msg);
    if (!m)
        return unpack_failed(prepare ? "NodePrepareResourcesResponse"
                                     : "NodeUnprepareResourcesResponse",
                             ret_err);
    size_t n = prepare ? ((PrepareResponse *)m)->n_claims : ((UnprepareResponse *)m)->n_claims;
    struct draapi_result *r = array(n, sizeof(*r));
    int rc = r ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (prepare) {
            rc = copy_prepared(((PrepareResponse *)m)->claims[i], &r[i]);
        } else {
            const UnprepareEntry *e = ((UnprepareResponse *)m)->claims[i];
            rc = (r[i].uid = strdup(e->key)) ? 0 : -ENOMEM;
            if (rc == 0 && e->value && e->value->error[0] &&
                !(r[i].error = strdup(e->value->error)))
                rc = -ENOMEM;
        }
    }
    protobuf_c_message_free_unpacked(m, NULL);
    if (rc < 0) {
        draapi_results_free(r, n);
        return err_set(ret_err, rc, "out of memory");
    }
    *ret = r;
    *ret_n = n;
    return 0;
}
