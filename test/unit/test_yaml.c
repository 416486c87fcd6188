/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_yaml.c - the kubeconfig YAML subset: what it accepts (compared as compact
 * JSON) and what it refuses (compared by message, line number included).
 */
#include <CUnit/CUnit.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/err.h"
#include "base/yaml.h"

struct good {
    const char *yaml;
    const char *json;
};

struct bad {
    const char *yaml;
    const char *err;
};

static const struct good goods[] = {
        {"a: b", "{\"a\":\"b\"}"},
        {"a: 1\nb: 2.5\nc: -3", "{\"a\":\"1\",\"b\":\"2.5\",\"c\":\"-3\"}"},
        {"t: true\nT: True\nf: FALSE\nn: null\nt2: ~\ne:", /* YAML 1.2 core */
         "{\"t\":true,\"T\":true,\"f\":false,\"n\":null,\"t2\":null,\"e\":null}"},
        {"y: yes\nq: 'true'\nd: \"null\"", "{\"y\":\"yes\",\"q\":\"true\",\"d\":\"null\"}"},
        {"a:\n  b:\n    c: d\n  e: f\ng: h",
         "{\"a\":{\"b\":{\"c\":\"d\"},\"e\":\"f\"},\"g\":\"h\"}"},
        /* kubectl writes sequences at the indentation of their key */
        {"l:\n- x\n- y\nk: v", "{\"l\":[\"x\",\"y\"],\"k\":\"v\"}"},
        {"l:\n  - x\n  - y\nk: v", "{\"l\":[\"x\",\"y\"],\"k\":\"v\"}"},
        {"l:\n- name: a\n  v: 1\n- name: b\n",
         "{\"l\":[{\"name\":\"a\",\"v\":\"1\"},{\"name\":\"b\"}]}"},
        {"l:\n- c:\n    s: x\n  name: a", "{\"l\":[{\"c\":{\"s\":\"x\"},\"name\":\"a\"}]}"},
        {"- a:\n  - x\n  b: 1\n- c", "[{\"a\":[\"x\"],\"b\":\"1\"},\"c\"]"},
        {"- - a\n  - b\n-   - c\n    - d", "[[\"a\",\"b\"],[\"c\",\"d\"]]"},
        {"-\n  a: 1\n-\n- # comment\n- x", "[{\"a\":\"1\"},null,null,\"x\"]"},
        {"- a:\n- b", "[{\"a\":null},\"b\"]"},
        {"a:\n  scalar\nb: c", "{\"a\":\"scalar\",\"b\":\"c\"}"},
        {"just a scalar", "\"just a scalar\""},
        /* comments and blanks */
        {"# head\n\n  # indented comment\na: b # trailing\nc: d#not-a-comment\n",
         "{\"a\":\"b\",\"c\":\"d#not-a-comment\"}"},
        {"a: b   \nc:   d\t\n", "{\"a\":\"b\",\"c\":\"d\"}"},
        {"a:\tb", "{\"a\":\"b\"}"},
        {"---\na: b", "{\"a\":\"b\"}"},
        {"# c\n--- # start\na: b", "{\"a\":\"b\"}"},
        {"a: b\r\nc:\r\n  d: e\r\n", "{\"a\":\"b\",\"c\":{\"d\":\"e\"}}"},
        {"\xef\xbb\xbf"
         "a: b",
         "{\"a\":\"b\"}"},
        {"", "null"},
        {"# only a comment\n\n", "null"},
        /* plain scalars that look special */
        {"server: https://127.0.0.1:6443/api?x=y",
         "{\"server\":\"https://127.0.0.1:6443/api?x=y\"}"},
        {"a: b:c\nd: -e\nf: x, y [z] {w}", "{\"a\":\"b:c\",\"d\":\"-e\",\"f\":\"x, y [z] {w}\"}"},
        {"a:b: c", "{\"a:b\":\"c\"}"},
        {"key with spaces  : v", "{\"key with spaces\":\"v\"}"},
        {"a: it's", "{\"a\":\"it's\"}"},
        /* quoted scalars */
        {"a: 'it''s # not a comment'", "{\"a\":\"it's # not a comment\"}"},
        {"a: ''\nb: \"\"", "{\"a\":\"\",\"b\":\"\"}"},
        {"a: \"q\\\" b\\\\s \\/ n\\n t\\t\"", "{\"a\":\"q\\\" b\\\\s / n\\n t\\t\"}"},
        /* A character beyond U+FFFF is \U (libyaml, like go-yaml, refuses surrogate escapes) */
        {"a: \"\\u00e9\\u20ac\\U0001F600\"", "{\"a\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}"},
        {"\"quoted key\": 1\n'single: key': 2", "{\"quoted key\":\"1\",\"single: key\":\"2\"}"},
        {"\"k\" : v # c", "{\"k\":\"v\"}"},
        {"a: \"x: y # z\"  # c", "{\"a\":\"x: y # z\"}"},
        /* flow collections */
        {"m: {}\nl: []", "{\"m\":{},\"l\":[]}"},
        {"m: { }\nl: [ ]  # empty", "{\"m\":{},\"l\":[]}"},
        {"a: [x, 'y', \"z\", [1, [2]], {k: v}]",
         "{\"a\":[\"x\",\"y\",\"z\",[\"1\",[\"2\"]],{\"k\":\"v\"}]}"},
        {"a: {b: c, d: [e, f], g: {h: i}, j: }",
         "{\"a\":{\"b\":\"c\",\"d\":[\"e\",\"f\"],\"g\":{\"h\":\"i\"},\"j\":null}}"},
        {"a: {\"b\":1,\"c\":true}", "{\"a\":{\"b\":\"1\",\"c\":true}}"},
        {"a: [x, y,]\nb: {c: d,}", "{\"a\":[\"x\",\"y\"],\"b\":{\"c\":\"d\"}}"},
        {"a: [http://x:1/y, u v]", "{\"a\":[\"http://x:1/y\",\"u v\"]}"},
        {"- [a, b]\n- {c: d}", "[[\"a\",\"b\"],{\"c\":\"d\"}]"},
        {"[a, b]", "[\"a\",\"b\"]"},
        /* JSON */
        {"{\"a\": [1, true, null, \"x\"], \"b\": {}}", "{\"a\":[1,true,null,\"x\"],\"b\":{}}"},
        {"\n  {\"a\": 1}\n\n", "{\"a\":1}"},
};

