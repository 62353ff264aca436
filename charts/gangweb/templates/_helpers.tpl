{{/* Names: "<release>-gangweb", or the release name when it already contains "gangweb"; at most 63 characters. */}}
{{- define "gangweb.fullname" -}}
{{- if contains "gangweb" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-gangweb" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* A cluster-scoped name: "<fullname>-<namespace>", so two installs (even of the same release name) never collide. */}}
{{- define "gangweb.clusterName" -}}
{{- printf "%s-%s" (include "gangweb.fullname" .) .Release.Namespace | trunc 253 | trimSuffix "-" -}}
{{- end -}}

{{- define "gangweb.instance" -}}
{{- default (printf "%s-%s" .Release.Name .Release.Namespace) .Values.instance | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gangweb.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: gangweb
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one process: (dict "root" $ "component" "web"). Never change them: selectors are immutable. */}}
{{- define "gangweb.selectorLabels" -}}
app.kubernetes.io/name: gangweb
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gangweb.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gangweb.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gangweb.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "gangweb.secretName" -}}
{{- default (printf "%s-secrets" (include "gangweb.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* True ("true") when everything the migration needs exists before the release's own objects: then the migration
runs before install; otherwise (bundled PostgreSQL, chart-made secrets) after install, and the pods wait for it. */}}
{{- define "gangweb.migrateBeforeInstall" -}}
{{- if and .Values.secrets.existingSecret (not .Values.postgresql.bundled.enabled) -}}true{{- end -}}
{{- end -}}

{{/* The environment of every gangweb container: secrets by reference, the database and broker URLs, settings. */}}
{{- define "gangweb.env" -}}
- name: SECRET_KEY
  valueFrom: {secretKeyRef: {name: {{ include "gangweb.secretName" . }}, key: {{ .Values.secrets.secretKeyKey }}}}
- name: GANGWEB_ENCRYPTION_KEYS
  valueFrom: {secretKeyRef: {name: {{ include "gangweb.secretName" . }}, key: {{ .Values.secrets.encryptionKeysKey }}}}
{{- if .Values.secrets.metricsTokenKey }}
- name: GANGWEB_METRICS_TOKEN
  valueFrom: {secretKeyRef: {name: {{ include "gangweb.secretName" . }}, key: {{ .Values.secrets.metricsTokenKey }}}}
{{- end }}
{{- if .Values.postgresql.bundled.enabled }}
- name: GANGWEB_DATABASE_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ include "gangweb.secretName" . }}, key: DATABASE_PASSWORD}}
- name: DATABASE_URL
  value: "postgres://gangweb:$(GANGWEB_DATABASE_PASSWORD)@{{ include "gangweb.fullname" . }}-postgresql:5432/gangweb"
{{- else if .Values.database.urlSecret.name }}
- name: DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ .Values.database.urlSecret.name }}, key: {{ .Values.database.urlSecret.key }}}}
{{- else }}
- name: GANGWEB_DATABASE_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ required "database.passwordSecret.name (or database.urlSecret.name, or postgresql.bundled.enabled) is required" .Values.database.passwordSecret.name }}, key: {{ .Values.database.passwordSecret.key }}}}
- name: DATABASE_URL
  value: "postgres://{{ .Values.database.user }}:$(GANGWEB_DATABASE_PASSWORD)@{{ required "database.host is required for an external PostgreSQL" .Values.database.host }}:{{ .Values.database.port }}/{{ .Values.database.name }}{{ with .Values.database.sslmode }}?sslmode={{ . }}{{ end }}"
{{- end }}
- name: DATABASE_CONN_MAX_AGE
  value: {{ .Values.database.connMaxAge | quote }}
{{- if .Values.redisServer.bundled.enabled }}
- name: GANGWEB_REDIS_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ include "gangweb.secretName" . }}, key: {{ .Values.secrets.redisPasswordKey }}}}
- name: REDIS_URL
  value: "redis://:$(GANGWEB_REDIS_PASSWORD)@{{ include "gangweb.fullname" . }}-redis:6379/0"
{{- else if .Values.redis.urlSecret.name }}
- name: REDIS_URL
  valueFrom: {secretKeyRef: {name: {{ .Values.redis.urlSecret.name }}, key: {{ .Values.redis.urlSecret.key }}}}
{{- else }}
- name: REDIS_URL
  value: {{ required "redis.url or redis.urlSecret.name (or redisServer.bundled.enabled) is required" .Values.redis.url | quote }}
{{- end }}
- name: GANGWEB_BROKER_VISIBILITY_TIMEOUT
  value: {{ .Values.redis.visibilityTimeoutSeconds | quote }}
