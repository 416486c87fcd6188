#!/usr/bin/env bash
# hack/mutate-informer.sh KUBETOOL - the killer of src/kube/informer.c's mutants in make mutate.
# hack/mutate.sh starts one control plane with the CRDs for the whole campaign and exports its
# env and TEST_DIR (whose cluster/audit.log is read here). A PCIDevice informer (KUBETOOL, the
# mutant's kubetool) with a label selector of its own, LIST pages of 2 and 4 s watches must: sync
# with the store equal to `kubectl get`; see create, update, delete in order; resume its next
# WATCH from a BOOKMARK's resourceVersion (a change it does not select moves it: audit log);
# converge again; have listed in 3 pages (audit log); exit 0 on SIGTERM, having listed once, with
# no error, 3 events and a bookmark (at most one per watch). Then two more informers of the same
# objects through test/integration/apiproxy.py (two so that their retries' backoffs add up to
# seconds, not a minute). The proxy answers the first one's LIST with a body that is not JSON,
# its first WATCH with HTTP 500, its second with a stream cut inside an event after 1.2 s, and
# puts an object it cannot keep (a 600-character name) before its third's real events;
# the second one's first WATCH gets an ERROR event (a 500 Status), its second an empty stream
# that ends at once, its third one that ends after 1.5 s without an event (not an error): each
# must be reported once (the on_error or on_skip log line, with what was wrong) and retried or
# skipped, the store must equal `kubectl get` after them, and a change made after
# them must arrive. Exits 1 at the first check that fails, saying which (MI_KEEP=1 keeps its
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
    [ -z "${INF2:-}" ] || kill -KILL "$INF2" 2>/dev/null
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
store_matches() { # [DIR]
    kill -USR1 "$INF" && sleep 0.2 &&
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
# The first informer selects sel=$L, the second sel=$L,sel!=none (the same objects).
A="/pcidevices\\?labelSelector=sel%3D$L&"
B="/pcidevices\\?labelSelector=sel%3D$L%2Csel%21%3Dnone&"
rule list-text "$A.*limit=" '{"status": 200, "type": "text/plain", "body": "OK"}'
rule watch-500 "$A.*watch=1" "$(jq -cn --arg b "$(status 500 "mutate: watch refused")" '{status: 500, body: $b}')"
rule watch-cut "$A.*watch=1" '{"lines": ["{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"na"], "raw": true, "hold": 1.2, "unterminated": true}'
LONG=$(printf 'n%.0s' {1..600})
rule watch-skip "$A.*watch=1" "$(jq -cn --arg n "$LONG" '{prepend: [{type: "ADDED", object: {metadata: {name: $n}}} | tojson]}')"
rule watch-error "$B.*watch=1" "$(jq -cn --arg l "$(jq -cn --argjson o "$(status 500 "mutate: etcd timed out")" \
    '{type: "ERROR", object: $o}')" '{lines: [$l], hold: 0.3}')"
rule watch-empty "$B.*watch=1" '{"lines": []}'
rule watch-quiet "$B.*watch=1" '{"lines": [], "hold": 1.5}'
informer() { # DIR SELECTOR: an informer through the proxy
    mkdir "$1"
    KUBETOOL_PAGE_SIZE=2 KUBETOOL_WATCH_TIMEOUT=4 "$KT" informer "$D/proxy.kubeconfig" "$1" "$2" \
        >"$1/log" 2>&1 &
}
informer "$D/a" "sel=$L"
INF=$!
informer "$D/b" "sel=$L,sel!=none"
INF2=$!
hits() { curl -fsS "http://127.0.0.1:$PP/__hits" | sort | tr '\n' ' '; }
all_served() {
    [ "$(hits)" = "list-text watch-500 watch-cut watch-empty watch-error watch-quiet watch-skip " ]
}
eventually 30 all_served || die "the proxy's faults were not all served: $(hits)"
for x in a b; do
    eventually 15 test -f "$D/$x/synced" || die "no sync through the proxy ($x)"
done
eventually 10 store_matches "$D/a" || die "store differs from kubectl get after the faults"
INF_A=$INF
INF=$INF2
eventually 10 store_matches "$D/b" || die "store differs from kubectl get after the faults (b)"
device "$L-7-0000001f6" "sel: $L"
eventually 15 grep -q "^ADD $L-7-" "$D/b/events" || die "no ADD of a device created after the faults (b)"
eventually 10 store_matches "$D/b" || die "store differs from kubectl get after a change (b)"
INF=$INF_A
eventually 15 grep -q "^ADD $L-7-" "$D/a/events" || die "no ADD of a device created after the faults"
eventually 10 store_matches "$D/a" || die "store differs from kubectl get after a change"
logged_once() { # DIR WHAT PATTERN...: exactly one on_error or on_skip line holds every PATTERN
    local dir=$1 what=$2 n
    shift 2
    n=$(grep -E 'Informer (request failed|skipped an object)' "$dir/log" | awk '
        BEGIN { for (i = 1; i < ARGC; i++) p[i] = ARGV[i]; ARGC = 1 }
        { ok = 1; for (i in p) if (index($0, p[i]) == 0) ok = 0; c += ok } END { print c + 0 }' "$@")
    [ "$n" -eq 1 ] || die "$what: $n on_error lines holding: $*"
}
logged_once "$D/a" "the LIST that is not JSON" "malformed LIST response of pcidevices"
logged_once "$D/a" "the WATCH answered 500" "http=500" "mutate: watch refused"
logged_once "$D/a" "the stream cut inside an event" "the stream ended inside an event"
logged_once "$D/a" "the 600-character name" "a watch event's object of pcidevices with a name too long to keep"
logged_once "$D/b" "the ERROR event" "mutate: etcd timed out"
logged_once "$D/b" "the empty stream" "watch ended at once"
for x in a b; do
    [ "$x" = a ] && pid=$INF_A || pid=$INF2
    kill -TERM "$pid"
    wait "$pid" || die "exit $? on SIGTERM (through the proxy, $x)"
done
INF=
st=$(grep '^# stats' "$D/a/store")
[[ "$st" == *" lists=1 "* && "$st" == *" errors=3 skipped=1"* ]] ||
    die "stats through the proxy: want one LIST, 3 errors and 1 skipped in: $st"
st=$(grep '^# stats' "$D/b/store")
[[ "$st" == *" lists=1 "* && "$st" == *" errors=2 skipped=0"* ]] ||
    die "stats through the proxy (b): want one LIST, 2 errors and none skipped in: $st"