static const struct bad bads[] = {
        {"\ta: b", "line 1: tabs are not allowed for indentation"},
        {"a:\n  b: c\n \t d: e", "line 3: tabs are not allowed for indentation"},
        {"l:\n-\tx", "line 2: tabs are not allowed for indentation"},
        {"a: \"unclosed", "line 1: unclosed quote (multi-line quoted strings are not supported)"},
        {"a: b\nc: 'unclosed\n  more'",
         "line 2: unclosed quote (multi-line quoted strings are not supported)"},
        {"a: \"trailing\\", "line 1: unclosed quote (multi-line quoted strings are not supported)"},
        {"a: \"\\q\"", "line 1: unsupported escape in double-quoted string"},
        {"a: \"\\u12\"", "line 1: invalid \\u escape (4 hex digits expected)"},
        {"a: \"\\ud800\"", "line 1: unpaired surrogate in \\u escape"},
        {"a: \"\\udc00\"", "line 1: unpaired surrogate in \\u escape"},
        {"a: \"\\ud83d\\ude00\"",
         "line 1: surrogate pairs are not supported (write the character as \\U and 8 hex digits)"},
        {"a: \"\\u0000\"", "line 1: NUL characters are not supported"},
        {"a: b: c", "line 1: \": \" is not allowed in a plain value (quote the value)"},
        {"a: &anchor b", "line 1: anchors (&) are not supported"},
        {"a: *alias", "line 1: aliases (*) are not supported"},
        {"a: !!str b", "line 1: tags (!) are not supported"},
        {"a: |\n  text", "line 1: block scalars (| and >) are not supported"},
        {"a: >-\n  text", "line 1: block scalars (| and >) are not supported"},
        {"%YAML 1.2\n---\na: b", "line 1: directives (%) are not supported"},
        {"a: %x", "line 1: a plain value cannot start with %, @ or ` (quote it)"},
        {"a: @x", "line 1: a plain value cannot start with %, @ or ` (quote it)"},
        {"? complex\n: key", "line 1: complex keys (?) are not supported"},
        {"a: - b", "line 1: a sequence cannot start on the line of its key"},
        {"a: 1\n---\nb: 2", "line 2: multiple documents are not supported"},
        {"---\n---\n", "line 2: multiple documents are not supported"},
        {"--- a: b", "line 1: content after \"---\" is not supported"},
        {"a: b\n...", "line 2: document end markers (...) are not supported"},
        {"a: 1\nb: 2\na: 3", "line 3: duplicate key \"a\""},
        {"a: {b: 1, b: 2}", "line 1: duplicate key \"b\""},
        {"a: b\n  c: d", "line 2: unexpected indentation (multi-line values are not supported)"},
        {"a:\n    b: c\n  d: e",
         "line 3: unexpected indentation (multi-line values are not supported)"},
        {"l:\n  - a\n   - b",
         "line 3: unexpected indentation (multi-line values are not supported)"},
        {"a:\n  scalar\n  more", "line 3: multi-line values are not supported"},
        {"- a\n  b", "line 2: multi-line values are not supported"},
        {"one\ntwo", "line 2: multi-line values are not supported"},
        {"a: 1\n- b", "line 2: a sequence item where a mapping key was expected"},
        {"- a\nb: c", "line 2: unexpected line (check the indentation)"},
        {"  a: 1\nb: 2", "line 2: unexpected line (check the indentation)"},
        {"a: 1\njust text", "line 2: expected \"key: value\""},
        {"a: [b, c", "line 1: unclosed flow collection (they must end on the same line)"},
        {"a: [b,\n  c]", "line 1: unclosed flow collection (they must end on the same line)"},
        {"a: {b: c # comment}",
         "line 1: unclosed flow collection (they must end on the same line)"},
        {"a: [b c] d", "line 1: unexpected text after the value"},
        {"a: [b}", "line 1: expected ',' or ']' in a flow collection"},
        {"a: {b}", "line 1: expected ':' after a key in a flow mapping"},
        {"a: {: c}", "line 1: expected a key in a flow mapping"},
        {"a: [, b]", "line 1: unexpected flow indicator"},
        {"a: 'x' y", "line 1: unexpected text after the value"},
        {"a: ]", "line 1: unexpected flow indicator"},
        {"a: b\x01", "line 1: control character 0x01 is not allowed"},
        {"a: b\rc: d", "line 1: control character 0x0d is not allowed"},
        {"a: b\n\x7f", "line 2: control character 0x7f is not allowed"},
        {"{\"a\": 1,\n \"b\": }", "line 2: invalid JSON"},
        {"{\"a\": 1} trailing", "line 1: unexpected text after the JSON document"},
        {"{a: b}", "line 1: invalid JSON"},
};

