#!/usr/bin/env bash
# test/integration/test_helm.sh - the Helm chart (charts/hostdevd, docs/helm.md) on a real
# control plane, with Helm built from the module proxy (hack/helm-build.sh): helm lint; the
# chart with default values gives exactly the objects of `kubectl kustomize manifests/` (both
# rendered, normalised and compared object by object, a diff printed on failure); other values
# change what they should and leave no trace of hostdevd-system; helm install creates every
# object, and the admission policies then act as after `kubectl apply -k manifests/` (a few
# checks of test_access.sh again); helm upgrade; helm uninstall leaves nothing of hostdevd's
# but what docs/helm.md says stays (the CRDs with the devices and claims, the release
# namespace with the controller's leader Lease).
SUITE=helm
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=test/integration/apf-lib.sh
. "$(dirname "$0")/apf-lib.sh"
cd "$ROOT" || exit 1

G=devices.harvesterhci.io
API=/apis/$G/v1beta1
NS=hostdevd-system
CHART=charts/hostdevd
REL=hostdevd

if ! HELM=$("$ROOT/hack/helm-build.sh"); then
    fail "hack/helm-build.sh builds helm"
    finish
fi
cluster_start
# Helm logs each symlink of the chart (crds/, manifests/) at INFO on stderr; kept out of $OUT.
helm() { GOGC=off GOMEMLIMIT=512MiB "$HELM" "$@" 2> >(grep -v 'found symbolic link in path' >&2); }

echo "--- lint and render ($("$HELM" version --short))"
expect_ok "helm lint" helm lint --strict "$CHART"
OTHER=(--set image.repository=example.invalid/hostdevd --set image.tag=1.2.3
    --set image.pullPolicy=Always --set agent.kubeletDir=/data/kubelet/ --set agent.logLevel=4
    --set controller.logLevel=2 --set controller.replicas=1 --set kubevirt.namespace=harvester-system
    --set kubevirt.name=kv --set agent.nodeSelector.devices=yes --set 'controller.tolerations[0].operator=Exists'
    --set agent.resources.limits.memory=256Mi --set agent.unhealthyTaintEffect=NoExecute)
expect_ok "helm lint with other values" helm lint --strict "$CHART" "${OTHER[@]}"
# (hooks left out: the pre-delete hook's objects exist only while helm uninstall runs it;
# test_chart_node.sh runs it)
expect_ok "helm template (defaults, namespace $NS, CRDs included, no hooks)" \
    helm template $REL "$CHART" -n $NS --include-crds --no-hooks
printf '%s\n' "$OUT" >"$TEST_DIR/chart.yaml"
expect_ok "kubectl kustomize manifests/" kubectl kustomize manifests/ -o "$TEST_DIR/kustomize.yaml"
# A packaged chart holds the files its symlinks point at, and renders the same.
expect_ok "helm package" helm package "$CHART" -d "$TEST_DIR"
expect_ok "... the archive renders as the directory does" \
    diff <(helm template $REL "$TEST_DIR"/hostdevd-*.tgz -n $NS --include-crds --no-hooks) "$TEST_DIR/chart.yaml"
expect_contains "the pre-delete hook renders: its Job runs hostdevd uninstall-check" \
    "$(helm template $REL "$CHART" -n $NS --show-only templates/uninstall-check.yaml)" \
    "helm.sh/hook: pre-delete" "command: [hostdevd, uninstall-check]" "verbs: [list]"
expect_ok "... and uninstallCheck.enabled=false leaves it out" bash -c "! grep -q uninstall-check <<<\"\$1\"" _ \
    "$(helm template $REL "$CHART" -n $NS --set uninstallCheck.enabled=false)"
expect_reject "values.schema.json refuses a misspelt value" "additional properties 'kubeletdir' not allowed" \
    helm template $REL "$CHART" --set agent.kubeletdir=/data/kubelet
expect_reject "... and a log level that is no number" "at '/controller/logLevel': got string, want integer" \
    helm template $REL "$CHART" --set-string controller.logLevel=debug
