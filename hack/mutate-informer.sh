#!/usr/bin/env bash
# hack/mutate-informer.sh KUBETOOL - the killer of src/kube/informer.c's mutants in make mutate.
# hack/mutate.sh starts one control plane with the CRDs for the whole campaign and exports its
# env and TEST_DIR (whose cluster/audit.log is read here). A PCIDevice informer (KUBETOOL, the
# mutant's kubetool) with a label selector of its own, LIST pages of 2 and 4 s watches must: sync
# with the store equal to `kubectl get`; see create, update, delete in order; resume its next
# WATCH from a BOOKMARK's resourceVersion (a change it does not select moves it: audit log);
# converge again; have listed in 3 pages (audit log); exit 0 on SIGTERM, having listed once, with
# no error, 3 events and a bookmark (at most one per watch). Then three more informers of the
# same objects through test/integration/apiproxy.py (three so that their retries' backoffs add up
# to seconds, not a minute). The proxy answers A's LIST with a body that is not JSON (retried
# after the backoff, not at once), its WATCHes with HTTP 500, a stream cut inside an event after
# 1.2 s, and an object it cannot keep (a 600-character name) before the real events; B's
# WATCHes with an ERROR event (a Status without a code: reported once), an empty stream that ends
# at once, and two that end after 1.5 s without an event (not errors); C's LISTs with a JSON array and then
# a made-up page (a nameless item first, a made-up object, a real one with a stale
# resourceVersion), its WATCHes with a 17 MB line and then a 410 ERROR (the relist must update
# the stale object and delete the made-up one); D's LISTs with 503 and Retry-After: 2 (retried
# after 2 s) and then a resourceVersion that is not printable; E keeps metadata only, and gets an
# object with a data key (trimmed) and an event with a resourceVersion that is not printable. Each must be reported
# once (the on_error or on_skip log line, with what was wrong) and retried or skipped; A's and
# B's stores must equal `kubectl get` after them, C must have taken the item after the bad one,
# and a change made after them must arrive at all three. Exits 1 at the first check that fails, saying which (MI_KEEP=1 keeps its
# directory, with the informers' logs, for a look).
set -uo pipefail
AUDIT=$TEST_DIR/cluster/audit.log # lib.sh empties TEST_DIR
# shellcheck disable=SC2034 # lib.sh names its files after it
SUITE=mutate-informer
# shellcheck source=test/integration/lib.sh disable=SC1091 # (the tests' helpers, not linted)
. "$(dirname "${BASH_SOURCE[0]}")/../test/integration/lib.sh"
KT=$1
L=m$$r$RANDOM
D=$(mktemp -d "${TMPDIR:-/tmp}/hostdevd-mutinf.XXXXXX")
INF=
PROXY=
cleanup() {
    [ -z "$INF" ] || kill -KILL "$INF" 2>/dev/null
    [ -z "${INF_A:-}" ] || kill -KILL "$INF_A" 2>/dev/null
    [ -z "${INF_B:-}" ] || kill -KILL "$INF_B" 2>/dev/null
    [ -z "${INF_C:-}" ] || kill -KILL "$INF_C" 2>/dev/null
    [ -z "${INF_D:-}" ] || kill -KILL "$INF_D" 2>/dev/null
    [ -z "${INF_E:-}" ] || kill -KILL "$INF_E" 2>/dev/null
    [ -z "$PROXY" ] || kill -KILL "$PROXY" 2>/dev/null
    kubectl delete pcidevices -l "sel=$L" --wait=false >/dev/null 2>&1
    kubectl delete pcidevice "$L-x-0000001f6" --wait=false >/dev/null 2>&1
    [ -n "${MI_KEEP:-}" ] || rm -rf "$D"
}
trap cleanup EXIT
die() { echo "mutate-informer: $1" >&2; tail -5 "$D/log" >&2 2>/dev/null; exit 1; }
device() { # name [label]
    local labels=""
    [ -z "${2:-}" ] || labels=", labels: {$2}"
    printf '%s\n' "apiVersion: devices.harvesterhci.io/v1beta1" "kind: PCIDevice" \
        "metadata: {name: $1$labels}" | kubectl create -f - >/dev/null
}
for i in 1 2 3 4 5; do device "$L-$i-0000001f6" "sel: $L"; done
KUBETOOL_PAGE_SIZE=2 KUBETOOL_WATCH_TIMEOUT=4 "$KT" informer "$KUBECONFIG" "$D" "sel=$L" \
    >"$D/log" 2>&1 &
