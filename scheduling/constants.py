"""Label, annotation and finalizer keys, event reasons and other named constants.

Sources: KAI Scheduler `pkg/common/constants/constants.go`; Kubernetes KEP-4671 (scheduling.k8s.io/v1alpha2);
scheduler-plugins coscheduling; Volcano. The facts, with their upstream sources: docs/upstream.md.
"""

# Labels gangweb puts on every object it creates: which job, which gangweb install.
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "gangweb"
LABEL_INSTANCE = "gangweb.io/instance"
LABEL_JOB = "gangweb.io/job"  # the job's name (truncated to a valid label value)
LABEL_JOB_UID = "gangweb.io/job-uid"  # the job's UUID: the owner check before any update or delete
LABEL_POD_SET = "gangweb.io/pod-set"
ANNOTATION_SPEC_HASH = "gangweb.io/spec-hash"
# Set by gangweb on a gang object whose minimum (minCount, minMember, a KAI subGroup's minMember) it put back after
# someone edited it (value: when, ISO 8601 UTC). Pods bound below the job's minimum meanwhile are a partial gang
# gangweb did not cause (observe/phases.py `PartialGang`); removed when gangweb releases that gang.
ANNOTATION_MIN_EDITED = "gangweb.io/min-edited-at"
# Set by gangweb on every object it creates for a job: an HMAC, under the install's SECRET_KEY, of the job's UID and
# the object's key (reconcile/ownership.py `creation_mark`). Only gangweb can compute it, so an object found under a
# name of the job's with no UID recorded yet is taken as gangweb's own (a pass that died between its create and its
# status write) only when it carries the right one: one made by someone else under a name gangweb will use next
# (names are deterministic) is never adopted.
ANNOTATION_CREATED = "gangweb.io/created"

# Each scheduler's own label, annotation and finalizer keys and its default scheduler name live in its plugin
# (scheduling/backends/<scheduler>_<version>.py).

# Kubernetes limits.
DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253

GPU_RESOURCE = "nvidia.com/gpu"

# Template `gang` fields the web side checks and the worker renders (reconcile/desired.py).
# KAI v0.17 PodGroup durations a template may set under `gang` -> whether a negative value is meaningful
# (stalenessGracePeriod: negative disables the stale-gang eviction; KAI v0.17 CRD; docs/upstream.md, KAI PodGroup).
KAI_DURATIONS = {"preemptionDelay": False, "stalenessGracePeriod": True}
DEFAULT_SCHEDULE_TIMEOUT_SECONDS = 60  # scheduler-plugins PodGroup scheduleTimeoutSeconds default

# Celery time limits of the periodic resync (seconds): soft, then hard (SIGKILL of the pool process). Its job passes
# stop earlier, at GANGWEB_RESYNC_MAX_SECONDS; its lease lapses after the hard limit (reconcile/resync.py).
RESYNC_SOFT_TIME_LIMIT = 300
RESYNC_TIME_LIMIT = 330
