/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/fuzz/fuzz_proc.c - node_hostuse_collect() on arbitrary /proc contents.
 *
 * Input: up to four parts separated by the byte 0x1e, written to a temporary proc tree as
 * 1/mountinfo, swaps, net/route and net/ipv6_route; then collect() reads them (plus the real
 * system's getifaddrs). Checks what it returns: counts within the cap, every major number
 * non-zero (anonymous mounts are left out unless their source is a real block device),
 * interface names NUL-terminated, non-empty and shorter than IFNAMSIZ, reasons NUL-terminated.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzztmp.h"
#include "node/hostuse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static const char *const files[] = {"1/mountinfo", "swaps", "net/route", "net/ipv6_route"};

static void cleanup(void)
{
    char path[128];
    for (size_t i = 0; i < 4; i++) {
        (void)snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        (void)unlink(path);
    }
    (void)snprintf(path, sizeof(path), "%s/1", dir);
    (void)rmdir(path);
    (void)snprintf(path, sizeof(path), "%s/net", dir);
    (void)rmdir(path);
    (void)rmdir(dir);
}

static int setup(void)
{
    char path[128];
    if (dir[0])
        return 0;
    (void)snprintf(dir, sizeof(dir), "%s/fuzz-proc.XXXXXX", fuzz_tmpdir());
    if (!mkdtemp(dir))
        return -1;
    (void)snprintf(path, sizeof(path), "%s/1", dir);
    (void)mkdir(path, 0755);
    (void)snprintf(path, sizeof(path), "%s/net", dir);
    (void)mkdir(path, 0755);
    atexit(cleanup);
    return 0;
}

static void put(const char *name, const uint8_t *p, size_t n)
{
    char path[128];
    (void)snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        abort();
    if (n && write(fd, p, n) != (ssize_t)n)
        abort();
    close(fd);
}

static void check(const struct node_hostuse *u)
{
    if (u->n_blk > 4096 || u->n_net > 4096)
        abort();
    for (size_t i = 0; i < u->n_blk; i++)
        if (u->blk[i].major == 0 || !memchr(u->blk[i].what, '\0', sizeof(u->blk[i].what)))
            abort();
    for (size_t i = 0; i < u->n_net; i++) {
        size_t len = strnlen(u->net[i].ifname, sizeof(u->net[i].ifname));
        if (len == 0 || len >= sizeof(u->net[i].ifname) ||
            !memchr(u->net[i].what, '\0', sizeof(u->net[i].what)))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (setup() < 0)
        return 0;
    size_t start = 0, part = 0;
    for (size_t i = 0; i <= size && part < 4; i++) {
        if (i == size || data[i] == 0x1e) {
            put(files[part++], data + start, i - start);
            start = i + 1;
        }
    }
    while (part < 4)
        put(files[part++], NULL, 0);
    struct node_hostuse u = {0};
    int r = node_hostuse_collect(dir, &u);
    if (r == 0)
        check(&u);
    else if (r != -E2BIG && r != -ENOMEM)
        abort(); /* malformed lines are skipped, not errors */
    node_hostuse_done(&u);
    return 0;
}
