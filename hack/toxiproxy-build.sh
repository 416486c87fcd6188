#!/usr/bin/env bash
# Builds Toxiproxy (toxiproxy-server and toxiproxy-cli of a pinned github.com/Shopify/toxiproxy/v2
# release) from the Go module proxy, test infrastructure only (test/integration/test_faults.sh
# puts it between hostdevd and kube-apiserver): `go install module@version` resolves exactly the
# release's own go.mod, with the version ldflag of its .goreleaser.yml. v2.12.0 is the newest
# release the module proxy serves (v2.13.0 is not there). Output goes to a cache outside the
# repo, keyed by the Toxiproxy version, the Go version, the platform and the recipe (bump RECIPE
# when the build changes), with a completion stamp: a second run prints the path at once. Prints
# the directory holding both binaries on stdout; progress on stderr.
set -euo pipefail
# shellcheck source=hack/go.sh
. "$(dirname "${BASH_SOURCE[0]}")/go.sh"
TOXIPROXY_VERSION=${TOXIPROXY_VERSION:-v2.12.0}
RECIPE=r1
export CGO_ENABLED=0
ROOT=$GO_CACHE
OUT="$ROOT/toxiproxy-${TOXIPROXY_VERSION}_${GOVER}_${GOOSARCH}_$RECIPE"
go_cached "$ROOT" toxiproxy "$OUT/.complete" "$OUT"
start=$(date +%s)
echo "toxiproxy-build: building github.com/Shopify/toxiproxy/v2@$TOXIPROXY_VERSION with $GOVER into $OUT" >&2
go_workdir "$ROOT" toxiproxy
M=github.com/Shopify/toxiproxy/v2
(cd "$W" && GOBIN="$W/bin" go install -trimpath \
    -ldflags "-s -w -X $M.Version=${TOXIPROXY_VERSION#v}" \
    "$M/cmd/server@$TOXIPROXY_VERSION" "$M/cmd/cli@$TOXIPROXY_VERSION") >&2
# go install names the binaries after their directories; the release names them like this.
mv "$W/bin/server" "$W/bin/toxiproxy-server"
mv "$W/bin/cli" "$W/bin/toxiproxy-cli"
"$W/bin/toxiproxy-server" -version >&2
touch "$W/bin/.complete"
rm -rf "$OUT"
mv "$W/bin" "$OUT"
echo "toxiproxy-build: done in $(($(date +%s) - start))s" >&2
echo "$OUT"
