#!/usr/bin/env bash
# KubeVirt v1.9.0's own CRDs for kubevirts, virtualmachineinstances and virtualmachines
# (kubevirt.io), and for what virt-controller makes VMIs or VMs from (replica sets, pools,
# instance types, cluster instance types, clones, restores), test infrastructure only: test/kubevirtcrds, built against the
# kubevirt.io/kubevirt@v1.9.0 module from the Go module proxy, runs virt-operator's CRD
# constructors (pkg/virt-operator/resource/generate/components), as tools/resource-generator
# does. The kubevirts CRD it writes must be byte-identical to the module's shipped
# manifests/generated/kv-resource.yaml, or the build fails (the module ships no YAML of the
# others). Also (a subdirectory virt-controller/, for test_kvrender.sh) the other kinds KubeVirt's
# virt-controller watches and its RBAC as virt-operator makes it. Output goes to a
# cache outside the repo, keyed by the Go version and a hash of the sources and this script, with
# a completion stamp; a second run prints the path at once. Prints the directory (one
# <plural>.<group>.yaml per CRD) on stdout; progress on stderr.
#
# The components package as a whole imports virt-template modules the proxy does not serve, so,
# as for test/kubevirtenv, go.mod's replace directive points at a copy (./kubevirt) of just the
# files the CRDs need, unchanged: components/crds.go, components/validations_generated.go (the
# OpenAPI schemas), components/serviceaccountnames.go and pkg/pointer; and of the rbac package
# controller.go and apiserver.go, unchanged, with the constant block of operator.go (the rest of
# that file needs components' certificate code, which imports virt-template).
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../test/kubevirtcrds" && pwd)
SELF=$(realpath "${BASH_SOURCE[0]}")
# shellcheck source=hack/go.sh
. "$(dirname "${BASH_SOURCE[0]}")/go.sh"
ROOT=$GO_CACHE
KUBEVIRT=v1.9.0
SUM=$( (cd "$SRC" && cat go.mod go.sum ./*.go; cat "$SELF") | sha256sum | cut -c1-16)
OUT="$ROOT/kubevirt-crds_${KUBEVIRT}_${GOVER}_$SUM"
go_cached "$ROOT" kubevirt-crds "$OUT/.complete" "$OUT"
echo "kubevirt-crds: generating kubevirt.io/kubevirt@$KUBEVIRT's CRDs with ${GOVER} into $OUT" >&2
go_workdir "$ROOT" kubevirt-crds
MOD=$(cd "$SRC" && go mod download -json "kubevirt.io/kubevirt@$KUBEVIRT" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -f "$MOD/go.mod" ] || { echo "kubevirt-crds: cannot download kubevirt.io/kubevirt@$KUBEVIRT" >&2; exit 1; }
C=pkg/virt-operator/resource/generate/components
R=pkg/virt-operator/resource/generate/rbac
mkdir -p "$W/src/kubevirt/$C" "$W/src/kubevirt/$R" "$W/src/kubevirt/pkg/pointer" "$W/out"
cp "$SRC"/go.mod "$SRC"/go.sum "$SRC"/*.go "$W/src/"
cp "$MOD/go.mod" "$W/src/kubevirt/"
cp "$MOD/$C/crds.go" "$MOD/$C/validations_generated.go" "$MOD/$C/serviceaccountnames.go" "$W/src/kubevirt/$C/"
cp "$MOD/$R/controller.go" "$MOD/$R/apiserver.go" "$W/src/kubevirt/$R/"
{ printf 'package rbac\n\n// The constant block of operator.go (hack/kubevirt-crds.sh).\n'; sed -n '/^const (/,/^)/p' "$MOD/$R/operator.go"; } >"$W/src/kubevirt/$R/constants.go"
grep -q GroupNameRoute "$W/src/kubevirt/$R/constants.go" || { echo "kubevirt-crds: no constant block in rbac/operator.go" >&2; exit 1; }
cp "$MOD/pkg/pointer/pointer.go" "$W/src/kubevirt/pkg/pointer/"
chmod -R u+w "$W/src/kubevirt"
(cd "$W/src" && go build -mod=readonly -trimpath -ldflags "-s -w" -o "$W/kubevirtcrds" .) >&2
"$W/kubevirtcrds" "$W/out"
cmp "$W/out/kubevirts.kubevirt.io.yaml" "$MOD/manifests/generated/kv-resource.yaml" >&2 || {
    echo "kubevirt-crds: the generated kubevirts CRD differs from the module's kv-resource.yaml" >&2
    exit 1
}
touch "$W/out/.complete"
rm -rf "$OUT"
mv "$W/out" "$OUT"
echo "$OUT"
