/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_config.c - kubeconfig selection and loading (fixtures in
 * test/fixtures/kubeconfig), the in-cluster configuration (a temporary service-account
 * directory and KUBERNETES_SERVICE_* variables) and token refresh with a fake clock.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "kube/config.h"

#ifndef FIXTURES
#define FIXTURES "test/fixtures"
#endif
#define KC FIXTURES "/kubeconfig"

#define CA_PEM                                                                                     \
    "-----BEGIN CERTIFICATE-----\nZHVtbXkgaG9zdGRldmQgdGVzdCBjYQ==\n-----END CERTIFICATE-----\n"
#define CERT_PEM                                                                                   \
    "-----BEGIN CERTIFICATE-----\nZHVtbXkgY2xpZW50IGNlcnRpZmljYXRl\n-----END CERTIFICATE-----\n"
#define KEY_PEM "-----BEGIN PRIVATE KEY-----\nZHVtbXkgY2xpZW50IGtleQ==\n-----END PRIVATE KEY-----\n"

/* Whether `data` (of `len` bytes) is exactly the string `want`. */
static bool same(const char *data, size_t len, const char *want)
{
    return data && len == strlen(want) && memcmp(data, want, len) == 0 && data[len] == '\0';
}

static bool eq(const char *s, const char *want)
{
    return s && strcmp(s, want) == 0;
}

static char *slurp(const char *path, size_t *ret_len)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *buf = calloc(1, 65536);
    size_t n = buf ? fread(buf, 1, 65535, f) : 0;
    fclose(f);
    *ret_len = n;
    return buf;
}

static int parse_file(const char *name, const char *context, struct kube_kubeconfig *k,
                      struct err *err)
{
    char path[512];
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/%s", KC, name);
    char *text = slurp(path, &len);
    CU_ASSERT_PTR_NOT_NULL(text);
    if (!text)
        return -ENOENT;
    int r = kube_kubeconfig_parse(text, len, context, k, err);
    free(text);
    return r;
}

static int load_file(const char *name, const char *context, struct kube_config *c, struct err *err)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", KC, name);
    return kube_config_load_kubeconfig(path, context, c, err);
}

static void write_file(const char *dir, const char *name, const char *content)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "we");
    CU_ASSERT_PTR_NOT_NULL(f);
    if (!f)
        return;
    fputs(content, f);
    fclose(f);
}

static void remove_dir(const char *dir, const char *const *names)
{
    char path[512];
    for (; *names; names++) {
        snprintf(path, sizeof(path), "%s/%s", dir, *names);
        unlink(path);
    }
    rmdir(dir);
}

/* --- parsing fixtures --------------------------------------------------------------------- */

static void test_kubectl_fixture(void)
{
    struct kube_kubeconfig k = {0};
    struct err err = {0};
    CU_ASSERT_EQUAL(parse_file("kubectl.yaml", NULL, &k, &err), 0);
    CU_ASSERT_STRING_EQUAL(err.msg, "");
    if (err.msg[0])
        return;
    CU_ASSERT(eq(k.context, "kind-hostdevd"));
    CU_ASSERT(eq(k.server, "https://127.0.0.1:6443"));
    CU_ASSERT(same(k.ca_data, k.ca_data_len, CA_PEM));
    CU_ASSERT(same(k.cert_data, k.cert_data_len, CERT_PEM));
    CU_ASSERT(same(k.key_data, k.key_data_len, KEY_PEM));
    CU_ASSERT(eq(k.namespace, "devices"));
    CU_ASSERT_PTR_NULL(k.ca_file);
    CU_ASSERT_PTR_NULL(k.token);
    CU_ASSERT_FALSE(k.insecure_skip_tls_verify);
    kube_kubeconfig_done(&k);
    CU_ASSERT_PTR_NULL(k.server);

    CU_ASSERT_EQUAL(parse_file("kubectl.yaml", "staging", &k, &err), 0);
    if (err.msg[0])
        return;
    CU_ASSERT(eq(k.server, "https://[fd00::10]:6443/"));
    CU_ASSERT(k.insecure_skip_tls_verify);
    CU_ASSERT(eq(k.tls_server_name, "kubernetes.default"));
    CU_ASSERT(eq(k.token, "eyJhbGciOiJSUzI1NiJ9.staging.token"));
    CU_ASSERT_PTR_NULL(k.cert_data);
    CU_ASSERT_PTR_NULL(k.ca_data);
    CU_ASSERT_PTR_NULL(k.namespace);
    kube_kubeconfig_done(&k);
}

