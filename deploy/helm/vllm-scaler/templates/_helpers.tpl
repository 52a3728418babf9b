{{/* Names, labels, the policy and its namespaces, and the RBAC rules. */}}

{{- define "vllm-scaler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "vllm-scaler.fullname" -}}
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
A name made of the full name and a suffix ("-metrics", "-dashboard-vllm-fleet"), within the 63
characters of a DNS label: the full name is cut to leave room for the whole suffix, so that
names of one release with different suffixes stay different (cutting the joined name instead
would cut the suffixes, and two dashboards' names could end alike). Called with
(list $ "suffix").
*/}}
{{- define "vllm-scaler.suffixedName" -}}
{{- $root := index . 0 }}
{{- $suffix := index . 1 }}
{{- $room := sub 63 (len $suffix) | int }}
{{- if lt $room 1 }}
{{- fail (printf "name suffix %q: %d characters; expected at most 62" $suffix (len $suffix)) }}
{{- end }}
{{- printf "%s%s" (include "vllm-scaler.fullname" $root | trunc $room | trimSuffix "-") $suffix }}
{{- end }}

{{/* The Lease: leaderElection.leaseName, or by default the release's full name, so that
two releases (in one namespace or not) never share a Lease. */}}
{{- define "vllm-scaler.leaseName" -}}
{{- default (include "vllm-scaler.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{- define "vllm-scaler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vllm-scaler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "vllm-scaler.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "vllm-scaler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: vllm-scaler
{{- end }}

{{/* The ServiceAccount's annotations: serviceAccount.annotations and the workload identity
of prometheus.cloudAuth (IRSA's role, GKE's Google service account, Azure's client id). */}}
{{- define "vllm-scaler.serviceAccountAnnotations" -}}
{{- $c := .Values.prometheus.cloudAuth }}
{{- $own := dict }}
{{- with $c.aws.roleArn }}{{ $_ := set $own "eks.amazonaws.com/role-arn" . }}{{ end }}
{{- with $c.google.serviceAccount }}{{ $_ := set $own "iam.gke.io/gcp-service-account" . }}{{ end }}
{{- with $c.azure.clientId }}{{ $_ := set $own "azure.workload.identity/client-id" . }}{{ end }}
{{- with $c.azure.tenantId }}{{ $_ := set $own "azure.workload.identity/tenant-id" . }}{{ end }}
{{- if and $own (not .Values.serviceAccount.create) }}
{{- fail (printf "prometheus.cloudAuth: annotations %s go on the ServiceAccount, which the chart does not create (serviceAccount.create false): annotate %s yourself and leave them empty here" (keys $own | sortAlpha | join ", ") .Values.serviceAccount.name) }}
{{- end }}
{{- range $k, $v := $own }}
{{- if and (hasKey $.Values.serviceAccount.annotations $k) (ne (toString (get $.Values.serviceAccount.annotations $k)) $v) }}
{{- fail (printf "serviceAccount.annotations.%s: set by prometheus.cloudAuth too, to another value; set it in one place" $k) }}
{{- end }}
{{- end }}
{{- $all := merge $own (deepCopy .Values.serviceAccount.annotations) }}
{{- if $all }}{{ toYaml $all }}{{ end }}
{{- end }}

{{- define "vllm-scaler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "vllm-scaler.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "vllm-scaler.image" -}}
{{- /* a managed Prometheus' authentication needs the image with the cloud extras */}}
{{- $suffix := ternary "-cloud" "" (not (empty .Values.prometheus.cloudAuth.provider)) }}
{{- $tag := default (printf "%s%s" .Chart.AppVersion $suffix) .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/*
The policy file's text: values.policy is a mapping or the file's text, or, when it is left
empty ({}), the example files/example-policy.yaml. Rendering fails, naming the field, when
it is not YAML or not the shape of a policy (a mapping whose 'targets' list holds each
target's workload: vllm-scaler.workloadsOf); the controller checks the rest at start
(`vllm-scaler check-policy` before installing).
*/}}
{{- define "vllm-scaler.policyText" -}}
{{- $text := "" }}
{{- if kindIs "string" .Values.policy }}
{{- $text = .Values.policy }}
{{- else if .Values.policy }}
{{- $text = toYaml .Values.policy }}
{{- else }}
{{- /* No policy given: the example, kept out of values.yaml so that Helm's merge of a
user's mapping with the chart's values never fills in the example's keys. */}}
{{- $text = .Files.Get "files/example-policy.yaml" }}
{{- end }}
{{- if not (trim $text) }}
{{- fail "policy: empty; expected the policy file, a mapping with 'targets' (--set-file policy=my-policy.yaml)" }}
{{- end }}
{{- $policy := fromYaml $text }}
{{- if hasKey $policy "Error" }}
{{- fail (printf "policy: not a YAML mapping: %s" $policy.Error) }}
{{- end }}
{{- if not (hasKey $policy "targets") }}
{{- fail (printf "policy: no 'targets' (it has %s); expected a mapping with 'targets', the list of targets" (keys $policy | sortAlpha | join ", ")) }}
{{- end }}
{{- $targets := $policy.targets }}
{{- if not (kindIs "slice" $targets) }}
{{- fail (printf "policy.targets: value %s: expected a list of targets" (toJson $targets)) }}
{{- end }}
{{- if and (not $targets) (not .Values.watchResources) }}
{{- fail "policy.targets: empty; expected at least one target (or watchResources, to scale the VLLMAutoscaler resources only)" }}
{{- end }}
{{- $_ := include "vllm-scaler.workloadsOf" $targets }}
{{- $text }}
{{- end }}

{{/*
The workload of each of the policy's targets (a list), as a JSON list of mappings: apiVersion,
kind, name, namespace and plural (if given), its index in the list and the field it was
written under (field: the reference's key, for messages). A target names its workload as a
VLLMAutoscaler does (namespace and scaleTargetRef, camelCase: what deploy/examples and
`vllm-scaler as-resources` write; scale_target_ref too) or as the first releases did
(workload, with its namespace), as the policy file reads both (scaler/config/policy.py).
Rendering fails naming the field of a target whose workload cannot be told.
*/}}
{{- define "vllm-scaler.workloadsOf" -}}
{{- $out := list }}
{{- range $i, $t := . }}
{{- if not (kindIs "map" $t) }}
{{- fail (printf "policy.targets[%d]: value %s: expected a mapping with 'namespace' and 'scaleTargetRef' (or 'workload')" $i (toJson $t)) }}
{{- end }}
{{- $ref := "" }}
{{- range $k := list "scaleTargetRef" "scale_target_ref" }}
{{- if and (not $ref) (hasKey $t $k) }}{{ $ref = $k }}{{ end }}
{{- end }}
{{- if or $ref (hasKey $t "namespace") }}
{{- if hasKey $t "workload" }}
{{- fail (printf "policy.targets[%d].%s: expected the workload either as workload (with its namespace) or as namespace and scaleTargetRef, not both" $i (default "namespace" $ref)) }}
{{- end }}
{{- if not $ref }}
{{- fail (printf "policy.targets[%d].scaleTargetRef: missing; expected a mapping with apiVersion, kind and name (the workload, in the target's namespace)" $i) }}
{{- end }}
{{- $w := get $t $ref }}
{{- if not (kindIs "map" $w) }}
{{- fail (printf "policy.targets[%d].%s: value %s: expected a mapping with apiVersion, kind and name" $i $ref (toJson $w)) }}
{{- end }}
{{- range $k := list "apiVersion" "kind" "name" }}
{{- if not (get $w $k) }}
{{- fail (printf "policy.targets[%d].%s.%s: missing" $i $ref $k) }}
{{- end }}
{{- end }}
{{- if hasKey $w "namespace" }}
{{- fail (printf "policy.targets[%d].%s.namespace: expected none here: the workload is in the target's namespace, given beside %s" $i $ref $ref) }}
{{- end }}
{{- if not (get $t "namespace") }}
{{- fail (printf "policy.targets[%d].namespace: missing; expected the workload's namespace beside %s" $i $ref) }}
{{- end }}
{{- $out = append $out (merge (dict "namespace" (get $t "namespace") "index" $i "field" $ref) $w) }}
{{- else }}
{{- if not (hasKey $t "workload") }}
{{- fail (printf "policy.targets[%d]: no workload; expected namespace and scaleTargetRef (a mapping with apiVersion, kind and name), or workload (a mapping with apiVersion, kind, namespace and name)" $i) }}
{{- end }}
{{- $w := get $t "workload" }}
{{- if not (kindIs "map" $w) }}
{{- fail (printf "policy.targets[%d].workload: value %s: expected a mapping with apiVersion, kind, namespace and name" $i (toJson $w)) }}
{{- end }}
{{- range $k := list "apiVersion" "kind" "namespace" "name" }}
{{- if not (get $w $k) }}
{{- fail (printf "policy.targets[%d].workload.%s: missing" $i $k) }}
{{- end }}
{{- end }}
{{- $out = append $out (merge (dict "index" $i "field" "workload") $w) }}
{{- end }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* The namespaces of the policy's targets, sorted and unique, joined by commas. */}}
{{- define "vllm-scaler.targetNamespaces" -}}
{{- $policy := include "vllm-scaler.policyText" . | fromYaml }}
{{- if hasKey $policy "Error" }}
{{- fail (printf "policy: not a YAML mapping: %s" $policy.Error) }}
{{- end }}
{{- $namespaces := list }}
{{- range $w := include "vllm-scaler.workloadsOf" $policy.targets | fromJsonArray }}
{{- $namespaces = append $namespaces $w.namespace }}
{{- end }}
{{- if not $namespaces }}
{{- fail "policy.targets: empty; rbac.scope=namespaces needs at least one target" }}
{{- end }}
{{- $namespaces | uniq | sortAlpha | join "," }}
{{- end }}

{{/*
The kinds the policy knows without a plural (scaler/config/policy.py's KNOWN_PLURALS and
KNOWN_API_VERSIONS; a test keeps them equal): their group and resource. workloadRules grants
them in every namespace it covers; any other kind of a target is granted from the target.
*/}}
{{- define "vllm-scaler.knownKinds" -}}
Deployment: {group: apps, plural: deployments}
StatefulSet: {group: apps, plural: statefulsets}
ReplicaSet: {group: apps, plural: replicasets}
LeaderWorkerSet: {group: leaderworkerset.x-k8s.io, plural: leaderworkersets}
Rollout: {group: argoproj.io, plural: rollouts}
{{- end }}

{{/*
The kinds of the policy's targets that the rules for the known kinds do not cover (a custom
resource with a scale subresource: Grove's PodCliqueScalingGroup, KServe's InferenceService,
...), as a JSON list of {group, plural}, sorted and unique; with (list $ namespace), those
of the targets in that namespace only, with (list $ ""), of every target. Rendering fails,
naming the target and the value to set, for a kind whose resource it cannot tell (no plural)
and for a kind of the core group, which the controller cannot scale (it calls the scale
subresource of a named API group).
*/}}
{{- define "vllm-scaler.targetKinds" -}}
{{- $root := index . 0 }}
{{- $only := index . 1 }}
{{- $known := include "vllm-scaler.knownKinds" $root | fromYaml }}
{{- $builtin := dict }}
{{- range $_, $k := $known }}
{{- $_ := set $builtin (printf "%s/%s" $k.group $k.plural) true }}
{{- end }}
{{- $policy := include "vllm-scaler.policyText" $root | fromYaml }}
{{- $found := dict }}
{{- range $w := include "vllm-scaler.workloadsOf" $policy.targets | fromJsonArray }}
{{- $i := int $w.index }}
{{- if or (not $only) (eq (toString $w.namespace) $only) }}
{{- $apiVersion := toString $w.apiVersion }}
{{- $group := "" }}
{{- if contains "/" $apiVersion }}
{{- $group = first (splitList "/" $apiVersion) }}
{{- end }}
{{- if not $group }}
{{- fail (printf "policy.targets[%d].%s: kind %v of apiVersion %q is in Kubernetes' core group, which vllm-scaler does not scale (it reads and writes the scale subresource of a named API group, such as apps/v1); expected the apiVersion of an API group" $i $w.field $w.kind $apiVersion) }}
{{- end }}
{{- $plural := toString (default "" $w.plural) }}
{{- if and (not $plural) (hasKey $known (toString $w.kind)) }}
{{- $plural = (get $known (toString $w.kind)).plural }}
{{- end }}
{{- if not $plural }}
{{- fail (printf "policy.targets[%d].%s: kind %v of %s names no plural, so the chart cannot grant the controller access to it: set policy.targets[%d].%s.plural to its resource name (kubectl api-resources --api-group=%s), which the rendered RBAC grants (get and patch on <plural>/scale, get on <plural>)" $i $w.field $w.kind $apiVersion $i $w.field $group) }}
{{- end }}
{{- $key := printf "%s/%s" $group $plural }}
{{- if not (hasKey $builtin $key) }}
{{- $_ := set $found $key (dict "group" $group "plural" $plural) }}
{{- end }}
{{- end }}
{{- end }}
{{- $out := list }}
{{- range $key := keys $found | sortAlpha }}
{{- $out = append $out (get $found $key) }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/*
The calls the controller makes on the targets' namespaces, exactly (tests/deploy checks them
against the calls recorded on the Kubernetes API stand-in), with (list $ namespace): the
known kinds everywhere, and the other kinds of the policy's targets (in that namespace only,
or in all for ""). Recommend-only: read verbs only.
*/}}
{{- define "vllm-scaler.workloadRules" -}}
{{- $root := index . 0 }}
{{- $write := not $root.Values.recommendOnly -}}
{{- $scaleVerbs := ternary (list "get" "patch") (list "get") $write | toJson }}
# Read the scaled workloads' pods (readiness, age, termination); before a scale-down, mark the
# idlest ones with controller.kubernetes.io/pod-deletion-cost (a merge patch of that
# annotation only).
- apiGroups: [""]
  resources: ["pods"]
  verbs: {{ ternary (list "list" "patch") (list "list") $write | toJson }}
# Read the workloads themselves for the vllm-scaler.io/paused and pinned-replicas annotations
# (never written).
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets", "replicasets"]
  verbs: ["get"]
- apiGroups: ["leaderworkerset.x-k8s.io"]
  resources: ["leaderworkersets"]
  verbs: ["get"]
- apiGroups: ["argoproj.io"]
  resources: ["rollouts"]
  verbs: ["get"]
# Other autoscalers on the same workload (conflict: recommend only).
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["list"]
- apiGroups: ["keda.sh"]
  resources: ["scaledobjects"]
  verbs: ["list"]
# Read and write replicas through the scale subresource only, never the workload itself.
- apiGroups: ["apps"]
  resources: ["deployments/scale", "statefulsets/scale", "replicasets/scale"]
  verbs: {{ $scaleVerbs }}
- apiGroups: ["leaderworkerset.x-k8s.io"]
  resources: ["leaderworkersets/scale"]
  verbs: {{ $scaleVerbs }}
- apiGroups: ["argoproj.io"]
  resources: ["rollouts/scale"]
  verbs: {{ $scaleVerbs }}
{{- range $k := include "vllm-scaler.targetKinds" . | fromJsonArray }}
# A kind of the policy's targets ({{ $k.plural }}.{{ $k.group }}): its annotations and its
# scale subresource, as for the kinds above.
- apiGroups: [{{ $k.group | quote }}]
  resources: [{{ $k.plural | quote }}]
  verbs: ["get"]
- apiGroups: [{{ $k.group | quote }}]
  resources: [{{ printf "%s/scale" $k.plural | quote }}]
  verbs: {{ $scaleVerbs }}
{{- end }}
{{- if $root.Values.watchResources }}
# The VLLMAutoscaler resources (watched) and their status (written by the leader).
- apiGroups: ["autoscaling.vllm-scaler.io"]
  resources: ["vllmautoscalers"]
  verbs: ["list", "watch"]
{{- if $write }}
- apiGroups: ["autoscaling.vllm-scaler.io"]
  resources: ["vllmautoscalers/status"]
  verbs: ["patch"]
{{- end }}
{{- end }}
{{- if $write }}
# Events on the targets, as HPA writes them (kubectl describe shows them).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end }}
{{- end }}

{{/*
The environment variables the Deployment's container gets from the chart, each with the
value it comes from ("" when it is no value's: the pod's own), as YAML: extraEnv may not set
them.
*/}}
{{- define "vllm-scaler.chartEnv" -}}
VLLM_SCALER_POLICY_FILE: policy
VLLM_SCALER_PROMETHEUS_URL: prometheus.url (or prometheus.urlSecret)
VLLM_SCALER_PROMETHEUS_TIMEOUT_SECONDS: prometheus.timeoutSeconds
VLLM_SCALER_PROMETHEUS_BEARER_TOKEN_FILE: prometheus.bearerTokenSecret
VLLM_SCALER_PROMETHEUS_CA_FILE: prometheus.tls.caSecret (or prometheus.tls.caConfigMap)
VLLM_SCALER_PROMETHEUS_CLIENT_CERT_FILE: prometheus.tls.clientCertSecret
VLLM_SCALER_PROMETHEUS_CLIENT_KEY_FILE: prometheus.tls.clientCertSecret
VLLM_SCALER_PROMETHEUS_HEADERS: prometheus.headers (or prometheus.headersSecret)
VLLM_SCALER_PROMETHEUS_CLOUD_AUTH: prometheus.cloudAuth.provider
VLLM_SCALER_PROMETHEUS_AWS_REGION: prometheus.cloudAuth.aws.region
VLLM_SCALER_PROMETHEUS_AWS_SERVICE: prometheus.cloudAuth.aws.service
VLLM_SCALER_PROMETHEUS_CLOUD_AUTH_SCOPE: prometheus.cloudAuth.scope
VLLM_SCALER_CONTROL_INTERVAL_SECONDS: controlIntervalSeconds
VLLM_SCALER_METRICS_PORT: metricsPort
VLLM_SCALER_LOG_FORMAT: logFormat
VLLM_SCALER_LOG_LEVEL: logLevel
VLLM_SCALER_IN_CLUSTER: ""
VLLM_SCALER_WATCH_RESOURCES: watchResources
VLLM_SCALER_RESOURCE_NAMESPACES: watchResources (and rbac.scope)
VLLM_SCALER_LEADER_ELECTION: leaderElection.enabled (and recommendOnly)
VLLM_SCALER_LEASE_NAME: leaderElection.leaseName
VLLM_SCALER_LEASE_DURATION_SECONDS: leaderElection.leaseDurationSeconds
VLLM_SCALER_LEASE_RENEW_DEADLINE_SECONDS: leaderElection.renewDeadlineSeconds
VLLM_SCALER_LEASE_RETRY_PERIOD_SECONDS: leaderElection.retryPeriodSeconds
POD_NAMESPACE: ""
POD_NAME: ""
{{- end }}

{{/*
The options of `run` whose settings the chart sets (each with the value it comes from, as
chartEnv): extraArgs may not give them. tests/deploy keeps it equal to the options of the
settings of chartEnv.
*/}}
{{- define "vllm-scaler.chartOptions" -}}
--dry-run: recommendOnly
--policy-file: policy
--policy: policy
--prometheus-url: prometheus.url (or prometheus.urlSecret)
--prometheus-timeout-seconds: prometheus.timeoutSeconds
--prometheus-bearer-token-file: prometheus.bearerTokenSecret
--prometheus-ca-file: prometheus.tls.caSecret (or prometheus.tls.caConfigMap)
--prometheus-client-cert-file: prometheus.tls.clientCertSecret
--prometheus-client-key-file: prometheus.tls.clientCertSecret
--prometheus-headers: prometheus.headers (or prometheus.headersSecret)
--prometheus-cloud-auth: prometheus.cloudAuth.provider
--prometheus-aws-region: prometheus.cloudAuth.aws.region
--prometheus-aws-service: prometheus.cloudAuth.aws.service
--prometheus-cloud-auth-scope: prometheus.cloudAuth.scope
--interval: controlIntervalSeconds
--control-interval-seconds: controlIntervalSeconds
--metrics-port: metricsPort
--log-format: logFormat
--log-level: logLevel
--in-cluster: the pod itself
--watch-resources: watchResources
--resource-namespaces: watchResources (and rbac.scope)
--no-in-cluster: the pod itself
--leader-election: leaderElection.enabled (and recommendOnly)
--no-leader-election: leaderElection.enabled (and recommendOnly)
--lease-name: leaderElection.leaseName
--lease-duration-seconds: leaderElection.leaseDurationSeconds
--lease-renew-deadline-seconds: leaderElection.renewDeadlineSeconds
--lease-retry-period-seconds: leaderElection.retryPeriodSeconds
{{- end }}
