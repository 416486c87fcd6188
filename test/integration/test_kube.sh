#!/usr/bin/env bash
# test/integration/test_kube.sh - src/kube (the C client) against the real control plane:
# verbs with conflicts and preconditions, an informer that sees create/update/delete in order
# and whose store equals `kubectl get`, a forced 410 (etcd compacted and the apiserver
# restarted while the informer is frozen) that makes it relist and emit deletes, an apiserver
# restart mid-watch, and errors that name the server and say why when a GET, a LIST or a WATCH
# is refused. Also measures create-to-handler latency (printed, not asserted).
SUITE=kube
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

KT=$TEST_BIN/kubetool
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

cluster_start
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
install_crds

now_us() { date +%s%6N; }
device() { # name [extra metadata line]
    kubectl create -f - >/dev/null <<EOF
apiVersion: devices.harvesterhci.io/v1beta1
kind: PCIDevice
metadata:
  name: $1
  labels: {nodename: inf}
  annotations: {hostdevd.test/sent-us: "$(now_us)"}
EOF
}

echo "--- verbs"
expect_ok "create, get, merge patch, status patch, stale update conflicts, JSON patch, delete preconditions" \
    "$KT" crud "$ADMIN" itest-0000001f6
printf '%s\n' "$OUT" | sed 's/^/       /'
expect_contains "every response came over HTTP/2" "$OUT" "responses 11, over HTTP/2 11"
expect_reject "the object is gone after delete" "NotFound" kubectl get pcidevice itest-0000001f6

echo "--- informer"
W=$TEST_DIR/informer
mkdir -p "$W"
# Pages of 2 objects, so every LIST follows continue tokens.
KUBETOOL_PAGE_SIZE=2 "$KT" informer "$ADMIN" "$W" >"$W/log" 2>&1 &
INF=$!
F=$TEST_DIR/field
mkdir -p "$F"
"$KT" informer "$ADMIN" "$F" "" metadata.name=inf-a-0000001f6 >"$F/log" 2>&1 &
FINF=$!
stop_informer() { kill -CONT "$INF" 2>/dev/null; kill -TERM "$INF" 2>/dev/null; wait "$INF"; }

if eventually 30 test -f "$W/synced"; then pass "informer synced"; else fail "informer synced" "$(cat "$W/log")"; fi

device inf-a-0000001f6
device inf-b-0000001f6
kubectl label pcidevice inf-a-0000001f6 step=2 >/dev/null
kubectl delete pcidevice inf-b-0000001f6 >/dev/null
in_order() { # patterns...: each appears in $W/events after the previous one
    local line=0 p n
    for p in "$@"; do
        n=$(awk -v from="$line" -v p="$p" 'NR > from && index($0, p) == 1 {print NR; exit}' "$W/events")
        [ -n "$n" ] || return 1
        line=$n
    done
}
if eventually 30 in_order "ADD inf-a-0000001f6" "ADD inf-b-0000001f6" "UPDATE inf-a-0000001f6" \
    "DELETE inf-b-0000001f6"; then
    pass "handlers saw create, create, update, delete in order"
else
    fail "handlers saw create, create, update, delete in order" "$(cat "$W/events")"
fi

store_matches() {
    kill -USR1 "$INF"
    sleep 0.3
    diff <(grep -v '^#' "$W/store") <(kubectl get pcidevices -o \
        jsonpath='{range .items[*]}{.metadata.name} {.metadata.resourceVersion}{"\n"}{end}' |
        sed '/^$/d' | sort) >"$W/diff"
}
stats() { kill -USR1 "$INF"; sleep 0.3; grep '^# stats' "$W/store"; }
if eventually 30 store_matches; then pass "store equals kubectl get"; else fail "store equals kubectl get" "$(cat "$W/diff")"; fi
field_store() { kill -USR1 "$FINF"; sleep 0.3; [ "$(grep -v '^#' "$F/store" | awk '{print $1}')" = inf-a-0000001f6 ]; }
if eventually 30 field_store; then pass "a field-selected informer caches only its object"; else fail "a field-selected informer caches only its object" "$(cat "$F/store")"; fi
kill -TERM "$FINF"
wait "$FINF" && pass "field-selected informer stopped cleanly" || fail "field-selected informer stopped cleanly" "$(tail "$F/log")"

