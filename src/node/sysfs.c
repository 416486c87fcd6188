/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/sysfs.c - sysfs attributes below a root fd. See sysfs.h. No logging.
 */
#include "node/sysfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"

/* Tries of openat2 that raced a rename (EAGAIN) before giving up with -EAGAIN. */
#define OPENAT2_TRIES 64

/* Set once openat2 turned out to be missing (ENOSYS); then plain openat is used. */
static int no_openat2;

/* A relative path without ".." components. */
static bool path_ok(const char *path)
{
    if (!path || path[0] == '\0' || path[0] == '/')
        return false;
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return false;
        p += n;
        while (*p == '/')
            p++;
    }
    return true;
}

/* openat2(RESOLVE_IN_ROOT): the fd or -errno. The kernel answers EAGAIN when a rename or mount
 * anywhere in the system raced a ".." step of the lookup (sysfs links are full of them), and
 * expects the caller to try again; a busy node sees that on a few percent of lookups. */
static int openat2_in_root(int root_fd, const char *path, int flags)
{
    struct open_how how = {
            .flags = (uint64_t)(flags | O_CLOEXEC),
            .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    for (int i = 0; i < OPENAT2_TRIES; i++) {
        long fd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
        if (fd >= 0)
            return (int)fd;
        if (errno != EAGAIN)
            break;
    }
    return -errno;
}

/* Opens `path` below `root_fd`, keeping symlink resolution inside the root when the kernel can. */
static int open_in_root(int root_fd, const char *path, int flags)
{
    if (!path_ok(path))
        return -EINVAL;
    if (!__atomic_load_n(&no_openat2, __ATOMIC_RELAXED)) {
        int fd = openat2_in_root(root_fd, path, flags);
        if (fd >= 0 || (fd != -ENOSYS && fd != -EPERM)) /* some seccomp filters answer EPERM */
            return fd;
        if (fd == -ENOSYS)
            __atomic_store_n(&no_openat2, 1, __ATOMIC_RELAXED);
    }
    int fd = openat(root_fd, path, flags | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int node_sysfs_open_root(const char *root)
{
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

size_t node_sysfs_chomp(char *s, size_t len)
{
    if (len > 0 && s[len - 1] == '\n')
        len--;
    s[len] = '\0';
    return len;
}

/* Reads until end of file or `size` bytes. A short read is taken as the end: sysfs hands over
 * an attribute's whole value (one show() page) in the first read, as regular files do, so an
 * attribute costs one read rather than two. Returns the count or -errno. */
static ssize_t read_all(int fd, char *buf, size_t size)
{
    size_t n = 0;
    while (n < size) {
        size_t want = size - n;
        ssize_t r = read(fd, buf + n, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        n += (size_t)r;
        if ((size_t)r < want) /* the end (0), or all there was */
            break;
    }
    return (ssize_t)n;
}

int node_sysfs_read(int root_fd, const char *path, char *buf, size_t size)
{
    if (size == 0)
        return -EFBIG;
    buf[0] = '\0';
    char tmp[NODE_SYSFS_ATTR_MAX + 1];
    _cleanup_close_ int fd = open_in_root(root_fd, path, O_RDONLY);
    if (fd < 0)
        return fd;
    ssize_t n = read_all(fd, tmp, sizeof(tmp));
    if (n < 0)
        return (int)n;
    if ((size_t)n > NODE_SYSFS_ATTR_MAX)
        return -EFBIG;
    if (memchr(tmp, '\0', (size_t)n))
        return -EINVAL;
    size_t len = node_sysfs_chomp(tmp, (size_t)n);
    if (len >= size)
        return -EFBIG;
    memcpy(buf, tmp, len + 1);
    return (int)len;
}

static bool is_digit_in(char c, int base)
{
    if (c >= '0' && c <= '9')
        return true;
    return base == 16 && ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'));
}

int node_sysfs_parse_int(const char *s, int base, long long *ret)
{
    size_t len = strlen(s);
    if (len > 0 && s[len - 1] == '\n')
        len--;
    const char *end = s + len, *p = s;
    if (base == 16 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        p += 2;
    else if (base == 10 && p[0] == '-')
        p++;
    else if (base != 10 && base != 16)
        return -EINVAL;
    if (p >= end)
        return -EINVAL;
    for (const char *q = p; q < end; q++)
        if (!is_digit_in(*q, base))
            return -EINVAL;
    char *stop;
    errno = 0;
    long long v = strtoll(s, &stop, base);
    if (errno == ERANGE)
        return -ERANGE;
    if (stop != end)
        return -EINVAL;
    *ret = v;
    return 0;
}

int node_sysfs_read_int(int root_fd, const char *path, int base, long long *ret)
{
    char buf[64];
    int r = node_sysfs_read(root_fd, path, buf, sizeof(buf));
    if (r < 0)
        return r;
    return node_sysfs_parse_int(buf, base, ret);
}

/* The last component of a link target, without trailing slashes; NULL when there is none. */
static const char *target_name(char *target, size_t n)
{
    while (n > 0 && target[n - 1] == '/')
        target[--n] = '\0';
    const char *slash = strrchr(target, '/');
    const char *name = slash ? slash + 1 : target;
    if (name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return NULL;
    return name;
}

int node_sysfs_read_link_target(int root_fd, const char *path, char *buf, size_t size)
{
    if (size == 0)
        return -EFBIG;
    buf[0] = '\0';
    if (!path_ok(path))
        return -EINVAL;
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    if (name[0] == '\0')
        return -EINVAL;
    _cleanup_close_ int dir = -1;
    if (slash) {
        char parent[PATH_MAX];
        size_t plen = (size_t)(slash - path);
        if (plen >= sizeof(parent))
            return -ENAMETOOLONG;
        memcpy(parent, path, plen);
        parent[plen] = '\0';
        dir = open_in_root(root_fd, parent, O_PATH | O_DIRECTORY);
        if (dir < 0)
            return dir;
    }
    ssize_t n = readlinkat(slash ? dir : root_fd, name, buf, size);
    if (n < 0) {
        int e = errno;
        buf[0] = '\0';
        return -e;
    }
    if ((size_t)n >= size) {
        buf[0] = '\0';
        return -EFBIG;
    }
    while (n > 0 && buf[n - 1] == '/')
        n--;
    buf[n] = '\0';
    return (int)n;
}

int node_sysfs_read_link(int root_fd, const char *path, char *buf, size_t size)
{
    char target[PATH_MAX];
    if (size == 0)
        return -EFBIG;
    buf[0] = '\0';
    int n = node_sysfs_read_link_target(root_fd, path, target, sizeof(target));
    if (n < 0)
        return n == -EFBIG ? -ENAMETOOLONG : n;
    const char *base = target_name(target, (size_t)n);
    if (!base)
        return -EINVAL;
    size_t len = strlen(base);
    if (len >= size)
        return -EFBIG;
    memcpy(buf, base, len + 1);
    return (int)len;
}

int node_sysfs_open_dir(int root_fd, const char *path)
{
    return open_in_root(root_fd, path, O_PATH | O_DIRECTORY);
}

int node_sysfs_check_dir(int root_fd, const char *path)
{
    int fd = open_in_root(root_fd, path, O_PATH | O_DIRECTORY);
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

/* fstat(2) of the directory `path` leads to. */
static int stat_dir(int root_fd, const char *path, struct stat *ret)
{
    _cleanup_close_ int fd = open_in_root(root_fd, path, O_PATH | O_DIRECTORY);
    if (fd < 0)
        return fd;
    return fstat(fd, ret) < 0 ? -errno : 0;
}

/* Whether link `path` leads to the same directory as `<dir>/<name>`. */
static int same_dir(int root_fd, const char *path, const char *dir, const char *name)
{
    char want[PATH_MAX];
    struct stat got, expect;
    int n = snprintf(want, sizeof(want), "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof(want))
        return -ENAMETOOLONG;
    int r = stat_dir(root_fd, path, &got);
    if (r < 0)
        return r;
    if (stat_dir(root_fd, want, &expect) < 0)
        return -EXDEV;
    return got.st_dev == expect.st_dev && got.st_ino == expect.st_ino ? 0 : -EXDEV;
}

int node_sysfs_read_link_in(int root_fd, const char *path, const char *dir, char *buf, size_t size)
{
    char name[NAME_MAX + 1];
    if (size == 0)
        return -EFBIG;
    buf[0] = '\0';
    int n = node_sysfs_read_link(root_fd, path, name, sizeof(name));
    if (n < 0)
        return n == -EFBIG ? -ENAMETOOLONG : n;
    int r = same_dir(root_fd, path, dir, name);
    if (r < 0)
        return r;
    if ((size_t)n >= size)
        return -EFBIG;
    memcpy(buf, name, (size_t)n + 1);
    return n;
}

void node_sysfs_names_free(char **names)
{
    if (!names)
        return;
    for (char **p = names; *p; p++)
        free(*p);
    free(names);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends a copy of `name` to the NULL-terminated array `*names` of `*count` entries. */
static int add_name(char ***names, size_t *count, size_t *alloc, const char *name)
{
    if (*count + 2 > *alloc) {
        size_t n = *alloc ? *alloc * 2 : 16;
        char **p = realloc(*names, n * sizeof(*p));
        if (!p)
            return -ENOMEM;
        *names = p;
        *alloc = n;
        p[*count] = NULL;
    }
    char *copy = strdup(name);
    if (!copy)
        return -ENOMEM;
    (*names)[(*count)++] = copy;
    (*names)[*count] = NULL;
    return 0;
}

/* Adds the names of the open directory `fd` ("." and ".." excluded). getdents64 straight: the
 * fstat and two fcntl calls of fdopendir(3) are a third of a small listing's calls. */
static int add_entries(int fd, char ***names, size_t *count, size_t *alloc)
{
    _Alignas(struct dirent64) char buf[16384]; /* (its layout is the kernel's on 64-bit) */
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : 0;
        for (long off = 0; off < n;) {
            const struct dirent64 *e = (const void *)(buf + off);
            off += e->d_reclen;
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            int r = add_name(names, count, alloc, e->d_name);
            if (r < 0)
                return r;
        }
    }
}

int node_sysfs_list(int root_fd, const char *path, char ***ret_names, size_t *ret_count)
{
    _cleanup_close_ int fd = open_in_root(root_fd, path, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return fd;
    char **names = NULL;
    size_t count = 0, alloc = 0;
    int r = add_entries(fd, &names, &count, &alloc);
    if (r == 0 && !names) {
        names = calloc(1, sizeof(*names));
        r = names ? 0 : -ENOMEM;
    }
    if (r < 0) {
        node_sysfs_names_free(names);
        return r;
    }
    if (count > 1)
        qsort(names, count, sizeof(*names), compare_names);
    *ret_names = names;
    *ret_count = count;
    return 0;
}

int node_sysfs_write(int root_fd, const char *path, const char *value)
{
    size_t len = strlen(value);
    if (len == 0)
        return -EINVAL;
    _cleanup_close_ int fd = open_in_root(root_fd, path, O_WRONLY | O_TRUNC);
    if (fd < 0)
        return fd;
    ssize_t n;
    do
        n = write(fd, value, len);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : -EIO;
}

/* --- directory maps ------------------------------------------------------------------------ */

struct dirmap_entry {
    dev_t dev;
    ino_t ino;
    char *name;
};

struct node_sysfs_dirmap {
    struct dirmap_entry *e;
    size_t n;
};

static int compare_inodes(const void *a, const void *b)
{
    const struct dirmap_entry *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

void node_sysfs_dirmap_free(struct node_sysfs_dirmap *m)
{
    for (size_t i = 0; m && i < m->n; i++)
        free(m->e[i].name);
    if (m)
        free(m->e);
    free(m);
}

/* Adds the entries of the open directory `fd` that are directories. */
static int dirmap_fill(struct node_sysfs_dirmap *m, int fd, char **names, size_t count)
{
    m->e = calloc(count ? count : 1, sizeof(*m->e));
    if (!m->e)
        return -ENOMEM;
    for (size_t i = 0; i < count; i++) {
        struct stat st;
        if (fstatat(fd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
            continue;
        m->e[m->n] = (struct dirmap_entry){st.st_dev, st.st_ino, names[i]};
        names[i] = NULL; /* taken */
        m->n++;
    }
    qsort(m->e, m->n, sizeof(*m->e), compare_inodes);
    return 0;
}

int node_sysfs_dirmap_new(int root_fd, const char *dir, struct node_sysfs_dirmap **ret)
{
    char **names = NULL;
    size_t count = 0;
    int r = node_sysfs_list(root_fd, dir, &names, &count);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = open_in_root(root_fd, dir, O_PATH | O_DIRECTORY);
    struct node_sysfs_dirmap *m = calloc(1, sizeof(*m));
    r = fd < 0 ? fd : m ? dirmap_fill(m, fd, names, count) : -ENOMEM;
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    if (r < 0) {
        node_sysfs_dirmap_free(m);
        return r;
    }
    *ret = m;
    return 0;
}

int node_sysfs_read_link_via(int root_fd, const char *path, const struct node_sysfs_dirmap *m,
                             char *buf, size_t size)
{
    struct stat st;
    if (size == 0)
        return -EFBIG;
    buf[0] = '\0';
    int r = stat_dir(root_fd, path, &st);
    if (r < 0)
        return r;
    struct dirmap_entry key = {.dev = st.st_dev, .ino = st.st_ino};
    const struct dirmap_entry *e =
            m ? bsearch(&key, m->e, m->n, sizeof(*m->e), compare_inodes) : NULL;
    if (!e)
        return -EXDEV;
    size_t len = strlen(e->name);
    if (len >= size)
        return -EFBIG;
    memcpy(buf, e->name, len + 1);
    return (int)len;
}

const char *node_sysfs_trouble(int r, const char *absent)
{
    switch (r) {
    case -ENOENT:
        return absent;
    case -ENOTDIR:
        return "not a directory";
    case -ELOOP:
        return "a symbolic link loop";
    case -EFBIG:
        return "too long";
    case -EINVAL:
        return "malformed";
    case -ERANGE:
        return "out of range";
    default:
        return strerror(-r);
    }
}

void node_sysfs_copy_name(char *dst, size_t size, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= size) {
        n = size - 1;
        while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
            n--;
    }
    if (n > 0)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

int node_sysfs_skip_add(struct node_sysfs_skip **v, size_t *n, size_t *alloc, const char *entry,
                        const char *why)
{
    if (*n == *alloc) {
        size_t a = *alloc ? *alloc * 2 : 8;
        struct node_sysfs_skip *p = reallocarray(*v, a, sizeof(*p));
        if (!p)
            return -ENOMEM;
        *v = p;
        *alloc = a;
    }
    struct node_sysfs_skip *k = &(*v)[(*n)++];
    node_sysfs_copy_name(k->entry, sizeof(k->entry), entry);
    node_sysfs_copy_name(k->why, sizeof(k->why), why);
    return 0;
}
