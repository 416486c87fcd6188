#!/usr/bin/env bash
# test/e2e/test_node.sh - the agent on a real (emulated) node: a qemu VM booting Debian's kernel
# with a virtual IOMMU, an e1000, two e1000e and a USB controller with three devices
# (hack/qemu-node.sh), against the host's private control plane. Checks: the guest reaches the
# API server; the agent becomes ready and publishes PCIDevices with the guest's real IDs, drivers
# and IOMMU groups; every candidate has its own IOMMU group; the image's module tree lets
# `modprobe vfio-pci` work and a driver_override bind to vfio-pci (restored after); the supervisor
# restarts a killed agent and agentctl stops, starts and runs it once; after `reboot -f` (make
# test-long: E2E_NODE_ALL=1) the control channel and the agent come back. Prints the boot time and the time to the first
# PCIDevice.
SUITE=e2e-node
# shellcheck source=test/e2e/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
T_START=$SECONDS
NODE=qnode

cluster_start
install_crds
create_node "$NODE"

# Lines "address vendor device iommuGroup driver" of the node's PCIDevices.
pcidevs() {
    kubectl get pcidevices -l "nodename=$NODE" -o jsonpath='{range .items[*]}{.status.address} {.status.vendorId} {.status.deviceId} {.status.iommuGroup} {.status.kernelDriverInUse}{"\n"}{end}'
}
count() { kubectl get pcidevices -l "nodename=$NODE" -o name 2>/dev/null | wc -l; }
some_devices() { [ "$(count)" -gt 0 ]; }
have() { grep -q "^$1 " <<<"$(pcidevs)"; }
nics_published() { have 0000:00:03.0 && have 0000:00:04.0 && have 0000:00:05.0; }
guest_group() { guest "basename \$(readlink /sys/bus/pci/devices/$1/iommu_group)"; }
guest_driver() { guest "basename \$(readlink /sys/bus/pci/devices/$1/driver)"; }
since() { awk -v a="$(date +%s.%N)" -v b="$1" 'BEGIN {printf "%.1f", a - b}'; }

echo "--- boot"
if node_boot "$NODE"; then
    pass "node $NODE boots and its control channel answers (${BOOT_SECONDS}s)"
else
    fail "node $NODE boots" "$(tail -20 "$NODE_DIR/console.log" 2>/dev/null)"
    finish
fi
STARTED=$(cat "$NODE_DIR/boot.started")
if eventually 120 some_devices; then
    FIRST_DEVICE_SECONDS=$(since "$STARTED")
    pass "a PCIDevice of $NODE appears (${FIRST_DEVICE_SECONDS}s after qemu started)"
else
    fail "a PCIDevice of $NODE appears" "$(node_logs)"
fi
OUT=$(guest 'uname -r; hostname; ip -4 addr show; ip route')
expect_contains "guest runs Debian's kernel, hostname $NODE, 10.0.2.15/24 via 10.0.2.2" "$OUT" \
    "$(cat "$E2E_IMAGE/kernel-version")" "$NODE" "inet 10.0.2.15/24" "default via 10.0.2.2"
