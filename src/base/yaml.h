/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/yaml.h - the subset of YAML that kubeconfig files use, parsed into a cJSON tree.
 *
 * Parsed by libyaml (base/yaml.c is the one file that includes it). Supported: block mappings
 * and block sequences by indentation (including "- key: value" items and sequences at the
 * same indentation as their parent key), plain, single- and double-quoted scalars (with
 * YAML's escapes), flow collections on one line ({}, [], {a: b, c: [d]}), comments, a leading
 * "---", and JSON (a superset-compatible input). Scalars become strings, except unquoted
 * true/false/null, and integers where the target needs them are left to the caller
 * (everything else stays a string). Not supported and reported as errors: anchors and
 * aliases, tags, multi-line scalars (|, >, and plain or quoted scalars over several lines),
 * multiple documents. Pure: no I/O, no logging. Inputs are bounded (len, depth). Fuzzed via
 * test/fuzz/fuzz_kubeconfig.c.
 */
#pragma once

#include <stddef.h>

struct cJSON;
struct err;

/* The deepest nesting of collections accepted (the root collection is level 1). */
#define YAML_MAX_DEPTH 64

/*
 * Decisions where YAML or the contract left a choice (documented here, tested in
 * test/unit/test_yaml.c):
 * - A document whose first non-blank character is '{' is JSON as a whole (cJSON parses it;
 *   nesting is capped at YAML_MAX_DEPTH too). A YAML flow mapping at the root is therefore
 *   read as JSON and usually refused; flow collections elsewhere are YAML.
 * - Unquoted true/True/TRUE, false/False/FALSE, null/Null/NULL/~ and empty values become
 *   booleans and null (YAML 1.2 core spellings, not 1.1's yes/no/on/off); all else, numbers
 *   included, is a string (JSON documents keep their JSON types). A document with no content
 *   is a cJSON null.
 * - Duplicate keys in a mapping are an error (the spec says so; no "last one wins").
 * - Plain scalars end at " #" (a comment) and may not contain ": " (quote them); a value
 *   cannot start with & * ! | > % @ ` or "? " (anchors, aliases, tags, block scalars...).
 * - Double-quoted escapes are YAML's (libyaml's): \" \\ \/ \n \t \r \b \f \uXXXX, and also
 *   \0 \a \v \e \xXX \UXXXXXXXX \N \_ \L \P and an escaped space or tab. A \u escape of a
 *   surrogate, paired or not, is an error (as in libyaml and go-yaml, hence kubectl): a
 *   character beyond U+FFFF is written \UXXXXXXXX. Any other escape, and a NUL however
 *   escaped (cJSON strings end at NUL), is an error.
 * - Flow collections must close on their line; a flow mapping entry needs its ':' ({a} is
 *   refused, {a: } is a null value); a trailing comma is accepted.
 * - Tabs may separate tokens within a line but never indent. Control characters other than
 *   tab (and the CR of CRLF) are refused, and so are the line breaks YAML 1.1 adds (U+0085,
 *   U+2028, U+2029; lines are what an editor shows) and text that is not UTF-8 (libyaml's
 *   reader checks it; JSON documents are cJSON's). A leading UTF-8 BOM is skipped; "..." is
 *   refused. Keys are scalars ([a]: b is refused like "? ").
 * - `*ret` is written only on success, `*ret_err` (base/err.h) only on failure.
 */

/*
 * Parses `len` bytes of `text` (at most INT_MAX). On success writes the root (a mapping,
 * sequence or scalar; the caller frees it with cJSON_Delete) to `ret`. On failure returns
 * -EINVAL (or -ENOMEM) and, if `ret_err` is not NULL, fills it with a message such as
 * "line 12: tabs are not allowed for indentation".
 */
int yaml_parse(const char *text, size_t len, struct cJSON **ret, struct err *ret_err);
