{{/*
The chart name, or nameOverride; truncated to 63 characters (the DNS label limit of
Kubernetes names and label values).
*/}}
{{- define "benchrun.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name prefix of every resource: fullnameOverride, or <release>-<name> (just the
release name when it already contains the chart name). Truncated to 63 characters.
*/}}
{{- define "benchrun.fullname" -}}
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

{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "benchrun.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels: stable for the life of a release (Deployment selectors are immutable).
*/}}
{{- define "benchrun.selectorLabels" -}}
app.kubernetes.io/name: {{ include "benchrun.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/*
Standard labels on every resource the chart creates.
*/}}
{{- define "benchrun.labels" -}}
helm.sh/chart: {{ include "benchrun.chart" . }}
{{ include "benchrun.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: benchrun
{{- end }}

{{/*
Name of the operator's ServiceAccount.
*/}}
{{- define "benchrun.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "benchrun.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Name of the Secret holding the per-run token key: the user's existingKeySecret, or the one
this chart creates.
*/}}
{{- define "benchrun.keySecretName" -}}
{{- if .Values.operator.existingKeySecret }}
{{- .Values.operator.existingKeySecret }}
{{- else }}
{{- printf "%s-key" (include "benchrun.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/*
Operator image reference; the tag defaults to the chart's appVersion.
*/}}
{{- define "benchrun.operatorImage" -}}
{{- printf "%s:%s" .Values.operator.image.repository (.Values.operator.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
Default worker image reference; the tag defaults to the chart's appVersion.
*/}}
{{- define "benchrun.workerImage" -}}
{{- printf "%s:%s" .Values.operator.workerImage.repository (.Values.operator.workerImage.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
"true" when leader election is on (more than one replica, or leaderElection.enabled), else "".
*/}}
{{- define "benchrun.leaderElect" -}}
{{- if or (gt (int .Values.operator.replicas) 1) .Values.leaderElection.enabled }}true{{ end }}
{{- end }}

{{/*
Namespace the dashboard ConfigMap goes to.
*/}}
{{- define "benchrun.dashboardNamespace" -}}
{{- default .Release.Namespace .Values.dashboards.namespace }}
{{- end }}

{{/*
RBAC rules on namespaced resources, the same whether granted by the ClusterRole (all
namespaces) or by a Role in watchNamespace. Exactly the list at the top of
operator/src/reconcile.rs. Secrets: create only (the per-run token Secret, deleted by garbage
collection through its owner reference); never get/list/watch, so the credentials that runs
reference stay unreadable to the operator.
*/}}
{{- define "benchrun.namespacedRules" -}}
- apiGroups: ["benchrun.dev"]
  resources: ["benchmarkruns"]
  # patch: the operator's finalizer (benchrun.dev/cleanup), added and removed.
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
- apiGroups: ["benchrun.dev"]
  resources: ["benchmarkruns/status"]
  verbs: ["get", "patch"]
# BenchmarkSchedules: read and watched; only their status is written (the runs they make are
# created and pruned under the benchmarkruns rule above).
- apiGroups: ["benchrun.dev"]
  resources: ["benchmarkschedules"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["benchrun.dev"]
  resources: ["benchmarkschedules/status"]
  verbs: ["patch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  # get: a claim that exists already is checked to be the run's, not an earlier run's.
  # list, watch: a control-plane run's claims, by label (their Bound and deletion seen as
  # watch events; leftovers swept). patch: a control-plane run's `expand` raises its own
  # claims' request.
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
# A control-plane run's `snapshot`: a VolumeSnapshot of its own claim, watched by label until
# ready, then deleted (and swept). Namespaced, as the claims are.
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshots"]
  verbs: ["list", "watch", "create", "delete"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "create", "patch"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
# The Events of an unschedulable worker pod, read by field selector: an autoscaler's
# TriggeredScaleUp / NotTriggerScaleUp / Nominated. list only (no watch, no get).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["list"]
{{- if .Values.workerNetworkPolicy.enabled }}
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["create"]
{{- end }}
{{- end }}

{{/*
The operator pods' selector labels as key=value,key=value (BENCHRUN_OPERATOR_POD_LABELS).
*/}}
{{- define "benchrun.selectorLabelPairs" -}}
app.kubernetes.io/name={{ include "benchrun.name" . }},app.kubernetes.io/instance={{ .Release.Name }},app.kubernetes.io/component=operator
{{- end }}

{{/*
RBAC rule on nodes (cluster-scoped): list, for perNode placement.
*/}}
{{- define "benchrun.storageRules" -}}
# Control-plane runs (spec.controlPlane): a claim's PersistentVolume seen created and deleted
# and its VolumeAttachment attached and detached (watch events), and whether its StorageClass
# binds on first consumer. Read-only.
- apiGroups: [""]
  resources: ["persistentvolumes"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["storage.k8s.io"]
  resources: ["storageclasses"]
  verbs: ["get"]
- apiGroups: ["storage.k8s.io"]
  resources: ["volumeattachments"]
  verbs: ["list", "watch"]
{{- end }}

{{- define "benchrun.nodeRules" -}}
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["list"]
{{- end }}
