/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/config.c - kubeconfig and in-cluster configuration. See config.h.
 *
 * kube_kubeconfig_parse() is pure (text in, struct out); the loaders read files with a size
 * cap and blocking reads. Key material (keys, tokens, the kubeconfig text and its parsed tree)
 * is wiped before it is freed. No logging: errors come back as messages (base/err.h).
 */
#include "kube/config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/yaml.h"

/* How often a token file is re-read (client-go's cachingTokenSource uses a minute too). */
#define TOKEN_REREAD_SECONDS 60.0
#define READ_CHUNK           4096

/* err_set() as a macro that evaluates to `r`, so that the analyzers see the value. */
#define errf(ret_err, r, ...) (err_set((ret_err), (r), __VA_ARGS__), (r))

/* Fails with the message of the step that failed, or strerror when it left none (-ENOMEM). */
static int pass_error(struct err *ret_err, int r, const struct err *e)
{
    return errf(ret_err, r, "%s", e->msg[0] ? e->msg : strerror(-r));
}

static void free_wiped(char *s, size_t n)
{
    if (!s)
        return;
    explicit_bzero(s, n);
    free(s);
}

static void free_wiped_str(char *s)
{
    if (s)
        free_wiped(s, strlen(s));
}

/* Wipes every string of a parsed kubeconfig (it holds keys and tokens), then frees it. */
static void wipe_tree(cJSON *node, int depth)
{
    for (; node && depth <= YAML_MAX_DEPTH + 1; node = node->next) {
        if (node->valuestring)
            explicit_bzero(node->valuestring, strlen(node->valuestring));
        wipe_tree(node->child, depth + 1);
    }
}

static void cjson_wipe_deletep(cJSON **p)
{
    if (!*p)
        return;
    wipe_tree(*p, 0);
    cJSON_Delete(*p);
}

/* --- base64 ------------------------------------------------------------------------------ */

static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Decodes `in` into `out` (room for 3/4 of its length + 3); returns the length or -EINVAL. */
static ssize_t b64_decode_into(const char *in, unsigned char *out)
{
    uint32_t acc = 0;
    size_t len = 0, digits = 0, pad = 0;
    int bits = 0;
    for (; *in; in++) {
        if (*in == '\r' || *in == '\n' || *in == ' ')
            continue;
        int v = *in == '=' ? 0 : b64_value(*in);
        if (v < 0 || (pad > 0 && *in != '='))
            return -EINVAL;
        if (*in == '=') {
            pad++;
            continue;
        }
        digits++;
        acc = ((acc << 6) | (uint32_t)v) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[len++] = (unsigned char)(acc >> bits);
        }
    }
    if (digits % 4 == 1 || pad > 2 || (pad > 0 && (digits + pad) % 4 != 0))
        return -EINVAL;
    return (ssize_t)len;
}

/* Standard base64 (padding optional, line breaks ignored) into a NUL-terminated buffer. */
static int base64_decode(const char *in, char **ret, size_t *ret_len)
{
    size_t alloc = strlen(in) / 4 * 3 + 4;
    unsigned char *out = malloc(alloc);
    if (!out)
        return -ENOMEM;
    ssize_t n = b64_decode_into(in, out);
    if (n < 0) {
        free_wiped((char *)out, alloc);
        return (int)n;
    }
    out[n] = '\0';
    *ret = (char *)out;
    *ret_len = (size_t)n;
    return 0;
}

/* --- kubeconfig fields ------------------------------------------------------------------- */

/* The value of an optional string field of `obj` (`what` names it in messages), or NULL when
 * absent; "" and null count as absent. */
static int optional_string(const cJSON *obj, const char *key, const char *what, const char **ret,
                           struct err *ret_err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *ret = NULL;
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v))
        return errf(ret_err, -EINVAL, "%s has invalid %s (not a string)", what, key);
    if (v->valuestring[0] != '\0')
        *ret = v->valuestring;
    return 0;
}

