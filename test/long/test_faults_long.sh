#!/usr/bin/env bash
# test/long/test_faults_long.sh - API faults that take minutes (`make test-long`; the short ones
# are test/integration/test_faults.sh, whose setup and checks, test/integration/faults-lib.sh,
# this shares): kube-apiserver restarted with a claim in flight, etcd restarted, etcd compacted
# while kube-apiserver is down (the informers' watches resume into 410 Gone and must relist; a
# claim created and a device added meanwhile), a half-open connection for longer than a request's
# 30 s timeout, and repeated faults (FAULTS_RESETS resets mid-watch, FAULTS_ETCD_RESTARTS etcd
# restarts), each followed by the same checks: the exact end state, both processes running, no
# write to an object the fault did not change, no conflict loop. Rows go to
# build/results/long-faults.rows.
# shellcheck disable=SC2034 # lib.sh reads it
SUITE=long-faults
# shellcheck source=test/integration/faults-lib.sh disable=SC1091
. "$(dirname "$0")/../integration/faults-lib.sh"
RESETS=${FAULTS_RESETS:-20}
ETCD_RESTARTS=${FAULTS_ETCD_RESTARTS:-10}
CONVERGE_TIMEOUT=${FAULTS_CONVERGE_TIMEOUT:-120}

faults_setup

# shellcheck disable=SC2317 # called through repeated
reset_briefly() {
    toxic rst reset_peer downstream '{"timeout":0}'
    sleep 0.3
    untoxic rst
    sleep 2
}
# shellcheck disable=SC2317 # called through repeated
restart_etcd() { hack/cluster.sh restart "$TEST_DIR/cluster" etcd >/dev/null 2>&1; }

fault_begin "kube-apiserver restarted with a claim in flight"
change
hack/cluster.sh restart "$TEST_DIR/cluster" apiserver >/dev/null 2>&1 || fail "apiserver restarted"
healed
fault_end "kube-apiserver restart" "hack/cluster.sh restart apiserver right after a claim and a device appeared" "1" "${CHANGED[@]}"

fault_begin "etcd restarted"
change
restart_etcd || fail "etcd restarted"
healed
fault_end "etcd restart" "hack/cluster.sh restart etcd right after a claim and a device appeared" "1" "${CHANGED[@]}"

fault_begin "etcd compacted while kube-apiserver is down: 410 Gone"
ETCDCTL=("$K8S_BIN/etcdctl" --endpoints "$ETCD_ENDPOINT")
RELISTS_A=$(metric "$AGENT_PORT" hostdevd_relists_total)
RELISTS_C=$(metric "$CTL_PORT" hostdevd_relists_total)
# hostdevd is cut off first, so that it misses what follows: a claim created, a device added;
# then kube-apiserver stops, etcd's revision moves on and is compacted, and kube-apiserver
# starts with a fresh watch cache before hostdevd comes back. (No claim is deleted: on a fake
# tree the restore of a bound device cannot take effect, RestoreFailed, so its finalizer stays.)
proxy_enabled false
change
hack/cluster.sh stop "$TEST_DIR/cluster" apiserver >/dev/null 2>&1 || fail "apiserver stopped"
for i in $(seq 1 20); do "${ETCDCTL[@]}" put /hostdevd-faults/bump "$i" >/dev/null; done
REV=$("${ETCDCTL[@]}" endpoint status -w json | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["Status"]["header"]["revision"])')
if "${ETCDCTL[@]}" compact "$REV" >/dev/null; then pass "etcd compacted at revision $REV while kube-apiserver was down"; else fail "etcd compacted"; fi
hack/cluster.sh start "$TEST_DIR/cluster" apiserver >/dev/null 2>&1 || fail "apiserver started"
proxy_enabled true
healed
# shellcheck disable=SC2317 # called through eventually
relisted() {
    [ "$(metric "$AGENT_PORT" hostdevd_relists_total)" -gt "$RELISTS_A" ] &&
        [ "$(metric "$CTL_PORT" hostdevd_relists_total)" -gt "$RELISTS_C" ]
}
if eventually "$CONVERGE_TIMEOUT" relisted; then
    pass "the agent's and the controller's informers got 410 Gone and listed again (hostdevd_relists_total: agent $RELISTS_A -> $(metric "$AGENT_PORT" hostdevd_relists_total), controller $RELISTS_C -> $(metric "$CTL_PORT" hostdevd_relists_total))"
else
    fail "410 Gone and a relist" "agent $(metric "$AGENT_PORT" hostdevd_relists_total), controller $(metric "$CTL_PORT" hostdevd_relists_total)"
fi
fault_end "etcd compaction during an API server outage (410 Gone on watch resume)" "Toxiproxy proxy disabled; a claim created and a device added; apiserver stopped; 20 etcd puts; etcdctl compact; apiserver started; proxy enabled" "1" "${CHANGED[@]}"

fault_begin "half-open for longer than a request's timeout"
toxic hd timeout downstream '{"timeout":0}'
toxic hu timeout upstream '{"timeout":0}'
change
sleep 40
untoxic hd hu
healed
fault_end "half-open connection for 40 s (beyond the 30 s request timeout)" "Toxiproxy timeout toxic (timeout 0) both ways, 40 s; a device and a claim added meanwhile" "1 x 40 s" "${CHANGED[@]}"


fault_begin "$RESETS resets mid-watch"
repeated "$RESETS" reset_briefly
fault_end "connection reset mid-watch, repeated" "Toxiproxy reset_peer for 0.3 s every 2.3 s, a device and a claim added before each" "$RESETS" "${ALL[@]}"

fault_begin "etcd restarted $ETCD_RESTARTS times"
repeated "$ETCD_RESTARTS" restart_etcd
fault_end "etcd restart, repeated" "hack/cluster.sh restart etcd back to back, a device and a claim added before each" "$ETCD_RESTARTS" "${ALL[@]}"

for p in "$AGENT_PID" "$CTL_PID"; do
    kill -TERM "$p"
    if wait "$p"; then pass "process $p exits 0 on SIGTERM (no leaks under ASan)"; else fail "process $p exits 0 on SIGTERM"; fi
done
finish
