#!/usr/bin/env bash
# test/long/test_idle.sh - an idle cluster stays quiet (`make test-long`, not part of make test).
# The real control plane with KubeVirt v1.9.0's own kubevirts CRD and a CR with a foreign entry;
# two `hostdevd controller` replicas (sanitizer build) with their own service account's token
# (manifests/controller-rbac.yaml); an agent on a fake sysfs tree
# (test/fixtures/sysfs/plugins-node.txt: two e1000e already on vfio-pci, a USB stick) whose
# claims it makes Ready itself, with a short --resync so that it rescans during the idle time;
# and claims of two more nodes written Ready as their agents would. Once the CR holds exactly
# the needed entries, nothing changes for LONG_IDLE_SECONDS (default 300). Counted in the API
# server's audit log over that time: writes by the controllers to the KubeVirt CR and to claims,
# and writes by the agent to devices, claims and its DRA ResourceSlices, must all be 0. Lease writes (the leader's
# renewals; an agent's heartbeat Lease) are expected and only reported, as are the other
# requests per identity and verb.
SUITE=long-idle
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
cd "$ROOT" || exit 1

BIN=$ROOT/build/asan/hostdevd
IDLE=${LONG_IDLE_SECONDS:-300}
RESYNC=${LONG_IDLE_RESYNC:-60}
DESC=test/fixtures/sysfs/plugins-node.txt
NODE=idle-a
G=devices.harvesterhci.io
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
[ -x "$BIN" ] || make -C "$ROOT" build/asan/hostdevd >/dev/null

cluster_start
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
AUDIT=$TEST_DIR/cluster/audit.log
install_crds
kubectl apply -f manifests/controller-rbac.yaml >/dev/null
FOREIGN='{"pciVendorSelector":"15b3:1017","resourceName":"mellanox.com/CX5"}'
install_kubevirt "{pciHostDevices: [$FOREIGN]}" || fail "KubeVirt's CRD and CR"
for n in "$NODE" idle-b idle-c; do create_node "$n"; done
# The agents of idle-b and idle-c are not run: their heartbeats are written as theirs would be.
for n in idle-b idle-c; do agent_heartbeat "$n" 3600; done

echo "--- two controller replicas (their service account), an agent on a fake sysfs tree"
CTL_KUBECONFIG=$TEST_DIR/controller.kubeconfig
sa_kubeconfig hostdevd-system hostdevd-controller "$CTL_KUBECONFIG" || fail "controller kubeconfig"
PORTS=()
PIDS=()
for i in 0 1; do
    PORTS[i]=$(free_port)
    "$BIN" controller --kubeconfig "$CTL_KUBECONFIG" --listen "127.0.0.1:${PORTS[i]}" \
        --id "replica-$i" -v 1 >>"$TEST_DIR/controller-$i.log" 2>&1 &
    PIDS[i]=$!
done
SYS=$TEST_DIR/sys
DEV=$TEST_DIR/dev
hack/mk-sysfs-fixture.sh "$DESC" "$SYS" >/dev/null
mkdir -p "$SYS/module/vfio_iommu_type1" "$DEV/bus/usb/001" "$TEST_DIR/proc/1" "$TEST_DIR/proc/net" \
    "$TEST_DIR/kubelet/device-plugins"
: >"$DEV/bus/usb/001/002"
fake_proc "$TEST_DIR/proc"
APORT=$(free_port)
# No kubelet: the device plugins keep retrying their registration (no API requests).
"$BIN" agent --node-name "$NODE" --kubeconfig "$ADMIN" --sysfs-root "$SYS" --proc-root "$TEST_DIR/proc" \
    --dev-root "$DEV" --kubelet-dir "$TEST_DIR/kubelet" --listen "127.0.0.1:$APORT" \
    --resync "$RESYNC" --uevent-source none -v 1 >>"$TEST_DIR/agent.log" 2>&1 &
PIDS[2]=$!
# The processes stop with the test, whatever way it ends (then the control plane).
trap 'kill -KILL "${PIDS[@]}" 2>/dev/null; cluster_stop' EXIT
leading() { curl -fsS "http://127.0.0.1:${PORTS[$1]}/metrics" 2>/dev/null | grep -qx "hostdevd_leader 1"; } # (/readyz: able to serve, the standby too)
leader() { for i in 0 1; do leading "$i" && { echo "$i"; return 0; }; done; return 1; }
agent_up() { curl -fsS "http://127.0.0.1:$APORT/readyz" >/dev/null; }
if eventually 30 leader; then pass "one replica leads, the other stands by"; else fail "a leader" "$(tail -5 "$TEST_DIR"/controller-*.log)"; finish; fi
if eventually 60 agent_up; then pass "agent ready"; else fail "agent ready" "$(tail -20 "$TEST_DIR/agent.log")"; finish; fi

