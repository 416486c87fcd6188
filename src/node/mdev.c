/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/mdev.c - mediated devices' parents, types and instances, read from sysfs; creating and
 * removing instances (see mdev.h). Blocking (sysfs reads and writes); no logging.
 */
#include "node/mdev.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define PATH_SIZE 512

/* `dir`/`name` into `out`: 0, or -ENAMETOOLONG when it does not fit. */
static int join(char *out, size_t size, const char *dir, const char *name)
{
    int k = snprintf(out, size, "%s/%s", dir, name);
    return k < 0 || (size_t)k >= size ? -ENAMETOOLONG : 0;
}

/* A parent's name or a type id as a directory entry: not empty, not "." or "..", no '/'. */
static bool name_ok(const char *s)
{
    size_t n = strnlen(s, NODE_MDEV_NAME_SIZE);
    return n > 0 && n < NODE_MDEV_NAME_SIZE && !strchr(s, '/') && strcmp(s, ".") != 0 &&
           strcmp(s, "..") != 0;
}

bool node_mdev_uuid_valid(const char *s)
{
    for (size_t i = 0; i < NODE_MDEV_UUID_SIZE - 1; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        char c = s[i];
        if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return s[NODE_MDEV_UUID_SIZE - 1] == '\0';
}

int node_mdev_uuid_new(char buf[NODE_MDEV_UUID_SIZE])
{
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof(b)) {
        ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
        if (n < 0 && errno != EINTR)
            return -errno;
        got += n > 0 ? (size_t)n : 0;
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* the RFC 4122 variant */
    (void)snprintf(buf, NODE_MDEV_UUID_SIZE,
                   "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                   b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                   b[14], b[15]);
    return 0;
}

/* Appends path component `c` (of `len` bytes) to `out` (holding `*n` bytes), or drops the last
 * component for "..". -EXDEV when ".." goes above the root, -ENAMETOOLONG. */
static int push_component(char *out, size_t size, size_t *n, const char *c, size_t len)
{
    if (len == 0 || (len == 1 && c[0] == '.'))
        return 0;
    if (len == 2 && c[0] == '.' && c[1] == '.') {
        if (*n == 0)
            return -EXDEV;
        char *slash = memrchr(out, '/', *n);
        *n = slash ? (size_t)(slash - out) : 0;
        out[*n] = '\0';
        return 0;
    }
    if (*n + (*n ? 1 : 0) + len >= size)
        return -ENAMETOOLONG;
    if (*n)
        out[(*n)++] = '/';
    memcpy(out + *n, c, len);
    *n += len;
    out[*n] = '\0';
    return 0;
}

/*
 * The path below the root that link `link` (in directory `dir`, itself a path without links)
 * leads to, worked out from its target's text: "class/mdev_bus" and "../../devices/virtual/
 * mtty/mtty" give "devices/virtual/mtty/mtty". -ENOENT (no link), -EINVAL (not a link),
 * -EXDEV (an absolute target, or one above the root), -ENAMETOOLONG.
 */
static int link_path(int root_fd, const char *dir, const char *link, char *out, size_t size)
{
    char path[PATH_SIZE], target[PATH_SIZE];
    int r = join(path, sizeof(path), dir, link);
    if (r < 0)
        return r;
    r = node_sysfs_read_link_target(root_fd, path, target, sizeof(target));
    if (r < 0)
        return r == -EFBIG ? -ENAMETOOLONG : r;
    if (target[0] == '/')
        return -EXDEV;
    size_t n = strlen(dir);
    if (n >= size)
        return -ENAMETOOLONG;
    memcpy(out, dir, n + 1);
    for (const char *c = target; *c;) {
        size_t len = strcspn(c, "/");
        r = push_component(out, size, &n, c, len);
        if (r < 0)
            return r;
        c += len + (c[len] == '/');
    }
    return n > 0 ? 0 : -EXDEV;
}

/* What a failed link_path() or directory check means, for people. */
static const char *link_trouble(int r)
{
    switch (r) {
    case -ENOENT:
        return "a dangling link";
    case -EINVAL:
        return "not a symbolic link";
    case -EXDEV:
        return "a link that leads outside sysfs";
    case -ENAMETOOLONG:
        return "a link target too long";
    default:
        return node_sysfs_trouble(r, "absent");
    }
}

/* Reads optional attribute `attr` of `dir` into `buf`, cut to fit: "" when absent. */
static int read_optional(int root_fd, const char *dir, const char *attr, char *buf, size_t size)
{
    char path[PATH_SIZE], value[NODE_SYSFS_ATTR_MAX + 1];
    int r = join(path, sizeof(path), dir, attr);
    if (r == 0)
        r = node_sysfs_read(root_fd, path, value, sizeof(value));
    if (r < 0 && r != -ENOENT)
        return r;
    node_sysfs_copy_name(buf, size, r < 0 ? "" : value);
    return 0;
}

/* available_instances of type directory `dir`: 0 with `*ret`, or -errno with `why`. */
static int read_available(int root_fd, const char *dir, int *ret, struct err *why)
{
    char path[PATH_SIZE];
    long long n = 0;
    int r = join(path, sizeof(path), dir, "available_instances");
    if (r == 0)
        r = node_sysfs_read_int(root_fd, path, 10, &n);
    if (r == 0 && (n < 0 || n > INT_MAX))
        r = -ERANGE;
    if (r < 0)
        return err_set(why, r == -ENOENT ? -EIO : r, "available_instances: %s",
                       node_sysfs_trouble(r, "absent"));
    *ret = (int)n;
    return 0;
}

/* Reads type `id` in directory `dir` into `*t`; -errno with `why` when it cannot be used. */
static int read_type(int root_fd, const char *dir, const char *id, struct node_mdev_type *t,
                     struct err *why)
{
    memset(t, 0, sizeof(*t));
    if (!name_ok(id))
        return err_set(why, -EINVAL, "the type id is empty or too long");
    memcpy(t->id, id, strlen(id) + 1);
    int r = read_available(root_fd, dir, &t->available, why);
    if (r < 0)
        return r;
    char path[PATH_SIZE];
    r = join(path, sizeof(path), dir, "device_api");
    if (r == 0)
        r = node_sysfs_read(root_fd, path, t->device_api, sizeof(t->device_api));
    if (r <= 0)
        return err_set(why, r < 0 ? r : -EINVAL, "device_api: %s",
                       r < 0 ? node_sysfs_trouble(r, "absent") : "empty");
    r = read_optional(root_fd, dir, "name", t->name, sizeof(t->name));
    if (r == 0)
        r = read_optional(root_fd, dir, "description", t->description, sizeof(t->description));
    if (r < 0)
        return err_set(why, r, "name or description: %s", node_sysfs_trouble(r, "absent"));
    return 0;
}

static int skip(struct node_mdev_scan *s, size_t *alloc, const char *entry, const char *why)
{
    return node_sysfs_skip_add(&s->skipped, &s->n_skipped, alloc, entry, why);
}

/* Resolves link `link` in directory `dir` (link_path()) and checks that it leads to a
 * directory: 0, or -errno with `why` saying "<label>: absent" or what else is wrong. */
static int resolve_dir(int root_fd, const char *dir, const char *link, char *out, size_t size,
                       const char *label, struct err *why)
{
    int r = link_path(root_fd, dir, link, out, size);
    const char *trouble = r == -ENOENT ? "absent" : link_trouble(r);
    if (r == 0) {
        r = node_sysfs_check_dir(root_fd, out);
        trouble = link_trouble(r);
    }
    return r < 0 ? err_set(why, r, "%s: %s", label, trouble) : 0;
}

/* Where parent `name` is below the root ("devices/virtual/mtty/mtty"): 0, or -errno with why. */
static int parent_path(int root_fd, const char *name, char *out, size_t size, struct err *why)
{
    char label[32 + NODE_MDEV_NAME_SIZE];
    (void)snprintf(label, sizeof(label), "class/mdev_bus/%s", name);
    return resolve_dir(root_fd, "class/mdev_bus", name, out, size, label, why);
}

static bool parent_is_pci(int root_fd, const char *path)
{
    char sub[PATH_SIZE], name[16];
    if (strncmp(path, "devices/pci", 11) == 0)
        return true;
    return join(sub, sizeof(sub), path, "subsystem") == 0 &&
           node_sysfs_read_link(root_fd, sub, name, sizeof(name)) > 0 && strcmp(name, "pci") == 0;
}

/* Reads the types of parent `p` at `path`, skipping (in `s`) those that cannot be read. */
static int read_types(int root_fd, const char *path, struct node_mdev_parent *p,
                      struct node_mdev_scan *s, size_t *alloc)
{
    char dir[PATH_SIZE], tdir[PATH_SIZE], entry[2 * NODE_MDEV_NAME_SIZE];
    char **ids = NULL;
    size_t n = 0;
    int r = join(dir, sizeof(dir), path, "mdev_supported_types");
    if (r == 0)
        r = node_sysfs_list(root_fd, dir, &ids, &n);
    if (r < 0)
        return r;
    if (n > 0 && !(p->types = calloc(n, sizeof(*p->types))))
        r = -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        struct err why = {{0}};
        if (join(tdir, sizeof(tdir), dir, ids[i]) < 0)
            (void)err_set(&why, -ENAMETOOLONG, "the type's path is too long");
        else if (read_type(root_fd, tdir, ids[i], &p->types[p->n_types], &why) == 0) {
            p->n_types++;
            continue;
        }
        (void)snprintf(entry, sizeof(entry), "%s/%s", p->name, ids[i]);
        r = skip(s, alloc, entry, why.msg);
    }
    node_sysfs_names_free(ids);
    return r;
}

/* Reads parent `name` into `*p` (0), or leaves it out with a reason in `s` (1). */
static int read_parent(int root_fd, const char *name, struct node_mdev_parent *p,
                       struct node_mdev_scan *s, size_t *alloc)
{
    char path[PATH_SIZE];
    struct err why = {{0}};
    memset(p, 0, sizeof(*p));
    if (!name_ok(name))
        return skip(s, alloc, name, "the parent's name is too long") < 0 ? -ENOMEM : 1;
    memcpy(p->name, name, strlen(name) + 1);
    if (parent_path(root_fd, name, path, sizeof(path), &why) < 0)
        return skip(s, alloc, name, why.msg) < 0 ? -ENOMEM : 1;
    p->pci = parent_is_pci(root_fd, path);
    int r = read_types(root_fd, path, p, s, alloc);
    if (r < 0) {
        free(p->types);
        p->types = NULL;
        p->n_types = 0;
    }
    if (r == -ENOMEM)
        return r;
    if (r < 0) {
        (void)snprintf(why.msg, sizeof(why.msg), "mdev_supported_types: %s",
                       node_sysfs_trouble(r, "absent"));
        return skip(s, alloc, name, why.msg) < 0 ? -ENOMEM : 1;
    }
    return 0;
}

static int scan_parents(int root_fd, struct node_mdev_scan *s, size_t *alloc, struct err *ret_err)
{
    char **names = NULL;
    size_t n = 0;
    int r = node_sysfs_list(root_fd, "class/mdev_bus", &names, &n);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return err_set(ret_err, r, "cannot list class/mdev_bus: %s", node_sysfs_trouble(r, ""));
    if (n > 0 && !(s->parents = calloc(n, sizeof(*s->parents))))
        r = -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        int k = read_parent(root_fd, names[i], &s->parents[s->n_parents], s, alloc);
        if (k == 0)
            s->n_parents++;
        r = k < 0 ? k : 0;
    }
    node_sysfs_names_free(names);
    return r < 0 ? err_set(ret_err, r, "out of memory scanning mdev parents") : 0;
}

