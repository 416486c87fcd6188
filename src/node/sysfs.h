/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/sysfs.h - reads and writes sysfs attributes below a root directory opened once.
 *
 * The root is "/sys" on a node and a fake tree made by hack/mk-sysfs-fixture.sh in tests. Every
 * path is relative to the root fd; absolute paths and ".." components are refused. Files are
 * opened with openat2(RESOLVE_IN_ROOT) so that symlinks (bus/pci/devices/X -> ../../../devices/..)
 * resolve inside the root, falling back to openat() where openat2 is not available (kernels
 * before 5.6, some seccomp filters). openat2 calls that race a rename elsewhere (EAGAIN) are
 * tried again. All descriptors are O_CLOEXEC.
 *
 * Blocking: reads are quick; a write to unbind/bind/drivers_probe can block for seconds (driver
 * remove and probe paths), so callers run writes off the event loop. No logging; errors are
 * negative errno values. The parsers (node_sysfs_parse_int, node_sysfs_chomp) are pure and
 * fuzzed (test/fuzz/fuzz_sysfs_attr.c).
 */
#pragma once

#include <stddef.h>

/* The most bytes an attribute may hold: sysfs show() methods fill one page. */
#define NODE_SYSFS_ATTR_MAX 4096

/* Opens `root` (e.g. "/sys") as a directory. Returns the fd (>= 0) or -errno. */
int node_sysfs_open_root(const char *root);

/*
 * Reads attribute `path` (relative to `root_fd`) into `buf` as a NUL-terminated string without
 * its trailing newline. Returns the length, -EFBIG when the attribute holds more than
 * NODE_SYSFS_ATTR_MAX bytes or does not fit in `size` - 1, -EINVAL for a bad path or an attribute
 * with a NUL byte inside, or another -errno (-ENOENT when absent). On failure `buf` is "" (when
 * size > 0).
 */
int node_sysfs_read(int root_fd, const char *path, char *buf, size_t size);

/*
 * Reads an integer attribute with node_sysfs_parse_int(). Returns 0 with `*ret` set, or
 * -errno as node_sysfs_read() and node_sysfs_parse_int().
 */
int node_sysfs_read_int(int root_fd, const char *path, int base, long long *ret);

/*
 * Strict integer parsing of a whole attribute value. `base` is 10 (optional '-', digits) or 16
 * (hex digits with an optional "0x"/"0X" prefix, no sign), as sysfs prints them ("-1", "0x15b3",
 * "15b3"). One trailing newline is accepted. No spaces, no '+', no empty digits. Returns 0, or
 * -EINVAL for anything else, -ERANGE when the value does not fit in a long long.
 */
int node_sysfs_parse_int(const char *s, int base, long long *ret);

/* Removes one trailing newline from the `len` bytes at `s` (NUL-terminating there) and returns
 * the new length. */
size_t node_sysfs_chomp(char *s, size_t len);

/*
 * Reads the symlink `path` and writes the last component of its target into `buf` ("mlx5_core"
 * for driver -> ../../../bus/pci/drivers/mlx5_core). Returns the length, -ENOENT when absent,
 * -EINVAL when it is not a link or its target has no last component, -EFBIG when the name does
 * not fit in `size` - 1.
 */
int node_sysfs_read_link(int root_fd, const char *path, char *buf, size_t size);

/*
 * Reads the whole target of symlink `path` ("../../devices/pci0000:00/0000:00:1f.2/ata1/...")
 * into `buf`, without trailing slashes; the directories on the way to the link resolve inside
 * the root. Returns the length, -ENOENT when absent, -EINVAL when it is not a link or the path
 * is bad, -EFBIG when the target does not fit in `size` - 1.
 */
int node_sysfs_read_link_target(int root_fd, const char *path, char *buf, size_t size);

/*
 * Reads the symlink `path` as node_sysfs_read_link() does and checks that it resolves, inside
 * the root, to the directory `<dir>/<name>`, e.g. a driver link to "bus/pci/drivers/mlx5_core".
 * Returns the length of the name written to `buf`, -ENOENT when the link is absent or leads
 * nowhere (dangling), -EXDEV when it leads to a directory that is not `<dir>/<name>`, -ELOOP,
 * -ENOTDIR and other -errno when its target cannot be opened as a directory, or the errors of
 * node_sysfs_read_link(). On failure `buf` is "" (when size > 0).
 */
