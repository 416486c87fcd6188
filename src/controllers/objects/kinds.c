/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/objects/kinds.c - the kinds a process caches (see kinds.h).
 */
#include "controllers/objects/kinds.h"

#include "kube/client.h"

const struct cache_kind kind_pcidevices = {
        .name = "pcidevices", .res = &kube_res_pcidevices, .node_label = "nodename"};
const struct cache_kind kind_usbdevices = {
        .name = "usbdevices", .res = &kube_res_usbdevices, .node_label = "nodename"};
const struct cache_kind kind_sriovnetworkdevices = {.name = "sriovnetworkdevices",
                                                    .res = &kube_res_sriovnetworkdevices,
                                                    .node_label = "nodename"};
const struct cache_kind kind_claimed_pcidevices = {
        .name = "pcidevices", .res = &kube_res_pcidevices, .keys_of = &kind_pcideviceclaims};
const struct cache_kind kind_claimed_usbdevices = {
        .name = "usbdevices", .res = &kube_res_usbdevices, .keys_of = &kind_usbdeviceclaims};
const struct cache_kind kind_pcideviceclaims = {
        .name = "pcideviceclaims", .res = &kube_res_pcideviceclaims, .node_field = "spec.nodeName"};
const struct cache_kind kind_usbdeviceclaims = {.name = "usbdeviceclaims",
                                                .res = &kube_res_usbdeviceclaims};
const struct cache_kind kind_vgpudevices = {
        .name = "vgpudevices", .res = &kube_res_vgpudevices, .node_label = "nodename"};
