#!/usr/bin/env bash
# test/integration/test_version.sh - one version everywhere: the file VERSION is the tag of the
# image make image builds (hack/image.sh name), the image the manifests and the chart install,
# the chart's appVersion, what `hostdevd version` prints (with its commit beside it), and every
# localhost/hostdevd:<tag> and newTag the README and docs/ tell a user to write. No cluster.
SUITE=version
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

V=$(cat VERSION)
[[ $V =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] && pass "VERSION is $V (major.minor.patch)" || fail "VERSION is a semantic version" "$V"
NAME=$(hack/image.sh name)
[ "${NAME%% *}" = "localhost/hostdevd:$V" ] && pass "make image builds localhost/hostdevd:$V" ||
    fail "the image make image builds" "$NAME"
BAD=$(grep -rhoE 'image: *[^ ]*hostdevd:[^ "]*' manifests/ charts/ | grep -v ":$V\$" || true)
N=$(grep -rhoE 'image: *[^ ]*hostdevd:[^ "]*' manifests/ | wc -l)
[ -z "$BAD" ] && [ "$N" -ge 2 ] && pass "the manifests' $N images are localhost/hostdevd:$V" ||
    fail "the manifests' images are the version's" "$BAD"
OUT=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/hostdevd/Chart.yaml)
[ "$OUT" = "$V" ] && pass "the chart's appVersion is $V (its default image tag)" || fail "the chart's appVersion" "$OUT"
HELM=$(hack/helm-build.sh) || fail "hack/helm-build.sh builds helm"
OUT=$("$HELM" template x charts/hostdevd 2>&1 | grep -oE 'image: *"?[^ "]*hostdevd:[^ "]*' | sort -u)
[ "$(grep -c . <<<"$OUT")" = 1 ] && [[ $OUT == *"hostdevd:$V" ]] &&
    pass "helm template installs hostdevd:$V" || fail "the chart's rendered images" "$OUT"
OUT=$("$TEST_BIN/hostdevd" version)
[[ $OUT =~ ^"hostdevd $V ("[^\ ()]+")"$ ]] && pass "hostdevd version: $OUT" ||
    fail "hostdevd version prints the version and the commit" "$OUT"
OUT=$(make -n image ARCH=amd64 2>&1 | grep 'hack/deps.sh' || true)
[ "$OUT" = "hack/deps.sh image" ] && pass "make image ARCH=amd64 installs what the image needs (hack/deps.sh image), not the test toolchain nor the cross compiler" ||
    fail "make image ARCH=amd64's dependencies" "$OUT"
OUT=$(make -n image 2>&1 | grep 'hack/deps.sh' | paste -sd' ' || true)
[ "$OUT" = "hack/deps.sh image hack/deps.sh arm64" ] && pass "make image (both platforms) adds the cross compiler (hack/deps.sh arm64), not the test toolchain" ||
    fail "make image's dependencies" "$OUT"
# what the README and docs/ tell a user to write
BAD=$(grep -rnoE 'localhost/hostdevd:[0-9][^ `"),]*|newTag: *"[^"]*"' README.md docs/ |
    grep -vE "hostdevd:$V\$|newTag: *\"$V\"" || true)
[ -z "$BAD" ] && pass "README and docs/ name no other version of the image" || fail "versions named in README and docs/" "$BAD"
finish
