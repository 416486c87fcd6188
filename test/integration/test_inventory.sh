#!/usr/bin/env bash
# test/integration/test_inventory.sh - `hostdevd inventory` prints what the agent publishes: on
# the fake small-server tree, the agent (sanitizer build) writes its PCIDevices and USBDevices
# to the real API server, and `hostdevd inventory -o json` on the same tree must hold the same
# objects with the same status (blockers included); -o yaml is the same List; the table has a
# line per device; bad options are refused with the usage.
SUITE=inventory
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

BIN=$TEST_BIN/hostdevd
NODE=inv-node
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

cluster_start
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
install_crds
create_node "$NODE"
SYS=$TEST_DIR/sys
hack/mk-sysfs-fixture.sh test/fixtures/sysfs/small-server.txt "$SYS" >/dev/null
mkdir -p "$TEST_DIR/proc/1" "$TEST_DIR/proc/net"
fake_proc "$TEST_DIR/proc"
PORT=$(free_port)
"$BIN" agent --node-name "$NODE" --kubeconfig "$ADMIN" --sysfs-root "$SYS" --proc-root "$TEST_DIR/proc" \
    --kubelet-dir "$TEST_DIR/nokubelet" --listen "127.0.0.1:$PORT" --uevent-source none >>"$TEST_DIR/agent.log" 2>&1 &
track $!
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
if eventually 60 ready; then pass "agent ready"; else fail "agent ready" "$(tail -20 "$TEST_DIR/agent.log")"; finish; fi

INV=("$BIN" inventory --sysfs-root "$SYS" --proc-root "$TEST_DIR/proc" --node-name "$NODE")
# name -> status, of the API's objects and of the command's
canon() { jq -S '[.items[] | {name: .metadata.name, kind, status: (.status | del(.conditions))}] | sort_by(.name)'; }
API=$( (kubectl get pcidevices -o json | canon; kubectl get usbdevices -o json | canon) | jq -s 'add | sort_by(.name)')
OUT=$("${INV[@]}" -o json 2>"$TEST_DIR/inv.err") || fail "inventory -o json exits 0" "$(cat "$TEST_DIR/inv.err")"
MINE=$(canon <<<"$OUT")
N=$(jq length <<<"$API")
[ "$N" -gt 30 ] && [ "$API" = "$MINE" ] && pass "-o json: the same $N objects and statuses the agent published" ||
    fail "inventory = published" "$(diff <(echo "$API") <(echo "$MINE") | head -20)"
YAML=$("${INV[@]}" -o yaml | python3 -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))' 2>&1)
[ "$(jq -S . <<<"$YAML")" = "$(jq -S . <<<"$OUT")" ] && pass "-o yaml: the same List (read back by PyYAML)" ||
    fail "yaml = json" "$(head -5 <<<"$YAML")"
TABLE=$("${INV[@]}")
[ "$(($(wc -l <<<"$TABLE") - 1))" -eq "$N" ] && pass "table: a line per device" || fail "table lines" "$(head -3 <<<"$TABLE")"
expect_contains "table: the GPU on vfio-pci with its group and resource" "$(grep " 0000:18:00.0 " <<<"$TABLE")" \
    " 10de:2204 " " vfio-pci " " 21 "
# every column starts where its header does, however long the names (kubectl's tables)
ALIGNED=$(python3 -c '
import sys
lines = sys.stdin.read().splitlines()
head = lines[0]
cols = [head.index(h) for h in ("NAME", "ADDRESS", "IDS", "DRIVER", "IOMMU", "RESOURCE", "BLOCKERS")]
bad = [l for l in lines[1:] if any(l[c - 1] != " " or l[c] == " " for c in cols)]
print(len(bad), bad[:1])' <<<"$TABLE")
[ "${ALIGNED%% *}" = 0 ] && pass "table: every column lines up under its header" || fail "table alignment" "$ALIGNED"
expect_reject "an unknown format is refused with the usage" "Usage: hostdevd inventory" "${INV[@]}" -o xml
expect_reject "... and a line that says what is wrong" 'output format "wide" is not one of table, json, yaml' \
    "${INV[@]}" -o wide
echo "--- hostdevd name: which argument is wrong, lspci's short form taken"
expect_contains "name pci with lspci's short form" "$("$BIN" name pci titan 00:1F.6 2>&1)" titan-0000001f6
expect_reject "a bad address is named, with the forms it takes" \
    'hostdevd name: address "00:1f" is not a PCI address (0000:00:1f.6, or lspci'"'"'s short form 00:1f.6)' \
    "$BIN" name pci titan 00:1f
expect_reject "a bad node is named" 'hostdevd name: node "Titan" is not a node name' "$BIN" name pci Titan 00:1f.6
expect_reject "a bad USB port path is named" 'hostdevd name: port path "1/2" is not a USB port path' \
    "$BIN" name usb titan 0627 0001 1/2
expect_reject "a missing sysfs tree is an error that says so" "Cannot initialise PCI access" \
    "$BIN" inventory --sysfs-root "$TEST_DIR/none"
finish