expect_reject "... and a taint effect the agent does not write" "at '/agent/unhealthyTaintEffect'" \
    helm template $REL "$CHART" --set agent.unhealthyTaintEffect=None
expect_reject "... and a priority level field that APF does not have" \
    "additional properties 'queues' not allowed" helm template $REL "$CHART" --set flowControl.priorityLevel.queues=8
expect_reject "the release namespace may not be hostdevd-node-lease" \
    "hostdevd-node-lease holds the agents' heartbeats" helm template $REL "$CHART" -n hostdevd-node-lease

# Objects as JSON (kubectl's client-side dry run: no defaults, no admission), normalised: Helm's
# own labels dropped (helm.sh/chart, app.kubernetes.io/managed-by, instance, version), and on
# CRDs also kustomize's part-of (Helm installs crds/ files as they are), then sorted by kind,
# namespace and name.
normalise() { # file
    kubectl create --dry-run=client -o json -f "$1" | jq -c '
        (if .kind == "List" then .items else [.] end)[]
        | .metadata.labels |= ((. // {}) | del(.["helm.sh/chart"], .["app.kubernetes.io/managed-by"],
            .["app.kubernetes.io/instance"], .["app.kubernetes.io/version"]))
        | if .kind == "CustomResourceDefinition" then .metadata.labels |= del(.["app.kubernetes.io/part-of"]) else . end
        | if .metadata.labels == {} then del(.metadata.labels) else . end
        | select((.metadata.annotations // {})["helm.sh/hook"] == null)' |
        jq -sc 'sort_by(.kind, .metadata.namespace // "", .metadata.name)[]'
}
key() { jq -r '.kind + " " + (.metadata.namespace // "-") + "/" + .metadata.name'; }

echo "--- the chart's defaults give the objects of manifests/"
# The Namespace hostdevd-system is manifests/' alone: with Helm it is the release namespace,
# which exists before the chart is installed (docs/helm.md).
normalise "$TEST_DIR/kustomize.yaml" >"$TEST_DIR/k.jsonl"
normalise "$TEST_DIR/chart.yaml" >"$TEST_DIR/c.jsonl"
key <"$TEST_DIR/k.jsonl" >"$TEST_DIR/k.keys"
key <"$TEST_DIR/c.jsonl" >"$TEST_DIR/c.keys"
expect_contains "manifests/ has $(wc -l <"$TEST_DIR/k.keys") objects, the chart $(wc -l <"$TEST_DIR/c.keys"): Namespace $NS is manifests/' alone" \
    "$(diff "$TEST_DIR/k.keys" "$TEST_DIR/c.keys")" "< Namespace -/$NS"
expect_ok "every other object of manifests/ is in the chart and no other" \
    diff <(grep -vx "Namespace -/$NS" "$TEST_DIR/k.keys") "$TEST_DIR/c.keys"
# Both sides as one text each, object after object under a "### kind namespace/name" line.
pretty() { jq -S -r --arg ns "$NS" 'select(.kind != "Namespace" or .metadata.name != $ns) |
    "### \(.kind) \(.metadata.namespace // "-")/\(.metadata.name)", .' "$1"; }
if drift=$(diff -u -F '^### ' --label manifests/ --label chart <(pretty "$TEST_DIR/k.jsonl") <(pretty "$TEST_DIR/c.jsonl")); then
    pass "each of the $(wc -l <"$TEST_DIR/c.keys") objects is the same in both"
else
    mkdir -p "$ROOT/build/results"
    printf '%s\n' "$drift" >"$ROOT/build/results/helm-drift.diff"
    fail "each object is the same in both (the whole diff: build/results/helm-drift.diff)" "$drift"
fi

echo "--- other values"
expect_ok "helm template -n devices with other values, policies off" \
    helm template $REL "$CHART" -n devices "${OTHER[@]}" --set admissionPolicies.enabled=false
printf '%s\n' "$OUT" >"$TEST_DIR/other.yaml"
expect_ok "... with the policies" helm template $REL "$CHART" -n devices "${OTHER[@]}"
printf '%s\n' "$OUT" >"$TEST_DIR/other-policies.yaml"
O=$(normalise "$TEST_DIR/other.yaml")
OP=$(normalise "$TEST_DIR/other-policies.yaml")
expect_contains "the agent: image, pull policy, -v 4, node selector, tolerations, kubelet dir, resources, taint effect" \
    "$(jq -c 'select(.kind == "DaemonSet") | .metadata.namespace as $ns | .spec.template.spec |
        {release: $ns, ns: .nodeSelector, t: .tolerations, c: .containers[0] | {image, imagePullPolicy, args,
         l: .resources.limits}, dp: (.volumes[] | select(.name == "device-plugins") | .hostPath.path),
         m: (.containers[0].volumeMounts[] | select(.name == "device-plugins") | .mountPath)}' <<<"$O")" \
    '"release":"devices"' '"image":"example.invalid/hostdevd:1.2.3","imagePullPolicy":"Always"' \
    '"args":["--listen=0.0.0.0:9808","--sysfs-root=/sys","--kubelet-dir=/data/kubelet","--cdi-dir=/var/run/cdi","--unhealthy-taint-effect=NoExecute","-v","4"]' \
    '"ns":{"devices":"yes","kubernetes.io/os":"linux"}' '"t":[{"operator":"Exists"}]' \
    '"l":{"cpu":"200m","memory":"256Mi"}' '"dp":"/var/lib/kubelet/device-plugins"' \
    '"m":"/data/kubelet/device-plugins"'
expect_contains "the controller: replicas, --kubevirt, -v 2, tolerations" \
    "$(jq -c 'select(.kind == "Deployment") | {r: .spec.replicas, a: .spec.template.spec.containers[0].args,
        t: .spec.template.spec.tolerations}' <<<"$O")" \
    '"r":1' '"a":["--listen=0.0.0.0:9808","--kubevirt=harvester-system/kv","-v","2"]' \
    '"t":[{"operator":"Exists"}]'
expect_contains "admissionPolicies.enabled=false: no admission policies" \
    "$(jq -r .kind <<<"$O" | sort | uniq -c | tr -s ' ')" "1 Deployment" "1 Namespace"
if jq -r .kind <<<"$O" | grep -q AdmissionPolicy; then
    fail "... none at all" "$(jq -r .kind <<<"$O" | grep AdmissionPolicy | sort | uniq -c)"
else
    pass "... none at all"
fi
expect_contains "the policies name the service accounts of the release namespace" \
    "$(jq -r 'select(.kind == "ValidatingAdmissionPolicy") | .spec.matchConditions[]?.expression' <<<"$OP")" \
    "'system:serviceaccount:devices:hostdevd-agent'" "'system:serviceaccount:devices:hostdevd-controller'"
expect_contains "the KubeVirt policies' bindings look for the KubeVirt CR in harvester-system" \
    "$(jq -c 'select(.kind == "ValidatingAdmissionPolicyBinding" and .spec.paramRef) |
        {(.metadata.name): .spec.paramRef.namespace}' <<<"$OP")" \
    '{"hostdevd-vm-use":"harvester-system"}' '{"hostdevd-pod-use":"harvester-system"}' \
    '{"hostdevd-vm-copies":"harvester-system"}' '{"hostdevd-revision-use":"harvester-system"}'
expect_contains "RBAC subjects in the release namespace; Roles where manifests/ has them" \
    "$(jq -r 'select(.kind | test("Role")) | .kind + " " + (.metadata.namespace // "-") + "/" +
        .metadata.name + " " + ([.subjects[]?.namespace] | join(","))' <<<"$OP")" \
    "RoleBinding devices/hostdevd-controller-leader-election devices" \
    "RoleBinding hostdevd-node-lease/hostdevd-agent-heartbeat devices" \
    "RoleBinding default/hostdevd-agent-events devices" "ClusterRoleBinding -/hostdevd-agent devices"
expect_contains "the FlowSchemas name the service accounts and the leader Lease of the release namespace" \
    "$(jq -c 'select(.kind == "FlowSchema") | {(.metadata.name): [.spec.rules[] | (.subjects[].serviceAccount.namespace),
        (.resourceRules[].namespaces[])] | unique}' <<<"$OP")" \
    '{"hostdevd-leases":["devices","hostdevd-node-lease"]}' '{"hostdevd":["*","devices"]}'
