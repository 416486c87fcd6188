#!/usr/bin/env bash
# hack/image-at.sh COMMIT - the hostdevd of an older commit of this repository, test
# infrastructure for upgrades (test/long/test_upgrade.sh): that commit's tree (git archive, from
# this clone's history), its bin/hostdevd and `make image` built there with the version
# "<VERSION>-<commit>" (so its image, localhost/hostdevd:<that>, and `hostdevd version` differ from
# this tree's), and its chart and CRDs, into a cache outside the repo keyed by the full commit,
# with a completion stamp. Prints "ARCHIVE IMAGE TAG TREE" (TREE: the commit's source, whose
# charts/hostdevd and crds/ are the previous version's). A few minutes cold (one build), then
# nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ $# -eq 1 ] || { echo "usage: hack/image-at.sh COMMIT" >&2; exit 2; }
commit=$(git rev-parse --verify "$1^{commit}") || { echo "image-at: no commit $1 in this clone" >&2; exit 1; }
short=${commit:0:7}
CACHE=${HOSTDEVD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-tools}
dir=$CACHE/hostdevd-at-$commit
tree=$dir/src
lock=$CACHE/.hostdevd-at.lock
mkdir -p "$CACHE"
exec 9>"$lock"
flock 9
if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir"
    mkdir -p "$tree"
    git archive "$commit" | tar -x -C "$tree"
    version="$(cat "$tree/VERSION")-$short"
    echo "image-at: building hostdevd $version (commit $short) in $tree" >&2
    # Outside any git work tree: the commit's time and id are given, not read.
    (
        cd "$tree"
        export SOURCE_DATE_EPOCH
        SOURCE_DATE_EPOCH=$(git -C "$OLDPWD" log -1 --format=%ct "$commit")
        make -s -j"$(nproc)" VERSION="$version" COMMIT="$short" bin/hostdevd >"$dir/build.log" 2>&1 &&
            VERSION="$version" make -s VERSION="$version" COMMIT="$short" ARCH=amd64 image >>"$dir/build.log" 2>&1
    ) || { tail -20 "$dir/build.log" >&2; echo "image-at: the build of $short failed ($dir/build.log)" >&2; exit 1; }
    archive=$(ls "$tree"/build/image/hostdevd-*.tar)
    printf '%s localhost/hostdevd:%s %s\n' "$archive" "$version" "$version" >"$dir/out"
    touch "$dir/.complete"
fi
read -r archive image tag <"$dir/out"
echo "$archive $image $tag $tree"
