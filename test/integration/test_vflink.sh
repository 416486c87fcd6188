#!/usr/bin/env bash
# test/integration/test_vflink.sh - node/vflink against this kernel's rtnetlink, through
# build/asan/vflinktool, in a network namespace of its own (unshare -rn: no root, no cluster,
# nothing of the host's touched). Interfaces without VFs (lo, a dummy when the kernel has the
# module, a veth pair): list answers no VFs; every setting is refused as `ip link set ... vf`
# is, naming the setting; out-of-range settings are refused before the kernel is asked. A PF
# with VFs is the qemu node's (an igb NIC).
SUITE=vflink
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"

VT=$TEST_BIN/vflinktool
if ! unshare -rn true 2>/dev/null; then
    echo "vflink: no user and network namespaces here (unshare -rn): skipped"
    finish
fi
# in_ns COMMAND...: the command in a new network namespace holding lo (up), a veth pair v0/v1 and,
# when the kernel can make one, a dummy d0.
in_ns() {
    unshare -rn sh -c 'ip link set lo up && ip link add v0 type veth peer name v1 &&
        { ip link add d0 type dummy 2>/dev/null || true; } && exec "$@"' sh "$@"
}

expect_ok "lo has no VFs" in_ns "$VT" list lo
[ -z "$OUT" ] && pass "lo: nothing listed" || fail "lo: nothing listed" "$OUT"
expect_ok "a veth has no VFs" in_ns "$VT" list v0
[ -z "$OUT" ] && pass "v0: nothing listed" || fail "v0: nothing listed" "$OUT"
expect_reject "an absent interface is named" "there is no network interface nosuch0 (ENODEV)" \
    in_ns "$VT" list nosuch0
expect_reject "a name longer than the kernel's is refused" "is not an interface name" \
    in_ns "$VT" list a-name-too-long-for-linux

# Every setting on an interface without VFs: EOPNOTSUPP, naming the driver and the setting.
for s in mac=02:00:00:00:00:01 vlan=10 "vlan=10 qos=3" spoofchk=on trust=off; do
    name=${s%%=*}
    # shellcheck disable=SC2086 # the settings are words
    expect_reject "veth: $s is not supported" \
        "the veth driver of v0 does not support $name on a VF (EOPNOTSUPP)" \
        in_ns "$VT" set v0 0 $s driver=veth
done
expect_reject "without a driver name the message still names the interface" \
    "the driver of v0 does not support trust on a VF (EOPNOTSUPP)" in_ns "$VT" set v0 3 trust=on
# ip(8) gets the same answer for the same request.
expect_reject "ip link set ... vf 0 trust on is refused alike" "Operation not supported" \
    in_ns ip link set v0 vf 0 trust on
if in_ns ip link show d0 >/dev/null 2>&1; then
    expect_ok "a dummy has no VFs" in_ns "$VT" list d0
    expect_reject "dummy: trust is not supported" \
        "the dummy driver of d0 does not support trust on a VF (EOPNOTSUPP)" \
        in_ns "$VT" set d0 0 trust=on driver=dummy
else
    echo "  (no dummy interfaces in this kernel: the veth pair stands in)"
fi
expect_reject "an absent interface is named on set" "there is no network interface nosuch0" \
    in_ns "$VT" set nosuch0 0 spoofchk=off

# Refused before the kernel is asked: what to write instead.
expect_reject "a multicast MAC" "is a multicast address (the first byte is odd): write a unicast one" \
    in_ns "$VT" set v0 0 mac=01:00:5e:00:00:01
expect_reject "the zero MAC" "is no address" in_ns "$VT" set v0 0 mac=00:00:00:00:00:00
expect_reject "qos without a vlan" "qos 3 without a vlan: the kernel sets them together (EINVAL)" \
    in_ns "$VT" set v0 0 qos=3
expect_reject "vlan 4096" "vlan 4096: write 0 (none) to 4095 (EINVAL)" in_ns "$VT" set v0 0 vlan=4096
finish
