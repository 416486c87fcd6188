/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/yaml.c - the YAML subset of kubeconfig files, parsed by libyaml into cJSON. See yaml.h.
 *
 * The one file that includes libyaml. A pass over the bytes first refuses what libyaml would
 * take but the subset does not (control characters, a CR outside CRLF, tabs in indentation).
 * libyaml's event parser then drives a recursive walk, capped at YAML_MAX_DEPTH, that builds
 * the tree and refuses anchors, aliases, tags, block and multi-line scalars, flow collections
 * over several lines, complex keys, duplicate keys, directives and more than one document.
 * libyaml's own errors are reworded into the subset's messages, with their line. A document
 * starting with '{' goes to cJSON's JSON parser instead. Scalar values and libyaml's input
 * buffers are wiped before they are freed, since kubeconfigs hold keys (libyaml's scratch
 * strings are not reachable). Pure: no I/O, no logging, never blocks.
 */
#include "base/yaml.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <yaml.h>

#include "base/cleanup.h"
#include "base/err.h"
#include "base/json.h"

#define NO_FLOW        SIZE_MAX
#define TABS           "tabs are not allowed for indentation"
#define UNCLOSED_QUOTE "unclosed quote (multi-line quoted strings are not supported)"
#define UNCLOSED_FLOW  "unclosed flow collection (they must end on the same line)"

struct walker {
    yaml_parser_t parser;
    yaml_event_t ev; /* the current event */
    const char *text;
    size_t len;
    size_t at_index, at_off; /* a mark's index (in characters) and its byte offset */
    size_t flow_line;        /* libyaml's line of the outermost open flow collection, or NO_FLOW */
    struct err *err;
};

static int node(struct walker *w, int depth, cJSON **ret);

static int oom(struct walker *w)
{
    return err_set(w->err, -ENOMEM, "out of memory");
}

static int line_no(yaml_mark_t m)
{
    return m.line < INT_MAX ? (int)m.line + 1 : INT_MAX;
}

static int fail(struct walker *w, yaml_mark_t m, const char *msg)
{
    return err_set(w->err, -EINVAL, "line %d: %s", line_no(m), msg);
}

