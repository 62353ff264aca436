"""Submit, bulk-submit, update, cancel and resubmit gang jobs: the logic both the API and the dashboard call.

Input is the decoded JSON body (types checked strictly here, so the API and the forms give the same messages)::

    {"name": "train-1", "namespace": "default", "template": "llm", "template_version": 3 (optional: latest),
     "queue": "team-a", "cluster": "local", "priority_class_name": "" (optional), "overrides": {...}}
"""
from __future__ import annotations

import hashlib
import json

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from ...choices import ACTIVE_PHASES, DesiredState, GangPhase
from ...db import clock as dbclock
from ...db.copy_rows import insert_rows, new_instances
from ...models import BulkSubmitKey, Cluster, GangJob, PhaseTransition, QueuePolicy
from ...models.jobs import fill_requested_totals
from ...podspec import rules as pod_rules
from ...work import dispatch, routing
from .. import validation as v
from ..access import audit
from ..access import roles as access
from ..access import templates as template_access
from ..clusters import warnings as cluster_warnings
from ..errors import Conflict, IdempotencyMismatch, PermissionDenied
from ..queues import limits as queue_limits
from ..templates import policy
from ..templates import specs as template_service
from ..templates import versions as template_versions
from . import placing
from .lookups import Lookups

SUBMIT_FIELDS = ("name", "namespace", "template", "template_version", "queue", "cluster", "priority_class_name",
                 "overrides")
MAX_BULK = 5000
PLACED = "Placed"  # the Submitted entry's reason when gangweb chose the cluster (its message says why)


# Related rows the job list form shows: what a replayed bulk submit loads with its jobs (as the first answer had).
LIST_RELATED = ("template_version__template", "queue", "cluster", "submitted_by")
KEY_REUSED = "was already used with a different request body"
KEY_OTHER_ENDPOINT = "was already used for a request to the other submit endpoint (single and bulk share keys)"


