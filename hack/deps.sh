#!/usr/bin/env bash
# Installs what a group of make targets needs: Debian packages through apt-get (root or sudo),
# and for demo and test the Go toolchain that builds the test infrastructure (hack/go.sh
# install: go1.26.8 from the Go module proxy unless a go1.26 is on PATH). Idempotent: when
# everything is there it prints nothing and touches nothing.
#
#   hack/deps.sh [test]   make deps: everything make test, make lint and make fuzz need
#   hack/deps.sh demo     make demo: the build, the local control plane and Go (the qemu node
#                         installs its own tools, qemu-system-x86 and busybox-static, when it
#                         first boots: hack/qemu-node.sh)
#   hack/deps.sh build    make: the compiler and the libraries' headers
#   hack/deps.sh image    make image: the build and buildah, skopeo
#   hack/deps.sh bench    make bench: what make test needs, and the references and profilers
#   hack/deps.sh arm64    make deps-arm64 (make image's linux/arm64, make test-long's arm64 suite):
#                         Debian's cross compiler (amd64 packages: no dpkg --add-architecture),
#                         then, with private apt states (nothing of the host's apt or dpkg state
#                         changes), the :arm64 libraries as a sysroot (hack/arm64-sysroot.sh) and
#                         backports' qemu-aarch64 (hack/qemu-user.sh --qemu)
#   hack/deps.sh bootstrap  Debian's golang-go only (hack/go.sh install's downloader when there
#                         is no go at all)
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

build=(
    gcc make pkg-config ccache # ccache: a clean clone compiles only what no build compiled before
    libcurl4-openssl-dev libcjson-dev libpci-dev libudev-dev libev-dev libkmod-dev
    libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler libyaml-dev libmnl-dev
)
demo=(
    # the local control plane (hack/cluster.sh), the module proxy, names of devices
    openssl curl python3 ca-certificates util-linux pci.ids usb.ids
    # the demo's node: make image (buildah, skopeo), runc, CNI plugins, the test box image's
    # busybox and socat for hack/kubelet.sh's containerd mode; jq for its checks
    buildah skopeo runc containernetworking-plugins busybox-static socat jq
)
test=(
    libcunit1-dev clang libclang-rt-14-dev clang-format clang-tidy cppcheck valgrind shellcheck
    prometheus # promtool checks the /metrics exposition
    bc jq pciutils
    python3-yaml # test_inventory reads `hostdevd inventory -o yaml` back
    python3-venv # make mutate: universalmutator's venv (hack/universalmutator-build.sh)
    # make image (buildah, skopeo) and its test (podman runs it, containerd's ctr imports it)
    buildah skopeo podman runc containerd
    # hack/kubelet.sh's containerd mode (containerd 2 itself is built: hack/containerd-build.sh):
    # its CNI plugins, the test box image's busybox, socat carrying the API server into the node
    containernetworking-plugins busybox-static socat
)
arm64=(gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu file)
bench=(
    hyperfine          # discovery, whole process against whole process
    usbutils udev      # lsusb -v, the USB reference (udev's hwdb gives it its names)
    heaptrack          # the agent's heap (footprint)
)

group=${1:-test}
case "$group" in
build) packages=("${build[@]}") ;;
image) packages=("${build[@]}" buildah skopeo) ;;
demo) packages=("${build[@]}" "${demo[@]}") ;;
test) packages=("${build[@]}" "${demo[@]}" "${test[@]}") ;;
bench) packages=("${build[@]}" "${demo[@]}" "${test[@]}" "${bench[@]}") ;;
arm64) packages=("${build[@]}" buildah skopeo "${arm64[@]}") ;;
bootstrap) packages=(golang-go) ;;
*) echo "usage: hack/deps.sh [build|image|arm64|demo|test|bench|bootstrap]" >&2; exit 2 ;;
esac

apt_install() { # packages...
    local missing sudo=
    mapfile -t missing < <(comm -23 <(printf '%s\n' "$@" | sort -u) \
        <(dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null |
            awk '$NF == "installed" && $(NF-1) == "ok" {print $1}' | sort -u))
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "deps: installing ${missing[*]}" >&2
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    export DEBIAN_FRONTEND=noninteractive
    # Update the lists when they are missing or older than a day, or when an install fails on them.
    local lists=/var/lib/apt/lists
    if [ -z "$(find "$lists" -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -1)" ]; then
        $sudo apt-get update -qq >&2
    fi
    if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
        $sudo apt-get update -qq >&2
        $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

apt_install "${packages[@]}"
case "$group" in
demo | test | bench) "$HACK/go.sh" install ;;
arm64) "$HACK/arm64-sysroot.sh" >/dev/null && "$HACK/qemu-user.sh" --qemu >/dev/null ;;
esac
