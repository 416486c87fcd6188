/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/names.h - the name rules of Kubernetes (apimachinery's validation package): RFC 1123
 * DNS labels and subdomains, the name part of qualified names, and extended resource names.
 * The one place these rules live: kube/names (object names, API formats) and node/pciname
 * (resource names from pci.ids) both check through them.
 *
 * Every function takes NULL (and answers false). Pure: no I/O, no logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Longest DNS label, longest DNS subdomain, longest name part of a qualified name. */
#define NAMES_DNS_LABEL_MAX      63
#define NAMES_DNS_SUBDOMAIN_MAX  253
#define NAMES_QUALIFIED_NAME_MAX 63

/* RFC 1123 label: 1-63 lower-case alphanumerics or '-', alphanumeric at both ends ("node-a"). */
bool names_is_dns_label(const char *s);

/* RFC 1123 subdomain: DNS labels joined by '.', at most 253 characters in all
 * ("worker-1.example.com"; not "Node-A", "node..a", "node."). */
bool names_is_dns_subdomain(const char *s);

/* The name part of a qualified name (a label key, the name of an extended resource): 1-63
 * characters of [A-Za-z0-9_.-], alphanumeric at both ends ("ETHERNET_CONNECTION_11_I219LM"). */
bool names_is_qualified_name_part(const char *s);

/*
 * An extended resource name as kubelet and the scheduler accept it: "<domain>/<name>", the
 * domain a DNS subdomain outside kubernetes.io and *.kubernetes.io (reserved for native
 * resources), the name a qualified name part ("intel.com/I219LM"; not "intel.com/I219_",
 * ".com/X", "kubernetes.io/X", "intel.com/a/b").
 */
bool names_is_extended_resource_name(const char *s);
