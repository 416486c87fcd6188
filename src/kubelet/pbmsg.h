/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubelet/pbmsg.h - the few static helpers kubelet's message files (dpapi.c, draapi.c, regapi.c)
 * share: packing a protobuf-c message into a struct buf, pointer arrays that are never NULL for
 * zero elements, the error of a message that does not unpack. Internal to src/kubelet: with the
 * *api.c files, the only place protobuf-c is included (hack/lint.sh).
 */
#pragma once

#include <errno.h>
#include <protobuf-c/protobuf-c.h>
#include <stdlib.h>

#include "base/buf.h"
#include "base/err.h"

/* protobuf-c's output buffer, appending to a struct buf. */
struct sink {
    ProtobufCBuffer base;
    struct buf *out;
    int err;
};

static inline void sink_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
    struct sink *s = (struct sink *)b;
    if (s->err == 0 && len > 0)
        s->err = buf_add(s->out, data, len);
}

/* An array of `n` pointers (at least one element, so calloc never returns NULL for 0). */
static inline void *ptr_array(size_t n)
{
    return calloc(n ? n : 1, sizeof(void *));
}

static inline int pack(const ProtobufCMessage *m, struct buf *out)
{
    struct sink s = {.base = {.append = sink_append}, .out = out};
    buf_reset(out);
    (void)protobuf_c_message_pack_to_buffer(m, &s.base);
    return s.err;
}

static inline int unpack_failed(const char *what, struct err *ret_err)
{
    return err_set(ret_err, -EINVAL, "malformed %s: not a valid protobuf message", what);
}
