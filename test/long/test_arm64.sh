#!/usr/bin/env bash
# test/long/test_arm64.sh - linux/arm64 beside linux/amd64 (make test-long; the cross build and
# emulation cost minutes make test does not have; test_image builds ARCH=amd64 only).
#
# Two clean clones of HEAD at different paths each run `make image` (the index: linux/amd64 and
# linux/arm64, the arm64 binary from Debian's cross compiler against the :arm64 sysroot); both
# must give the same index digest and the same archive bytes. `skopeo inspect --raw` must show an
# OCI index with exactly linux/amd64 then linux/arm64; each platform's config its architecture
# and the version and revision labels; the arm64 layer no more than 5% larger than the amd64 one
# (compressed and unpacked). The arm64 image's files: `file` says its binary is aarch64, every
# ELF in it is AArch64, its package list names the :arm64 packages. hack/image.sh refuses an
# amd64 binary in the arm64 image. Then under qemu-user (hack/qemu-user.sh: a private user and
# mount namespace with its own binfmt_misc; the host's binfmt_misc is checked unchanged
# afterwards): the arm64 unit runner (build/arm64/unit-tests, plain build: no failure), every
# fuzz corpus replayed by the arm64 replays, and the arm64 image's own root filesystem (its layer,
# unpacked from the archive) chrooted into: `hostdevd inventory` on a fixture tree prints what the
# native amd64 binary prints on the same tree, and its agent against the test's control plane
# publishes the tree's devices, answers /healthz and /readyz, and exits 0 on SIGTERM.
#   ARM64_CLEAN_CLONES=0   build the image in this tree instead of two clean clones (faster; no
#                          reproducibility check)
# shellcheck disable=SC2034,SC2317 # lib.sh reads SUITE; all, healthz, readyz run through check, eventually
SUITE=long-arm64
# shellcheck source=test/integration/lib.sh disable=SC1091
. "$(dirname "$0")/../integration/lib.sh"
cd "$ROOT" || exit 1

DESC=test/fixtures/sysfs/usb-server.txt
NODE=arm64-node
REV=$(git rev-parse HEAD)
QEMU=(hack/qemu-user.sh)
T0=$SECONDS
# check DESCRIPTION DETAIL COMMAND...: pass if the command succeeds, else fail with DETAIL.
check() {
    local what=$1 detail=$2
    shift 2
    if "$@"; then pass "$what"; else fail "$what" "$detail"; fi
}
# all CONDITION...: each CONDITION (a string of test(1) arguments, word-split) holds.
all() {
    local c
    for c in "$@"; do
        # shellcheck disable=SC2086 # the words of a test
        test $c || return 1
    done
}
binfmt_state() { ls -A /proc/sys/fs/binfmt_misc 2>&1; grep -c binfmt_misc /proc/self/mounts; }
BINFMT_BEFORE=$(binfmt_state)

cluster_start
ADMIN=$TEST_DIR/cluster/admin.kubeconfig

echo "--- make image (linux/amd64 + linux/arm64) in two clean clones, twice the same digest"
build_clone() {
    local t0=$SECONDS
    git clone -q "$ROOT" "$1" && git -C "$1" checkout -q --detach "$REV" &&
        make -C "$1" -j2 image >"$1.log" 2>&1 || return 1
    echo $((SECONDS - t0))
}
A=$TEST_DIR/a
B=$TEST_DIR/clone-b
LOG=$A.log
if [ "${ARM64_CLEAN_CLONES:-1}" = 0 ]; then
    A=$ROOT
    make -j2 image >"$LOG" 2>&1 || { fail "make image" "$(tail -20 "$LOG")"; finish; }
elif TA=$(build_clone "$A") && TB=$(build_clone "$B"); then
    pass "make image (both platforms) in two clean clones (${TA}s, ${TB}s: two release builds and the index)"
else
    fail "make image in two clean clones" "$(tail -20 "$A.log" "$B.log" 2>/dev/null)"
    finish
fi
VERSION=$(cat "$A/VERSION")
TAR=build/image/hostdevd-$VERSION.tar
DIGEST=$(cat "$A/build/image/digest")
if [ "${ARM64_CLEAN_CLONES:-1}" != 0 ]; then
    if [ "$DIGEST" = "$(cat "$B/build/image/digest")" ] && cmp -s "$A/$TAR" "$B/$TAR"; then
        pass "the same index digest and archive bytes twice ($DIGEST)"
        echo "  clone a: $DIGEST, $(sha256sum <"$A/$TAR" | cut -c1-16)... archive"
        echo "  clone b: $(cat "$B/build/image/digest"), $(sha256sum <"$B/$TAR" | cut -c1-16)... archive"
    else
        fail "the same index digest and archive bytes twice" "$DIGEST, $(cat "$B/build/image/digest")"
    fi
fi
grep -h '^image: ' "$LOG" | sed 's/^/  /'

