#!/usr/bin/env bash
# test/integration/test_badinput.sh - bad input fed to a running `hostdevd agent` (sanitizer
# build): malformed API responses and watch events (test/integration/apiproxy.py between the
# agent and the real API server replaces chosen responses), hostile sysfs attributes (a fake
# tree, rescanned on SIGHUP), malformed kernel uevents (netlink messages with libudev's header
# sent to the agent's monitor) and malformed gRPC/HTTP/2 frames on its DRA and registration
# sockets. After each batch the agent is alive and /healthz answers; each input is logged once
# with what was wrong (the line and its count asserted); the other objects stay right and a good
# input after the bad ones is processed. Every input and the log line it produced are written to
# build/results/badinput-table.txt.
SUITE=badinput
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

AGENT=$TEST_BIN/hostdevd
DESC=test/fixtures/sysfs/usb-server.txt
NODE=bad-node
OTHER=other-node
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
G=/apis/devices.harvesterhci.io/v1beta1
TABLE=$ROOT/build/results/badinput-table.txt
mkdir -p "$ROOT/build/results"
: >"$TABLE"

cluster_start
install_crds
create_node "$NODE"
create_node "$OTHER"
SYS=$TEST_DIR/sys
hack/mk-sysfs-fixture.sh "$DESC" "$SYS" >/dev/null
mkdir -p "$TEST_DIR/proc" "$TEST_DIR/kubelet/plugins_registry"
fake_proc "$TEST_DIR/proc"
LOG=$TEST_DIR/agent.log
PORT=$(free_port)
PP=$(free_port)
python3 test/integration/apiproxy.py "$PP" "$K8S_SERVER" "$K8S_CA" "$K8S_ADMIN_CERT" \
    "$K8S_ADMIN_KEY" >"$TEST_DIR/proxy.log" 2>&1 &
track $! # (its command line names the test's directory, /tmp/hostdevd-badinput.*)
cat >"$TEST_DIR/proxy.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: "http://127.0.0.1:$PP"}}]
users: [{name: proxy, user: {}}]
contexts: [{name: proxy, context: {cluster: proxy, user: proxy}}]
current-context: proxy
EOF
proxy_up() { curl -fsS "http://127.0.0.1:$PP/__hits" >/dev/null; }
eventually 10 proxy_up || fail "the proxy listens" "$(cat "$TEST_DIR/proxy.log")"

# --- helpers -------------------------------------------------------------------------------

