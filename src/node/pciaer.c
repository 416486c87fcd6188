/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/pciaer.c - AER counters (see pciaer.h). No logging.
 */
#include "node/pciaer.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "node/sysfs.h"

static const char *const files[NODE_PCIAER_SEVERITIES] = {"aer_dev_fatal", "aer_dev_nonfatal",
                                                          "aer_dev_correctable"};
static const char *const names[NODE_PCIAER_SEVERITIES] = {"fatal", "nonfatal", "correctable"};

#define TOTAL_PREFIX "TOTAL_ERR_"

const char *node_pciaer_file(enum node_pciaer_severity s)
{
    return (unsigned)s < NODE_PCIAER_SEVERITIES ? files[s] : "";
}

const char *node_pciaer_name(enum node_pciaer_severity s)
{
    return (unsigned)s < NODE_PCIAER_SEVERITIES ? names[s] : "";
}

/* The decimal count of `n` bytes at `p` (digits only, at least one). */
static int parse_count(const char *p, size_t n, long long *ret)
{
    long long v = 0;
    if (n == 0)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -EINVAL;
        int d = p[i] - '0';
        if (v > (LLONG_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *ret = v;
    return 0;
}

/* The count of one line of `n` bytes when it is "TOTAL_ERR_<x> <count>": 0 with it, 1 when the
 * line is of another name, or the count's error. */
static int total_of_line(const char *line, size_t n, long long *ret)
{
    size_t plen = sizeof(TOTAL_PREFIX) - 1;
    if (n < plen || memcmp(line, TOTAL_PREFIX, plen) != 0)
        return 1;
    const char *sp = memchr(line, ' ', n);
    if (!sp)
        return -EINVAL;
    return parse_count(sp + 1, n - (size_t)(sp + 1 - line), ret);
}

int node_pciaer_parse(const char *text, size_t len, long long *ret)
{
    size_t pos = 0;
    while (text && pos < len) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) : len - pos;
        int r = total_of_line(line, n, ret);
        if (r <= 0)
            return r;
        pos += n + 1;
    }
    return -EINVAL;
}

int node_pciaer_read(int dev_fd, struct node_pciaer *ret)
{
    int found = 0;
    for (int s = 0; s < NODE_PCIAER_SEVERITIES; s++) {
        char buf[NODE_SYSFS_ATTR_MAX + 1];
        long long v = -1;
        int n = node_sysfs_read(dev_fd, files[s], buf, sizeof(buf));
        if (n < 0 || node_pciaer_parse(buf, (size_t)n, &v) < 0)
            v = -1;
        ret->total[s] = v;
        found += v >= 0;
    }
    return found;
}
