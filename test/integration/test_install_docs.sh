#!/usr/bin/env bash
# test/integration/test_install_docs.sh - the install commands of README.md and docs/install.md
# run to the letter against hack/cluster.sh's cluster: each code block is read out of the docs
# (hack/doc-blocks.py), not copied here, so the docs and this test cannot drift. Three rounds:
# README's install; docs/install.md's kustomize install with its overlay; its Helm install. Each
# then grants a team (docs/install.md "Grant devices to teams"), claims a device as a member of
# that team, and uninstalls (docs/install.md "Uninstall"), leaving nothing of hostdevd's.
# Not run, and why: `make image` (test_image.sh builds and runs it) and `rollout status` (no
# kubelet runs pods here: the DaemonSet and Deployment are objects only; test_chart_node.sh runs
# them on a real node). `<version>` is the file VERSION. In the Helm round, the uninstall block's
# `kubectl delete -k` line is replaced by the Helm command its comment gives, with --no-hooks
# (its pre-delete hook is a Job, which nothing runs here).
SUITE=install-docs
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=test/integration/apf-lib.sh
. "$(dirname "$0")/apf-lib.sh"
cd "$ROOT" || exit 1

V=$(cat VERSION)
HELM=$(hack/helm-build.sh) || { fail "hack/helm-build.sh builds helm"; finish; }
cluster_start
WORK=$TEST_DIR/work # where a user's own files go (my-hostdevd/), next to a copy of the repo's
mkdir -p "$WORK"
cp -r manifests crds charts "$WORK/"
block() { hack/doc-blocks.py "$@" || fail "the docs have the block: $*"; }

