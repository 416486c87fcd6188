# shellcheck shell=bash
# test/integration/faults-lib.sh - the API fault tests' shared part (test_faults.sh in make
# test, test/long/test_faults_long.sh in make test-long): a private control plane with
# KubeVirt's CRD and a CR holding a foreign entry; Toxiproxy (hack/toxiproxy-build.sh) in front
# of kube-apiserver, TLS passing through it as TCP; `hostdevd agent` on a fake sysfs tree and
# `hostdevd controller`, both with their ServiceAccount's token and a kubeconfig pointing at the
# proxy; helpers to inject faults, change the world while they last, and check that the end
# state is exactly right and that the audit log holds no write it should not.
#
# A phase: fault_begin NAME; inject; change (add_device, add_claim); heal;
# fault_end "ROW". fault_end waits for the state, checks both processes still run, waits for
# hostdevd's writes to settle and checks the phase's window of the audit log; the row (fault |
# how injected | how many times | outcome) goes to build/results/$SUITE.rows.
# shellcheck source=test/integration/lib.sh disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT" || exit 1

BIN=$TEST_BIN/hostdevd
NODE="fault-node"
FOREIGN='{"pciVendorSelector":"15b3:1017","resourceName":"mellanox.com/CX5"}'
CONVERGE_TIMEOUT=${FAULTS_CONVERGE_TIMEOUT:-60}
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
[ -x "$BIN" ] || make -C "$ROOT" build/asan/hostdevd >/dev/null

# --- Toxiproxy ---------------------------------------------------------------------------------

# tox METHOD PATH [JSON]: one request to Toxiproxy's HTTP API.
tox() {
    curl -fsS --max-time 10 -X "$1" "http://127.0.0.1:$TOX_PORT$2" \
        ${3:+-H 'Content-Type: application/json' --data "$3"} >/dev/null
}
# toxic NAME TYPE STREAM ATTRIBUTES-JSON: adds a toxic to the proxy in front of the API server.
toxic() {
    tox POST /proxies/apiserver/toxics \
        "{\"name\":\"$1\",\"type\":\"$2\",\"stream\":\"$3\",\"toxicity\":1,\"attributes\":$4}"
}
untoxic() { local t; for t in "$@"; do tox DELETE "/proxies/apiserver/toxics/$t"; done; }
proxy_enabled() { tox POST /proxies/apiserver "{\"enabled\":$1}"; }

toxiproxy_start() {
    local tools
    if ! tools=$("$ROOT/hack/toxiproxy-build.sh"); then
        fail "hack/toxiproxy-build.sh builds Toxiproxy"
        finish
    fi
    TOX_PORT=$(free_port)
    PROXY_PORT=$(free_port)
    while [ "$PROXY_PORT" = "$TOX_PORT" ]; do PROXY_PORT=$(free_port); done
    "$tools/toxiproxy-server" -host 127.0.0.1 -port "$TOX_PORT" >"$TEST_DIR/toxiproxy.log" 2>&1 &
    track $!
    eventually 10 tox GET /version || { fail "toxiproxy-server answers" "$(tail "$TEST_DIR/toxiproxy.log")"; finish; }
    tox POST /proxies "{\"name\":\"apiserver\",\"listen\":\"127.0.0.1:$PROXY_PORT\",\"upstream\":\"${K8S_SERVER#https://}\"}"
    PROXY=https://127.0.0.1:$PROXY_PORT
}

# --- the world ---------------------------------------------------------------------------------

# The fake node: test/fixtures/sysfs/faults-node.txt plus what add_device appended.
DESC=""
SYS=""
NEXT_SLOT=16 # 0000:10:00.0 is the first device added (one bus each: 240 of them at most)
CLAIMS=()    # PCI addresses claimed (and not dropped)