static void test_harness_fixture(void)
{
    static const char *const users[] = {"admin", "alice", "bob"};
    static const char *const certs[] = {
            "ZHVtbXkgYWRtaW4gY2VydGlmaWNhdGU=", "ZHVtbXkgYWxpY2UgY2VydGlmaWNhdGU=",
            "ZHVtbXkgYm9iIGNlcnRpZmljYXRl"};
    for (size_t i = 0; i < 3; i++) {
        struct kube_kubeconfig k = {0};
        struct err err = {0};
        CU_ASSERT_EQUAL(parse_file("harness.yaml", i ? users[i] : NULL, &k, &err), 0);
        CU_ASSERT_STRING_EQUAL(err.msg, "");
        if (err.msg[0])
            continue;
        CU_ASSERT(eq(k.context, users[i]));
        CU_ASSERT(eq(k.server, "https://127.0.0.1:42424"));
        CU_ASSERT(same(k.ca_data, k.ca_data_len, CA_PEM));
        CU_ASSERT_PTR_NOT_NULL(k.cert_data && strstr(k.cert_data, certs[i]));
        CU_ASSERT_PTR_NOT_NULL(k.key_data && strstr(k.key_data, "PRIVATE KEY"));
        CU_ASSERT_PTR_NULL(k.namespace);
        kube_kubeconfig_done(&k);
    }
}

static void test_json_fixture(void)
{
    struct kube_kubeconfig k = {0};
    struct err err = {0};
    CU_ASSERT_EQUAL(parse_file("json.json", NULL, &k, &err), 0);
    CU_ASSERT_STRING_EQUAL(err.msg, "");
    if (err.msg[0])
        return;
    CU_ASSERT(eq(k.context, "json"));
    CU_ASSERT(eq(k.server, "https://json.example:443/"));
    CU_ASSERT(same(k.ca_data, k.ca_data_len, CA_PEM));
    CU_ASSERT(same(k.key_data, k.key_data_len, KEY_PEM));
    CU_ASSERT(eq(k.namespace, "j\xc3\xa9"));
    kube_kubeconfig_done(&k);
}

struct bad_fixture {
    const char *file;
    const char *context;
    const char *err;
};

static const struct bad_fixture bad_fixtures[] = {
        {"bad-no-server.yaml", NULL, "cluster \"serverless\" has no server"},
        {"kubectl.yaml", "nope", "context \"nope\" not found"},
        {"bad-base64.yaml", NULL, "user \"admin\" has invalid client-key-data (not base64)"},
        {"bad-tabs.yaml", NULL, "line 6: tabs are not allowed for indentation"},
        {"bad-exec.yaml", NULL,
         "user \"aws\" uses exec, which is not supported (use a client certificate or a token)"},
        {"bad-auth-provider.yaml", "gke",
         "user \"gcp\" uses auth-provider, which is not supported (use a client certificate or "
         "a token)"},
        {"bad-unclosed-quote.yaml", NULL,
         "line 6: unclosed quote (multi-line quoted strings are not supported)"},
        {"bad-depth.yaml", NULL, "line 65: nesting deeper than 64 levels"},
};

static void test_bad_fixtures(void)
{
    for (size_t i = 0; i < sizeof(bad_fixtures) / sizeof(bad_fixtures[0]); i++) {
        const struct bad_fixture *b = &bad_fixtures[i];
        struct kube_kubeconfig k = {0};
        struct err err = {0};
        int r = parse_file(b->file, b->context, &k, &err);
        if (!eq(err.msg, b->err))
            fprintf(stderr, "\n  %s: got \"%s\", want \"%s\"\n", b->file, err.msg, b->err);
        CU_ASSERT_EQUAL(r, -EINVAL);
        CU_ASSERT(eq(err.msg, b->err));
        CU_ASSERT_PTR_NULL(k.server); /* untouched on failure */
    }
}