/* An optional string field, copied. */
static int get_string(const cJSON *obj, const char *key, const char *what, char **ret,
                      struct err *ret_err)
{
    const char *v;
    int r = optional_string(obj, key, what, &v, ret_err);
    if (r < 0 || !v)
        return r;
    *ret = strdup(v);
    return *ret ? 0 : -ENOMEM;
}

static int get_bool(const cJSON *obj, const char *key, const char *what, bool *ret,
                    struct err *ret_err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsBool(v))
        return errf(ret_err, -EINVAL, "%s has invalid %s (not a boolean)", what, key);
    *ret = cJSON_IsTrue(v);
    return 0;
}

/* An optional base64 field, decoded. */
static int get_data(const cJSON *obj, const char *key, const char *what, char **ret,
                    size_t *ret_len, struct err *ret_err)
{
    const char *v;
    int r = optional_string(obj, key, what, &v, ret_err);
    if (r < 0 || !v)
        return r;
    r = base64_decode(v, ret, ret_len);
    if (r == -EINVAL)
        return errf(ret_err, r, "%s has invalid %s (not base64)", what, key);
    return r;
}

static bool is_set(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return v && !cJSON_IsNull(v);
}

/* Checks an entry of a named list: a mapping whose "name" may be `name`. */
static int match_entry(const cJSON *e, const char *list, const char *name, struct err *ret_err)
{
    if (!cJSON_IsObject(e))
        return errf(ret_err, -EINVAL, "\"%s\" has an entry that is not a mapping", list);
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
    return cJSON_IsString(n) && strcmp(n->valuestring, name) == 0;
}

/*
 * Finds `name` in the list `list` ("clusters") of entries {name, `kind`: {...}} and stores
 * its `kind` mapping (NULL when empty). Returns 0, -ENOENT (no message) or -EINVAL.
 */
static int find_entry(const cJSON *root, const char *list, const char *kind, const char *name,
                      const cJSON **ret, struct err *ret_err)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, list), *e, *found = NULL;
    if (arr && !cJSON_IsNull(arr) && !cJSON_IsArray(arr))
        return errf(ret_err, -EINVAL, "\"%s\" is not a list", list);
    cJSON_ArrayForEach(e, arr)
    {
        int r = match_entry(e, list, name, ret_err);
        if (r < 0)
            return r;
        if (r > 0 && found)
            return errf(ret_err, -EINVAL, "%s \"%s\" is defined twice", kind, name);
        if (r > 0)
            found = e;
    }
    if (!found)
        return -ENOENT;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(found, kind);
    if (v && !cJSON_IsNull(v) && !cJSON_IsObject(v))
        return errf(ret_err, -EINVAL, "%s \"%s\" is not a mapping", kind, name);
    *ret = cJSON_IsObject(v) ? v : NULL;
    return 0;
}

static int selected_context(const cJSON *root, const char *context, const char **ret,
                            struct err *ret_err)
{
    if (context && context[0]) {
        *ret = context;
        return 0;
    }
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(root, "current-context");
    if (cur && !cJSON_IsNull(cur) && !cJSON_IsString(cur))
        return errf(ret_err, -EINVAL, "current-context is not a string");
    if (!cur || !cJSON_IsString(cur) || cur->valuestring[0] == '\0')
        return errf(ret_err, -EINVAL, "no context given and current-context is not set");
    *ret = cur->valuestring;
    return 0;
}

/* Selects the context; stores the names of its cluster and user (NULL when none). */
static int read_context(const cJSON *root, const char *context, struct kube_kubeconfig *k,
                        char **ret_cluster, char **ret_user, struct err *ret_err)
{
    const char *name;
    const cJSON *ctx = NULL;
    int r = selected_context(root, context, &name, ret_err);
    if (r < 0)
        return r;
    r = find_entry(root, "contexts", "context", name, &ctx, ret_err);
    if (r == -ENOENT)
        return errf(ret_err, -EINVAL, "context \"%s\" not found", name);
    if (r < 0)
        return r;
    k->context = strdup(name);
    if (!k->context)
        return -ENOMEM;
    _cleanup_free_ char *what = NULL;
    if (asprintf(&what, "context \"%s\"", name) < 0)
        return -ENOMEM;
    r = get_string(ctx, "cluster", what, ret_cluster, ret_err);
    r = r < 0 ? r : get_string(ctx, "user", what, ret_user, ret_err);
    r = r < 0 ? r : get_string(ctx, "namespace", what, &k->namespace, ret_err);
    if (r == 0 && !*ret_cluster)
        return errf(ret_err, -EINVAL, "%s has no cluster", what);
    return r;
}

