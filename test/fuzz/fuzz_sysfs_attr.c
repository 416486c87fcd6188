/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_sysfs_attr.c - the sysfs attribute parsers on arbitrary bytes.
 *
 * Input: one byte, then the attribute's content. The byte picks the caller's buffer size for
 * node_sysfs_read() (1 + byte * 17, up to 4336, so both sides of the 4 KiB cap are reached).
 * The content goes through node_sysfs_chomp() and node_sysfs_parse_int() (bases 10 and 16)
 * directly, and through node_sysfs_read() and node_sysfs_read_int() from a real file in a
 * temporary directory. Checks the results against a model written here: the newline rule,
 * the cap, NUL bytes, and that every accepted integer is exactly what strtoll() reads and
 * prints back the same.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/sysfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static int root_fd = -1;
static int attr_fd = -1;

static void cleanup(void)
{
    char path[96];
    snprintf(path, sizeof(path), "%s/attr", dir);
    unlink(path);
    rmdir(dir);
}

static int setup(void)
{
    if (root_fd >= 0)
        return 0;
    /* tmpfs when there is one: a file system with a journal makes each write slow. */
    snprintf(dir, sizeof(dir), "/dev/shm/fuzz-sysfs-XXXXXX");
    if (!mkdtemp(dir)) {
        snprintf(dir, sizeof(dir), "/tmp/fuzz-sysfs-XXXXXX");
        if (!mkdtemp(dir))
            return -1;
    }
    root_fd = node_sysfs_open_root(dir);
    attr_fd = openat(root_fd, "attr", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    atexit(cleanup);
    return root_fd >= 0 && attr_fd >= 0 ? 0 : -1;
}

/* An accepted integer is what strtoll() reads, and its printed form parses back to it. */
static void check_int(const char *s, int base)
{
    long long v = 0x5a5a;
    int r = node_sysfs_parse_int(s, base, &v);
    if (r != 0 && r != -EINVAL && r != -ERANGE)
        abort();
    if (r != 0) {
        if (v != 0x5a5a)
            abort();
        return;
    }
    size_t len = strlen(s);
    if (len > 0 && s[len - 1] == '\n')
        len--;
    if (len == 0 || strchr(" \t+", s[0]) || memchr(s, ' ', len) || memchr(s, '\n', len))
        abort();
    char *end;
    if (strtoll(s, &end, base) != v || end != s + len)
        abort();
    if (base == 16 && (v < 0 || s[0] == '-'))
        abort();
    char again[40];
    snprintf(again, sizeof(again), base == 16 ? "0x%llx" : "%lld", v);
    long long w;
    if (node_sysfs_parse_int(again, base, &w) != 0 || w != v)
        abort();
}

static void check_chomp(const char *s, size_t len)
{
    char *copy = malloc(len + 1);
    if (!copy)
        return;
    memcpy(copy, s, len + 1);
    size_t n = node_sysfs_chomp(copy, len);
    bool nl = len > 0 && s[len - 1] == '\n';
    if (n != (nl ? len - 1 : len) || copy[n] != '\0' || memcmp(copy, s, n) != 0)
        abort();
    free(copy);
}

/* node_sysfs_read() of the content from a file, against the model. */
static void check_read(const uint8_t *content, size_t len, size_t bufsize)
{
    if (ftruncate(attr_fd, 0) < 0 || pwrite(attr_fd, content, len, 0) != (ssize_t)len)
        return;
    char *buf = malloc(bufsize);
    if (!buf)
        return;
    int r = node_sysfs_read(root_fd, "attr", buf, bufsize);
    size_t want = len > 0 && content[len - 1] == '\n' ? len - 1 : len;
    int expect = len > NODE_SYSFS_ATTR_MAX    ? -EFBIG
                 : memchr(content, '\0', len) ? -EINVAL
                 : want >= bufsize            ? -EFBIG
                                              : (int)want;
    if (r != expect || buf[r >= 0 ? (size_t)r : 0] != '\0')
        abort();
    if (r >= 0 && memcmp(buf, content, want) != 0)
        abort();
    long long v = 0, w = 0;
    int ri = node_sysfs_read_int(root_fd, "attr", 10, &v);
    if (r >= 0 && want < 64) {
        if (ri != node_sysfs_parse_int(buf, 10, &w) || (ri == 0 && v != w))
            abort();
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || setup() < 0)
        return 0;
    size_t bufsize = 1 + (size_t)data[0] * 17;
    const uint8_t *content = data + 1;
    size_t len = size - 1;

    char *s = malloc(len + 1);
    if (!s)
        return 0;
    memcpy(s, content, len);
    s[len] = '\0';
    check_int(s, 10);
    check_int(s, 16);
    check_chomp(s, strlen(s));
    free(s);

    check_read(content, len, bufsize);
    return 0;
}