/* Splits a type directory's path "devices/virtual/mtty/mtty/mdev_supported_types/mtty-2" into
 * the instance's type and parent names. -EXDEV when it is not <parent>/mdev_supported_types/<id>.
 */
static int split_type_path(const char *path, struct node_mdev_instance *inst)
{
    char copy[PATH_SIZE];
    (void)snprintf(copy, sizeof(copy), "%s", path);
    char *type = strrchr(copy, '/');
    if (!type)
        return -EXDEV;
    *type++ = '\0';
    char *types = strrchr(copy, '/');
    if (!types || strcmp(types + 1, "mdev_supported_types") != 0)
        return -EXDEV;
    *types = '\0';
    char *parent = strrchr(copy, '/');
    parent = parent ? parent + 1 : copy;
    if (!name_ok(type) || !name_ok(parent))
        return -EXDEV;
    memcpy(inst->type, type, strlen(type) + 1);
    memcpy(inst->parent, parent, strlen(parent) + 1);
    return 0;
}

static int read_group(int root_fd, const char *ipath, int *ret, struct err *why)
{
    char path[PATH_SIZE], name[32];
    long long g = -1;
    int r = join(path, sizeof(path), ipath, "iommu_group");
    if (r == 0)
        r = node_sysfs_read_link_in(root_fd, path, "kernel/iommu_groups", name, sizeof(name));
    *ret = -1;
    if (r == -ENOENT)
        return 0;
    if (r >= 0 && (node_sysfs_parse_int(name, 10, &g) < 0 || g < 0 || g > INT_MAX))
        r = -EINVAL;
    if (r < 0)
        return err_set(why, r, "iommu_group: %s",
                       r == -EXDEV ? "leads outside kernel/iommu_groups" : link_trouble(r));
    *ret = (int)g;
    return 0;
}

