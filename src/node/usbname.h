/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/usbname.h - human-readable USB names as harvester/pcidevices writes them: the device
 * description from usb.ids and the class name from the USB-IF class code table.
 *
 * usb.ids (Debian's usb.ids package, /usr/share/misc/usb.ids) is mapped once and indexed by
 * vendor (a few thousand offsets); products are looked up in their vendor's block, so the
 * table costs no more memory than the index. A missing or unreadable file is not an error for
 * the caller's scans: every description is then "Unknown vvvv:pppp". No logging; thread-safe
 * after load (read-only).
 */
#pragma once

#include <stddef.h>

#include "base/err.h"

struct node_usbids;

/* Maps and indexes `path` (NULL: /usr/share/misc/usb.ids). Returns 0 and `*ret`, or a
 * negative errno with `ret_err` filled. */
int node_usbids_load(const char *path, struct node_usbids **ret, struct err *ret_err);
/* Accepts NULL; returns NULL. */
struct node_usbids *node_usbids_free(struct node_usbids *ids);

/* The description of device vendor:product (4 hex digits each) as harvester builds it:
 * "<product> (<vendor>)" when usb.ids knows both, "Unknown (<vendor>)" when it knows the vendor
 * only, "Unknown vvvv:pppp" otherwise (and always when `ids` is NULL); then " [<product
 * string>]" when the device reports one (`product_string` not empty). Control characters in
 * any part become spaces. Returns the length written (truncated to `size` - 1). */
size_t node_usbids_describe(const struct node_usbids *ids, const char *vendor_id,
                            const char *product_id, const char *product_string, char *buf,
                            size_t size);

/* The class name of a 2-hex-digit USB class code as harvester names it ("03" -> "HID", "08" ->
 * "Mass Storage", unknown -> "Unknown (0xNN)"); "" for an empty code. */
const char *node_usb_class_name(const char *code, char *buf, size_t size);