/* --- parsing inline documents ------------------------------------------------------------- */

struct bad_text {
    const char *text;
    const char *err;
};

#define CTX  "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
#define CLU  "clusters:\n- name: c\n  cluster:\n    server: https://h\n"
#define USER "users:\n- name: u\n  user:\n"

static const struct bad_text bad_texts[] = {
        {"", "kubeconfig is empty"},
        {"- a", "kubeconfig is not a mapping"},
        {"apiVersion: v1", "no context given and current-context is not set"},
        {"current-context: ''\ncontexts: []", "no context given and current-context is not set"},
        {"current-context: [x]", "current-context is not a string"},
        {"current-context: x\ncontexts: {x: y}", "\"contexts\" is not a list"},
        {"current-context: x\ncontexts: [a]", "\"contexts\" has an entry that is not a mapping"},
        {"current-context: x\ncontexts:\n- name: x\n- name: x", "context \"x\" is defined twice"},
        {"current-context: x\ncontexts:\n- name: x\n  context: [c]",
         "context \"x\" is not a mapping"},
        {"current-context: x\ncontexts:\n- name: x\n  context: {user: u}",
         "context \"x\" has no cluster"},
        {"current-context: x\ncontexts:\n- name: x\n  context: {cluster: true}",
         "context \"x\" has invalid cluster (not a string)"},
        {CTX, "cluster \"c\" (of context \"x\") not found"},
        {CTX CLU, "user \"u\" (of context \"x\") not found"},
        {CTX "clusters:\n- name: c\n  cluster: {server: true}",
         "cluster \"c\" has invalid server (not a string)"},
        {CTX CLU "    insecure-skip-tls-verify: 'true'",
         "cluster \"c\" has invalid insecure-skip-tls-verify (not a boolean)"},
        {CTX CLU "    certificate-authority-data: '@@@@'",
         "cluster \"c\" has invalid certificate-authority-data (not base64)"},
        {CTX CLU "    certificate-authority-data: QUJD\n    certificate-authority: ca.crt",
         "cluster \"c\" has both certificate-authority and certificate-authority-data"},
        {CTX CLU "    certificate-authority: ca.crt\n    insecure-skip-tls-verify: true",
         "cluster \"c\" combines insecure-skip-tls-verify with a certificate authority"},
        {CTX CLU USER "    client-certificate: c.crt",
         "user \"u\" has a client certificate but no client key"},
        {CTX CLU USER "    client-key-data: QUJD",
         "user \"u\" has a client key but no client certificate"},
        {CTX CLU USER "    client-certificate: c.crt\n    client-certificate-data: QUJD",
         "user \"u\" has both client-certificate and client-certificate-data"},
        {CTX CLU USER "    client-key: k\n    client-key-data: QUJD\n    client-certificate: c",
         "user \"u\" has both client-key and client-key-data"},
        {CTX CLU USER "    username: admin\n    password: secret",
         "user \"u\" uses username, which is not supported (use a client certificate or a token)"},
        {CTX CLU USER "    client-certificate-data: Q\n    client-key-data: QUJD",
         "user \"u\" has invalid client-certificate-data (not base64)"},
        {CTX CLU USER "    client-certificate-data: QQ=A\n    client-key-data: QUJD",
         "user \"u\" has invalid client-certificate-data (not base64)"},
        {CTX CLU USER "    client-certificate-data: QUJD===\n    client-key-data: QUJD",
         "user \"u\" has invalid client-certificate-data (not base64)"},
        {CTX CLU USER "    tokenFile: 42\n  extra: [",
         "line 13: unclosed flow collection (they must end on the same line)"},
};

static void test_bad_texts(void)
{
    for (size_t i = 0; i < sizeof(bad_texts) / sizeof(bad_texts[0]); i++) {
        struct kube_kubeconfig k = {0};
        struct err err = {0};
        const char *t = bad_texts[i].text;
        int r = kube_kubeconfig_parse(t, strlen(t), NULL, &k, &err);
        if (!eq(err.msg, bad_texts[i].err))
            fprintf(stderr, "\n  text %zu: got \"%s\", want \"%s\"\n", i, err.msg,
                    bad_texts[i].err);
        CU_ASSERT_EQUAL(r, -EINVAL);
        CU_ASSERT(eq(err.msg, bad_texts[i].err));
        CU_ASSERT_PTR_NULL(k.context);
    }
}

