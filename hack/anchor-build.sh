#!/usr/bin/env bash
# Builds the anchor, harvester/pcidevices' node agent (the pcidevices binary), at a pinned
# release for hack/bench/anchor.sh, test infrastructure only. It is built as the main module
# from an unpacked copy of the release (its go.mod's replace directives apply only there), with
# GOTOOLCHAIN=local CGO_ENABLED=0 and the link flags of its scripts/build; every dependency comes
# through the Go module proxy as its go.sum pins it. Source, first that works:
#   1. the module github.com/harvester/pcidevices@$ANCHOR_VERSION from the Go module proxy;
#   2. the tag $ANCHOR_VERSION of a git copy of the repository named by ANCHOR_GIT (a git
#      directory; for proxies that do not serve the module).
# v1.8.1: the newest release tag (the same commit as v1.8.1-rc2; go.mod asks for go 1.26.4).
# Besides the binary, crds/ holds the foreign CRDs it waits for, from modules of its own go.mod
# as resolved there (harvester-network-controller: vlanconfigs, virtualmachineinstances;
# harvester's chart: kubevirts). Output goes to a cache outside the repo keyed by the version,
# the Go version, the platform and the recipe (bump RECIPE when the build changes), with a
# completion stamp. Prints the output directory on stdout (pcidevices, crds/, source); progress
# and the reason for a failure on stderr.
set -euo pipefail
# shellcheck source=hack/go.sh
. "$(dirname "${BASH_SOURCE[0]}")/go.sh"
ANCHOR_VERSION=${ANCHOR_VERSION:-v1.8.1}
MOD=github.com/harvester/pcidevices
RECIPE=r1
ROOT=$GO_CACHE
OUT="$ROOT/pcidevices-${ANCHOR_VERSION}_${GOVER}_${GOOSARCH}_$RECIPE"
go_cached "$ROOT" pcidevices "$OUT/.complete" "$OUT"
start=$(date +%s)
go_workdir "$ROOT" pcidevices
mkdir -p "$W/out/crds" "$W/src"

# The source, into $W/src (writable: the build may add go.sum entries of its own).
if dir=$(cd "$W" && go mod download -json "$MOD@$ANCHOR_VERSION" 2>"$W/proxy.err" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["Dir"]) if d.get("Dir") else sys.exit(d.get("Error", "no Dir"))' 2>>"$W/proxy.err"); then
    cp -a "$dir/." "$W/src/"
    chmod -R u+w "$W/src"
    echo "module $MOD@$ANCHOR_VERSION (Go module proxy)" >"$W/out/source"
elif [ -n "${ANCHOR_GIT:-}" ] && git -C "$ANCHOR_GIT" rev-parse -q --verify "refs/tags/$ANCHOR_VERSION^{commit}" >/dev/null; then
    git -C "$ANCHOR_GIT" archive "$ANCHOR_VERSION" | tar -x -C "$W/src"
    echo "git tag $ANCHOR_VERSION at $(git -C "$ANCHOR_GIT" rev-parse --short "$ANCHOR_VERSION^{commit}"); the module proxy does not serve $MOD" >"$W/out/source"
else
    echo "anchor-build: the Go module proxy does not serve $MOD@$ANCHOR_VERSION ($(grep -m1 -oE '[0-9]{3} [A-Za-z ]+' "$W/proxy.err" || head -c 200 "$W/proxy.err")), and ANCHOR_GIT names no git copy with the tag $ANCHOR_VERSION" >&2
    exit 1
fi
echo "anchor-build: building $MOD $ANCHOR_VERSION ($(cat "$W/out/source")) with $GOVER into $OUT" >&2
want=$(sed -n 's/^go //p' "$W/src/go.mod")
echo "anchor-build: its go.mod asks for go $want" >&2
(cd "$W/src" && go build -trimpath -o "$W/out/pcidevices" \
    -ldflags "-X main.VERSION=$ANCHOR_VERSION -extldflags -static -s" .) >&2

# The foreign CRDs, from the module copies its own go.mod resolves (replace directives applied).
moddir() { (cd "$W/src" && go mod download "$1" && go list -m -f '{{with .Replace}}{{.Dir}}{{else}}{{.Dir}}{{end}}' "$1"); }
hnc=$(moddir github.com/harvester/harvester-network-controller)
hv=$(moddir github.com/harvester/harvester)
for f in "$hnc/manifests/crds/network.harvesterhci.io_vlanconfigs.yaml" \
    "$hnc/manifests/dependency_crds/kubevirt.io_virtualmachineinstances.yaml" \
    "$hv/deploy/charts/harvester-crd/templates/crd-kubevirt-1.5.0.yaml"; do
    [ -f "$f" ] || { echo "anchor-build: no CRD file $f" >&2; exit 1; }
    install -m 644 "$f" "$W/out/crds/"
done
mc=$(go env GOMODCACHE)
printf '%s\n' "${hnc#"$mc"/}" "${hv#"$mc"/}" >"$W/out/crds/modules"
ls -l "$W/out/pcidevices" >&2
touch "$W/out/.complete"
rm -rf "$OUT"
mv "$W/out" "$OUT"
echo "anchor-build: done in $(($(date +%s) - start))s" >&2
echo "$OUT"
