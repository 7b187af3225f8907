{{/* The release's name prefix: "<release>-vessel", or the release name when it already says vessel. */}}
{{- define "vessel.fullname" -}}
{{- if contains "vessel" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-vessel" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "vessel.labels" -}}
app.kubernetes.io/name: vessel
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component (api, node, postgresql). */}}
{{- define "vessel.selector" -}}
app.kubernetes.io/name: vessel
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "vessel.storeSecret" -}}
{{- .Values.store.existingSecret | default (printf "%s-store" (include "vessel.fullname" .)) -}}
{{- end -}}

{{- define "vessel.e2bKeySecret" -}}
{{- .Values.e2bTokenKey.existingSecret | default (printf "%s-e2b-token-key" (include "vessel.fullname" .)) -}}
{{- end -}}

{{- define "vessel.credentialKeySecret" -}}
{{- .Values.credentialKey.existingSecret | default (printf "%s-credential-key" (include "vessel.fullname" .)) -}}
{{- end -}}

{{- define "vessel.tokenSecret" -}}
{{- .Values.nodeToken.existingSecret | default (printf "%s-node-token" (include "vessel.fullname" .)) -}}
{{- end -}}

{{/*
A generated secret that survives upgrades: the value in the Secret already
in the cluster, else a new random one. (Under `helm template` there is no
cluster, so each render draws a new one.)
*/}}
{{- define "vessel.keptSecret" -}}
{{- $s := lookup "v1" "Secret" .root.Release.Namespace .name -}}
{{- if and $s $s.data (hasKey $s.data .key) -}}
{{- index $s.data .key | b64dec -}}
{{- else -}}
{{- randAlphaNum (.length | default 40) -}}
{{- end -}}
{{- end -}}

{{/* The pod-level settings every Vessel container shares. */}}
{{- define "vessel.storeEnv" -}}
- name: VESSEL_STORE
  valueFrom:
    secretKeyRef:
      name: {{ include "vessel.storeSecret" . }}
      key: VESSEL_STORE
{{- end -}}