static char *parse_to_json(const char *yaml, struct err *err)
{
    cJSON *root = NULL;
    if (yaml_parse(yaml, strlen(yaml), &root, err) < 0)
        return NULL;
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

static void test_accepts(void)
{
    for (size_t i = 0; i < sizeof(goods) / sizeof(goods[0]); i++) {
        struct err err = {0};
        char *json = parse_to_json(goods[i].yaml, &err);
        if (!json || strcmp(json, goods[i].json) != 0)
            fprintf(stderr, "\n  yaml %zu: got %s (%s), want %s\n", i, json ? json : "error",
                    err.msg[0] ? err.msg : "-", goods[i].json);
        CU_ASSERT_PTR_NOT_NULL(json);
        CU_ASSERT_STRING_EQUAL(err.msg, "");
        if (json)
            CU_ASSERT_STRING_EQUAL(json, goods[i].json);
        free(json);
    }
}

static void test_refuses(void)
{
    for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
        cJSON *root = NULL;
        struct err err = {0};
        int r = yaml_parse(bads[i].yaml, strlen(bads[i].yaml), &root, &err);
        if (r != -EINVAL || strcmp(err.msg, bads[i].err) != 0)
            fprintf(stderr, "\n  bad %zu: got %d \"%s\", want \"%s\"\n", i, r, err.msg,
                    bads[i].err);
        CU_ASSERT_EQUAL(r, -EINVAL);
        CU_ASSERT_PTR_NULL(root);
        CU_ASSERT_NOT_EQUAL(err.msg[0], '\0');
        CU_ASSERT_STRING_EQUAL(err.msg, bads[i].err);
        cJSON_Delete(root);
    }
}