def request_hash(data) -> str:
    """SHA-256 (64 hex digits) of the canonical JSON of a submit body (a dict) or of a bulk's job list: what an
    Idempotency-Key is compared against."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _idempotency_key(value: str | None) -> str:
    """The `Idempotency-Key` header's value ("" when the header is absent), checked: 1 to 255 printable ASCII
    characters (draft-ietf-httpapi-idempotency-key-header: an sf-string). Raises ValidationError naming the header
    for a present but empty (or blank) key, which would otherwise silently disable the protection the client
    asked for, and for other characters."""
    if value is None:
        return ""
    if not value.strip():
        raise ValidationError({"Idempotency-Key": "must not be empty; leave the header out to submit without one"})
    if any(not " " <= ch <= "~" for ch in value):
        raise ValidationError({"Idempotency-Key": "must be printable ASCII (a UUID is a good key)"})
    return v.string(value, "Idempotency-Key", max_length=255)


def _key_mismatch(other_endpoint: bool = False) -> IdempotencyMismatch:
    return IdempotencyMismatch({"Idempotency-Key": KEY_OTHER_ENDPOINT if other_endpoint else KEY_REUSED})


def _check_keys(data: dict, allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ValidationError({k: f"unknown field; allowed fields are {', '.join(allowed)}" for k in unknown})


def check_queue_takes(queue: QueuePolicy, cluster: Cluster, namespace: str, lookups: Lookups,
                      field_names: tuple[str, str, str] = ("queue", "cluster", "namespace")) -> None:
    """Raise ValidationError unless `queue` takes jobs on `cluster` in `namespace`: it is a leaf, targets the
    cluster (when it names clusters at all) and it and its ancestors allow the namespace (pod_rules.check_namespace;
    an empty list allows none, reserved namespaces never). Shared by submit,
    update (a queue move) and resubmit, so a job can never end up where a submit could not put it.
    `field_names` are the keys the errors are reported under (a queue move reports everything under "queue")."""
    f_queue, f_cluster, f_namespace = field_names
    if queue.id in lookups.parents:
        raise ValidationError({f_queue: f"queue '{queue.name}' has child queues; only leaf queues take jobs"})
    if not lookups.takes(queue, cluster):
        raise ValidationError({f_cluster: f"queue '{queue.name}' is not synced to cluster '{cluster.name}'"})
    pod_rules.check_namespace(queue, namespace, pod_rules.queue_chain(queue, lookups.tree), f_namespace)


def build_job(user, data, lookups: Lookups) -> GangJob:
    """Validate one submit body and return an unsaved GangJob with its resolved spec.

    Raises ValidationError({field: message}) for bad input and PermissionDenied for a queue the user may not use.
    The fields' own shapes (unknown fields, names, types) are checked together: one 400 names every bad one. The
    lookups that follow (template, queue, cluster, limits) need the fields before them and stop at the first.
    """
    v.mapping(data, "body")
    shapes = v.Collect()
    shapes.run(_check_keys, data, SUBMIT_FIELDS)
    name = shapes.run(v.dns_label, data.get("name"), "name")
    namespace = shapes.run(v.dns_label, data.get("namespace", "default"), "namespace")
    template_name = shapes.run(v.string, data.get("template"), "template", max_length=63)
    version_no = data.get("template_version")
    if version_no is not None:
        shapes.run(v.integer, version_no, "template_version", minimum=1)
    queue_name = shapes.run(v.string, data.get("queue"), "queue", max_length=63)
    # A name: that cluster, as always. Left out, null or a list of names: gangweb chooses (placing.py).
    placing_it = not isinstance(data.get("cluster"), str)
    if placing_it:
        wanted = shapes.run(placing.choices, data.get("cluster"))
    else:
        cluster_name = shapes.run(v.string, data.get("cluster"), "cluster", max_length=63)
    priority = data.get("priority_class_name") or ""
    if priority:
        shapes.run(v.dns_subdomain, priority, "priority_class_name")
    shapes.raise_any()
    if version_no is None:
        version = lookups.latest.get(template_name)
        if version is None:
            raise ValidationError({"template": f"no runtime template named '{template_name}'"})
    else:
        version = lookups.versions.get((template_name, version_no))
        if version is None:
            template_access.named_template(user, getattr(lookups.latest.get(template_name), "template", None),
                                           template_name)
            raise ValidationError({"template_version": f"template '{template_name}' has no version {version_no}"})
    # What the user cannot see answers as what does not exist (services/access/roles.py), before any check that would
    # describe it (has children, its clusters and namespaces).
    template_access.named_template(user, version.template, template_name)
    template_versions.check_not_retired(version, template_name)
    queue = access.named_queue(user, lookups.queues.get(queue_name), queue_name)
    if queue.id in lookups.parents:
        raise ValidationError({"queue": f"queue '{queue_name}' has child queues; only leaf queues take jobs"})
    decision = None
    if placing_it:
        access.check_submit(user, queue)  # who may not submit to the queue learns nothing of its clusters
        cluster, decision = placing.place(user, queue, version, data.get("overrides", {}), wanted, lookups)
    else:
        cluster = access.named_cluster(user, lookups.clusters.get(cluster_name), cluster_name)
    check_queue_takes(queue, cluster, namespace, lookups)
    if priority:
        policy.check_priority_class(user, priority)
    access.check_submit(user, queue, cluster)
    # A request over a finite limit of the queue or an ancestor is refused (400); one that only waits is a warning.
    resolved, limit_warnings = lookups.check_limits(queue, cluster, version, data.get("overrides", {}))
    job = GangJob(
        name=name, namespace=namespace, template_version=version, overrides=data.get("overrides", {}), queue=queue,
        cluster=cluster, priority_class_name=priority or resolved.get("priorityClassName", ""),
        resolved_spec=resolved, submitted_by=user if user and user.is_authenticated else None,
        placement={**decision.as_dict(), "among": wanted} if decision is not None else None,
    )
    if decision is None and lookups.placing:
        placing.count_named(lookups, queue, cluster, resolved)  # the request's placed jobs see it there
    # The job's class, or the one a template version stored before this check gave it (an override's: in render).
    template_service.check_gang_priority_class(version.backend, job.priority_class_name,
                                               "priority_class_name" if priority else "template_version")
    known = lookups.cluster_view(cluster)  # what gangweb knows of the cluster: warnings, never refusals
    job.submit_warnings = limit_warnings + lookups.queue_sync_warnings(  # returned with the response, not stored
        queue, cluster, resolved.get("backend", "")) + (cluster_warnings.submit_warnings(
            known, resolved, job.priority_class_name, version.backend) if known else [])
    return job


def _persist(jobs: list[GangJob], message: str, user=None, action: str = "job.submit",
             bulk: bool = False, bulk_key: tuple[str, str] | None = None) -> list[GangJob]:
    """Insert `jobs` with their Submitted transitions and audit rows in one transaction. `bulk` writes them
    with COPY on PostgreSQL (copy_rows.insert_rows; one more statement, much less CPU per row), else
    bulk_create. `bulk_key` (Idempotency-Key, request hash) also stores a BulkSubmitKey with the new jobs' ids,
    in the same transaction. Raises Conflict (409) naming the clash when a unique constraint refuses a job (or
    the key: a concurrent request with the same key committed first)."""
    now = timezone.now()
    queued_at = dbclock.now()  # their tasks are queued at the commit: the resync's grace (reconcile/resync.py)
    fill_requested_totals(jobs)  # bulk_create skips save(): the usage estimate's columns are set here
    for job in jobs:
        job.phase_changed_at = now
        job.task_queued_at = queued_at
    key = bulk_key[0] if bulk_key is not None else ("" if bulk else jobs[0].idempotency_key)
    try:
        with transaction.atomic():
            if key:
                _claim_key(user, key, bulk)
            created = insert_rows(GangJob, jobs) if bulk else GangJob.objects.bulk_create(jobs)
            transitions = new_instances(PhaseTransition, [
                {"job_id": j.id, "phase": GangPhase.SUBMITTED, "at": now, "source": "gangweb",
                 "reason": PLACED if j.placement else "Submitted",
                 "message": f"{message}; {j.placement['text']}" if j.placement else message} for j in created])
            if bulk:  # the bulk answer has no timeline: the transitions' ids are not needed
                insert_rows(PhaseTransition, transitions, need_pk=False)
            else:
                transitions = PhaseTransition.objects.bulk_create(transitions)
            audit.record_many(user, action, created, copy=bulk)
            if bulk_key is not None:
                BulkSubmitKey.objects.create(submitted_by=user, idempotency_key=bulk_key[0],
                                             request_hash=bulk_key[1], job_ids=[j.id for j in created])
            routing.remember({j.id: j.cluster_id for j in created})  # their tasks' routing needs no lookup
            dispatch.reconcile_jobs_on_commit([j.id for j in created], submitted=True)
    except IntegrityError as exc:
        # The unique constraint is the check (no SELECT before every insert); only now look for the clash to
        # name it. Another constraint (e.g. the idempotency key) gets the generic message.
        _raise_active_clash(jobs, bulk)
        raise Conflict({"name": "a job with this name is already active in that cluster and namespace"}) from exc
    if not bulk:  # a single submit answers with the job's timeline; bulk answers use the list form
        _remember_transitions(created[0], transitions)
    return created


def _claim_key(user, key: str, bulk: bool) -> None:
    """Inside the submit's transaction: hold `user`'s row lock (keyed submits of one user take turns from here to
    their commit) and raise IdempotencyMismatch when the other endpoint's table has the key by now. Each table's
    unique constraint catches a race on its own endpoint; nothing else would catch a single and a bulk submit
    with one key, each finding it free before the other committed."""
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk", flat=True))
    other = (GangJob.objects.filter(submitted_by=user, idempotency_key=key) if bulk
             else BulkSubmitKey.objects.filter(submitted_by=user, idempotency_key=key))
    if other.exists():
        raise _key_mismatch(other_endpoint=True)


def _remember_transitions(job: GangJob, transitions: list[PhaseTransition]) -> None:
    """Fill job.transitions' prefetch cache with rows we just inserted, so serializing the new job (the submit
    response) needs no query. This is what Django's own prefetch_related stores."""
    queryset = PhaseTransition.objects.filter(job=job)
    queryset._result_cache = transitions
    queryset._prefetch_done = True
    job._prefetched_objects_cache = {"transitions": queryset}