expect_contains "admissionPolicies.enabled=false leaves the FlowSchemas and priority levels" \
    "$(jq -r .kind <<<"$O" | sort | uniq -c | tr -s ' ')" "2 FlowSchema" "2 PriorityLevelConfiguration"
expect_ok "flowControl.enabled=false, priority level values" helm template $REL "$CHART" -n devices \
    --set flowControl.enabled=false
expect_contains "... no FlowSchema, no priority level" "$(grep -c '^kind: \(FlowSchema\|PriorityLevelConfiguration\)$' <<<"$OUT")" 0
expect_ok "flowControl.priorityLevel and leasePriorityLevel" helm template $REL "$CHART" -n devices \
    --set flowControl.priorityLevel.nominalConcurrencyShares=40 \
    --set flowControl.priorityLevel.limitResponse.queuing.queueLengthLimit=256 \
    --set flowControl.leasePriorityLevel.lendablePercent=10
expect_contains "... merged over manifests/flowcontrol.yaml's spec.limited, the rest kept" \
    "$(kubectl create --dry-run=client -o json -f - <<<"$OUT" | jq -c '(if .kind == "List" then .items else [.] end)[] | select(.kind == "PriorityLevelConfiguration") |
        {(.metadata.name): .spec.limited}')" \
    '{"hostdevd":{"lendablePercent":50,"limitResponse":{"queuing":{"handSize":8,"queueLengthLimit":256,"queues":64},"type":"Queue"},"nominalConcurrencyShares":40}}' \
    '{"hostdevd-leases":{"lendablePercent":10,"limitResponse":{"queuing":{"handSize":4,"queueLengthLimit":100,"queues":16},"type":"Queue"},"nominalConcurrencyShares":10}}'
