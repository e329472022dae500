{{/* Names: "<release>-partnerstream", or the release name when it already contains the chart name. */}}
{{- define "partnerstream.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "partnerstream.fullname" -}}
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

{{/* The Secret that holds the click-id keys the chart makes when none is given. */}}
{{- define "partnerstream.clickIDSecret" -}}
{{- printf "%s-click-ids" (include "partnerstream.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Where the Secret of kafka.tls is mounted in the components that talk to Kafka. */}}
{{- define "partnerstream.kafkaTLSDir" -}}
/etc/partnerstream/kafka-tls
{{- end }}

{{/* The name of a component's objects: (dict "root" $ "component" "api"). */}}
{{- define "partnerstream.componentName" -}}
{{- printf "%s-%s" (include "partnerstream.fullname" .root | trunc 52 | trimSuffix "-") .component }}
{{- end }}

{{/*
Namespace of the Webhook resources, their Secrets and the components' Roles: by default one
of its own beside the release namespace, so that the Secret rights of deliver, the controller
and the api cover the signing Secrets and not the release's own (docs/helm.md, "RBAC").
*/}}
{{- define "partnerstream.webhookNamespace" -}}
{{- default (printf "%s-webhooks" .Release.Namespace | trunc 63 | trimSuffix "-") .Values.webhookNamespace }}
{{- end }}

{{- define "partnerstream.selectorLabels" -}}
app.kubernetes.io/name: {{ include "partnerstream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "partnerstream.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "partnerstream.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: partnerstream
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels and selector labels of one component: (dict "root" $ "component" "api"). */}}
{{- define "partnerstream.componentSelectorLabels" -}}
{{ include "partnerstream.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "partnerstream.componentLabels" -}}
{{ include "partnerstream.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "partnerstream.image" -}}
{{- $img := .Values.image }}
{{- if $img.digest }}
{{- printf "%s@%s" $img.repository $img.digest }}
{{- else }}
{{- printf "%s:%s" $img.repository (default .Chart.AppVersion $img.tag) }}
{{- end }}
{{- end }}

{{/*
The settings the chart passes to the components, once for all of them: the environment
variable (named as in the README's settings table), the commands that take it, and either a
plain value or a setting object ({value, secretName, secretKey}; the Secret wins).
*/}}
{{- define "partnerstream.settings" -}}
{{- $v := .Values -}}
{{- $all := list "api" "ingest" "deliver" "controller" "migrate" -}}
- {env: PARTNERSTREAM_LOG_LEVEL, commands: {{ toJson $all }}, value: {{ toJson $v.logLevel }}}
- {env: PARTNERSTREAM_METRICS_ADDR, commands: {{ toJson $all }}, value: {{ printf ":%d" (int64 $v.metricsPort) | toJson }}}
- {env: PARTNERSTREAM_SHUTDOWN_TIMEOUT, commands: {{ toJson $all }}, value: {{ printf "%ds" (int64 $v.shutdownTimeoutSeconds) | toJson }}}
- {env: PARTNERSTREAM_POSTGRES_URL, commands: [api, deliver, migrate], setting: {{ toJson $v.postgres.url }}}
- {env: PARTNERSTREAM_CLICKHOUSE_ADDR, commands: [api, ingest, migrate], setting: {{ toJson $v.clickhouse.addr }}}
- {env: PARTNERSTREAM_CLICKHOUSE_DATABASE, commands: [api, ingest, migrate], setting: {{ toJson $v.clickhouse.database }}}
- {env: PARTNERSTREAM_CLICKHOUSE_USERNAME, commands: [api, ingest, migrate], setting: {{ toJson $v.clickhouse.username }}}
- {env: PARTNERSTREAM_CLICKHOUSE_PASSWORD, commands: [api, ingest, migrate], setting: {{ toJson $v.clickhouse.password }}}
- {env: PARTNERSTREAM_CLICKHOUSE_CLUSTER, commands: [api, ingest, migrate], value: {{ toJson $v.clickhouse.cluster }}}
- {env: PARTNERSTREAM_KAFKA_BROKERS, commands: [api, ingest, deliver], setting: {{ toJson $v.kafka.brokers }}}
- {env: PARTNERSTREAM_KAFKA_PARTITIONS, commands: [api, ingest, deliver], value: {{ int64 $v.kafka.partitions | toString | toJson }}}
- {env: PARTNERSTREAM_KAFKA_REPLICATION_FACTOR, commands: [api, ingest, deliver], value: {{ int64 $v.kafka.replicationFactor | toString | toJson }}}
- {env: PARTNERSTREAM_KAFKA_MIN_INSYNC_REPLICAS, commands: [api, ingest, deliver], value: {{ int64 $v.kafka.minInsyncReplicas | toString | toJson }}}
- {env: PARTNERSTREAM_KAFKA_RETENTION, commands: [api, ingest, deliver], value: {{ toJson $v.kafka.retention }}}
- {env: PARTNERSTREAM_KAFKA_COMPRESSION, commands: [api, ingest, deliver], value: {{ toJson $v.kafka.compression }}}
- {env: PARTNERSTREAM_KAFKA_TLS, commands: [api, ingest, deliver], value: {{ ternary "true" "" $v.kafka.tls.enabled | toJson }}}
- {env: PARTNERSTREAM_KAFKA_TLS_SERVER_NAME, commands: [api, ingest, deliver], value: {{ toJson $v.kafka.tls.serverName }}}
{{- with $v.kafka.tls }}
{{- if .secretName }}
{{- range $flag, $key := dict "CA" .caKey "CERT" .certKey "KEY" .keyKey }}
{{- if $key }}
- {env: PARTNERSTREAM_KAFKA_TLS_{{ $flag }}_FILE, commands: [api, ingest, deliver], value: {{ printf "%s/%s" (include "partnerstream.kafkaTLSDir" $) $key | toJson }}}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
- {env: PARTNERSTREAM_KAFKA_SASL_MECHANISM, commands: [api, ingest, deliver], value: {{ toJson $v.kafka.sasl.mechanism }}}
- {env: PARTNERSTREAM_KAFKA_SASL_USERNAME, commands: [api, ingest, deliver], setting: {{ toJson $v.kafka.sasl.username }}}
- {env: PARTNERSTREAM_KAFKA_SASL_PASSWORD, commands: [api, ingest, deliver], setting: {{ toJson $v.kafka.sasl.password }}}
- {env: PARTNERSTREAM_NAMESPACE, commands: [api, controller, deliver], value: {{ include "partnerstream.webhookNamespace" . | toJson }}}
- {env: PARTNERSTREAM_LEADER_ELECT, commands: [controller], value: "true"}
- {env: PARTNERSTREAM_HTTP_ADDR, commands: [api], value: {{ printf ":%d" (int64 $v.api.port) | toJson }}}
- {env: PARTNERSTREAM_BASE_URL, commands: [api], value: {{ toJson $v.api.baseURL }}}
- {env: PARTNERSTREAM_CLICK_MODE, commands: [api], value: {{ toJson $v.api.clickMode }}}
- {env: PARTNERSTREAM_CLICK_SPOOL_DIR, commands: [api], value: /var/lib/partnerstream/spool}
- {env: PARTNERSTREAM_CLICK_SPOOL_MAX_BYTES, commands: [api], value: {{ int64 $v.api.clickSpool.maxBytes | toString | toJson }}}
- {env: PARTNERSTREAM_RATE_LIMIT_REQUESTS, commands: [api], value: {{ int64 $v.api.rateLimitRequests | toString | toJson }}}
- {env: PARTNERSTREAM_RATE_LIMIT_WINDOW, commands: [api], value: {{ toJson $v.api.rateLimitWindow }}}
- {env: PARTNERSTREAM_POSTBACK_RATE_LIMIT_REQUESTS, commands: [api], value: {{ int64 $v.api.postbackRateLimitRequests | toString | toJson }}}
- {env: PARTNERSTREAM_SCRIPT_RATE_LIMIT_REQUESTS, commands: [api], value: {{ int64 $v.api.scriptRateLimitRequests | toString | toJson }}}
- {env: PARTNERSTREAM_SCRIPT_ADDRESS_RATE_LIMIT_REQUESTS, commands: [api], value: {{ int64 $v.api.scriptAddressRateLimitRequests | toString | toJson }}}
- {env: PARTNERSTREAM_FAILED_AUTH_LIMIT, commands: [api], value: {{ int64 $v.api.failedAuthLimit | toString | toJson }}}
- {env: PARTNERSTREAM_OPERATOR_COMPANIES, commands: [api], value: {{ join "," $v.api.operatorCompanies | toJson }}}
- {env: PARTNERSTREAM_TRUSTED_PROXIES, commands: [api], value: {{ join "," $v.api.trustedProxies | toJson }}}
- {env: PARTNERSTREAM_PROXY_PROTOCOL, commands: [api], value: {{ ternary "true" "" $v.api.proxyProtocol | toJson }}}
- {env: PARTNERSTREAM_SESSION_KEYS, commands: [api], setting: {{ toJson $v.session.keys }}}
{{- $clickIDKeys := $v.clickIDs.keys }}
{{- if not $clickIDKeys.secretName }}
{{- $clickIDKeys = dict "secretName" (include "partnerstream.clickIDSecret" .) "secretKey" "keys" }}
{{- end }}
- {env: PARTNERSTREAM_CLICK_ID_KEYS, commands: [api], setting: {{ toJson $clickIDKeys }}}
- {env: PARTNERSTREAM_SESSION_ACCESS_TTL, commands: [api], value: {{ toJson $v.session.accessTTL }}}
- {env: PARTNERSTREAM_SESSION_REFRESH_TTL, commands: [api], value: {{ toJson $v.session.refreshTTL }}}
- {env: PARTNERSTREAM_SMTP_HOST, commands: [api], setting: {{ toJson $v.smtp.host }}}
- {env: PARTNERSTREAM_SMTP_PORT, commands: [api], value: {{ int64 $v.smtp.port | toString | toJson }}}
- {env: PARTNERSTREAM_SMTP_TLS, commands: [api], value: {{ toJson $v.smtp.tls }}}
- {env: PARTNERSTREAM_SMTP_FROM, commands: [api], value: {{ toJson $v.smtp.from }}}
- {env: PARTNERSTREAM_SMTP_USERNAME, commands: [api], setting: {{ toJson $v.smtp.username }}}
- {env: PARTNERSTREAM_SMTP_PASSWORD, commands: [api], setting: {{ toJson $v.smtp.password }}}
- {env: PARTNERSTREAM_OAUTH_GOOGLE_CLIENT_ID, commands: [api], setting: {{ toJson $v.oauth.google.clientID }}}
- {env: PARTNERSTREAM_OAUTH_GOOGLE_CLIENT_SECRET, commands: [api], setting: {{ toJson $v.oauth.google.clientSecret }}}
- {env: PARTNERSTREAM_OAUTH_GOOGLE_ISSUER, commands: [api], value: {{ toJson $v.oauth.google.issuer }}}
- {env: PARTNERSTREAM_OAUTH_LINKEDIN_CLIENT_ID, commands: [api], setting: {{ toJson $v.oauth.linkedin.clientID }}}
- {env: PARTNERSTREAM_OAUTH_LINKEDIN_CLIENT_SECRET, commands: [api], setting: {{ toJson $v.oauth.linkedin.clientSecret }}}
- {env: PARTNERSTREAM_OAUTH_LINKEDIN_ISSUER, commands: [api], value: {{ toJson $v.oauth.linkedin.issuer }}}
- {env: PARTNERSTREAM_INGEST_BATCH_SIZE, commands: [ingest], value: {{ int64 $v.ingest.batchSize | toString | toJson }}}
- {env: PARTNERSTREAM_INGEST_BATCH_INTERVAL, commands: [ingest], value: {{ toJson $v.ingest.batchInterval }}}
- {env: PARTNERSTREAM_INGEST_RAW_RETENTION_MONTHS, commands: [ingest], value: {{ int64 $v.ingest.rawRetentionMonths | toString | toJson }}}
{{- if $v.ingest.geoip.file }}
- {env: PARTNERSTREAM_GEOIP_DB, commands: [ingest], value: {{ printf "/etc/partnerstream/geoip/%s" $v.ingest.geoip.file | toJson }}}
{{- end }}
{{- if $v.ingest.geoip.asnFile }}
- {env: PARTNERSTREAM_ASN_DB, commands: [ingest], value: {{ printf "/etc/partnerstream/geoip/%s" $v.ingest.geoip.asnFile | toJson }}}
{{- end }}
{{- if $v.ingest.hostingASNs }}
- {env: PARTNERSTREAM_HOSTING_ASNS, commands: [ingest], value: "/etc/partnerstream/hosting-asns/hosting-asns.txt"}
{{- end }}
- {env: PARTNERSTREAM_KEEP_FULL_IP, commands: [ingest], value: {{ ternary "true" "false" $v.ingest.keepFullIP | toJson }}}
- {env: PARTNERSTREAM_DELIVER_WORKERS, commands: [deliver], value: {{ int64 $v.deliver.workers | toString | toJson }}}
- {env: PARTNERSTREAM_DELIVER_PER_TARGET, commands: [deliver], value: {{ int64 $v.deliver.perTarget | toString | toJson }}}
- {env: PARTNERSTREAM_DELIVER_CLAIM_BATCH, commands: [deliver], value: {{ int64 $v.deliver.claimBatch | toString | toJson }}}
- {env: PARTNERSTREAM_DELIVER_LEASE, commands: [deliver], value: {{ toJson $v.deliver.lease }}}
- {env: PARTNERSTREAM_DELIVER_DISABLE_AFTER_DAYS, commands: [deliver], value: {{ int64 $v.deliver.disableAfterDays | toString | toJson }}}
- {env: PARTNERSTREAM_DELIVER_RETENTION_DAYS, commands: [deliver], value: {{ int64 $v.deliver.retentionDays | toString | toJson }}}
- {env: PARTNERSTREAM_EGRESS_ALLOW_CIDRS, commands: [api, deliver], value: {{ join "," $v.egress.allowCIDRs | toJson }}}
{{- if or $v.egress.caBundle.configMapName $v.egress.caBundle.secretName }}
- {env: PARTNERSTREAM_EGRESS_CA_FILE, commands: [api, deliver], value: {{ printf "/etc/partnerstream/egress-ca/%s" $v.egress.caBundle.key | toJson }}}
{{- end }}
{{- end }}

{{/*
The env list of one command's container: (dict "root" $ "command" "api"). Empty values are
left out, so the binary's defaults apply.
*/}}
{{- define "partnerstream.env" -}}
{{- range (include "partnerstream.settings" .root | fromYamlArray) }}
{{- if has $.command .commands }}
{{- if .setting }}
{{- if .setting.secretName }}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ .setting.secretName }}
      key: {{ .setting.secretKey }}
{{- else if ne (toString (.setting.value | default "")) "" }}
- name: {{ .env }}
  value: {{ .setting.value | toString | quote }}
{{- end }}
{{- else if ne (toString .value) "" }}
- name: {{ .env }}
  value: {{ .value | toString | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Security context of every container: non-root, read-only, no capabilities. */}}
{{- define "partnerstream.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "partnerstream.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Pod scheduling of a component: (dict "root" $ "component" "api" "values" .Values.api). */}}
{{- define "partnerstream.scheduling" -}}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- $spread := .root.Values.topologySpread }}
{{- if $spread.enabled }}
topologySpreadConstraints:
{{- range $spread.topologyKeys }}
  - maxSkew: {{ $spread.maxSkew }}
    topologyKey: {{ . }}
    whenUnsatisfiable: {{ $spread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "partnerstream.componentSelectorLabels" $ | nindent 8 }}
{{- end }}
{{- end }}
{{- end }}

{{/* The api is a StatefulSet when its click spool is persistent (one volume per pod), else a Deployment. */}}
{{- define "partnerstream.workloadKind" -}}
{{- if and (eq .component "api") .root.Values.api.clickSpool.persistence.enabled }}StatefulSet{{ else }}Deployment{{ end }}
{{- end }}