static int read_cluster_fields(const cJSON *c, const char *what, struct kube_kubeconfig *k,
                               struct err *ret_err)
{
    int r = get_string(c, "server", what, &k->server, ret_err);
    r = r < 0 ? r : get_string(c, "certificate-authority", what, &k->ca_file, ret_err);
    r = r < 0 ? r
              : get_data(c, "certificate-authority-data", what, &k->ca_data, &k->ca_data_len,
                         ret_err);
    r = r < 0 ? r
              : get_bool(c, "insecure-skip-tls-verify", what, &k->insecure_skip_tls_verify,
                         ret_err);
    r = r < 0 ? r : get_string(c, "tls-server-name", what, &k->tls_server_name, ret_err);
    return r;
}

/* The cluster or user entry `name` the context names, and how errors call it (`kind "name"`). */
static int find_named(const cJSON *root, const char *list, const char *kind, const char *name,
                      const struct kube_kubeconfig *k, const cJSON **ret, char **ret_what,
                      struct err *ret_err)
{
    int r = find_entry(root, list, kind, name, ret, ret_err);
    if (r == -ENOENT)
        return errf(ret_err, -EINVAL, "%s \"%s\" (of context \"%s\") not found", kind, name,
                    k->context);
    if (r < 0 || asprintf(ret_what, "%s \"%s\"", kind, name) < 0)
        return r < 0 ? r : -ENOMEM;
    return 0;
}

static int read_cluster(const cJSON *root, const char *name, struct kube_kubeconfig *k,
                        struct err *ret_err)
{
    const cJSON *c = NULL;
    _cleanup_free_ char *what = NULL;
    int r = find_named(root, "clusters", "cluster", name, k, &c, &what, ret_err);
    if (r < 0)
        return r;
    r = read_cluster_fields(c, what, k, ret_err);
    if (r < 0)
        return r;
    if (!k->server)
        return errf(ret_err, -EINVAL, "%s has no server", what);
    if (k->ca_data && k->ca_file)
        return errf(ret_err, -EINVAL,
                    "%s has both certificate-authority and certificate-authority-data", what);
    if (k->insecure_skip_tls_verify && (k->ca_data || k->ca_file))
        return errf(ret_err, -EINVAL,
                    "%s combines insecure-skip-tls-verify with a certificate authority", what);
    return 0;
}

/* Authentication methods client-go has and we do not. */
static int unsupported_auth(const cJSON *u, const char *what, struct err *ret_err)
{
    static const char *const keys[] = {"exec", "auth-provider", "username", "password"};
    for (size_t i = 0; i < ELEMENTSOF(keys); i++)
        if (is_set(u, keys[i]))
            return errf(ret_err, -EINVAL,
                        "%s uses %s, which is not supported (use a client certificate or a "
                        "token)",
                        what, keys[i]);
    return 0;
}

static int read_user_fields(const cJSON *u, const char *what, struct kube_kubeconfig *k,
                            struct err *ret_err)
{
    int r = get_string(u, "client-certificate", what, &k->cert_file, ret_err);
    r = r < 0 ? r
              : get_data(u, "client-certificate-data", what, &k->cert_data, &k->cert_data_len,
                         ret_err);
    r = r < 0 ? r : get_string(u, "client-key", what, &k->key_file, ret_err);
    r = r < 0 ? r : get_data(u, "client-key-data", what, &k->key_data, &k->key_data_len, ret_err);
    r = r < 0 ? r : get_string(u, "token", what, &k->token, ret_err);
    r = r < 0 ? r : get_string(u, "tokenFile", what, &k->token_file, ret_err);
    return r;
}