def _check_names(jobs: list[GangJob]) -> None:
    """Raise Conflict when one request names the same job twice (clashes with stored jobs: _raise_active_clash)."""
    seen = set()
    for i, job in enumerate(jobs):
        key = (job.cluster_id, job.namespace, job.name)
        if key in seen:
            raise Conflict({f"jobs[{i}].name": f"'{job.name}' appears twice in this request"})
        seen.add(key)


def _raise_active_clash(jobs: list[GangJob], bulk: bool = False) -> None:
    """Raise Conflict naming the first job of the request (in request order) whose cluster, namespace and name an
    active stored job already has, if any. The field is `name`, or `jobs[i].name` for a bulk submit."""
    clashes = {(c, ns, n): q for c, ns, n, q in GangJob.objects.filter(
        phase__in=list(ACTIVE_PHASES), name__in=[j.name for j in jobs]).values_list(
        "cluster_id", "namespace", "name", "queue_id")}
    for i, job in enumerate(jobs):
        key = (job.cluster_id, job.namespace, job.name)
        if key in clashes:
            field = f"jobs[{i}].name" if bulk else "name"
            user = job.submitted_by
            if access.is_platform_admin(user) or clashes[key] in access.visible_queue_ids(user):
                raise Conflict({field: f"an active job '{job.name}' already exists in namespace '{job.namespace}' "
                                       "of that cluster"})
            # Another team's job: its objects would collide in the cluster, so the name is refused, but nothing is
            # said of that job (issue 15, L5: what a user cannot list is not disclosed).
            raise Conflict({field: f"'{job.name}' is not available as a job name in namespace '{job.namespace}' of "
                                   "that cluster now; choose another"})


