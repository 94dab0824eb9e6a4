{{/* Chart name. */}}
{{- define "debate-bot.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name (63 chars max, DNS label). */}}
{{- define "debate-bot.fullname" -}}
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

{{- define "debate-bot.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "debate-bot.labels" -}}
helm.sh/chart: {{ include "debate-bot.chart" . }}
{{ include "debate-bot.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "debate-bot.selectorLabels" -}}
app.kubernetes.io/name: {{ include "debate-bot.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The Secret the pods read: the user's existingSecret, or ours. */}}
{{- define "debate-bot.secretName" -}}
{{- default (include "debate-bot.fullname" .) .Values.existingSecret }}
{{- end }}

{{/* The Secret the migration hook reads (ours exists only after pre-install hooks). */}}
{{- define "debate-bot.migrateSecretName" -}}
{{- default (printf "%s-migrate" (include "debate-bot.fullname" .)) .Values.existingSecret }}
{{- end }}

{{- define "debate-bot.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The workers' image: the agents variant when agent seats are on. */}}
{{- define "debate-bot.workerImage" -}}
{{- if .Values.agents.enabled }}
{{- printf "%s%s" (include "debate-bot.image" .) .Values.agents.tagSuffix }}
{{- else }}
{{- include "debate-bot.image" . }}
{{- end }}
{{- end }}

{{- define "debate-bot.privateKeyDir" -}}/var/run/debate-bot{{- end }}

{{/* Environment of web and worker: secret settings one by one (so the
     private-key.pem key is never projected as a variable); the rest via envFrom. */}}
{{- define "debate-bot.secretEnv" -}}
- name: DEBATE_BOT_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "debate-bot.secretName" . }}
      key: DEBATE_BOT_DATABASE_URL
{{- range list "DEBATE_BOT_APP_ID" "DEBATE_BOT_WEBHOOK_SECRET" "DEBATE_BOT_ENDPOINTS" "OPENAI_API_KEY" "ANTHROPIC_API_KEY" }}
- name: {{ . }}
  valueFrom:
    secretKeyRef:
      name: {{ include "debate-bot.secretName" $ }}
      key: {{ . }}
      optional: true
{{- end }}
- name: DEBATE_BOT_PRIVATE_KEY_FILE
  value: {{ include "debate-bot.privateKeyDir" . }}/private-key.pem
{{- end }}

{{- define "debate-bot.podSecurity" -}}
{{- with .Values.serviceAccountName }}
serviceAccountName: {{ . }}
{{- end }}
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end }}

{{/* /tmp is writable (the root filesystem is not); the key is a read-only file. */}}
{{- define "debate-bot.volumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
- name: private-key
  secret:
    secretName: {{ include "debate-bot.secretName" . }}
    defaultMode: 0440
    optional: true
    items:
      - key: private-key.pem
        path: private-key.pem
{{- end }}

{{- define "debate-bot.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: private-key
  mountPath: {{ include "debate-bot.privateKeyDir" . }}
  readOnly: true
{{- end }}
