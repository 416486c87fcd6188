/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_pciaer.c - node/pciaer's parser of the kernel's aer_dev_* files on arbitrary
 * bytes.
 *
 * Input: the file's content, given to node_pciaer_parse() in a buffer of its exact size (no NUL
 * after it, so a read past the end is caught by ASan). Checks against a model written here: a
 * success is the count of the first line that starts with "TOTAL_ERR_", a non-negative number
 * that strtoll() reads from the digits after its first space; a failure is -EINVAL or -ERANGE
 * and leaves the result alone.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "node/pciaer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The model: the first TOTAL_ERR_ line (NULL when none), its length in `*ret_n`. */
static const char *total_line(const char *t, size_t size, size_t *ret_n)
{
    size_t pos = 0;
    while (pos < size) {
        const char *nl = memchr(t + pos, '\n', size - pos);
        size_t n = nl ? (size_t)(nl - (t + pos)) : size - pos;
        if (n >= 10 && memcmp(t + pos, "TOTAL_ERR_", 10) == 0) {
            *ret_n = n;
            return t + pos;
        }
        pos += n + 1;
    }
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *t = calloc(1, size ? size : 1);
    if (!t)
        return 0;
    if (size)
        memcpy(t, data, size);
    long long v = -7;
    int r = node_pciaer_parse(t, size, &v);
    size_t n = 0;
    const char *line = total_line(t, size, &n);
    if (r == 0) {
        const char *sp = line ? memchr(line, ' ', n) : NULL;
        size_t len = sp ? n - (size_t)(sp + 1 - line) : 0;
        char *digits = malloc(len + 1);
        if (!sp || v < 0 || len == 0 || !digits)
            abort();
        memcpy(digits, sp + 1, len);
        digits[len] = '\0';
        if (strspn(digits, "0123456789") != len || strtoll(digits, NULL, 10) != v)
            abort();
        free(digits);
    } else if ((r != -EINVAL && r != -ERANGE) || v != -7 || (r == -ERANGE && !line)) {
        abort();
    }
    free(t);
    return 0;
}