/* The checks of client-go's validateAuthInfo. */
static int check_user(const struct kube_kubeconfig *k, const char *what, struct err *ret_err)
{
    bool cert = k->cert_data || k->cert_file, key = k->key_data || k->key_file;
    if (k->cert_data && k->cert_file)
        return errf(ret_err, -EINVAL, "%s has both client-certificate and client-certificate-data",
                    what);
    if (k->key_data && k->key_file)
        return errf(ret_err, -EINVAL, "%s has both client-key and client-key-data", what);
    if (cert != key)
        return errf(ret_err, -EINVAL, "%s has a client %s but no client %s", what,
                    cert ? "certificate" : "key", cert ? "key" : "certificate");
    return 0;
}

static int read_user(const cJSON *root, const char *name, struct kube_kubeconfig *k,
                     struct err *ret_err)
{
    const cJSON *u = NULL;
    _cleanup_free_ char *what = NULL;
    int r = find_named(root, "users", "user", name, k, &u, &what, ret_err);
    if (r < 0)
        return r;
    r = unsupported_auth(u, what, ret_err);
    r = r < 0 ? r : read_user_fields(u, what, k, ret_err);
    return r < 0 ? r : check_user(k, what, ret_err);
}

static int parse_root(const cJSON *root, const char *context, struct kube_kubeconfig *k,
                      struct err *ret_err)
{
    _cleanup_free_ char *cluster = NULL, *user = NULL;
    if (cJSON_IsNull(root))
        return errf(ret_err, -EINVAL, "kubeconfig is empty");
    if (!cJSON_IsObject(root))
        return errf(ret_err, -EINVAL, "kubeconfig is not a mapping");
    int r = read_context(root, context, k, &cluster, &user, ret_err);
    r = r < 0 ? r : read_cluster(root, cluster, k, ret_err);
    if (r < 0 || !user)
        return r;
    return read_user(root, user, k, ret_err);
}

int kube_kubeconfig_parse(const char *text, size_t len, const char *context,
                          struct kube_kubeconfig *ret, struct err *ret_err)
{
    _cleanup_(cjson_wipe_deletep) cJSON *root = NULL;
    struct err e = {0};
    struct kube_kubeconfig k = {0};
    int r = yaml_parse(text, len, &root, &e);
    r = r < 0 ? r : parse_root(root, context, &k, &e);
    if (r < 0) {
        kube_kubeconfig_done(&k);
        return pass_error(ret_err, r, &e);
    }
    *ret = k;
    return 0;
}

void kube_kubeconfig_done(struct kube_kubeconfig *k)
{
    free(k->context);
    free(k->server);
    free_wiped(k->ca_data, k->ca_data_len);
    free(k->ca_file);
    free_wiped(k->cert_data, k->cert_data_len);
    free(k->cert_file);
    free_wiped(k->key_data, k->key_data_len);
    free(k->key_file);
    free_wiped_str(k->token);
    free(k->token_file);
    free(k->tls_server_name);
    free(k->namespace);
    *k = (struct kube_kubeconfig){0};
}

/* --- files ------------------------------------------------------------------------------- */

/* Grows a buffer that may hold secrets: copies, then wipes the old one. */
static int grow_wiped(char **buf, size_t *alloc, size_t used)
{
    size_t n = *alloc * 2 > KUBE_CONFIG_FILE_MAX + 2 ? KUBE_CONFIG_FILE_MAX + 2 : *alloc * 2;
    char *p = malloc(n);
    if (!p)
        return -ENOMEM;
    memcpy(p, *buf, used);
    free_wiped(*buf, *alloc);
    *buf = p;
    *alloc = n;
    return 0;
}