static char *block_maps(int levels)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    for (int i = 0; i < levels; i++)
        buf_printf(&b, "%*sk%d:\n", 2 * i, "", i);
    buf_printf(&b, "%*sx\n", 2 * levels, "");
    return buf_take(&b);
}

static char *block_seqs(int levels)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    for (int i = 0; i < levels; i++)
        buf_printf(&b, "%*s-\n", 2 * i, "");
    buf_printf(&b, "%*sx\n", 2 * levels, "");
    return buf_take(&b);
}

static char *inline_seqs(int levels)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    for (int i = 0; i < levels; i++)
        buf_adds(&b, "- ");
    buf_adds(&b, "x");
    return buf_take(&b);
}

static char *flow_seqs(int levels)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    for (int i = 0; i < levels; i++)
        buf_adds(&b, "[a, {k: "); /* two collections per level */
    buf_adds(&b, "x");
    for (int i = 0; i < levels; i++)
        buf_adds(&b, "}]");
    return buf_take(&b);
}

static char *json_objects(int levels)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    for (int i = 0; i < levels; i++)
        buf_adds(&b, i % 2 ? "[" : "{\"k\": ");
    buf_adds(&b, "1");
    for (int i = levels - 1; i >= 0; i--)
        buf_adds(&b, i % 2 ? "]" : "}");
    return buf_take(&b);
}

/* YAML_MAX_DEPTH nested collections are accepted, one more is refused. */
static void check_depth(char *(*gen)(int levels), int per_level)
{
    char *ok = gen(YAML_MAX_DEPTH / per_level);
    char *deep = gen(YAML_MAX_DEPTH / per_level + 1);
    cJSON *root = NULL;
    struct err err = {0};
    CU_ASSERT_EQUAL(yaml_parse(ok, strlen(ok), &root, &err), 0);
    if (err.msg[0])
        fprintf(stderr, "\n  depth: %s\n", err.msg);
    cJSON_Delete(root);
    err = (struct err){0};
    root = NULL;
    CU_ASSERT_EQUAL(yaml_parse(deep, strlen(deep), &root, &err), -EINVAL);
    CU_ASSERT_PTR_NULL(root);
    CU_ASSERT_NOT_EQUAL(err.msg[0], '\0');
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, ": nesting deeper than 64 levels"));
    free(ok);
    free(deep);
}

static void test_depth_cap(void)
{
    check_depth(block_maps, 1);
    check_depth(block_seqs, 1);
    check_depth(inline_seqs, 1);
    check_depth(flow_seqs, 2);
    check_depth(json_objects, 1);
}

static void test_depth_bomb_is_fast_and_bounded(void)
{
    /* 100000 nested brackets: refused early, without deep recursion. */
    size_t n = 100000;
    char *s = malloc(2 * n + 1);
    if (!s)
        return;
    memset(s, '[', n);
    memset(s + n, ']', n);
    s[2 * n] = '\0';
    const char *prefixes[] = {"a: ", "{\"a\":"};
    for (size_t i = 0; i < 2; i++) {
        char *doc = NULL;
        CU_ASSERT(asprintf(&doc, "%s%s", prefixes[i], s) > 0);
        cJSON *root = NULL;
        struct err err = {0};
        CU_ASSERT_EQUAL(yaml_parse(doc, strlen(doc), &root, &err), -EINVAL);
        CU_ASSERT_NOT_EQUAL(err.msg[0], '\0');
        CU_ASSERT_STRING_EQUAL(err.msg, "line 1: nesting deeper than 64 levels");
        free(doc);
    }
    free(s);
}