echo "--- claims: the agent's own, and two nodes' written as their agents would"
pci_name() { local a=${2//:/}; echo "$1-${a//./}"; }
USB=$NODE-0951-1666-1-2
for a in 0000:00:04.0 0000:00:05.0; do
    printf 'apiVersion: %s/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s}\n' \
        "$G" "$(pci_name "$NODE" "$a")" "$a" "$NODE" | kubectl create -f - >/dev/null
done
printf 'apiVersion: %s/v1beta1\nkind: USBDeviceClaim\nmetadata: {name: %s}\nspec: {}\n' "$G" "$USB" | kubectl create -f - >/dev/null
WANT=$(kubectl get pcidevice "$(pci_name "$NODE" 0000:00:04.0)" -o jsonpath='{.status.resourceName}')$'\n'"kubevirt.io/$USB"
for n in idle-b idle-c; do
    for i in 1 2 3; do
        d=$(agent_device pci "$n" "$i" 10de "1eb$i" "nvidia.com/TU10$i")
        agent_claim pci "$d" "$n" "$([ "$i" = 3 ] && echo true || echo false)"
        agent_ready pci "$d"
        if [ "$i" = 3 ]; then WANT+=$'\n'"nvidia.com/$d"; else WANT+=$'\n'"nvidia.com/TU10$i"; fi
    done
    d=$(agent_device usb "$n" 1 1050 0407)
    agent_claim usb "$d"
    agent_ready usb "$d"
    WANT+=$'\n'"kubevirt.io/$d"
done
WANT=$(sort -u <<<"$WANT")
bound() { [ "$(kubectl get pcideviceclaim "$(pci_name "$NODE" "$1")" -o jsonpath='{.status.passthroughEnabled}')" = true ]; }
usb_enabled() { [ "$(kubectl get usbdeviceclaim "$USB" -o jsonpath='{.status.conditions[0].reason}')" = Enabled ]; }
if eventually 60 bound 0000:00:04.0 && eventually 30 bound 0000:00:05.0 && eventually 30 usb_enabled; then
    pass "the agent's claims: both NICs passthroughEnabled, the USB stick enabled"
else
    fail "the agent's claims Ready" "$(kubectl get pcideviceclaims,usbdeviceclaims -o yaml | grep -A3 'type: Ready'; tail -20 "$TEST_DIR/agent.log")"
fi
ours() { # our resource names in the CR, sorted, one a line (duplicates kept)
    kubectl get kubevirt -n kubevirt kubevirt -o json | python3 -c '
import json, sys
c = json.load(sys.stdin)["spec"]["configuration"].get("permittedHostDevices") or {}
print("\n".join(sorted(e["resourceName"] for k in ("pciHostDevices", "usb") for e in (c.get(k) or [])
                       if e["resourceName"] != "mellanox.com/CX5")))'
}
exact() { [ "$(ours)" = "$WANT" ]; }
if eventually 60 exact; then pass "the CR lists exactly the $(wc -l <<<"$WANT") needed entries"; else
    fail "exact entries" "want: $(tr '\n' ' ' <<<"$WANT"); got: $(ours | tr '\n' ' ')"; fi
# Settled: hostdevd's last write (claim status, the CR patch) 3 s ago.
eventually 60 audit_quiet "$AUDIT" 3 || fail "hostdevd's writes settle before the idle time" "$(audit_summary "$AUDIT")"
RV=$(kubectl get kubevirt -n kubevirt kubevirt -o jsonpath='{.metadata.resourceVersion}')
L0=$(leader)

echo "--- ${IDLE} s idle"
MARK=$(wc -l <"$AUDIT")
SCANS0=$(grep -c '"Scanned PCI devices"' "$TEST_DIR/agent.log")
T0=$SECONDS
sleep "$IDLE"
echo "  idle for $((SECONDS - T0)) s; audit log lines since the start of the idle time: $(($(wc -l <"$AUDIT") - MARK))"
# Requests completed after MARK, per identity: "who resource[/subresource] verb code count".
SUMMARY=$(audit_summary "$AUDIT" "$MARK")
echo "$SUMMARY" | sed 's/^/  | /'
# writes (create, update, patch, delete) by WHO to resources matching the regex
sum() { awk -v w="$1" -v r="$2" '$1 == w && $2 ~ r && $3 ~ /^(create|update|patch|delete|deletecollection)$/ {s += $5} END {print s + 0}' <<<"$SUMMARY"; }
CTL_CR=$(sum controller '^kubevirts')
CTL_CLAIMS=$(sum controller 'deviceclaims')
CTL_LEASE=$(sum controller '^leases')
CTL_OTHER=$(awk '$1 == "controller" && $2 !~ /^(kubevirts|leases|pcideviceclaims|usbdeviceclaims)/ && $3 ~ /^(create|update|patch|delete)$/ {s += $5} END {print s + 0}' <<<"$SUMMARY")
AG_DEV=$(sum agent '^(pcidevices|usbdevices)')
AG_SLICES=$(sum agent '^resourceslices')
RESCANS=$(($(grep -c '"Scanned PCI devices"' "$TEST_DIR/agent.log") - SCANS0))
AG_CLAIMS=$(sum agent 'deviceclaims')
AG_LEASE=$(sum agent '^leases')
AG_OTHER=$(awk '$1 == "agent" && $2 !~ /^(pcidevices|usbdevices|pcideviceclaims|usbdeviceclaims|leases|resourceslices)/ && $3 ~ /^(create|update|patch|delete)$/ {s += $5} END {print s + 0}' <<<"$SUMMARY")
[ "$CTL_CR" -eq 0 ] && pass "zero controller writes to the KubeVirt CR in ${IDLE} s (audit log)" || fail "controller CR writes while idle" "$CTL_CR"
[ "$CTL_CLAIMS" -eq 0 ] && pass "zero controller writes to claims" || fail "controller claim writes while idle" "$CTL_CLAIMS"
[ "$AG_DEV" -eq 0 ] && pass "zero agent writes to devices ($RESCANS full rescans in the idle time)" || fail "agent device writes while idle" "$AG_DEV"
[ "$AG_CLAIMS" -eq 0 ] && pass "zero agent writes to claims" || fail "agent claim writes while idle" "$AG_CLAIMS"
[ "$(kubectl get resourceslices -o name | wc -l)" -ge 1 ] && [ "$AG_SLICES" -eq 0 ] &&
    pass "zero agent writes to its DRA ResourceSlices (the pool published before)" || fail "ResourceSlice writes while idle" "$AG_SLICES"
[ "$(kubectl get kubevirt -n kubevirt kubevirt -o jsonpath='{.metadata.resourceVersion}')" = "$RV" ] &&
    pass "the CR's resourceVersion unchanged" || fail "CR resourceVersion changed" "$RV -> $(kubectl get kubevirt -n kubevirt kubevirt -o jsonpath='{.metadata.resourceVersion}')"
[ "$(leader)" = "$L0" ] && pass "replica-$L0 still leads" || fail "leader unchanged" "replica-$L0 -> $(leader)"
echo "  leader Lease writes by the controllers: $CTL_LEASE (renewals; not asserted); other controller writes: $CTL_OTHER"
echo "  agent Lease writes: $AG_LEASE (its heartbeat, renewed every 60 s; not asserted); other agent writes: $AG_OTHER (Events, ...)"
mkdir -p "$ROOT/build/results"
echo "idle ${IDLE} s: controller CR writes $CTL_CR, claim writes $CTL_CLAIMS, Lease writes $CTL_LEASE; agent device writes $AG_DEV, ResourceSlice writes $AG_SLICES, claim writes $AG_CLAIMS, Lease writes $AG_LEASE, other $AG_OTHER" \
    >"$ROOT/build/results/long-idle.txt"

for i in 0 1 2; do
    kill -TERM "${PIDS[i]}"
    wait "${PIDS[i]}" && pass "$([ "$i" = 2 ] && echo agent || echo "replica-$i") exits 0 on SIGTERM (no leaks)" ||
        fail "exit of process $i" "$(tail -20 "$TEST_DIR/$([ "$i" = 2 ] && echo agent || echo "controller-$i").log")"
done
finish
