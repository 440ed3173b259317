{{/* Names and labels. */}}
{{- define "switchyard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "switchyard.fullname" -}}
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

{{- define "switchyard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "switchyard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "api"). */}}
{{- define "switchyard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "switchyard.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "switchyard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "switchyard.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "switchyard.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
An env entry from a secret reference in .Values.secrets: (dict "root" $ "env" "DATABASE_URL"
"ref" "apiDatabaseUrl"). The Secret's name is the entry's, else secrets.existingSecret.
*/}}
{{- define "switchyard.secretEnv" -}}
{{- $ref := index .root.Values.secrets .ref -}}
{{- $name := default .root.Values.secrets.existingSecret $ref.name -}}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ required (printf "secrets.%s.name or secrets.existingSecret is required" .ref) $name | quote }}
      key: {{ required (printf "secrets.%s.key is required" .ref) $ref.key | quote }}
{{- end -}}

{{/*
The environment every process shares (Temporal, tracing, config, extraEnv):
(dict "root" $ "temporal" true); "temporal" false leaves TEMPORAL_ADDRESS out (a migration that
does not touch Temporal).
*/}}
{{- define "switchyard.commonEnv" -}}
{{- $temporal := .temporal -}}
{{- with .root -}}
- name: NODE_ENV
  value: production
- name: HOST
  value: 0.0.0.0
{{- if $temporal }}
- name: TEMPORAL_ADDRESS
  value: {{ required "temporal.address is required" .Values.temporal.address | quote }}
{{- end }}
- name: TEMPORAL_NAMESPACE
  value: {{ .Values.temporal.namespace | quote }}
- name: TEMPORAL_TASK_QUEUE
  value: {{ .Values.temporal.taskQueue | quote }}
{{- with .Values.temporal.uiUrl }}
- name: TEMPORAL_UI_URL
  value: {{ . | quote }}
{{- end }}
{{- if .Values.temporal.tls.enabled }}
- name: TEMPORAL_TLS
  value: "true"
{{- with .Values.temporal.tls.serverName }}
- name: TEMPORAL_TLS_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- if .Values.temporal.tls.existingSecret }}
- name: TEMPORAL_TLS_CLIENT_CERT_PATH
  value: /etc/switchyard/temporal-tls/tls.crt
- name: TEMPORAL_TLS_CLIENT_KEY_PATH
  value: /etc/switchyard/temporal-tls/tls.key
{{- if .Values.temporal.tls.serverCa }}
- name: TEMPORAL_TLS_SERVER_CA_CERT_PATH
  value: /etc/switchyard/temporal-tls/ca.crt
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.secrets.temporalApiKey.enabled }}
{{ include "switchyard.secretEnv" (dict "root" . "env" "TEMPORAL_API_KEY" "ref" "temporalApiKey") }}
{{- end }}
{{- with .Values.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- range $k, $v := .Values.config }}
- name: {{ $k }}
  value: {{ $v | toString | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Volumes and mounts: /tmp (tsx's compile cache; the root filesystem is read-only) and TLS. */}}
{{- define "switchyard.volumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
{{- if and .Values.temporal.tls.enabled .Values.temporal.tls.existingSecret }}
- name: temporal-tls
  secret:
    secretName: {{ .Values.temporal.tls.existingSecret }}
{{- end }}
{{- end -}}

{{- define "switchyard.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if and .Values.temporal.tls.enabled .Values.temporal.tls.existingSecret }}
- name: temporal-tls
  mountPath: /etc/switchyard/temporal-tls
  readOnly: true
{{- end }}
{{- end -}}
