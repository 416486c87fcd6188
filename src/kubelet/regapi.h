/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubelet/regapi.h - kubelet's plugin registration API (kubelet/pluginreg.proto), in plain C: what
 * a plugin on kubelet's plugins_registry socket encodes (its PluginInfo, the empty answer to
 * NotifyRegistrationStatus) and decodes (the RegistrationStatus kubelet sends). The plugin type and
 * version are the caller's (a DRA driver's: kubelet/draapi.h). protobuf-c does the wire format.
 *
 * Decoders never trust their input: a message protobuf-c cannot unpack is -EINVAL with a sentence
 * in ret_err; strings are cut to the caller's buffer; unknown fields are skipped. No logging, no
 * global state.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

/* gRPC method paths (the service kubelet's plugin watcher calls on the plugin). */
#define REGAPI_GET_INFO "/pluginregistration.Registration/GetInfo"
#define REGAPI_NOTIFY   "/pluginregistration.Registration/NotifyRegistrationStatus"

/* PluginInfo{type, name, endpoint, supported_versions [versions[0], ..., versions[n - 1]]}. */
int regapi_encode_info(const char *type, const char *name, const char *endpoint,
                       const char *const *versions, size_t n, struct buf *out);
/* RegistrationStatusResponse (empty). */
int regapi_encode_status_response(struct buf *out);
/* RegistrationStatus: whether kubelet registered the plugin and its error text (copied into
 * `error`, cut to `size`). */
int regapi_decode_status(const uint8_t *msg, size_t len, bool *registered, char *error, size_t size,
                         struct err *ret_err);

/* --- the other side, for tests and tools ---------------------------------------------------- */

/* PluginInfo: type, name and endpoint copied (cut to `size`), and whether the versions hold
 * `version`. */
int regapi_decode_info(const uint8_t *msg, size_t len, char *type, char *name, char *endpoint,
                       size_t size, const char *version, bool *has_version, struct err *ret_err);
