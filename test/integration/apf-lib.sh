# shellcheck shell=bash
# test/integration/apf-lib.sh - sourced by test_install_docs.sh and test_helm.sh (after lib.sh):
# how API Priority and Fairness classifies the requests of hostdevd's service accounts once
# manifests/flowcontrol.yaml (or the chart's copy) is installed.

# apf_class NAMESPACE SERVICEACCOUNT PATH: "FLOWSCHEMA PRIORITYLEVEL" of a GET of PATH with a
# token of that service account, from the answer's X-Kubernetes-PF-FlowSchema-UID and
# X-Kubernetes-PF-PriorityLevel-UID headers, named by the cluster's objects of those UIDs (APF
# runs before authorization: a 403 is classified too).
apf_class() {
    local token headers fs pl
    token=$(kubectl create token "$2" -n "$1" --duration 10m) || return 1
    headers=$(curl -sS -o /dev/null -D - --max-time 20 --cacert "$K8S_CA" \
        -H "Authorization: Bearer $token" "$K8S_SERVER$3") || return 1
    fs=$(sed -n 's/^x-kubernetes-pf-flowschema-uid: *\([-0-9a-f]*\).*$/\1/Ip' <<<"$headers")
    pl=$(sed -n 's/^x-kubernetes-pf-prioritylevel-uid: *\([-0-9a-f]*\).*$/\1/Ip' <<<"$headers")
    printf '%s %s\n' "$(apf_name flowschemas "$fs")" "$(apf_name prioritylevelconfigurations "$pl")"
}
apf_name() { # resource uid
    kubectl get "$1" -o jsonpath="{range .items[?(@.metadata.uid==\"$2\")]}{.metadata.name}{end}"
}
apf_is() { [ "$(apf_class "$1" "$2" "$3")" = "$4" ]; } # namespace sa path "FLOWSCHEMA LEVEL"

# apf_check WHAT NAMESPACE: the agent's and the controller's requests go to the level hostdevd,
# their Leases to hostdevd-leases (the API server applies new FlowSchemas within moments).
apf_check() {
    local what=$1 ns=$2 sa path want
    for sa in hostdevd-agent hostdevd-controller; do
        for path in "/apis/devices.harvesterhci.io/v1beta1/pcidevices?limit=1" \
            "/apis/coordination.k8s.io/v1/namespaces/hostdevd-node-lease/leases/x"; do
            want="hostdevd hostdevd"
            [[ $path != */leases/* ]] || want="hostdevd-leases hostdevd-leases"
            if eventually 30 apf_is "$ns" "$sa" "$path" "$want"; then
                pass "$what: APF puts $sa's GET ${path%%\?*} in FlowSchema and level: $want"
            else
                fail "$what: APF puts $sa's GET ${path%%\?*} in FlowSchema and level: $want" \
                    "$(apf_class "$ns" "$sa" "$path")"
            fi
        done
    done
}
