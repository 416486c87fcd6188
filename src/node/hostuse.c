/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/hostuse.c - what the host uses (mounts, swap, addresses, default routes) and whether a
 * PCI device holds it. See hostuse.h. Blocking (reads /proc and sysfs); no logging.
 *
 * Decisions:
 * - Everything read from /proc is capped: lines of LINE_CAP bytes or more (or with a NUL byte)
 *   and malformed lines are skipped; more than MAX_ENTRIES block devices or interfaces is an
 *   error (-E2BIG), since a list cut short would call critical devices safe.
 * - btrfs (and other filesystems that give each subvolume an anonymous device) show 0:N in
 *   mountinfo; for those the mount source is used when it is a block device under /dev/.
 * - Paths named by /proc (swap files, mount sources) are looked up through <proc>/1/root first,
 *   so that a containerized agent sees the host's files, then as they are.
 * - A mount point keeps the shortest path among the mounts of one device ("/" wins over the
 *   bind mounts kubelet makes of it); the first reason otherwise wins.
 * - IPv4 labels from getifaddrs ("eth0:1") name their interface ("eth0"); IPv6 link-local
 *   addresses (fe80::/10) do not count: every interface that is up has one.
 * - In sysfs, a block device holds another through slaves/ (device-mapper, md) and multipath/
 *   (native NVMe multipath, whose namespaces sit under devices/virtual/nvme-subsystem); an
 *   interface through upper_* links (bond, bridge, VLAN, macvlan). Both are followed
 *   MAX_DEPTH levels. Link targets are read with node_sysfs_read_link_target(), so the links on
 *   the way resolve inside the sysfs root like every other read.
 */
#include "node/hostuse.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "node/sysfs.h"

#define MAX_ENTRIES 4096  /* block devices, and interfaces, that the host uses */
#define LINE_CAP    32768 /* longest line of a /proc file, with its NUL */
#define MAX_FIELDS  32    /* most fields in a line of mountinfo, swaps or a route table */
#define MAX_DEPTH   4     /* levels of slaves/ and upper_* links followed */
#define NAME_SIZE   64    /* a block device or interface name in a reason */
#define SYS_PATH    512   /* a path below the sysfs root */
#define SKIPPED     2     /* next_line(): a line too long to read */

/* ---- collecting ---------------------------------------------------------------------------- */

struct builder {
    struct node_hostuse u;
    size_t blk_alloc, net_alloc;
    const char *proc;
};

