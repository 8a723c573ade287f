{{- define "tokenprobe.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{ else }}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{ end }}
{{- end }}

{{- define "tokenprobe.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "tokenprobe.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- /* A study's pods: the daemon's Service and ServiceMonitor select
name and instance, so these carry another name (changing the daemon's
selector instead would make its StatefulSet's immutable selector refuse
an upgrade). */ -}}
{{- define "tokenprobe.studyLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}-study
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "tokenprobe.secretName" -}}
{{- if .Values.existingSecret }}{{ .Values.existingSecret }}{{ else }}{{ include "tokenprobe.fullname" . }}{{ end }}
{{- end }}

{{- define "tokenprobe.podSpec" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile: {type: RuntimeDefault}
{{- with .Values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - name: tokenprobe
    image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    args:
      - --config.file=/etc/tokenprobe/tokenprobe.yaml
      - --web.listen-address=:{{ .Values.service.port }}
      - --config.check-interval={{ .Values.configCheckInterval }}
      {{- if gt (int .Values.replicas) 1 }}
      - --shard.count={{ .Values.replicas }}
      {{- end }}
      {{- with .Values.location }}
      - --probe.location={{ . }}
      {{- end }}
      {{- if .Values.webEnableLifecycle }}
      - --web.enable-lifecycle
      {{- end }}
      {{- range .Values.extraArgs }}
      - {{ . }}
      {{- end }}
    {{- if or .Values.apiKeys .Values.existingSecret }}
    envFrom:
      - secretRef:
          name: {{ include "tokenprobe.secretName" . }}
    {{- end }}
    ports:
      - name: http
        containerPort: {{ .Values.service.port }}
    readinessProbe:
      httpGet: {path: /-/ready, port: http}
    livenessProbe:
      httpGet: {path: /-/healthy, port: http}
      periodSeconds: 30
    resources: {{- toYaml .Values.resources | nindent 6 }}
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
    volumeMounts:
      - name: config
        mountPath: /etc/tokenprobe
        readOnly: true
volumes:
  - name: config
    configMap:
      name: {{ include "tokenprobe.fullname" . }}
{{- end }}

{{- /* The study Jobs' pods: the daemon's security, no probes or ports. */}}
{{- define "tokenprobe.jobPodSpec" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
  seccompProfile: {type: RuntimeDefault}
{{- with .Values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  - name: config
    configMap:
      name: {{ include "tokenprobe.fullname" . }}
  - name: artifacts
    persistentVolumeClaim:
      claimName: {{ .Values.study.artifactsClaim }}
{{- end }}

{{- define "tokenprobe.jobContainer" -}}
{{- if or .Values.apiKeys .Values.existingSecret }}
envFrom:
  - secretRef:
      name: {{ include "tokenprobe.secretName" . }}
{{- end }}
resources: {{- toYaml .Values.study.resources | nindent 2 }}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: {drop: [ALL]}
volumeMounts:
  - name: config
    mountPath: /etc/tokenprobe
    readOnly: true
  - name: artifacts
    mountPath: /artifacts
{{- end }}