RAW=$(skopeo inspect --raw "oci-archive:$A/$TAR" 2>&1)
echo "$RAW" | jq -c '{mediaType, manifests: [.manifests[] | {platform, digest: .digest[0:19]}]}' 2>/dev/null | sed 's/^/  /'
PLATFORMS=$(jq -r '.mediaType, (.manifests[] | .platform.os + "/" + .platform.architecture)' <<<"$RAW" 2>/dev/null | paste -sd' ')
check "skopeo inspect --raw: an OCI index of linux/amd64 then linux/arm64" "$RAW" \
    [ "$PLATFORMS" = "application/vnd.oci.image.index.v1+json linux/amd64 linux/arm64" ]
for arch in amd64 arm64; do
    OUT=$(skopeo inspect --override-arch "$arch" "oci-archive:$A/$TAR" 2>&1)
    expect_contains "linux/$arch: its config's architecture, the version and revision labels" "$OUT" \
        "\"Architecture\": \"$arch\"" "\"org.opencontainers.image.version\": \"$VERSION\"" \
        "\"org.opencontainers.image.revision\": \"$REV\""
done
# layer SIZE of ARCH: the compressed layer's bytes, from the index's manifest.
layer() { sed -n "s/^image: linux\/$1 .*: layer \([0-9]*\) bytes compressed, \([0-9]*\) bytes unpacked$/\1 \2/p" "$LOG"; }
read -r L64 U64 <<<"$(layer arm64)"
read -r LX UX <<<"$(layer amd64)"
check "arm64 as small as amd64: layer $L64 against $LX bytes, unpacked $U64 against $UX (5% at most more)" \
    "$(layer arm64) / $(layer amd64)" all "$((${L64:-0} * 20)) -le $((${LX:-0} * 21))" "${L64:-0} -gt 0" \
    "$((${U64:-0} * 20)) -le $((${UX:-0} * 21))"

echo "--- the arm64 image's files"
IMG=$TEST_DIR/arm64-image
R=$TEST_DIR/arm64-root
mkdir -p "$R"
if skopeo copy -q --override-arch arm64 "oci-archive:$A/$TAR" "dir:$IMG" >/dev/null 2>&1; then
    for l in $(jq -r '.layers[].digest | sub("sha256:"; "")' "$IMG/manifest.json"); do
        tar -xzf "$IMG/$l" -C "$R"
    done
fi
OUT=$(file -b "$R/usr/bin/hostdevd" 2>&1)
expect_contains "file: the arm64 image's /usr/bin/hostdevd is aarch64" "$OUT" "ARM aarch64" "ELF 64-bit"
N=0 BAD=""
while read -r f; do
    N=$((N + 1))
    m=$(readelf -h "$f" 2>/dev/null | sed -n 's/^ *Machine: *//p')
    [ "$m" = AArch64 ] || BAD+="$f: $m"$'\n'
done < <(find "$R" -type f -exec sh -c 'head -c4 "$1" | grep -q "^.ELF"' _ {} \; -print)
check "every ELF file in the arm64 image is AArch64 ($N files)" "$BAD" all "$N -gt 30" "-z ${BAD:+bad}"
PKGS=$(cat "$R/usr/share/doc/hostdevd/packages" 2>&1)
NOT=$(awk '$1 !~ /:arm64$/ && $1 != "ca-certificates" && $1 != "pci.ids" && $1 != "usb.ids"' <<<"$PKGS")
NA=$(grep -c '^lib[a-z0-9.+-]*:arm64 ' <<<"$PKGS")
check "its package list names the :arm64 packages ($NA of them, and 3 data packages)" \
    "$NOT"$'\n'"---"$'\n'"$PKGS" all "-z ${NOT:+other}" "$NA -gt 30" "$(grep -c '^libc6:arm64 \|^libcurl4:arm64 ' <<<"$PKGS") -eq 2"
MISSING=$(while read -r p _; do [ -f "$R/usr/share/doc/${p%%:*}/copyright" ] || echo "$p"; done <<<"$PKGS")
check "a copyright file for each of them" "$MISSING" [ -z "$MISSING" ]
# An amd64 binary where the arm64 one goes: refused (in clone B, which is done with).
if [ "${ARM64_CLEAN_CLONES:-1}" != 0 ]; then
    cp "$B/bin/hostdevd" "$B/build/arm64/hostdevd"
    OUT=$(cd "$B" && ARCH=arm64 hack/image.sh build 2>&1)
    expect_contains "hack/image.sh refuses an amd64 binary in the arm64 image" "$OUT" \
        "build/arm64/hostdevd is a \"Advanced Micro Devices X86-64\" binary, not AArch64"
fi

echo "--- under emulation: qemu-user through a private binfmt_misc"
QV=$("$("${QEMU[@]}" --qemu)" --version | head -1)
echo "  $QV"
for b in build/arm64/unit-tests build/arm64/hostdevd; do
    OUT=$(file -b "$b")
    expect_contains "$b is aarch64 (file)" "$OUT" "ARM aarch64"