/* Reads instance `uuid` (valid): 1 with `*ret`, 0 when absent, -errno with `why`. */
static int read_instance(int root_fd, const char *uuid, struct node_mdev_instance *ret,
                         struct err *why)
{
    char ipath[PATH_SIZE], tpath[PATH_SIZE];
    struct node_mdev_instance inst = {.iommu_group = -1};
    memcpy(inst.uuid, uuid, NODE_MDEV_UUID_SIZE);
    int r = link_path(root_fd, "bus/mdev/devices", uuid, ipath, sizeof(ipath));
    if (r == -ENOENT)
        return 0;
    if (r == 0)
        r = node_sysfs_check_dir(root_fd, ipath);
    if (r < 0)
        return err_set(why, r, "bus/mdev/devices/%s: %s", uuid, link_trouble(r));
    r = resolve_dir(root_fd, ipath, "mdev_type", tpath, sizeof(tpath), "mdev_type", why);
    if (r < 0)
        return r;
    if (split_type_path(tpath, &inst) < 0)
        return err_set(why, -EXDEV,
                       "mdev_type: does not lead to a parent's mdev_supported_types/<type>");
    r = read_group(root_fd, ipath, &inst.iommu_group, why);
    if (r < 0)
        return r;
    *ret = inst;
    return 1;
}

