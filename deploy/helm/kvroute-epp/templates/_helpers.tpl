{{/* The InferencePool's name: inferencePool.name as it is (at most 59 characters, so that the
picker's Service, <pool>-epp, is a DNS label), else the release name. */}}
{{- define "kvroute-epp.pool" -}}
{{- with .Values.inferencePool.name -}}
{{- if gt (len .) 59 -}}
{{- fail (printf "inferencePool.name %s is longer than 59 characters: the picker's Service, <name>-epp, is a DNS label of at most 63" .) -}}
{{- end -}}
{{- . -}}
{{- else -}}
{{- .Release.Name | trunc 59 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The picker's name (Deployment, Service, ServiceAccount, Role): <pool>-epp. */}}
{{- define "kvroute-epp.name" -}}
{{- include "kvroute-epp.pool" . -}}-epp
{{- end -}}

{{- define "kvroute-epp.labels" -}}
app.kubernetes.io/name: kvroute-epp
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "kvroute-epp.selectorLabels" -}}
app.kubernetes.io/name: kvroute-epp
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The engines' label selector; the chart cannot pick a pool without it. */}}
{{- define "kvroute-epp.modelServers" -}}
{{- if not .Values.inferencePool.modelServers.matchLabels -}}
{{- fail "inferencePool.modelServers.matchLabels is required: the labels of the engine pods" -}}
{{- end -}}
{{- toYaml .Values.inferencePool.modelServers.matchLabels -}}
{{- end -}}

{{/* The relabeling that gives every scraped series the pool's name as "pool". */}}
{{- define "kvroute-epp.poolRelabeling" -}}
- targetLabel: pool
  replacement: {{ include "kvroute-epp.pool" . | quote }}
  action: replace
{{- end -}}

{{/* The name of the file kvroute-epp reads (--config) in the ConfigMap: the
llm-d EndpointPickerConfig named by pluginsConfigFile, else config.yaml
(inferenceExtension.config). */}}
{{- define "kvroute-epp.configFile" -}}
{{- $x := .Values.inferenceExtension -}}
{{- if $x.pluginsConfigFile -}}
{{- if not (hasKey $x.pluginsCustomConfig $x.pluginsConfigFile) -}}
{{- fail (printf "inferenceExtension.pluginsConfigFile %q is not a file of inferenceExtension.pluginsCustomConfig" $x.pluginsConfigFile) -}}
{{- end -}}
{{- range $name, $content := $x.pluginsCustomConfig -}}
{{- if not (kindIs "string" $content) -}}
{{- fail (printf "inferenceExtension.pluginsCustomConfig.%s must be the file's text (a YAML block string, key: |)" $name) -}}
{{- end -}}
{{- if or (and (eq $name "admission.yaml") $x.admission.enabled) (and (eq $name "engine-metrics.yaml") $x.engineMetrics.enabled) -}}
{{- fail (printf "inferenceExtension.pluginsCustomConfig.%s: the chart writes %s into the same ConfigMap (from inferenceExtension.%s.config); name the file otherwise" $name $name (ternary "admission" "engineMetrics" (eq $name "admission.yaml"))) -}}
{{- end -}}
{{- end -}}
{{- $x.pluginsConfigFile -}}
{{- else -}}
config.yaml
{{- end -}}
{{- end -}}