/* Copies `src` into `dst`, cutting it at a UTF-8 character boundary if needed. */
static void copy_cut(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size) {
        n = size - 1;
        while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Room for one more element in an array of `n` of `alloc`; returns it or NULL (-E2BIG, -ENOMEM
 * in *r). */
static void *grow(void *array, size_t n, size_t *alloc, size_t elem, int *r)
{
    if (n < *alloc)
        return array;
    if (n >= MAX_ENTRIES) {
        *r = -E2BIG;
        return NULL;
    }
    size_t a = *alloc ? *alloc * 2 : 16;
    if (a > MAX_ENTRIES)
        a = MAX_ENTRIES;
    void *p = reallocarray(array, a, elem);
    if (!p) {
        *r = -ENOMEM;
        return NULL;
    }
    *alloc = a;
    return p;
}

/* Records that device major:minor backs `what` (a mount point or "swap"). */
static int add_blk(struct builder *b, unsigned major, unsigned minor, const char *what)
{
    for (size_t i = 0; i < b->u.n_blk; i++) {
        struct node_hostuse_blk *e = &b->u.blk[i];
        if (e->major != major || e->minor != minor)
            continue;
        if (what[0] == '/' && e->what[0] == '/' && strlen(what) < strlen(e->what))
            copy_cut(e->what, sizeof(e->what), what);
        return 0;
    }
    int r = 0;
    struct node_hostuse_blk *p = grow(b->u.blk, b->u.n_blk, &b->blk_alloc, sizeof(*p), &r);
    if (!p)
        return r;
    b->u.blk = p;
    struct node_hostuse_blk *e = &p[b->u.n_blk++];
    memset(e, 0, sizeof(*e));
    e->major = major;
    e->minor = minor;
    copy_cut(e->what, sizeof(e->what), what);
    return 0;
}

/* An interface name as the kernel allows them: 1-15 bytes, no '/' or ':', not "." or "..". */
static bool ifname_ok(const char *name, size_t len)
{
    if (len == 0 || len >= NODE_HOSTUSE_IFNAME || memchr(name, '/', len) || memchr(name, ':', len))
        return false;
    return !(name[0] == '.' && (len == 1 || (len == 2 && name[1] == '.')));
}

/* Records that interface `name` has `what`. An IPv4 label ("eth0:1") stands for its interface;
 * names the kernel would not give are skipped. */
static int add_net(struct builder *b, const char *name, const char *what)
{
    size_t len = strcspn(name, ":");
    if (!ifname_ok(name, len))
        return 0;
    for (size_t i = 0; i < b->u.n_net; i++)
        if (strncmp(b->u.net[i].ifname, name, len) == 0 && b->u.net[i].ifname[len] == '\0')
            return 0;
    int r = 0;
    struct node_hostuse_net *p = grow(b->u.net, b->u.n_net, &b->net_alloc, sizeof(*p), &r);
    if (!p)
        return r;
    b->u.net = p;
    struct node_hostuse_net *e = &p[b->u.n_net++];
    memset(e, 0, sizeof(*e));
    memcpy(e->ifname, name, len);
    copy_cut(e->what, sizeof(e->what), what);
    return 0;
}

/* ---- parsing /proc ------------------------------------------------------------------------- */

/* Reads one line of `f` into `buf` without its newline. Returns 1, 0 at end of file, -EIO, or
 * SKIPPED for a line that does not fit in `size` - 1 bytes or holds a NUL byte (consumed). */
static int next_line(FILE *f, char *buf, size_t size)
{
    size_t n = 0;
    bool bad = false;
    int c;
    while ((c = getc(f)) != EOF && c != '\n') {
        if (c == '\0' || n + 1 >= size)
            bad = true;
        else
            buf[n++] = (char)c;
    }
    if (c == EOF && ferror(f))
        return -EIO;
    if (c == EOF && n == 0 && !bad)
        return 0;
    buf[n] = '\0';
    return bad ? SKIPPED : 1;
}

/* Splits `line` in place at runs of spaces and tabs. Returns the number of fields, or -E2BIG
 * when there are more than `max`. */
static int split(char *line, char **fields, size_t max)
{
    size_t n = 0;
    char *p = line;
    for (;;) {
        p += strspn(p, " \t");
        if (*p == '\0')
            return (int)n;
        if (n == max)
            return -E2BIG;
        fields[n++] = p;
        p += strcspn(p, " \t");
        if (*p)
            *p++ = '\0';
    }
}

/* `len` decimal digits that fit in an unsigned int. */
static bool parse_uint(const char *s, size_t len, unsigned *ret)
{
    if (len == 0 || len > 10)
        return false;
    unsigned long long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > UINT_MAX)
        return false;
    *ret = (unsigned)v;
    return true;
}

/* "major:minor". */
static bool parse_devnum(const char *s, unsigned *major, unsigned *minor)
{
    const char *colon = strchr(s, ':');
    return colon && parse_uint(s, (size_t)(colon - s), major) &&
           parse_uint(colon + 1, strlen(colon + 1), minor);
}

static bool is_octal(char c)
{
    return c >= '0' && c <= '7';
}

/* Decodes in place the octal escapes the kernel writes in paths ("\040" for a space). Other
 * backslashes, and "\000", stay as they are. */
static void unescape(char *s)
{
    char *out = s;
    for (const char *p = s; *p;) {
        if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && is_octal(p[2]) && is_octal(p[3])) {
            int v = (p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0');
            if (v != 0) {
                *out++ = (char)v;
                p += 4;
                continue;
            }
        }
        *out++ = *p++;
    }
    *out = '\0';
}

/* `s` is exactly `len` '0' characters. */
static bool is_zeros(const char *s, size_t len)
{
    return strlen(s) == len && strspn(s, "0") == len;
}