done
t0=$SECONDS
"${QEMU[@]}" --net build/arm64/unit-tests >"$TEST_DIR/unit.log" 2>&1
RC=$?
read -r TOTAL RAN PASSED_T FAILED_T <<<"$(awk '$1 == "tests" && NF >= 5 {print $2, $3, $4, $5}' "$TEST_DIR/unit.log")"
check "the arm64 unit runner under qemu-user: ${PASSED_T:-?} of ${TOTAL:-?} tests pass ($((SECONDS - t0))s)" \
    "exit $RC; $(grep -A3 FAILED "$TEST_DIR/unit.log" | head -20)" \
    all "$RC -eq 0" "${FAILED_T:-1} -eq 0" "${RAN:-0} -eq ${TOTAL:-1}" "${PASSED_T:-0} -gt 0"
NF_=0 NI=0 BAD=""
for b in build/arm64/fuzz-replay-*; do
    n=${b#build/arm64/fuzz-replay-}
    if OUT=$("${QEMU[@]}" "$b" "test/fuzz/corpus/$n" 2>&1); then
        NF_=$((NF_ + 1))
        NI=$((NI + $(sed -n 's/^replayed \([0-9]*\) inputs$/\1/p' <<<"$OUT" | tail -1)))
    else
        BAD+="$n: $(tail -3 <<<"$OUT")"$'\n'
    fi
done
check "every fuzz corpus replayed by the arm64 build under qemu-user ($NF_ corpora, $NI inputs)" "$BAD" \
    all "-z ${BAD:+bad}" "$NF_ -gt 0"

# The image's own root, with a fixture tree, a fake /proc and the admin kubeconfig beside.
mkdir -p "$R/fixture/dev" "$R/fixture/kubelet/device-plugins" "$R/fixture/cdi"
hack/mk-sysfs-fixture.sh "$DESC" "$R/fixture/sys" >/dev/null
fake_proc "$R/fixture/proc"
cp "$ADMIN" "$R/fixture/kubeconfig"
in_image() { "${QEMU[@]}" env -u QEMU_LD_PREFIX chroot "$R" "$@"; }
INV=(inventory --sysfs-root /fixture/sys --proc-root /fixture/proc --node-name "$NODE" -o json)
ARM=$(in_image /usr/bin/hostdevd "${INV[@]}" 2>"$TEST_DIR/inv.err")
RC=$?
# The same tree at the same path for the native binary: a bind mount in a mount namespace.
# shellcheck disable=SC2016 # the inner shell's arguments
NATIVE=$(unshare --mount sh -c 'mount --bind "$1" /mnt && shift && exec "$@"' _ "$R/fixture" \
    bin/hostdevd inventory --sysfs-root /mnt/sys --proc-root /mnt/proc --node-name "$NODE" -o json 2>&1 |
    sed 's|/mnt/|/fixture/|g')
N=$(jq '.items | length' <<<"$ARM" 2>/dev/null)
check "inventory by the arm64 image under emulation: exit 0, the same $N objects as the amd64 binary's" \
    "exit $RC $(cat "$TEST_DIR/inv.err"); $(diff <(echo "$NATIVE") <(echo "$ARM") | head -10)" \
    all "$RC -eq 0" "${N:-0} -gt 30" "$(cmp -s <(echo "$ARM") <(echo "$NATIVE") && echo 0 || echo 1) -eq 0"

install_crds
create_node "$NODE"
WANT_PCI=$(grep -vE '^\s*(#|$)' "$DESC" | awk '$1 != "usb" && $2 != "0604"' | wc -l)
PORT=$(free_port)
t0=$SECONDS
# (not through in_image: a simple command in the background, so that its every step execs and $!
# is the agent's own process, which SIGTERM must reach)
"${QEMU[@]}" env -u QEMU_LD_PREFIX chroot "$R" /usr/bin/hostdevd agent --node-name "$NODE" --kubeconfig /fixture/kubeconfig \
    --sysfs-root /fixture/sys --dev-root /fixture/dev --proc-root /fixture/proc \
    --kubelet-dir /fixture/kubelet --cdi-dir /fixture/cdi --listen "127.0.0.1:$PORT" \
    --uevent-source none >"$TEST_DIR/agent.log" 2>&1 &
AGENT=$!
track "$AGENT"
healthz() { curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null; }
readyz() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
if eventually 120 healthz && eventually 120 readyz; then
    pass "the arm64 image's agent under emulation answers /healthz and /readyz ($((SECONDS - t0))s)"
else
    fail "the arm64 agent answers /healthz and /readyz" "$(tail -20 "$TEST_DIR/agent.log")"
fi
N=$(kubectl get pcidevices -l "nodename=$NODE" -o name | wc -l)
check "it published the tree's $WANT_PCI PCIDevices" "have $N" [ "$N" -eq "$WANT_PCI" ]
kill -TERM "$AGENT" 2>/dev/null
wait "$AGENT"
RC=$?
check "it exits 0 on SIGTERM" "exit $RC; $(tail -5 "$TEST_DIR/agent.log")" [ "$RC" = 0 ]

check "the host's binfmt_misc is as it was" "before: $BINFMT_BEFORE; after: $(binfmt_state)" \
    [ "$(binfmt_state)" = "$BINFMT_BEFORE" ]
echo "  suite time: $((SECONDS - T0))s"
finish
