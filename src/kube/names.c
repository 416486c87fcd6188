/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/names.c - names and formats of the devices.harvesterhci.io API. See names.h. The
 * Kubernetes name rules themselves live in base/names.c. Pure.
 */
#include "kube/names.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "base/buf.h"
#include "base/names.h"

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Counts the hex digits at the start of `s`. */
static size_t hex_run(const char *s)
{
    size_t n = 0;
    while (is_hex(s[n]))
        n++;
    return n;
}

static size_t digit_run(const char *s)
{
    size_t n = 0;
    while (s[n] >= '0' && s[n] <= '9')
        n++;
    return n;
}

bool kube_names_is_pci_address(const char *s)
{
    size_t domain = hex_run(s);
    if (domain < 4 || domain > 8 || s[domain] != ':')
        return false;
    s += domain + 1;
    if (hex_run(s) != 2 || s[2] != ':')
        return false;
    s += 3;
    if (hex_run(s) != 2 || s[0] > '1' || s[2] != '.')
        return false;
    return s[3] >= '0' && s[3] <= '7' && s[4] == '\0';
}

bool kube_names_is_hex4(const char *s)
{
    return hex_run(s) == 4 && s[4] == '\0';
}

bool kube_names_is_usb_port_path(const char *s)
{
    size_t n = digit_run(s);
    if (n == 0 || s[n] != '-')
        return false;
    s += n + 1;
    for (;;) {
        n = digit_run(s);
        if (n == 0)
            return false;
        s += n;
        if (*s == '\0')
            return true;
        if (*s != '.')
            return false;
        s++;
    }
}

/* Copies `s` into `out` without the characters in `drop`, with '.' turned into `dot`. */
static int add_filtered(struct buf *out, const char *s, const char *drop, char dot)
{
    int r = 0;
    for (; r == 0 && *s; s++) {
        if (strchr(drop, *s))
            continue;
        const char *c = (*s == '.' && dot != '\0') ? &dot : s;
        r = buf_add(out, c, 1);
    }
    return r;
}

/* Moves a finished name from `b` into `ret`; -ENAMETOOLONG when it does not fit. */
static int finish_name(struct buf *b, int r, char *ret, size_t size)
{
    if (r == -E2BIG || (r == 0 && b->len >= size)) {
        buf_free(b);
        return -ENAMETOOLONG;
    }
    if (r < 0) {
        buf_free(b);
        return r;
    }
    memcpy(ret, buf_str(b), b->len + 1);
    buf_free(b);
    return 0;
}

int kube_names_pcidevice(const char *node, const char *address, char *ret, size_t size)
{
    if (!names_is_dns_subdomain(node) || !kube_names_is_pci_address(address))
        return -EINVAL;
    struct buf b;
    buf_init(&b, KUBE_NAME_MAX);
    int r = buf_printf(&b, "%s-", node);
    if (r == 0)
        r = add_filtered(&b, address, ":.", 0);
    return finish_name(&b, r, ret, size);
}

int kube_names_sriovnetdev(const char *node, const char *ifname, char *ret, size_t size)
{
    if (!names_is_dns_subdomain(node) || !ifname[0])
        return -EINVAL;
    struct buf b;
    buf_init(&b, KUBE_NAME_MAX);
    int r = buf_printf(&b, "%s-", node);
    for (const char *c = ifname; r == 0 && *c; c++)
        r = buf_printf(&b, "%c", tolower((unsigned char)*c));
    if (r == 0 && !names_is_dns_subdomain(buf_str(&b)))
        r = -EINVAL;
    return finish_name(&b, r, ret, size);
}

int kube_names_usbdevice(const char *node, const char *vid, const char *pid, const char *port_path,
                         char *ret, size_t size)
{
    if (!names_is_dns_subdomain(node) || !kube_names_is_hex4(vid) || !kube_names_is_hex4(pid) ||
        !kube_names_is_usb_port_path(port_path))
        return -EINVAL;
    struct buf b;
    buf_init(&b, KUBE_NAME_MAX);
    int r = buf_printf(&b, "%s-%s-%s-", node, vid, pid);
    if (r == 0)
        r = add_filtered(&b, port_path, "", '-');
    return finish_name(&b, r, ret, size);
}

/* Whether `s` is "-<hex4>-<hex4>-<1-3 digits>" followed by 1 to 7 "-<1-3 digits>" to its end. */
static bool is_usb_suffix(const char *s)
{
    for (int i = 0; i < 2; i++) {
        if (*s != '-' || strspn(s + 1, "0123456789abcdef") < 4)
            return false;
        s += 5;
    }
    int groups = 0;
    while (*s == '-') {
        size_t n = strspn(s + 1, "0123456789");
        if (n < 1 || n > 3)
            return false;
        s += 1 + n;
        groups++;
    }
    return *s == '\0' && groups >= 2 && groups <= 8;
}

int kube_names_usbdevice_node(const char *name, char *ret, size_t size)
{
    for (const char *p = strchr(name, '-'); p; p = strchr(p + 1, '-')) {
        size_t n = (size_t)(p - name);
        if (n == 0 || !is_usb_suffix(p))
            continue;
        if (n >= size)
            return -EINVAL;
        memcpy(ret, name, n);
        ret[n] = '\0';
        return names_is_dns_subdomain(ret) ? 0 : -EINVAL;
    }
    return -EINVAL;
}