static void test_base64_and_defaults(void)
{
    /* JSON allows line breaks inside the data; padding is optional. */
    const char *t = "{\"current-context\": \"x\", \"contexts\": [{\"name\": \"x\", \"context\": "
                    "{\"cluster\": \"c\", \"user\": \"u\", \"namespace\": \"\"}}],"
                    "\"clusters\": [{\"name\": \"c\", \"cluster\": {\"server\": \"h:6443\","
                    " \"certificate-authority-data\": \"QUJD\\nREVG\\r\\n\"}}],"
                    "\"users\": [{\"name\": \"u\", \"user\": {\"client-certificate-data\": \"QUI\","
                    " \"client-key-data\": \"QQ\", \"token\": \"\"}}]}";
    struct kube_kubeconfig k = {0};
    struct err err = {0};
    CU_ASSERT_EQUAL(kube_kubeconfig_parse(t, strlen(t), "", &k, &err), 0);
    CU_ASSERT_STRING_EQUAL(err.msg, "");
    if (err.msg[0])
        return;
    CU_ASSERT(same(k.ca_data, k.ca_data_len, "ABCDEF"));
    CU_ASSERT(same(k.cert_data, k.cert_data_len, "AB"));
    CU_ASSERT(same(k.key_data, k.key_data_len, "A"));
    CU_ASSERT_PTR_NULL(k.token);     /* "" is absent */
    CU_ASSERT_PTR_NULL(k.namespace); /* likewise */
    kube_kubeconfig_done(&k);

    /* A context without a user: no credentials. A NULL ret_err is allowed. */
    t = CTX CLU;
    const char *anon = "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n" CLU;
    CU_ASSERT_EQUAL(kube_kubeconfig_parse(t, strlen(t), NULL, &k, NULL), -EINVAL);
    CU_ASSERT_EQUAL(kube_kubeconfig_parse(anon, strlen(anon), NULL, &k, NULL), 0);
    CU_ASSERT(eq(k.server, "https://h"));
    CU_ASSERT_PTR_NULL(k.cert_data);
    kube_kubeconfig_done(&k);
}

/* --- loading ------------------------------------------------------------------------------ */

static void test_load_paths(void)
{
    struct kube_config c = {0};
    struct err err = {0};
    CU_ASSERT_EQUAL(load_file("paths.yaml", NULL, &c, &err), 0);
    CU_ASSERT_STRING_EQUAL(err.msg, "");
    if (err.msg[0]) {
        fprintf(stderr, "\n  %s\n", err.msg);
        return;
    }
    CU_ASSERT(eq(c.server, "https://127.0.0.1:6443"));
    CU_ASSERT(same(c.ca_pem, c.ca_len, CA_PEM));
    CU_ASSERT(same(c.cert_pem, c.cert_len, CERT_PEM));
    CU_ASSERT(same(c.key_pem, c.key_len, KEY_PEM));
    CU_ASSERT(eq(c.namespace, "kube-system"));
    CU_ASSERT_PTR_NULL(c.token);
    kube_config_done(&c);

    CU_ASSERT_EQUAL(load_file("paths.yaml", "missing-absolute", &c, &err), -ENOENT);
    CU_ASSERT(eq(err.msg, KC "/paths.yaml: context \"missing-absolute\": cannot read "
                             "certificate-authority /nonexistent/hostdevd/ca.crt: No such file or "
                             "directory"));
}