pci_name() { local a=${2//:/}; echo "$1-${a//./}"; }

# The tree made from $DESC, or what $DESC adds copied into the live tree (cp -n: what exists
# stays), so the root and every existing path keep their inodes as /sys does (the claim
# reconciler keeps the root open; mk-sysfs-fixture.sh replaces the whole directory).
rebuild_tree() {
    if [ ! -d "$SYS" ]; then
        "$ROOT/hack/mk-sysfs-fixture.sh" "$DESC" "$SYS" >/dev/null
        return
    fi
    rm -rf "$TEST_DIR/sys.new"
    "$ROOT/hack/mk-sysfs-fixture.sh" "$DESC" "$TEST_DIR/sys.new" >/dev/null &&
        cp -an "$TEST_DIR/sys.new/." "$SYS/"
}

# add_device: one more e1000e on vfio-pci in its own IOMMU group, the tree rebuilt and the agent
# told to rescan (SIGHUP). Prints nothing; ADDED is its address.
add_device() {
    ADDED=$(printf '0000:%02x:00.0' "$NEXT_SLOT")
    printf '%s    0200   8086:10d3 driver=vfio-pci iommu=%d numa=0\n' "$ADDED" "$NEXT_SLOT" >>"$DESC"
    NEXT_SLOT=$((NEXT_SLOT + 1))
    rebuild_tree
    kill -HUP "$AGENT_PID"
}

# add_claim ADDRESS: a PCIDeviceClaim with disableResourcePooling (so each claim is its own
# KubeVirt entry). Made with the admin's direct connection, not through the proxy.
add_claim() {
    printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s, disableResourcePooling: true}\n' \
        "$(pci_name "$NODE" "$1")" "$1" "$NODE" | kubectl create -f - >/dev/null || fail "claim $1 created"
    CLAIMS+=("$1")
}

# change: a device appears (SIGHUP) and a claim on the device added before is created; CHANGED
# names the two objects the fault's window may write.
LAST=0000:00:05.0 # claimable, not claimed yet
change() {
    add_device
    add_claim "$LAST"
    CHANGED=("$(pci_name "$NODE" "$ADDED")" "$(pci_name "$NODE" "$LAST")")
    LAST=$ADDED
}

# repeated N COMMAND...: N times a change and then COMMAND; ALL names every object changed, and
# the conflict limit of fault_end grows with N (5 per fault, as for one).
repeated() {
    local n=$1 i
    shift
    ALL=()
    for i in $(seq 1 "$n"); do
        change
        ALL+=("${CHANGED[@]}")
        "$@" || fail "$* (time $i)"
    done
    healed
    MAX_CONFLICTS=$((5 * n))
    MAX_CONFLICTS_PER_OBJECT=$n # one lost answer per object per fault
}

# state_check: the whole state is right: every device of the tree one PCIDevice (and the USB
# stick one USBDevice) with its driver and status, nothing else of the node; each claim Ready
# and passthroughEnabled, no other claim; the KubeVirt CR lists the foreign entry first and
# exactly one entry per claim, and the ownership annotation names them. Prints what is wrong.
state_check() {
    local devs claims cr g=/apis/devices.harvesterhci.io/v1beta1 sel="labelSelector=nodename%3D$NODE"
    # (curl, lib.sh's kapi: it runs after every fault; a raw list's items carry no kind)
    if ! devs=$(jq -s '{items: ((.[0].items | map(.kind = "PCIDevice")) + (.[1].items | map(.kind = "USBDevice")))}' \
        <(kapi GET "$g/pcidevices?$sel") <(kapi GET "$g/usbdevices?$sel")) ||
        ! claims=$(kapi GET "$g/pcideviceclaims") ||
        ! cr=$(kapi GET /apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt); then
        echo "reading the state failed"
        return 1
    fi
    python3 - "$DESC" "$NODE" "$FOREIGN" "${CLAIMS[*]}" 3<<<"$devs" 4<<<"$claims" 5<<<"$cr" <<'EOF'
import collections, json, os, sys
desc, node, foreign, claimed = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4].split()
devs = json.load(os.fdopen(3))["items"]
claims = json.load(os.fdopen(4))["items"]
cr = json.load(os.fdopen(5))
bad = []
want = {}
for line in open(desc):
    f = line.split("#")[0].split()
    if f and f[0] != "usb":
        drv = [kv[7:] for kv in f[3:] if kv.startswith("driver=")]
        want[f[0]] = drv[0] if drv else ""
pci = [d for d in devs if d["kind"] == "PCIDevice"]
usb = [d for d in devs if d["kind"] == "USBDevice"]
addrs = collections.Counter(d.get("status", {}).get("address") for d in pci)
for a, n in addrs.items():
    if n > 1:
        bad.append(f"{n} PCIDevices for {a}")
if set(addrs) != set(want):
    bad.append(f"PCIDevices {sorted(addrs, key=str)} != tree {sorted(want)}")
for d in pci:
    s = d.get("status", {})
    a = s.get("address")
    if a in want and s.get("kernelDriverInUse", "") != want[a]:
        bad.append(f"{a}: driver {s.get('kernelDriverInUse')!r}, tree {want[a]!r}")
    if s.get("nodeName") != node or not s.get("resourceName"):
        bad.append(f"{d['metadata']['name']}: incomplete status")
if len(usb) != 1 or usb[0].get("status", {}).get("portPath") != "1-2":
    bad.append(f"USBDevices: {[u['metadata']['name'] for u in usb]}")
names = {d["metadata"]["name"]: d for d in pci}
wantc = {f"{node}-" + a.replace(":", "").replace(".", ""): a for a in claimed}
have = {c["metadata"]["name"]: c for c in claims}
if set(have) != set(wantc):
    bad.append(f"claims {sorted(have)} != {sorted(wantc)}")
entries = []
for n in sorted(wantc):
    c = have.get(n)
    if not c:
        continue
    st = c.get("status", {})
    ready = [x for x in st.get("conditions", []) if x.get("type") == "Ready"]
    if not st.get("passthroughEnabled") or not ready or ready[0].get("status") != "True":
        bad.append(f"claim {n} not Ready/passthroughEnabled: {ready[0].get('reason') if ready else None}")
    dev = names.get(n)
    dom = dev["status"]["resourceName"].split("/")[0] if dev else "?"
    entries.append(f"{dom}/{n}")
phd = (cr["spec"]["configuration"].get("permittedHostDevices") or {})
pcis = phd.get("pciHostDevices") or []
if not pcis or pcis[0] != foreign:
    bad.append(f"foreign entry not first and unchanged: {pcis[:1]}")
ours = [e.get("resourceName") for e in pcis[1:]]
if sorted(ours) != sorted(entries):
    bad.append(f"CR entries {sorted(ours, key=str)} != {entries}")
for e in pcis[1:]:
    if e.get("pciVendorSelector") != "8086:10d3" or e.get("externalResourceProvider") is not True:
        bad.append(f"CR entry {e}")
own = cr["metadata"].get("annotations", {}).get("hostdevd.io/owned-host-devices", "")
if own != ",".join(sorted(entries)):
    bad.append(f"ownership annotation {own!r}")
if bad:
    print("\n".join(bad))
    sys.exit(1)
print(f"{len(pci)} PCIDevices, {len(usb)} USBDevice, {len(have)} claims Ready, {len(pcis)} CR entries")
EOF
}

