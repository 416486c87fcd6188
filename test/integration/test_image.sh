#!/usr/bin/env bash
# test/integration/test_image.sh - `make image` and the image at work. Two clean clones of HEAD
# at different paths each build the image (make image ARCH=amd64: release build, hack/image.sh,
# buildah; the linux/arm64 half of the index is test/long/test_arm64.sh's, in make test-long);
# both must give the same digest and the same archive bytes; the size is printed and the
# archive must stay under 20 MB. The archive's labels carry the version and revision, podman
# loads it as localhost/hostdevd:<version> (its environment has GNUTLS_NO_IMPLICIT_INIT=1; its
# `hostdevd version` prints that version) and
# containerd's ctr imports it under the same name and digest. Then, with podman (runc, host
# network, private storage) against the real control plane: the agent in the image, privileged
# with the host paths its DaemonSet mounts and a read-only root, publishes a fake sysfs tree's
# PCI and USB devices with names from the image's pci.ids and usb.ids and answers /readyz; the
# controller, as the Deployment runs it (uid 65532, no capabilities, read-only root), takes the
# Lease hostdevd-system/hostdevd-controller; both exit 0 on SIGTERM. HEAD is what is built: a
# dirty tree's changes are not in the image.
# shellcheck disable=SC2034 # lib.sh reads it
SUITE=image
# shellcheck source=test/integration/lib.sh disable=SC1091
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

DESC=test/fixtures/sysfs/usb-server.txt
NODE=image-node
REV=$(git rev-parse HEAD)
MAX_BYTES=$((20 * 1000 * 1000))

