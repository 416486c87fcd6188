#!/usr/bin/env bash
# Builds Helm (the helm command of a pinned helm.sh/helm/v4 release) from the Go module proxy,
# test infrastructure only: `go install module@version` resolves exactly the release's own
# go.mod, with the ldflags of Helm's Makefile for a tagged build (version, no "unreleased").
# v4.3.1: the current major, and built on k8s.io/client-go v0.37.1, the client of the pinned
# Kubernetes v1.37.1 (hack/k8s-build.sh); its go.mod asks for go 1.26.0. Output goes to a
# cache outside the repo, keyed by the Helm version, the Go version, the platform and the recipe
# (bump RECIPE when the build changes), with a completion stamp: a second run prints the path
# at once. Prints the helm binary's path on stdout; progress on stderr.
set -euo pipefail
HELM_VERSION=${HELM_VERSION:-v4.3.1}
RECIPE=r1
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-modcacherw
ROOT=${HOSTDEVD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-tools}
GOVER=$(go env GOVERSION)
OUT="$ROOT/helm-${HELM_VERSION}_${GOVER}_$(go env GOOS)-$(go env GOARCH)_$RECIPE"
if [ -f "$OUT/.complete" ]; then echo "$OUT/helm"; exit 0; fi
mkdir -p "$ROOT"
exec 9>"$ROOT/.helm.lock"
flock 9
if [ -f "$OUT/.complete" ]; then echo "$OUT/helm"; exit 0; fi
start=$(date +%s)
echo "helm-build: building helm.sh/helm/v4@$HELM_VERSION with $GOVER into $OUT" >&2
W=$(mktemp -d "$ROOT/.helm.XXXXXX")
trap 'rm -rf "$W"' EXIT
V=helm.sh/helm/v4/internal/version
(cd "$W" && GOBIN="$W/bin" go install -trimpath \
    -ldflags "-s -w -X $V.version=$HELM_VERSION -X $V.metadata= -X $V.gitTreeState=clean" \
    "helm.sh/helm/v4/cmd/helm@$HELM_VERSION") >&2
"$W/bin/helm" version >&2
touch "$W/bin/.complete"
rm -rf "$OUT"
mv "$W/bin" "$OUT"
echo "helm-build: done in $(($(date +%s) - start))s" >&2
echo "$OUT/helm"