# --- hostdevd ----------------------------------------------------------------------------------

AGENT_PID=""
CTL_PID=""
start_agent() {
    "$BIN" agent --node-name "$NODE" --kubeconfig "$TEST_DIR/agent.kubeconfig" --sysfs-root "$SYS" \
        --proc-root "$TEST_DIR/proc" --dev-root "$TEST_DIR/dev" --kubelet-dir "$TEST_DIR/kubelet" \
        --listen "127.0.0.1:$AGENT_PORT" --resync 3600 --uevent-source none -v 2 \
        >>"$TEST_DIR/agent.log" 2>&1 &
    AGENT_PID=$!
    track "$AGENT_PID"
}
start_controller() {
    "$BIN" controller --kubeconfig "$TEST_DIR/controller.kubeconfig" --listen "127.0.0.1:$CTL_PORT" \
        --id faults-0 -v 2 >>"$TEST_DIR/controller.log" 2>&1 &
    CTL_PID=$!
    track "$CTL_PID"
}
# metric PORT SERIES: the sum of a /metrics series (with any labels) of the process on PORT.
metric() {
    curl -fsS "http://127.0.0.1:$1/metrics" | awk -v k="$2" 'index($1, k) == 1 {s += $2} END {print s + 0}'
}

# faults_setup: the control plane, Toxiproxy, the agent and the controller, converged.
faults_setup() {
    cluster_start
    AUDIT=$TEST_DIR/cluster/audit.log
    install_crds || fail "CRDs installed"
    kubectl apply -f manifests/agent-rbac.yaml -f manifests/controller-rbac.yaml >/dev/null || fail "RBAC"
    install_kubevirt "{pciHostDevices: [$FOREIGN]}" || fail "KubeVirt's CRD and CR"
    create_node "$NODE"
    toxiproxy_start
    sa_kubeconfig hostdevd-system hostdevd-agent "$TEST_DIR/agent.kubeconfig" "$PROXY" ||
        fail "the agent's kubeconfig through the proxy"
    sa_kubeconfig hostdevd-system hostdevd-controller "$TEST_DIR/controller.kubeconfig" "$PROXY" ||
        fail "the controller's kubeconfig through the proxy"
    DESC=$TEST_DIR/desc.txt
    SYS=$TEST_DIR/sys
    cp test/fixtures/sysfs/faults-node.txt "$DESC"
    rebuild_tree
    mkdir -p "$SYS/module/vfio_iommu_type1" "$TEST_DIR/dev/bus/usb/001" "$TEST_DIR/kubelet/device-plugins"
    : >"$TEST_DIR/dev/bus/usb/001/002"
    fake_proc "$TEST_DIR/proc"
    AGENT_PORT=$(free_port)
    CTL_PORT=$(free_port)
    start_agent
    start_controller
    add_claim 0000:00:04.0
    if eventually 60 state_check; then
        pass "through Toxiproxy: agent and controller converge ($(state_check))"
    else
        fail "agent and controller converge through the proxy" "$(state_check; tail -n 5 "$TEST_DIR/agent.log" "$TEST_DIR/controller.log")"
        finish
    fi
    eventually 30 audit_quiet "$AUDIT" 2 || fail "hostdevd's writes settle"
    ROWS=$ROOT/build/results/$SUITE.rows
    mkdir -p "$ROOT/build/results"
    : >"$ROWS"
}

