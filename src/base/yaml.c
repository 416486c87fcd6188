/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/yaml.c - the YAML subset of kubeconfig files, parsed into cJSON. See yaml.h.
 *
 * Works on lines: the text is split into lines (indentation measured, blank and comment lines
 * dropped), block nodes are parsed by indentation with a recursive descent whose depth is
 * capped at YAML_MAX_DEPTH, and scalars and one-line flow collections are read through a
 * cursor over one line. A document starting with '{' goes to cJSON's JSON parser (after a
 * depth check, so cJSON never recurses deeper than we do). Scratch copies of scalars are wiped
 * before they are freed, since kubeconfigs hold keys. Pure: no I/O, no logging.
 */
#include "base/yaml.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/err.h"

struct line {
    const char *s; /* content after the indentation, trailing blanks removed; never empty */
    size_t len;
    size_t indent;
    int no; /* 1-based line number */
};

struct parser {
    struct line *lines;
    size_t n;
    size_t cur;      /* the next line to parse */
    bool seen_start; /* a "---" line was seen */
    char *err;
    bool nomem;
};

/* A position within one line. */
struct cur {
    const char *s;
    size_t len;
    size_t pos;
    int no;
};

static cJSON *parse_node(struct parser *p, int depth);
static cJSON *flow_node(struct parser *p, struct cur *c, int depth, bool in_flow);

