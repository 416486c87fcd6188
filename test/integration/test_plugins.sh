#!/usr/bin/env bash
# test/integration/test_plugins.sh - the agent's kubelet device plugins against a real kubelet
# v1.37.1 (hack/kubelet.sh: fake CRI, registered with the private control plane). The agent runs
# on a fake sysfs tree (test/fixtures/sysfs/plugins-node.txt: two identical e1000e already on
# vfio-pci, a USB stick). Checks: claimed devices are offered (the Node's allocatable shows each
# resource with its count); a pod asking for a PCI device gets /dev/vfio/vfio, its group's node
# and PCI_RESOURCE_<NAME>; a pod asking for the USB device gets its node (chowned to 107) and
# USB_RESOURCE_<NAME>=bus:device; asking for more than there is fails with kubelet's reason; a
# malformed peer (garbage, a truncated HTTP/2 frame) leaves the plugin serving; a released claim
# withdraws its device; after each of PLUGIN_RESTARTS (20; 100 in test/long/test_restarts.sh)
# kubelet restarts the device plugins and the DRA plugin are registered again and the Node's
# allocatable, written after the restart, has every resource's count, and at the end the agent
# has the fds and threads it had before; restarted while the agent is frozen, kubelet offers 0
# of each until the agent, thawed, registers again; a NIC moved off vfio-pci behind our back is
# no longer offered as healthy, and is again once back on vfio-pci; the claimed USB stick
# unplugged stays in the list as Unhealthy (allocatable 0, capacity 1) and turns Healthy when
# plugged back; a claim deleted while a VM holds its group (a pty the "VMM" holds with TIOCEXCL,
# the agent without CAP_SYS_ADMIN) waits DeviceInUse and every ListAndWatch message kubelet takes
# meanwhile still has the device, until the VMM exits; the fixture's two mtty-2 mdevs, adopted by
# the agent as VGPUDevices, are offered as devices.harvesterhci.io/mtty-2 and a pod asking for
# both gets MDEV_PCI_RESOURCE_<NAME>=<uuid>,<uuid> and both groups' nodes; a claimed NIC made
# unhealthy (its PCIDevice's Healthy=False condition taken back by the health store) is sent
# Unhealthy (allocatable drops by one, capacity stays) and its claim stays bound. Prints claim
# Ready -> allocatable, and restart -> re-registered (median and worst).
# test-lock: kubelet (the kubelet harness: its sysctls are global; see hack/run-tests.sh)
SUITE=plugins
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

AGENT=$TEST_BIN/hostdevd
DESC=test/fixtures/sysfs/plugins-node.txt
RESTARTS=${PLUGIN_RESTARTS:-20}
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP $SUITE: needs root (a real kubelet)"
    finish
