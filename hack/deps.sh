#!/usr/bin/env bash
# Installs the Debian packages the build, the tests and the demo need. Idempotent: when every
# package is already installed it prints nothing and touches nothing. Needs root (or sudo).
set -euo pipefail
packages=(
    # build
    gcc make pkg-config
    libcurl4-openssl-dev libcjson-dev libpci-dev libudev-dev libev-dev libkmod-dev
    libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler libyaml-dev
    # tests, lint, fuzz
    libcunit1-dev clang libclang-rt-14-dev clang-format clang-tidy cppcheck valgrind shellcheck
    prometheus # promtool checks the /metrics exposition
    # control plane harness and data
    openssl curl python3 ca-certificates pci.ids usb.ids util-linux bc jq pciutils
    # make image (buildah, skopeo) and its test (podman runs it, containerd's ctr imports it)
    buildah skopeo podman runc containerd
)
missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        missing+=("$p")
    fi
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}" >&2
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# Update the lists when they are missing or older than a day, or when an install fails on them.
lists=/var/lib/apt/lists
if [ -z "$(find "$lists" -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -1)" ]; then
    $SUDO apt-get update -qq >&2
fi
if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    $SUDO apt-get update -qq >&2
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
