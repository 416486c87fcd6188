/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_usbids.c - node_usbids_load() and node_usbids_describe() on arbitrary usb.ids
 * contents.
 *
 * Input: the file's bytes, written to a temporary file and loaded; the first four bytes also
 * give a vendor and a product id to describe (besides fixed ones), with the input's first line
 * as the product string. Checks that every description is NUL-terminated, as long as returned,
 * shorter than the buffer and free of control characters.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzztmp.h"
#include "node/usbname.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];

static void cleanup(void)
{
    (void)unlink(path);
}

static int put(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        (void)snprintf(path, sizeof(path), "%s/fuzz-usbids.XXXXXX", fuzz_tmpdir());
        int fd = mkstemp(path);
        if (fd < 0)
            return -1;
        close(fd);
        atexit(cleanup);
    }
    FILE *f = fopen(path, "we");
    if (!f)
        return -1;
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    return fclose(f) == 0 ? 0 : -1;
}

static void check(const struct node_usbids *ids, const char *v, const char *p, const char *s)
{
    char buf[96];
    size_t n = node_usbids_describe(ids, v, p, s, buf, sizeof(buf));
    if (n >= sizeof(buf) || strlen(buf) != n)
        abort();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (put(data, size) < 0)
        return 0;
    struct node_usbids *ids = NULL;
    struct err err = {""};
    if (node_usbids_load(path, &ids, &err) < 0)
        abort(); /* any regular file loads */
    char v[5] = "0000", p[5] = "0000", s[64] = "";
    if (size >= 4) {
        (void)snprintf(v, sizeof(v), "%02x%02x", data[0], data[1]);
        (void)snprintf(p, sizeof(p), "%02x%02x", data[2], data[3]);
    }
    size_t len = size < sizeof(s) - 1 ? size : sizeof(s) - 1;
    memcpy(s, data, len);
    s[len] = '\0';
    check(ids, v, p, s);
    check(ids, "0627", "0001", NULL);
    check(ids, "abcd", "ef01", "");
    char cls[16];
    const char *c = node_usb_class_name(s, cls, sizeof(cls));
    if (c == cls && strlen(c) >= sizeof(cls))
        abort(); /* a table name is a literal; only "Unknown (0x..)" goes to the buffer */
    node_usbids_free(ids);
    return 0;
}
