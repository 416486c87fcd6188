#!/usr/bin/env bash
# hack/mutate-bin.sh HOSTDEVD SCRIPT [ARGS...] - make mutate's killer for code that only the
# daemon runs (reconcilers, plugins): runs the integration test SCRIPT with the mutant's hostdevd
# (the binary HOSTDEVD, plain or sanitizer build) in place of build/asan/hostdevd, the other
# test binaries as make test builds them (HOSTDEVD_TEST_BIN, test/integration/lib.sh). Exits as
# SCRIPT does: non-zero kills the mutant.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=$(realpath "$1")
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for f in build/asan/*; do
    [ -f "$f" ] && [ -x "$f" ] && ln -s "$PWD/$f" "$dir/"
done
ln -sf "$bin" "$dir/hostdevd"
HOSTDEVD_TEST_BIN=$dir bash "$@"