if grep -n "$NS" <<<"$OP"; then
    fail "nothing names $NS with another release namespace"
else
    pass "nothing names $NS with another release namespace"
fi

echo "--- monitoring: the alerts, their tests, prometheus-operator's objects"
# The rules file and its unit tests (Debian's promtool); the chart's PrometheusRule carries the
# same groups; the ServiceMonitors select the metrics Services by their labels and port.
expect_ok "promtool check rules manifests/prometheus/alerts.yaml" promtool check rules manifests/prometheus/alerts.yaml
expect_ok "promtool test rules test/prometheus/alerts_test.yaml (every alert firing and not)" \
    promtool test rules test/prometheus/alerts_test.yaml
expect_ok "no prometheus-operator object by default" bash -c "! grep -q 'monitoring.coreos.com' \"\$1\"" _ "$TEST_DIR/chart.yaml"
expect_ok "helm template with monitoring.serviceMonitor and monitoring.prometheusRule on" \
    helm template $REL "$CHART" -n $NS --set monitoring.serviceMonitor.enabled=true \
    --set monitoring.prometheusRule.enabled=true --set monitoring.prometheusRule.labels.release=prom \
    --set monitoring.serviceMonitor.interval=15s
printf '%s\n' "$OUT" >"$TEST_DIR/monitoring.yaml"
monitoring_check() { # what the rendered objects must say, in Python over the YAML
    python3 - "$TEST_DIR/monitoring.yaml" manifests/prometheus/alerts.yaml <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
rules = [d for d in docs if d["kind"] == "PrometheusRule"]
mons = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ServiceMonitor"}
svcs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
assert len(rules) == 1 and rules[0]["spec"] == yaml.safe_load(open(sys.argv[2])), "PrometheusRule != alerts.yaml"
assert rules[0]["metadata"]["labels"]["release"] == "prom", "PrometheusRule labels"
assert sorted(mons) == ["hostdevd-agent", "hostdevd-controller"], sorted(mons)
for name, m in mons.items():
    s = svcs[name]
    sel = m["spec"]["selector"]["matchLabels"]
    assert all(s["metadata"]["labels"].get(k) == v for k, v in sel.items()), name + ": selector"
    assert m["spec"]["endpoints"][0]["port"] in [p["name"] for p in s["spec"]["ports"]], name + ": port"
    assert m["spec"]["endpoints"][0]["interval"] == "15s", name + ": interval"
print("ok")
EOF
}
expect_ok "... the PrometheusRule's groups are alerts.yaml's, each ServiceMonitor selects its Service and port" monitoring_check
# The objects against prometheus-operator's own CRDs (hack/prometheus-operator-crds.sh: v0.85.0's,
# from the operator's module through the Go module proxy), created for real: their schemas judge.
if PCRDS=$("$ROOT/hack/prometheus-operator-crds.sh"); then
    expect_ok "prometheus-operator's CRDs applied and Established" bash -c \
        'kubectl apply --server-side -f "$1" >/dev/null && kubectl wait --for condition=Established --timeout 60s -f "$1"' _ "$PCRDS"
    python3 -c 'import sys, yaml
