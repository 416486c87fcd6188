/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/buf.c - growable byte buffer with a cap. See buf.h. No I/O, no logging.
 */
#include "base/buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_ALLOC 64

void buf_init(struct buf *b, size_t cap)
{
    *b = (struct buf){.cap = cap};
}

void buf_free(struct buf *b)
{
    free(b->data);
    buf_init(b, b->cap);
}

void buf_reset(struct buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

/* Makes room for `extra` more bytes of content plus the terminating NUL. */
static int reserve(struct buf *b, size_t extra)
{
    if (extra > b->cap || b->len > b->cap - extra) {
        buf_free(b);
        return -E2BIG;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->alloc)
        return 0;
    size_t alloc = b->alloc ? b->alloc : MIN_ALLOC;
    while (alloc < need)
        alloc = alloc > SIZE_MAX / 2 ? need : alloc * 2;
    if (alloc > b->cap + 1)
        alloc = b->cap + 1;
    char *p = realloc(b->data, alloc);
    if (!p)
        return -ENOMEM;
    b->data = p;
    b->alloc = alloc;
    return 0;
}

int buf_add(struct buf *b, const void *data, size_t n)
{
    int r = reserve(b, n);
    if (r < 0)
        return r;
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int buf_adds(struct buf *b, const char *s)
{
    return buf_add(b, s, strlen(s));
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0)
        return -EINVAL;
    int r = reserve(b, (size_t)n);
    if (r < 0)
        return r;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = buf_vprintf(b, fmt, ap);
    va_end(ap);
    return r;
}

void buf_consume(struct buf *b, size_t n)
{
    if (n >= b->len) {
        buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

const char *buf_str(const struct buf *b)
{
    return b->data ? b->data : "";
}

char *buf_take(struct buf *b)
{
    char *p = b->data;
    buf_init(b, b->cap);
    return p;
}
