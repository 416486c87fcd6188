#!/usr/bin/env bash
# hack/mutate-informer.sh KUBETOOL - the killer of src/kube/informer.c's mutants in make mutate.
# hack/mutate.sh starts one control plane with the CRDs for the whole campaign and exports its
# env and TEST_DIR (whose cluster/audit.log is read here). A PCIDevice informer (KUBETOOL, the
# mutant's kubetool) with a label selector of its own, LIST pages of 2 and 4 s watches must: sync
# with the store equal to `kubectl get`; see create, update, delete in order; resume its next
# WATCH from a BOOKMARK's resourceVersion (a change it does not select moves it: audit log);
# converge again; have listed in 3 pages (audit log); exit 0 on SIGTERM, having listed once, with
# no error, 3 events and a bookmark (at most one per watch). About 8 s; exits 1 at the first check that fails, saying
# which.
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
cleanup() {
    [ -z "$INF" ] || kill -KILL "$INF" 2>/dev/null
    kubectl delete pcidevices -l "sel=$L" --wait=false >/dev/null 2>&1
    kubectl delete pcidevice "$L-x-0000001f6" --wait=false >/dev/null 2>&1
    rm -rf "$D"
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
store_matches() {
    kill -USR1 "$INF" && sleep 0.2 &&
        diff <(grep -v '^#' "$D/store") <(kubectl get pcidevices -l "sel=$L" -o \
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
