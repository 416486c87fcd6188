# shellcheck shell=bash
# test/integration/chart-metrics-lib.sh - a real Prometheus (Debian's) on the containerd node of
# chart-node-lib.sh, sourced by test_chart_node.sh: prometheus_up runs it in the node's network
# namespace (where the pods' addresses are) with the alerts of manifests/prometheus/alerts.yaml
# loaded and the metrics Services' endpoints as targets, job = the Service's name (what a
# ServiceMonitor or kubernetes_sd_configs with role endpoints gives). Debian builds Prometheus
# without Kubernetes service discovery ("field kubernetes_sd_configs not found"), so
# prom_targets writes the Services' ready EndpointSlice endpoints as a file_sd file instead,
# which Prometheus watches. prom_query EXPR prints the result vector as JSON; alert_exprs prints
# "NAME<TAB>EXPR" per alert.
prometheus_up() {
    local dir=$TEST_DIR/prometheus
    PROM_PORT=19090
    mkdir -p "$dir"
    prom_targets
    cat >"$dir/prometheus.yml" <<EOC
global: {scrape_interval: 2s, evaluation_interval: 2s}
rule_files: [$ROOT/manifests/prometheus/alerts.yaml]
scrape_configs:
- job_name: hostdevd
  file_sd_configs:
  - files: [$dir/targets.json]
EOC
    nsenter -t "$NODE_NS_PID" -n prometheus --config.file "$dir/prometheus.yml" \
        --storage.tsdb.path "$dir/data" --web.listen-address "127.0.0.1:$PROM_PORT" \
        >"$dir/prometheus.log" 2>&1 </dev/null &
    PROM_PID=$!
    track "$PROM_PID"
}
prom_targets() { # the metrics Services' ready endpoints as file_sd target groups
    kubectl -n "$NS" get endpointslices -l 'kubernetes.io/service-name in (hostdevd-agent,hostdevd-controller)' -o json |
        jq '[.items[] | .metadata.labels["kubernetes.io/service-name"] as $svc | .ports[0].port as $port
            | .endpoints[] | select(.conditions.ready) | {targets: ["\(.addresses[0]):\($port)"],
              labels: {job: $svc, pod: (.targetRef.name // "")}}]' >"$TEST_DIR/prometheus/targets.json.tmp" &&
        mv "$TEST_DIR/prometheus/targets.json.tmp" "$TEST_DIR/prometheus/targets.json"
}
prom_get() { # path [curl args]: Prometheus's HTTP API, in the node's network namespace
    local path=$1
    shift
    nsenter -t "$NODE_NS_PID" -n curl -fsS "$@" "http://127.0.0.1:$PROM_PORT$path"
}
prom_query() { prom_get /api/v1/query -G --data-urlencode "query=$1" | jq -c '.data.result'; }
alert_exprs() {
    python3 -c 'import sys, yaml
for g in yaml.safe_load(open(sys.argv[1]))["groups"]:
    for r in g["rules"]:
        print(r["alert"] + "\t" + " ".join(r["expr"].split()))' "$ROOT/manifests/prometheus/alerts.yaml"
}
