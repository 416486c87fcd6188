/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/pciname.c - resource names and descriptions of PCI devices. See pciname.h. Pure.
 *
 * harvester/pcidevices (pkg/apis/devices.harvesterhci.io/v1beta1/pcidevice.go) works on Go
 * strings with Go regexps; the comments name the Go step each loop reproduces. Non-ASCII bytes
 * never survive its character classes, so working on bytes gives the same results, except for
 * the two letters whose upper case is ASCII (see upper_ascii()). Whether a name is valid is
 * base/names' rule (names_is_extended_resource_name()).
 */
#include "node/pciname.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/names.h"

/*
 * harvester's socket-length guard: len("/var/lib/kubelet/device-plugins/kubevirt-" + "/" +
 * vendor + "-" + product + ".sock") must not pass 108, the size of sun_path.
 */
#define SOCKET_PREFIX "/var/lib/kubelet/device-plugins/kubevirt-/"
#define SOCKET_SUFFIX ".sock"
#define SOCKET_MAX    108

#define UNKNOWN_DOMAIN "unknown.com"

static bool is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_empty(const char *s)
{
    return !s || s[0] == '\0';
}

/* Copies `n` bytes of `s` and a NUL into `ret`; -ENAMETOOLONG when they do not fit. */
static int copy_out(const char *s, size_t n, char *ret, size_t size)
{
    if (n >= size)
        return -ENAMETOOLONG;
    memcpy(ret, s, n);
    ret[n] = '\0';
    return 0;
}

/* ---- vendor domain ------------------------------------------------------------------------- */

/*
 * The submatch of `\[([^\]]+)\]` in `s`: the text after the leftmost '[' that is followed by at
 * least one byte and then a ']'. Returns its length and sets *start; 0 when nothing matches.
 */
static size_t bracket_match(const char *s, const char **start)
{
    for (const char *open = strchr(s, '['); open; open = strchr(open + 1, '[')) {
        const char *close = strchr(open + 1, ']');
        if (!close)
            return 0;
        if (close > open + 1) {
            *start = open + 1;
            return (size_t)(close - open - 1);
        }
    }
    return 0;
}

/* strip(): keeps the ASCII alphanumerics of `n` bytes of `s`, lower-cased. Returns the length. */
static size_t add_stripped_lower(const char *s, size_t n, char *out, size_t size)
{
    size_t len = 0;
    for (size_t i = 0; i < n && len + 1 < size; i++)
        if (is_alnum(s[i]))
            out[len++] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
    out[len] = '\0';
    return len;
}

/*
 * The vendor base before ".com": the bracketed text up to its first '/', or the text up to
 * the first ' ' (Go's strings.Split(name, " ")[0]). Where Go would index a missing regexp
 * match (a '[' without "[...]"; harvester panics there) the first word is used.
 */
static size_t vendor_base(const char *name, char *out, size_t size)
{
    const char *part = name;
    size_t n = 0;
    if (strchr(name, '['))
        n = bracket_match(name, &part);
    if (n > 0) {
        size_t slash = strcspn(part, "/");
        n = slash < n ? slash : n;
    } else {
        part = name;
        n = strcspn(name, " ");
    }
    return add_stripped_lower(part, n, out, size);
}

int node_pciname_vendor_domain(const char *vendor_name, char *ret, size_t size)
{
    if (!ret)
        return -EINVAL;
    char domain[NAMES_DNS_LABEL_MAX + 2 + sizeof(".com")];
    size_t len =
            is_empty(vendor_name) ? 0 : vendor_base(vendor_name, domain, NAMES_DNS_LABEL_MAX + 2);
    if (len == 0 || len > NAMES_DNS_LABEL_MAX)
        return copy_out(UNKNOWN_DOMAIN, strlen(UNKNOWN_DOMAIN), ret, size);
    memcpy(domain + len, ".com", sizeof(".com"));
    return copy_out(domain, len + strlen(".com"), ret, size);
}