- name: GANGWEB_RECONCILE_SHARDS
  value: {{ .Values.config.reconcileShards | quote }}
- name: GANGWEB_CLUSTER_QPS
  value: {{ .Values.config.clusterQps | quote }}
- name: GANGWEB_CLUSTER_BURST
  value: {{ .Values.config.clusterBurst | quote }}
- name: GANGWEB_INSTANCE
  value: {{ include "gangweb.instance" . | quote }}
- name: GANGWEB_NAMESPACE
  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
- name: ALLOWED_HOSTS
  value: {{ .Values.config.allowedHosts | quote }}
- name: CSRF_TRUSTED_ORIGINS
  value: {{ .Values.config.csrfTrustedOrigins | quote }}
- name: GANGWEB_PUBLIC_URL
  value: {{ .Values.config.publicUrl | quote }}
- name: SECURE_COOKIES
  value: {{ ternary "1" "0" .Values.config.secureCookies | quote }}
- name: SECURE_PROXY_SSL_HEADER
  value: {{ ternary "1" "0" .Values.config.secureProxySslHeader | quote }}
- name: GANGWEB_ALLOW_PRIVATE_CLUSTER_ADDRESSES
  value: {{ .Values.config.allowPrivateClusterAddresses | quote }}
- name: GANGWEB_TRUSTED_PROXIES
  value: {{ .Values.config.trustedProxies | quote }}
- name: GANGWEB_PLATFORM_ADMIN_GROUP
  value: {{ .Values.config.platformAdminGroup | quote }}
- name: GANGWEB_RESERVED_NAMESPACES
  value: {{ .Values.config.reservedNamespaces | quote }}
- name: GANGWEB_METRICS_PUBLIC
  value: {{ ternary "1" "0" .Values.config.metricsPublic | quote }}
- name: LOG_LEVEL
  value: {{ .Values.config.logLevel | quote }}
- name: GANGWEB_STATE_DIR
  value: /var/lib/gangweb
- name: PROMETHEUS_MULTIPROC_DIR
  value: /var/lib/gangweb/metrics
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Writable places under a read-only root: the state dir (metrics samples, beat schedule) and /tmp. */}}
{{- define "gangweb.volumes" -}}
- name: state
  emptyDir: {}
- name: tmp
  emptyDir: {}
{{- end -}}
{{- define "gangweb.volumeMounts" -}}
- name: state
  mountPath: /var/lib/gangweb
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* A cheap check that the database answers (no Django import): the readiness of the processes that serve no HTTP. */}}
{{- define "gangweb.dbPing" -}}
exec:
  command: ["python", "-c", "import os, psycopg; psycopg.connect(os.environ['DATABASE_URL'], connect_timeout=5).close()"]
{{- end -}}

{{/* Pods wait for the migration when it runs after install (bundled PostgreSQL or chart-made secrets). */}}
{{- define "gangweb.waitForMigrations" -}}
{{- if not (include "gangweb.migrateBeforeInstall" .) }}
initContainers:
  - name: wait-for-migrations
    image: {{ include "gangweb.image" . }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    command: ["sh", "-c", "until python manage.py migrate --check >/dev/null 2>&1; do echo waiting for migrations; sleep 5; done"]
    env:
      {{- include "gangweb.env" . | nindent 6 }}
    securityContext:
      {{- toYaml .Values.securityContext | nindent 6 }}
    resources:
      {{- toYaml .Values.migrate.resources | nindent 6 }}
    volumeMounts:
      {{- include "gangweb.volumeMounts" . | nindent 6 }}
{{- end }}
{{- end -}}

{{/* The pod-level settings every process shares: (dict "root" $ "component" "web" "values" .Values.web). */}}
{{- define "gangweb.podCommon" -}}
serviceAccountName: {{ include "gangweb.serviceAccountName" .root }}
automountServiceAccountToken: {{ .root.Values.inCluster.enabled }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
terminationGracePeriodSeconds: {{ .root.Values.terminationGracePeriodSeconds }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with (default .root.Values.nodeSelector .values.nodeSelector) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (default .root.Values.tolerations .values.tolerations) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
affinity:
{{- with (default .root.Values.affinity .values.affinity) }}
  {{- toYaml . | nindent 2 }}
{{- else }}
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "gangweb.selectorLabels" (dict "root" .root "component" .component) | nindent 14 }}
{{- end }}
volumes:
  {{- include "gangweb.volumes" .root | nindent 2 }}
{{- end -}}