# --- phases ------------------------------------------------------------------------------------

fault_begin() { # name
    PHASE=$1
    unset MAX_CONFLICTS MAX_CONFLICTS_PER_OBJECT # a phase may allow more (repeated, or set after this)
    MARK=$(wc -l <"$AUDIT")
    PHASE_T0=$(date +%s.%N)
    HEALED_T=""
    echo "--- $1"
}
healed() { HEALED_T=$(date +%s.%N); }
since() { awk -v a="$(date +%s.%N)" -v b="$1" 'BEGIN {printf "%.1f", a - b}'; }

# audit_window MARK NAME...: hostdevd's requests in the audit log after line MARK (a NAME
# ending in * is a prefix). Prints
# "writes=N conflicts=N codes=CODE:N,... perobject=MAX", then one line per unexpected write:
# a write (Leases and Events aside) to an object other than the named ones (the devices and
# claims the phase changed), the node's ResourceSlice and the KubeVirt CR, or a create when no
# name is given, is a second write from a stale cache.
audit_window() {
    python3 - "$AUDIT" "$@" <<'PY'
import collections, itertools, json, sys
audit, mark, names = sys.argv[1], int(sys.argv[2]), set(sys.argv[3:])
W = {"create", "update", "patch", "delete", "deletecollection"}
writes, codes, unexpected = collections.Counter(), collections.Counter(), collections.Counter()
conflicts, per_conflicts = 0, collections.Counter()
for line in itertools.islice(open(audit), mark, None):
    try:  # the last line may be half written, or cut by a restart
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("stage") != "ResponseComplete" or not e.get("userAgent", "").startswith("hostdevd/"):
        continue
    who = "controller" if e["user"]["username"].endswith(":hostdevd-controller") else "agent"
    code = e.get("responseStatus", {}).get("code", 0)
    codes[code] += 1
    o = e.get("objectRef", {})
    res, name = o.get("resource", "?"), o.get("name")
    if e["verb"] not in W or res in ("leases", "events"):
        continue
    writes[(res, name)] += 1
    conflicts += code == 409
    per_conflicts[(res, name)] += code == 409
    known = name in names or any(n.endswith("*") and (name or "").startswith(n[:-1]) for n in names)
    if res not in ("resourceslices", "kubevirts") and not (known or (not name and names)):
        unexpected[(who, e["verb"], res, name, code)] += 1
print(f"writes={sum(writes.values())} conflicts={conflicts} "
      f"codes={','.join(f'{c}:{n}' for c, n in sorted(codes.items()))} "
      f"perobject={max(writes.values(), default=0)} "
      f"conflictsperobject={max(per_conflicts.values(), default=0)} "
      f"conflicted={','.join(f'{r}/{n}:{c}' for (r, n), c in per_conflicts.most_common() if c)}")
for k, n in sorted(unexpected.items(), key=str):
    print("unexpected", *k, n)
PY
}