/* ---- product part -------------------------------------------------------------------------- */

/*
 * The length of the Unicode white space (Go's unicode.IsSpace) at `s`, 0 if there is none:
 * ASCII \t \n \v \f \r ' ', U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F,
 * U+205F, U+3000.
 */
static size_t space_len(const unsigned char *s)
{
    if (s[0] != '\0' && strchr("\t\n\v\f\r ", s[0]))
        return 1;
    if (s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0))
        return 2;
    if ((s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80) ||
        (s[0] == 0xe2 && s[1] == 0x80 && (s[2] <= 0x8a || s[2] == 0xa8 || s[2] == 0xa9)) ||
        (s[0] == 0xe2 && s[1] == 0x80 && s[2] == 0xaf) ||
        (s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) ||
        (s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80))
        return 3;
    return 0;
}

/* strings.TrimSpace: sets *start and returns the length of `s` without outer white space. */
static size_t trim_space(const char *s, const char **start)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t k;
    while ((k = space_len(p)) > 0)
        p += k;
    *start = (const char *)p;
    size_t len = 0;
    for (size_t i = 0; p[i] != '\0'; i += k ? k : 1) {
        k = space_len(p + i);
        if (!k)
            len = i + 1;
    }
    return len;
}

/*
 * strings.ToUpper for the bytes that can survive: ASCII letters, and the two non-ASCII
 * letters whose upper case is ASCII, U+0131 (dotless i -> 'I') and U+017F (long s -> 'S').
 * Returns the upper-case ASCII character and sets *n to the bytes it took, or returns 0.
 */
static char upper_ascii(const unsigned char *s, size_t *n)
{
    *n = 1;
    if (s[0] < 0x80)
        return (char)(s[0] >= 'a' && s[0] <= 'z' ? s[0] - 'a' + 'A' : s[0]);
    *n = 2;
    if (s[0] == 0xc4 && s[1] == 0xb1)
        return 'I';
    if (s[0] == 0xc5 && s[1] == 0xbf)
        return 'S';
    *n = 1;
    return 0;
}

/*
 * The product part from `n` trimmed bytes of a device name, in one pass over the Go steps:
 * ToUpper; '/' and '.' -> '_'; `\s+` (RE2: [\t\n\f\r ]) -> '_'; `[^a-zA-Z0-9_.]+` -> "";
 * TrimRight "_.-". `out` holds at least n + 1 bytes. Returns the length.
 */
static size_t clean_product(const char *s, size_t n, char *out)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len = 0, k;
    bool in_space = false;
    for (size_t i = 0; i < n; i += k) {
        char c = upper_ascii(p + i, &k);
        bool space = c != '\0' && strchr("\t\n\f\r ", c);
        if ((space && !in_space) || c == '/' || c == '.' || c == '_')
            out[len++] = '_';
        else if (c != '\0' && is_alnum(c))
            out[len++] = c;
        in_space = space;
    }
    while (len > 0 && strchr("_.-", out[len - 1]))
        len--;
    out[len] = '\0';
    return len;
}

/* strings.ReplaceAll(s, from, to) in place, for `to` no longer than `from`. */
static size_t replace_all(char *s, const char *from, const char *to)
{
    size_t flen = strlen(from), tlen = strlen(to), w = 0;
    for (size_t r = 0; s[r] != '\0';) {
        if (strncmp(s + r, from, flen) == 0) {
            memcpy(s + w, to, tlen);
            w += tlen;
            r += flen;
        } else {
            s[w++] = s[r++];
        }
    }
    s[w] = '\0';
    return w;
}

static bool socket_fits(size_t domain_len, size_t product_len)
{
    return strlen(SOCKET_PREFIX) + domain_len + 1 + product_len + strlen(SOCKET_SUFFIX) <=
           SOCKET_MAX;
}

/*
 * The product part into `out` (NODE_PCINAME_NAME_MAX + 1 bytes), or "" when the device id is
 * to be used: unknown name, nothing left after cleaning, socket path still too long.
 */