yaml.safe_dump_all([o for o in yaml.safe_load_all(open(sys.argv[1])) if o and o["apiVersion"].startswith("monitoring.coreos.com/")], sys.stdout)' \
        "$TEST_DIR/monitoring.yaml" | sed "s/namespace: $NS/namespace: mon/" >"$TEST_DIR/monitoring-only.yaml"
    kubectl create namespace mon >/dev/null
    expect_ok "the chart's ServiceMonitors and PrometheusRule pass those CRDs' schemas (kubectl create)" \
        kubectl create -f "$TEST_DIR/monitoring-only.yaml"
    expect_contains "... all three" "$OUT" "servicemonitor.monitoring.coreos.com/hostdevd-agent created" \
        "servicemonitor.monitoring.coreos.com/hostdevd-controller created" "prometheusrule.monitoring.coreos.com/hostdevd created"
    expect_reject "... which do judge: a rule's for: that is no duration is refused" "for" \
        kubectl create -f - <<<"$(sed 's/^\( *\)for: 5m$/\1for: soon/; s/name: hostdevd$/name: hostdevd-bad/' "$TEST_DIR/monitoring-only.yaml" |
            python3 -c 'import sys, yaml
yaml.safe_dump_all([o for o in yaml.safe_load_all(sys.stdin) if o and o["kind"] == "PrometheusRule"], sys.stdout)')"
    kubectl delete namespace mon --wait=false >/dev/null
    kubectl delete -f "$PCRDS" --wait=false >/dev/null
else
    fail "hack/prometheus-operator-crds.sh gives prometheus-operator's CRDs"
fi
expect_reject "values.schema.json refuses an interval Prometheus would not take" "monitoring/serviceMonitor/interval" \
    helm template $REL "$CHART" --set monitoring.serviceMonitor.interval=30

echo "--- helm install"
# As docs/helm.md says: the release namespace first, with Pod Security Admission allowing the
# privileged agent, then the chart.
expect_ok "the namespace $NS, privileged" kubectl create namespace $NS
expect_ok "... labelled" kubectl label namespace $NS pod-security.kubernetes.io/enforce=privileged
t0=$SECONDS
expect_ok "helm install $REL $CHART -n $NS" helm install $REL "$CHART" -n $NS
echo "  helm install in $((SECONDS - t0))s"
expect_ok "the CRDs become Established" kubectl wait --for condition=Established --timeout 60s \
    crd/pcidevices.$G crd/pcideviceclaims.$G crd/usbdevices.$G crd/usbdeviceclaims.$G \
    crd/sriovnetworkdevices.$G