static void test_kubectl_layout(void)
{
    const char *y = "apiVersion: v1\n"
                    "clusters:\n"
                    "- cluster:\n"
                    "    certificate-authority-data: QUJD\n"
                    "    server: https://127.0.0.1:6443\n"
                    "  name: kind\n"
                    "contexts:\n"
                    "- context:\n"
                    "    cluster: kind\n"
                    "    user: kind\n"
                    "  name: kind\n"
                    "current-context: kind\n"
                    "kind: Config\n"
                    "preferences: {}\n"
                    "users:\n"
                    "- name: kind\n"
                    "  user:\n"
                    "    token: t\n";
    cJSON *root = NULL;
    CU_ASSERT_EQUAL(yaml_parse(y, strlen(y), &root, NULL), 0);
    const cJSON *clusters = cJSON_GetObjectItemCaseSensitive(root, "clusters");
    CU_ASSERT_EQUAL(cJSON_GetArraySize(clusters), 1);
    const cJSON *c0 = cJSON_GetArrayItem(clusters, 0);
    const cJSON *server = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(c0, "cluster"), "server");
    CU_ASSERT(cJSON_IsString(server));
    if (cJSON_IsString(server))
        CU_ASSERT_STRING_EQUAL(server->valuestring, "https://127.0.0.1:6443");
    CU_ASSERT(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "preferences")));
    CU_ASSERT(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "kind")));
    cJSON_Delete(root);
}

static void test_contract_edges(void)
{
    cJSON *root = NULL;
    struct err err = {.msg = "untouched"};
    /* ret_err is left alone on success, optional on failure, and len is honoured. */
    CU_ASSERT_EQUAL(yaml_parse("a: b", 4, &root, &err), 0);
    CU_ASSERT_STRING_EQUAL(err.msg, "untouched");
    cJSON_Delete(root);
    root = NULL;
    CU_ASSERT_EQUAL(yaml_parse("a: \"x", 5, &root, NULL), -EINVAL);
    CU_ASSERT_PTR_NULL(root);
    CU_ASSERT_EQUAL(yaml_parse("a: bc: d", 5, &root, NULL), 0);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "a");
    CU_ASSERT(cJSON_IsString(a) && strcmp(a->valuestring, "bc") == 0);
    cJSON_Delete(root);
    root = NULL;
    CU_ASSERT_EQUAL(yaml_parse(NULL, 0, &root, NULL), 0);
    CU_ASSERT(cJSON_IsNull(root));
    cJSON_Delete(root);
    root = NULL;
    /* An embedded NUL is a control character, not the end of the text. */
    CU_ASSERT_EQUAL(yaml_parse("a: b\0c", 6, &root, NULL), -EINVAL);
}

/* --- anchors, tags, documents, bounds, encodings ------------------------------------------ */

static void check_refusals(const char *what, const struct bad *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cJSON *root = NULL;
        struct err err = {0};
        int r = yaml_parse(b[i].yaml, strlen(b[i].yaml), &root, &err);
        if (r != -EINVAL || strcmp(err.msg, b[i].err) != 0)
            fprintf(stderr, "\n  %s %zu: got %d \"%s\", want \"%s\"\n", what, i, r, err.msg,
                    b[i].err);
        CU_ASSERT_EQUAL(r, -EINVAL);
        CU_ASSERT_PTR_NULL(root);
        CU_ASSERT_STRING_EQUAL(err.msg, b[i].err);
        cJSON_Delete(root);
    }
}

static const struct bad anchors_and_tags[] = {
        {"a: &x {b: c}", "line 1: anchors (&) are not supported"},
        {"a:\n  b: &x [c]", "line 2: anchors (&) are not supported"},
        {"- x\n- &s\n  - 1", "line 2: anchors (&) are not supported"},
        {"a: {k: &v x}", "line 1: anchors (&) are not supported"},
        {"base: &b {x: 1}\nother: *b", "line 1: anchors (&) are not supported"},
        {"base: {x: 1}\nother: *b", "line 2: aliases (*) are not supported"},
        {"a: [x, *y]", "line 1: aliases (*) are not supported"},
        {"*a : b", "line 1: aliases (*) are not supported"},
        {"a: {b: c}\n<<: *base", "line 2: aliases (*) are not supported"},
        {"a: *", "line 1: aliases (*) are not supported"},
        {"a: &", "line 1: anchors (&) are not supported"},
        {"a: !!map {}", "line 1: tags (!) are not supported"},
        {"- !!int 1", "line 1: tags (!) are not supported"},
        {"a: !custom x", "line 1: tags (!) are not supported"},
        {"a: !<tag:yaml.org,2002:str> x", "line 1: tags (!) are not supported"},
        {"%TAG ! tag:example.com,2000:\n---\na: b", "line 1: directives (%) are not supported"},
};