def submit(user, data, idempotency_key: str | None = None) -> tuple[GangJob, bool]:
    """Submit one job. Returns (job, created); created is False when an Idempotency-Key repeats (the first
    request's job, unchanged). Keys are per submitter and shared with bulk submits: one key is one request.

    Raises ValidationError (400), Conflict (409: name in use), IdempotencyMismatch (422: same key, other body or
    a bulk submit's key), PermissionDenied (403).
    """
    digest = request_hash(data) if isinstance(data, dict) else ""
    idempotency_key = _idempotency_key(idempotency_key)
    if idempotency_key:
        existing = GangJob.objects.filter(submitted_by=user, idempotency_key=idempotency_key).first()
        if existing is not None:
            if existing.request_hash != digest:
                raise _key_mismatch()
            _check_replay(user, [existing])
            return existing, False
        if BulkSubmitKey.objects.filter(submitted_by=user, idempotency_key=idempotency_key).exists():
            raise _key_mismatch(other_endpoint=True)
    with access.cached():  # visibility and permission ask for the same roles: computed once
        job = build_job(user, data, Lookups.load([data] if isinstance(data, dict) else []))
    job.idempotency_key, job.request_hash = idempotency_key, digest
    _check_names([job])
    try:
        return _persist([job], f"by {user}", user)[0], True
    except Conflict:
        if idempotency_key:  # a concurrent request with the same key won the race: answer as its retry would
            existing = GangJob.objects.filter(submitted_by=user, idempotency_key=idempotency_key).first()
            if existing is not None:
                if existing.request_hash != digest:
                    raise _key_mismatch() from None
                _check_replay(user, [existing])
                return existing, False
        raise


def _check_replay(user, jobs: list[GangJob], bulk: bool = False) -> None:
    """Raise what a submit of `jobs` would raise now when `user` may not submit them (a read-only token of their
    submitter, a role revoked since): a replay answers 201 as a submit does, so only who may submit gets it.
    Errors are keyed `queue`, or `jobs[i].queue` for a bulk submit."""
    with access.cached():
        for i, job in enumerate(jobs):
            try:
                access.check_submit(user, job.queue, job.cluster)
            except (PermissionDenied, ValidationError) as exc:
                if not bulk:
                    raise
                errors = exc.errors if isinstance(exc, PermissionDenied) else exc.message_dict
                raise type(exc)({f"jobs[{i}].{k}": msg for k, msg in errors.items()}) from None