static int read_all(int fd, char **buf, size_t *alloc, size_t *len)
{
    for (;;) {
        if (*len + 1 == *alloc) {
            if (*len > KUBE_CONFIG_FILE_MAX)
                return -EFBIG;
            int r = grow_wiped(buf, alloc, *len);
            if (r < 0)
                return r;
        }
        ssize_t n = read(fd, *buf + *len, *alloc - 1 - *len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return *len > KUBE_CONFIG_FILE_MAX ? -EFBIG : 0;
        *len += (size_t)n;
    }
}

/* Reads a whole file (at most KUBE_CONFIG_FILE_MAX bytes) into a NUL-terminated buffer. */
static int read_file(const char *path, char **ret, size_t *ret_len)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    size_t alloc = READ_CHUNK, len = 0;
    char *buf = malloc(alloc);
    if (!buf)
        return -ENOMEM;
    int r = read_all(fd, &buf, &alloc, &len);
    if (r < 0) {
        free_wiped(buf, alloc);
        return r;
    }
    buf[len] = '\0';
    *ret = buf;
    *ret_len = len;
    return 0;
}

static bool has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
}

/* Why a token could not be read, for messages. */
static const char *token_error(int r)
{
    if (r == -ENODATA)
        return "empty file";
    if (r == -EINVAL)
        return "control characters in the token";
    return strerror(-r);
}

/* Reads a token file: trailing whitespace removed; -ENODATA when empty, -EINVAL when it holds
 * control characters (which must never reach an HTTP header). */
static int read_token(const char *path, char **ret)
{
    char *buf = NULL;
    size_t len = 0;
    int r = read_file(path, &buf, &len);
    if (r < 0)
        return r;
    while (len > 0 && strchr(" \t\r\n", buf[len - 1]))
        buf[--len] = '\0';
    r = len == 0 ? -ENODATA : strlen(buf) != len || has_control(buf) ? -EINVAL : 0;
    if (r < 0) {
        free_wiped(buf, len);
        return r;
    }
    *ret = buf;
    return 0;
}

/* `file` as is when absolute, else relative to `dir`. */
static char *resolve_path(const char *dir, const char *file)
{
    char *p = NULL;
    if (file[0] == '/')
        return strdup(file);
    if (asprintf(&p, "%s/%s", dir, file) < 0)
        return NULL;
    return p;
}

/* Reads the PEM file `file` (relative to `dir`) for the field `field`. */
static int read_pem(const char *dir, const char *file, const char *field, char **ret,
                    size_t *ret_len, struct err *ret_err)
{
    _cleanup_free_ char *path = resolve_path(dir, file);
    if (!path)
        return -ENOMEM;
    int r = read_file(path, ret, ret_len);
    if (r < 0)
        return errf(ret_err, r, "cannot read %s %s: %s", field, path, strerror(-r));
    return 0;
}

/* Takes decoded data when there is some, else reads the file; stores NULL when neither. */
static int take_pem(const char *dir, char **data, size_t data_len, const char *file,
                    const char *field, char **ret, size_t *ret_len, struct err *ret_err)
{
    if (*data) {
        *ret = TAKE_PTR(*data);
        *ret_len = data_len;
        return 0;
    }
    return file ? read_pem(dir, file, field, ret, ret_len, ret_err) : 0;
}

/* The server URL without trailing '/'; "https://" is assumed without a scheme. */
static int server_url(const char *server, char **ret, struct err *ret_err)
{
    const char *scheme = strstr(server, "://");
    bool http = strncmp(server, "https://", 8) == 0 || strncmp(server, "http://", 7) == 0;
    if (scheme && !http)
        return errf(ret_err, -EINVAL, "server \"%s\" is not an http(s) URL", server);
    size_t n = strlen(server);
    while (n > 0 && server[n - 1] == '/')
        n--;
    if (asprintf(ret, "%s%.*s", scheme ? "" : "https://", (int)n, server) < 0)
        return -ENOMEM;
    return 0;
}

static int resolve_token(const char *dir, struct kube_kubeconfig *k, struct kube_config *c,
                         struct err *ret_err)
{
    c->token = TAKE_PTR(k->token);
    if (!k->token_file)
        return 0;
    c->token_file = resolve_path(dir, k->token_file);
    if (!c->token_file)
        return -ENOMEM;
    c->token_read_at = clock_monotonic();
    if (c->token)
        return 0;
    char *token = NULL;
    int r = read_token(c->token_file, &token);
    if (r < 0)
        return errf(ret_err, r, "cannot read tokenFile %s: %s", c->token_file, token_error(r));
    c->token = token;
    return 0;
}

