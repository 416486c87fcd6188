#!/usr/bin/env bash
# Builds the real Kubernetes test binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kubelet) of a pinned version, and the etcd server that version pins, from the Go module proxy
# with two small wrapper modules. Output goes to a cache outside the repo, keyed by every version
# that changes it and the recipe (bump RECIPE when the list of binaries changes: the stamp does
# not know them), with a completion stamp: a second run prints the directory in well under a
# second.
# Prints the bin directory on stdout; progress on stderr.
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-1.37.1}
RECIPE=r3
MINOR=${K8S_VERSION#1.}; MINOR=${MINOR%%.*}
STAGING=v0.${K8S_VERSION#1.}
# shellcheck source=hack/go.sh
. "$(dirname "${BASH_SOURCE[0]}")/go.sh"
ROOT=${HOSTDEVD_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-k8s}
OUT="$ROOT/k8s-v${K8S_VERSION}_${GOVER}_${GOOSARCH}_${RECIPE}"
go_cached "$ROOT" k8s "$OUT/bin/.complete" "$OUT/bin"
go_workdir "$ROOT" work
mkdir -p "$W/bin" "$W/kube" "$W/etcd"
start=$(date +%s)
log() { printf '[k8s-build %3ss] %s\n' "$(( $(date +%s) - start ))" "$*" >&2; }

log "building Kubernetes v${K8S_VERSION} with ${GOVER} into $OUT (cold: about 8 minutes on 2 cores, once)"
# A line a minute while a binary compiles, so a cold build is never silent for minutes.
HEARTBEAT=
heartbeat() { # what
    local parent=$$
    (while sleep 60 && kill -0 "$parent" 2>/dev/null; do log "... still compiling $1"; done) &
    HEARTBEAT=$!
}
cd "$W"
GOMOD=$(go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" |
        sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
[ -f "$GOMOD" ] || { log "cannot download k8s.io/kubernetes@v${K8S_VERSION}"; exit 1; }

cd "$W/kube"
go mod init hostdevd.invalid/k8s-harness-kube >/dev/null 2>&1
sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\1#p' "$GOMOD" |
    while read -r m; do go mod edit -replace="$m=$m@$STAGING"; done
log "resolving modules"
go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@v${K8S_VERSION}" \
              "k8s.io/kubernetes/cmd/kube-controller-manager@v${K8S_VERSION}" \
              "k8s.io/kubernetes/cmd/kube-scheduler@v${K8S_VERSION}" \
              "k8s.io/kubernetes/cmd/kubectl@v${K8S_VERSION}" \
              "k8s.io/kubernetes/cmd/kubelet@v${K8S_VERSION}" >&2
LDF="-s -w"
for kv in "gitVersion=v${K8S_VERSION}" gitMajor=1 "gitMinor=${MINOR}" gitTreeState=clean; do
    LDF+=" -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
done
# One at a time, each said: the first (kube-apiserver) compiles most of what the others share.
for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet; do
    log "compiling $cmd"
    heartbeat "$cmd"
    go build -trimpath -ldflags "$LDF" -o "$W/bin/" "k8s.io/kubernetes/cmd/$cmd" >&2
    kill "$HEARTBEAT" 2>/dev/null || true
    HEARTBEAT=
done
ETCD_VERSION=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)

log "building etcd ${ETCD_VERSION}"
heartbeat etcd
cd "$W/etcd"
go mod init hostdevd.invalid/k8s-harness-etcd >/dev/null 2>&1
go get -tool "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" "go.etcd.io/etcd/etcdctl/v3@${ETCD_VERSION}" >&2
go build -trimpath -ldflags "-s -w" -o "$W/bin/etcd" go.etcd.io/etcd/server/v3 >&2
go build -trimpath -ldflags "-s -w" -o "$W/bin/etcdctl" go.etcd.io/etcd/etcdctl/v3 >&2

kill "$HEARTBEAT" 2>/dev/null || true
HEARTBEAT=
"$W/bin/kube-apiserver" --version >&2
"$W/bin/kubelet" --version >&2
"$W/bin/etcd" --version >&2
echo "$ETCD_VERSION" >"$W/bin/etcd.version"
touch "$W/bin/.complete"
mkdir -p "$OUT"
rm -rf "${OUT:?}/bin"
mv "$W/bin" "$OUT/bin"
log "done"
echo "$OUT/bin"
