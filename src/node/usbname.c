/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/usbname.c - USB names from usb.ids and the USB-IF class table (see usbname.h). No
 * logging; loading blocks (open, mmap), lookups do not.
 *
 * Decisions:
 * - usb.ids is read as the anchor's parser (gousb's usbid) reads it: a vendor line is
 *   "vvvv  Name" at column 0, its products "\tpppp  Name" below it; the name is what follows
 *   the first two spaces. Comments ('#') and empty lines are skipped anywhere; the vendor list
 *   ends at the first section line ("C 00  ...", "AT ", "HID ", ...: 1-4 capitals and a space).
 *   A vendor or product given twice is the last one (the anchor's maps are overwritten). The
 *   anchor fails the whole file on a malformed line; here such a line is skipped, so one bad
 *   line never takes every name away.
 * - Lines end at '\n' or at the end of the file (no trailing newline needed); a '\r' before the
 *   '\n' is not part of the name (Go's ReadLine drops it too). Every access is bounded by the
 *   mapping's size.
 * - Descriptions are cut at a UTF-8 character boundary when they do not fit.
 */
#include "node/usbname.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_PATH "/usr/share/misc/usb.ids"
#define MAX_FILE     (64u << 20) /* the real file is under 1 MiB */

struct vendor {
    unsigned id;
    size_t off; /* of the vendor line */
};

struct node_usbids {
    const char *map; /* NULL for an empty file */
    size_t size;
    struct vendor *vendors; /* sorted by id, one per id */
    size_t n_vendors;
};

/* A line of the file: where it starts and how long it is, without "\n" or "\r\n". */
struct line {
    const char *s;
    size_t len;
};

/* The line at *off, moving *off to the next one. False at the end of the file. */
static bool next_line(const struct node_usbids *ids, size_t *off, struct line *ret)
{
    if (*off >= ids->size)
        return false;
    const char *s = ids->map + *off;
    size_t rest = ids->size - *off;
    const char *nl = memchr(s, '\n', rest);
    size_t len = nl ? (size_t)(nl - s) : rest;
    *off += nl ? len + 1 : len;
    if (len > 0 && s[len - 1] == '\r')
        len--;
    *ret = (struct line){s, len};
    return true;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Four hex digits at `s` (of `len` bytes). */
static bool parse_hex4(const char *s, size_t len, unsigned *ret)
{
    unsigned v = 0;
    if (len < 4)
        return false;
    for (size_t i = 0; i < 4; i++) {
        int d = hex_value(s[i]);
        if (d < 0)
            return false;
        v = v * 16 + (unsigned)d;
    }
    *ret = v;
    return true;
}

/* "xxxx  Name": the id and the name (what follows the two spaces, possibly empty). */
static bool parse_entry(struct line l, unsigned *ret_id, struct line *ret_name)
{
    if (l.len < 6 || l.s[4] != ' ' || l.s[5] != ' ' || !parse_hex4(l.s, l.len, ret_id))
        return false;
    *ret_name = (struct line){l.s + 6, l.len - 6};
    return true;
}

/* "C 00  ...", "AT 0x...", "HID 01  ...": the start of a section after the vendors. */
static bool is_section(struct line l)
{
    size_t n = 0;
    while (n < l.len && n < 5 && l.s[n] >= 'A' && l.s[n] <= 'Z')
        n++;
    return n >= 1 && n <= 4 && n < l.len && l.s[n] == ' ';
}

/* Walks the vendor list; with `out`, records the vendors there. Returns how many. */
static size_t walk_vendors(const struct node_usbids *ids, struct vendor *out)
{
    size_t off = 0, n = 0, start = 0;
    struct line l, name;
    unsigned id;
    while (next_line(ids, &off, &l)) {
        if (l.len > 0 && l.s[0] != '#' && l.s[0] != '\t') {
            if (parse_entry(l, &id, &name)) { /* first: "ABCD  Name" is no section */
                if (out)
                    out[n] = (struct vendor){id, start};
                n++;
            } else if (is_section(l)) {
                break;
            }
        }
        start = off;
    }
    return n;
}

static int compare_vendors(const void *a, const void *b)
{
    const struct vendor *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Builds ids->vendors: sorted by id, the last line of each id kept. */
static int build_index(struct node_usbids *ids)
{
    size_t n = walk_vendors(ids, NULL);
    if (n == 0)
        return 0;
    ids->vendors = calloc(n, sizeof(*ids->vendors));
    if (!ids->vendors)
        return -ENOMEM;
    walk_vendors(ids, ids->vendors);
    qsort(ids->vendors, n, sizeof(*ids->vendors), compare_vendors);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (kept > 0 && ids->vendors[kept - 1].id == ids->vendors[i].id)
            kept--;
        ids->vendors[kept++] = ids->vendors[i];
    }
    ids->n_vendors = kept;
    return 0;
}

/* Maps the open file `fd` into `ids`. */
static int map_file(struct node_usbids *ids, int fd, const char *path, struct err *ret_err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return err_set(ret_err, -errno, "cannot stat %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return err_set(ret_err, -EINVAL, "%s is not a regular file", path);
    if ((unsigned long long)st.st_size > MAX_FILE)
        return err_set(ret_err, -EFBIG, "%s is larger than %u bytes", path, MAX_FILE);
    if (st.st_size == 0)
        return 0;
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        return err_set(ret_err, -errno, "cannot map %s: %s", path, strerror(errno));
    ids->map = p;
    ids->size = (size_t)st.st_size;
    return 0;
}

int node_usbids_load(const char *path, struct node_usbids **ret, struct err *ret_err)
{
    if (!path)
        path = DEFAULT_PATH;
    struct node_usbids *ids = calloc(1, sizeof(*ids));
    if (!ids)
        return err_set(ret_err, -ENOMEM, "out of memory");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int r = fd < 0 ? err_set(ret_err, -errno, "cannot open %s: %s", path, strerror(errno))
                   : map_file(ids, fd, path, ret_err);
    if (fd >= 0)
        close(fd);
    if (r == 0 && build_index(ids) < 0)
        r = err_set(ret_err, -ENOMEM, "out of memory");
    /* Indexing read every page; drop them from our resident set (they stay in the page cache,
     * and a lookup faults in its vendor's page or two): about 700 KB of RSS otherwise. */
    if (r == 0 && ids->map)
        (void)madvise((void *)ids->map, ids->size, MADV_DONTNEED);
    if (r < 0) {
        node_usbids_free(ids);
        return r;
    }
    *ret = ids;
    return 0;
}

struct node_usbids *node_usbids_free(struct node_usbids *ids)
{
    if (!ids)
        return NULL;
    if (ids->map)
        munmap((void *)ids->map, ids->size);
    free(ids->vendors);
    free(ids);
    return NULL;
}

/* ---- lookups --------------------------------------------------------------------------------- */

static int compare_key(const void *key, const void *elem)
{
    unsigned k = *(const unsigned *)key, id = ((const struct vendor *)elem)->id;
    return k < id ? -1 : k > id;
}

/* The vendor's name, and in *ret_block where its product lines start. */
static bool find_vendor(const struct node_usbids *ids, unsigned id, struct line *ret_name,
                        size_t *ret_block)
{
    const struct vendor *v =
            ids->n_vendors ? bsearch(&id, ids->vendors, ids->n_vendors, sizeof(*v), compare_key)
                           : NULL;
    if (!v)
        return false;
    size_t off = v->off;
    struct line l;
    unsigned ignored;
    if (!next_line(ids, &off, &l) || !parse_entry(l, &ignored, ret_name))
        return false;
    *ret_block = off;
    return true;
}

/* The product's name in the block starting at `off` (the last line of that id). */
static bool find_product(const struct node_usbids *ids, size_t off, unsigned id,
                         struct line *ret_name)
{
    struct line l, name;
    unsigned pid;
    bool found = false;
    while (next_line(ids, &off, &l)) {
        if (l.len == 0 || l.s[0] == '#')
            continue;
        if (l.s[0] != '\t')
            break;
        l.s++, l.len--;
        if (l.len > 0 && l.s[0] == '\t')
            continue; /* an interface */
        if (parse_entry(l, &pid, &name) && pid == id) {
            *ret_name = name;
            found = true;
        }
    }
    return found;
}

/* A bounded writer: control characters become spaces, a cut never splits a UTF-8 character. */
struct out {
    char *buf;
    size_t size, len;
    bool full;
};

static void put(struct out *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n && !o->full; i++) {
        unsigned char c = (unsigned char)s[i];
        if (o->len + 1 >= o->size) {
            o->full = true;
            if ((c & 0xc0) != 0x80)
                break;
            while (o->len > 0 && ((unsigned char)o->buf[o->len - 1] & 0xc0) == 0x80)
                o->len--;
            if (o->len > 0 && (unsigned char)o->buf[o->len - 1] >= 0xc0)
                o->len--;
            break;
        }
        char ch = (char)c;
        if (c < 0x20 || c == 0x7f)
            ch = ' ';
        o->buf[o->len++] = ch;
    }
    if (o->size > 0)
        o->buf[o->len] = '\0';
}

static void puts_out(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

/* "Product (Vendor)", "Unknown (Vendor)" or "Unknown vvvv:pppp". */
static void describe_ids(const struct node_usbids *ids, const char *vendor_id,
                         const char *product_id, struct out *o)
{
    unsigned v, p;
    struct line vname, pname;
    size_t block;
    bool ok = parse_hex4(vendor_id, strlen(vendor_id), &v) && vendor_id[4] == '\0' &&
              parse_hex4(product_id, strlen(product_id), &p) && product_id[4] == '\0';
    if (ok && ids && find_vendor(ids, v, &vname, &block)) {
        if (find_product(ids, block, p, &pname)) {
            put(o, pname.s, pname.len);
            puts_out(o, " (");
        } else {
            puts_out(o, "Unknown (");
        }
        put(o, vname.s, vname.len);
        puts_out(o, ")");
        return;
    }
    puts_out(o, "Unknown ");
    if (ok) {
        char num[16];
        (void)snprintf(num, sizeof(num), "%04x:%04x", v, p);
        puts_out(o, num);
    } else {
        puts_out(o, vendor_id);
        puts_out(o, ":");
        puts_out(o, product_id);
    }
}

size_t node_usbids_describe(const struct node_usbids *ids, const char *vendor_id,
                            const char *product_id, const char *product_string, char *buf,
                            size_t size)
{
    struct out o = {.buf = buf, .size = size};
    if (size == 0)
        return 0;
    buf[0] = '\0';
    describe_ids(ids, vendor_id ? vendor_id : "", product_id ? product_id : "", &o);
    if (product_string && product_string[0]) {
        puts_out(&o, " [");
        puts_out(&o, product_string);
        puts_out(&o, "]");
    }
    return o.len;
}

/* The USB-IF base classes (https://www.usb.org/defined-class-codes) as harvester names them. */
static const struct {
    char code[3];
    const char *name;
} class_names[] = {
        {"01", "Audio"},
        {"02", "Communications"},
        {"03", "HID"},
        {"05", "Physical"},
        {"06", "Image"},
        {"07", "Printer"},
        {"08", "Mass Storage"},
        {"09", "Hub"},
        {"0a", "CDC-Data"},
        {"0b", "Smart Card"},
        {"0d", "Content Security"},
        {"0e", "Video"},
        {"0f", "Personal Healthcare"},
        {"10", "Audio/Video"},
        {"11", "Billboard"},
        {"12", "USB Type-C Bridge"},
        {"13", "USB Bulk Display Protocol"},
        {"14", "MCTP over USB"},
        {"3c", "I3C Device"},
        {"dc", "Diagnostic"},
        {"e0", "Wireless Controller"},
        {"ef", "Miscellaneous"},
        {"fe", "Application Specific"},
        {"ff", "Vendor Specific"},
};

const char *node_usb_class_name(const char *code, char *buf, size_t size)
{
    if (!code || !code[0])
        return "";
    char lower[16];
    size_t n = 0;
    for (; code[n] && n + 1 < sizeof(lower); n++)
        lower[n] = (char)tolower((unsigned char)code[n]);
    lower[n] = '\0';
    for (size_t i = 0; i < sizeof(class_names) / sizeof(class_names[0]); i++)
        if (strcmp(class_names[i].code, lower) == 0)
            return class_names[i].name;
    if (size == 0)
        return "";
    (void)snprintf(buf, size, "Unknown (0x%s)", lower);
    for (char *c = buf; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = ' ';
    return buf;
}
