#!/usr/bin/env bash
# Lists functions longer than the limit (default 60 lines between their braces) in the given
# C files: "file:line: name (N lines)". STYLE.md: over 60 lines needs splitting.
set -euo pipefail
max=${FUNCLEN_MAX:-60}
awk -v max="$max" '
    FNR == 1 { inf = 0 }
    /^\{/ { inf = 1; start = FNR; name = prev }
    /^\}/ { if (inf && FNR - start - 1 > max) printf "%s:%d: %s (%d lines)\n", FILENAME, start, name, FNR - start - 1; inf = 0 }
    { prev = $0 }' "$@"