/* Turns a parsed kubeconfig into a configuration, reading the files it names. */
static int resolve(const char *dir, struct kube_kubeconfig *k, struct kube_config *c,
                   struct err *ret_err)
{
    int r = server_url(k->server, &c->server, ret_err);
    r = r < 0 ? r
              : take_pem(dir, &k->ca_data, k->ca_data_len, k->ca_file, "certificate-authority",
                         &c->ca_pem, &c->ca_len, ret_err);
    r = r < 0 ? r
              : take_pem(dir, &k->cert_data, k->cert_data_len, k->cert_file, "client-certificate",
                         &c->cert_pem, &c->cert_len, ret_err);
    r = r < 0 ? r
              : take_pem(dir, &k->key_data, k->key_data_len, k->key_file, "client-key", &c->key_pem,
                         &c->key_len, ret_err);
    r = r < 0 ? r : resolve_token(dir, k, c, ret_err);
    if (r < 0)
        return r;
    c->insecure_skip_tls_verify = k->insecure_skip_tls_verify;
    c->tls_server_name = TAKE_PTR(k->tls_server_name);
    c->namespace = k->namespace ? TAKE_PTR(k->namespace) : strdup("default");
    return c->namespace ? 0 : -ENOMEM;
}

/* The kubeconfig to load: `path`, the first entry of $KUBECONFIG, or ~/.kube/config. */
static int kubeconfig_path(const char *path, char **ret, struct err *ret_err)
{
    const char *env = getenv("KUBECONFIG"), *home = getenv("HOME");
    if (env)
        env += strspn(env, ":");
    if (path && path[0])
        *ret = strdup(path);
    else if (env && env[0])
        *ret = strndup(env, strcspn(env, ":"));
    else if (home && home[0])
        return asprintf(ret, "%s/.kube/config", home) < 0 ? -ENOMEM : 0;
    else
        return errf(ret_err, -ENOENT, "no kubeconfig: neither KUBECONFIG nor HOME is set");
    return *ret ? 0 : -ENOMEM;
}

/* The directory of `path`, against which relative paths in it are resolved. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
}

static int load(const char *file, const char *context, struct kube_config *c, struct err *ret_err)
{
    char *text = NULL;
    size_t len = 0;
    int r = read_file(file, &text, &len);
    if (r < 0)
        return errf(ret_err, r, "cannot read kubeconfig %s: %s", file, strerror(-r));
    struct kube_kubeconfig k = {0};
    struct err e = {0};
    r = kube_kubeconfig_parse(text, len, context, &k, &e);
    free_wiped(text, len);
    if (r < 0)
        return errf(ret_err, r, "%s: %s", file, e.msg);
    char *dir = dir_of(file);
    r = dir ? resolve(dir, &k, c, &e) : -ENOMEM;
    free(dir);
    if (r < 0)
        r = errf(ret_err, r, "%s: context \"%s\": %s", file, k.context,
                 e.msg[0] ? e.msg : strerror(-r));
    kube_kubeconfig_done(&k);
    return r;
}

int kube_config_load_kubeconfig(const char *path, const char *context, struct kube_config *ret,
                                struct err *ret_err)
{
    char *file = NULL;
    struct err e = {0};
    int r = kubeconfig_path(path, &file, &e);
    if (r < 0)
        return pass_error(ret_err, r, &e);
    struct kube_config c = {0};
    r = load(file, context, &c, &e);
    free(file); /* not _cleanup_free_: clang-analyzer 14 reports it as a leak */
    if (r < 0) {
        kube_config_done(&c);
        return pass_error(ret_err, r, &e);
    }
    *ret = c;
    return 0;
}

/* --- in-cluster -------------------------------------------------------------------------- */

