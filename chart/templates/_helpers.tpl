{{/*
Names, labels, the schedule arithmetic, the sweeper's arguments and the RBAC rules.
Everything derived from values is computed here once, so the CronJob, the RBAC objects, the
test pod and NOTES.txt cannot disagree.
*/}}

{{- define "sweeper.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name. 52 characters at most: the CronJob controller appends an 11-character suffix to
name each Job, and a Job name must fit in 63.
*/}}
{{- define "sweeper.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "sweeper.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sweeper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sweeper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sweeper.labels" -}}
helm.sh/chart: {{ include "sweeper.chart" . }}
{{ include "sweeper.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: deadline-sweeper
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "sweeper.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sweeper.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The image repository values.yaml names, where releases are published: the install notes warn
while the chart is a prerelease (Chart.yaml, artifacthub.io/prerelease) and no image is there.
*/}}
{{- define "sweeper.defaultRepository" -}}
ghcr.io/kubeflow-deadline-sweeper/kubeflow-deadline-sweeper
{{- end }}

{{- define "sweeper.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "sweeper.imagePullPolicy" -}}
{{- .Values.image.pullPolicy | default "IfNotPresent" }}
{{- end }}

{{/*
Checkov suppressions that depend on values, as annotation lines. The digest check, and the
pull-policy check (which a digest also satisfies), only fail while the image is pinned by tag.
*/}}
{{- define "sweeper.checkovSkipDigest" -}}
{{- if not .Values.image.digest }}
checkov.io/skip1: CKV_K8S_43=pinned by tag until image.digest is set to the digest of the released image
{{- if ne (include "sweeper.imagePullPolicy" .) "Always" }}
checkov.io/skip4: CKV_K8S_15=IfNotPresent by design (no registry round trip per run, enforcement survives a registry outage); image.digest rolls out a new image
{{- end }}
{{- end }}
{{- end }}

{{/*
The dry-run mode as the CLI spells it: "" (off), "client" or "server".
*/}}
{{- define "sweeper.dryRun" -}}
{{- $d := .Values.dryRun }}
{{- if kindIs "bool" $d }}{{ if $d }}client{{ end }}
{{- else }}{{ $d }}
{{- end }}
{{- end }}

{{/*
Schedule arithmetic, as YAML (read it with `include "sweeper.timing" . | fromYaml`).
  period          seconds between two scheduled runs
  schedule        the cron expression
  every/for       passes inside one run (only when intervalSeconds < 60)
  activeDeadline  the Job's activeDeadlineSeconds: Kubernetes kills a run that is still going
                  2 s before the next one is due. It must stay below the period: with
                  concurrencyPolicy Forbid a hung run would otherwise make every later run skip.
  timeout         --timeout: the sweeper stops itself (exit 5), startupAllowanceSeconds + 1 s
                  before activeDeadline (+ 1 s more with metrics.pushgateway.url: the push)
  startingDeadline how late a run may still start (a missed schedule, a slow previous run)

Two clocks: activeDeadlineSeconds counts from the Job's startTime, which is set before the pod is
scheduled, its image pulled and Python started; --every, --for and --timeout count from the
sweeper's own start. A run whose sweeper starts L s after its Job therefore ends at L + timeout
(+ the report and the exit, under 1 s) on the Job's clock, and must end before activeDeadline:
  timeout = activeDeadline - startupAllowanceSeconds - 1
so any start-up up to startupAllowanceSeconds ends with the sweeper's own, clean, exit instead of
DeadlineExceeded (a failed Job, a pod killed mid-pass). A run that pushes its metrics pushes them
after --timeout too, for at least 1 s (the sweeper's PUSH_FLOOR_S; what is left of --timeout
otherwise), so with metrics.pushgateway.url that second comes out of --timeout as well:
  timeout = activeDeadline - startupAllowanceSeconds - 1 - 1
and the run that --timeout stops still pushes its exit code 5. The sweeper cannot see L (the pod has no
way to read its Job's startTime), so the allowance is a budget set here, not measured per run:
measured pod start-up is 1 s with the image on the node (docs/benchmarks.md, the node lateness
run), and interpreter start adds about half a second; the default 5 leaves room for a loaded node.
A start-up longer than the allowance (an image pull on a new node) can still be killed.

The trade-off: the allowance comes out of the last pass's time. Intervals below a minute run
every minute and pass every N s while fewer than min(60 - N/2, timeout) s have passed, so a run
makes exactly 60/N passes and the last one starts N s before the next run (a job is never more
than about N s late, the property the passes exist for); that last pass, at 60 - N s, must end
before --timeout, and at least 2 s are kept for it. With intervalSeconds 10 that leaves
57 - 50 - 2 = 5 s of allowance at most (the default); 12 allows 7, 15 allows 10; one less each
with the push. Rather than lose a pass (20 s between two checks where 10 were asked for), a
larger allowance is refused.
*/}}
{{- define "sweeper.timing" -}}
{{- $n := int .Values.intervalSeconds }}
{{- $allowance := int .Values.startupAllowanceSeconds }}
{{- $push := 0 }}
{{- if and .Values.metrics.pushgateway.url (ne .Values.mode "watch") }}{{ $push = 1 }}{{ end }}
{{- $subMinute := list 10 12 15 20 30 }}
{{- $minutes := list 1 2 3 4 5 6 10 12 15 20 30 60 }}
{{- $period := 60 }}
{{- $schedule := "* * * * *" }}
{{- $lastStart := 0 }}
{{- if has $n $subMinute }}
{{- $lastStart = sub 60 $n }}
{{- else if and (eq (int (mod $n 60)) 0) (has (int (div $n 60)) $minutes) }}
{{- $period = $n }}
{{- $m := int (div $n 60) }}
{{- if eq $m 60 }}{{ $schedule = "0 * * * *" }}
{{- else if gt $m 1 }}{{ $schedule = printf "*/%d * * * *" $m }}
{{- end }}
{{- else }}
{{- fail (printf "intervalSeconds must divide a minute (10, 12, 15, 20, 30) or be a whole number of minutes that divides an hour (60, 120, 180, 240, 300, 360, 600, 720, 900, 1200, 1800, 3600); got %v" .Values.intervalSeconds) }}
{{- end }}
{{- $deadline := sub $period 2 }}
{{- $timeout := sub (sub (sub $deadline $allowance) 1) $push }}
{{- $most := sub (sub (sub (sub $deadline 1) $push) $lastStart) 2 }}
{{- if gt $allowance $most }}
{{- fail (printf "startupAllowanceSeconds %d leaves the last pass of a run (at %d s) less than 2 s before --timeout (%d s); with intervalSeconds %d it can be at most %d%s" $allowance $lastStart $timeout $n $most (ternary " (1 s is kept for the metrics push, metrics.pushgateway.url)" "" (eq $push 1))) }}
{{- end }}
{{- if has $n $subMinute }}
every: {{ $n }}
for: {{ min (sub 60 (div $n 2)) $timeout }}
{{- end }}
period: {{ $period }}
schedule: {{ $schedule | quote }}
timeout: {{ $timeout }}
activeDeadline: {{ $deadline }}
{{- if kindIs "invalid" .Values.startingDeadlineSeconds }}
startingDeadline: {{ min (div $period 2) 300 }}
{{- else }}
startingDeadline: {{ int .Values.startingDeadlineSeconds }}
{{- end }}
{{- end }}

{{/*
Each family's kinds and their plurals, in the order the sweeper's kind table uses (MXJob is
served by operator releases up to v1.8.x only; MPIJob is the Training Operator's v1 or
mpi-operator's v2beta1, whichever CRD the cluster has).
*/}}
{{- define "sweeper.kindTable" -}}
training-operator:
  - [TFJob, tfjobs]
  - [PyTorchJob, pytorchjobs]
  - [XGBoostJob, xgboostjobs]
  - [MPIJob, mpijobs]
  - [PaddleJob, paddlejobs]
  - [JAXJob, jaxjobs]
  - [MXJob, mxjobs]
mpi-operator:
  - [MPIJob, mpijobs]
trainer:
  - [TrainJob, trainjobs]
{{- end }}

{{/*
The kinds to sweep, as YAML: "kubeflow" (plurals in kubeflow.org), "trainer" (plurals in
trainer.kubeflow.org), "names" (the kinds, for --kind) and "ruled" (the plurals among them that
some rule of policy.rules can select: its kinds absent or naming them; only these get the
writes that enforce a platform deadline).
*/}}
{{- define "sweeper.plurals" -}}
{{- $table := include "sweeper.kindTable" . | fromYaml }}
{{- $kubeflow := list }}{{ $trainer := list }}{{ $names := list }}{{ $ruled := list }}
{{- range $family := list "training-operator" "mpi-operator" "trainer" }}
{{- range $row := get $table $family }}
{{- $kind := index $row 0 }}{{ $plural := index $row 1 }}
{{- $on := and (has $family $.Values.families) (or (empty $.Values.kinds) (has $kind $.Values.kinds)) }}
{{- if and $on (not (has $kind $names)) }}
{{- $names = append $names $kind }}
{{- if eq $family "trainer" }}{{ $trainer = append $trainer $plural }}{{ else }}{{ $kubeflow = append $kubeflow $plural }}{{ end }}
{{- range $rule := $.Values.policy.rules }}
{{- if and (or (empty $rule.kinds) (has $kind $rule.kinds)) (not (has $plural $ruled)) }}
{{- $ruled = append $ruled $plural }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if empty $names }}
{{- fail "families and kinds select no kind: list a kind of a family in families" }}
{{- end }}
kubeflow: {{ toJson $kubeflow }}
trainer: {{ toJson $trainer }}
names: {{ toJson $names }}
ruled: {{ toJson $ruled }}
{{- end }}

{{/*
"true" when the sweeper gets patch on jobs.batch, else "": mpi-operator's MPIJobs are swept and
the sweeper writes. mpi-operator copies an MPIJob's deadline only when it creates the launcher
Job, so one added or shortened later is the sweeper's to write, with or without policy.rules.
The ClusterRole grants it and the admission policy <fullname>-launchers narrows it: one
condition for both.
*/}}
{{- define "sweeper.patchesLaunchers" -}}
{{- $kinds := include "sweeper.plurals" . | fromYaml }}
{{- if and (has "mpi-operator" .Values.families) (has "mpijobs" $kinds.kubeflow) (ne (include "sweeper.dryRun" .) "client") }}true{{ end }}
{{- end }}

{{/*
Sweeper arguments (a YAML list). Pass "dryRun" to override the dry-run mode and "oneShot" to
drop --every/--for (used by the helm test pod).
Flags and spellings follow the CLI contract (sweeper --help); every flag uses the --flag=value
form so that an optional-value flag such as --dry-run cannot swallow the next argument.
*/}}
{{- define "sweeper.args" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $t := include "sweeper.timing" $root | fromYaml }}
{{- $dryRun := include "sweeper.dryRun" $root }}
{{- if hasKey . "dryRun" }}{{ $dryRun = .dryRun }}{{ end -}}
- --action={{ $v.action }}
{{- with $dryRun }}
- --dry-run={{ . }}
{{- end }}
{{- range $v.namespaces }}
- --namespace={{ . }}
{{- end }}
{{- range $v.excludeNamespaces }}
{{- if has . $v.namespaces }}
{{- fail (printf "namespace %q is both in namespaces and in excludeNamespaces" .) }}
{{- end }}
- --exclude-namespace={{ . }}
{{- end }}
{{- $kinds := include "sweeper.plurals" $root | fromYaml }}
{{- if $v.kinds }}
{{- range $kinds.names }}
- --kind={{ . }}
{{- end }}
{{- end }}
{{- /* A kind is swept by the family whose controller serves it (MPIJob: the Training
Operator's v1 or mpi-operator's v2beta1), so the families left out are left out by --family,
never by --kind. */}}
{{- if lt (len $v.families) (len (include "sweeper.kindTable" $root | fromYaml)) }}
{{- range $v.families }}
- --family={{ . }}
{{- end }}
{{- end }}
{{- with $v.selector }}
- --selector={{ . }}
{{- end }}
{{- if $v.policy.rules }}
- --policy={{ include "sweeper.policyPath" $root }}
{{- end }}
- --grace={{ int $v.grace }}
{{- if ne $v.action "fail" }}
{{- if and (eq $v.action "touch") (lt (int $v.escalateAfter) 1) }}
{{- fail "escalateAfter spaces the re-touches of action touch and must be at least 1: the touched-at annotation records whole seconds, so a re-touch in the same second writes nothing (the sweeper refuses it, exit 2)" }}
{{- end }}
- --escalate-after={{ int $v.escalateAfter }}
{{- if not (kindIs "invalid" $v.retouchAfter) }}
- --retouch-after={{ int $v.retouchAfter }}
{{- end }}
{{- if not (kindIs "invalid" $v.retouchLimit) }}
- --retouch-limit={{ int $v.retouchLimit }}
{{- end }}
{{- end }}
- --terminate-pods={{ $v.terminatePods }}
{{- with $v.operatorVersion }}
- --operator-version={{ . }}
{{- end }}
{{- if has "trainer" $v.families }}
- --reclaim-grace={{ int $v.reclaimGraceSeconds }}
{{- end }}
{{- if not (kindIs "invalid" $v.maxActions) }}
{{- if eq $v.mode "watch" }}
{{- fail "maxActions caps a pass of mode cronjob; mode watch acts on each job at its deadline and refuses --max-actions: unset maxActions" }}
{{- end }}
- --max-actions={{ int $v.maxActions }}
{{- end }}
{{- with ($v.trainingOperator).deployment }}
- --training-operator-deployment={{ . }}
{{- end }}
{{- $watch := and (eq $v.mode "watch") (not .oneShot) }}
{{- if $watch }}
{{- include "sweeper.checkLeaseTiming" $v.watch }}
- --watch
- --resync={{ int $v.watch.resyncSeconds }}
- --watch-timeout={{ int $v.watch.watchTimeoutSeconds }}
- --lease-name={{ include "sweeper.fullname" $root }}
- --identity=$(POD_NAME)
- --lease-duration={{ int $v.watch.leaseDurationSeconds }}
- --renew-deadline={{ int $v.watch.renewDeadlineSeconds }}
- --retry-period={{ int $v.watch.retryPeriodSeconds }}
- --health-port={{ int $v.watch.metricsPort }}
{{- else }}
{{- if and (hasKey $t "every") (not .oneShot) }}
- --every={{ $t.every }}
- --for={{ $t.for }}
{{- end }}
- --timeout={{ $t.timeout }}
{{- end }}
- --output={{ $v.output }}
- --log-format={{ $v.logFormat }}
- --log-level={{ $v.logLevel }}
{{- /* watch mode serves /metrics instead of pushing */}}
{{- if and $v.metrics.pushgateway.url (not .oneShot) (not $watch) }}
- --pushgateway={{ $v.metrics.pushgateway.url }}
- --pushgateway-job={{ include "sweeper.pushgatewayJob" $root }}
{{- end }}
{{- include "sweeper.extraArgs" $v.extraArgs }}
{{- end }}

{{/*
The Lease timings together, as the sweeper checks them at start (client-go's ordering): each
value passes the schema alone, but a combination that breaks the ordering would exit 2 on every
start. leaseDuration > renewDeadline: the leader stops writing before a standby may take over;
renewDeadline > 1.2 x retryPeriod: the leader gets at least one jittered retry before its
deadline (compared as 5 x renewDeadline > 6 x retryPeriod, in integers).
*/}}
{{- define "sweeper.checkLeaseTiming" -}}
{{- $lease := int .leaseDurationSeconds }}
{{- $renew := int .renewDeadlineSeconds }}
{{- $retry := int .retryPeriodSeconds }}
{{- if le $lease $renew }}
{{- fail (printf "watch.leaseDurationSeconds (%d) must be longer than watch.renewDeadlineSeconds (%d): the leader must stop writing before a standby may take the Lease" $lease $renew) }}
{{- end }}
{{- if le (mul 5 $renew) (mul 6 $retry) }}
{{- fail (printf "watch.renewDeadlineSeconds (%d) must be longer than 1.2 x watch.retryPeriodSeconds (%d): the leader needs a retry, jittered, before its renew deadline" $renew $retry) }}
{{- end }}
{{- end }}

{{/*
extraArgs, appended last, as YAML list items (JSON-quoted: a value such as "on" or "1" stays a
string). Both spellings are accepted: ["--clock=local"] and ["--clock", "local"]. An item that
does not start with "-" must be the value of the flag just before it (one that has no "="), so a
stray positional argument fails at install time instead of at every run.
*/}}
{{- define "sweeper.extraArgs" -}}
{{- $valueAllowed := false }}
{{- range $i, $arg := . }}
{{- if hasPrefix "-" $arg }}
{{- $valueAllowed = not (contains "=" $arg) }}
{{- else if $valueAllowed }}
{{- $valueAllowed = false }}
{{- else }}
{{- fail (printf "extraArgs[%d] %q is neither a flag (starting with -) nor the value of the flag before it; write [\"--flag=value\"] or [\"--flag\", \"value\"]" $i $arg) }}
{{- end }}
- {{ $arg | toJson }}
{{- end }}
{{- end }}

{{/*
RBAC rules (a YAML list under "rules"): exactly the requests sweeper/k8s/kube.py makes for the
chosen action and families, on the selected kinds. Discovery (GET /apis/kubeflow.org...) needs
no grant: the built-in system:discovery role covers every authenticated user.
  list jobs                  every action (the pass)
  patch jobs                 touch, auto: the touch annotation (a JSON merge patch)
  get jobs                   whenever a <plural>/status is patched: re-read the job just
                             before failing it
  patch <plural>/status      fail, auto; touch on the kinds a rule of policy.rules can select
                             (a deadline from the platform's default or cap, which the operator
                             cannot see, is enforced by failing the job whatever the action):
                             the Failed status, guarded by resourceVersion;
                             mpi-operator: mpijobs/status, a gang with no launcher Job
  list, delete pods/services every action: the pods a job failed by its deadline still runs
                             (v1.9.4 and mpi-operator keep them), and their same-named services;
                             the list, every pass, also sums the pods and GPUs jobs hold for
                             nothing (held_pods, held_gpus); policy.rules' startDeadline and
                             reclaimFailedAfter delete them (and patch status, get jobs, as fail)
  get jobs.batch             mpi-operator: is there a launcher Job, before failing a gang
  patch jobs.batch           mpi-operator: an MPIJob's deadline (its own, or a platform rule's)
                             written into its launcher Job (docs/policy.md); RBAC cannot name
                             those Jobs, the admission policy <fullname>-launchers does
  list, delete jobsets       trainer: the JobSet of a TrainJob failed by its deadline, or
                             finished holding pods under policy.rules' reclaimFailedAfter
  list pods                  trainer: its JobSets' pods, every pass, for the GPUs they hold
  list trainjobs             trainer: the pass (get and watch too in mode watch)
  get, patch trainjobs,      trainer, when a rule can select TrainJobs: a platform deadline
  patch trainjobs/status     written into a TrainJob without one; one failed at a cap below
                             its own
  create events (core v1)    every write records an event on the job
  namespaces                 policy.rules: the rules select jobs by their Namespace's labels,
                             read once per pass (mode watch: at start and each resync, no
                             watch). Cluster-wide: list; with `namespaces`: get, granted by the
                             Role in each listed namespace (a request for Namespace X is
                             authorized in namespace X), so still nothing cluster-wide
  watch jobs, get jobs       mode watch: the streams, and the re-read when a timer fires
  (the Lease's rules are in rbac-lease.yaml: a Role in the release's namespace only)
Client dry-run writes nothing, so it gets the reads only; a server-side dry run is authorized
like the real write, so it keeps the write verbs.
*/}}
{{- define "sweeper.rules" -}}
{{- $kinds := include "sweeper.plurals" . | fromYaml }}
{{- $plurals := $kinds.kubeflow }}
{{- $writes := ne (include "sweeper.dryRun" .) "client" }}
{{- $touches := ne .Values.action "fail" }}
{{- $watches := eq .Values.mode "watch" }}
{{- $mpi := and (has "mpi-operator" .Values.families) (has "mpijobs" $plurals) }}
{{- /* A default or a cap the job does not carry is enforced by failing it, whatever the
action: the kinds a rule can select are failed under action touch too. */}}
{{- $status := list }}
{{- range $plurals }}
{{- if or (ne $.Values.action "touch") (has . $kinds.ruled) (and $mpi (eq . "mpijobs")) }}
{{- $status = append $status (printf "%s/status" .) }}
{{- end }}
{{- end }}
{{- $jobVerbs := list }}
{{- if or $status $watches }}{{ $jobVerbs = append $jobVerbs "get" }}{{ end }}
{{- $jobVerbs = append $jobVerbs "list" }}
{{- if $watches }}{{ $jobVerbs = append $jobVerbs "watch" }}{{ end }}
{{- if and $touches $writes }}{{ $jobVerbs = append $jobVerbs "patch" }}{{ end }}
{{- $trainjobs := has "trainjobs" $kinds.ruled -}}
rules:
{{- if $plurals }}
  - apiGroups: ["kubeflow.org"]
    resources: {{ toJson $plurals }}
    verbs: {{ toJson $jobVerbs }}
{{- if and $status $writes }}
  - apiGroups: ["kubeflow.org"]
    resources: {{ toJson $status }}
    verbs: ["patch"]
{{- end }}
  - apiGroups: [""]
    resources: ["pods", "services"]
    verbs: {{ if $writes }}["list", "delete"]{{ else }}["list"]{{ end }}
{{- end }}
{{- if $mpi }}
  - apiGroups: ["batch"]
    resources: ["jobs"]
    verbs: {{ if include "sweeper.patchesLaunchers" . }}["get", "patch"]{{ else }}["get"]{{ end }}
{{- end }}
{{- if $kinds.trainer }}
{{- $trainVerbs := list }}
{{- if or $watches $trainjobs }}{{ $trainVerbs = append $trainVerbs "get" }}{{ end }}
{{- $trainVerbs = append $trainVerbs "list" }}
{{- if $watches }}{{ $trainVerbs = append $trainVerbs "watch" }}{{ end }}
{{- if and $trainjobs $writes }}{{ $trainVerbs = append $trainVerbs "patch" }}{{ end }}
  - apiGroups: ["trainer.kubeflow.org"]
    resources: {{ toJson $kinds.trainer }}
    verbs: {{ toJson $trainVerbs }}
{{- if and $trainjobs $writes }}
  - apiGroups: ["trainer.kubeflow.org"]
    resources: ["trainjobs/status"]
    verbs: ["patch"]
{{- end }}
  - apiGroups: ["jobset.x-k8s.io"]
    resources: ["jobsets"]
    verbs: {{ if $writes }}["list", "delete"]{{ else }}["list"]{{ end }}
{{- if not $plurals }}
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["list"]
{{- end }}
{{- end }}
{{- if $writes }}
  - apiGroups: [""]
    resources: ["events"]
    verbs: ["create"]
{{- end }}
{{- if .Values.policy.rules }}
  - apiGroups: [""]
    resources: ["namespaces"]
    verbs: {{ if .Values.namespaces }}["get"]{{ else }}["list"]{{ end }}
{{- end }}
{{- end }}

{{/*
The sweeper pod spec, shared by the CronJob and the helm test pod.
Arguments: "root" (the chart context) and "args" (the rendered argument list).
*/}}
{{- define "sweeper.podSpec" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $watch := .watch -}}
serviceAccountName: {{ include "sweeper.serviceAccountName" $root }}
{{- if $v.serviceAccount.automount }}
# serviceAccount.automount: the kubelet mounts the token into every container.
automountServiceAccountToken: true
{{- else }}
# The token is mounted explicitly below, into the sweeper container only (not into any
# injected sidecar), read-only, and bound to this pod's lifetime.
automountServiceAccountToken: false
{{- end }}
enableServiceLinks: false
{{- if $watch }}
restartPolicy: Always
# On SIGTERM the leader finishes the write in progress and releases its Lease, so that the
# other replica takes over at its next retry rather than after the lease duration.
terminationGracePeriodSeconds: 30
{{- else }}
restartPolicy: Never
# The sweeper exits within a second of SIGTERM (exit code 4); a short grace lets a killed
# run finish quickly so that the next scheduled run is not held back.
terminationGracePeriodSeconds: 5
{{- end }}
{{- with $v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- include "sweeper.securityContext" (dict "values" $v "defaults" (dict "seccompProfile" (dict "type" "RuntimeDefault")) "overrides" $v.podSecurityContext) | nindent 2 }}
containers:
  - name: sweeper
    image: {{ include "sweeper.image" $root }}
    imagePullPolicy: {{ include "sweeper.imagePullPolicy" $root }}
    args:
      {{- .args | nindent 6 }}
    env:
      # Unbuffered, so that a killed run still shows its last lines in `kubectl logs`.
      - name: PYTHONUNBUFFERED
        value: "1"
    {{- if $watch }}
      # The Lease holder identity: the pod's name, as kube-controller-manager's replicas do.
      - name: POD_NAME
        valueFrom:
          fieldRef:
            fieldPath: metadata.name
    {{- end }}
    {{- with $v.extraEnv }}
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with $v.envFrom }}
    envFrom:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- if $watch }}
    ports:
      - name: metrics
        containerPort: {{ int $v.watch.metricsPort }}
        protocol: TCP
    # Alive: the main loop turns at least every second. Ready: every watch has listed.
    livenessProbe:
      httpGet:
        path: /healthz
        port: metrics
      periodSeconds: 10
      failureThreshold: 3
    readinessProbe:
      httpGet:
        path: /readyz
        port: metrics
      periodSeconds: 5
    {{- end }}
    securityContext:
      {{- $restricted := dict "readOnlyRootFilesystem" true "allowPrivilegeEscalation" false "privileged" false "capabilities" (dict "drop" (list "ALL")) "seccompProfile" (dict "type" "RuntimeDefault") }}
      {{- include "sweeper.securityContext" (dict "values" $v "defaults" $restricted "overrides" $v.containerSecurityContext) | nindent 6 }}
    {{- with $v.resources }}
    resources:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    volumeMounts:
      {{- if not $v.serviceAccount.automount }}
      - name: kube-api-access
        mountPath: /var/run/secrets/kubernetes.io/serviceaccount
        readOnly: true
      {{- end }}
      # The root filesystem is read-only; the Kubernetes client may write temporary files.
      - name: tmp
        mountPath: /tmp
      {{- if $v.policy.rules }}
      - name: policy
        mountPath: {{ include "sweeper.policyDir" $root }}
        readOnly: true
      {{- end }}
      {{- with $v.extraVolumeMounts }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
volumes:
  {{- if not $v.serviceAccount.automount }}
  # The same files the kubelet's automount would provide: a bound token, the cluster CA and
  # the namespace, which is what the client's in-cluster configuration reads.
  - name: kube-api-access
    projected:
      sources:
        - serviceAccountToken:
            path: token
            expirationSeconds: 3600
        - configMap:
            name: kube-root-ca.crt
            items:
              - key: ca.crt
                path: ca.crt
        - downwardAPI:
            items:
              - path: namespace
                fieldRef:
                  fieldPath: metadata.namespace
  {{- end }}
  - name: tmp
    emptyDir:
      sizeLimit: 16Mi
  {{- if $v.policy.rules }}
  - name: policy
    configMap:
      name: {{ include "sweeper.fullname" $root }}-policy
  {{- end }}
  {{- with $v.extraVolumes }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with include "sweeper.topologySpread" (dict "root" $root "watch" $watch) | fromYamlArray }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
topologySpreadConstraints (a YAML list): the user's, each given the chart's selector labels
when it has no labelSelector of its own. In mode watch with more than one replica and none
given: spread the replicas over nodes, softly (ScheduleAnyway), so that losing one node does not
take the leader and its standby together; matchLabelKeys keeps a rollout's old pods out of it.
*/}}
{{- define "sweeper.topologySpread" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $selector := include "sweeper.selectorLabels" $root | fromYaml }}
{{- $constraints := list }}
{{- range $v.topologySpreadConstraints }}
{{- $c := deepCopy . }}
{{- if not (hasKey $c "labelSelector") }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" $selector) }}
{{- end }}
{{- $constraints = append $constraints $c }}
{{- end }}
{{- if and .watch (not $constraints) (gt (int $v.watch.replicas) 1) }}
{{- $constraints = list (dict "maxSkew" 1 "topologyKey" "kubernetes.io/hostname" "whenUnsatisfiable" "ScheduleAnyway" "labelSelector" (dict "matchLabels" $selector) "matchLabelKeys" (list "pod-template-hash")) }}
{{- end }}
{{- toYaml $constraints }}
{{- end }}

{{/*
A securityContext: runAsNonRoot, the numeric runAsUser/runAsGroup unless they are null (on
OpenShift the platform assigns the uid, and an explicit one outside the namespace's range is
refused), the given restricted defaults, then the user's overrides on top.
Called with (dict "values" .Values "defaults" DICT "overrides" DICT).
*/}}
{{- define "sweeper.securityContext" -}}
{{- $ctx := dict "runAsNonRoot" true }}
{{- if not (kindIs "invalid" .values.runAsUser) }}
{{- $_ := set $ctx "runAsUser" (int .values.runAsUser) }}
{{- end }}
{{- if not (kindIs "invalid" .values.runAsGroup) }}
{{- $_ := set $ctx "runAsGroup" (int .values.runAsGroup) }}
{{- end }}
{{- $ctx = mergeOverwrite $ctx (deepCopy .defaults) (deepCopy (.overrides | default dict)) }}
{{- toYaml $ctx }}
{{- end }}

{{/*
The job label of the pushed metrics (the Pushgateway's grouping key), which the alerts select.
*/}}
{{- define "sweeper.pushgatewayJob" -}}
{{- default (include "sweeper.fullname" .) .Values.metrics.pushgateway.job }}
{{- end }}

{{/*
The platform's rules file (policy.rules, docs/policy.md), as the ConfigMap holds it and the pod
reads it with --policy. values.schema.json checks each rule's shape; the sweeper checks the
rest when it starts (exit 2: defaultDeadline longer than maxDeadline, a deadline that is not
whole seconds, one longer than a year). Two rules of one name are refused here: the first would
always win and the second be dead.
*/}}
{{- define "sweeper.policyFile" -}}
{{- $names := list }}
{{- range $i, $rule := .Values.policy.rules }}
{{- if has $rule.name $names }}
{{- fail (printf "policy.rules[%d]: name %q is used by an earlier rule" $i $rule.name) }}
{{- end }}
{{- $names = append $names $rule.name }}
{{- end }}
{{- toYaml (dict "rules" .Values.policy.rules) }}
{{- end }}

{{- define "sweeper.policyDir" -}}
/etc/kubeflow-deadline-sweeper/policy
{{- end }}

{{- define "sweeper.policyPath" -}}
{{ include "sweeper.policyDir" . }}/rules.yaml
{{- end }}

{{/*
The pod template's annotations: podAnnotations, and with policy.rules a checksum of the rules
file, so that changing the rules rolls the Deployment, whose pods read the file when they
start. Each CronJob run is a new pod that reads the ConfigMap as it is then.
*/}}
{{- define "sweeper.podAnnotations" -}}
{{- $annotations := deepCopy (.Values.podAnnotations | default dict) }}
{{- if .Values.policy.rules }}
{{- $_ := set $annotations "checksum/policy" (include "sweeper.policyFile" . | sha256sum) }}
{{- end }}
{{- with $annotations }}
{{- toYaml . }}
{{- end }}
{{- end }}