static void test_load_fixtures(void)
{
    struct kube_config c = {0};
    struct err err = {0};
    CU_ASSERT_EQUAL(load_file("kubectl.yaml", "staging", &c, &err), 0);
    CU_ASSERT(eq(c.server, "https://[fd00::10]:6443"));
    CU_ASSERT(c.insecure_skip_tls_verify);
    CU_ASSERT(eq(c.tls_server_name, "kubernetes.default"));
    CU_ASSERT(eq(c.namespace, "default"));
    CU_ASSERT_PTR_NULL(c.ca_pem);
    CU_ASSERT_PTR_NULL(c.token_file);
    kube_config_done(&c);

    CU_ASSERT_EQUAL(load_file("harness.yaml", "bob", &c, &err), 0);
    CU_ASSERT(eq(c.server, "https://127.0.0.1:42424"));
    CU_ASSERT(same(c.ca_pem, c.ca_len, CA_PEM));
    CU_ASSERT_PTR_NOT_NULL(c.key_pem && strstr(c.key_pem, "ZHVtbXkgYm9iIGtleQ=="));
    kube_config_done(&c);

    CU_ASSERT_EQUAL(load_file("json.json", NULL, &c, &err), 0);
    CU_ASSERT(eq(c.server, "https://json.example:443"));
    kube_config_done(&c);

    CU_ASSERT_EQUAL(load_file("bad-tabs.yaml", NULL, &c, &err), -EINVAL);
    CU_ASSERT(eq(err.msg, KC "/bad-tabs.yaml: line 6: tabs are not allowed for indentation"));
    CU_ASSERT_EQUAL(load_file("no-such.yaml", NULL, &c, &err), -ENOENT);
    CU_ASSERT(eq(err.msg, "cannot read kubeconfig " KC "/no-such.yaml: No such file or directory"));
    CU_ASSERT_EQUAL(load_file("pki", NULL, &c, &err), -EISDIR);
}

static void test_load_tokens(void)
{
    struct kube_config c = {0};
    struct err err = {0};
    CU_ASSERT_EQUAL(load_file("token.yaml", NULL, &c, &err), 0);
    CU_ASSERT(eq(c.token, "abc.def"));
    CU_ASSERT_PTR_NULL(c.token_file);
    CU_ASSERT(c.insecure_skip_tls_verify);
    CU_ASSERT_EQUAL(kube_config_refresh_token(&c, 1e9, true), 0); /* nothing to re-read */
    kube_config_done(&c);

    CU_ASSERT_EQUAL(load_file("token.yaml", "file", &c, &err), 0);
    CU_ASSERT(eq(c.token, "sha256~hostdevd-file-token"));
    CU_ASSERT(eq(c.token_file, KC "/token.txt"));
    CU_ASSERT(c.token_read_at > 0);
    kube_config_done(&c);

    CU_ASSERT_EQUAL(load_file("token.yaml", "both", &c, &err), 0);
    CU_ASSERT(eq(c.token, "inline-token"));
    CU_ASSERT(eq(c.token_file, KC "/token.txt"));
    CU_ASSERT_EQUAL(kube_config_refresh_token(&c, c.token_read_at + 1, true), 1);
    CU_ASSERT(eq(c.token, "sha256~hostdevd-file-token"));
    kube_config_done(&c);

    CU_ASSERT_EQUAL(load_file("token.yaml", "anonymous", &c, &err), 0);
    CU_ASSERT_PTR_NULL(c.token);
    CU_ASSERT_PTR_NULL(c.cert_pem);
    kube_config_done(&c);

    CU_ASSERT_EQUAL(load_file("token.yaml", "empty", &c, &err), -ENODATA);
    CU_ASSERT(eq(err.msg, KC "/token.yaml: context \"empty\": cannot read tokenFile " KC
                             "/empty-token.txt: empty file"));
}

/* Runs `load` with KUBECONFIG and HOME set as given (NULL = unset), then restores them. */
static int load_with_env(const char *kubeconfig, const char *home, struct kube_config *c,
                         struct err *err)
{
    const char *env_kc = getenv("KUBECONFIG"), *env_home = getenv("HOME");
    char *old_kc = env_kc ? strdup(env_kc) : NULL;
    char *old_home = env_home ? strdup(env_home) : NULL;
    kubeconfig ? setenv("KUBECONFIG", kubeconfig, 1) : unsetenv("KUBECONFIG");
    home ? setenv("HOME", home, 1) : unsetenv("HOME");
    int r = kube_config_load_kubeconfig(NULL, NULL, c, err);
    old_kc ? setenv("KUBECONFIG", old_kc, 1) : unsetenv("KUBECONFIG");
    old_home ? setenv("HOME", old_home, 1) : unsetenv("HOME");
    free(old_kc);
    free(old_home);
    return r;
}