static bool is(const char *s, const char *want)
{
    return s && strcmp(s, want) == 0;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Whether `c` is one of `set` (never NUL). */
static bool in_set(char c, const char *set)
{
    return c != '\0' && strchr(set, c);
}

/* The 1-based line of byte `off`. */
static int line_at(const char *text, size_t off)
{
    int no = 1;
    for (size_t i = 0; i < off; i++)
        no += text[i] == '\n';
    return no;
}

/* --- bytes ------------------------------------------------------------------------------- */

/* Bytes YAML does not allow in a stream (C0 controls other than tab, and DEL). */
static bool is_forbidden(char c)
{
    return ((unsigned char)c < 0x20 && c != '\t') || c == 0x7f;
}

/* The YAML 1.1 line breaks libyaml honours besides LF and CR: NEL, LS and PS (in UTF-8). */
static const char *other_break(const char *s, size_t n)
{
    if (n >= 2 && memcmp(s, "\xc2\x85", 2) == 0)
        return "U+0085";
    if (n >= 3 && (memcmp(s, "\xe2\x80\xa8", 3) == 0 || memcmp(s, "\xe2\x80\xa9", 3) == 0))
        return s[2] == '\xa8' ? "U+2028" : "U+2029";
    return NULL;
}

/* Control characters and line breaks other than LF and CRLF (so that lines are counted as
 * text editors count them). */
static int check_chars(const char *s, size_t n, int no, struct err *e)
{
    for (size_t i = 0; i < n; i++) {
        if (is_forbidden(s[i]))
            return err_set(e, -EINVAL, "line %d: control character 0x%02x is not allowed", no,
                           (unsigned char)s[i]);
        const char *brk = (unsigned char)s[i] >= 0xc2 ? other_break(s + i, n - i) : NULL;
        if (brk)
            return err_set(e, -EINVAL, "line %d: line break %s is not allowed", no, brk);
    }
    return 0;
}

/* One line (without its '\n'): its characters, and tabs before its content (among the
 * spaces and "-" of its indentation). Blank and comment lines may have tabs. */
static int check_line(const char *s, size_t n, int no, struct err *e)
{
    if (n > 0 && s[n - 1] == '\r')
        n--;
    int r = check_chars(s, n, no, e);
    if (r < 0)
        return r;
    while (n > 0 && is_blank(s[n - 1]))
        n--;
    size_t i = 0;
    bool tab = false;
    while (i < n && is_blank(s[i]))
        tab |= s[i++] == '\t';
    if (i == n || s[i] == '#')
        return 0;
    while (i + 1 < n && s[i] == '-' && is_blank(s[i + 1]))
        for (i++; i < n && is_blank(s[i]); i++)
            tab |= s[i] == '\t';
    return tab ? err_set(e, -EINVAL, "line %d: " TABS, no) : 0;
}

static int check_bytes(const char *text, size_t len, struct err *e)
{
    const char *s = text, *end = text + len;
    for (int no = 1; s < end; no++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        int r = check_line(s, n, no, e);
        if (r < 0)
            return r;
        s = nl ? nl + 1 : end;
    }
    return 0;
}

/* The byte offset of mark `m`. Marks count characters; a cursor walks forward over UTF-8. */
static size_t offset_of(struct walker *w, yaml_mark_t m)
{
    if (m.index < w->at_index)
        w->at_index = w->at_off = 0;
    while (w->at_index < m.index && w->at_off < w->len) {
        w->at_off++;
        while (w->at_off < w->len && ((unsigned char)w->text[w->at_off] & 0xc0) == 0x80)
            w->at_off++;
        w->at_index++;
    }
    return w->at_off;
}

static char char_at(struct walker *w, yaml_mark_t m)
{
    size_t off = offset_of(w, m);
    if (off >= w->len)
        return '\0';
    return w->text[off];
}

/* Whether only blanks precede byte `off` on its line. */
static bool starts_line(const char *text, size_t off)
{
    while (off > 0 && is_blank(text[off - 1]))
        off--;
    return off == 0 || text[off - 1] == '\n';
}

/* --- libyaml's errors, reworded ---------------------------------------------------------- */

static const char *cannot_start(struct walker *w, yaml_mark_t *at)
{
    char c = char_at(w, *at);
    if (c == '\t')
        return TABS;
    if (c == '%' || c == '@' || c == '`')
        return "a plain value cannot start with %, @ or ` (quote it)";
    return NULL;
}

/* The mark is at the backslash; one at the very end leaves the quote open. */
static const char *unknown_escape(struct walker *w, yaml_mark_t *at)
{
    if (offset_of(w, *at) + 1 < w->len)
        return "unsupported escape in double-quoted string";
    *at = w->parser.context_mark;
    return UNCLOSED_QUOTE;
}

/* The mark is at the first hex digit, after the escape's letter. */
static const char *short_hex(struct walker *w, yaml_mark_t *at)
{
    size_t off = offset_of(w, *at);
    if (off > 0 && w->text[off - 1] == 'x')
        return "invalid \\x escape (2 hex digits expected)";
    if (off > 0 && w->text[off - 1] == 'U')
        return "invalid \\U escape (8 hex digits expected)";
    return "invalid \\u escape (4 hex digits expected)";
}

/* libyaml refuses \u escapes of surrogates, paired or not, and \U beyond U+10FFFF. */
static const char *bad_code_point(struct walker *w, yaml_mark_t *at)
{
    size_t off = offset_of(w, *at);
    const char *s = w->text + off;
    if (off == 0 || s[-1] != 'u')
        return "invalid \\U escape (beyond U+10FFFF)";
    bool high = off + 10 <= w->len && in_set(s[0], "dD") && in_set(s[1], "89abAB");
    bool low =
            high && s[4] == '\\' && s[5] == 'u' && in_set(s[6], "dD") && in_set(s[7], "cdefCDEF");
    if (low)
        return "surrogate pairs are not supported (write the character as \\U and 8 hex digits)";
    return "unpaired surrogate in \\u escape";
}

/* "did not find expected key" or "... '-' indicator": a token where the collection ended. */
static const char *unexpected_token(struct walker *w, yaml_mark_t *at)
{
    size_t off = offset_of(w, *at);
    if (off < w->len && !starts_line(w->text, off))
        return "unexpected text after the value";
    if (off < w->len && w->text[off] == ':')
        return "expected \"key: value\"";
    if (!is(w->parser.problem, "did not find expected key"))
        return "unexpected line (check the indentation)";
    bool item = off + 1 < w->len && w->text[off] == '-' && in_set(w->text[off + 1], " \t\r\n");
    return item ? "a sequence item where a mapping key was expected"
                : "unexpected indentation (multi-line values are not supported)";
}

static const char *flow_end(struct walker *w, yaml_mark_t *at, char close)
{
    if (at->line == w->parser.context_mark.line && offset_of(w, *at) < w->len)
        return close == ']' ? "expected ',' or ']' in a flow collection"
                            : "expected ',' or '}' in a flow collection";
    *at = w->parser.context_mark;
    return UNCLOSED_FLOW;
}

static const char *flow_seq_end(struct walker *w, yaml_mark_t *at)
{
    return flow_end(w, at, ']');
}

static const char *flow_map_end(struct walker *w, yaml_mark_t *at)
{
    return flow_end(w, at, '}');
}

static const char *no_content(struct walker *w, yaml_mark_t *at)
{
    char c = char_at(w, *at);
    if (c == ',' || c == ']' || c == '}')
        return "unexpected flow indicator";
    return c == ':' ? "expected a key in a flow mapping" : NULL;
}

/* A plain key without its ':' on the line. */
static const char *no_colon(struct walker *w, yaml_mark_t *at)
{
    *at = w->parser.context_mark;
    return "expected \"key: value\"";
}

static const struct rewording {
    const char *problem;
    const char *msg;
    const char *(*reword)(struct walker *w, yaml_mark_t *at); /* instead of msg; NULL = as is */
} rewordings[] = {
        {"found character that cannot start any token", NULL, cannot_start},
        {"found a tab character that violates indentation", TABS, NULL},
        {"found unknown escape character", NULL, unknown_escape},
        {"did not find expected hexdecimal number", NULL, short_hex},
        {"found invalid Unicode character escape code", NULL, bad_code_point},
        {"mapping values are not allowed in this context",
         "\": \" is not allowed in a plain value (quote the value)", NULL},
        {"block sequence entries are not allowed in this context",
         "a sequence cannot start on the line of its key", NULL},
        {"did not find expected key", NULL, unexpected_token},
        {"did not find expected '-' indicator", NULL, unexpected_token},
        {"did not find expected <document start>", "unexpected line (check the indentation)", NULL},
        {"could not find expected ':'", NULL, no_colon},
        {"did not find expected ',' or ']'", NULL, flow_seq_end},
        {"did not find expected ',' or '}'", NULL, flow_map_end},
        {"did not find expected node content", NULL, no_content},
};

/* Scanning errors inside a construct the subset refuses anyway: said as that refusal, at the
 * construct's mark. */
static const struct {
    const char *context;
    const char *msg;
} refused_contexts[] = {
        {"while scanning a quoted scalar", UNCLOSED_QUOTE},
        {"while scanning an anchor", "anchors (&) are not supported"},
        {"while scanning an alias", "aliases (*) are not supported"},
        {"while scanning a tag", "tags (!) are not supported"},
        {"while scanning a block scalar", "block scalars (| and >) are not supported"},
        {"while scanning a directive", "directives (%) are not supported"},
};

static int reader_error(struct walker *w)
{
    const yaml_parser_t *p = &w->parser;
    int no = line_at(w->text, p->problem_offset < w->len ? p->problem_offset : w->len);
    if (is(p->problem, "control characters are not allowed"))
        return err_set(w->err, -EINVAL, "line %d: control character U+%04X is not allowed", no,
                       (unsigned)p->problem_value);
    return err_set(w->err, -EINVAL, "line %d: %s", no, p->problem ? p->problem : "invalid UTF-8");
}

/* libyaml failed: its problem in the subset's words where they differ. */
static int parser_error(struct walker *w)
{
    const yaml_parser_t *p = &w->parser;
    if (p->error == YAML_MEMORY_ERROR)
        return oom(w);
    if (p->error == YAML_READER_ERROR)
        return reader_error(w);
    yaml_mark_t at = p->problem_mark;
    if (w->flow_line != NO_FLOW && at.line > w->flow_line)
        return fail(w, (yaml_mark_t){.line = w->flow_line}, UNCLOSED_FLOW);
    for (size_t i = 0; i < ELEMENTSOF(refused_contexts); i++)
        if (is(p->context, refused_contexts[i].context))
            return fail(w, p->context_mark, refused_contexts[i].msg);
    for (size_t i = 0; i < ELEMENTSOF(rewordings); i++) {
        const struct rewording *rw = &rewordings[i];
        if (!is(p->problem, rw->problem))
            continue;
        const char *msg = rw->reword ? rw->reword(w, &at) : rw->msg;
        return fail(w, at, msg ? msg : p->problem);
    }
    return fail(w, at, p->problem ? p->problem : "invalid YAML");
}

/* --- events ------------------------------------------------------------------------------ */

static void event_done(yaml_event_t *e)
{
    if (e->type == YAML_SCALAR_EVENT && e->data.scalar.value)
        explicit_bzero(e->data.scalar.value, e->data.scalar.length);
    yaml_event_delete(e);
}

/* Moves to the next event. Inside a flow collection, every event must be on its line. */
static int next(struct walker *w)
{
    event_done(&w->ev);
    if (!yaml_parser_parse(&w->parser, &w->ev))
        return parser_error(w);
    if (w->flow_line != NO_FLOW && w->ev.start_mark.line != w->flow_line)
        return fail(w, (yaml_mark_t){.line = w->flow_line}, UNCLOSED_FLOW);
    return 0;
}

/* Marks the start of a flow collection; returns what to restore at its end. */
static size_t enter_flow(struct walker *w, bool flow)
{
    size_t outer = w->flow_line;
    if (flow && outer == NO_FLOW)
        w->flow_line = w->ev.start_mark.line;
    return outer;
}

/* Refuses aliases, anchors, tags and collections nested too deeply. */
static int check_node(struct walker *w, int depth)
{
    const yaml_event_t *e = &w->ev;
    const yaml_char_t *anchor, *tag;
    if (e->type == YAML_SCALAR_EVENT) {
        anchor = e->data.scalar.anchor;
        tag = e->data.scalar.tag;
    } else if (e->type == YAML_SEQUENCE_START_EVENT) {
        anchor = e->data.sequence_start.anchor;
        tag = e->data.sequence_start.tag;
    } else if (e->type == YAML_MAPPING_START_EVENT) {
        anchor = e->data.mapping_start.anchor;
        tag = e->data.mapping_start.tag;
    } else {
        bool alias = e->type == YAML_ALIAS_EVENT;
        return fail(w, e->start_mark, alias ? "aliases (*) are not supported" : "expected a value");
    }
    if (anchor)
        return fail(w, e->start_mark, "anchors (&) are not supported");
    if (tag)
        return fail(w, e->start_mark, "tags (!) are not supported");
    if (e->type != YAML_SCALAR_EVENT && depth > YAML_MAX_DEPTH)
        return err_set(w->err, -EINVAL, "line %d: nesting deeper than %d levels",
                       line_no(e->start_mark), YAML_MAX_DEPTH);
    return 0;
}

/* --- scalars ----------------------------------------------------------------------------- */

/*
 * A plain scalar that goes on to another line, reported at that line: "unexpected
 * indentation" when it is indented less than the scalar starts (a value after "key:" or "-"
 * whose next line holds something else), else "multi-line values".
 */
static int multi_line(struct walker *w)
{
    const yaml_event_t *e = &w->ev;
    const char *s = w->text + offset_of(w, e->start_mark), *end = w->text + w->len;
    yaml_mark_t at = e->start_mark;
    size_t indent = 0;
    do {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        if (!nl)
            break;
        for (s = nl + 1, indent = 0; s + indent < end && is_blank(s[indent]); indent++)
            ;
        at.line++;
    } while (s + indent < end && in_set(s[indent], "\r\n"));
    return fail(w, at,
                indent < e->start_mark.column
                        ? "unexpected indentation (multi-line values are not supported)"
                        : "multi-line values are not supported");
}

static int check_scalar(struct walker *w)
{
    const yaml_event_t *e = &w->ev;
    yaml_scalar_style_t style = e->data.scalar.style;
    if (style == YAML_LITERAL_SCALAR_STYLE || style == YAML_FOLDED_SCALAR_STYLE)
        return fail(w, e->start_mark, "block scalars (| and >) are not supported");
    if (e->start_mark.line != e->end_mark.line)
        return style == YAML_PLAIN_SCALAR_STYLE ? multi_line(w)
                                                : fail(w, e->start_mark, UNCLOSED_QUOTE);
    if (memchr(e->data.scalar.value, '\0', e->data.scalar.length))
        return fail(w, e->start_mark, "NUL characters are not supported");
    return 0;
}

static bool word_is(const char *s, size_t n, const char *w1, const char *w2, const char *w3)
{
    return (n == strlen(w1) && memcmp(s, w1, n) == 0) ||
           (n == strlen(w2) && memcmp(s, w2, n) == 0) || (n == strlen(w3) && memcmp(s, w3, n) == 0);
}

/* Quoted scalars are strings; plain ones true/false/null (YAML 1.2 core spellings, and empty
 * for null) or strings. */
static cJSON *scalar_value(const yaml_event_t *e)
{
    const char *s = (const char *)e->data.scalar.value;
    size_t n = e->data.scalar.length;
    if (e->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return cJSON_CreateString(s);
    if (word_is(s, n, "true", "True", "TRUE"))
        return cJSON_CreateTrue();
    if (word_is(s, n, "false", "False", "FALSE"))
        return cJSON_CreateFalse();
    if (n == 0 || word_is(s, n, "null", "Null", "NULL") || (n == 1 && s[0] == '~'))
        return cJSON_CreateNull();
    return cJSON_CreateString(s);
}

static int scalar(struct walker *w, cJSON **ret)
{
    int r = check_scalar(w);
    if (r < 0)
        return r;
    cJSON *v = scalar_value(&w->ev);
    if (!v)
        return oom(w);
    *ret = v;
    return 0;
}

/* --- collections ------------------------------------------------------------------------- */

static int sequence(struct walker *w, int depth, cJSON **ret)
{
    _cleanup_json_ cJSON *seq = cJSON_CreateArray();
    if (!seq)
        return oom(w);
    size_t outer = enter_flow(w, w->ev.data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE);
    int r;
    while ((r = next(w)) == 0 && w->ev.type != YAML_SEQUENCE_END_EVENT) {
        _cleanup_json_ cJSON *v = NULL;
        r = node(w, depth + 1, &v);
        if (r == 0 && !cJSON_AddItemToArray(seq, v))
            r = oom(w);
        if (r < 0)
            break;
        TAKE_PTR(v); /* seq's now */
    }
    w->flow_line = outer;
    if (r < 0)
        return r;
    *ret = TAKE_PTR(seq);
    return 0;
}

/* Whether the current event is a key given with "?", whose indicator precedes it. */
static bool is_explicit_key(struct walker *w)
{
    size_t off = offset_of(w, w->ev.start_mark);
    while (off > 0 && is_blank(w->text[off - 1]))
        off--;
    return off > 0 && w->text[off - 1] == '?';
}

/* Takes the current event as a mapping key: a scalar, written "key:" or {key: ...}. */
static int take_key(struct walker *w, bool flow, yaml_event_t *ret)
{
    int r = check_node(w, 0);
    if (r < 0)
        return r;
    if (w->ev.type != YAML_SCALAR_EVENT || is_explicit_key(w))
        return fail(w, w->ev.start_mark, "complex keys (?) are not supported");
    r = check_scalar(w);
    if (r < 0)
        return r;
    if (w->ev.data.scalar.length == 0 && w->ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
        return fail(w, w->ev.start_mark,
                    flow ? "expected a key in a flow mapping" : "expected \"key: value\"");
    *ret = w->ev;
    w->ev = (yaml_event_t){0};
    return 0;
}

/* In a flow mapping, libyaml reads {a} as {a: null}; the subset wants the ':'. */
static bool lacks_colon(struct walker *w, yaml_mark_t key_end)
{
    const yaml_event_t *e = &w->ev;
    if (e->type != YAML_SCALAR_EVENT || e->data.scalar.length > 0 ||
        e->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    size_t from = offset_of(w, key_end), to = offset_of(w, e->start_mark);
    return to <= from || !memchr(w->text + from, ':', to - from);
}

/* Takes `v`. */
static int add_pair(struct walker *w, cJSON *map, const yaml_event_t *key, cJSON *v)
{
    _cleanup_json_ cJSON *own = v;
    const char *k = (const char *)key->data.scalar.value;
    if (cJSON_GetObjectItemCaseSensitive(map, k))
        return err_set(w->err, -EINVAL, "line %d: duplicate key \"%.64s\"",
                       line_no(key->start_mark), k);
    if (!cJSON_AddItemToObject(map, k, v))
        return oom(w);
    TAKE_PTR(own); /* map's now */
    return 0;
}

static int pair(struct walker *w, cJSON *map, bool flow, int depth)
{
    _cleanup_(event_done) yaml_event_t key = {0};
    int r = take_key(w, flow, &key);
    r = r < 0 ? r : next(w);
    if (r < 0)
        return r;
    if (flow && lacks_colon(w, key.end_mark))
        return fail(w, key.start_mark, "expected ':' after a key in a flow mapping");
    cJSON *v = NULL;
    r = node(w, depth + 1, &v);
    return r < 0 ? r : add_pair(w, map, &key, v);
}

static int mapping(struct walker *w, int depth, cJSON **ret)
{
    _cleanup_json_ cJSON *map = cJSON_CreateObject();
    if (!map)
        return oom(w);
    bool flow = w->ev.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE;
    size_t outer = enter_flow(w, flow);
    int r;
    while ((r = next(w)) == 0 && w->ev.type != YAML_MAPPING_END_EVENT)
        if ((r = pair(w, map, flow, depth)) < 0)
            break;
    w->flow_line = outer;
    if (r < 0)
        return r;
    *ret = TAKE_PTR(map);
    return 0;
}

/* The node starting at the current event; the root is at depth 1. */
static int node(struct walker *w, int depth, cJSON **ret)
{
    int r = check_node(w, depth);
    if (r < 0)
        return r;
    if (w->ev.type == YAML_SEQUENCE_START_EVENT)
        return sequence(w, depth, ret);
    if (w->ev.type == YAML_MAPPING_START_EVENT)
        return mapping(w, depth, ret);
    return scalar(w, ret);
}

/* --- documents --------------------------------------------------------------------------- */

static bool is_empty_plain(const yaml_event_t *e)
{
    return e->type == YAML_SCALAR_EVENT && e->data.scalar.length == 0 &&
           e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* From DOCUMENT-START to DOCUMENT-END: no directives, nothing after "---", no "...". */
static int document(struct walker *w, cJSON **ret)
{
    const yaml_event_t *e = &w->ev;
    if (e->data.document_start.version_directive ||
        e->data.document_start.tag_directives.start != e->data.document_start.tag_directives.end)
        return fail(w, e->start_mark, "directives (%) are not supported");
    bool marker = !e->data.document_start.implicit;
    size_t marker_line = e->end_mark.line;
    int r = next(w);
    if (r < 0)
        return r;
    if (marker && w->ev.start_mark.line == marker_line && !is_empty_plain(&w->ev))
        return fail(w, w->ev.start_mark, "content after \"---\" is not supported");
    _cleanup_json_ cJSON *root = NULL;
    r = node(w, 1, &root);
    r = r < 0 ? r : next(w);
    if (r == 0 && !w->ev.data.document_end.implicit)
        r = fail(w, w->ev.start_mark, "document end markers (...) are not supported");
    if (r < 0)
        return r;
    *ret = TAKE_PTR(root);
    return 0;
}

/* The stream: no document (a null) or one. */
static int stream(struct walker *w, cJSON **ret)
{
    int r = next(w);
    r = r < 0 ? r : next(w);
    if (r < 0)
        return r;
    if (w->ev.type == YAML_STREAM_END_EVENT) {
        *ret = cJSON_CreateNull();
        return *ret ? 0 : oom(w);
    }
    _cleanup_json_ cJSON *root = NULL;
    r = document(w, &root);
    r = r < 0 ? r : next(w);
    if (r == 0 && w->ev.type == YAML_DOCUMENT_START_EVENT)
        r = fail(w, w->ev.start_mark, "multiple documents are not supported");
    if (r < 0)
        return r;
    *ret = TAKE_PTR(root);
    return 0;
}

/* libyaml keeps (decoded) copies of the input; wiped before they are freed. */
static void parser_done(yaml_parser_t *p)
{
    if (p->buffer.start)
        explicit_bzero(p->buffer.start, (size_t)(p->buffer.end - p->buffer.start));
    if (p->raw_buffer.start)
        explicit_bzero(p->raw_buffer.start, (size_t)(p->raw_buffer.end - p->raw_buffer.start));
    yaml_parser_delete(p);
}

static int parse_yaml(const char *text, size_t len, cJSON **ret, struct err *e)
{
    int r = check_bytes(text, len, e);
    if (r < 0)
        return r;
    struct walker w = {.text = text, .len = len, .flow_line = NO_FLOW, .err = e};
    if (!yaml_parser_initialize(&w.parser))
        return err_set(e, -ENOMEM, "out of memory");
    yaml_parser_set_input_string(&w.parser, (const unsigned char *)text, len);
    yaml_parser_set_encoding(&w.parser, YAML_UTF8_ENCODING);
    r = stream(&w, ret);
    event_done(&w.ev);
    parser_done(&w.parser);
    return r;
}

/* --- JSON -------------------------------------------------------------------------------- */

static bool is_json_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
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

static int parse_json(const char *text, size_t len, cJSON **ret, struct err *e)
{
    size_t deep = json_too_deep(text, len);
    if (deep < len)
        return err_set(e, -EINVAL, "line %d: nesting deeper than %d levels", line_at(text, deep),
                       YAML_MAX_DEPTH);
    int r = json_parse_strict(text, len, ret, e);
    return r < 0 ? -EINVAL : 0; /* yaml_parse's callers see -EINVAL for any malformed input */
}

static bool starts_json(const char *text, size_t len)
{
    size_t i = 0;
    while (i < len && is_json_space(text[i]))
        i++;
    return i < len && text[i] == '{';
}

/* --- entry point ------------------------------------------------------------------------- */

int yaml_parse(const char *text, size_t len, struct cJSON **ret, struct err *ret_err)
{
    if (!text) {
        text = "";
        len = 0;
    }
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
        text += 3;
        len -= 3;
    }
    if (len > INT_MAX)
        return err_set(ret_err, -EINVAL, "line 1: document too large");
    if (starts_json(text, len))
        return parse_json(text, len, ret, ret_err);
    return parse_yaml(text, len, ret, ret_err);
}