# fault_end FAULT HOW TIMES NAME...: the state converges, both processes still run, hostdevd's
# writes settle and the audit window is clean (NAME...: the objects the phase changed, see
# audit_window; at most MAX_CONFLICTS (5) answers 409 in all: a write retried from a stale
# cache every few milliseconds of the runner's backoff gave 10-20); then the row goes to $ROWS.
fault_end() {
    local fault=$1 how=$2 times=$3 t state summary outcome conflicts
    shift 3
    if eventually "$CONVERGE_TIMEOUT" state_check; then
        t=$(since "${HEALED_T:-$PHASE_T0}")
        state=$(state_check)
        pass "$PHASE: converged ${t} s after the fault ended ($state)"
        outcome="converged ${t} s after, nothing lost ($state)"
    else
        state=$(state_check)
        fail "$PHASE: converged" "$state"$'\n'"$(tail -n 5 "$TEST_DIR/agent.log" "$TEST_DIR/controller.log")"
        outcome="NOT converged: $state"
    fi
    if kill -0 "$AGENT_PID" 2>/dev/null && kill -0 "$CTL_PID" 2>/dev/null; then
        pass "$PHASE: the agent and the controller still run"
    else
        fail "$PHASE: the agent and the controller still run" "$(tail -20 "$TEST_DIR/agent.log" "$TEST_DIR/controller.log")"
    fi
    eventually 30 audit_quiet "$AUDIT" 2 || fail "$PHASE: hostdevd's writes settle"
    summary=$(audit_window "$MARK" "$@")
    echo "  audit: $(head -1 <<<"$summary")"
    if grep -q '^unexpected' <<<"$summary"; then
        fail "$PHASE: no write to an object the phase did not change (audit log)" "$summary"
    else
        pass "$PHASE: no write to an object the phase did not change (audit log)"
    fi
    conflicts=$(head -1 <<<"$summary" | sed -n 's/.*conflicts=\([0-9]*\).*/\1/p')
    conflicts=${conflicts:-999} # no summary: the audit log could not be read
    if [ "$conflicts" -le "${MAX_CONFLICTS:-5}" ]; then
        pass "$PHASE: no conflict loop ($conflicts answers 409)"
    else
        fail "$PHASE: no conflict loop" "$summary"
    fi
    # Per object: a 409 needs a write from a stale cache, which a fault makes once per answer
    # it loses (the write applied, the answer gone). The runner then holds the key until its
    # informer moves past where it was at the 409 (docs/runtime.md), which, with one object per
    # informer that could conflict (the node's ResourceSlice, the KubeVirt CR), is when the lost
    # version arrives: one 409 per lost answer, whatever the timing. A single fault window loses
    # at most one answer per object (its retries cannot reach the server until the window ends,
    # and after it the key is held), so at most 1 per object; the storm this guards against
    # (a key released at once) met 409 once per trigger while the watch lagged: five in a row.
    perobject=$(head -1 <<<"$summary" | sed -n 's/.*conflictsperobject=\([0-9]*\).*/\1/p')
    perobject=${perobject:-999}
    if [ "$perobject" -le "${MAX_CONFLICTS_PER_OBJECT:-1}" ]; then
        pass "$PHASE: at most ${MAX_CONFLICTS_PER_OBJECT:-1} answer 409 per object ($perobject)"
    else
        fail "$PHASE: at most ${MAX_CONFLICTS_PER_OBJECT:-1} answer 409 per object" "$summary"
    fi
    printf '| %s | %s | %s | %s; %s |\n' "$fault" "$how" "$times" "$outcome" "$(head -1 <<<"$summary")" >>"$ROWS"
}

