#!/usr/bin/env bash
# prometheus-operator v0.85.0's CRDs for ServiceMonitor, PodMonitor and PrometheusRule
# (monitoring.coreos.com/v1), test infrastructure only: the chart's optional monitoring objects
# (docs/monitoring.md) are applied against them on a real API server (test_helm.sh), so the
# real CRD schema validates them. Taken unchanged from the module
# github.com/prometheus-operator/prometheus-operator@v0.85.0 (its
# example/prometheus-operator-crd/) through the Go module proxy (go mod download checks
# go.sum's hash of it) into a cache outside the repo, with a completion stamp; a second run
# prints the path at once. Prints the directory (one monitoring.coreos.com_<plural>.yaml per
# CRD) on stdout; progress on stderr.
set -euo pipefail
SELF=$(realpath "${BASH_SOURCE[0]}")
# shellcheck source=hack/go.sh
. "$(dirname "${BASH_SOURCE[0]}")/go.sh"
ROOT=$GO_CACHE
MODULE=github.com/prometheus-operator/prometheus-operator
VERSION=v0.85.0
SUM=$(sha256sum <"$SELF" | cut -c1-16)
OUT="$ROOT/prometheus-operator-crds_${VERSION}_$SUM"
go_cached "$ROOT" prometheus-operator-crds "$OUT/.complete" "$OUT"
echo "prometheus-operator-crds: $MODULE@$VERSION's CRDs into $OUT" >&2
go_workdir "$ROOT" prometheus-operator-crds
(cd "$W" && go mod init hostdevd.test/promcrds >/dev/null 2>&1)
MOD=$(cd "$W" && go mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$MOD/example/prometheus-operator-crd" ] || { echo "prometheus-operator-crds: cannot download $MODULE@$VERSION" >&2; exit 1; }
mkdir -p "$W/out"
for p in servicemonitors podmonitors prometheusrules; do
    cp "$MOD/example/prometheus-operator-crd/monitoring.coreos.com_$p.yaml" "$W/out/"
done
chmod u+w "$W/out"/*.yaml
touch "$W/out/.complete"
rm -rf "$OUT"
mv "$W/out" "$OUT"
echo "$OUT"