# run WHAT: each command line of stdin as a user types it (in $WORK, helm the one built here);
# a line ending in "# what is left: nothing" must print nothing.
run() {
    local what=$1 line out rc n=0
    while IFS= read -r line; do
        [[ -z $line || $line == \#* ]] && continue
        line=${line//<version>/$V}
        if [[ $line == "make image"* || $line == *"rollout status"* ]]; then
            echo "  (not run here: $line)"
            continue
        fi
        n=$((n + 1))
        # as a user would, again after a moment when the API server answers 503 (a CRD made
        # again after its deletion is Established a moment before the server serves its kind)
        for try in 1 2 3 4 5 6 7 8 9 10; do
            out=$(cd "$WORK" && PATH="$(dirname "$HELM"):$PATH" bash -c "$line" 2>&1)
            rc=$?
            [[ $rc -ne 0 && $out == *"(ServiceUnavailable)"* ]] || break
            sleep 1
        done
        [ "$try" = 1 ] || echo "  ($line: the API server answered 503 $((try - 1)) times first)"
        if [[ $line == *"# what is left: nothing" ]]; then
            [ -z "$out" ] || { fail "$what: $line" "$out"; return 1; }
        elif [ $rc -ne 0 ]; then
            fail "$what: $line" "$out"
            return 1
        fi
    done
    pass "$what ($n commands, to the letter)"
}
[ -x "$(dirname "$HELM")/helm" ] || fail "helm is named helm on its PATH" "$HELM"

# grant and claim as docs/install.md says, then check who holds the claim
grant_and_claim() { # round [readme: its own line granted team-a alone what step 1 grants]
    [ "${2:-}" = readme ] ||
        block docs/install.md "Grant devices to teams" 1 | run "$1: grant everyone who may ask"
    block docs/install.md "Grant devices to teams" 2 >"$WORK/team-a-gpu.yaml"
    run "$1: grant team-a the use of its GPU" <<<"kubectl apply -f team-a-gpu.yaml"
    # shellcheck disable=SC2016 # (backquotes of Markdown, not the shell)
    CANI=$(sed -n 's/^ *`\(kubectl auth can-i use [^`]*\)`.*/\1/p' docs/install.md)
    OUT=$(bash -c "$CANI" 2>/dev/null)
    [ "$OUT" = yes ] && pass "$1: $CANI says yes" || fail "$1: $CANI" "$OUT"
    block docs/install.md "Grant devices to teams" 3 >"$WORK/claim.yaml"
    run "$1: alice of team-a claims the device" <<<"kubectl create -f claim.yaml --as alice --as-group team-a"
    OUT=$(kubectl get pcideviceclaim titan-000001000 -o jsonpath='{.spec.userName}' 2>&1)
    [ "$OUT" = alice ] && pass "$1: the claim is alice's (userName filled in)" || fail "$1: the claim's userName" "$OUT"
    OUT=$(kubectl create -f "$WORK/claim.yaml" --dry-run=server --as bob --as-group team-b 2>&1)
    [[ $OUT != *"(ServiceUnavailable)"* ]] || { sleep 2; OUT=$(kubectl create -f "$WORK/claim.yaml" --dry-run=server --as bob --as-group team-b 2>&1); }
    local want='claiming needs the verb "use" on pcidevices/titan-000001000'
    [ "${2:-}" != readme ] || want='User "bob" cannot create resource "pcideviceclaims"'
    [[ $OUT == *"$want"* ]] &&
        pass "$1: bob of team-b is refused, the message naming the grant he lacks" || fail "$1: bob refused" "$OUT"
}

# nothing of hostdevd's left but the namespace a user made for Helm
left() {
    kubectl get crd,clusterrole,clusterrolebinding,validatingadmissionpolicy,mutatingadmissionpolicy,flowschema,prioritylevelconfiguration,ns -o name 2>&1 |
        grep -E 'hostdevd|harvesterhci|team-a|device-users' | grep -v "^namespace/hostdevd-system$" || true
}
ns_gone() { ! kubectl get ns "$1" >/dev/null 2>&1; }
uninstall() { # round [helm]
    local b
    b=$(block docs/install.md Uninstall 1)
    if [ "${2:-}" = helm ]; then
        # (--no-hooks: no kubelet runs the pre-delete hook's Job here; test_chart_node.sh runs it)
        b=$(sed 's|^kubectl delete -k my-hostdevd/ .*with Helm: \(helm uninstall .*\)$|\1 --no-hooks|' <<<"$b")
        b+=$'\nkubectl delete -k crds/' # Helm leaves the CRDs (docs/helm.md): the user removes them
    fi
    run "$1: uninstall" <<<"$b"
    eventually 60 ns_gone hostdevd-node-lease || fail "$1: hostdevd-node-lease is deleted"
    OUT=$(left)
    [ -z "$OUT" ] && pass "$1: nothing of hostdevd's is left" || fail "$1: what is left" "$OUT"
}

echo "--- README's install"
block README.md Installing 1 | run "README: install"
block docs/install.md "Install with kustomize" 4 | run "README: check it (docs/install.md, which README points to)"
apf_check README hostdevd-system
grant_and_claim README readme
# (README's binding device-users is the one the uninstall deletes: the kustomize line stands for
# the overlay of docs/install.md, which does not exist in this round)
mkdir -p "$WORK/my-hostdevd" && printf 'resources: [../manifests]\n' >"$WORK/my-hostdevd/kustomization.yaml"
uninstall README
rm -rf "$WORK/my-hostdevd"
eventually 60 ns_gone hostdevd-system || true

echo "--- docs/install.md: kustomize, with an overlay"
block docs/install.md "Install with kustomize" 1 | run "kustomize: install"
OVERLAY=$(block docs/install.md "Install with kustomize" 2)
FILE=$(sed -n '1s/^# \(.*\)$/\1/p' <<<"$OVERLAY")
[ "$FILE" = my-hostdevd/kustomization.yaml ] || fail "the overlay names its file" "$FILE"
mkdir -p "$WORK/my-hostdevd" && printf '%s\n' "$OVERLAY" >"$WORK/$FILE"
block docs/install.md "Install with kustomize" 3 | run "kustomize: the overlay"
OUT=$(kubectl get ds -n hostdevd-system hostdevd-agent -o jsonpath='{.spec.template.spec.containers[0].image}')
[ "$OUT" = "localhost/hostdevd:$V" ] && pass "kustomize: the agent's image is localhost/hostdevd:$V" || fail "the overlay's image" "$OUT"
block docs/install.md "Install with kustomize" 4 | run "kustomize: check it"
apf_check kustomize hostdevd-system
grant_and_claim kustomize
uninstall kustomize
eventually 60 ns_gone hostdevd-system || true

echo "--- docs/install.md: Helm"
block docs/install.md "Install with Helm" 1 | run "Helm: install"
block docs/install.md "Install with kustomize" 4 | run "Helm: check it (as docs/install.md says)"
apf_check Helm hostdevd-system
grant_and_claim Helm
uninstall Helm helm
finish