static const struct bad documents[] = {
        {"a: 1\n---\nb: 2\n", "line 2: multiple documents are not supported"},
        {"---\na: 1\n---\nb: 2\n", "line 3: multiple documents are not supported"},
        {"--- # one\n- a\n--- # two\n- b\n", "line 3: multiple documents are not supported"},
        {"a: 1\n---\n", "line 2: multiple documents are not supported"},
        {"a: 1\n...\n---\nb: 2", "line 2: document end markers (...) are not supported"},
        {"{\"a\": 1}\n---\n{\"b\": 2}", "line 2: unexpected text after the JSON document"},
};

/* What libyaml reads differently from the hand-written parser it replaced, and its messages
 * in the subset's words. */
static const struct bad encodings_and_escapes[] = {
        {"a: b\n\xff: c", "line 2: invalid leading UTF-8 octet"},
        {"a: \xc3\xa9\xc2\x80", "line 1: control character U+0080 is not allowed"},
        {"a: b\xc2\x85"
         "c",
         "line 1: line break U+0085 is not allowed"},
        {"a: b\n\xe2\x80\xa8", "line 2: line break U+2028 is not allowed"},
        {"a: \"\\x4g\"", "line 1: invalid \\x escape (2 hex digits expected)"},
        {"a: \"\\U0011FFFF\"", "line 1: invalid \\U escape (beyond U+10FFFF)"},
        {"a: \"\\x00\"", "line 1: NUL characters are not supported"},
        {"a: \"\\0\"", "line 1: NUL characters are not supported"},
        {"\xc3\xa9: \"x\\q\"", "line 1: unsupported escape in double-quoted string"},
        {"[a]: b", "line 1: complex keys (?) are not supported"},
        {"? [a]\n: b", "line 1: complex keys (?) are not supported"},
        {": x", "line 1: expected \"key: value\""},
        {"a: [b,\n  \"c]", "line 1: unclosed flow collection (they must end on the same line)"},
        {"a: [b,\n  {c: d, c: e}]",
         "line 1: unclosed flow collection (they must end on the same line)"},
        {"a: b\n\n  c", "line 3: unexpected indentation (multi-line values are not supported)"},
        {"- a\n\n  b\n  c", "line 3: multi-line values are not supported"},
};

static void test_anchors_and_tags(void)
{
    check_refusals("anchor", anchors_and_tags, ELEMENTSOF(anchors_and_tags));
}

static void test_documents(void)
{
    check_refusals("document", documents, ELEMENTSOF(documents));
}

static void test_encodings_and_escapes(void)
{
    check_refusals("encoding", encodings_and_escapes, ELEMENTSOF(encodings_and_escapes));
    struct err err = {0};
    char *json = parse_to_json("a: \"\\x41\\t\\U0001F600\"\nb: caf\xc3\xa9", &err);
    CU_ASSERT_STRING_EQUAL(err.msg, "");
    CU_ASSERT_PTR_NOT_NULL(json);
    if (json)
        CU_ASSERT_STRING_EQUAL(json, "{\"a\":\"A\\t\xf0\x9f\x98\x80\",\"b\":\"caf\xc3\xa9\"}");
    free(json);
}

/* Two kubeconfigs written one after the other (cat a b) are refused at the second. */
static void test_concatenated_kubeconfigs(void)
{
    const char *one = "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
                      "contexts:\n- name: a\n  context: {cluster: a}\n"
                      "clusters:\n- name: a\n  cluster:\n    server: https://a\n";
    char *two = NULL;
    CU_ASSERT(asprintf(&two, "%s---\n%s", one, one) > 0);
    if (!two)
        return;
    cJSON *root = NULL;
    struct err err = {0};
    CU_ASSERT_EQUAL(yaml_parse(two, strlen(two), &root, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.msg, "line 11: multiple documents are not supported");
    CU_ASSERT_PTR_NULL(root);
    free(two);
}

/* `levels` nested block mappings whose innermost value is `value`. */
static char *nested_value(int levels, const char *value)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    for (int i = 0; i < levels; i++)
        buf_printf(&b, "%*sk%d:\n", 2 * i, "", i);
    buf_printf(&b, "%*s%s\n", 2 * levels, "", value);
    return buf_take(&b);
}

