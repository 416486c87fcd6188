/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_vflink.c - node/vflink's rtnetlink reply parser on arbitrary bytes.
 *
 * Input: one byte, then netlink messages as one recv() gives them. The byte picks the room for
 * VFs (0 to 7, so -E2BIG is reached). The messages go to node_vflink_parse() twice, each in a
 * buffer of their exact size: aligned, as recv() fills one, and at an odd address (the parser
 * works on an aligned copy). Checks: the two parses agree; a success has at most the room's
 * VFs, each in the ranges the header promises; a failure is a -errno with a message and leaves
 * the count alone.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "node/vflink.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int r, size_t n, size_t max, const struct node_vflink *vfs, const struct err *e)
{
    if (r < 0) {
        if (r < -4095 || n != 999 || e->msg[0] == '\0')
            abort();
        return;
    }
    if (r != 0 || n > max)
        abort();
    for (size_t i = 0; i < n; i++) {
        const struct node_vflink *v = &vfs[i];
        if (v->index < 0 || v->vlan < 0 || v->vlan > 4095 || v->qos < 0 || v->qos > 7 ||
            v->spoofchk < -1 || v->spoofchk > 1 || v->trust < -1 || v->trust > 1 ||
            v->link_state < -1 || v->link_state > 2)
            abort();
    }
}

/* Field by field: the structs' padding is not written. */
static bool same(const struct node_vflink *a, const struct node_vflink *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (a[i].index != b[i].index || memcmp(a[i].mac, b[i].mac, sizeof(a[i].mac)) != 0 ||
            a[i].vlan != b[i].vlan || a[i].qos != b[i].qos || a[i].spoofchk != b[i].spoofchk ||
            a[i].trust != b[i].trust || a[i].link_state != b[i].link_state)
            return false;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t max = data[0] % 8;
    struct node_vflink a[8], b[8];
    size_t na = 999, nb = 999;
    struct err ea = {""}, eb = {""};
    /* The messages in an aligned buffer and at an odd address, each of their exact size. */
    uint8_t *even = malloc(size), *odd = malloc(size);
    if (!even || !odd) {
        free(even);
        free(odd);
        return 0;
    }
    memcpy(even, data + 1, size - 1);
    memcpy(odd + 1, data + 1, size - 1);
    int ra = node_vflink_parse(even, size - 1, a, max, &na, &ea);
    check(ra, na, max, a, &ea);
    int rb = node_vflink_parse(odd + 1, size - 1, b, max, &nb, &eb);
    check(rb, nb, max, b, &eb);
    free(even);
    free(odd);
    if (ra != rb || na != nb || strcmp(ea.msg, eb.msg) != 0 || (ra == 0 && !same(a, b, na)))
        abort();
    return 0;
}