static void test_load_default_paths_and_absolute(void)
{
    char dir[] = "/tmp/hostdevd-kc-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL(mkdtemp(dir));
    char sub[64];
    snprintf(sub, sizeof(sub), "%s/.kube", dir);
    CU_ASSERT_EQUAL(mkdir(sub, 0700), 0);
    const char *kc = "current-context: a\n"
                     "contexts: [{name: a, context: {cluster: a, user: a}}]\n"
                     "clusters: [{name: a, cluster: {server: 'https://abs:1///', "
                     "certificate-authority: " KC "/pki/ca.crt}}]\n"
                     "users: [{name: a, user: {client-certificate: " KC "/pki/client.crt, "
                     "client-key: " KC "/pki/client.key}}]\n";
    write_file(sub, "config", kc);

    struct kube_config c = {0};
    struct err err = {0};
    char list[128];
    snprintf(list, sizeof(list), "::%s/.kube/config:/nonexistent", dir);
    CU_ASSERT_EQUAL(load_with_env(list, NULL, &c, &err), 0);
    CU_ASSERT(eq(c.server, "https://abs:1"));
    CU_ASSERT(same(c.ca_pem, c.ca_len, CA_PEM));
    CU_ASSERT(same(c.key_pem, c.key_len, KEY_PEM));
    kube_config_done(&c);
    CU_ASSERT_EQUAL(load_with_env(NULL, dir, &c, &err), 0);
    CU_ASSERT(same(c.cert_pem, c.cert_len, CERT_PEM));
    kube_config_done(&c);
    CU_ASSERT_EQUAL(load_with_env("", NULL, &c, &err), -ENOENT);
    CU_ASSERT(eq(err.msg, "no kubeconfig: neither KUBECONFIG nor HOME is set"));

    write_file(sub, "config",
               "current-context: a\ncontexts: [{name: a, context: {cluster: a}}]\n"
               "clusters: [{name: a, cluster: {server: 'ftp://x'}}]\n");
    CU_ASSERT_EQUAL(load_with_env(NULL, dir, &c, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "server \"ftp://x\" is not an http(s) URL"));
    static const char *const names[] = {"config", NULL};
    remove_dir(sub, names);
    rmdir(dir);
}

/* --- in-cluster and token refresh --------------------------------------------------------- */

static void set_service(const char *host, const char *port)
{
    host ? setenv("KUBERNETES_SERVICE_HOST", host, 1) : unsetenv("KUBERNETES_SERVICE_HOST");
    port ? setenv("KUBERNETES_SERVICE_PORT", port, 1) : unsetenv("KUBERNETES_SERVICE_PORT");
}

static const char *const sa_files[] = {"token", "ca.crt", "namespace", NULL};

static void make_sa_dir(char *dir)
{
    CU_ASSERT_PTR_NOT_NULL(mkdtemp(dir));
    write_file(dir, "token", "tok-1\n");
    write_file(dir, "ca.crt", CA_PEM);
    write_file(dir, "namespace", "hostdevd-system\n");
}