INF=$!
store_matches() { # [DIR PID]: the informer PID (default the first) wrote DIR/store equal to kubectl get
    kill -USR1 "${2:-$INF}" && sleep 0.2 &&
        diff <(grep -v '^#' "${1:-$D}/store") <(kubectl get pcidevices -l "sel=$L" -o \
            jsonpath='{range .items[*]}{.metadata.name} {.metadata.resourceVersion}{"\n"}{end}' |
            sed '/^$/d' | sort)
}
eventually 15 test -f "$D/synced" || die "no sync"
eventually 10 store_matches || die "store differs from kubectl get after the LIST"
device "$L-6-0000001f6" "sel: $L"
kubectl label pcidevice "$L-1-0000001f6" step=2 >/dev/null
kubectl delete pcidevice "$L-2-0000001f6" >/dev/null
in_order() { # patterns...: each appears in events after the previous one
    local line=0 p n
    for p in "$@"; do
        n=$(awk -v from="$line" -v p="$p" 'NR > from && index($0, p) == 1 {print NR; exit}' \
            "$D/events")
        [ -n "$n" ] || return 1
        line=$n
    done
}
eventually 10 in_order "ADD $L-6-" "UPDATE $L-1-" "DELETE $L-2-" || die "events out of order"
[ "$(grep -c "^ADD " "$D/events")" -eq 6 ] || die "not 6 adds: $(cat "$D/events")"
device "$L-x-0000001f6" # not selected: only a bookmark can carry its resourceVersion
RV=$(kubectl get pcidevice "$L-x-0000001f6" -o jsonpath='{.metadata.resourceVersion}')
resumed() {
    python3 -c '
import json, sys, urllib.parse
for line in open(sys.argv[1]):
    e = json.loads(line)
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(e.get("requestURI", "")).query)
    if e.get("stage") == "ResponseStarted" and q.get("watch") == ["1"] and \
            q.get("labelSelector") == ["sel=" + sys.argv[2]] and \
            int(q.get("resourceVersion", ["0"])[0] or 0) >= int(sys.argv[3]):
        sys.exit(0)
sys.exit(1)' "$AUDIT" "$L" "$RV"
}
eventually 15 resumed || die "no WATCH resumed from a bookmark's resourceVersion ($RV)"
eventually 10 store_matches || die "store differs from kubectl get at the end"
# The LIST went in pages of 2: 3 requests for 5 objects, 2 of them with a continue token.
pages=$(python3 -c '
import json, sys, urllib.parse
for line in open(sys.argv[1]):
    e = json.loads(line)
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(e.get("requestURI", "")).query)
    if e.get("stage") == "ResponseComplete" and "watch" not in q and \
            q.get("labelSelector") == ["sel=" + sys.argv[2]] and \
            not e.get("userAgent", "").startswith("kubectl"):
        print(q.get("limit", [""])[0], "continue" if "continue" in q else "first")' "$AUDIT" "$L")
[ "$(sort <<<"$pages" | tr '\n' ' ')" = "2 continue 2 continue 2 first " ] ||
    die "LIST pages: $(tr '\n' ' ' <<<"$pages")"
kill -TERM "$INF"
wait "$INF" || die "exit $? on SIGTERM"
INF=
# One LIST (of 3 pages), no errors, the 3 changes as events, bookmarks: the store's stats line.
st=$(grep '^# stats' "$D/store")
for want in ' lists=1 ' ' relists_gone=0 ' ' events=3 ' ' errors=0'; do
    [[ "$st" == *"$want"* ]] || die "stats: want$want in: $st"
done
[[ "$st" =~ \ bookmarks=[1-9] ]] || die "stats: no bookmark in: $st"
# At most one bookmark per WATCH (the server sends it 2 s before the 4 s deadline).
if ! [[ "$st" =~ \ watches=([0-9]+)\ .*\ bookmarks=([0-9]+) ]] ||
    [ "${BASH_REMATCH[2]}" -gt "${BASH_REMATCH[1]}" ]; then
    die "stats: more bookmarks than watches: $st"
fi

# --- the same through a proxy that answers with faults -------------------------------------
PP=$(free_port)
python3 "$ROOT/test/integration/apiproxy.py" "$PP" "$K8S_SERVER" "$K8S_CA" "$K8S_ADMIN_CERT" \
    "$K8S_ADMIN_KEY" 3 >"$D/proxy.log" 2>&1 &
