/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/err.c - error details (see err.h).
 */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>

int err_set(struct err *e, int r, const char *fmt, ...)
{
    if (!e)
        return r;
    va_list ap;
    va_start(ap, fmt);
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): clang-analyzer 14 false positive
    (void)vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    return r;
}