static int product_part(const char *device_name, size_t domain_len, char *out)
{
    out[0] = '\0';
    if (is_empty(device_name))
        return 0;
    if (strnlen(device_name, NODE_PCINAME_NAME_MAX + 1) > NODE_PCINAME_NAME_MAX)
        return -EINVAL;
    const char *start;
    size_t n = trim_space(device_name, &start);
    size_t len = clean_product(start, n, out);
    if (len > 0 && !socket_fits(domain_len, len))
        len = replace_all(out, "VIRTUAL_FUNCTION", "VF");
    if (len > 0 && !socket_fits(domain_len, len))
        out[0] = '\0';
    return 0;
}

int node_pciname_resource(const struct node_pciname_ids *ids, char *ret, size_t size)
{
    if (!ids || !ret)
        return -EINVAL;
    char domain[NODE_PCINAME_RESOURCE_MAX], product[NODE_PCINAME_NAME_MAX + 1];
    int r = node_pciname_vendor_domain(ids->vendor_name, domain, sizeof(domain));
    if (r == 0)
        r = product_part(ids->device_name, strlen(domain), product);
    if (r < 0)
        return r;
    char name[sizeof(domain) + sizeof(product) + 1];
    int n = snprintf(name, sizeof(name), "%s/%s", domain, product);
    if (product[0] == '\0' || n < 0 || (size_t)n >= sizeof(name) ||
        !names_is_extended_resource_name(name))
        n = snprintf(name, sizeof(name), "%s/%04x", domain, ids->device_id);
    if (n < 0 || (size_t)n >= sizeof(name))
        return -ENAMETOOLONG;
    return copy_out(name, (size_t)n, ret, size);
}

int node_pciname_resource_unpooled(const char *vendor_name, const char *pcidevice_name, char *ret,
                                   size_t size)
{
    if (!pcidevice_name || !ret)
        return -EINVAL;
    char domain[NODE_PCINAME_RESOURCE_MAX];
    int r = node_pciname_vendor_domain(vendor_name, domain, sizeof(domain));
    if (r < 0)
        return r;
    size_t dlen = strlen(domain), plen = strnlen(pcidevice_name, NAMES_QUALIFIED_NAME_MAX + 1);
    if (plen > NAMES_QUALIFIED_NAME_MAX || !names_is_qualified_name_part(pcidevice_name))
        return -EINVAL;
    if (!socket_fits(dlen, plen))
        return -ENAMETOOLONG;
    char name[sizeof(domain) + NAMES_QUALIFIED_NAME_MAX + 1];
    int n = snprintf(name, sizeof(name), "%s/%s", domain, pcidevice_name);
    if (n < 0 || (size_t)n >= sizeof(name))
        return -ENAMETOOLONG;
    return copy_out(name, (size_t)n, ret, size);
}

/* ---- description --------------------------------------------------------------------------- */

int node_pciname_description(const struct node_pciname_ids *ids, char *ret, size_t size)
{
    if (!ids || !ret)
        return -EINVAL;
    char cls[sizeof("Class 0000")], vendor[sizeof("Vendor 0000")], device[sizeof("Device 0000")];
    snprintf(cls, sizeof(cls), "Class %04x", ids->class_id);
    snprintf(vendor, sizeof(vendor), "Vendor %04x", ids->vendor_id);
    snprintf(device, sizeof(device), "Device %04x", ids->device_id);
    const char *c = !is_empty(ids->subclass_name) ? ids->subclass_name
                    : !is_empty(ids->class_name)  ? ids->class_name
                                                  : cls;
    const char *v = is_empty(ids->vendor_name) ? vendor : ids->vendor_name;
    const char *d = is_empty(ids->device_name) ? device : ids->device_name;
    int n = snprintf(NULL, 0, "%s: %s %s", c, v, d);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n >= size)
        return -ENAMETOOLONG;
    snprintf(ret, size, "%s: %s %s", c, v, d);
    return 0;
}