PROXY=$!
disown "$PROXY" # (no "Killed" notice when cleanup kills it)
printf '%s\n' "apiVersion: v1" "kind: Config" \
    "clusters: [{name: proxy, cluster: {server: \"http://127.0.0.1:$PP\"}}]" \
    "users: [{name: proxy, user: {}}]" \
    "contexts: [{name: proxy, context: {cluster: proxy, user: proxy}}]" \
    "current-context: proxy" >"$D/proxy.kubeconfig"
proxy_up() { curl -fsS "http://127.0.0.1:$PP/__hits" >/dev/null; }
eventually 10 proxy_up || die "the proxy does not start: $(cat "$D/proxy.log")"
rule() { # NAME PATH-REGEX ACTION-JSON: the next request matching PATH-REGEX gets ACTION
    jq -cn --arg n "$1" --arg p "$2" --argjson a "$3" '{name: $n, path: $p} + $a' |
        curl -fsS --data-binary @- "http://127.0.0.1:$PP/__rule" >/dev/null
}
status() { # CODE MESSAGE: a Status object
    jq -cn --arg m "$2" --argjson c "$1" \
        '{kind: "Status", apiVersion: "v1", status: "Failure", reason: "InternalError", message: $m, code: $c}'
}
# Five informers of the same objects: sel=$L, and sel=$L,sel!=X for X in b c d e.
A="/pcidevices\\?labelSelector=sel%3D$L&"
B="/pcidevices\\?labelSelector=sel%3D$L%2Csel%21%3Db&"
C="/pcidevices\\?labelSelector=sel%3D$L%2Csel%21%3Dc&"
D4="/pcidevices\\?labelSelector=sel%3D$L%2Csel%21%3Dd&"
E="/pcidevices\\?labelSelector=sel%3D$L%2Csel%21%3De&"
rule list-text "$A.*limit=" '{"status": 200, "type": "text/plain", "body": "OK"}'
rule watch-500 "$A.*watch=1" "$(jq -cn --arg b "$(status 500 "mutate: watch refused")" '{status: 500, body: $b}')"
rule watch-cut "$A.*watch=1" '{"lines": ["{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"na"], "raw": true, "hold": 1.2, "unterminated": true}'
LONG=$(printf 'n%.0s' {1..600})
rule watch-skip "$A.*watch=1" "$(jq -cn --arg n "$LONG" '{prepend: [{type: "ADDED", object: {metadata: {name: $n}}} | tojson]}')"
rule watch-error "$B.*watch=1" "$(jq -cn --arg l "$(jq -cn '{type: "ERROR", object: {kind: "Status", status: "Failure", message: "mutate: etcd timed out"}}')" \
    '{lines: [$l], hold: 0.3}')"
rule watch-empty "$B.*watch=1" '{"lines": []}'
rule watch-quiet "$B.*watch=1" '{"lines": [], "hold": 1.5}'
rule watch-quiet2 "$B.*watch=1" '{"lines": [], "hold": 1.5}'
NOW=$(kubectl get --raw "/apis/devices.harvesterhci.io/v1beta1/pcidevices?limit=1" | jq -r .metadata.resourceVersion)
rule list-array "$C.*limit=" '{"status": 200, "body": "[1, 2, 3]"}'
rule list-items "$C.*limit=" "$(jq -cn --arg rv "$NOW" --arg n "$L-fake" --arg one "$L-1-0000001f6" '{status: 200,
    body: ({kind: "PCIDeviceList", metadata: {resourceVersion: $rv}, items: [{metadata: {}},
    {metadata: {name: $n, resourceVersion: "1"}}, {metadata: {name: $one, resourceVersion: "1"}}]} | tojson)}')"
rule list-503 "$D4.*limit=" '{"status": 503, "headers": {"Retry-After": "2"}, "body": "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"ServiceUnavailable\",\"message\":\"mutate: come back in 2 s\",\"code\":503}"}'
rule list-rv "$D4.*limit=" '{"status": 200, "body": "{\"kind\":\"PCIDeviceList\",\"metadata\":{\"resourceVersion\":\"1 2\"},\"items\":[]}"}'
rule watch-huge "$C.*watch=1" '{"lines": ["@big:17000000:{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"@X@\"}}}"]}'
rule watch-410 "$C.*watch=1" "$(jq -cn --arg l "$(jq -cn --argjson o "$(status 410 "too old resource version: 1 (2)")" \
    '{type: "ERROR", object: ($o + {reason: "Expired"})}')" '{lines: [$l]}')"
