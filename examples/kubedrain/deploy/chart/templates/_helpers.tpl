{{/*
The chart's name, or nameOverride.
*/}}
{{- define "kubedrain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of the objects' names: fullnameOverride, else the release's
name, followed by the chart's unless it already holds it ("kubedrain" for
`helm install kubedrain`). 63 characters at most, as a DNS label.
*/}}
{{- define "kubedrain.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The chart's name and version, for the helm.sh/chart label.
*/}}
{{- define "kubedrain.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The labels of every object.
*/}}
{{- define "kubedrain.labels" -}}
helm.sh/chart: {{ include "kubedrain.chart" . }}
{{ include "kubedrain.selectorLabels" . }}
{{- with .Chart.AppVersion }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
The labels that select the release's pods: the DaemonSet's selector, the
Service's.
*/}}
{{- define "kubedrain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubedrain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
The name of the ServiceAccount kubedrain runs as.
*/}}
{{- define "kubedrain.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kubedrain.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The image: repository@digest, or repository:tag ("v" and the chart's
appVersion when the tag is empty: the images are tagged vX.Y.Z).
*/}}
{{- define "kubedrain.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default (printf "v%s" (trimPrefix "v" .Chart.AppVersion))) -}}
{{- end -}}
{{- end -}}

{{/*
Where the Secret of webhook.urlSecret is mounted.
*/}}
{{- define "kubedrain.webhookDir" -}}
/etc/kubedrain/webhook
{{- end -}}

{{/*
The address of --metrics-bind-address and of --health-probe-bind-address.
*/}}
{{- define "kubedrain.metricsAddress" -}}
{{- printf "%s:%d" (.Values.metrics.bindAddress | default "") (int .Values.metrics.port) -}}
{{- end -}}
{{- define "kubedrain.probesAddress" -}}
{{- printf "%s:%d" (.Values.probes.bindAddress | default "") (int .Values.probes.port) -}}
{{- end -}}

{{/*
The name of the container port that the probes use: "probes", or
"metrics" when both listen on one address (one listener).
*/}}
{{- define "kubedrain.probePort" -}}
{{- if and .Values.metrics.enabled (eq (include "kubedrain.metricsAddress" .) (include "kubedrain.probesAddress" .)) -}}
metrics
{{- else -}}
probes
{{- end -}}
{{- end -}}

{{/*
kubedrain's arguments, as a YAML list, in the order of its flags. An empty
value renders no flag: kubedrain's default applies.
*/}}
{{- define "kubedrain.args" -}}
{{- $v := .Values -}}
{{- if and $v.webhook.url $v.webhook.urlSecret.name -}}
{{- fail "webhook.url and webhook.urlSecret.name: set one, not both" -}}
{{- end -}}
{{- $args := list -}}
{{- $flags := list
  (list "sources" $v.sources) (list "margin" $v.margin) (list "fallback" $v.fallback)
  (list "max-hold" $v.maxHold) (list "on-rebalance" $v.onRebalance) (list "on-maintenance" $v.onMaintenance)
  (list "pod-selector-exempt" $v.podSelectorExempt) (list "log-format" $v.logFormat) (list "log-level" $v.logLevel)
  (list "imds-interval" $v.imdsInterval) (list "imds-advisory-interval" $v.imdsAdvisoryInterval) -}}
{{- range $flags -}}
{{- if index . 1 -}}
{{- $args = append $args (printf "--%s=%v" (index . 0) (index . 1)) -}}
{{- end -}}
{{- end -}}
{{- if $v.dryRun -}}
{{- $args = append $args "--dry-run" -}}
{{- end -}}
{{- if $v.metrics.enabled -}}
{{- $args = append $args (printf "--metrics-bind-address=%s" (include "kubedrain.metricsAddress" $)) -}}
{{- end -}}
{{- if $v.probes.enabled -}}
{{- $args = append $args (printf "--health-probe-bind-address=%s" (include "kubedrain.probesAddress" $)) -}}
{{- end -}}
{{- with $v.webhook.url -}}
{{- $args = append $args (printf "--webhook-url=%s" .) -}}
{{- end -}}
{{- if $v.webhook.urlSecret.name -}}
{{- $args = append $args (printf "--webhook-url-file=%s/%s" (include "kubedrain.webhookDir" $) $v.webhook.urlSecret.key) -}}
{{- end -}}
{{- with $v.webhook.template -}}
{{- $args = append $args (printf "--webhook-template=%s" .) -}}
{{- end -}}
{{- range $v.webhook.headers -}}
{{- $args = append $args (printf "--webhook-header=%s" .) -}}
{{- end -}}
{{- if $v.webhook.advice -}}
{{- $args = append $args "--webhook-advice" -}}
{{- end -}}
{{- range $v.extraArgs -}}
{{- $args = append $args (toString .) -}}
{{- end -}}
{{- with $args -}}
{{- toYaml . -}}
{{- end -}}
{{- end -}}
