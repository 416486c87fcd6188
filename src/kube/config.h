/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/config.h - where the API server is and how to authenticate: a kubeconfig file
 * (current or named context; server, CA, client certificate and key, bearer token or token
 * file; inline *-data or file paths relative to the kubeconfig's directory) or the in-cluster
 * service account (KUBERNETES_SERVICE_HOST/PORT, token and CA files, IPv6 hosts bracketed).
 *
 * Keys and certificates are kept in memory (PEM bytes) and never written to disk; the HTTP
 * layer hands them to curl as blobs. The token of a token file is re-read every 60 s and
 * when forced after a 401 (projected tokens rotate).
 * Loading reads files (blocking; call it at start-up). kube_kubeconfig_parse() is pure and
 * fuzzed by test/fuzz/fuzz_kubeconfig.c. No logging: errors come back with a message.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct err;

/* Largest file read for a kubeconfig, certificate, key or token. */
#define KUBE_CONFIG_FILE_MAX ((size_t)1024 * 1024)

/* The default service-account directory of a pod. */
#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct kube_config {
    char *server; /* "https://host:port", no trailing '/' */
    char *ca_pem; /* CA bundle (PEM); NULL = the system trust store */
    size_t ca_len;
    char *cert_pem; /* client certificate (PEM) or NULL */
    size_t cert_len;
    char *key_pem; /* client key (PEM) or NULL */
    size_t key_len;
    char *token;          /* bearer token or NULL */
    char *token_file;     /* where `token` is re-read from, or NULL */
    double token_read_at; /* clock_monotonic() time of the last read */
    bool insecure_skip_tls_verify;
    char *tls_server_name; /* or NULL */
    char *namespace;       /* the context's namespace, or "default" */
};

/*
 * The raw, unresolved result of parsing a kubeconfig: the selected context's cluster and
 * user, with file paths as written. All strings owned; NULL when absent.
 */
struct kube_kubeconfig {
    char *context; /* name of the selected context */
    char *server;
    char *ca_data; /* decoded from certificate-authority-data (base64) */
    size_t ca_data_len;
    char *ca_file;   /* certificate-authority */
    char *cert_data; /* client-certificate-data, decoded */
    size_t cert_data_len;
    char *cert_file; /* client-certificate */
    char *key_data;  /* client-key-data, decoded */
    size_t key_data_len;
    char *key_file; /* client-key */
    char *token;
    char *token_file; /* tokenFile */
    bool insecure_skip_tls_verify;
    char *tls_server_name;
    char *namespace;
};

/*
 * Decisions where client-go's behaviour or the contract left a choice (tested in
 * test/unit/test_config.c):
 * - An empty `context` is NULL. A context without a user means no credentials; a named user,
 *   cluster or context that is missing is an error naming it and the context.
 * - Empty strings count as absent (client-go tests len() == 0). Duplicate names in
 *   clusters/users/contexts are an error, as in client-go's conversion.
 * - As client-go (validation, transport): a field given both as a file and as *-data, a client
 *   certificate without a key (or a key without a certificate), and insecure-skip-tls-verify
 *   together with a CA are errors. exec, auth-provider and username/password users are
 *   refused as unsupported (never silently anonymous).
 * - *-data is standard base64; padding is optional and CR, LF and spaces are ignored.
 * - `*ret` is written only on success; `*ret_err` (base/err.h; may be NULL) only on failure,
 *   and on every failure, -ENOENT and -ENOMEM included.
 * - Loading: the server loses trailing '/', gains "https://" when it has no scheme, and must
 *   be http or https. A token file is read at load (unreadable or empty is an error) unless
 *   an inline token is also given, which is then used until the first refresh. Tokens lose
 *   trailing whitespace; tokens with control characters are refused. $KUBECONFIG is not
 *   merged: only its first non-empty entry is read.
 * - In-cluster: the CA file is required (client-go only logs its absence and falls back to
 *   the system trust store); a missing or empty namespace file means "default".
 */

/*
 * Parses kubeconfig text (YAML or JSON) and selects `context` (NULL = current-context).
 * Returns 0; -EINVAL with a message in `*ret_err` such as "context \"x\" not
 * found", "user \"admin\" has invalid client-key-data (not base64)", "line 3: ..."; or
 * -ENOMEM. Rejects a cluster without server, and exec/auth-provider users (unsupported).
 * Pure.
 */
int kube_kubeconfig_parse(const char *text, size_t len, const char *context,
                          struct kube_kubeconfig *ret, struct err *ret_err);

void kube_kubeconfig_done(struct kube_kubeconfig *k);

/*
 * Loads the kubeconfig at `path` (NULL = $KUBECONFIG, first entry, or ~/.kube/config), selects
 * `context`, and reads the files it names (relative paths against the kubeconfig's directory).
 * Returns 0, or a negative errno with a message in `*ret_err`.
 */
int kube_config_load_kubeconfig(const char *path, const char *context, struct kube_config *ret,
                                struct err *ret_err);

/*
 * The in-cluster configuration: server from KUBERNETES_SERVICE_HOST and
 * KUBERNETES_SERVICE_PORT (an IPv6 host is bracketed), token and CA from `sa_dir`
 * (NULL = KUBE_SA_DIR), namespace from its "namespace" file. Returns 0, -ENOENT when not in
 * a cluster (no such variables), or another negative errno with a message in `*ret_err`.
 */
int kube_config_in_cluster(const char *sa_dir, struct kube_config *ret, struct err *ret_err);

/*
 * Re-reads the token file when `force` or when more than 60 s passed since the last read
 * (`now` is clock_monotonic() time). Keeps the old token if the file cannot be read or is
 * empty. Returns 1 when the token changed, 0 when not, or a negative errno.
 * Decision: a failed read returns its -errno (-ENODATA for an empty file, -EINVAL for control
 * characters), keeps the old token and does not advance token_read_at, so the next call
 * retries. Without a token file it returns 0.
 */
int kube_config_refresh_token(struct kube_config *c, double now, bool force);

void kube_config_done(struct kube_config *c);