# (with a resourceVersion the API server still has: E's next WATCH starts from it)
DATA=$(jq -cn --arg n "$L-data" --arg rv "$NOW" '{apiVersion: "devices.harvesterhci.io/v1beta1",
    kind: "PCIDevice", data: 1, spec: {}, metadata: {name: $n, resourceVersion: $rv}}')
rule watch-meta "$E.*watch=1" "$(jq -cn --argjson o "$DATA" '{prepend: [{type: "ADDED", object: $o},
    {type: "DELETED", object: $o}] | map(tojson)}')"
rule watch-badrv "$E.*watch=1" "$(jq -cn --arg n "$L-x" '{lines: [{type: "ADDED", object: {metadata: {name: $n,
    resourceVersion: "1 2"}}} | tojson], hold: 0.3}')"
informer() { # DIR WATCH-TIMEOUT LABEL-SELECTOR [FIELD-SELECTOR]: an informer through the proxy
    mkdir "$1"
    KUBETOOL_PAGE_SIZE=2 KUBETOOL_WATCH_TIMEOUT=$2 "$KT" informer "$D/proxy.kubeconfig" "$1" \
        "${@:3}" >"$1/log" 2>&1 &
}
informer "$D/a" 4 "sel=$L"
INF_A=$!
informer "$D/b" 4 "sel=$L,sel!=b"
INF_B=$!
# C: a field selector too, and the informer's own WATCH timeouts (the proxy cuts them to 3 s).
informer "$D/c" "" "sel=$L,sel!=c" "metadata.name!=none"
INF_C=$!
informer "$D/d" 4 "sel=$L,sel!=d"
INF_D=$!
KUBETOOL_METADATA_ONLY=1 informer "$D/e" 4 "sel=$L,sel!=e"
INF_E=$!
hits() { curl -fsS "http://127.0.0.1:$PP/__hits" | sort | tr '\n' ' '; }
all_served() {
    [ "$(hits)" = "list-503 list-array list-items list-rv list-text watch-410 watch-500 watch-badrv watch-cut watch-empty watch-error watch-huge watch-meta watch-quiet watch-quiet2 watch-skip " ]
}
eventually 30 all_served || die "the proxy's faults were not all served: $(hits)"
for x in a b c d e; do
    eventually 15 test -f "$D/$x/synced" || die "no sync through the proxy ($x)"
done
# A's and B's stores are right; C took the LIST the proxy made up: the item after the bad one.
eventually 10 store_matches "$D/a" "$INF_A" || die "store differs from kubectl get after the faults"
eventually 10 store_matches "$D/b" "$INF_B" || die "store differs from kubectl get after the faults (b)"
grep -q "^ADD $L-fake " "$D/c/events" || die "the good LIST item after a bad one was not taken"
device "$L-7-0000001f6" "sel: $L"
for x in a b c d e; do
    pid=INF_${x^^}
    eventually 15 grep -q "^ADD $L-7-" "$D/$x/events" || die "no ADD of a device created after the faults ($x)"
    eventually 10 store_matches "$D/$x" "${!pid}" || die "store differs from kubectl get after a change ($x)"