fi
cluster_start
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
install_crds
export KUBELET_V=2 # kubelet logs every ListAndWatch message it takes (a claim deleted in use, below)
kubelet_start plug-node
KUBELET_DIR=$TEST_DIR/kubelet
NODE=$KUBELET_NODE
SYS=$TEST_DIR/sys
DEV=$TEST_DIR/dev
hack/mk-sysfs-fixture.sh "$DESC" "$SYS" >/dev/null
mkdir -p "$SYS/module/vfio_iommu_type1" "$DEV/bus/usb/001" "$TEST_DIR/proc/1" "$TEST_DIR/proc/net"
: >"$DEV/bus/usb/001/002"
fake_proc "$TEST_DIR/proc"
PORT=$(free_port)
# Without CAP_SYS_ADMIN, as the DaemonSet's agent (its capabilities are listed): a tty opened
# with TIOCEXCL then refuses it with EBUSY, the fake /dev/vfio/<group> a VM holds (below).
agent_run --without-sys-admin --kubeconfig "$ADMIN" --proc-root "$TEST_DIR/proc" --dev-root "$DEV" \
    --kubelet-dir "$(dirname "$DEVICE_PLUGIN_DIR")" --resync 3600 --uevent-source none -v 1
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
if eventually 60 ready; then pass "agent ready next to kubelet"; else fail "agent ready" "$(tail -20 "$TEST_DIR/agent.log")"; finish; fi

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN {printf "%.2f", a - b}'; }
# (polled: curl and jq, lib.sh's kapi)
node_status() { kapi GET "/api/v1/nodes/$NODE" 2>/dev/null | jq -r --arg r "$2" ".status.$1[\$r] // empty"; }
allocatable() { node_status allocatable "$1"; }
has_allocatable() { [ "$(allocatable "$1")" = "$2" ]; }
metric() { curl -fsS "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
pci_name() { local a=${1//:/}; echo "$NODE-${a//./}"; }
NIC1=0000:00:04.0
NIC2=0000:00:05.0
USB=$NODE-0951-1666-1-2
RES_PCI=$(kubectl get pcidevice "$(pci_name $NIC1)" -o jsonpath='{.status.resourceName}')
RES_USB=kubevirt.io/$USB

echo "--- claims offered to kubelet"
T0=$(now)
for a in $NIC1 $NIC2; do
    printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s}\n' \
        "$(pci_name "$a")" "$a" "$NODE" | kubectl create -f - >/dev/null
done
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: USBDeviceClaim\nmetadata: {name: %s}\nspec: {}\n' "$USB" |
    kubectl create -f - >/dev/null
bound() { [ "$(kubectl get pcideviceclaim "$(pci_name "$1")" -o jsonpath='{.status.passthroughEnabled}')" = true ]; }
usb_ready() { [ "$(kubectl get usbdeviceclaim "$USB" -o jsonpath='{.status.conditions[0].reason}')" = Enabled ]; }
if eventually 60 bound $NIC1 && eventually 30 bound $NIC2 && eventually 30 usb_ready; then
    READY_AT=$(now)
    pass "both NIC claims bound and the USB claim enabled ($(since "$T0") s)"
else
    fail "claims ready" "$(kubectl get pcideviceclaims,usbdeviceclaims -o wide; tail -20 "$TEST_DIR/agent.log")"
    finish
fi
if eventually 30 has_allocatable "$RES_PCI" 2 && eventually 30 has_allocatable "$RES_USB" 1; then
    READY_TO_ALLOCATABLE=$(since "$READY_AT")
    pass "the Node's allocatable: $RES_PCI 2, $RES_USB 1 (${READY_TO_ALLOCATABLE} s after the claims were Ready)"
else
    fail "allocatable" "$(kubectl get node "$NODE" -o jsonpath='{.status.allocatable}'); $(tail -20 "$TEST_DIR/agent.log")"
fi

pod() { # name resource count
    kubectl create -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  nodeName: $NODE
  hostNetwork: true
  automountServiceAccountToken: false
  tolerations: [{operator: Exists}]
  containers:
  - name: c
    image: virt-launcher
    resources:
      limits: {$2: "$3"}
EOF
}
phase() { kubectl get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
running() { [ "$(phase "$1")" = Running ]; }
record() { grep "\"pod\":\"$1\"" "$CRI_RECORD" | tail -1; }
env_name() { echo "$1_$(tr 'a-z/.' 'A-Z__' <<<"$2")"; }

echo "--- pods"
pod p1 "$RES_PCI" 1
if eventually 30 running p1; then
    REC=$(record p1)
    ENV=$(env_name PCI_RESOURCE "$RES_PCI")
    expect_contains "a pod asking for one NIC gets /dev/vfio/vfio, its group's node and $ENV" "$REC" \
        "\"$ENV\"" '"/dev/vfio/vfio"' '"mrw"'
    grep -qE "\"$ENV\",\"value\":\"0000:00:0(4|5).0\"|\"$ENV\":\"0000:00:0(4|5).0\"" <<<"$REC" &&
        grep -qE '/dev/vfio/(3|4)"' <<<"$REC" &&
        pass "... with one address and the node of that device's group" || fail "PCI env and group" "$REC"
else
    fail "pod p1 running" "$(kubectl describe pod p1 | tail -15)"
fi
pod u1 "$RES_USB" 1
if eventually 30 running u1; then
    REC=$(record u1)
    ENV=$(env_name USB_RESOURCE "$RES_USB")
    expect_contains "a pod asking for the USB stick gets its node and $ENV=1:2" "$REC" "$ENV" '1:2' \
        '"/dev/bus/usb/001/002"'
    [ "$(stat -c %u:%g "$DEV/bus/usb/001/002")" = 107:107 ] && pass "the USB node was handed to KubeVirt's qemu user (107:107)" ||
        fail "USB node chowned" "$(stat -c %u:%g "$DEV/bus/usb/001/002")"
else
    fail "pod u1 running" "$(kubectl describe pod u1 | tail -15)"
fi
pod p2 "$RES_PCI" 2
refused() { kubectl get events --field-selector involvedObject.name=p2 -o jsonpath='{.items[*].message}' | grep -q "requested number of devices unavailable"; }
if eventually 30 refused; then pass "a pod asking for 2 NICs when 1 is free is refused: kubelet's reason"; else
    fail "over-request refused" "$(phase p2); $(kubectl get events --field-selector involvedObject.name=p2)"; fi

echo "--- mediated devices (the fixture's two mtty-2 instances, adopted by the agent as VGPUDevices)"
RES_MDEV=devices.harvesterhci.io/mtty-2
M1=1a2b3c4d-6e2a-4f3b-9b1e-1d2c3e4f5a61
M2=5e6f7a8b-6e2a-4f3b-9b1e-1d2c3e4f5a62
adopted() { # the agent's VGPUDevices of both instances, configured, with their resource and group
    [ "$(kubectl get vgpudevices -o json | jq --arg r "$RES_MDEV" '[.items[].status | select(.vGPUStatus == "vGPUConfigured" and .resourceName == $r and (.iommuGroup // "") != "") | .uuid] | length')" = 2 ]
}
if eventually 30 adopted; then pass "the agent publishes both instances as configured VGPUDevices of $RES_MDEV"; else
    fail "mdev adopted" "$(kubectl get vgpudevices -o json | jq -c '[.items[] | {n: .metadata.name, s: .status}]')"; fi
capacity() { node_status capacity "$1"; }
mdev_offered() { [ "$(allocatable $RES_MDEV)" = 2 ] && [ "$(capacity $RES_MDEV)" = 2 ]; }
if eventually 30 mdev_offered; then
    pass "both instances offered to kubelet as $RES_MDEV: capacity 2, allocatable 2"
else
    fail "mdev offered" "capacity $(capacity $RES_MDEV) allocatable $(allocatable $RES_MDEV); $(tail -5 "$TEST_DIR/agent.log")"
fi
pod m1 "$RES_MDEV" 2
if eventually 30 running m1; then
    REC=$(record m1)
    ENV=$(env_name MDEV_PCI_RESOURCE "$RES_MDEV")
    expect_contains "a pod asking for two instances gets $ENV, /dev/vfio/vfio and both groups" "$REC" \
        '"MDEV_PCI_RESOURCE_DEVICES_HARVESTERHCI_IO_MTTY-2"' '"/dev/vfio/vfio"' '"/dev/vfio/20"' '"/dev/vfio/21"'
    grep -qE "\"$ENV\",\"value\":\"($M1,$M2|$M2,$M1)\"|\"$ENV\":\"($M1,$M2|$M2,$M1)\"" <<<"$REC" &&
        pass "... whose value is the two UUIDs, comma-joined (what virt-launcher reads)" || fail "mdev env value" "$REC"
else
    fail "pod m1 running" "$(kubectl describe pod m1 | tail -15)"
fi
kubectl delete pod m1 --wait=false >/dev/null

echo "--- Allocate round trip (our client, a connection per call, release build)"
PSOCK=$(find "$DEVICE_PLUGIN_DIR" -name "hostdevd-intel.com*.sock" | head -1)
REQ=0a0e0a0c$(printf '%s' "$NIC1" | od -An -tx1 | tr -d ' \n')
OUT=$(build/release/grpctool bench "$PSOCK" /v1beta1.DevicePlugin/Allocate 200 "$REQ" 2>&1)
if [[ $OUT =~ median_us=([0-9]+)\ p90_us=([0-9]+) ]]; then
    ALLOC_RTT="median ${BASH_REMATCH[1]} us, p90 ${BASH_REMATCH[2]} us"
    pass "200 Allocate calls answered ($ALLOC_RTT)"
else
    fail "Allocate round trips" "$OUT"
fi

echo "--- a malformed peer"
SOCK=$(find "$DEVICE_PLUGIN_DIR" -name "hostdevd-kubevirt.io_*.sock" | head -1)
python3 - "$SOCK" <<'EOF'
import socket, sys
for payload in (b"\x00garbage\xff" * 100,
                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x10\x01",
                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\xff" * 9):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(payload)
    s.close()
EOF
kubectl delete pod u1 --wait=false >/dev/null
eventually 30 bash -c "! kubectl get pod u1 >/dev/null 2>&1" || true
pod u2 "$RES_USB" 1
if eventually 30 running u2; then pass "after garbage, a truncated frame and a closed connection the USB plugin still serves kubelet"; else
    fail "plugin survives a malformed peer" "$(kubectl describe pod u2 | tail -10); $(tail -5 "$TEST_DIR/agent.log")"; fi
kill -0 "$AGENT_PID" && pass "the agent is alive" || fail "agent alive" "$(tail -20 "$TEST_DIR/agent.log")"

echo "--- kubelet restarts"
# After each restart: both device plugins and the DRA plugin registered again (the agent's
# counters), and a Node status the restarted kubelet wrote (a resourceVersion after the one
# before the restart: one etcd's revisions are one sequence, and only kubelet writes the Node)
# with every resource's count (kubelet starts with no healthy device until its plugin registers;
# it always writes its first status, whether anything changed or not, so a heartbeat time, in
# whole seconds and written only on a change, cannot tell the writes apart).
DRA_OK='hostdevd_dra_registrations_total{result="ok"}'
node_rv() { kubectl get node "$NODE" -o jsonpath='{.metadata.resourceVersion}'; }
node_offers() { # resourceVersion PCI-count USB-count: a later Node status has these counts
    kubectl get node "$NODE" -o json | jq -e --argjson rv "$1" --arg p "$RES_PCI" --arg u "$RES_USB" \
        --arg np "$2" --arg nu "$3" '(.metadata.resourceVersion | tonumber) > $rv
        and .status.allocatable[$p] == $np and .status.allocatable[$u] == $nu' >/dev/null
}
count_fds() { find "/proc/$AGENT_PID/fd" -mindepth 1 -maxdepth 1 | wc -l; }
count_threads() { find "/proc/$AGENT_PID/task" -mindepth 1 -maxdepth 1 | wc -l; }
FDS0=$(count_fds)
THREADS0=$(count_threads)
LAT=()
for i in $(seq 1 "$RESTARTS"); do
    BEFORE=$(metric hostdevd_plugin_registrations_total)
    DRA_BEFORE=$(metric "$DRA_OK")
    RV=$(node_rv)
    T=$(now)
    # The harness itself (kubelet Ready again) is not under test: one retry, said aloud.
    if ! hack/kubelet.sh restart "$KUBELET_DIR" >"$TEST_DIR/restart.log" 2>&1; then
        echo "  note: restart $i: the harness failed once, retrying: $(tail -3 "$TEST_DIR/restart.log" | tr '\n' ' ')"
        T=$(now)
        hack/kubelet.sh up "$KUBELET_DIR" "$TEST_DIR/cluster" "$NODE" >"$TEST_DIR/restart.log" 2>&1 ||
            { fail "kubelet restart $i" "$(tail -8 "$TEST_DIR/restart.log")"; break; }
    fi
    reregistered() {
        [ "$(metric hostdevd_plugin_registrations_total)" -ge "$((BEFORE + 2))" ] &&
            [ "$(metric "$DRA_OK")" -ge "$((DRA_BEFORE + 1))" ]
    }
    if eventually 30 reregistered; then LAT+=("$(since "$T")"); else fail "re-registered after restart $i" "$(tail -5 "$TEST_DIR/agent.log")"; break; fi
    if ! eventually 30 node_offers "$RV" 2 1; then
        fail "allocatable after restart $i" "$(kubectl get node "$NODE" -o jsonpath='{.status.allocatable}')"
        break
    fi
done
if [ "${#LAT[@]}" -eq "$RESTARTS" ]; then
    STATS=$(printf '%s\n' "${LAT[@]}" | sort -n | awk '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "median %.2f s, worst %.2f s", m, v[NR]}')
    pass "$RESTARTS kubelet restarts, each followed by the device plugins' and the DRA plugin's registration ($STATS from the restart command) and the Node's allocatable $RES_PCI 2, $RES_USB 1 written after it"
fi
# The sockets of the last registrations settle; then the same descriptors and threads as before.
same_fds() { [ "$(count_fds)" -eq "$FDS0" ] && [ "$(count_threads)" -eq "$THREADS0" ]; }
if eventually 10 same_fds; then pass "the agent's open fds ($FDS0) and threads ($THREADS0) as before the restarts"; else
    fail "fds and threads after the restarts" "fds $FDS0 -> $(count_fds), threads $THREADS0 -> $(count_threads): $(ls -l "/proc/$AGENT_PID/fd")"; fi

# A registration started while a retry was pending (kubelet.sock created while the plugin's
# first attempt waited to retry) once left the retry armed: kubelet refused the second one and
# the plugin retried for ever, and the descriptors drifted (23 -> 30 after 100 restarts).
REFUSED=$(grep -c "device plugin already connected" "$TEST_DIR/agent.log")
[ "$REFUSED" -eq 0 ] && pass "no registration after a restart refused by kubelet as a duplicate" ||
    fail "duplicate registrations" "$REFUSED refused: $(grep "already connected" "$TEST_DIR/agent.log" | tail -3)"

echo "--- kubelet restarted while the agent is frozen"
# The control for the checks above: without the plugins' registration the restarted kubelet
# offers nothing; thawed, the agent sees its sockets gone and registers again.
kill -STOP "$AGENT_PID"
RV=$(node_rv)
hack/kubelet.sh restart "$KUBELET_DIR" >"$TEST_DIR/restart.log" 2>&1 || fail "kubelet restart (agent frozen)" "$(tail -5 "$TEST_DIR/restart.log")"
if eventually 30 node_offers "$RV" 0 0; then pass "with the agent frozen the restarted kubelet offers 0 of each resource"; else
    fail "nothing offered while frozen" "$(kubectl get node "$NODE" -o jsonpath='{.status.allocatable}')"; fi
RV=$(node_rv)
kill -CONT "$AGENT_PID"
if eventually 30 node_offers "$RV" 2 1; then pass "thawed, it registers again: $RES_PCI 2, $RES_USB 1"; else
    fail "offered after thaw" "$(kubectl get node "$NODE" -o jsonpath='{.status.allocatable}'); $(tail -5 "$TEST_DIR/agent.log")"; fi

echo "--- a device unbound behind our back"
# The fake tree's driver link moved (what an unbind and a probe by someone else leave), and a
# rescan (SIGHUP) to see it.
relink() { ln -sfn "../../../bus/pci/drivers/$2" "$(readlink -f "$SYS/bus/pci/devices/$1")/driver"; }
driver_is() { [ "$(kubectl get pcidevice "$(pci_name "$1")" -o jsonpath='{.status.kernelDriverInUse}')" = "$2" ]; }
relink "$NIC2" virtio-pci
kill -HUP "$AGENT_PID"
if eventually 30 has_allocatable "$RES_PCI" 1 && eventually 30 driver_is "$NIC2" virtio-pci; then
    pass "$NIC2 moved to another driver: no longer offered as healthy ($RES_PCI allocatable 1), its PCIDevice says so"
else
    fail "unbound device withdrawn" "$(allocatable "$RES_PCI"); $(tail -5 "$TEST_DIR/agent.log")"
fi
# Back on vfio-pci, without a rescan: the claim's own retry (it reads sysfs) binds it again, and
# the device is listed, Unhealthy, as its PCIDevice still says virtio-pci. The rescan that
# updates the PCIDevice changes only the device's health, which only a ListAndWatch sent again
# for it tells kubelet (its allocatable counts the healthy devices, its capacity all of them).
offered() { [ "$(capacity "$1")" = "$2" ] && [ "$(allocatable "$1")" = "$3" ]; } # resource all healthy
relink "$NIC2" vfio-pci
if eventually 30 bound "$NIC2" && eventually 30 offered "$RES_PCI" 2 1; then
    pass "$NIC2 back on vfio-pci: its claim binds it again, listed as Unhealthy until a rescan (capacity 2, allocatable 1)"
else
    fail "rebound device listed" "capacity $(capacity "$RES_PCI"), allocatable $(allocatable "$RES_PCI"); $(tail -5 "$TEST_DIR/agent.log")"
fi
kill -HUP "$AGENT_PID"
if eventually 30 has_allocatable "$RES_PCI" 2; then
    pass "its PCIDevice says vfio-pci again: sent as Healthy ($RES_PCI allocatable 2)"
else
    fail "rebound device sent as Healthy" "$(allocatable "$RES_PCI"); $(tail -5 "$TEST_DIR/agent.log")"
fi

echo "--- a claimed USB device unplugged and plugged back"
# Its claim holds it (DeviceUnplugged), so the device stays in the list, Unhealthy: a change of
# health only.
USB_DIR=$(readlink -f "$SYS/bus/usb/devices/1-2")
mv "$USB_DIR" "$TEST_DIR/unplugged-1-2" && mv "$SYS/bus/usb/devices/1-2" "$TEST_DIR/unplugged-1-2.link"
kill -HUP "$AGENT_PID"
if eventually 30 offered "$RES_USB" 1 0; then
    pass "unplugged: kubelet holds it as Unhealthy ($RES_USB allocatable 0, capacity 1)"
else
    fail "unplugged device sent as Unhealthy" "allocatable $(allocatable "$RES_USB"), capacity $(capacity "$RES_USB"); $(tail -5 "$TEST_DIR/agent.log")"
fi
mv "$TEST_DIR/unplugged-1-2" "$USB_DIR" && mv "$TEST_DIR/unplugged-1-2.link" "$SYS/bus/usb/devices/1-2"
kill -HUP "$AGENT_PID"
if eventually 30 has_allocatable "$RES_USB" 1; then
    pass "plugged back: Healthy again ($RES_USB allocatable 1)"
else
    fail "re-plugged device sent as Healthy" "$(allocatable "$RES_USB"); $(tail -5 "$TEST_DIR/agent.log")"
fi

echo "--- a claim deleted while a VM holds its device stays offered until the VM lets go"
# The fake tree's /dev/vfio/3 ($NIC1's group) is a pty a "VMM" holds open with TIOCEXCL: the
# agent's open gets EBUSY, as from a vfio group a VMM holds, and the fake /proc names the VMM.
# kubelet (-v 2) logs every ListAndWatch message it takes ("State pushed for device plugin"
# resourceCapacity=N): what it was sent from the deletion on must never shrink while the claim
# waits; once the VMM exits, the device is restored, the claim goes and kubelet is sent 1.
mkdir -p "$DEV/vfio"
fake_vmm 3
KLOG=$KUBELET_DIR/kubelet.log
holding() { [ -s "$TEST_DIR/proc/$HOLDER/comm" ]; }
# pushed FROM RESOURCE: kubelet's resourceCapacity in each message since line FROM of its log
pushed() {
    tail -n +"$1" "$KLOG" | grep -F '"State pushed for device plugin"' | grep -F "resource=\"$2\"" |
        sed -E 's/.*resourceCapacity=([0-9]+).*/\1/' | tr '\n' ' '
}
pci_reason() { kubectl get pcideviceclaim "$(pci_name "$1")" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}' 2>/dev/null; }
in_use() { [ "$(pci_reason "$1")" = DeviceInUse ]; }
pci_gone() { ! kubectl get pcideviceclaim "$(pci_name "$1")" >/dev/null 2>&1; }
eventually 10 holding || fail "the VMM stand-in holds /dev/vfio/3" "$(cat "$TEST_DIR/holder.log")"
FROM=$(($(wc -l <"$KLOG") + 1))
AGENT_FROM=$(($(wc -l <"$TEST_DIR/agent.log") + 1))
kubectl delete pcideviceclaim "$(pci_name $NIC1)" --wait=false >/dev/null
if eventually 30 in_use $NIC1; then pass "the deleted claim waits: Ready=False DeviceInUse"; else
    fail "the deleted claim waits (DeviceInUse)" "$(kubectl get pcideviceclaim "$(pci_name $NIC1)" -o yaml 2>&1 | tail -15)"; fi
MSG=$(kubectl get pcideviceclaim "$(pci_name $NIC1)" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')
[[ $MSG == "qemu-system-x86 (pid $HOLDER) holds /dev/vfio/3;"* ]] && pass "... naming the VMM: ${MSG%%;*}" ||
    fail "the DeviceInUse message names the VMM" "$MSG"
sleep 2 # a window to see more in (a message sent in it is checked below; none is needed)
SEEN=$(pushed "$FROM" "$RES_PCI")
SHRANK=$(tr ' ' '\n' <<<"$SEEN" | awk 'NF && $1 < 2' | head -1)
WITHDRAWN=$(tail -n +"$AGENT_FROM" "$TEST_DIR/agent.log" | grep -F "resource=\"$RES_PCI\"" |
    grep -E '"No device offered|"Offering devices".* devices=[01]\b' | head -3)
if [ -z "$SHRANK" ] && [ -z "$WITHDRAWN" ] && has_allocatable "$RES_PCI" 2; then
    pass "kubelet's ListAndWatch stream never shrank while the claim waited (messages since the deletion: [${SEEN% }]), allocatable $RES_PCI 2"
else
    fail "kubelet is never sent less while the claim waits" "resourceCapacity per message: [${SEEN% }]; agent: $WITHDRAWN; allocatable $(allocatable "$RES_PCI")"
fi
FROM=$(($(wc -l <"$KLOG") + 1))
kill -TERM "$HOLDER"
if eventually 30 pci_gone $NIC1; then pass "the VMM exits: the claim is released"; else
    fail "the claim is released once the VMM exits" "$(kubectl get pcideviceclaim "$(pci_name $NIC1)" -o yaml 2>&1 | tail -15)"; fi
sent_one() { [[ " $(pushed "$FROM" "$RES_PCI")" == *" 1 "* ]]; }
if eventually 30 sent_one && eventually 30 offered "$RES_PCI" 1 1; then
    pass "... and kubelet is sent 1 device (capacity and allocatable $RES_PCI 1)"
else
    fail "the released device is withdrawn" "messages: [$(pushed "$FROM" "$RES_PCI")]; capacity $(capacity "$RES_PCI"), allocatable $(allocatable "$RES_PCI")"
fi

echo "--- a released claim withdraws its device"
# First a "VMM" claims the stick's interface through usbfs: the deleted claim waits
# (DeviceInUse) and kubelet is sent nothing less meanwhile; then it lets go.
IFACE_DRIVER=$SYS/bus/usb/devices/1-2:1.0/driver
ln -sfn ../../../../../../bus/usb/drivers/usbfs "$IFACE_DRIVER"
usb_reason() { kubectl get usbdeviceclaim "$USB" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}' 2>/dev/null; }
usb_in_use() { [ "$(usb_reason)" = DeviceInUse ]; }
FROM=$(($(wc -l <"$KLOG") + 1))
kubectl delete pod u2 --wait=false >/dev/null
kubectl delete usbdeviceclaim "$USB" --wait=false >/dev/null
eventually 30 usb_in_use || fail "the deleted USB claim waits (DeviceInUse)" "$(usb_reason)"
sleep 2 # a window to see more in (as above)
SEEN=$(pushed "$FROM" "$RES_USB")
SHRANK=$(tr ' ' '\n' <<<"$SEEN" | awk 'NF && $1 < 1' | head -1)
[ -z "$SHRANK" ] && has_allocatable "$RES_USB" 1 &&
    pass "USB claim deleted while its interface is on usbfs: DeviceInUse, and kubelet's stream never shrank (messages: [${SEEN% }])" ||
    fail "kubelet is never sent less while the USB claim waits" "messages: [${SEEN% }]; allocatable $(allocatable "$RES_USB")"
rm -f "$IFACE_DRIVER"
if eventually 30 has_allocatable "$RES_USB" 0; then pass "USB claim deleted: $RES_USB allocatable 0"; else fail "USB withdrawn" "$(allocatable "$RES_USB")"; fi

echo "--- a claimed device made unhealthy is sent Unhealthy"
# Its PCIDevice's Healthy condition patched False, as an agent restarted finds it (the health
# store takes it back): the device is listed Unhealthy at once (kubelet keeps it in capacity,
# out of allocatable); the bound claim keeps its device.
kubectl patch pcidevice "$(pci_name "$NIC2")" --subresource status --type merge -p \
    '{"status":{"conditions":[{"type":"Healthy","status":"False","reason":"NotResponding","message":"config space reads all ones","lastTransitionTime":"2026-11-29T00:00:00Z"}]}}' >/dev/null
if eventually 30 offered "$RES_PCI" 1 0; then
    pass "$NIC2 made unhealthy: sent Unhealthy ($RES_PCI capacity 1, allocatable 0)"
else
    fail "the unhealthy device sent Unhealthy" "capacity $(capacity "$RES_PCI"), allocatable $(allocatable "$RES_PCI"); $(tail -5 "$TEST_DIR/agent.log")"
fi
bound "$NIC2" && pass "... and its bound claim is not touched (passthroughEnabled)" || fail "the bound claim kept" "$(pci_reason "$NIC2")"

echo "  claim Ready -> allocatable ${READY_TO_ALLOCATABLE:-?} s; kubelet restart -> re-registered ${STATS:-?}; Allocate ${ALLOC_RTT:-?}"
mkdir -p "$ROOT/build/results" &&
    echo "ready-to-allocatable ${READY_TO_ALLOCATABLE:-?} s; restart ${STATS:-?}; allocate ${ALLOC_RTT:-?}" >"$ROOT/build/results/plugins.txt"
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" && pass "agent exits 0 (no leaks)" || fail "agent exit" "$(tail -20 "$TEST_DIR/agent.log")"
finish