# --- API Priority and Fairness -----------------------------------------------------------------

# apf_squeeze: the agents' ServiceAccount gets a priority level of its own with one seat and no
# queue (429 at once when busy): a ballast level of 10000 shares leaves it 1 of the server's
# 600 seats. apf_release removes all three.
apf_squeeze() {
    kubectl apply -f - >/dev/null <<EOF
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: hostdevd-faults-ballast}
spec:
  type: Limited
  limited: {nominalConcurrencyShares: 10000, lendablePercent: 100, limitResponse: {type: Reject}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: hostdevd-faults-tiny}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: hostdevd-faults-agents}
spec:
  priorityLevelConfiguration: {name: hostdevd-faults-tiny}
  matchingPrecedence: 500
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects:
    - kind: ServiceAccount
      serviceAccount: {name: hostdevd-agent, namespace: hostdevd-system}
    resourceRules:
    - {verbs: ["*"], apiGroups: ["*"], resources: ["*"], clusterScope: true, namespaces: ["*"]}
    nonResourceRules:
    - {verbs: ["*"], nonResourceURLs: ["*"]}
EOF
}
apf_release() {
    kubectl delete flowschema hostdevd-faults-agents >/dev/null &&
        kubectl delete prioritylevelconfiguration hostdevd-faults-tiny hostdevd-faults-ballast >/dev/null
}

# apf_gaps MARK: the agents' requests answered 429 after line MARK of the audit log: prints
# "N429 RETRIED SHORTEST-WAIT", a retry being the next request with the same verb and URI
# (creates left out: they share one URI), the wait running from the 429's answer to it.
apf_gaps() {
    python3 - "$AUDIT" "$1" <<'PY'
import collections, datetime, itertools, json, sys
t = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
seq = collections.defaultdict(list)
n429 = 0
for line in itertools.islice(open(sys.argv[1]), int(sys.argv[2]), None):
    try:  # the last line may be half written, or cut by a restart
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("stage") != "ResponseComplete" or not e["user"]["username"].endswith(":hostdevd-agent"):
        continue
    code = e.get("responseStatus", {}).get("code", 0)
    n429 += code == 429
    if e["verb"] != "create":
        seq[(e["verb"], e["requestURI"])].append((t(e["requestReceivedTimestamp"]), t(e["stageTimestamp"]), code))
waits = []
for reqs in seq.values():
    reqs.sort()
    # From the 429's arrival, not its ResponseComplete stamp: under load the API server stamps
    # that after the client already has the answer (a 0.94 s "wait" was seen at load 30), while
    # the client's answer surely came after the request arrived.
    for (recv, _, code), (nxt, _, _) in zip(reqs, reqs[1:]):
        if code == 429:
            waits.append(nxt - recv)
print(f"{n429} {len(waits)} {min(waits) if waits else -1:.2f}")
PY
}