done
# C's relist after the 410: the stale $L-1 an UPDATE, the made-up object a DELETE.
grep -q "^UPDATE $L-1-0000001f6 " "$D/c/events" || die "C's relist did not update the stale object"
grep -q "^DELETE $L-fake " "$D/c/events" || die "C's relist did not delete the made-up object"
# E keeps metadata only: every object it added or updated had apiVersion, kind and metadata,
# nothing else (a delete hands over the event's object as it came).
grep -q "^ADD $L-data $NOW keys=apiVersion,kind,metadata$" "$D/e/events" || die "E did not trim the object with a data key"
! grep -E '^(ADD|UPDATE) ' "$D/e/events" | grep -qv ' keys=apiVersion,kind,metadata$' || die "E kept more than metadata: $(head -3 "$D/e/events")"
logged_once() { # DIR WHAT PATTERN...: exactly one on_error or on_skip line holds every PATTERN
    local dir=$1 what=$2 n
    shift 2
    n=$(grep -E 'Informer (request failed|skipped an object)' "$dir/log" | awk '
        BEGIN { for (i = 1; i < ARGC; i++) p[i] = ARGV[i]; ARGC = 1 }
        { ok = 1; for (i in p) if (index($0, p[i]) == 0) ok = 0; c += ok } END { print c + 0 }' "$@")
    [ "$n" -eq 1 ] || die "$what: $n on_error lines holding: $*"
}
logged_once "$D/a" "the LIST that is not JSON" "malformed LIST response of pcidevices: the body is not JSON"
logged_once "$D/a" "the WATCH answered 500" "http=500" "mutate: watch refused"
logged_once "$D/a" "the stream cut inside an event" "transfer closed" "the stream ended inside an event"
logged_once "$D/a" "the 600-character name" "a watch event's object of pcidevices with a name too long to keep"
logged_once "$D/b" "the ERROR event (a Status without a code)" "http=200" "mutate: etcd timed out"
logged_once "$D/b" "the empty stream" "watch ended at once"
n=$(grep -c 'Informer request failed' "$D/b/log")
[ "$n" -eq 2 ] || die "B reported $n failures, not 2 (the ERROR event once, the empty stream)"
logged_once "$D/c" "the LIST that is an array" "malformed LIST response of pcidevices: the body is not a JSON object"
logged_once "$D/c" "the LIST item without a name" "LIST item 1 of pcidevices is not an object with metadata.name"
logged_once "$D/c" "the 17 MB line" "over the size cap"
logged_once "$D/d" "the LIST with a resourceVersion \"1 2\"" "a resourceVersion that is not printable ASCII"
logged_once "$D/d" "the LIST answered 503" "http=503" "mutate: come back in 2 s"
logged_once "$D/e" "the event with a resourceVersion \"1 2\"" "an event whose resourceVersion is not printable ASCII"
# C's requests carried its field selector, its WATCHes asked for 300-599 s.
curl -fsS "http://127.0.0.1:$PP/__log" | grep -F "${C//\\/}" >"$D/c.requests"
grep -q "fieldSelector=metadata.name%21%3Dnone&limit=" "$D/c.requests" || die "C's LIST without its field selector"
secs=$(sed -n 's/.*&watch=1.*timeoutSeconds=\([0-9]*\).*/\1/p' "$D/c.requests" | sort -n | sed -n '1p;$p' | tr '\n' ' ')
if ! { [ -n "$secs" ] && awk -v s="$secs" 'BEGIN { split(s, a, " "); exit !(a[1] >= 300 && a[2] < 600) }'; }; then
    die "C's WATCH timeouts not in [300, 600) s: $secs"
fi
# The informer retried A's bad LIST after its backoff (0.8 s and up), not at once.
gap=$(curl -fsS "http://127.0.0.1:$PP/__times" | awk -v p="labelSelector=sel%3D$L&limit=" '
    index($0, p) && !index($0, "continue=") { t[n++] = $1 } END { if (n >= 2) print t[1] - t[0] }')
awk -v g="${gap:-0}" 'BEGIN { exit !(g >= 0.75) }' || die "A's LIST retried after ${gap:-?} s, not after its backoff"
# D's 503 said Retry-After: 2, longer than the first backoff: its next LIST came 2 s later.
gap=$(curl -fsS "http://127.0.0.1:$PP/__times" | awk -v p="labelSelector=sel%3D$L%2Csel%21%3Dd&limit=" '
    index($0, p) && !index($0, "continue=") { t[n++] = $1 } END { if (n >= 2) print t[1] - t[0] }')
awk -v g="${gap:-0}" 'BEGIN { exit !(g >= 1.95) }' || die "D's LIST retried after ${gap:-?} s, not after Retry-After: 2"
for x in a b c d e; do
    pid=INF_${x^^}
    pid=${!pid}
    kill -TERM "$pid"
    wait "$pid" || die "exit $? on SIGTERM (through the proxy, $x)"
done
INF_A='' INF_B='' INF_C='' INF_D='' INF_E='' INF=''
want() { # DIR STATS...: the informer's counters hold each
    local st w
    st=$(grep '^# stats' "$1/store")
    shift
    for w in "$@"; do [[ "$st" == *" $w"* ]] || die "stats: want $w in: $st"; done
}
want "$D/a" "lists=1 " "errors=3 skipped=1"
want "$D/b" "lists=1 " "errors=2 skipped=0"
want "$D/c" "lists=2 " "relists_gone=1 " "errors=2 skipped=1"
want "$D/d" "lists=1 " "errors=2 skipped=0"
want "$D/e" "lists=1 " "errors=1 skipped=0"