static int parse_nested(int levels, const char *value, struct err *err)
{
    char *doc = nested_value(levels, value);
    cJSON *root = NULL;
    int r = yaml_parse(doc, strlen(doc), &root, err);
    cJSON_Delete(root);
    free(doc);
    return r;
}

/* Block and flow levels add up to the same cap. */
static void test_depth_mixed(void)
{
    struct err err = {0};
    CU_ASSERT_EQUAL(parse_nested(YAML_MAX_DEPTH - 1, "[x]", &err), 0);
    CU_ASSERT_EQUAL(parse_nested(YAML_MAX_DEPTH - 2, "- {a: x}", &err), 0);
    CU_ASSERT_STRING_EQUAL(err.msg, "");
    CU_ASSERT_EQUAL(parse_nested(YAML_MAX_DEPTH - 1, "[[x]]", &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.msg, "line 64: nesting deeper than 64 levels");
    CU_ASSERT_EQUAL(parse_nested(YAML_MAX_DEPTH - 2, "- {a: [x]}", &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.msg, "line 63: nesting deeper than 64 levels");
}

/* The length alone is refused: a 2 GiB mapping that is never read (reading it would say
 * "control character 0x00"). */
static void test_size_bound(void)
{
    size_t len = (size_t)INT_MAX + 1;
    void *big = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CU_ASSERT(big != MAP_FAILED);
    if (big == MAP_FAILED)
        return;
    cJSON *root = NULL;
    struct err err = {0};
    CU_ASSERT_EQUAL(yaml_parse(big, len, &root, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.msg, "line 1: document too large");
    CU_ASSERT_PTR_NULL(root);
    munmap(big, len);
}

/* A document larger than libyaml's buffers, with non-ASCII text before the end: values,
 * lines and positions stay right across the buffer refills. */
static void test_large_document(void)
{
    struct buf b;
    buf_init(&b, 4 << 20);
    buf_adds(&b, "users:\n");
    for (int i = 0; i < 20000; i++)
        buf_printf(&b, "- name: us\xc3\xa9r-%d\n  user: {token: \"t\\u00e9-%d\"}\n", i, i);
    char *ok = buf_take(&b);
    cJSON *root = NULL;
    struct err err = {0};
    CU_ASSERT_EQUAL(yaml_parse(ok, strlen(ok), &root, &err), 0);
    const cJSON *users = cJSON_GetObjectItemCaseSensitive(root, "users");
    CU_ASSERT_EQUAL(cJSON_GetArraySize(users), 20000);
    const cJSON *last = cJSON_GetArrayItem(users, 19999);
    const cJSON *token = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(last, "user"), "token");
    CU_ASSERT(cJSON_IsString(token) && strcmp(token->valuestring, "t\xc3\xa9-19999") == 0);
    cJSON_Delete(root);
    root = NULL;
    char *bad = NULL;
    CU_ASSERT(asprintf(&bad, "%sx: @y\n", ok) > 0);
    CU_ASSERT_EQUAL(yaml_parse(bad, strlen(bad), &root, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.msg,
                           "line 40002: a plain value cannot start with %, @ or ` (quote it)");
    free(bad);
    free(ok);
}

static CU_TestInfo tests[] = {
        {"accepts the kubeconfig subset", test_accepts},
        {"refuses the rest with line numbers", test_refuses},
        {"caps the depth", test_depth_cap},
        {"depth bomb is bounded", test_depth_bomb_is_fast_and_bounded},
        {"kubectl layout", test_kubectl_layout},
        {"contract edges", test_contract_edges},
        {"anchors, aliases, tags and directives are refused", test_anchors_and_tags},
        {"one document only", test_documents},
        {"encodings and escapes", test_encodings_and_escapes},
        {"concatenated kubeconfigs are refused", test_concatenated_kubeconfigs},
        {"block and flow levels share the depth cap", test_depth_mixed},
        {"the size bound is checked before reading", test_size_bound},
        {"a document larger than libyaml's buffers", test_large_document},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo yaml_suites[] = {
        {"yaml", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