cluster_start
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
PM=$TEST_DIR/podman
CD=$TEST_DIR/containerd
CD_PID=""
# podman with its own store and state, set here rather than taken from the machine's config:
# vfs works nested or not; cgroupfs and runc because crun refuses hybrid cgroups; file events.
podman_() {
    podman --root "$PM/root" --runroot "$PM/run" --tmpdir "$PM/tmp" --storage-driver vfs \
        --cgroup-manager cgroupfs --events-backend file --runtime runc "$@"
}
# podman raises no limit it cannot: the container gets the limits this shell has.
RUN=(--network host --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
cleanup() {
    podman_ rm --all --force --time 0 >/dev/null 2>&1
    [ -z "$CD_PID" ] || { kill "$CD_PID" 2>/dev/null; wait "$CD_PID" 2>/dev/null; }
    umount -R "$CD/root" 2>/dev/null
    cluster_stop
}
trap cleanup EXIT
# check DESCRIPTION DETAIL COMMAND...: pass if the command succeeds, else fail with DETAIL.
check() {
    local what=$1 detail=$2
    shift 2
    if "$@"; then pass "$what"; else fail "$what" "$detail"; fi
}

echo "--- make image in two clean clones, twice the same digest"
# clone DIR: a clean clone of HEAD, then make image in it; prints the seconds it took.
build_clone() {
    local t0=$SECONDS
    git clone -q "$ROOT" "$1" && git -C "$1" checkout -q --detach "$REV" &&
        make -C "$1" -j2 image ARCH=amd64 >"$1.log" 2>&1 || return 1
    echo $((SECONDS - t0))
}
A=$TEST_DIR/a
B=$TEST_DIR/clone-b
if TA=$(build_clone "$A") && TB=$(build_clone "$B"); then
    pass "make image in two clean clones (${TA}s, ${TB}s: release build and image)"
else
    fail "make image in two clean clones" "$(tail -20 "$A.log" "$B.log" 2>/dev/null)"
    finish
fi
VERSION=$(cat "$A/VERSION")
NAME=localhost/hostdevd:$VERSION
TAR=build/image/hostdevd-$VERSION.tar
DIGEST=$(cat "$A/build/image/digest")
if [ "$DIGEST" = "$(cat "$B/build/image/digest")" ] && cmp -s "$A/$TAR" "$B/$TAR"; then
    pass "the same digest and archive bytes twice ($DIGEST)"
else
    fail "the same digest and archive bytes twice" "$DIGEST, $(cat "$B/build/image/digest")"
fi
grep '^image: ' "$A.log" | sed 's/^/  /'
SIZE=$(stat -c %s "$A/$TAR")
check "archive under 20 MB ($SIZE bytes)" "$SIZE bytes" [ "$SIZE" -lt "$MAX_BYTES" ]

OUT=$(skopeo inspect "oci-archive:$A/$TAR" 2>&1)
expect_contains "skopeo reads the archive: digest, version, revision, source labels" "$OUT" \
    "\"Digest\": \"$DIGEST\"" "\"org.opencontainers.image.version\": \"$VERSION\"" \
    "\"org.opencontainers.image.revision\": \"$REV\"" "\"org.opencontainers.image.source\": "
OUT=$(podman_ load -i "$A/$TAR" 2>&1)
expect_contains "podman loads it as $NAME" "$OUT" "Loaded image: $NAME"
OUT=$(podman_ image inspect --format '{{.Config.Env}}' "hostdevd:$VERSION" 2>&1)
expect_contains "the image's environment keeps GnuTLS from initialising itself" "$OUT" \
    "GNUTLS_NO_IMPLICIT_INIT=1"
OUT=$(podman_ run --rm "${RUN[@]}" "hostdevd:$VERSION" version 2>&1)
check "hostdevd version in the image prints $VERSION and its commit" "$OUT" \
    [ "$OUT" = "hostdevd $VERSION ($(git -C "$A" describe --always --dirty))" ]

mkdir -p "$CD"
cat >"$CD/config.toml" <<EOF
version = 2
root = "$CD/root"
state = "$CD/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$CD/sock"
EOF
containerd --config "$CD/config.toml" >"$CD/log" 2>&1 &
CD_PID=$!
if eventually 10 test -S "$CD/sock" &&
    ctr --address "$CD/sock" -n k8s.io images import "$A/$TAR" >/dev/null 2>&1; then
    OUT=$(ctr --address "$CD/sock" -n k8s.io images ls 2>&1)
    expect_contains "ctr imports it as $NAME with the same digest" "$OUT" "$NAME" "$DIGEST"
else
    fail "ctr imports the archive" "$(tail -5 "$CD/log")"
fi

echo "--- the agent in the image, as its DaemonSet runs it"
install_crds
create_node "$NODE"
SYS=$TEST_DIR/sys
DEV=$TEST_DIR/dev
hack/mk-sysfs-fixture.sh "$DESC" "$SYS" >/dev/null
# The device nodes the agent checks for USB devices (plain files stand in for them).
for p in "$SYS"/bus/usb/devices/*; do
    d=$(readlink -f "$p")
    if [ ! -f "$d/devnum" ] || [ ! -f "$d/idVendor" ]; then continue; fi
    n=$DEV/bus/usb/$(printf %03d "$(cat "$d/busnum")")/$(printf %03d "$(cat "$d/devnum")")
    mkdir -p "${n%/*}" && : >"$n"
done
mkdir -p "$TEST_DIR/device-plugins" "$TEST_DIR/run-udev" "$TEST_DIR/modules"
MODULES=/lib/modules # (a machine without modules gets an empty directory)
[ -d "$MODULES" ] || MODULES=$TEST_DIR/modules
WANT_PCI=$(grep -vE '^\s*(#|$)' "$DESC" | awk '$1 != "usb" && $2 != "0604"' | wc -l)
PORT=$(free_port)
# The DaemonSet's mounts (/sys, /dev, /lib/modules, the device-plugin directory, /run/udev),
# its host network and PID namespace and its read-only root; the fake tree beside them.
podman_ run "${RUN[@]}" -d --name agent --privileged --pid host --read-only \
    -v /sys:/sys -v /dev:/dev:ro -v "$MODULES:/lib/modules:ro" \
    -v "$TEST_DIR/device-plugins:/var/lib/kubelet/device-plugins" -v "$TEST_DIR/run-udev:/run/udev:ro" \
    -v "$SYS:/fixture/sys:ro" -v "$DEV:/fixture/dev:ro" -v "$ADMIN:/etc/hostdevd/kubeconfig:ro" \
    -e NODE_NAME="$NODE" "hostdevd:$VERSION" agent --kubeconfig /etc/hostdevd/kubeconfig \
    --sysfs-root /fixture/sys --dev-root /fixture/dev --listen "127.0.0.1:$PORT" \
    >/dev/null 2>"$TEST_DIR/agent-run.log"
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
if eventually 60 ready; then
    pass "agent ready (/readyz)"
else
    fail "agent ready (/readyz)" "$(cat "$TEST_DIR/agent-run.log"; podman_ logs agent 2>&1 | tail -20)"
fi
N=$(kubectl get pcidevices -l "nodename=$NODE" -o name | wc -l)
check "$WANT_PCI PCIDevices published" "have $N" [ "$N" -eq "$WANT_PCI" ]
N=$(kubectl get usbdevices -l "nodename=$NODE" -o name | wc -l)
check "5 USBDevices published" "have $N" [ "$N" -eq 5 ]
# Names as pci.ids (read from the image's pci.ids.gz) and usb.ids give them.
AST=$(awk -F'  ' '/^1a03 /{f=1; next} f && /^\t2000 /{print $2; exit}' /usr/share/misc/pci.ids)
STICK=$(awk -F'  ' '/^0951 /{f=1; next} f && /^\t1666 /{print $2; exit}' /usr/share/misc/usb.ids)
OUT=$(kubectl get pcidevices,usbdevices -l "nodename=$NODE" -o jsonpath='{range .items[*]}{.status.description}{"\n"}{end}')
expect_contains "descriptions from the image's pci.ids and usb.ids" "$OUT" "$AST" "$STICK"
podman_ stop --time 10 agent >/dev/null 2>&1
RC=$(podman_ inspect agent --format '{{.State.ExitCode}}' 2>&1)
check "agent exits 0 on SIGTERM" "exit $RC" [ "$RC" = 0 ]

echo "--- the controller in the image, as its Deployment runs it"
kubectl apply -f manifests/controller-rbac.yaml >/dev/null
sa_kubeconfig hostdevd-system hostdevd-controller "$TEST_DIR/ctl.kubeconfig"
kubectl config view --raw --flatten --kubeconfig "$TEST_DIR/ctl.kubeconfig" >"$TEST_DIR/ctl-flat.kubeconfig"
chmod 0644 "$TEST_DIR/ctl-flat.kubeconfig"
PORT=$(free_port)
podman_ run "${RUN[@]}" -d --name controller --user 65532:65532 --cap-drop ALL \
    --security-opt no-new-privileges --read-only \
    -v "$TEST_DIR/ctl-flat.kubeconfig:/etc/hostdevd/kubeconfig:ro" \
    -e POD_NAMESPACE=hostdevd-system -e POD_NAME=hostdevd-controller-image-0 "hostdevd:$VERSION" \
    controller --kubeconfig /etc/hostdevd/kubeconfig --listen "127.0.0.1:$PORT" >/dev/null
holder() { kubectl get lease -n hostdevd-system hostdevd-controller -o jsonpath='{.spec.holderIdentity}'; }
leads() { [ "$(holder)" = hostdevd-controller-image-0 ]; }
if eventually 30 leads; then
    pass "controller (uid 65532, no capabilities) takes the Lease hostdevd-system/hostdevd-controller"
else
    fail "controller takes the Lease" "holder \"$(holder)\"; $(podman_ logs controller 2>&1 | tail -20)"
fi
check "controller answers /healthz" "$(podman_ logs controller 2>&1 | tail -5)" \
    curl -fsS -o /dev/null "http://127.0.0.1:$PORT/healthz"
podman_ stop --time 10 controller >/dev/null 2>&1
released() { [ -z "$(holder)" ]; }
RC=$(podman_ inspect controller --format '{{.State.ExitCode}}' 2>&1)
eventually 10 released
check "controller gives the Lease up and exits 0 on SIGTERM" "holder \"$(holder)\", exit $RC" \
    [ "$(holder)/$RC" = /0 ]

finish