# Every object of the chart, looked up by kind, namespace and name.
expect_ok "every object of the chart exists" kubectl get -f "$TEST_DIR/chart.yaml" -o name
expect_contains "... all $(wc -l <"$TEST_DIR/c.keys") of them" "$(wc -l <<<"$OUT")" "$(wc -l <"$TEST_DIR/c.keys")"
expect_contains "the release is deployed" "$(helm list -n $NS -o json)" '"name":"hostdevd"' '"status":"deployed"'
expect_contains "the DaemonSet and the Deployment are there (no kubelet here: no Pods)" \
    "$(kubectl get ds,deploy -n $NS -o jsonpath='{range .items[*]}{.kind}/{.metadata.name} {.spec.template.spec.containers[0].image}{"\n"}{end}')" \
    "DaemonSet/hostdevd-agent localhost/hostdevd:0.1.0" "Deployment/hostdevd-controller localhost/hostdevd:0.1.0"

apf_check "helm install" $NS

echo "--- the admission policies act as with kubectl apply -k manifests/"
X=node-a-000001000
LAPI=/apis/coordination.k8s.io/v1/namespaces/hostdevd-node-lease/leases
expect_ok "nodes node-a and node-b; alice may use $X, dave may write devices (by mistake)" kubectl apply -f - <<EOF
apiVersion: v1
kind: Node
metadata: {name: node-a}
---
apiVersion: v1
kind: Node
metadata: {name: node-b}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: developers-device-user}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hostdevd-device-user}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: developers}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: team-a-gpu}
rules:
- {apiGroups: [$G], resources: [pcidevices], resourceNames: [$X], verbs: [use]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: team-a-gpu}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: team-a-gpu}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: device-writer}
rules:
- {apiGroups: [$G], resources: ["*"], verbs: [get, list, create, update, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: dave-device-writer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: device-writer}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: dave}]
EOF
TA=$(kubectl create token hostdevd-agent -n $NS --bound-object-kind Node --bound-object-name node-a)
TU=$(kubectl create token hostdevd-agent -n $NS)

device() { # name node
    printf '{"apiVersion":"%s/v1beta1","kind":"PCIDevice","metadata":{"name":"%s","labels":{"nodename":"%s"}}}' "$G" "$1" "$2"
}
claim() { # name node [userName]
    printf 'apiVersion: %s/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "0000:01:00.0", nodeName: %s%s}\n' \
        "$G" "$1" "$2" "${3:+, userName: $3}"
}
# Policies and bindings take effect asynchronously: wait until each answers as it should.
ready() {
    denied_by hostdevd-agent-devices api "$TU" POST "$API/pcidevices?dryRun=All" "$(device node-a-0000010ff node-a)" &&
        denied_by hostdevd-claim-use kubectl --context bob create --dry-run=server -f - <<<"$(claim "$X" node-a)" &&
        [ "$(kubectl --context alice create --dry-run=server -o jsonpath='{.spec.userName}' -f - \
            <<<"$(claim "$X" node-a)")" = alice ]
}
if eventually 60 ready; then
    pass "the admission policies are in effect"
else
    fail "the admission policies are in effect" "a readiness request did not give the expected answer within 60s"
fi
expect_ok "node-a's agent creates its PCIDevice $X" api "$TA" POST "$API/pcidevices" "$(device $X node-a)"
expect_reject "... not node-b's (hostdevd-agent-devices)" \
    "the agent of node node-a may only write PCIDevices of its own node, named \"node-a-...\": node-b-000002000 is not" \
    api "$TA" POST "$API/pcidevices" "$(device node-b-000002000 node-b)"
expect_reject "an unbound agent token writes nothing" \
    "the hostdevd agent may write PCIDevices only with a token that names its node" \
    api "$TU" POST "$API/pcidevices" "$(device node-a-000003000 node-a)"
expect_reject "node-a's agent writes no heartbeat but its own (hostdevd-agent-lease)" \
    "the hostdevd agent may only write its heartbeat" \
    api "$TA" POST "$LAPI" '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"node-b"},"spec":{"holderIdentity":"node-b"}}'