static void test_in_cluster(void)
{
    char dir[] = "/tmp/hostdevd-sa-XXXXXX";
    make_sa_dir(dir);
    struct kube_config c = {0};
    struct err err = {0};
    set_service("10.96.0.1", "443");
    CU_ASSERT_EQUAL(kube_config_in_cluster(dir, &c, &err), 0);
    CU_ASSERT_STRING_EQUAL(err.msg, "");
    CU_ASSERT(eq(c.server, "https://10.96.0.1:443"));
    CU_ASSERT(eq(c.token, "tok-1"));
    CU_ASSERT(same(c.ca_pem, c.ca_len, CA_PEM));
    CU_ASSERT(eq(c.namespace, "hostdevd-system"));
    CU_ASSERT_PTR_NOT_NULL(c.token_file && strstr(c.token_file, "/token"));
    CU_ASSERT(c.token_read_at > 0);
    kube_config_done(&c);

    set_service("fd00:10:96::1", "6443");
    CU_ASSERT_EQUAL(kube_config_in_cluster(dir, &c, &err), 0);
    CU_ASSERT(eq(c.server, "https://[fd00:10:96::1]:6443"));
    kube_config_done(&c);
    set_service("[fd00::1]", "443");
    CU_ASSERT_EQUAL(kube_config_in_cluster(dir, &c, &err), 0);
    CU_ASSERT(eq(c.server, "https://[fd00::1]:443"));
    kube_config_done(&c);

    /* Without the namespace file: "default". */
    char path[512];
    snprintf(path, sizeof(path), "%s/namespace", dir);
    unlink(path);
    CU_ASSERT_EQUAL(kube_config_in_cluster(dir, &c, &err), 0);
    CU_ASSERT(eq(c.namespace, "default"));
    kube_config_done(&c);
    remove_dir(dir, sa_files);
    set_service(NULL, NULL);
}

struct bad_env {
    const char *host, *port;
    int r;
    const char *err;
};

static const struct bad_env bad_envs[] = {
        {NULL, "443", -ENOENT,
         "not in a cluster: KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is not set"},
        {"10.0.0.1", "", -ENOENT,
         "not in a cluster: KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is not set"},
        {"10.0.0.1", "https", -EINVAL, "KUBERNETES_SERVICE_PORT \"https\" is not a port"},
        {"10.0.0.1", "65536", -EINVAL, "KUBERNETES_SERVICE_PORT \"65536\" is not a port"},
        {"10.0.0.1", "+443", -EINVAL, "KUBERNETES_SERVICE_PORT \"+443\" is not a port"},
        {"10.0.0.1", "0", -EINVAL, "KUBERNETES_SERVICE_PORT \"0\" is not a port"},
        {"evil/path", "443", -EINVAL, "KUBERNETES_SERVICE_HOST \"evil/path\" is not a host"},
        {"[fd00::1", "443", -EINVAL, "KUBERNETES_SERVICE_HOST \"[fd00::1\" is not a host"},
};

static void test_in_cluster_errors(void)
{
    char dir[] = "/tmp/hostdevd-sa-XXXXXX";
    make_sa_dir(dir);
    for (size_t i = 0; i < sizeof(bad_envs) / sizeof(bad_envs[0]); i++) {
        struct kube_config c = {0};
        struct err err = {0};
        set_service(bad_envs[i].host, bad_envs[i].port);
        CU_ASSERT_EQUAL(kube_config_in_cluster(dir, &c, &err), bad_envs[i].r);
        CU_ASSERT(eq(err.msg, bad_envs[i].err));
        CU_ASSERT_PTR_NULL(c.server);
    }
    set_service("10.0.0.1", "443");
    struct kube_config c = {0};
    struct err err = {0};
    char path[512];
    snprintf(path, sizeof(path), "%s/ca.crt", dir);
    unlink(path);
    CU_ASSERT_EQUAL(kube_config_in_cluster(dir, &c, &err), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "cannot read service account CA"));
    write_file(dir, "token", "  \n");
    CU_ASSERT_EQUAL(kube_config_in_cluster(dir, &c, &err), -ENODATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/token: empty file"));
    write_file(dir, "token", "two\nlines\n");
    CU_ASSERT_EQUAL(kube_config_in_cluster(dir, &c, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "control characters in the token"));
    remove_dir(dir, sa_files);
    CU_ASSERT_EQUAL(kube_config_in_cluster(dir, &c, NULL), -ENOENT);
    set_service(NULL, NULL);
}