def _replay_bulk(user, idempotency_key: str, digest: str) -> list[GangJob] | None:
    """The jobs an earlier bulk submit with this key created (request order, list-form relations loaded), or
    None when the key is new. Raises IdempotencyMismatch when the key was used for another request: another
    body, or a single submit."""
    record = BulkSubmitKey.objects.filter(submitted_by=user, idempotency_key=idempotency_key).first()
    if record is None:
        if GangJob.objects.filter(submitted_by=user, idempotency_key=idempotency_key).exists():
            raise _key_mismatch(other_endpoint=True)
        return None
    if record.request_hash != digest:
        raise _key_mismatch()
    by_id = GangJob.objects.select_related(*LIST_RELATED).defer(
        "resolved_spec", "observed", "template_version__spec").in_bulk(record.job_ids)
    jobs = [by_id[i] for i in record.job_ids if i in by_id]  # a job deleted since is left out
    _check_replay(user, jobs, bulk=True)
    return jobs


def submit_many(user, items) -> list[GangJob]:
    """Submit many jobs, all or nothing, without an Idempotency-Key: `submit_bulk`'s jobs."""
    return submit_bulk(user, items)[0]


def submit_bulk(user, items, idempotency_key: str | None = None) -> tuple[list[GangJob], bool]:
    """Submit many jobs, all or nothing. Errors are keyed "jobs[i].<field>" so each names its item.

    Returns (jobs in request order, created). With an `idempotency_key` that an earlier bulk submit of the same
    user and job list used, nothing is created and that submit's jobs are returned with created False; keys are
    shared with single submits (one key is one request).

    Raises ValidationError, Conflict, PermissionDenied or IdempotencyMismatch (same key, other request); nothing
    is created when any item fails.
    """
    if not isinstance(items, list) or not items:
        raise ValidationError({"jobs": "must be a non-empty list of job submissions"})
    if len(items) > MAX_BULK:
        raise ValidationError({"jobs": f"at most {MAX_BULK} jobs per request, got {len(items)}"})
    idempotency_key = _idempotency_key(idempotency_key)
    digest = request_hash(items) if idempotency_key else ""
    if idempotency_key:
        replayed = _replay_bulk(user, idempotency_key, digest)
        if replayed is not None:
            return replayed, False
    lookups = Lookups.load(items)
    jobs = []
    with access.cached():  # one permission lookup for the whole batch
        for i, item in enumerate(items):
            try:
                jobs.append(build_job(user, item, lookups))
            except ValidationError as exc:
                raise ValidationError({f"jobs[{i}].{k}": msgs for k, msgs in exc.message_dict.items()}) from None
            except PermissionDenied as exc:
                raise PermissionDenied({f"jobs[{i}].{k}": msg for k, msg in exc.errors.items()}) from None
    _check_names(jobs)
    try:
        return _persist(jobs, f"by {user} (bulk)", user, bulk=True,
                        bulk_key=(idempotency_key, digest) if idempotency_key else None), True
    except Conflict:
        if idempotency_key:  # a concurrent request with the same key may have won the race
            replayed = _replay_bulk(user, idempotency_key, digest)
            if replayed is not None:
                return replayed, False
        raise


def update(user, job: GangJob, data) -> GangJob:
    """Change a job's queue and/or priority_class_name; the reconciler propagates them to the gang object.

    Raises ValidationError for unknown fields or values (and a queue `user` cannot see), PermissionDenied for a
    queue they may not submit to, Conflict when the job is already finished.
    """
    with access.cached():  # the job's queue and the new one: roles computed once
        return _update(user, job, data)


def _update(user, job: GangJob, data) -> GangJob:
    access.check_update_job(user, job)
    v.mapping(data, "body")
    _check_keys(data, ("queue", "priority_class_name"))
    if job.is_terminal:
        raise Conflict({"phase": f"job is {job.phase}; finished jobs cannot change"})
    if "queue" in data:
        lookups = Lookups.load([{"queue": data["queue"], "cluster": job.cluster.name}])
        name = v.string(data["queue"], "queue", max_length=63)
        queue = access.named_queue(user, lookups.queues.get(name), name)
        check_queue_takes(queue, job.cluster, job.namespace, lookups, ("queue", "queue", "queue"))
        access.check_submit(user, queue, job.cluster)
        pod_rules.check_job_spec(job.resolved_spec, job.template_version.template, queue, lookups.tree)
        queue_limits.check_job_limits(queue, job.cluster, job.resolved_spec, lookups.tree, lookups.allocations)
        job.queue = queue
    if "priority_class_name" in data:
        value = data["priority_class_name"]
        job.priority_class_name = v.dns_subdomain(value, "priority_class_name") if value else ""
        policy.check_priority_class(user, job.priority_class_name)
        template_service.check_gang_priority_class(job.template_version.backend, job.priority_class_name,
                                                   "priority_class_name")
    job.spec_revision += 1
    job.task_queued_at = dbclock.now()
    with transaction.atomic():
        job.save(update_fields=["queue", "priority_class_name", "spec_revision", "task_queued_at", "updated_at"])
        audit.record(user, "job.update", job, {"queue": job.queue.name, "priority_class_name": job.priority_class_name})
        dispatch.reconcile_jobs_on_commit([job.id])
    return job