/* stat(2) of the host's `path`: through <proc>/1/root first, then as it is. */
static int stat_host(const char *proc, const char *path, struct stat *st)
{
    char full[PATH_MAX];
    int n = snprintf(full, sizeof(full), "%s/1/root%s", proc, path);
    if (n > 0 && (size_t)n < sizeof(full) && stat(full, st) == 0)
        return 0;
    return stat(path, st) == 0 ? 0 : -errno;
}

struct mount {
    unsigned major, minor;
    const char *point, *source;
};

/* A line of mountinfo: "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw".
 * Unescapes the mount point and the source in place. Returns 0 or -EINVAL. */
static int parse_mount(char *line, struct mount *ret)
{
    char *f[MAX_FIELDS];
    int n = split(line, f, MAX_FIELDS);
    int sep = 6;
    while (sep < n && strcmp(f[sep], "-") != 0)
        sep++;
    if (sep + 2 >= n || !parse_devnum(f[2], &ret->major, &ret->minor) || f[4][0] != '/')
        return -EINVAL;
    unescape(f[4]);
    unescape(f[sep + 2]);
    ret->point = f[4];
    ret->source = f[sep + 2];
    return 0;
}

static int on_mount(struct builder *b, char *line)
{
    struct mount m;
    if (parse_mount(line, &m) < 0)
        return 0;
    if (m.major == 0 && strncmp(m.source, "/dev/", 5) == 0) {
        struct stat st;
        if (stat_host(b->proc, m.source, &st) == 0 && S_ISBLK(st.st_mode)) {
            m.major = major(st.st_rdev);
            m.minor = minor(st.st_rdev);
        }
    }
    return m.major == 0 ? 0 : add_blk(b, m.major, m.minor, m.point);
}

/* A line of /proc/swaps: "/dev/sda3 partition 8388604 0 -2". The header has no '/'. */
static int on_swap(struct builder *b, char *line)
{
    char *f[MAX_FIELDS];
    int n = split(line, f, MAX_FIELDS);
    if (n < 5 || f[0][0] != '/')
        return 0;
    unescape(f[0]);
    struct stat st;
    if (stat_host(b->proc, f[0], &st) < 0)
        return 0; /* gone since, or hidden from us */
    dev_t dev = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
    return major(dev) == 0 ? 0 : add_blk(b, major(dev), minor(dev), "swap");
}

/* A line of /proc/net/route: "eth0 00000000 0102A8C0 0003 0 0 100 00000000 0 0 0"; the default
 * route has Destination (2) and Mask (8) zero. */
static int on_route(struct builder *b, char *line)
{
    char *f[MAX_FIELDS];
    int n = split(line, f, MAX_FIELDS);
    if (n < 8 || !is_zeros(f[1], 8) || !is_zeros(f[7], 8) || strcmp(f[0], "lo") == 0)
        return 0;
    return add_net(b, f[0], "default route");
}

/* A line of /proc/net/ipv6_route: destination, prefix length, source, prefix length, next hop,
 * metric, references, use, flags, device. Routes on "lo" are the kernel's reject routes. */
static int on_route6(struct builder *b, char *line)
{
    char *f[MAX_FIELDS];
    int n = split(line, f, MAX_FIELDS);
    if (n < 10 || !is_zeros(f[0], 32) || !is_zeros(f[1], 2) || strcmp(f[9], "lo") == 0)
        return 0;
    return add_net(b, f[9], "default route");
}

typedef int (*line_fn)(struct builder *b, char *line);

/* Feeds each line of `f` that fits to `fn`. */
static int each_line(struct builder *b, FILE *f, line_fn fn)
{
    char *line = malloc(LINE_CAP);
    if (!line)
        return -ENOMEM;
    int r;
    while ((r = next_line(f, line, LINE_CAP)) > 0) {
        if (r == 1)
            r = fn(b, line);
        if (r < 0)
            break;
    }
    free(line);
    return r;
}

/* Opens <proc>/<name>; NULL with errno set on failure. */
static FILE *open_proc(const char *proc, const char *name)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/%s", proc, name);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    return fopen(path, "re");
}

