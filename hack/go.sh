#!/usr/bin/env bash
# The Go that builds the test infrastructure (Kubernetes, etcd and the Go test programs; the
# product is C), in one place. Every hack/*-build.sh sources this file; `make deps` runs it.
#
#   hack/go.sh install   make sure go1.26 is there: the `go` on PATH when it is go1.26.8 or a
#                        later 1.26, else the toolchain module golang.org/toolchain of
#                        go$GO_VERSION from the Go module proxy (checksum-verified by the go
#                        command, any Go can fetch it; Debian's golang-go is installed when
#                        there is none), unpacked into $HOSTDEVD_TOOLS_CACHE/go$GO_VERSION.<os-arch>.
#                        Idempotent and silent when done; progress on stderr.
#   hack/go.sh which     print the go binary the build scripts use
#   . hack/go.sh         (in a build script) that go first on PATH, GOTOOLCHAIN=local,
#                        CGO_ENABLED=0, GOFLAGS=-modcacherw, GOVER and GOOSARCH set, and the
#                        helpers below; fails saying "run make deps" when there is no go1.26.
#
# The helpers are the build scripts' shared shape: an output directory in a cache outside the
# repo keyed by everything that changes it, a completion stamp, a lock so concurrent runs build
# once, and a work directory that is removed unless it was moved into place.
#
#   go_cached ROOT NAME STAMP RESULT   print RESULT and exit 0 when STAMP exists; otherwise take
#                                      the lock ROOT/.NAME.lock (held until the script exits)
#                                      and check again
#   go_workdir ROOT NAME               make the work directory W under ROOT, removed on exit
GO_VERSION=1.26.8
GO_CACHE=${HOSTDEVD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-tools}

go_arch() {
    case "$(uname -m)" in
    x86_64) echo linux-amd64 ;;
    aarch64) echo linux-arm64 ;;
    *) echo "linux-$(uname -m)" ;;
    esac
}

# go1.26.N with N >= 8 (go.mod files of test/ need 1.26.8 with GOTOOLCHAIN=local).
go_suitable() { # go-binary
    local v
    v=$(GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null) || return 1
    [[ $v =~ ^go1\.26\.([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ge "${GO_VERSION##*.}" ]
}

go_cached_root() { echo "$GO_CACHE/go$GO_VERSION.$(go_arch)"; }

# The go binary to use: a suitable one on PATH, else the one hack/go.sh install unpacked.
go_find() {
    local g
    g=$(command -v go 2>/dev/null) && go_suitable "$g" && { echo "$g"; return 0; }
    g="$(go_cached_root)/bin/go"
    [ -x "$g" ] && go_suitable "$g" && { echo "$g"; return 0; }
    return 1
}

go_install() {
    local dest mod tmp dl=
    go_find >/dev/null && return 0
    dest=$(go_cached_root)
    mod="golang.org/toolchain@v0.0.1-go$GO_VERSION.$(go_arch)"
    # Any go can download a module; Debian's is enough (bookworm: 1.19).
    dl=$(command -v go 2>/dev/null) || dl=
    if [ -z "$dl" ] && [ -x /usr/lib/go/bin/go ]; then dl=/usr/lib/go/bin/go; fi
    if [ -z "$dl" ]; then
        echo "go: no Go on PATH; installing Debian's golang-go to fetch go$GO_VERSION" >&2
        "$(dirname "${BASH_SOURCE[0]}")/deps.sh" bootstrap
        dl=/usr/lib/go/bin/go
    fi
    mkdir -p "$GO_CACHE"
    exec 8>"$GO_CACHE/.go.lock"
    flock 8
    go_find >/dev/null && return 0
    echo "go: fetching $mod from $(GOTOOLCHAIN=local "$dl" env GOPROXY) with $("$dl" version | awk '{print $3}') into $dest" >&2
    tmp=$(mktemp -d "$GO_CACHE/.go.XXXXXX")
    # A private module cache, so the unpacked tree can be moved into place (nothing is copied,
    # and the user's module cache is left alone); -modcacherw leaves it writable.
    if ! (cd "$tmp" && GOTOOLCHAIN=local GOFLAGS=-modcacherw GOMODCACHE="$tmp/mod" \
        "$dl" mod download "$mod") >&2; then
        rm -rf "$tmp"
        echo "go: cannot download $mod through the Go module proxy" >&2
        return 1
    fi
    # Module zips keep no file modes: the commands need their execute bits (as the go command
    # sets them when it switches toolchains itself).
    find "$tmp/mod/$mod/bin" "$tmp/mod/$mod/pkg/tool" -type f -exec chmod +x {} +
    rm -rf "$dest"
    mv "$tmp/mod/$mod" "$dest"
    rm -rf "$tmp"
    go_suitable "$dest/bin/go" || { echo "go: $dest/bin/go does not run" >&2; return 1; }
    echo "go: $("$dest/bin/go" version)" >&2
}

go_cached() { # root name stamp result
    if [ -f "$3" ]; then echo "$4"; exit 0; fi
    mkdir -p "$1"
    exec 9>"$1/.$2.lock"
    flock 9
    if [ -f "$3" ]; then echo "$4"; exit 0; fi
}

go_workdir() { # root name
    W=$(mktemp -d "$1/.$2.XXXXXX")
    # shellcheck disable=SC2064 # W is fixed now
    trap "rm -rf '$W'" EXIT
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    case "${1:-}" in
    install) go_install ;;
    which) go_find || { echo "go: no go1.26 (run: make deps)" >&2; exit 1; } ;;
    *) echo "usage: hack/go.sh install|which" >&2; exit 2 ;;
    esac
    exit 0
fi

GO=$(go_find) || {
    echo "$(basename "$0"): no Go $GO_VERSION (the test infrastructure is built with it): run make deps" >&2
    exit 1
}
PATH="$(dirname "$GO"):$PATH"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-modcacherw
# shellcheck disable=SC2034 # GOVER and GOOSARCH are for the scripts that source this file
{ read -r GOVER; read -r GOOS_; read -r GOARCH_; } < <(go env GOVERSION GOOS GOARCH)
# shellcheck disable=SC2034
GOOSARCH=$GOOS_-$GOARCH_
unset GOOS_ GOARCH_