static int parse_port(const char *s, long *ret)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] < '0' || s[0] > '9' || v < 1 || v > 65535)
        return -EINVAL;
    *ret = v;
    return 0;
}

/* A host name or address, an IPv6 address possibly in brackets already. */
static bool is_host(const char *host)
{
    size_t n = strlen(host);
    if (has_control(host) || strpbrk(host, "/@?# "))
        return false;
    if (host[0] == '[')
        return n > 2 && host[n - 1] == ']' && !strpbrk(host + 1, "[") &&
               strchr(host, ']') == host + n - 1;
    return !strpbrk(host, "[]");
}

/* "https://host:port", with an IPv6 host in brackets. */
static int service_url(const char *host, const char *port, char **ret, struct err *ret_err)
{
    long p;
    if (parse_port(port, &p) < 0)
        return errf(ret_err, -EINVAL, "KUBERNETES_SERVICE_PORT \"%s\" is not a port", port);
    if (!is_host(host))
        return errf(ret_err, -EINVAL, "KUBERNETES_SERVICE_HOST \"%s\" is not a host", host);
    bool v6 = strchr(host, ':') && host[0] != '[';
    if (asprintf(ret, "https://%s%s%s:%ld", v6 ? "[" : "", host, v6 ? "]" : "", p) < 0)
        return -ENOMEM;
    return 0;
}

/* The namespace file, or "default" when it cannot be read or is empty (as client-go). */
static char *sa_namespace(const char *dir)
{
    _cleanup_free_ char *path = resolve_path(dir, "namespace");
    char *ns = NULL;
    if (path && read_token(path, &ns) == 0)
        return ns;
    return strdup("default");
}

static int in_cluster(const char *dir, const char *host, const char *port, struct kube_config *c,
                      struct err *ret_err)
{
    _cleanup_free_ char *ca = resolve_path(dir, "ca.crt");
    c->token_file = resolve_path(dir, "token");
    if (!ca || !c->token_file)
        return -ENOMEM;
    int r = service_url(host, port, &c->server, ret_err);
    if (r < 0)
        return r;
    r = read_token(c->token_file, &c->token);
    if (r < 0)
        return errf(ret_err, r, "cannot read service account token %s: %s", c->token_file,
                    token_error(r));
    c->token_read_at = clock_monotonic();
    r = read_file(ca, &c->ca_pem, &c->ca_len);
    if (r < 0)
        return errf(ret_err, r, "cannot read service account CA %s: %s", ca, strerror(-r));
    c->namespace = sa_namespace(dir);
    return c->namespace ? 0 : -ENOMEM;
}

int kube_config_in_cluster(const char *sa_dir, struct kube_config *ret, struct err *ret_err)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !host[0] || !port || !port[0])
        return errf(ret_err, -ENOENT,
                    "not in a cluster: KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is "
                    "not set");
    struct kube_config c = {0};
    struct err e = {0};
    int r = in_cluster(sa_dir ? sa_dir : KUBE_SA_DIR, host, port, &c, &e);
    if (r < 0) {
        kube_config_done(&c);
        return pass_error(ret_err, r, &e);
    }
    *ret = c;
    return 0;
}

int kube_config_refresh_token(struct kube_config *c, double now, bool force)
{
    if (!c->token_file)
        return 0;
    if (!force && now - c->token_read_at <= TOKEN_REREAD_SECONDS)
        return 0;
    char *token = NULL;
    int r = read_token(c->token_file, &token);
    if (r < 0)
        return r;
    c->token_read_at = now;
    if (c->token && strcmp(c->token, token) == 0) {
        free_wiped_str(token);
        return 0;
    }
    free_wiped_str(c->token);
    c->token = token;
    return 1;
}

void kube_config_done(struct kube_config *c)
{
    free(c->server);
    free(c->ca_pem);
    free(c->cert_pem);
    free_wiped(c->key_pem, c->key_len);
    free_wiped_str(c->token);
    free(c->token_file);
    free(c->tls_server_name);
    free(c->namespace);
    *c = (struct kube_config){0};
}