/* Feeds the lines of <proc>/<name> to `fn`; a file that does not exist has none. */
static int read_optional(struct builder *b, const char *name, line_fn fn)
{
    _cleanup_fclose_ FILE *f = open_proc(b->proc, name);
    if (!f)
        return errno == ENOENT ? 0 : -errno;
    return each_line(b, f, fn);
}

static int read_mounts(struct builder *b)
{
    _cleanup_fclose_ FILE *f = open_proc(b->proc, "1/mountinfo");
    if (!f)
        f = open_proc(b->proc, "self/mountinfo");
    if (!f)
        return -errno;
    return each_line(b, f, on_mount);
}

/* Interface `a`'s address, unless it is loopback, link-local or not IP. */
static int on_address(struct builder *b, const struct ifaddrs *a)
{
    if (!a->ifa_addr || !a->ifa_name || (a->ifa_flags & IFF_LOOPBACK))
        return 0;
    char text[INET6_ADDRSTRLEN], what[96];
    const char *s = NULL;
    if (a->ifa_addr->sa_family == AF_INET) {
        struct sockaddr_in in;
        memcpy(&in, a->ifa_addr, sizeof(in));
        s = inet_ntop(AF_INET, &in.sin_addr, text, sizeof(text));
    } else if (a->ifa_addr->sa_family == AF_INET6) {
        struct sockaddr_in6 in6;
        memcpy(&in6, a->ifa_addr, sizeof(in6));
        if (!IN6_IS_ADDR_LINKLOCAL(&in6.sin6_addr))
            s = inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof(text));
    }
    if (!s)
        return 0;
    snprintf(what, sizeof(what), "address %s", s);
    return add_net(b, a->ifa_name, what);
}

static int read_addresses(struct builder *b)
{
    struct ifaddrs *list;
    if (getifaddrs(&list) < 0)
        return -errno;
    int r = 0;
    for (const struct ifaddrs *a = list; a && r == 0; a = a->ifa_next)
        r = on_address(b, a);
    freeifaddrs(list);
    return r;
}

void node_hostuse_done(struct node_hostuse *u)
{
    if (!u)
        return;
    free(u->blk);
    free(u->net);
    memset(u, 0, sizeof(*u));
}

int node_hostuse_collect(const char *proc_root, struct node_hostuse *ret)
{
    struct builder b = {.proc = proc_root ? proc_root : "/proc"};
    int r = read_mounts(&b);
    if (r == 0)
        r = read_optional(&b, "swaps", on_swap);
    if (r == 0)
        r = read_addresses(&b);
    if (r == 0)
        r = read_optional(&b, "net/route", on_route);
    if (r == 0)
        r = read_optional(&b, "net/ipv6_route", on_route6);
    if (r < 0) {
        node_hostuse_done(&b.u);
        return r;
    }
    *ret = b.u;
    return 0;
}

/* ---- checking a device --------------------------------------------------------------------- */

struct check {
    int root_fd;
    const char *address;
    const struct node_hostuse *use;
    enum node_hostuse_kind kind; /* of the finding, once there is one */
    struct err found;            /* its sentence */
};

static void say(struct check *c, enum node_hostuse_kind kind, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void say(struct check *c, enum node_hostuse_kind kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    c->kind = kind;
    /* clang-analyzer 14 takes `ap` for uninitialized when it has analyzed another file before. */
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized)
    vsnprintf(c->found.msg, sizeof(c->found.msg), fmt, ap);
    va_end(ap);
}

/* What backing block device `b` means. */
static enum node_hostuse_kind blk_kind(const struct node_hostuse_blk *b)
{
    return b->what[0] == '/' ? NODE_HOSTUSE_MOUNT : NODE_HOSTUSE_SWAP;
}

/* `s` has `name` as a whole '/'-separated component. */
static bool has_component(const char *s, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = s; *p;) {
        size_t n = strcspn(p, "/");
        if (n == len && memcmp(p, name, len) == 0)
            return true;
        p += n;
        p += strspn(p, "/");
    }
    return false;
}

/*
 * Whether link `path` points below the device: 1 yes, 0 no or absent, or -errno. Copies the last
 * component of the target (cut to NAME_SIZE) into `name`.
 */
