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
# shellcheck source=hack/go.sh
. "$(dirname "${BASH_SOURCE[0]}")/go.sh"
HELM_VERSION=${HELM_VERSION:-v4.3.1}
RECIPE=r1
export CGO_ENABLED=0
ROOT=$GO_CACHE
OUT="$ROOT/helm-${HELM_VERSION}_${GOVER}_${GOOSARCH}_$RECIPE"
go_cached "$ROOT" helm "$OUT/.complete" "$OUT/helm"
start=$(date +%s)
echo "helm-build: building helm.sh/helm/v4@$HELM_VERSION with $GOVER into $OUT" >&2
go_workdir "$ROOT" helm
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
