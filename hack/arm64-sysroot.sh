#!/usr/bin/env bash
# hack/arm64-sysroot.sh - Debian's :arm64 libraries the build links, as a private sysroot for
# Debian's cross compiler (aarch64-linux-gnu-gcc --sysroot) and for qemu-user (QEMU_LD_PREFIX),
# with no change to the host: no `dpkg --add-architecture`, the host's apt sources read as they
# are, private apt lists (binary-arm64), an empty dpkg status (every dependency resolved as for
# an empty system), the .debs unpacked with dpkg-deb. The sysroot carries its own dpkg database
# (var/lib/dpkg: each package's control as its status stanza, its file list), so
# `dpkg-query --admindir=SYSROOT/var/lib/dpkg -S FILE` names the :arm64 package that owns FILE
# (hack/image.sh's notices). Prints the sysroot's path:
#   HOSTDEVD_TOOLS_CACHE/arm64-sysroot-<hash of the package list and this script>/root
# First use: about 100 .debs, 40 MB (network: Debian's mirror only); then nothing.
set -euo pipefail
CACHE=${HOSTDEVD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-tools}
# The build's libraries (the Makefile's PKGS, -lev, -lcunit for the unit runner) and libc.
PKGS="libc6-dev libcurl4-openssl-dev libcjson-dev libpci-dev libudev-dev libev-dev libkmod-dev
libnghttp2-dev libprotobuf-c-dev libyaml-dev libmnl-dev libcunit1-dev"
die() { echo "arm64-sysroot: $*" >&2; exit 1; }

key=$( (echo "$PKGS"; cat "${BASH_SOURCE[0]}") | sha256sum | cut -c1-12)
dir=$CACHE/arm64-sysroot-$key
root=$dir/root
mkdir -p "$CACHE"
exec 9>"$CACHE/.arm64-sysroot.lock"
flock 9
if [ -f "$dir/.complete" ]; then
    echo "$root"
    exit 0
fi
rm -rf "$dir"
apt=$dir/apt
mkdir -p "$apt"/{lists/partial,cache/archives/partial} "$root"
: >"$apt/status"
APT=(-o "Dir::State::Lists=$apt/lists" -o "Dir::State::status=$apt/status"
    -o "Dir::State::extended_states=$apt/extended_states" -o "Dir::Cache=$apt/cache"
    -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Sandbox::User=root
    -o APT::Architecture=arm64 -o APT::Architectures::=arm64
    -o Debug::NoLocking=1 -o Acquire::Languages=none)
echo "arm64-sysroot: fetching the :arm64 libraries with every dependency (private apt state in $apt)" >&2
# shellcheck disable=SC2086 # a list of package names
if ! { apt-get "${APT[@]}" update && apt-get "${APT[@]}" -y -d install --no-install-recommends $PKGS; } \
    >"$dir/apt.log" 2>&1; then
    tail -20 "$dir/apt.log" >&2
    die "could not download the :arm64 libraries ($dir/apt.log)"
fi

# merged /usr, as a bookworm system's (usrmerge makes these links; tar keeps them)
mkdir -p "$root"/usr/{lib,bin,sbin} "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
ln -s usr/lib "$root/lib"
ln -s usr/bin "$root/bin"
ln -s usr/sbin "$root/sbin"
echo arm64 >"$root/var/lib/dpkg/arch"
echo 1 >"$root/var/lib/dpkg/info/format" # file lists named pkg:arch.list (Multi-Arch: same)
: >"$root/var/lib/dpkg/status"
for deb in "$apt"/cache/archives/*.deb; do
    [ "$(dpkg-deb -f "$deb" Architecture)" != amd64 ] || die "$deb is amd64"
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$root" --keep-directory-symlink
    name=$(dpkg-deb -f "$deb" Package)
    [ "$(dpkg-deb -f "$deb" Multi-Arch)" != same ] || name=$name:arm64
    # dpkg's list: "/." then every path, as dpkg -L prints them
    dpkg-deb --fsys-tarfile "$deb" | tar -t | sed 's|^\./|/|; s|/$||; s|^$|/.|' \
        >"$root/var/lib/dpkg/info/$name.list"
    { dpkg-deb -f "$deb" | sed '/^Package:/a Status: install ok installed'; echo; } \
        >>"$root/var/lib/dpkg/status"
done
# Absolute links (a few -dev packages' .so links) would point at the host's files.
find "$root" -type l -lname '/*' | while read -r l; do
    t=$(readlink "$l")
    ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$root$t")" "$l"
done
n=$(find "$apt/cache/archives" -name '*.deb' | wc -l)
rm -rf "$apt"
touch "$dir/.complete"
echo "arm64-sysroot: $n packages in $root ($(du -sh "$root" | cut -f1))" >&2
echo "$root"