def check_cancel(user, job: GangJob) -> None:
    """Raise what `cancel` would refuse `job` with, changing nothing: PermissionDenied (access.check_cancel), or
    Conflict({"phase"}) when the job already finished. The bulk cancel's confirmation page asks this per job."""
    access.check_cancel(user, job)
    if job.is_terminal:
        raise Conflict({"phase": f"job already finished as {job.phase}"})


CANCEL_REQUESTED = "CancelRequested"  # phase_reason from the cancel until a worker's pass says `Cancelling`
CANCEL_REQUESTED_MESSAGE = "cancel accepted; waiting for a worker to delete the job's cluster objects"


def cancel(user, job: GangJob) -> GangJob:
    """Ask for a job to be cancelled: its cluster objects are deleted and it ends Cancelled.

    The job keeps its phase, with `phase_reason` `CancelRequested` (CANCEL_REQUESTED_MESSAGE) from this moment,
    also before it was ever dispatched, until a worker's pass says `Cancelling` (deleting its objects) or ends it
    Cancelled (docs/observability.md). Cancelling an already-cancelling job is a no-op. Raises PermissionDenied
    unless `user` may (their own job as submitter, any as queue admin), Conflict when it already finished
    (`check_cancel`).
    """
    check_cancel(user, job)
    if job.desired_state != DesiredState.CANCEL:
        job.desired_state = DesiredState.CANCEL
        job.phase_reason, job.phase_message = CANCEL_REQUESTED, CANCEL_REQUESTED_MESSAGE
        job.task_queued_at = dbclock.now()
        with transaction.atomic():
            job.save(update_fields=["desired_state", "phase_reason", "phase_message", "task_queued_at", "updated_at"])
            audit.record(user, "job.cancel", job)
            dispatch.reconcile_jobs_on_commit([job.id], cleanup=True)
    return job


def resubmit_body(job: GangJob) -> dict:
    """The submit body that asks again for what `job` asked: its name, namespace, template and version, queue,
    cluster, overrides, and its priority class when it is not the one the template gives."""
    body = {"name": job.name, "namespace": job.namespace, "template": job.template_version.template.name,
            "template_version": job.template_version.version, "queue": job.queue.name, "cluster": job.cluster.name,
            "overrides": job.overrides or {}}
    if job.priority_class_name and job.priority_class_name != (job.resolved_spec or {}).get("priorityClassName", ""):
        body["priority_class_name"] = job.priority_class_name
    return body


def resubmit(user, job: GangJob) -> GangJob:
    """Submit a finished job again: same template version, overrides, queue, cluster and priority, same name.

    Only the job's submitter (with the submitter role) or an admin of its queue may (access.check_resubmit), and
    the new job passes every check a submit does, as `user`: it is built by `build_job` from `resubmit_body`, so
    a priority class `user` may not choose (a platform admin's `system-*`), a retired template version, a queue
    that no longer takes the job, or a limit it no longer fits is refused as a submit would be (issue 15, M3).

    Raises PermissionDenied (403) unless `user` may, Conflict while the original is still active (cancel it
    first), and what `build_job` raises.
    """
    access.check_resubmit(user, job)
    if not job.is_terminal:
        raise Conflict({"phase": f"job is {job.phase}; cancel it or wait for it to finish before resubmitting"})
    body = resubmit_body(job)
    with access.cached():
        new = build_job(user, body, Lookups.load([body]))
    new.resubmitted_from = job
    _check_names([new])
    return _persist([new], f"by {user}, resubmitting job {job.uid}", user, "job.resubmit")[0]
