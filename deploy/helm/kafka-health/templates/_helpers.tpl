{{/* The chart's name, the release's full name (at most 63 characters, a DNS label) and labels. */}}
{{- define "kafka-health.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kafka-health.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kafka-health.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kafka-health.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kafka-health.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kafka-health.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "kafka-health.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kafka-health.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kafka-health.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Where the chart mounts what it configures. */}}
{{- define "kafka-health.configDir" -}}/etc/kafka-health{{- end }}
{{- define "kafka-health.rulesDir" -}}/etc/kafka-health/rules{{- end }}
{{- define "kafka-health.alertingDir" -}}/etc/kafka-health/alerting{{- end }}
{{- define "kafka-health.stateDir" -}}/var/lib/kafka-health{{- end }}

{{- define "kafka-health.configMapName" -}}
{{- default (include "kafka-health.fullname" .) .Values.config.existingConfigMap }}
{{- end }}
{{- define "kafka-health.rulesConfigMapName" -}}
{{- default (printf "%s-rules" (include "kafka-health.fullname" .)) .Values.rules.existingConfigMap }}
{{- end }}
{{- define "kafka-health.alertingConfigMapName" -}}
{{- default (printf "%s-alerting" (include "kafka-health.fullname" .)) .Values.alerting.existingConfigMap }}
{{- end }}
{{- define "kafka-health.hasRules" -}}
{{- if or .Values.rules.existingConfigMap .Values.rules.files }}true{{ end }}
{{- end }}
{{- define "kafka-health.hasAlerting" -}}
{{- if or .Values.alerting.existingConfigMap .Values.alerting.routing }}true{{ end }}
{{- end }}

{{/* The database URL, from the Secret named in `database` (never a value of the chart). */}}
{{- define "kafka-health.databaseEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "database.existingSecret: name the Secret holding the PostgreSQL URL (kubectl create secret generic kafka-health-database --from-literal=url=postgresql+psycopg://user:password@host:5432/db)" .Values.database.existingSecret }}
      key: {{ required "database.urlKey: the key of database.existingSecret that holds the URL" .Values.database.urlKey }}
{{- end }}

{{- define "kafka-health.podSecurity" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end }}