static int link_below(const struct check *c, const char *path, char *name)
{
    char target[PATH_MAX];
    name[0] = '\0';
    int n = node_sysfs_read_link_target(c->root_fd, path, target, sizeof(target));
    if (n < 0)
        return n == -ENOENT ? 0 : n == -EFBIG ? -ENAMETOOLONG : n;
    const char *slash = strrchr(target, '/');
    copy_cut(name, NAME_SIZE, slash ? slash + 1 : target);
    return has_component(target, c->address);
}

/* Joins `a` and `b` with a '/' into `buf` (SYS_PATH bytes). */
static int join(char *buf, const char *a, const char *b)
{
    int n = snprintf(buf, SYS_PATH, "%s/%s", a, b);
    return n < 0 || n >= SYS_PATH ? -ENAMETOOLONG : 0;
}

/* The block device a search started from. */
struct top {
    const struct node_hostuse_blk *blk;
    char name[NAME_SIZE];
};

static const char *mount_word(const struct node_hostuse_blk *b)
{
    return b->what[0] == '/' ? "the mount " : "";
}

static int below_blk(struct check *c, const char *dir, int depth, const struct top *top);

/* Slave (or path) `name` in directory `dir` of the device `top` stands on. */
static int check_slave(struct check *c, const char *dir, const char *name, int depth,
                       const struct top *top)
{
    char path[SYS_PATH], slave[NAME_SIZE];
    int r = join(path, dir, name);
    if (r == 0)
        r = link_below(c, path, slave);
    if (r == 1) {
        const struct node_hostuse_blk *b = top->blk;
        say(c, blk_kind(b), "it holds block device %s, below %u:%u (%s), which backs %s%s", slave,
            b->major, b->minor, top->name, mount_word(b), b->what);
        return 1;
    }
    if (r < 0 || depth + 1 >= MAX_DEPTH)
        return r;
    return below_blk(c, path, depth + 1, top);
}

/* The devices listed in directory <dev>/<kind>. */
static int check_slaves(struct check *c, const char *dev, const char *kind, int depth,
                        const struct top *top)
{
    char dir[SYS_PATH];
    char **names = NULL;
    size_t n = 0;
    int r = join(dir, dev, kind);
    if (r == 0)
        r = node_sysfs_list(c->root_fd, dir, &names, &n);
    if (r == -ENOENT)
        return 0;
    for (size_t i = 0; r == 0 && i < n; i++)
        r = check_slave(c, dir, names[i], depth, top);
    node_sysfs_names_free(names);
    return r;
}

/* Whether a device block device `dev` (a sysfs path) is built on is below the PCI device. */
static int below_blk(struct check *c, const char *dev, int depth, const struct top *top)
{
    int r = check_slaves(c, dev, "slaves", depth, top);
    if (r == 0)
        r = check_slaves(c, dev, "multipath", depth, top);
    return r;
}

static int check_blk(struct check *c, const struct node_hostuse_blk *b)
{
    char path[SYS_PATH];
    struct top top = {.blk = b};
    snprintf(path, sizeof(path), "dev/block/%u:%u", b->major, b->minor);
    int r = link_below(c, path, top.name);
    if (r == 1)
        say(c, blk_kind(b), "it holds block device %u:%u (%s), which backs %s%s", b->major,
            b->minor, top.name, mount_word(b), b->what);
    if (r != 0 || top.name[0] == '\0') /* no name: the link is absent */
        return r;
    return below_blk(c, path, 0, &top);
}

/* The entry of `use` for interface `name`, or NULL. */
static const struct node_hostuse_net *find_net(const struct node_hostuse *use, const char *name)
{
    for (size_t i = 0; i < use->n_net; i++)
        if (strncmp(use->net[i].ifname, name, sizeof(use->net[i].ifname)) == 0)
            return &use->net[i];
    return NULL;
}

static int check_net(struct check *c, const struct node_hostuse_net *e)
{
    char path[SYS_PATH], name[NAME_SIZE];
    size_t len = strnlen(e->ifname, sizeof(e->ifname));
    if (!ifname_ok(e->ifname, len))
        return 0;
    snprintf(path, sizeof(path), "class/net/%s", e->ifname);
    int r = link_below(c, path, name);
    if (r == 1)
        say(c, NODE_HOSTUSE_NETWORK, "it holds network interface %s, which has %s", e->ifname,
            e->what);
    return r;
}

