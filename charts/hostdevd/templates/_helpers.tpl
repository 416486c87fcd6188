{{/*
The labels of every object the chart makes: manifests/ kustomization's part-of, and Helm's own.
*/}}
{{- define "hostdevd.labels" -}}
app.kubernetes.io/part-of: hostdevd
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "hostdevd.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
hostdevd.manifest (list $ FILE [SPECS]): the objects of manifests/FILE, the repository's install
manifests, which the chart reads (manifests/ is a symlink) rather than copies, so the two cannot
drift. Changed on the way, and nothing else:
- the namespace hostdevd-system (metadata.namespace, RBAC subjects, and the service accounts'
  user names in the admission policies' CEL) becomes the release's namespace; the Namespace
  object hostdevd-system itself is left out (Helm's release namespace exists before the chart);
  in the FlowSchemas also their service-account subjects and the namespaces of their rules;
- the KubeVirt policies' paramRef.namespace "kubevirt" becomes .Values.kubevirt.namespace;
- SPECS, a dict "Kind/name" -> dict, is merged over those objects' spec (values win);
- the chart's labels are added.
*/}}
{{- define "hostdevd.manifest" -}}
{{- $root := index . 0 -}}
{{- $file := index . 1 -}}
{{- $specs := dict -}}
{{- if gt (len .) 2 }}{{ $specs = index . 2 }}{{ end -}}
{{- $ns := $root.Release.Namespace -}}
{{- $text := $root.Files.Get (printf "manifests/%s" $file) -}}
{{- if not $text -}}
{{- fail (printf "manifests/%s is missing from the chart (charts/hostdevd/manifests is a symlink to the repository's manifests/)" $file) -}}
{{- end -}}
{{- $text = replace "system:serviceaccount:hostdevd-system:" (printf "system:serviceaccount:%s:" $ns) $text -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" $text -1 -}}
{{- $o := fromYaml $doc -}}
{{- if hasKey $o "Error" -}}
{{- fail (printf "manifests/%s: %s" $file $o.Error) -}}
{{- end -}}
{{- if and $o (not (and (eq $o.kind "Namespace") (eq $o.metadata.name "hostdevd-system"))) -}}
{{- if eq (dig "metadata" "namespace" "" $o) "hostdevd-system" -}}
{{- $_ := set $o.metadata "namespace" $ns -}}
{{- end -}}
{{- range $s := $o.subjects | default list -}}
{{- if eq ($s.namespace | default "") "hostdevd-system" -}}
{{- $_ := set $s "namespace" $ns -}}
{{- end -}}
{{- end -}}
{{- if eq $o.kind "FlowSchema" -}}
{{- range $r := $o.spec.rules -}}
{{- range $s := $r.subjects | default list -}}
{{- if and $s.serviceAccount (eq $s.serviceAccount.namespace "hostdevd-system") -}}
{{- $_ := set $s.serviceAccount "namespace" $ns -}}
{{- end -}}
{{- end -}}
{{- range $rr := $r.resourceRules | default list -}}
{{- $nss := list -}}
{{- range $n := $rr.namespaces | default list -}}
{{- $nss = append $nss (eq $n "hostdevd-system" | ternary $ns $n) -}}
{{- end -}}
{{- if $rr.namespaces }}{{ $_ := set $rr "namespaces" $nss }}{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with get $specs (printf "%s/%s" $o.kind $o.metadata.name) -}}
{{- $_ := set $o "spec" (mergeOverwrite $o.spec (deepCopy .)) -}}
{{- end -}}
{{- if and (eq $o.kind "ValidatingAdmissionPolicyBinding") (dig "spec" "paramRef" "namespace" "" $o | eq "kubevirt") -}}
{{- $_ := set $o.spec.paramRef "namespace" $root.Values.kubevirt.namespace -}}
{{- end -}}
{{- $_ := set $o.metadata "labels" (merge (dict) (include "hostdevd.labels" $root | fromYaml) ($o.metadata.labels | default dict)) }}
---
# Source: manifests/{{ $file }}
{{ toYaml $o }}
{{- end -}}
{{- end -}}
{{- end -}}