printf '%s\n' "apiVersion: devices.harvesterhci.io/v1beta1" "kind: PCIDevice" \
    "metadata: {name: echo-0000001f6, annotations: {hostdevd.test/echo: 'yes'}}" |
    kubectl create -f - >/dev/null
echoed() { [ "$(kubectl get pcidevice echo-0000001f6 -o jsonpath='{.metadata.labels.echoed}')" = true ]; }
if eventually 20 echoed; then
    pass "a handler can start a request (deferred out of curl's callback)"
else
    fail "a handler can start a request (deferred out of curl's callback)" "$(tail -5 "$W/log")"
fi

echo "--- latency: kubectl create to the informer's add handler"
: >"$W/timing"
for i in $(seq 1 20); do device "lat-$i-0000001f6"; done
eventually 30 test "$(wc -l <"$W/timing")" -ge 20
if [ "$(wc -l <"$W/timing")" -ge 20 ]; then
    median=$(sort -n "$W/timing" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    max=$(sort -n "$W/timing" | tail -1)
    echo "  create->handler latency over 20 creates: median $((median / 1000)) ms, max $((max / 1000)) ms (includes kubectl's own start-up)"
    pass "20 creates reached the handler"
else
    fail "20 creates reached the handler" "$(wc -l <"$W/timing")"
fi

echo "--- 410 Gone: etcd compacted and the apiserver restarted while the informer was frozen"
for i in 1 2 3; do device "gone-$i-0000001f6"; done
eventually 30 store_matches
kill -STOP "$INF"
kubectl delete pcidevice gone-1-0000001f6 gone-2-0000001f6 >/dev/null
device gone-4-0000001f6
rev=$(etcdctl --endpoints "$ETCD_ENDPOINT" endpoint status -w json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["header"]["revision"])')
expect_ok "etcd compacted to revision $rev" etcdctl --endpoints "$ETCD_ENDPOINT" compact "$rev"
expect_ok "kube-apiserver restarted" "$ROOT/hack/cluster.sh" restart "$TEST_DIR/cluster" apiserver
kill -CONT "$INF"
relisted() { grep -qE 'relists_gone=[1-9]' <<<"$(stats)"; }
if eventually 90 relisted; then pass "the informer relisted after 410"; else fail "the informer relisted after 410" "$(stats; tail -5 "$W/log")"; fi
if eventually 30 in_order "DELETE gone-1-0000001f6" && in_order "DELETE gone-2-0000001f6" &&
    in_order "ADD gone-4-0000001f6"; then
    pass "deletes emitted for objects removed meanwhile, add for the new one"
else
    fail "deletes emitted for objects removed meanwhile, add for the new one" "$(tail -20 "$W/events")"
fi
if eventually 30 store_matches; then pass "store equals kubectl get after the relist"; else fail "store equals kubectl get after the relist" "$(cat "$W/diff")"; fi
pages=$(grep -c 'pcidevices?limit=2\\u0026continue=' "$TEST_DIR/cluster/audit.log")
[ "$pages" -gt 5 ] && pass "the relist followed continue tokens ($pages pages of 2 in the audit log)" ||
    fail "the relist followed continue tokens" "$pages continue requests in the audit log"

echo "--- apiserver restarted mid-watch"
before=$(stats)
expect_ok "kube-apiserver restarted" "$ROOT/hack/cluster.sh" restart "$TEST_DIR/cluster" apiserver
device after-restart-0000001f6
kubectl label pcidevice gone-3-0000001f6 step=restart >/dev/null
kubectl delete pcidevice inf-a-0000001f6 >/dev/null
if eventually 90 store_matches; then pass "store converged after the restart"; else fail "store converged after the restart" "$(cat "$W/diff"; stats)"; fi
echo "  stats before: ${before#\# stats }"
echo "  stats after:  $(stats | sed 's/^# stats //')"

echo "--- transport failures say why and where"
# curl says "Couldn't connect to server" (newer versions "Connection refused").
says_refused() { [[ $1 == *"Couldn't connect"* || $1 == *"onnection refused"* ]]; }
CLOSED_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
CLOSED=$TEST_DIR/closed.kubeconfig
sed "s#server: https://127.0.0.1:[0-9]*#server: https://127.0.0.1:$CLOSED_PORT#" "$ADMIN" >"$CLOSED"
OUT=$("$KT" get "$CLOSED" itest-0000001f6 2>&1)
if [ $? -eq 1 ] && says_refused "$OUT" &&
    [[ $OUT == *"GET \"https://127.0.0.1:$CLOSED_PORT/apis/devices.harvesterhci.io/v1beta1/pcidevices/itest-0000001f6\""* ]]; then
    pass "a refused GET names the request and the server and says the connection failed"
else
    fail "a refused GET names the request and the server and says the connection failed" "$OUT"
fi
C=$TEST_DIR/closed
mkdir -p "$C"
"$KT" informer "$CLOSED" "$C" >"$C/log" 2>&1 &
CINF=$!
eventually 20 grep -q "Informer request failed" "$C/log"
kill -TERM "$CINF"
wait "$CINF"
OUT=$(grep -m1 "Informer request failed" "$C/log" | sed -n 's/.* message="\(.*\)" err=.*/\1/p')
if says_refused "$OUT" && [[ $OUT == *"https://127.0.0.1:$CLOSED_PORT/apis/devices.harvesterhci.io/v1beta1/pcidevices?limit="* ]]; then
    pass "a refused LIST names the server and says the connection failed"
else
    fail "a refused LIST names the server and says the connection failed" "$(tail -5 "$C/log")"
fi
# The synced informer is watching: with the apiserver gone its WATCH is refused, and must say
# so, not "watch ended at once".
from=$(wc -l <"$W/log")
since_stop() { tail -n +$((from + 1)) "$W/log" | grep "Informer request failed"; }
# The message="..." values of the informer's error lines since the stop.
messages_since_stop() { since_stop | sed -n 's/.* message="\(.*\)" err=.*/\1/p'; }
watch_refused() {
    local m
    while IFS= read -r m; do
        [[ $m == *"https://${K8S_SERVER#https://}/apis/devices.harvesterhci.io/v1beta1/pcidevices?"*watch=1* ]] &&
            says_refused "$m" && return 0
    done < <(messages_since_stop)
    return 1
}
expect_ok "kube-apiserver stopped" "$ROOT/hack/cluster.sh" stop "$TEST_DIR/cluster" apiserver
if eventually 30 watch_refused; then
    pass "a refused WATCH names the server and says the connection failed"
else
    fail "a refused WATCH names the server and says the connection failed" "$(since_stop | tail -5)"
fi
if grep -q "watch ended at once" <<<"$(since_stop)"; then
    fail "no refused WATCH is reported as \"watch ended at once\"" "$(since_stop | grep "watch ended at once" | head -3)"
else
    pass "no refused WATCH is reported as \"watch ended at once\""
fi
expect_ok "kube-apiserver started" "$ROOT/hack/cluster.sh" start "$TEST_DIR/cluster" apiserver
if eventually 90 store_matches; then pass "store converged after the apiserver came back"; else fail "store converged after the apiserver came back" "$(cat "$W/diff"; stats)"; fi

echo "--- shutdown"
stop_informer
rc=$?
if [ $rc -eq 0 ]; then pass "informer stopped cleanly (no leaks under ASan)"; else fail "informer stopped cleanly (no leaks under ASan)" "exit $rc; $(tail -20 "$W/log")"; fi

echo "--- bookmarks: the next WATCH resumes from a BOOKMARK's resourceVersion"
# An informer whose label selector matches nothing created here, with 4 s watches: the
# apiserver sends a BOOKMARK (allowWatchBookmarks=true) 2 s before each watch's deadline, with
# the resourceVersion its cache has reached. No event reaches the informer and it lists once,
# so only a bookmark can move the resourceVersion its next WATCH asks for past the LIST's.
B=$TEST_DIR/bookmark
mkdir -p "$B"
KUBETOOL_WATCH_TIMEOUT=4 "$KT" informer "$ADMIN" "$B" bookmark=none >"$B/log" 2>&1 &
BINF=$!
if eventually 30 test -f "$B/synced"; then pass "bookmark informer synced"; else fail "bookmark informer synced" "$(cat "$B/log")"; fi
for i in 1 2 3; do device "bm-$i-0000001f6"; done
BRV=$(kubectl get pcidevice bm-3-0000001f6 -o jsonpath='{.metadata.resourceVersion}')
# The resourceVersion of each of its WATCH requests, in order (audit log, stage
# ResponseStarted).
bookmark_watches() {
    python3 -c '
import json, sys, urllib.parse
for line in open(sys.argv[1]):
    e = json.loads(line)
    u = urllib.parse.urlsplit(e.get("requestURI", ""))
    q = urllib.parse.parse_qs(u.query)
    if e.get("stage") == "ResponseStarted" and q.get("watch") == ["1"] and \
            q.get("labelSelector") == ["bookmark=none"]:
        print(q.get("resourceVersion", [""])[0])' "$TEST_DIR/cluster/audit.log"
}
resumed() { bookmark_watches | awk -v rv="$BRV" '$1 + 0 >= rv + 0 {found = 1} END {exit !found}'; }
bstats() { kill -USR1 "$BINF"; sleep 0.3; grep '^# stats' "$B/store"; }
if eventually 20 resumed; then
    first=$(bookmark_watches | awk 'NR == 1')
    st=$(bstats)
    if [ "${first:-0}" -lt "$BRV" ] && grep -q ' lists=1 ' <<<"$st" && grep -q ' events=0 ' <<<"$st" &&
        grep -qE ' bookmarks=[1-9]' <<<"$st"; then
        pass "a WATCH resumed from a bookmark (first from $first, then from >= $BRV, no events, one LIST)"
    else
        fail "a WATCH resumed from a bookmark" "first watch from $first, created at $BRV; $st"
    fi
else
    fail "a WATCH resumed from a bookmark" "watches from: $(bookmark_watches | tr '\n' ' '); created at $BRV; $(bstats)"
fi
kill -TERM "$BINF"
wait "$BINF" && pass "bookmark informer stopped cleanly" || fail "bookmark informer stopped cleanly" "$(tail "$B/log")"
kubectl delete pcidevice bm-1-0000001f6 bm-2-0000001f6 bm-3-0000001f6 >/dev/null

echo "--- events: repeats aggregate into a series"
expect_ok "recorded 5 identical warnings and 1 normal event" "$KT" events "$ADMIN" ev-0000001f6
expect_contains "two API writes created two Events, one series write" "$OUT" \
    "emitted=6 created=2 series=1 failed=0"
OUT=$(kubectl get events.events.k8s.io -n default -o json | python3 -c '
import json, sys
for e in json.load(sys.stdin)["items"]:
    if e.get("reportingController") == "hostdevd.io/kubetool":
        print(e["reason"], e.get("series", {}).get("count", 1), e["regarding"]["name"])' | sort)
expect_contains "kubectl sees BindFailed x5 and Bound x1 about the device" "$OUT" \
    "BindFailed 5 ev-0000001f6" "Bound 1 ev-0000001f6"

echo "--- leader election: two candidates, SIGKILL of the leader"
kubectl get namespace hostdevd-system >/dev/null # made by install_crds
L=$TEST_DIR/leader
mkdir -p "$L"
"$KT" leader "$ADMIN" hostdevd-system hostdevd-controller cand-a "$L/a" >"$L/a.log" 2>&1 &
PA=$!
"$KT" leader "$ADMIN" hostdevd-system hostdevd-controller cand-b "$L/b" >"$L/b.log" 2>&1 &
PB=$!
one_leader() { [ "$(cat "$L/a" "$L/b" 2>/dev/null | grep -c '^leader$')" -eq 1 ]; }
if eventually 30 one_leader; then pass "exactly one leader"; else fail "exactly one leader" "a=$(cat "$L/a") b=$(cat "$L/b")"; fi
sleep 5
if one_leader; then pass "still exactly one leader 5 s later"; else fail "still exactly one leader 5 s later" "a=$(cat "$L/a") b=$(cat "$L/b")"; fi
holder=$(kubectl -n hostdevd-system get lease hostdevd-controller -o jsonpath='{.spec.holderIdentity}')
if grep -q '^leader$' "$L/a"; then leader=$PA other=$PB ofile=$L/b; else leader=$PB other=$PA ofile=$L/a; fi
[ "$(cat "$L/${holder#cand-}")" = leader ] && pass "the Lease names the leader ($holder)" ||
    fail "the Lease names the leader ($holder)"
t0=$SECONDS
kill -KILL "$leader"
wait "$leader" 2>/dev/null
took_over() { grep -q '^leader$' "$ofile"; }
if eventually 16 took_over; then
    pass "the other candidate took over within the lease duration (after $((SECONDS - t0)) s; lease 15 s)"
else
    fail "the other candidate took over within the lease duration" "$(cat "$ofile")"
fi
echo "--- leader election: a leader renews without a GET; a foreign write sends it back to GET"
# lease_requests VERB CODE: hostdevd's requests of that verb and response code to the Lease since
# MARK (kubectl's own are not counted).
lease_requests() {
    tail -n +"$((MARK + 1))" "$TEST_DIR/cluster/audit.log" | python3 -c '
import json, sys
print(sum(1 for l in sys.stdin for e in [json.loads(l)] if e.get("stage") == "ResponseComplete"
          and e.get("userAgent", "").startswith("hostdevd/")
          and e.get("objectRef", {}).get("resource") == "leases"
          and e.get("objectRef", {}).get("name") == "hostdevd-controller"
          and e["verb"] == sys.argv[1] and e.get("responseStatus", {}).get("code") == int(sys.argv[2])))' "$1" "$2"
}
MARK=$(wc -l <"$TEST_DIR/cluster/audit.log")
sleep 7
gets=$(lease_requests get 200)
puts=$(lease_requests update 200)
if [ "$puts" -ge 3 ] && [ "$gets" -eq 0 ]; then pass "the only candidate renewed $puts times in 7 s, no GET"; else
    fail "renewals without GET" "$puts renewals, $gets GETs"; fi
MARK=$(wc -l <"$TEST_DIR/cluster/audit.log")
kubectl -n hostdevd-system annotate lease hostdevd-controller bench/foreign=write >/dev/null
sleep 5
conflicts=$(lease_requests update 409)
gets=$(lease_requests get 200)
if [ "$conflicts" -eq 1 ] && [ "$gets" -eq 1 ] && took_over; then
    pass "after a foreign write: one conflict, one GET, still leading"
else
    fail "fallback after a foreign write" "conflicts $conflicts, GETs $gets, state $(cat "$ofile")"
fi
kill -TERM "$other"
wait "$other"
rc=$?
holder=$(kubectl -n hostdevd-system get lease hostdevd-controller -o jsonpath='{.spec.holderIdentity}')
if [ $rc -eq 0 ] && [ -z "$holder" ]; then
    pass "SIGTERM released the Lease (empty holder) and exited cleanly"
else
    fail "SIGTERM released the Lease and exited cleanly" "exit $rc, holder '$holder'; $(tail -5 "$ofile" "${ofile}.log" 2>/dev/null)"
fi

finish