expect_ok "... its own, yes" \
    api "$TA" POST "$LAPI" '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"node-a"},"spec":{"holderIdentity":"node-a"}}'
expect_reject "bob may not claim $X (hostdevd-claim-use)" \
    "user bob may not claim pcidevices/$X: claiming needs the verb \"use\" on pcidevices/$X" \
    kubectl --context bob create -f - <<<"$(claim $X node-a)"
expect_reject "alice may not claim in bob's name (hostdevd-claim-spec)" \
    'spec.userName must be the user who creates the claim, "alice", not "bob"' \
    kubectl --context alice create -f - <<<"$(claim $X node-a bob)"
expect_ok "alice claims $X" kubectl --context alice create -f - <<<"$(claim $X node-a)"
expect_contains "... and the API server names her (hostdevd-claim-username)" \
    "$(kubectl get pcideviceclaim $X -o jsonpath='{.spec.userName}')" alice
expect_reject "dave, granted device writes by mistake, may not create one (hostdevd-agent-written)" \
    "only the hostdevd agent (for its own node) and cluster admins may create pcidevices; dave is neither" \
    kubectl --as dave create --dry-run=server -f - <<<"$(device node-b-000004000 node-b)"
expect_contains "the controller reads the heartbeats, writes no device; the agent does not touch the KubeVirt CR" \
    "$(kubectl auth can-i watch leases.coordination.k8s.io -n hostdevd-node-lease --as system:serviceaccount:$NS:hostdevd-controller
        kubectl auth can-i create pcidevices.$G --as system:serviceaccount:$NS:hostdevd-controller 2>/dev/null
        kubectl auth can-i patch kubevirts.kubevirt.io -n kubevirt --as system:serviceaccount:$NS:hostdevd-agent 2>/dev/null)" \
    $'yes\nno\nno'

echo "--- helm upgrade"
expect_ok "helm upgrade: flowControl.enabled=false" helm upgrade $REL "$CHART" -n $NS --set flowControl.enabled=false
if eventually 30 apf_is $NS hostdevd-agent "/apis/$G/v1beta1/pcidevices?limit=1" "service-accounts workload-low"; then
    pass "... the FlowSchemas are gone: the agent's requests are the built-in service-accounts' again"
else
    fail "... the FlowSchemas are gone: the agent's requests are the built-in service-accounts' again" \
        "$(apf_class $NS hostdevd-agent "/apis/$G/v1beta1/pcidevices?limit=1")"
fi
expect_ok "helm upgrade: back, with 40 shares" helm upgrade $REL "$CHART" -n $NS \
    --set flowControl.priorityLevel.nominalConcurrencyShares=40
expect_contains "... the level hostdevd has them" \
    "$(kubectl get prioritylevelconfiguration hostdevd -o jsonpath='{.spec.limited.nominalConcurrencyShares}')" 40
expect_ok "helm upgrade: one controller replica, KubeVirt in harvester-system" \
    helm upgrade $REL "$CHART" -n $NS --set controller.replicas=1 --set kubevirt.namespace=harvester-system
expect_contains "... the Deployment and the bindings follow" \
    "$(kubectl get deploy -n $NS hostdevd-controller -o jsonpath='{.spec.replicas}'
        kubectl get validatingadmissionpolicybinding hostdevd-vm-use hostdevd-pod-use \
            -o jsonpath='{range .items[*]} {.spec.paramRef.namespace}{end}')" \
    "1 harvester-system harvester-system"

echo "--- helm uninstall"
# The controller's leader Lease, as a running controller leaves it in the release namespace.
expect_ok "a leader Lease hostdevd-controller in $NS" kubectl create -f - <<EOF
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: hostdevd-controller, namespace: $NS}
spec: {holderIdentity: hostdevd-controller-0, leaseDurationSeconds: 15}
EOF
kubectl delete clusterrolebinding developers-device-user team-a-gpu dave-device-writer >/dev/null
kubectl delete clusterrole team-a-gpu device-writer >/dev/null
t0=$SECONDS
# --no-hooks: the pre-delete hook is a Job, and no kubelet runs pods here (test_chart_node.sh
# runs it: helm uninstall refused while a claim remains).
expect_ok "helm uninstall $REL -n $NS --wait --no-hooks" helm uninstall $REL -n $NS --wait --timeout 60s --no-hooks
echo "  helm uninstall in $((SECONDS - t0))s"
expect_ok "the namespace hostdevd-node-lease (and the heartbeats in it) goes" \
    kubectl wait --for=delete namespace/hostdevd-node-lease --timeout 60s