int node_sysfs_read_link_in(int root_fd, const char *path, const char *dir, char *buf, size_t size);

/*
 * Opens directory `path` below the root (links on the way followed inside the root) as an
 * O_PATH descriptor, e.g. a device's directory "bus/pci/devices/0000:3b:00.0", whose attributes
 * are then read by passing it as the `root_fd` of the functions here: their paths resolve inside
 * that directory (a link in it that leads out, by ".." or an absolute target, stays in it, as
 * one from the root does), and what is read is the directory opened even when its path is
 * replaced afterwards. One lookup from the root per device rather than one per attribute.
 * Returns the fd (>= 0, close it) or -errno: -ENOENT (absent, or a dangling link), -ENOTDIR,
 * -ELOOP, -EINVAL (a bad path).
 */
int node_sysfs_open_dir(int root_fd, const char *path);

/* Whether `path` is (or leads, through links inside the root, to) a directory: 0, or -ENOENT
 * (absent, or a dangling link), -ENOTDIR, -ELOOP (a link loop), -EINVAL (a bad path), -errno. */
int node_sysfs_check_dir(int root_fd, const char *path);

/*
 * The real directories in `dir` (e.g. "bus/pci/drivers"), by inode: what a scan checks many
 * links against. Entries that are not directories themselves (links, files) are left out.
 * Returns 0 and the map, or -errno. Free with node_sysfs_dirmap_free() (takes NULL).
 */
struct node_sysfs_dirmap;
int node_sysfs_dirmap_new(int root_fd, const char *dir, struct node_sysfs_dirmap **ret);
void node_sysfs_dirmap_free(struct node_sysfs_dirmap *m);

/*
 * As node_sysfs_read_link_in(), against a map: the name in the map's directory of the directory
 * link `path` leads to (followed inside the root), in three system calls rather than nine.
 * -ENOENT (absent or dangling), -EXDEV (leads elsewhere), -ELOOP, -ENOTDIR, -EFBIG.
 */
int node_sysfs_read_link_via(int root_fd, const char *path, const struct node_sysfs_dirmap *m,
                             char *buf, size_t size);

/*
 * Lists the entries of directory `path` ("." and ".." excluded), sorted with strcmp. On success
 * `*ret_names` is a NULL-terminated array of `*ret_count` strings, freed with
 * node_sysfs_names_free(). Returns 0 or -errno.
 */
int node_sysfs_list(int root_fd, const char *path, char ***ret_names, size_t *ret_count);

/* Frees a list from node_sysfs_list(). Takes NULL. */
void node_sysfs_names_free(char **names);

/*
 * Writes `value` to attribute `path` with a single write(2): sysfs hands each write to the
 * attribute's store() once. The file is opened O_WRONLY|O_TRUNC (as a shell's `>` does), so a
 * fake tree keeps the last value written. `value` must not be empty (a zero-length write stores
 * nothing; clear driver_override with "\n"). Returns 0, -EINVAL for an empty value or a bad
 * path, -EIO on a short write, or -errno from open or write: the kernel's answer, e.g. -ENODEV
 * from unbind, -EBUSY from bind.
 */
int node_sysfs_write(int root_fd, const char *path, const char *value);

/* What a sysfs read's error means, for people: "not a directory", "a symbolic link loop", "too
 * long", "malformed", "out of range", else strerror; -ENOENT reads as `absent` (the caller knows
 * whether that is a missing attribute or a dangling link). */
const char *node_sysfs_trouble(int r, const char *absent);

/* Copies `src` (NULL = "") into `dst`, cutting it at a UTF-8 character boundary if needed. */
void node_sysfs_copy_name(char *dst, size_t size, const char *src);

/* An entry of a sysfs directory (bus/pci/devices, bus/usb/devices) a scan left out, because not
 * even its identity could be read. */
struct node_sysfs_skip {
    char entry[64]; /* the entry's name as found, cut to fit: a PCI address, a USB port path */
    char why[256];  /* "not a directory", libpci's message, ... */
};

/* Appends {entry, why} (each cut with node_sysfs_copy_name) to the array `*v` of `*n` entries,
 * `*alloc` of them allocated (it grows). Returns 0 or -ENOMEM. */
int node_sysfs_skip_add(struct node_sysfs_skip **v, size_t *n, size_t *alloc, const char *entry,
                        const char *why);