PORT=${K8S_SERVER##*:}
# busybox's wget cannot do TLS with the API server (handshake failure); plain HTTP to its TLS port
# gets Go's answer, which proves the path.
OUT=$(guest "printf 'GET /readyz HTTP/1.0\r\n\r\n' | nc -w 5 10.0.2.2 $PORT" 2>&1)
expect_contains "guest reaches the API server at 10.0.2.2:$PORT" "$OUT" \
    "Client sent an HTTP request to an HTTPS server"

echo "--- agent"
if eventually 90 guest_agent_ready; then pass "agent ready (guest: /readyz on :9808)"; else
    fail "agent ready" "$(node_logs)"; fi
if eventually 60 nics_published; then pass "PCIDevices of the e1000 and both e1000e published"; else
    fail "PCIDevices of the e1000 and both e1000e published" "$(pcidevs)"; fi
DEVS=$(pcidevs)
for spec in "0000:00:03.0 8086 100e e1000" "0000:00:04.0 8086 10d3 e1000e" \
    "0000:00:05.0 8086 10d3 e1000e" "0000:00:06.0 1b36 000d xhci_hcd"; do
    read -r addr vendor device driver <<<"$spec"
    group=$(guest_group "$addr")
    expect_contains "$addr ($vendor:$device) published with driver $driver, IOMMU group $group" \
        "$DEVS" "$addr $vendor $device $group $driver"
done
echo "  PCIDevices: $(count); bridges and chipset as the agent chose:"
pcidevs | sed 's/^/    /'

echo "--- IOMMU groups in the guest"
for addr in 0000:00:02.0 0000:00:03.0 0000:00:04.0 0000:00:05.0 0000:00:06.0; do
    OUT=$(guest "ls /sys/bus/pci/devices/$addr/iommu_group/devices")
    [ "$OUT" = "$addr" ] && pass "$addr alone in IOMMU group $(guest_group "$addr")" ||
        fail "$addr alone in its IOMMU group" "$OUT"
done

echo "--- vfio-pci from the image's module tree (modules.dep), driver_override bind"
E=0000:00:05.0
# Modules loaded before (by the agent, maybe) stay loaded at the end.
VFIO_BEFORE=$(guest 'lsmod | awk "/^(vfio|irqbypass)/{print \$1}"' | tr '\n' ' ')
expect_ok "modprobe vfio-pci (busybox modprobe, dependencies from modules.dep)" \
    guest 'modprobe vfio-pci && lsmod | grep -q "^vfio_pci_core " && lsmod | grep -q "^vfio " && test -d /sys/bus/pci/drivers/vfio-pci'
expect_ok "libkmod resolves the tree (kmod's modprobe loads vfio_iommu_type1)" \
    guest '/usr/lib/kmod/modprobe --show-depends vfio-pci | grep -q vfio-pci-core.ko && /usr/lib/kmod/modprobe vfio_iommu_type1 && lsmod | grep -q "^vfio_iommu_type1 "'
G=$(guest_group "$E")
expect_ok "$E bound to vfio-pci through driver_override, /dev/vfio/$G exists" guest "
    echo vfio-pci > /sys/bus/pci/devices/$E/driver_override
    echo $E > /sys/bus/pci/devices/$E/driver/unbind
    echo $E > /sys/bus/pci/drivers_probe
    [ \$(basename \$(readlink /sys/bus/pci/devices/$E/driver)) = vfio-pci ] && [ -c /dev/vfio/$G ]"
expect_ok "$E restored to e1000e, the vfio modules loaded here unloaded" guest "
    echo > /sys/bus/pci/devices/$E/driver_override
    echo $E > /sys/bus/pci/devices/$E/driver/unbind
    echo $E > /sys/bus/pci/drivers_probe
    [ \$(basename \$(readlink /sys/bus/pci/devices/$E/driver)) = e1000e ] || exit 1
    for m in vfio_pci vfio_pci_core vfio_iommu_type1 vfio_virqfd vfio irqbypass; do
        case ' $VFIO_BEFORE ' in *\" \$m \"*) continue ;; esac
        ! lsmod | grep -q \"^\$m \" || rmmod \$m || exit 1
    done"

echo "--- supervised agent"
restarts() { guest 'cat /run/agent/restarts'; }
expect_ok "agentctl kill KILL: the agent is killed" guest 'agentctl kill KILL'
back() { [ "$(restarts)" = 1 ] && guest_agent_ready; }
if eventually 60 back; then pass "the supervisor restarted it (restarts 1) and it is ready again"; else
    fail "the supervisor restarted the killed agent" "$(guest 'agentctl status')"; fi
expect_ok "agentctl stop" guest 'agentctl stop'
OUT=$(guest 'agentctl status')
expect_contains "agentctl status: stopped (disabled)" "$OUT" "stopped (disabled)"
OUT=$(guest 'agentctl run-once --timeout 5 HOSTDEVD_E2E_MARK=1 -- --resync 3600; echo "exit $?"' 2>&1)
expect_contains "agentctl run-once runs the agent in the foreground (stopped by SIGTERM after 5s: exit 0)" "$OUT" "node=\"$NODE\"" "exit 0"
expect_ok "agentctl start" guest 'agentctl start'
if eventually 60 guest_agent_ready; then pass "agent ready again after start"; else
    fail "agent ready again after start" "$(node_logs)"; fi

# make test-long (E2E_NODE_ALL=1, test/long/test_node_reboot.sh): make test reboots a claimed
# node (test_claims.sh) and an SR-IOV one (test_sriov.sh); a TCG boot is seconds of its 2 cores.
if [ -n "${E2E_NODE_ALL:-}" ]; then
    echo "--- reboot -f"
    DEVICES_BEFORE=$(count)
    if node_reboot; then pass "guest rebooted (reboot -f), control channel back after ${REBOOT_SECONDS}s"; else
        fail "guest rebooted, control channel back" "$(tail -20 "$NODE_DIR/console.log")"; fi
    OUT=$(guest 'cut -d" " -f1 /proc/uptime; agentctl status; hostname; ip -4 addr show')
    expect_contains "fresh boot: agent supervised again (start #1), hostname and address as before" "$OUT" \
        "starts 1 restarts 0" "$NODE" "inet 10.0.2.15/24"
    if eventually 90 guest_agent_ready; then pass "agent ready after the reboot"; else
        fail "agent ready after the reboot" "$(node_logs)"; fi
    [ "$(count)" -eq "$DEVICES_BEFORE" ] && pass "still $DEVICES_BEFORE PCIDevices" ||
        fail "still $DEVICES_BEFORE PCIDevices" "have $(count)"
fi

QEMU_RSS=$(awk '/VmRSS/{printf "%d MiB", $2 / 1024}' "/proc/$(cat "$NODE_DIR/qemu.pid")/status")
GUEST_MEM=$(guest 'free -m | awk "/Mem:/{print \$3 \" MiB used of \" \$2}"')
echo "  boot ${BOOT_SECONDS}s (qemu start to control channel), first PCIDevice ${FIRST_DEVICE_SECONDS:-?}s," \
    "reboot ${REBOOT_SECONDS:-?}s; qemu RSS $QEMU_RSS, guest $GUEST_MEM; test $((SECONDS - T_START))s"
finish