expect_ok "no object of the chart's templates is left" \
    kubectl get -f <(helm template $REL "$CHART" -n $NS) --ignore-not-found -o name
expect_contains "... none" "[$OUT]" "[]"
expect_contains "no release left (history included)" \
    "[$(helm list -n $NS -q)$(helm list --uninstalled -n $NS -q)$(kubectl get secrets -n $NS -l owner=helm -o name)]" "[]"
# Every object of every listable kind, named hostdevd-* or labelled as hostdevd's: only what
# docs/helm.md says stays. Events are left out (they expire).
KINDS=$(kubectl api-resources --verbs=list -o name | grep -vx 'events\|events.events.k8s.io' | paste -sd,)
LEFT=$(kubectl get "$KINDS" -A -o json 2>/dev/null | jq -r '.items[] | select((.metadata.name | test("hostdevd")) or
    (.metadata.labels // {} | .["app.kubernetes.io/part-of"] == "hostdevd" or
     .["app.kubernetes.io/managed-by"] == "Helm")) | .kind + " " + (.metadata.namespace // "-") + "/" + .metadata.name' | sort)
expect_ok "what stays: the CRDs, the release namespace $NS and the leader Lease in it" \
    diff <(printf '%s\n' "$LEFT") <(printf 'CustomResourceDefinition -/%s\n' pcideviceclaims.$G pcidevices.$G \
        sriovnetworkdevices.$G usbdeviceclaims.$G usbdevices.$G vgpudevices.$G; printf 'Lease %s/hostdevd-controller\nNamespace -/%s\n' $NS $NS)
expect_ok "the CRDs stay (helm never deletes crds/), and with them the devices and claims" \
    kubectl get crd/pcidevices.$G crd/pcideviceclaims.$G crd/usbdevices.$G crd/usbdeviceclaims.$G \
    crd/sriovnetworkdevices.$G pcidevice/$X pcideviceclaim/$X -o name
expect_ok "helm install again over the CRDs that stayed" helm install $REL "$CHART" -n $NS
expect_ok "helm uninstall again" helm uninstall $REL -n $NS --wait --timeout 60s --no-hooks

echo "--- Helm on a cluster installed with kubectl apply -k manifests/ (or by make demo)"
lease_ns_gone() { ! kubectl get namespace hostdevd-node-lease >/dev/null 2>&1; }
eventually 90 lease_ns_gone || fail "hostdevd-node-lease is deleted after the uninstall"
expect_ok "kubectl apply -k manifests/" kubectl apply -k manifests/
expect_reject "helm install over those objects is refused without --take-ownership" \
    "invalid ownership metadata" helm install $REL "$CHART" -n $NS
# Helm 4 applies server-side: the fields kubectl's client-side apply set are its to take too
expect_ok "helm install --take-ownership --force-conflicts adopts them, as docs/helm.md says" \
    helm install $REL "$CHART" -n $NS --take-ownership --force-conflicts
OUT=$(kubectl get namespace hostdevd-node-lease -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by} {.metadata.annotations.meta\.helm\.sh/release-name}')
expect_contains "... the objects are the release's now (hostdevd-node-lease: managed-by Helm, release hostdevd)" "$OUT" "Helm hostdevd"
expect_ok "... and the release upgrades and uninstalls as one installed by Helm" helm upgrade $REL "$CHART" -n $NS
expect_ok "helm uninstall" helm uninstall $REL -n $NS --wait --timeout 60s --no-hooks
finish