static int scan_instances(int root_fd, struct node_mdev_scan *s, size_t *alloc, struct err *ret_err)
{
    char **names = NULL;
    size_t n = 0;
    int r = node_sysfs_list(root_fd, "bus/mdev/devices", &names, &n);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return err_set(ret_err, r, "cannot list bus/mdev/devices: %s", node_sysfs_trouble(r, ""));
    if (n > 0 && !(s->instances = calloc(n, sizeof(*s->instances))))
        r = -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        struct err why = {{0}};
        int k = 0;
        if (!node_mdev_uuid_valid(names[i]))
            r = skip(s, alloc, names[i], "not a lowercase UUID");
        else if ((k = read_instance(root_fd, names[i], &s->instances[s->n_instances], &why)) < 0)
            r = skip(s, alloc, names[i], why.msg);
        s->n_instances += k > 0;
    }
    node_sysfs_names_free(names);
    return r < 0 ? err_set(ret_err, r, "out of memory scanning mdev instances") : 0;
}

int node_mdev_scan(int root_fd, struct node_mdev_scan *ret, struct err *ret_err)
{
    struct node_mdev_scan s = {0};
    size_t alloc = 0;
    int r = scan_parents(root_fd, &s, &alloc, ret_err);
    if (r == 0)
        r = scan_instances(root_fd, &s, &alloc, ret_err);
    if (r < 0) {
        node_mdev_scan_done(&s);
        return r;
    }
    *ret = s;
    return 0;
}