# rule NAME PATH-REGEX ACTION-JSON: the next request matching PATH-REGEX gets ACTION.
rule() {
    jq -cn --arg n "$1" --arg p "$2" --argjson a "$3" '{name: $n, path: $p} + $a' |
        curl -fsS --data-binary @- "http://127.0.0.1:$PP/__rule" >/dev/null
}
hit() { curl -fsS "http://127.0.0.1:$PP/__hits" | grep -qxF "$1"; }
alive() { kill -0 "$AGENT_PID" 2>/dev/null && curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null; }
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
CASES=0
# expect_logged KIND INPUT PATTERN: INPUT (of KIND) was logged exactly once, in a warning
# holding PATTERN; the agent is alive; the row goes into the table.
# With a 4th argument only lines holding that fixed string too count.
expect_logged() {
    local kind=$1 input=$2 pattern=$3 also=${4:-} n line
    CASES=$((CASES + 1))
    lines() { grep -E '^[WE][0-9]{4} ' "$LOG" | grep -F -- "$pattern" | grep -F -- "$also"; }
    eventually 30 test "$(lines | wc -l)" -ge 1 || true
    n=$(lines | wc -l)
    line=$(lines | head -1 | cut -c1-400)
    printf '%s | %s | %s\n' "$kind" "$input" "${line#* * * }" >>"$TABLE"
    if [ "$n" -eq 1 ] && alive; then
        pass "$kind: $input -> logged once ($pattern), agent alive"
    else
        fail "$kind: $input -> logged once ($pattern), agent alive" "$n lines; alive: $(alive && echo yes || echo no)"
    fi
}
# expect_quiet KIND INPUT OUTCOME: an input that is not an error (handled as the API means it).
expect_quiet() {
    CASES=$((CASES + 1))
    printf '%s | %s | %s\n' "$1" "$2" "$3" >>"$TABLE"
}
start_agent() {
    "$AGENT" agent --node-name "$NODE" --kubeconfig "$TEST_DIR/proxy.kubeconfig" \
        --sysfs-root "$SYS" --proc-root "$TEST_DIR/proc" --kubelet-dir "$TEST_DIR/kubelet" \
        --cdi-dir "$TEST_DIR/cdi" --listen "127.0.0.1:$PORT" --resync 3600 --uevent-source udev "$@" -v 1 \
        >>"$LOG" 2>&1 &
    AGENT_PID=$!
    track "$AGENT_PID"
}
devices() { kubectl get pcidevices -l "nodename=$NODE" -o name | wc -l; }
WANT=$(grep -vE '^\s*(#|$)|^usb ' "$DESC" | awk '$2 != "0604"' | wc -l)
name_of() { local a=${1//:/}; echo "$NODE-${a//./}"; }

# Another node's objects the agent must leave alone, and a claim of this node.
OTHER_DEV=$(agent_device pci "$OTHER" 1 8086 1521 intel.com/I350)
OTHER_RV=$(kubectl get pcidevice "$OTHER_DEV" -o jsonpath='{.metadata.resourceVersion}')
OTHER_JSON=$(kubectl get pcidevice "$OTHER_DEV" -o json | jq -c 'del(.metadata.managedFields)')

echo "--- malformed LIST responses at start (each informer's first LISTs) ($SECONDS s)"
DEV_LIST="/pcidevices\?labelSelector=nodename%3D$NODE&limit="
CLAIM_LIST="/pcideviceclaims\?fieldSelector=spec.nodeName%3D$NODE&limit="
USB_LIST="/usbdevices\?labelSelector=nodename%3D$NODE&limit="
UCLAIM_LIST="/usbdeviceclaims\?limit="
SLICE_LIST="/resourceslices\?fieldSelector=.*&limit="
REAL_CLAIMS=$(kubectl get --raw "$G/pcideviceclaims" | jq -c .)
RV=$(jq -r .metadata.resourceVersion <<<"$REAL_CLAIMS")
bad_item_list=$(jq -c '.items = [{"metadata": {"resourceVersion": "1"}}, 7, "str", {"metadata": "m"}, {"metadata": {"name": ""}}]' <<<"$REAL_CLAIMS")
rule truncated "$DEV_LIST" '{"status": 200, "body": "{\"kind\":\"PCIDeviceList\",\"items\":[{\"metadata\":{\"name\":\"x\""}'
rule items-object "$DEV_LIST" '{"status": 200, "body": "{\"kind\":\"PCIDeviceList\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":{\"a\":1}}"}'
rule html-500 "$DEV_LIST" '{"status": 500, "type": "text/html", "body": "<html><body><h1>502 Bad Gateway</h1></body></html>"}'
rule cut "$CLAIM_LIST" '{"cut": "{\"kind\":\"PCIDeviceClaimList\",\"items\":[{\"metadata\":{\"na"}'
rule metadata-string "$CLAIM_LIST" '{"status": 200, "body": "{\"kind\":\"PCIDeviceClaimList\",\"metadata\":\"abc\",\"items\":[]}"}'
rule bad-items "$CLAIM_LIST" "$(jq -cn --arg b "$bad_item_list" '{status: 200, body: $b}')"
rule loop-1 "$USB_LIST" '{"status": 200, "body": "{\"kind\":\"USBDeviceList\",\"metadata\":{\"resourceVersion\":\"1\",\"continue\":\"loop\"},\"items\":[]}"}'
rule loop-2 "continue=loop" '{"status": 200, "body": "{\"kind\":\"USBDeviceList\",\"metadata\":{\"resourceVersion\":\"1\",\"continue\":\"loop\"},\"items\":[]}"}'
rule array "$USB_LIST" '{"status": 200, "body": "[1, 2, 3]"}'
rule text "$UCLAIM_LIST" '{"status": 200, "type": "text/plain", "body": "OK"}'
rule no-rv "$UCLAIM_LIST" '{"status": 200, "body": "{\"kind\":\"USBDeviceClaimList\",\"metadata\":{},\"items\":[]}"}'
rule bad-utf8 "$SLICE_LIST" '{"status": 200, "body": "@hex:7b226d65746164617461223a7b227265736f7572636556657273696f6e223a22fffe227d2c226974656d73223a5b5d7d"}'
rule unauthorized "$SLICE_LIST" '{"status": 401, "body": "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}"}'
start_agent
if eventually 90 ready; then pass "the agent gets ready through the bad LISTs"; else fail "agent ready" "$(tail -20 "$LOG")"; fi
[ "$(devices)" -eq "$WANT" ] && pass "all $WANT PCIDevices published" || fail "PCIDevices published" "have $(devices)"
expect_logged "LIST" "truncated JSON (200)" "malformed LIST response of pcidevices: the body is not JSON"
expect_logged "LIST" "items an object, not an array" "malformed LIST response of pcidevices: items is not an array"
expect_logged "LIST" "500 with an HTML body" "<html><body><h1>502 Bad Gateway"
expect_logged "LIST" "body cut mid-object (Content-Length longer)" "pcideviceclaims?fieldSelector"
expect_logged "LIST" "metadata a string" "malformed LIST response of pcideviceclaims: no metadata.resourceVersion"
expect_logged "LIST" "an item without metadata.name" "LIST item 1 of pcideviceclaims is not an object with metadata.name"
expect_logged "LIST" "an item that is a number" "LIST item 2 of pcideviceclaims is not an object"
expect_logged "LIST" "an item that is a string" "LIST item 3 of pcideviceclaims is not an object"
expect_logged "LIST" "an item whose metadata is a string" "LIST item 4 of pcideviceclaims is not an object"
expect_logged "LIST" "an item with an empty name" "LIST item 5 of pcideviceclaims is not an object"
expect_logged "LIST" "continue tokens that loop" "malformed LIST response of usbdevices: a continue token that repeats"
expect_logged "LIST" "a JSON array, not an object" "malformed LIST response of usbdevices: the body is not a JSON object"
expect_logged "LIST" "200 text/plain, not JSON" "malformed LIST response of usbdeviceclaims: the body is not JSON"
expect_logged "LIST" "no resourceVersion" "malformed LIST response of usbdeviceclaims: no metadata.resourceVersion"
expect_logged "LIST" "invalid UTF-8 (the resourceVersion)" "malformed LIST response of resourceslices: a resourceVersion that is not printable ASCII"
expect_logged "LIST" "401 Unauthorized (Status)" 'reason="Unauthorized"'

echo "--- malformed watch streams and events ($SECONDS s)"
# A restart first: each informer's backoff (client-go's: 0.8 s doubling, reset after 2 quiet
# minutes) starts over, and every bad watch below costs at most a few seconds.
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" && pass "the agent exits 0 on SIGTERM after the bad LISTs" || fail "the agent exits 0 after the bad LISTs" "$(tail -5 "$LOG")"
start_agent
eventually 30 ready || fail "the agent is ready again" "$(tail -5 "$LOG")"
DEV_WATCH="/pcidevices\?labelSelector=nodename%3D$NODE&watch=1"
CLAIM_WATCH="/pcideviceclaims\?fieldSelector=spec.nodeName%3D$NODE&watch=1"
USB_WATCH="/usbdevices\?labelSelector=nodename%3D$NODE&watch=1"
UCLAIM_WATCH="/usbdeviceclaims\?watch=1"
SLICE_WATCH="/resourceslices\?fieldSelector=.*&watch=1"
metric() { curl -fsS "http://127.0.0.1:$PORT/metrics" | awk -v k="$1" '$1 == k {print $2}'; }
GPU=$(name_of 0000:18:00.0)
GPU_JSON=$(kubectl get pcidevice "$GPU" -o json | jq -c 'del(.metadata.managedFields)')
LONG=$(printf 'n%.0s' {1..600})
ev() { jq -cn --arg t "$1" --argjson o "$2" '{type: $t, object: $o}'; }
status_obj() { jq -cn --arg r "$1" --arg m "$2" --argjson c "$3" '{kind: "Status", apiVersion: "v1", status: "Failure", reason: $r, message: $m, code: $c}'; }
lines() { jq -cn '$ARGS.positional' --args "$@"; }
GPU_RV=$(jq -r .metadata.resourceVersion <<<"$GPU_JSON")
relists_uc=$(metric 'hostdevd_relists_total{controller="usbdeviceclaim"}')
rule other-node "$DEV_WATCH" "{\"prepend\": $(lines "$(ev ADDED "$OTHER_JSON")")}"
rule duplicates "$DEV_WATCH" "{\"prepend\": $(lines "$(ev MODIFIED "$GPU_JSON")" "$(ev MODIFIED "$GPU_JSON")" "$(ev ADDED "$GPU_JSON")")}"
rule unknown-type "$DEV_WATCH" "{\"lines\": $(lines '{"type":"RENAMED","object":{"metadata":{"name":"x"}}}'), \"hold\": 1.5}"
rule bookmark-no-rv "$DEV_WATCH" "{\"lines\": $(lines '{"type":"BOOKMARK","object":{"kind":"PCIDevice","metadata":{}}}'), \"hold\": 1.5}"
rule error-event "$CLAIM_WATCH" "{\"lines\": $(lines "$(ev ERROR "$(status_obj InternalError 'etcdserver: request timed out' 500)")")}"
rule no-name "$CLAIM_WATCH" "{\"lines\": $(lines '{"type":"ADDED","object":{"kind":"PCIDeviceClaim","metadata":{"namespace":""}}}'), \"hold\": 1.5}"
rule object-string "$CLAIM_WATCH" "{\"lines\": $(lines '{"type":"MODIFIED","object":"PCIDeviceClaim"}'), \"hold\": 1.5}"
rule long-name "$CLAIM_WATCH" "{\"prepend\": $(lines "$(ev ADDED "{\"kind\":\"PCIDeviceClaim\",\"metadata\":{\"name\":\"$LONG\"},\"spec\":{\"nodeName\":\"$NODE\"}}")")}"
rule huge-line "$USB_WATCH" '{"lines": ["@big:17000000:{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"@X@\"}}}"]}'
rule never-ends "$USB_WATCH" '{"lines": ["{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"na"], "raw": true, "hold": 1.5, "unterminated": true}'
rule event-bad-utf8 "$USB_WATCH" '{"lines": ["@hex:7b2274797065223a224144444544222c226f626a656374223a7b226d65746164617461223a7b226e616d65223a2278222c227265736f7572636556657273696f6e223a22ff227d7d7d"], "hold": 1.5}'
rule html-line "$DEV_WATCH" '{"lines": ["<html><body>proxy error</body></html>"], "hold": 1.5}'
rule gone-410 "$UCLAIM_WATCH" "{\"status\": 410, \"body\": $(jq -Rn --arg s "$(status_obj Expired 'too old resource version: 1 (99)' 410)" '$s')}"
rule error-410 "$UCLAIM_WATCH" "{\"lines\": $(lines "$(ev ERROR "$(status_obj Expired 'too old resource version: 2 (99)' 410)")")}"
rule big-500 "$UCLAIM_WATCH" '{"status": 500, "type": "text/html", "body": "@big:100000:<html>@X@</html>"}'
rule type-number "$UCLAIM_WATCH" "{\"lines\": $(lines '{"type":5,"object":{"metadata":{"name":"x"}}}'), \"hold\": 1.5}"
rule error-empty "$SLICE_WATCH" "{\"lines\": $(lines '{"type":"ERROR","object":{}}')}"
rule blank-line "$SLICE_WATCH" "{\"lines\": $(lines '   '), \"hold\": 1.5}"
all_hit() { for r in other-node duplicates unknown-type bookmark-no-rv error-event no-name object-string long-name \
    huge-line never-ends event-bad-utf8 html-line gone-410 error-410 big-500 type-number error-empty blank-line; do hit $r || return 1; done; }
if eventually 90 all_hit; then pass "every watch rule was served"; else fail "every watch rule was served" "$(curl -s "http://127.0.0.1:$PP/__hits")"; fi
sleep 3
OUT=$(kubectl get pcidevice "$OTHER_DEV" -o jsonpath='{.metadata.resourceVersion}' 2>&1)
[ "$OUT" = "$OTHER_RV" ] && pass "another node's PCIDevice in this node's watch: not written, not deleted" ||
    fail "another node's PCIDevice left alone" "rv $OTHER_RV -> $OUT"
expect_logged "WATCH" "ADDED event of another node's PCIDevice" "Object of another node in this node's watch; left alone" "$OTHER_DEV"
OUT=$(kubectl get pcidevice "$GPU" -o jsonpath='{.metadata.resourceVersion}')
[ "$OUT" = "$GPU_RV" ] && pass "duplicate MODIFIED/ADDED events of an unchanged device: not written" ||
    fail "duplicate events: not written" "rv $GPU_RV -> $OUT"
expect_quiet "WATCH" "duplicate MODIFIED and ADDED events of an unchanged device" "no write"
expect_logged "WATCH" "unknown event type" "an event whose type is missing or unknown" 'controller="pcidevice"'
expect_logged "WATCH" "BOOKMARK without resourceVersion" "a BOOKMARK without metadata.resourceVersion"
expect_logged "WATCH" "ERROR event with a Status (500)" "etcdserver: request timed out"
expect_logged "WATCH" "ADDED object without metadata.name" "an object without metadata.name"
expect_logged "WATCH" "object a string" "an event whose object is missing or not an object"
expect_logged "WATCH" "a 600-byte name" "a watch event's object of pcideviceclaims with a name too long to keep"
expect_logged "WATCH" "a 17 MB event line" "an event line over the size cap"
expect_logged "WATCH" "a chunk that never ends" "the stream ended inside an event"
expect_logged "WATCH" "invalid UTF-8 resourceVersion" "an event whose resourceVersion is not printable ASCII"
expect_logged "WATCH" "an HTML line" "a line that is not JSON" 'controller="pcidevice"'
relists=$(metric 'hostdevd_relists_total{controller="usbdeviceclaim"}')
[ "$relists" -ge $((relists_uc + 2)) ] && pass "410 on watch and an ERROR 410 event: both relist ($relists_uc -> $relists)" ||
    fail "410s relist" "$relists_uc -> $relists"
expect_quiet "WATCH" "410 Gone on the watch request" "relist (hostdevd_relists_total +1)"
expect_quiet "WATCH" "ERROR event with a 410 Status" "relist (hostdevd_relists_total +1)"
expect_logged "WATCH" "500 with a 100 KB HTML body" "an error on the server (500) has prevented the request" 'controller="usbdeviceclaim"'
expect_logged "WATCH" "event type a number" "an event whose type is missing or unknown" 'controller="usbdeviceclaim"'
expect_logged "WATCH" "ERROR event with an empty object" 'controller="resourceslice" http=200'
expect_logged "WATCH" "a line of blanks" "a line that is not JSON" 'controller="resourceslice"'

echo "--- good input after the bad: a claim of this node is processed, the devices are right ($SECONDS s)"
CLAIMED=0000:d8:00.2
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s, userName: admin}\n' \
    "$(name_of $CLAIMED)" "$CLAIMED" "$NODE" | kubectl create -f - >/dev/null
claim_seen() { [ -n "$(kubectl get pcideviceclaim "$(name_of $CLAIMED)" -o jsonpath='{.status.conditions[0].reason}')" ]; }
if eventually 30 claim_seen; then pass "a new claim gets its status ($(kubectl get pcideviceclaim "$(name_of $CLAIMED)" -o jsonpath='{.status.conditions[0].reason}'))"; else
    fail "a new claim after the bad input is processed" "$(tail -5 "$LOG")"; fi
[ "$(devices)" -eq "$WANT" ] && pass "all $WANT PCIDevices still published" || fail "PCIDevices still published" "have $(devices)"
ready && pass "the agent is ready" || fail "the agent is ready"

echo "--- hostile sysfs attributes, rescanned on SIGHUP ($SECONDS s)"
DEV=$SYS/bus/pci/devices
usbdir() { readlink -f "$SYS/bus/usb/devices/$1"; }
usbs() { kubectl get usbdevices -l "nodename=$NODE" -o name | wc -l; }
USB_WANT=$(usbs)
echo 0xZZZZ >"$DEV/0000:00:04.0/vendor"
: >"$DEV/0000:00:05.0/class"
head -c 1048576 /dev/zero | tr '\0' 1 >"$DEV/0000:00:16.0/device"
rm "$DEV/0000:00:17.0/iommu_group"
echo abc >"$DEV/0000:04:00.0/numa_node"
echo -3 >"$DEV/0000:3b:00.1/sriov_numvfs" 2>/dev/null || true
rm -f "$DEV/0000:04:00.1/driver" && ln -s ../../../nowhere "$DEV/0000:04:00.1/driver"
printf '\x12\x01\x00' >"$(usbdir 1-3)/descriptors"
echo garbage >"$(usbdir 1-4)/busnum"
echo -1 >"$(usbdir 3-2)/devnum"
echo zzzz >"$(usbdir 1-1.2)/idProduct"
kill -HUP "$AGENT_PID"
field() { kubectl get pcidevice "$(name_of "$1")" -o jsonpath="{.status.$2}"; }
no_group() { [ -z "$(field 0000:00:17.0 iommuGroup)" ]; }
if eventually 30 no_group; then pass "a missing iommu_group link: published without a group"; else fail "missing iommu_group" "$(field 0000:00:17.0 iommuGroup)"; fi
expect_quiet "sysfs" "iommu_group link missing" "published without a group, blocker $(field 0000:00:17.0 'passthroughBlockers[*].reason')"
expect_logged "sysfs" "vendor \"0xZZZZ\" (libpci reads 0000)" 'device="0000:00:04.0" problem="vendor: malformed"'
expect_logged "sysfs" "device attribute of 1 MB" "PCI device unreadable; skipped" 'device="0000:00:16.0" problem="Value in'
expect_logged "sysfs" "empty class" "PCI device partly unreadable; published with what was read" 'device="0000:00:05.0"'
expect_logged "sysfs" "numa_node \"abc\"" 'device="0000:04:00.0" problem="numa_node: malformed"'
expect_logged "sysfs" "sriov_numvfs -3" 'device="0000:3b:00.1" problem="sriov_numvfs: out of range"'
expect_logged "sysfs" "USB idProduct \"zzzz\"" 'device="1-1.2" problem="idProduct: malformed"'
expect_logged "sysfs" "USB busnum \"garbage\"" 'device="1-4" problem="busnum: malformed"'
expect_logged "sysfs" "USB devnum -1" 'device="3-2" problem="devnum: out of range"'
unbound() { [ -z "$(field 0000:04:00.1 kernelDriverInUse)" ]; }
if eventually 10 unbound; then pass "a driver link to nowhere: published as unbound"; else fail "driver link to nowhere" "$(field 0000:04:00.1 kernelDriverInUse)"; fi
expect_quiet "sysfs" "driver link to nowhere" "published without kernelDriverInUse (as unbound)"
expect_quiet "sysfs" "USB descriptors truncated to 3 bytes" "not read by the agent (sysfs attributes are): published unchanged"
# The devices whose identity is unreadable keep their objects as they were (not deleted).
[ "$(devices)" -eq "$WANT" ] && pass "all $WANT PCIDevices still there (the unreadable ones kept as they were)" ||
    fail "PCIDevices kept" "have $(devices)"
[ "$(usbs)" -eq "$USB_WANT" ] && pass "all $USB_WANT USBDevices still there (the unreadable ones kept as they were)" ||
    fail "USBDevices kept" "have $(usbs); want $USB_WANT"
before=$(grep -c 'unreadable' "$LOG")
kill -HUP "$AGENT_PID" # a second rescan: nothing logged again
sleep 2
[ "$(grep -c 'unreadable' "$LOG")" -eq "$before" ] && pass "a second rescan logs none of it again" ||
    fail "a second rescan logs none of it again" "$(grep unreadable "$LOG" | tail -5)"
hack/mk-sysfs-fixture.sh "$DESC" "$SYS" >/dev/null
kill -HUP "$AGENT_PID"
usb_right() { [ "$(kubectl get usbdevice "$NODE-0627-0001-1-4" -o jsonpath='{.status.busNum}')" = 1 ]; }
vendor_right() { [ "$(field 0000:00:04.0 vendorId)" = 8086 ] && [ "$(field 0000:00:17.0 iommuGroup)" = 5 ]; }
if eventually 30 vendor_right && eventually 30 usb_right; then pass "the tree repaired: the good state is published again"; else
    fail "tree repaired" "$(field 0000:00:04.0 vendorId) $(field 0000:00:17.0 iommuGroup)"; fi
ready && pass "the agent is ready" || fail "the agent is ready after the hostile tree"

echo "--- malformed uevents (udev netlink messages to the agent's monitor) ($SECONDS s)"
# The agent listens with --uevent-source udev here: messages in udevd's format to the udev
# multicast group (root may send them), judged by libudev, which drops a malformed one itself
# (with its own debug log, not the agent's): none may count, stop the monitor, or log an error.
uevents() { metric hostdevd_uevents_total; }
u0=$(uevents)
for c in short bad-magic bad-offset no-action; do
    python3 test/integration/uevent_send.py "$c" >/dev/null || fail "uevent $c sent"
    CASES=$((CASES + 1))
    printf 'uevent | %s | dropped by libudev (its debug log), not counted; monitor kept\n' "$c" >>"$TABLE"
done
sleep 1
[ "$(uevents)" = "$u0" ] && alive && pass "4 malformed uevents dropped (hostdevd_uevents_total stays $u0), agent alive" ||
    fail "malformed uevents dropped" "uevents $u0 -> $(uevents)"
# Well-formed enough for libudev: only hints to rescan, which finds the tree as it is.
for c in kernel-format huge-properties bad-devpath; do
    python3 test/integration/uevent_send.py "$c" >/dev/null || fail "uevent $c sent"
    CASES=$((CASES + 1))
    printf 'uevent | %s | an event for libudev: a rescan hint, nothing else\n' "$c" >>"$TABLE"
done
hinted() { [ "$(uevents)" -eq $((u0 + 3)) ]; }
if eventually 10 hinted && alive; then pass "a kernel-format message, a 60 KB property and DEVPATH /../../../etc/passwd: rescan hints only"; else
    fail "odd uevents are hints only" "$u0 -> $(uevents)"; fi
[ "$(devices)" -eq "$WANT" ] && pass "... the devices unchanged ($WANT)" || fail "devices after odd uevents" "$(devices)"
! grep -q "Cannot receive kernel events" "$LOG" && pass "... and the monitor kept listening (no receive error)" ||
    fail "the monitor kept listening" "$(grep 'kernel events' "$LOG")"
u0=$(uevents)
python3 test/integration/uevent_send.py good >/dev/null
counted() { [ "$(uevents)" -gt "$u0" ]; }
if eventually 10 counted; then pass "a good uevent after them is counted and rescans ($u0 -> $(uevents))"; else
    fail "a good uevent after the bad ones" "$(uevents)"; fi

echo "--- malformed HTTP/2 and gRPC on the DRA plugin's sockets ($SECONDS s)"
# The transport (src/kubelet/grpcconn.c) does not log: the peer gets the error (a GOAWAY with its code
# for the connection, a trailers-only answer with grpc-status and grpc-message for the call).
DRA=$TEST_DIR/kubelet/plugins/vfio-pci.hostdevd.io/dra.sock
REG=$(ls "$TEST_DIR"/kubelet/plugins_registry/*.sock)
PREPARE=/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources
# expect_h2 CASE PATTERN INPUT: test/integration/h2raw.py CASE on the DRA socket is answered
# with PATTERN, and the agent lives.
expect_h2() {
    CASES=$((CASES + 1))
    OUT=$(python3 test/integration/h2raw.py "$DRA" "$1" "$PREPARE" 2>&1)
    printf 'gRPC | %s | %s\n' "$3" "$(grep -F -- "$2" <<<"$OUT" | head -1)" >>"$TABLE"
    if [[ "$OUT" == *"$2"* ]] && alive; then pass "gRPC: $3 -> $2"; else fail "gRPC: $3 -> $2" "$OUT"; fi
}
expect_h2 bad-preface "closed" "an HTTP/1.1 request instead of the HTTP/2 preface"
expect_h2 oversized-frame "GOAWAY code=6 debug='too large frame size'" "a frame of 16 MiB (over SETTINGS_MAX_FRAME_SIZE)"
expect_h2 headers-on-stream-0 "GOAWAY code=1 debug='request HEADERS: stream_id == 0'" "HEADERS on stream 0"
expect_h2 data-before-headers "GOAWAY code=1 debug='DATA: stream in idle'" "DATA on a stream never opened"
expect_h2 bad-hpack "GOAWAY code=9" "a header block that is not HPACK (COMPRESSION_ERROR)"
expect_h2 window-update-zero "GOAWAY code=1 debug='WINDOW_UPDATE: window_size_increment == 0'" "WINDOW_UPDATE of 0"
expect_h2 wrong-content-type "grpc-status=13 grpc-message='invalid gRPC request content-type'" "content-type text/plain"
expect_h2 wrong-wire-types "grpc-status=3 grpc-message='malformed NodePrepareResourcesRequest" "a request whose protobuf has the wrong wire types"
expect_h2 truncated-length-prefix "grpc-status=13 grpc-message='truncated or missing request message'" "a 3-byte length prefix"
expect_h2 length-past-data "grpc-status=13 grpc-message='truncated or missing request message'" "a length prefix past the data"
expect_h2 compressed-flag "grpc-status=13 grpc-message='compressed message without grpc-encoding'" "the compressed flag set"
expect_h2 unknown-method "grpc-status=12 grpc-message='unknown method /no.Such/Method'" "an unknown method"
OUT=$("$TEST_BIN"/grpctool reginfo "$REG" 2>&1)
expect_contains "the registration socket still answers GetInfo" "$OUT" "name=vfio-pci.hostdevd.io" "v1=true"
OUT=$("$TEST_BIN"/grpctool dra "$DRA" unprepare "default/never-prepared/1234" 2>&1)
expect_contains "the DRA socket still answers a good call" "$OUT" 'uid=1234 error=""'

echo "--- malformed answers to the controller's caches ($SECONDS s)"
# The controller's four caches and its agents' Lease cache are informers outside a runner: their
# failures and skipped objects are logged like a runner's (once, with what was wrong).
CLOG=$TEST_DIR/controller.log
CPORT=$(free_port)
rule ctl-claims-500 "/pcideviceclaims\\?limit=" '{"status": 500, "type": "text/html", "body": "<html><body>upstream timed out</body></html>"}'
rule ctl-usb-noname "/usbdevices\\?limit=" '{"status": 200, "body": "{\"kind\":\"USBDeviceList\",\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[{\"metadata\":{\"namespace\":\"x\"}}]}"}'
rule ctl-leases-403 "/leases\\?limit=" "{\"status\": 403, \"body\": $(jq -Rn --arg s "$(status_obj Forbidden 'leases is forbidden: no access for this test' 403)" '$s')}"
"$AGENT" controller --kubeconfig "$TEST_DIR/proxy.kubeconfig" --listen "127.0.0.1:$CPORT" --id bad-ctl \
    -v 0 >>"$CLOG" 2>&1 &
CTL_PID=$!
track "$CTL_PID"
ctl_hit() { hit ctl-claims-500 && hit ctl-usb-noname && hit ctl-leases-403; }
eventually 30 ctl_hit || fail "the controller's rules were served" "$(curl -s "http://127.0.0.1:$PP/__hits" | tail -3)"
ctl_logged() { # WHAT CONTROLLER PATTERN: one warning of CONTROLLER holding PATTERN
    local n line
    CASES=$((CASES + 1))
    ctl_lines() { grep -E '^[WE][0-9]{4} ' "$CLOG" | grep -F "controller=\"$2\"" | grep -F -- "$3"; }
    eventually 20 test "$(ctl_lines "$@" | wc -l)" -ge 1 || true
    sleep 1
    n=$(ctl_lines "$@" | wc -l)
    line=$(ctl_lines "$@" | head -1 | cut -c1-400)
    printf '%s | %s | %s\n' "CONTROLLER" "$1" "${line#* * * }" >>"$TABLE"
    if [ "$n" -eq 1 ] && kill -0 "$CTL_PID" 2>/dev/null; then
        pass "controller: $1 -> logged once ($3), controller alive"
    else
        fail "controller: $1 -> logged once ($3), controller alive" "$n lines"
    fi
}
ctl_logged "PCIDeviceClaim LIST answered 500 with HTML" cache/pcideviceclaims "http=500"
ctl_logged "USBDevice LIST item without a name" cache/usbdevices "LIST item 1 of usbdevices is not an object with metadata.name"
ctl_logged "Lease LIST answered 403" nodeclaims/leases "no access for this test"
kill -TERM "$CTL_PID"
wait "$CTL_PID"
rc=$?
[ $rc -eq 0 ] && ! grep -q "Sanitizer" "$CLOG" && pass "the controller exits 0 on SIGTERM, sanitizers quiet" ||
    fail "the controller exits 0 on SIGTERM, sanitizers quiet" "exit $rc; $(grep -A5 Sanitizer "$CLOG" | head)"

echo "--- $CASES bad inputs; the agent stops cleanly ($SECONDS s)"
# The claim of the good input has failed (no vfio-pci module here) and been retried for the
# whole of the sections above: its failure is logged once (the retries at -v 1).
n=$(grep -E '^E[0-9]{4} ' "$LOG" | grep -F '"PCIDeviceClaim step failed"' | grep -cF "claim=\"$(name_of $CLAIMED)\"")
retries=$(grep -F '"PCIDeviceClaim step failed"' "$LOG" | grep -c '^I')
[ "$n" -eq 1 ] && pass "the claim's failure logged once ($retries retries at -v 1)" || fail "the claim's failure logged once" "$n lines"
kill -TERM "$AGENT_PID"
wait "$AGENT_PID"
rc=$?
[ $rc -eq 0 ] && ! grep -q "Sanitizer" "$LOG" && pass "the agent exits 0 on SIGTERM, sanitizers quiet" ||
    fail "the agent exits 0 on SIGTERM, sanitizers quiet" "exit $rc; $(grep -A5 Sanitizer "$LOG" | head)"
echo "  table: $TABLE"

finish
