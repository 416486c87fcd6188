#!/usr/bin/env bash
# Installs universalmutator (the mutant generator of make mutate, hack/mutate.sh) with pip into a
# Python virtual environment in a cache outside the repo, test infrastructure only. The tool and
# its dependencies are pinned to exact versions (REQUIREMENTS); `pip wheel` fetches them from
# pip's configured index into a work directory (building wheels of source-only releases), and
# the venv installs only those (--no-index, --no-deps), so a fresh machine gets the same set. The venv lives at its final path (a venv
# cannot be moved), keyed by the tool's version, the Python version and a hash of the
# requirements, with a completion stamp and a lock (hack/go.sh's helpers): a second run prints
# the path at once. Prints the mutate command's path on stdout; progress on stderr.
set -euo pipefail
# shellcheck source=hack/go.sh
. "$(dirname "${BASH_SOURCE[0]}")/go.sh"
UM_VERSION=1.14.1
REQUIREMENTS="universalmutator==$UM_VERSION
comby==0.0.3
python-Levenshtein==0.27.5
Levenshtein==0.27.5
RapidFuzz==3.14.6
tabulate==0.10.0
attrs==26.1.0
loguru==0.7.3
requests==2.34.2
certifi==2026.10.19.post1
charset-normalizer==3.5.3
idna==3.20
urllib3==2.8.0
typing==3.7.4.3"
PYVER=$(python3 -c 'import sys; print("py%d.%d" % sys.version_info[:2])')
HASH=$(printf '%s\n' "$REQUIREMENTS" | sha256sum | cut -c1-16)
ROOT=$GO_CACHE
OUT="$ROOT/universalmutator-${UM_VERSION}_${PYVER}_$HASH"
go_cached "$ROOT" universalmutator "$OUT/.complete" "$OUT/bin/mutate"
start=$(date +%s)
echo "universalmutator-build: installing universalmutator $UM_VERSION with $PYVER into $OUT" >&2
go_workdir "$ROOT" universalmutator
printf '%s\n' "$REQUIREMENTS" >"$W/requirements.txt"
rm -rf "$OUT"
python3 -m venv "$OUT" >&2
"$OUT/bin/pip" wheel --quiet --no-deps -w "$W/dist" -r "$W/requirements.txt" >&2
"$OUT/bin/pip" install --quiet --no-index --no-deps --find-links "$W/dist" \
    -r "$W/requirements.txt" >&2
"$OUT/bin/mutate" --help >/dev/null
touch "$OUT/.complete"
echo "universalmutator-build: done in $(($(date +%s) - start))s" >&2
echo "$OUT/bin/mutate"