/* Whether an interface above `ifname` (an upper_* link, recursively) is in use; `lower` is the
 * interface of the device the search started from. */
static int check_uppers(struct check *c, const char *lower, const char *ifname, int depth)
{
    char path[SYS_PATH];
    char **names = NULL;
    size_t n = 0;
    if (depth >= MAX_DEPTH || !ifname_ok(ifname, strlen(ifname)))
        return 0;
    snprintf(path, sizeof(path), "class/net/%s", ifname);
    int r = node_sysfs_list(c->root_fd, path, &names, &n);
    if (r == -ENOENT)
        return 0;
    for (size_t i = 0; r == 0 && i < n; i++) {
        if (strncmp(names[i], "upper_", 6) != 0)
            continue;
        const char *upper = names[i] + 6;
        const struct node_hostuse_net *e = find_net(c->use, upper);
        if (e) {
            say(c, NODE_HOSTUSE_NETWORK,
                "it holds network interface %s, a lower device of %s, which has %s", lower, upper,
                e->what);
            r = 1;
        } else {
            r = check_uppers(c, lower, upper, depth + 1);
        }
    }
    node_sysfs_names_free(names);
    return r;
}

/* The interfaces in <dev>/net. */
static int check_net_dir(struct check *c, const char *dev)
{
    char dir[SYS_PATH];
    char **names = NULL;
    size_t n = 0;
    int r = join(dir, dev, "net");
    if (r == 0)
        r = node_sysfs_list(c->root_fd, dir, &names, &n);
    if (r == -ENOENT)
        return 0;
    for (size_t i = 0; r == 0 && i < n; i++)
        r = check_uppers(c, names[i], names[i], 0);
    node_sysfs_names_free(names);
    return r;
}

/* The interfaces of the device (in net/, or in virtioN/net/ for virtio-net) that are lower
 * devices of an interface in use. */
static int check_lowers(struct check *c)
{
    char dev[SYS_PATH], sub[SYS_PATH];
    char **names = NULL;
    size_t n = 0;
    snprintf(dev, sizeof(dev), "bus/pci/devices/%s", c->address);
    int r = check_net_dir(c, dev);
    if (r != 0)
        return r;
    r = node_sysfs_list(c->root_fd, dev, &names, &n);
    if (r == -ENOENT)
        return 0;
    for (size_t i = 0; r == 0 && i < n; i++) {
        if (strncmp(names[i], "virtio", 6) != 0)
            continue;
        r = join(sub, dev, names[i]);
        if (r == 0)
            r = check_net_dir(c, sub);
    }
    node_sysfs_names_free(names);
    return r;
}

/* A PCI address as a single path component. */
static bool address_ok(const char *address)
{
    size_t len = address ? strlen(address) : 0;
    return len > 0 && len < 64 && !strchr(address, '/') && strcmp(address, ".") != 0 &&
           strcmp(address, "..") != 0;
}

int node_hostuse_check(int sysfs_root_fd, const char *address, const struct node_hostuse *use,
                       enum node_hostuse_kind *ret_kind, struct err *ret_err)
{
    if (!address_ok(address))
        return err_set(ret_err, -EINVAL, "\"%s\" is not a PCI address", address ? address : "");
    struct check c = {.root_fd = sysfs_root_fd, .address = address, .use = use};
    int r = 0;
    for (size_t i = 0; use && r == 0 && i < use->n_blk; i++)
        r = check_blk(&c, &use->blk[i]);
    for (size_t i = 0; use && r == 0 && i < use->n_net; i++)
        r = check_net(&c, &use->net[i]);
    if (use && r == 0 && use->n_net > 0)
        r = check_lowers(&c);
    if (r < 0)
        return err_set(ret_err, r, "cannot follow the sysfs links of %s: %s", address,
                       strerror(-r));
    if (ret_kind)
        *ret_kind = r > 0 ? c.kind : NODE_HOSTUSE_NONE;
    if (r > 0 && ret_err)
        *ret_err = c.found;
    return r;
}
