/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/names.c - the Kubernetes name rules (DNS labels and subdomains, qualified name parts,
 * extended resource names). See names.h. Pure: no I/O, no logging.
 */
#include "base/names.h"

#include <string.h>

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
    return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* One DNS label of `len` bytes. */
static bool is_dns_label_n(const char *s, size_t len)
{
    if (len == 0 || len > NAMES_DNS_LABEL_MAX || !is_lower_alnum(s[0]) ||
        !is_lower_alnum(s[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_lower_alnum(s[i]) && s[i] != '-')
            return false;
    return true;
}

/* A DNS subdomain of `len` bytes: every '.'-separated part a label (so no empty part). */
static bool is_dns_subdomain_n(const char *s, size_t len)
{
    if (len == 0 || len > NAMES_DNS_SUBDOMAIN_MAX)
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '.')
            continue;
        if (!is_dns_label_n(s + start, i - start))
            return false;
        start = i + 1;
    }
    return true;
}

static bool has_suffix(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

/* kubernetes.io and *.kubernetes.io are reserved for native resources. */
static bool is_reserved_domain(const char *s, size_t len)
{
    return (len == strlen("kubernetes.io") && memcmp(s, "kubernetes.io", len) == 0) ||
           has_suffix(s, len, ".kubernetes.io");
}

bool names_is_dns_label(const char *s)
{
    return s && is_dns_label_n(s, strnlen(s, NAMES_DNS_LABEL_MAX + 1));
}

bool names_is_dns_subdomain(const char *s)
{
    return s && is_dns_subdomain_n(s, strnlen(s, NAMES_DNS_SUBDOMAIN_MAX + 1));
}

bool names_is_qualified_name_part(const char *s)
{
    if (!s)
        return false;
    size_t len = strnlen(s, NAMES_QUALIFIED_NAME_MAX + 1);
    if (len == 0 || len > NAMES_QUALIFIED_NAME_MAX || !is_alnum(s[0]) || !is_alnum(s[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

bool names_is_extended_resource_name(const char *s)
{
    const char *slash = s ? strchr(s, '/') : NULL;
    if (!slash)
        return false;
    size_t dlen = (size_t)(slash - s);
    return is_dns_subdomain_n(s, dlen) && !is_reserved_domain(s, dlen) &&
           names_is_qualified_name_part(slash + 1);
}