static void test_refresh_token(void)
{
    char dir[] = "/tmp/hostdevd-sa-XXXXXX";
    make_sa_dir(dir);
    set_service("10.0.0.1", "443");
    struct kube_config c = {0};
    struct err err = {0};
    CU_ASSERT_EQUAL(kube_config_in_cluster(dir, &c, &err), 0);
    set_service(NULL, NULL);
    if (err.msg[0])
        return;
    double t0 = 1000.0; /* a fake clock */
    c.token_read_at = t0;
    write_file(dir, "token", "tok-2\n");
    CU_ASSERT_EQUAL(kube_config_refresh_token(&c, t0 + 30, false), 0); /* too early */
    CU_ASSERT(eq(c.token, "tok-1"));
    CU_ASSERT_EQUAL(kube_config_refresh_token(&c, t0 + 60, false), 0); /* not more than 60 s */
    CU_ASSERT_EQUAL(kube_config_refresh_token(&c, t0 + 61, false), 1);
    CU_ASSERT(eq(c.token, "tok-2"));
    CU_ASSERT_EQUAL(c.token_read_at, t0 + 61);
    CU_ASSERT_EQUAL(kube_config_refresh_token(&c, t0 + 62, true), 0); /* forced, unchanged */
    CU_ASSERT_EQUAL(c.token_read_at, t0 + 62);

    write_file(dir, "token", "tok-3\r\n\t \n");
    CU_ASSERT_EQUAL(kube_config_refresh_token(&c, t0 + 63, true), 1); /* after a 401 */
    CU_ASSERT(eq(c.token, "tok-3"));

    /* Unreadable or empty: the old token stays, and the next call retries. */
    write_file(dir, "token", "\n");
    CU_ASSERT_EQUAL(kube_config_refresh_token(&c, t0 + 200, false), -ENODATA);
    CU_ASSERT(eq(c.token, "tok-3"));
    char path[512];
    snprintf(path, sizeof(path), "%s/token", dir);
    unlink(path);
    CU_ASSERT_EQUAL(kube_config_refresh_token(&c, t0 + 201, false), -ENOENT);
    CU_ASSERT(eq(c.token, "tok-3"));
    CU_ASSERT_EQUAL(c.token_read_at, t0 + 63);
    write_file(dir, "token", "tok-4");
    chmod(path, 0);
    int r = kube_config_refresh_token(&c, t0 + 202, true);
    /* root reads mode-0 files anyway */
    CU_ASSERT(geteuid() == 0 ? r == 1 : (r == -EACCES && eq(c.token, "tok-3")));
    kube_config_done(&c);
    remove_dir(dir, sa_files);
}

static void test_file_size_cap(void)
{
    char dir[] = "/tmp/hostdevd-sa-XXXXXX";
    make_sa_dir(dir);
    char path[512];
    snprintf(path, sizeof(path), "%s/ca.crt", dir);
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    CU_ASSERT(fd >= 0);
    CU_ASSERT_EQUAL(ftruncate(fd, (off_t)KUBE_CONFIG_FILE_MAX + 1), 0);
    close(fd);
    set_service("10.0.0.1", "443");
    struct kube_config c = {0};
    struct err err = {0};
    CU_ASSERT_EQUAL(kube_config_in_cluster(dir, &c, &err), -EFBIG);
    /* Exactly the cap is fine. */
    CU_ASSERT_EQUAL(truncate(path, (off_t)KUBE_CONFIG_FILE_MAX), 0);
    CU_ASSERT_EQUAL(kube_config_in_cluster(dir, &c, &err), 0);
    CU_ASSERT_EQUAL(c.ca_len, KUBE_CONFIG_FILE_MAX);
    kube_config_done(&c);
    set_service(NULL, NULL);
    remove_dir(dir, sa_files);
}

static CU_TestInfo tests[] = {
        {"kubectl fixture", test_kubectl_fixture},
        {"harness fixture (admin, alice, bob)", test_harness_fixture},
        {"JSON fixture", test_json_fixture},
        {"malformed fixtures", test_bad_fixtures},
        {"malformed documents", test_bad_texts},
        {"base64 and defaults", test_base64_and_defaults},
        {"load with relative paths", test_load_paths},
        {"load fixtures", test_load_fixtures},
        {"load tokens and token files", test_load_tokens},
        {"KUBECONFIG, HOME and absolute paths", test_load_default_paths_and_absolute},
        {"in-cluster (IPv4, IPv6)", test_in_cluster},
        {"in-cluster errors", test_in_cluster_errors},
        {"token refresh", test_refresh_token},
        {"file size cap", test_file_size_cap},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo config_suites[] = {
        {"config", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