void node_mdev_scan_done(struct node_mdev_scan *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_parents; i++)
        free(s->parents[i].types);
    free(s->parents);
    free(s->instances);
    free(s->skipped);
    memset(s, 0, sizeof(*s));
}

int node_mdev_find(int root_fd, const char *uuid, struct node_mdev_instance *ret,
                   struct err *ret_err)
{
    if (!node_mdev_uuid_valid(uuid))
        return err_set(ret_err, -EINVAL,
                       "\"%.40s\" is not a UUID as mdevs are named (8-4-4-4-12 lowercase hex "
                       "digits)",
                       uuid);
    return read_instance(root_fd, uuid, ret, ret_err);
}

static int bad_uuid(struct err *ret_err, const char *uuid)
{
    return err_set(ret_err, -EINVAL,
                   "\"%.40s\" is not a UUID as mdevs are named: 8-4-4-4-12 lowercase hex digits, "
                   "e.g. 8f3f6a52-3b4e-4a8e-9d1a-2f6f0c1b7e21",
                   uuid);
}

/* Joins the entries of directory `dir` into `out` ("mtty-1, mtty-2"), cut with "..." when they
 * do not fit; `none` when there are none or they cannot be listed. */
static void list_names(int root_fd, const char *dir, const char *none, char *out, size_t size)
{
    char **names = NULL;
    size_t n = 0, len = 0;
    out[0] = '\0';
    if (node_sysfs_list(root_fd, dir, &names, &n) < 0 || n == 0) {
        (void)snprintf(out, size, "%s", none);
        node_sysfs_names_free(names);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        int k = snprintf(out + len, size - len, "%s%s", i ? ", " : "", names[i]);
        if (k < 0 || (size_t)k >= size - len) {
            (void)snprintf(out + (size > 4 ? size - 4 : 0), size > 4 ? 4 : size, "...");
            break;
        }
        len += (size_t)k;
    }
    node_sysfs_names_free(names);
}

/* An existing instance `uuid`: 1 when it is `type` on `parent`, 0 when there is none, -EEXIST
 * when it is of another type, -errno when it cannot be read. */
static int check_existing(int root_fd, const char *parent, const char *type, const char *uuid,
                          struct err *ret_err)
{
    struct node_mdev_instance inst;
    struct err why = {{0}};
    int r = read_instance(root_fd, uuid, &inst, &why);
    if (r < 0)
        return err_set(ret_err, -EIO,
                       "an mdev %s exists but cannot be read (%s): remove it (echo 1 > "
                       "/sys/bus/mdev/devices/%s/remove) or use another UUID",
                       uuid, why.msg, uuid);
    if (r == 0)
        return 0;
    if (strcmp(inst.type, type) == 0 && strcmp(inst.parent, parent) == 0)
        return 1;
    return err_set(ret_err, -EEXIST,
                   "mdev %s exists already as type %s on %s, not %s on %s: remove it first or "
                   "use another UUID",
                   uuid, inst.type, inst.parent, type, parent);
}

static int no_parent(int root_fd, const char *parent, const struct err *why, struct err *ret_err)
{
    char path[PATH_SIZE], parents[256];
    (void)snprintf(path, sizeof(path), "bus/pci/devices/%s", parent);
    list_names(root_fd, "class/mdev_bus", "none", parents, sizeof(parents));
    if (node_sysfs_check_dir(root_fd, path) == 0)
        return err_set(ret_err, -ENODEV,
                       "PCI device %s is not an mdev parent (not in class/mdev_bus): its driver "
                       "offers no mediated devices; load a driver that does. mdev parents: %s",
                       parent, parents);
    return err_set(ret_err, -ENODEV,
                   "no mdev parent %s (%s): load its driver, or use one of the mdev parents: %s",
                   parent, why->msg, parents);
}

/* The type's directory below the root into `tdir`: 0, or -errno with a message that says what
 * there is instead. */
