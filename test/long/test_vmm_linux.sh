#!/usr/bin/env bash
# test/long/test_vmm_linux.sh - a guest kernel drives the claimed device (`make test-long`: nested
# TCG is slow). In a qemu node booted with hack/qemu-node.sh --vmm-linux (the host's
# qemu-system-x86_64 in the guest, and a nested Linux for it: the node's own Debian kernel with a
# busybox initramfs holding e1000e, hack/qemu-nested/init), the e1000e at 0000:00:04.0 is claimed
# (PCIDeviceClaim: the agent binds it to vfio-pci) and handed to a nested machine with libvirt's
# argument for a `<hostdev managed='no'>` (`-device vfio-pci,host=0000:00:04.0`). The nested
# kernel boots (TCG inside TCG: minutes), its /init loads e1000e, prints the PCI functions and
# their drivers and powers off. Checks, each failing without the vfio-pci argument: the VMM
# holds /dev/vfio/<group> open; the nested lspci lists a function 8086:10d3 (class 0200); the
# nested e1000e binds it; a netdev appears whose MAC is the node's e1000e's (52:54:00:00:04:00,
# read from the real device's registers through vfio and the node's virtual IOMMU); the driver
# logs the device's PCIe link. Then the VMM exits, the claim is deleted and the e1000e is back on
# e1000e in the node with its interface. Prints the nested boot's duration (VMM start -> the
# init's last line) and the nested kernel's own uptime. VMM_LINUX_TIMEOUT (default 900 s) bounds
# the nested boot; VMM_LINUX_MEMORY (256) is the nested machine's memory.
SUITE=long-vmm-linux
# shellcheck source=test/e2e/lib.sh
. "$(dirname "$0")/../e2e/lib.sh"
cd "$ROOT" || exit 1
T_START=$SECONDS
NODE=qnested
NIC=0000:00:04.0 # e1000e, MAC 52:54:00:00:04:00 (hack/qemu-node.sh devices)
MAC=52:54:00:00:04:00
TIMEOUT=${VMM_LINUX_TIMEOUT:-900}

cluster_start
install_crds
create_node "$NODE"

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", b - a }'; }
CONSOLE=""
has_line() { grep -qE "^nested: $1" <<<"$CONSOLE"; } # ERE after "nested: "

echo "--- boot (with a VMM and the nested Linux in the guest)"
if node_boot "$NODE" --vmm-linux --memory 1536; then pass "node $NODE boots with the VMM and the nested Linux (${BOOT_SECONDS}s)"; else fail "node boots"; finish; fi
if eventually 120 guest_agent_ready; then pass "agent ready"; else fail "agent ready" "$(node_logs)"; finish; fi
GROUP=$(guest "basename \$(readlink /sys/bus/pci/devices/$NIC/iommu_group)")

echo "--- claim the e1000e"
claim "$NIC"
if eventually 60 enabled "$NIC"; then pass "claim on $NIC is passthroughEnabled"; else fail "claim on $NIC is passthroughEnabled" "$(reason "$NIC")"; finish; fi
expect_ok "$NIC is on vfio-pci in the node" on_driver "$NIC" vfio-pci

echo "--- the nested Linux boots with the device (TCG in TCG; minutes)"
T0=$(now)
vmm_linux_start "-device vfio-pci,host=$NIC,id=hostdev0"
if eventually 60 vmm_holds_group "$GROUP"; then pass "the VMM holds /dev/vfio/$GROUP open"; else fail "the VMM holds /dev/vfio/$GROUP open" "$(guest "cat /tmp/vmm.err; ls -l /proc/\$(cat /tmp/vmm.pid)/fd")"; fi
if vmm_linux_wait "$TIMEOUT" && vmm_linux_done; then
    T_DONE=$(now)
    pass "the nested init ran to its end ($(secs "$T0" "$T_DONE") s)"
else
    fail "the nested init ran to its end within ${TIMEOUT}s" "$(guest 'cat /tmp/vmm.err; tail -c 3000 /tmp/vmm.console')"
    vmm_linux_kill
fi
CONSOLE=$(vmm_linux_console)
printf '%s\n' "$CONSOLE" | sed 's/^/    /'
# "nested: lspci BB:SS.F CCCC: VVVV:DDDD" (lspci -n's form, from the nested sysfs)
SLOT=$(awk '$2 == "lspci" && $5 == "8086:10d3" {print "0000:" $3; exit}' <<<"$CONSOLE")
if has_line 'lspci [0-9a-f:.]+ 0200: 8086:10d3'; then pass "the nested lspci lists 8086:10d3 (Ethernet controller) at $SLOT"; else fail "the nested lspci lists 8086:10d3" "$CONSOLE"; fi
if [ -n "$SLOT" ] && has_line "driver $SLOT e1000e "; then pass "the nested e1000e driver binds it"; else fail "the nested e1000e driver binds it" "$CONSOLE"; fi
if [ -n "$SLOT" ] && has_line "driver $SLOT e1000e net eth[0-9]+"; then pass "... and a netdev appears"; else fail "... and a netdev appears" "$CONSOLE"; fi
if has_line "netdev eth[0-9]+ address $MAC device $SLOT\$"; then pass "... with the node's e1000e's MAC ($MAC, read through vfio)"; else fail "... with the node's e1000e's MAC" "$CONSOLE"; fi
if has_line 'dmesg .*e1000e .* eth[0-9]+: \(PCI Express'; then pass "... and the driver reports the device's PCIe link"; else fail "... and the driver reports the device's PCIe link" "$CONSOLE"; fi
UP=$(awk '$2 == "up" {sub(/,$/, "", $4); print $4; exit}' <<<"$CONSOLE")
DONE=$(awk '$2 == "done" {print $4; exit}' <<<"$CONSOLE")
echo "  nested boot: VMM start -> init done $(secs "$T0" "${T_DONE:-$(now)}") s; nested kernel's uptime at /init ${UP:-?}, at the end ${DONE:-?}"

echo "--- the VMM exits; the claim goes"
if eventually 120 vmm_gone; then pass "the VMM exits when the nested Linux powers off"; else fail "the VMM exits" "$(guest 'cat /tmp/vmm.err')"; vmm_linux_kill; fi
expect_ok "the device stayed on vfio-pci in the node until then" on_driver "$NIC" vfio-pci
expect_ok "claim deleted" kubectl delete pcideviceclaim "$(name_of "$NIC")" --wait=false
if eventually 60 claim_gone "$NIC"; then pass "the deletion completes"; else fail "the deletion completes" "$(reason "$NIC"): $(message "$NIC")"; fi
if eventually 30 on_driver "$NIC" e1000e; then pass "$NIC back on e1000e in the node"; else fail "$NIC back on e1000e" "$(guest_driver "$NIC")"; fi
if eventually 30 guest "ls /sys/bus/pci/devices/$NIC/net/ | grep -q ."; then pass "... with its network interface"; else fail "... with its network interface"; fi

echo "  total: $((SECONDS - T_START)) s"
finish