static void *fail(struct parser *p, int no, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/*
 * Records the first error as "line N: ..." and returns NULL. (vasprintf, not vsnprintf: the
 * valist checker of clang-tidy 14 misreports vsnprintf in all but the first file it checks.)
 */
static void *fail(struct parser *p, int no, const char *fmt, ...)
{
    char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    if (!p->err && !p->nomem && (!msg || asprintf(&p->err, "line %d: %s", no, msg) < 0)) {
        p->err = NULL;
        p->nomem = true;
    }
    free(msg);
    return NULL;
}

static void *oom(struct parser *p)
{
    p->nomem = true;
    return NULL;
}

static void free_wiped(char *s, size_t n)
{
    if (!s)
        return;
    explicit_bzero(s, n);
    free(s);
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static bool is_flow_indicator(char c)
{
    return c == ',' || c == '[' || c == ']' || c == '{' || c == '}';
}

/* Bytes YAML does not allow in a stream (C0 controls other than tab, and DEL). */
static bool is_forbidden(char c)
{
    return ((unsigned char)c < 0x20 && c != '\t') || c == 0x7f;
}

/* --- lines ------------------------------------------------------------------------------- */

/* Fills `l` from one raw line; returns 0 (content), 1 (blank or comment) or -EINVAL. */
static int scan_line(struct parser *p, const char *s, size_t len, int no, struct line *l)
{
    if (len > 0 && s[len - 1] == '\r')
        len--;
    for (size_t i = 0; i < len; i++)
        if (is_forbidden(s[i])) {
            fail(p, no, "control character 0x%02x is not allowed", (unsigned char)s[i]);
            return -EINVAL;
        }
    size_t first = 0;
    while (first < len && is_blank(s[first]))
        first++;
    if (first == len || s[first] == '#')
        return 1;
    size_t indent = 0;
    while (s[indent] == ' ')
        indent++;
    if (indent < first) {
        fail(p, no, "tabs are not allowed for indentation");
        return -EINVAL;
    }
    while (is_blank(s[len - 1]))
        len--;
    *l = (struct line){.s = s + indent, .len = len - indent, .indent = indent, .no = no};
    return 0;
}

/* Whether `l` is the document marker `m` ("---" or "..."), alone or before a comment. */
static bool is_marker(const struct line *l, const char *m)
{
    return l->indent == 0 && l->len >= 3 && memcmp(l->s, m, 3) == 0 &&
           (l->len == 3 || is_blank(l->s[3]));
}

static int marker_line(struct parser *p, const struct line *l)
{
    size_t i = 3;
    while (i < l->len && is_blank(l->s[i]))
        i++;
    if (l->s[0] == '.')
        fail(p, l->no, "document end markers (...) are not supported");
    else if (p->n > 0 || p->seen_start)
        fail(p, l->no, "multiple documents are not supported");
    else if (i < l->len && l->s[i] != '#')
        fail(p, l->no, "content after \"---\" is not supported");
    p->seen_start = true;
    return p->err ? -EINVAL : 0;
}

static int add_line(struct parser *p, const char *s, size_t len, int no)
{
    struct line l;
    int r = scan_line(p, s, len, no, &l);
    if (r != 0)
        return r < 0 ? r : 0;
    if (is_marker(&l, "---") || is_marker(&l, "..."))
        return marker_line(p, &l);
    if (l.indent == 0 && l.s[0] == '%') {
        fail(p, no, "directives (%%) are not supported");
        return -EINVAL;
    }
    p->lines[p->n++] = l;
    return 0;
}

static int split_lines(struct parser *p, const char *text, size_t len)
{
    size_t max = 1;
    for (size_t i = 0; i < len; i++)
        max += text[i] == '\n';
    p->lines = calloc(max, sizeof(*p->lines));
    if (!p->lines)
        return -ENOMEM;
    const char *s = text, *end = text + len;
    for (int no = 1; s < end; no++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        int r = add_line(p, s, n, no);
        if (r < 0)
            return r;
        s = nl ? nl + 1 : end;
    }
    return 0;
}

static struct line *peek(struct parser *p)
{
    return p->cur < p->n ? &p->lines[p->cur] : NULL;
}

static bool is_seq_item(const struct line *l)
{
    return l->s[0] == '-' && (l->len == 1 || is_blank(l->s[1]));
}

static struct cur line_cur(const struct line *l)
{
    return (struct cur){.s = l->s, .len = l->len, .pos = 0, .no = l->no};
}

/* --- scalars ----------------------------------------------------------------------------- */

static bool at_end(const struct cur *c)
{
    return c->pos >= c->len;
}

/* Skips blanks, and a comment that follows them (which ends the line). */
static void skip_space(struct cur *c)
{
    while (!at_end(c) && is_blank(c->s[c->pos]))
        c->pos++;
    if (!at_end(c) && c->s[c->pos] == '#' && (c->pos == 0 || is_blank(c->s[c->pos - 1])))
        c->pos = c->len;
}

static bool is_colon_at(const struct cur *c, size_t i, bool in_flow)
{
    if (i >= c->len || c->s[i] != ':')
        return false;
    return i + 1 == c->len || is_blank(c->s[i + 1]) || (in_flow && is_flow_indicator(c->s[i + 1]));
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The value of 4 hex digits at `i`, or -1. */
static long hex4(const struct cur *c, size_t i)
{
    long v = 0;
    if (i + 4 > c->len)
        return -1;
    for (size_t k = i; k < i + 4; k++) {
        int d = hex_digit(c->s[k]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t utf8_put(long cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* "\uXXXX" (a surrogate pair as two escapes); `*i` is at the first hex digit. */
static const char *unescape_u(const struct cur *c, size_t *i, char *out, size_t *n)
{
    long cp = hex4(c, *i);
    if (cp < 0)
        return "invalid \\u escape (4 hex digits expected)";
    *i += 4;
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return "unpaired surrogate in \\u escape";
    if (cp >= 0xd800 && cp <= 0xdbff) {
        bool pair = *i + 1 < c->len && c->s[*i] == '\\' && c->s[*i + 1] == 'u';
        long lo = pair ? hex4(c, *i + 2) : -1;
        if (lo < 0xdc00 || lo > 0xdfff)
            return "unpaired surrogate in \\u escape";
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        *i += 6;
    }
    if (cp == 0)
        return "NUL characters are not supported";
    *n += utf8_put(cp, out + *n);
    return NULL;
}

/* One escape of a double-quoted scalar; `*i` is just past the backslash. */
static const char *unescape(const struct cur *c, size_t *i, char *out, size_t *n)
{
    static const char from[] = "\"\\/ntrbf";
    static const char to[] = "\"\\/\n\t\r\b\f";
    if (*i >= c->len)
        return "unclosed quote (multi-line quoted strings are not supported)";
    char e = c->s[(*i)++];
    if (e == 'u')
        return unescape_u(c, i, out, n);
    const char *hit = memchr(from, e, sizeof(from) - 1);
    if (!hit)
        return "unsupported escape in double-quoted string";
    out[(*n)++] = to[hit - from];
    return NULL;
}

static const char *unquote_double(const struct cur *c, size_t *i, char *out, size_t *n)
{
    while (*i < c->len) {
        char ch = c->s[(*i)++];
        if (ch == '"')
            return NULL;
        if (ch != '\\') {
            out[(*n)++] = ch;
            continue;
        }
        const char *err = unescape(c, i, out, n);
        if (err)
            return err;
    }
    return "unclosed quote (multi-line quoted strings are not supported)";
}

static const char *unquote_single(const struct cur *c, size_t *i, char *out, size_t *n)
{
    while (*i < c->len) {
        char ch = c->s[(*i)++];
        if (ch != '\'') {
            out[(*n)++] = ch;
            continue;
        }
        if (*i >= c->len || c->s[*i] != '\'')
            return NULL;
        out[(*n)++] = '\'';
        (*i)++;
    }
    return "unclosed quote (multi-line quoted strings are not supported)";
}

/* Reads the quoted scalar at the cursor into a malloc'd string and moves past it. */
static char *read_quoted(struct parser *p, struct cur *c, size_t *ret_len)
{
    size_t alloc = c->len - c->pos + 1; /* the decoded text is never longer */
    char *out = malloc(alloc);
    if (!out)
        return oom(p);
    size_t i = c->pos + 1, n = 0;
    const char *err =
            c->s[c->pos] == '"' ? unquote_double(c, &i, out, &n) : unquote_single(c, &i, out, &n);
    if (err) {
        free_wiped(out, alloc);
        return fail(p, c->no, "%s", err);
    }
    out[n] = '\0';
    c->pos = i;
    *ret_len = alloc;
    return out;
}

static cJSON *quoted_node(struct parser *p, struct cur *c)
{
    size_t alloc = 0;
    char *s = read_quoted(p, c, &alloc);
    if (!s)
        return NULL;
    cJSON *v = cJSON_CreateString(s);
    free_wiped(s, alloc);
    return v ? v : oom(p);
}

/* Why a plain scalar cannot start at the cursor, or NULL. */
static const char *bad_plain_start(const struct cur *c)
{
    char ch = c->s[c->pos];
    bool alone = c->pos + 1 == c->len || is_blank(c->s[c->pos + 1]);
    if (ch == '&')
        return "anchors (&) are not supported";
    if (ch == '*')
        return "aliases (*) are not supported";
    if (ch == '!')
        return "tags (!) are not supported";
    if (ch == '|' || ch == '>')
        return "block scalars (| and >) are not supported";
    if (ch == '%' || ch == '@' || ch == '`')
        return "a plain value cannot start with %, @ or ` (quote it)";
    if (ch == '?' && alone)
        return "complex keys (?) are not supported";
    if (ch == '-' && alone)
        return "a sequence cannot start on the line of its key";
    if (ch == ',' || ch == ']' || ch == '}')
        return "unexpected flow indicator";
    return NULL;
}

/*
 * Scans the plain scalar at the cursor: returns its length without trailing blanks, and in
 * `*stop` where it ended (a comment, ": ", in flow context also ",[]{}", or the line's end).
 */
static size_t plain_scan(const struct cur *c, bool in_flow, size_t *stop)
{
    size_t i = c->pos, end = c->pos;
    for (; i < c->len; i++) {
        char ch = c->s[i];
        if (ch == '#' && i > c->pos && is_blank(c->s[i - 1]))
            break;
        if ((in_flow && is_flow_indicator(ch)) || is_colon_at(c, i, in_flow))
            break;
        if (!is_blank(ch))
            end = i + 1;
    }
    *stop = i;
    return end - c->pos;
}

static bool word_is(const char *s, size_t n, const char *w1, const char *w2, const char *w3)
{
    return (n == strlen(w1) && memcmp(s, w1, n) == 0) ||
           (n == strlen(w2) && memcmp(s, w2, n) == 0) || (n == strlen(w3) && memcmp(s, w3, n) == 0);
}

/* A plain scalar's value: true/false/null (YAML 1.2 core spellings) or a string. */
static cJSON *plain_value(struct parser *p, const char *s, size_t n)
{
    cJSON *v;
    if (word_is(s, n, "true", "True", "TRUE"))
        v = cJSON_CreateTrue();
    else if (word_is(s, n, "false", "False", "FALSE"))
        v = cJSON_CreateFalse();
    else if (word_is(s, n, "null", "Null", "NULL") || (n == 1 && s[0] == '~'))
        v = cJSON_CreateNull();
    else {
        char *copy = strndup(s, n);
        if (!copy)
            return oom(p);
        v = cJSON_CreateString(copy);
        free_wiped(copy, n);
    }
    return v ? v : oom(p);
}

static cJSON *plain_node(struct parser *p, struct cur *c, bool in_flow)
{
    const char *why = bad_plain_start(c);
    if (why)
        return fail(p, c->no, "%s", why);
    size_t stop;
    size_t n = plain_scan(c, in_flow, &stop);
    if (!in_flow && is_colon_at(c, stop, false))
        return fail(p, c->no, "\": \" is not allowed in a plain value (quote the value)");
    if (n == 0)
        return fail(p, c->no, "expected a value");
    const char *s = c->s + c->pos;
    c->pos += n;
    return plain_value(p, s, n);
}

/* --- flow collections (one line) --------------------------------------------------------- */

static int add_pair(struct parser *p, cJSON *obj, const char *key, cJSON *v, int no)
{
    if (cJSON_GetObjectItemCaseSensitive(obj, key)) {
        cJSON_Delete(v);
        fail(p, no, "duplicate key \"%.64s\"", key);
        return -EINVAL;
    }
    if (!cJSON_AddItemToObject(obj, key, v)) {
        cJSON_Delete(v);
        oom(p);
        return -ENOMEM;
    }
    return 0;
}

static int add_item(struct parser *p, cJSON *seq, cJSON *v)
{
    if (!v)
        return -EINVAL;
    if (!cJSON_AddItemToArray(seq, v)) {
        cJSON_Delete(v);
        oom(p);
        return -ENOMEM;
    }
    return 0;
}

/* After an entry of a flow collection: ',' or the closing `close`. Returns 1 when closed. */
static int flow_next(struct parser *p, struct cur *c, char close)
{
    skip_space(c);
    if (at_end(c)) {
        fail(p, c->no, "unclosed flow collection (they must end on the same line)");
        return -EINVAL;
    }
    char ch = c->s[c->pos++];
    if (ch == close)
        return 1;
    if (ch == ',')
        return 0;
    fail(p, c->no, "expected ',' or '%c' in a flow collection", close);
    return -EINVAL;
}

/* Skips to the next entry; returns 1 if the collection closes there instead. */
static int flow_entry_start(struct parser *p, struct cur *c, char close)
{
    skip_space(c);
    if (at_end(c)) {
        fail(p, c->no, "unclosed flow collection (they must end on the same line)");
        return -EINVAL;
    }
    if (c->s[c->pos] != close)
        return 0;
    c->pos++;
    return 1;
}

static cJSON *flow_seq(struct parser *p, struct cur *c, int depth)
{
    cJSON *seq = cJSON_CreateArray();
    if (!seq)
        return oom(p);
    c->pos++;
    int r = flow_entry_start(p, c, ']');
    while (r == 0) {
        r = add_item(p, seq, flow_node(p, c, depth + 1, true));
        r = r < 0 ? r : flow_next(p, c, ']');
        r = r != 0 ? r : flow_entry_start(p, c, ']');
    }
    if (r < 0) {
        cJSON_Delete(seq);
        return NULL;
    }
    return seq;
}

/* The key of a flow mapping entry, up to and past its ':'. */
static char *flow_key(struct parser *p, struct cur *c, size_t *ret_alloc)
{
    char *key;
    if (c->s[c->pos] == '"' || c->s[c->pos] == '\'') {
        key = read_quoted(p, c, ret_alloc);
    } else {
        size_t stop, n = plain_scan(c, true, &stop);
        const char *why = bad_plain_start(c);
        if (why || n == 0)
            return fail(p, c->no, "%s", why ? why : "expected a key in a flow mapping");
        key = strndup(c->s + c->pos, n);
        c->pos += n;
        *ret_alloc = n + 1;
    }
    if (!key)
        return p->err ? NULL : oom(p);
    skip_space(c);
    if (at_end(c) || c->s[c->pos] != ':') {
        free_wiped(key, *ret_alloc);
        return fail(p, c->no, "expected ':' after a key in a flow mapping");
    }
    c->pos++;
    return key;
}

/* One "key: value" of a flow mapping; a missing value is null. */
static int flow_pair(struct parser *p, struct cur *c, cJSON *map, int depth)
{
    size_t alloc = 0;
    char *key = flow_key(p, c, &alloc);
    if (!key)
        return -EINVAL;
    skip_space(c);
    cJSON *v;
    if (!at_end(c) && (c->s[c->pos] == ',' || c->s[c->pos] == '}'))
        v = cJSON_CreateNull();
    else
        v = flow_node(p, c, depth + 1, true);
    int r = v ? add_pair(p, map, key, v, c->no) : -EINVAL;
    if (!v && !p->err)
        oom(p);
    free_wiped(key, alloc);
    return r;
}

static cJSON *flow_map(struct parser *p, struct cur *c, int depth)
{
    cJSON *map = cJSON_CreateObject();
    if (!map)
        return oom(p);
    c->pos++;
    int r = flow_entry_start(p, c, '}');
    while (r == 0) {
        r = flow_pair(p, c, map, depth);
        r = r < 0 ? r : flow_next(p, c, '}');
        r = r != 0 ? r : flow_entry_start(p, c, '}');
    }
    if (r < 0) {
        cJSON_Delete(map);
        return NULL;
    }
    return map;
}

/* A node within one line: a flow collection, a quoted or a plain scalar. */
static cJSON *flow_node(struct parser *p, struct cur *c, int depth, bool in_flow)
{
    if (at_end(c))
        return fail(p, c->no, "unclosed flow collection (they must end on the same line)");
    bool collection = c->s[c->pos] == '[' || c->s[c->pos] == '{';
    if (collection && depth > YAML_MAX_DEPTH)
        return fail(p, c->no, "nesting deeper than %d levels", YAML_MAX_DEPTH);
    switch (c->s[c->pos]) {
    case '[':
        return flow_seq(p, c, depth);
    case '{':
        return flow_map(p, c, depth);
    case '"':
    case '\'':
        return quoted_node(p, c);
    default:
        return plain_node(p, c, in_flow);
    }
}

/* A value that fills the rest of its line (after which only a comment may follow). */
static cJSON *inline_value(struct parser *p, struct cur *c, int depth)
{
    cJSON *v = flow_node(p, c, depth, false);
    if (!v)
        return NULL;
    skip_space(c);
    if (!at_end(c)) {
        cJSON_Delete(v);
        return fail(p, c->no, "unexpected text after the value");
    }
    return v;
}

/* --- block collections ------------------------------------------------------------------- */

/*
 * If the cursor is at "key:" (a plain or quoted key, then ':' before a blank or the line's
 * end), stores the key, moves past the ':' and returns 1. Returns 0 if it is no key, or
 * a negative errno.
 */
static int read_key(struct parser *p, struct cur *c, char **ret_key, size_t *ret_alloc)
{
    struct cur t = *c;
    char *key;
    size_t alloc = 0;
    if (t.s[t.pos] == '"' || t.s[t.pos] == '\'') {
        key = read_quoted(p, &t, &alloc);
        if (!key)
            return p->nomem ? -ENOMEM : -EINVAL;
        while (!at_end(&t) && is_blank(t.s[t.pos]))
            t.pos++;
    } else {
        size_t stop, n = plain_scan(&t, false, &stop);
        char first = t.s[t.pos];
        if (n == 0 || bad_plain_start(&t) || first == '[' || first == '{')
            return 0;
        key = strndup(t.s + t.pos, n);
        if (!key) {
            oom(p);
            return -ENOMEM;
        }
        alloc = n + 1;
        t.pos = stop;
    }
    if (!is_colon_at(&t, t.pos, false)) {
        free_wiped(key, alloc);
        return 0;
    }
    t.pos++;
    *c = t;
    *ret_key = key;
    *ret_alloc = alloc;
    return 1;
}

/* The value of a block mapping entry whose key (at `indent`) ended at the cursor. */
static cJSON *map_value(struct parser *p, struct cur *c, size_t indent, int depth)
{
    p->cur++;
    skip_space(c);
    if (!at_end(c))
        return inline_value(p, c, depth + 1);
    const struct line *next = peek(p);
    if (next && (next->indent > indent || (next->indent == indent && is_seq_item(next))))
        return parse_node(p, depth + 1);
    cJSON *v = cJSON_CreateNull();
    return v ? v : oom(p);
}

static int map_entry(struct parser *p, cJSON *map, size_t indent, int depth)
{
    const struct line *l = peek(p);
    if (l->indent > indent) {
        fail(p, l->no, "unexpected indentation (multi-line values are not supported)");
        return -EINVAL;
    }
    if (is_seq_item(l)) {
        fail(p, l->no, "a sequence item where a mapping key was expected");
        return -EINVAL;
    }
    struct cur c = line_cur(l);
    char *key = NULL;
    size_t alloc = 0;
    int r = read_key(p, &c, &key, &alloc);
    if (r == 0)
        fail(p, l->no, "expected \"key: value\"");
    if (r <= 0)
        return r < 0 ? r : -EINVAL;
    cJSON *v = map_value(p, &c, indent, depth);
    r = v ? add_pair(p, map, key, v, l->no) : -EINVAL;
    free_wiped(key, alloc);
    return r;
}

static cJSON *parse_map(struct parser *p, size_t indent, int depth)
{
    cJSON *map = cJSON_CreateObject();
    if (!map)
        return oom(p);
    for (const struct line *l = peek(p); l && l->indent >= indent; l = peek(p)) {
        if (map_entry(p, map, indent, depth) < 0) {
            cJSON_Delete(map);
            return NULL;
        }
    }
    return map;
}

/* One "- ..." item; its content continues as a node indented past the dash. */
static cJSON *seq_item(struct parser *p, struct line *l, int depth)
{
    size_t off = 1;
    while (off < l->len && l->s[off] == ' ')
        off++;
    if (off < l->len && l->s[off] == '\t')
        return fail(p, l->no, "tabs are not allowed for indentation");
    if (off < l->len && l->s[off] != '#') {
        l->s += off;
        l->len -= off;
        l->indent += off;
        return parse_node(p, depth + 1);
    }
    p->cur++;
    const struct line *next = peek(p);
    if (next && next->indent > l->indent)
        return parse_node(p, depth + 1);
    cJSON *v = cJSON_CreateNull();
    return v ? v : oom(p);
}

static cJSON *parse_seq(struct parser *p, size_t indent, int depth)
{
    cJSON *seq = cJSON_CreateArray();
    if (!seq)
        return oom(p);
    for (struct line *l = peek(p); l && l->indent >= indent; l = peek(p)) {
        if (l->indent > indent) {
            fail(p, l->no, "unexpected indentation (multi-line values are not supported)");
            break;
        }
        if (!is_seq_item(l))
            break; /* the next key of a mapping at the same indentation */
        if (add_item(p, seq, seq_item(p, l, depth)) < 0)
            break;
    }
    if (p->err || p->nomem) {
        cJSON_Delete(seq);
        return NULL;
    }
    return seq;
}

/* A scalar or flow collection alone on its line. */
static cJSON *scalar_line(struct parser *p, int depth)
{
    const struct line *l = &p->lines[p->cur++];
    struct cur c = line_cur(l);
    cJSON *v = inline_value(p, &c, depth);
    const struct line *next = peek(p);
    if (v && next && next->indent >= l->indent) {
        cJSON_Delete(v);
        return fail(p, next->no, "multi-line values are not supported");
    }
    return v;
}

/* The block node starting at the current line: a sequence, a mapping or a scalar. */
static cJSON *parse_node(struct parser *p, int depth)
{
    const struct line *l = peek(p);
    bool seq = is_seq_item(l);
    struct cur c = line_cur(l);
    char *key = NULL;
    size_t alloc = 0;
    int r = seq ? 1 : read_key(p, &c, &key, &alloc);
    free_wiped(key, alloc);
    if (r < 0)
        return NULL;
    if (r == 0)
        return scalar_line(p, depth);
    if (depth > YAML_MAX_DEPTH)
        return fail(p, l->no, "nesting deeper than %d levels", YAML_MAX_DEPTH);
    return seq ? parse_seq(p, l->indent, depth) : parse_map(p, l->indent, depth);
}

static cJSON *parse_yaml(struct parser *p, const char *text, size_t len)
{
    int r = split_lines(p, text, len);
    if (r < 0)
        return r == -ENOMEM ? oom(p) : NULL;
    if (p->n == 0) {
        cJSON *v = cJSON_CreateNull();
        return v ? v : oom(p);
    }
    cJSON *root = parse_node(p, 1);
    const struct line *left = peek(p);
    if (root && left) {
        cJSON_Delete(root);
        return fail(p, left->no, "unexpected line (check the indentation)");
    }
    return root;
}

/* --- JSON -------------------------------------------------------------------------------- */

static bool is_json_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int line_at(const char *text, size_t off)
{
    int no = 1;
    for (size_t i = 0; i < off; i++)
        no += text[i] == '\n';
    return no;
}

/* The offset where JSON nesting first exceeds YAML_MAX_DEPTH, or `len`. */
static size_t json_too_deep(const char *text, size_t len)
{
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (in_string && ch == '\\')
            i++;
        else if (ch == '"')
            in_string = !in_string;
        else if (!in_string && (ch == '{' || ch == '['))
            depth++;
        else if (!in_string && (ch == '}' || ch == ']'))
            depth--;
        if (depth > YAML_MAX_DEPTH)
            return i;
    }
    return len;
}

static cJSON *parse_json(struct parser *p, const char *text, size_t len)
{
    size_t deep = json_too_deep(text, len);
    if (deep < len)
        return fail(p, line_at(text, deep), "nesting deeper than %d levels", YAML_MAX_DEPTH);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    size_t off = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
    if (!root)
        return fail(p, line_at(text, off), "invalid JSON");
    while (off < len && is_json_space(text[off]))
        off++;
    if (off < len) {
        cJSON_Delete(root);
        return fail(p, line_at(text, off), "unexpected text after the JSON document");
    }
    return root;
}

static bool starts_json(const char *text, size_t len)
{
    size_t i = 0;
    while (i < len && is_json_space(text[i]))
        i++;
    return i < len && text[i] == '{';
}

/* --- entry point ------------------------------------------------------------------------- */

static cJSON *parse(struct parser *p, const char *text, size_t len)
{
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
        text += 3;
        len -= 3;
    }
    if (len > INT_MAX)
        return fail(p, 1, "document too large");
    if (starts_json(text, len))
        return parse_json(p, text, len);
    return parse_yaml(p, text, len);
}

int yaml_parse(const char *text, size_t len, struct cJSON **ret, struct err *ret_err)
{
    struct parser p = {0};
    cJSON *root = parse(&p, text ? text : "", text ? len : 0);
    free(p.lines);
    if (root) {
        free(p.err);
        *ret = root;
        return 0;
    }
    int r = p.nomem || !p.err ? -ENOMEM : -EINVAL;
    err_set(ret_err, r, "%s", p.err ? p.err : "out of memory");
    free(p.err);
    return r;
}