static int type_dir(int root_fd, const char *parent, const char *type, char *tdir, size_t size,
                    struct err *ret_err)
{
    char ppath[PATH_SIZE], types[256];
    struct err why = {{0}};
    if (parent_path(root_fd, parent, ppath, sizeof(ppath), &why) < 0)
        return no_parent(root_fd, parent, &why, ret_err);
    int k = snprintf(tdir, size, "%s/mdev_supported_types/%s", ppath, type);
    if (k < 0 || (size_t)k >= size)
        return err_set(ret_err, -ENAMETOOLONG, "the path of type %s on %s is too long", type,
                       parent);
    int r = node_sysfs_check_dir(root_fd, tdir);
    if (r == 0)
        return 0;
    (void)snprintf(ppath + strlen(ppath), sizeof(ppath) - strlen(ppath), "/mdev_supported_types");
    list_names(root_fd, ppath, "none", types, sizeof(types));
    return err_set(ret_err, -ENOENT, "parent %s has no type %s; its types are %s", parent, type,
                   types);
}

static const char *create_meaning(int r)
{
    switch (r) {
    case -EEXIST:
        return "an mdev with that UUID exists already (created meanwhile?)";
    case -EUSERS:
    case -ENOSPC:
        return "no instance of that type left on the parent";
    case -ENODEV:
        return "the parent went away";
    default:
        return "see the kernel's log";
    }
}

int node_mdev_create(int root_fd, const char *parent, const char *type, const char *uuid,
                     struct err *ret_err)
{
    char tdir[PATH_SIZE], path[PATH_SIZE + 8];
    if (!node_mdev_uuid_valid(uuid))
        return bad_uuid(ret_err, uuid);
    if (!name_ok(parent) || !name_ok(type))
        return err_set(ret_err, -EINVAL,
                       "\"%.70s\" on \"%.70s\": a type id and a parent name are non-empty "
                       "names of at most %d bytes without '/'",
                       type, parent, NODE_MDEV_NAME_SIZE - 1);
    int r = check_existing(root_fd, parent, type, uuid, ret_err);
    if (r != 0)
        return r;
    r = type_dir(root_fd, parent, type, tdir, sizeof(tdir), ret_err);
    if (r < 0)
        return r;
    int available = 0;
    struct err why = {{0}};
    if (read_available(root_fd, tdir, &available, &why) < 0)
        return err_set(ret_err, -EIO, "cannot read type %s on %s: %s", type, parent, why.msg);
    if (available == 0)
        return err_set(ret_err, -ENOSPC,
                       "type %s on %s has no instance left (available_instances 0): remove an "
                       "instance on %s first, or use another parent",
                       type, parent, parent);
    (void)snprintf(path, sizeof(path), "%s/create", tdir);
    r = node_sysfs_write(root_fd, path, uuid);
    if (r < 0)
        return err_set(ret_err, r, "writing %s to %s/create failed: %s (%s)", uuid, type,
                       strerror(-r), create_meaning(r));
    return 0;
}

int node_mdev_remove(int root_fd, const char *uuid, struct err *ret_err)
{
    char path[96];
    if (!node_mdev_uuid_valid(uuid))
        return bad_uuid(ret_err, uuid);
    (void)snprintf(path, sizeof(path), "bus/mdev/devices/%s", uuid);
    int r = node_sysfs_check_dir(root_fd, path);
    if (r == -ENOENT)
        return 1;
    if (r < 0)
        return err_set(ret_err, r, "cannot remove mdev %s: %s: %s", uuid, path,
                       node_sysfs_trouble(r, "absent"));
    (void)snprintf(path, sizeof(path), "bus/mdev/devices/%s/remove", uuid);
    r = node_sysfs_write(root_fd, path, "1");
    if (r == -ENOENT || r == -ENODEV)
        return 1; /* removed meanwhile */
    if (r < 0)
        return err_set(ret_err, r, "writing 1 to %s failed: %s (%s)", path, strerror(-r),
                       r == -EBUSY ? "it is in use: stop the VM that holds it first"
                                   : "see the kernel's log");
    return 0;
}
