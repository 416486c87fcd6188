/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubelet/regapi.c - kubelet's plugin registration API messages (regapi.h) through protobuf-c and
 * the generated kubelet/pluginreg.pb-c.h.
 */
#include "kubelet/regapi.h"

#include <string.h>

#include "kubelet/pbmsg.h"
#include "kubelet/pluginreg.pb-c.h"

int regapi_encode_info(const char *type, const char *name, const char *endpoint,
                       const char *const *versions, size_t n, struct buf *out)
{
    const Pluginregistration__PluginInfo m = {
            .base = PROTOBUF_C_MESSAGE_INIT(&pluginregistration__plugin_info__descriptor),
            .type = (char *)type,
            .name = (char *)name,
            .endpoint = (char *)endpoint,
            .n_supported_versions = n,
            .supported_versions = (char **)versions,
    };
    return pack(&m.base, out);
}

int regapi_encode_status_response(struct buf *out)
{
    Pluginregistration__RegistrationStatusResponse m =
            PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
    return pack(&m.base, out);
}

static void copy_cut(char *dst, size_t size, const char *src)
{
    if (size == 0)
        return;
    size_t n = strnlen(src, size - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

int regapi_decode_status(const uint8_t *msg, size_t len, bool *registered, char *error, size_t size,
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

int regapi_decode_info(const uint8_t *msg, size_t len, char *type, char *name, char *endpoint,
                       size_t size, const char *version, bool *has_version, struct err *ret_err)
{
    Pluginregistration__PluginInfo *m = pluginregistration__plugin_info__unpack(NULL, len, msg);
    if (!m)
        return unpack_failed("PluginInfo", ret_err);
    copy_cut(type, size, m->type);
    copy_cut(name, size, m->name);
    copy_cut(endpoint, size, m->endpoint);
    *has_version = false;
    for (size_t i = 0; i < m->n_supported_versions; i++)
        *has_version = *has_version || strcmp(m->supported_versions[i], version) == 0;
    pluginregistration__plugin_info__free_unpacked(m, NULL);
    return 0;
}
