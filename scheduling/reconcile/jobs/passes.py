"""A job's pass with its bookkeeping: run the reconciler, turn how it ended into a `PassResult` (like
controller-runtime's Result: done, a countdown with a reason, or an error), record errors on the job, write the
status fields it changed, and leave a ReconcileAttempt row. What follows a result (a retry, a requeue) is the
caller's: the Celery task (scheduling/tasks.py), the batch, or the resync."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from ...choices import DesiredState, GangPhase, ReconcileOutcome
from ...kube import client as kube_client
from ...kube.errors import (
    CREATE_REFUSED,
    NAMESPACE_NOT_FOUND,
    CreateRefused,
    KubeError,
    TransientKubeError,
    classify,
    describe,
)
from ...models import GangJob, ReconcileAttempt
from .. import status
from ..observed import Observed
from . import claims
from .common import API_VERSION_CHANGED, ERROR_REASONS, UNEXPECTED_ERROR, Done, Failed, Requeue
from .reconciler import JobReconciler

log = logging.getLogger(__name__)


@dataclass
class PassResult:
    """How a pass ended: what it did (`actions`), outcome, reason/message, and a countdown to come back."""

    actions: list[str] = field(default_factory=list)
    outcome: str = ReconcileOutcome.OK
    reason: str = ""
    message: str = ""
    requeue_after: int | None = None
    error: KubeError | None = None

    @property
    def transient(self) -> bool:
        """True when the pass ended on a transient error (recorded on the job; worth a retry with backoff)."""
        return isinstance(self.error, TransientKubeError)


def run_pass(job: GangJob, *, api=None, observed: Observed | None = None, task_id: str = "", retry: int = 0,
             record_idle: bool = True, raise_transient: bool = True) -> PassResult:
    """Reconcile `job` once: act, derive status, write it if changed, record a ReconcileAttempt.

    `observed` comes from a resync snapshot (no reads then); `record_idle=False` skips the attempt row for a
    pass that neither acted nor changed anything (resync of an in-sync job). Returns how the pass ended (like
    controller-runtime's Result): done, `requeue_after` seconds with a reason, or an error (terminal ones are
    recorded and returned). A transient error is recorded too, then raised (TransientKubeError) unless
    `raise_transient` is False, when it is returned in `result.error` for the caller's retry policy.
    """
    started = time.monotonic()
    update = status.StatusUpdate.begin(job, observed.recorded_phases if observed is not None else None)
    result = PassResult()
    acting: list[JobReconciler] = []  # the pass's reconciler, once it was made
    try:
        _act(job, api, observed, update, acting)
        update.clear_errors = ERROR_REASONS  # it ended normally: a recorded error gives way to the phase's reason
    except Exception as exc:  # noqa: BLE001 - no exception leaves a pass unrecorded (a bug, an unexpected answer)
        _record_ending(job, acting[0] if acting else None, exc, result, update)
    if acting:
        result.actions = acting[0].actions
        if acting[0].retired is not None and not result.reason:
            result.reason, result.message = API_VERSION_CHANGED, acting[0].version_message
    with transaction.atomic():
        changed = status.write(job, update)
        if record_idle or result.actions or changed or result.outcome != ReconcileOutcome.OK:
            ReconcileAttempt.objects.create(
                kind=ReconcileAttempt.KIND_JOB, job=job, cluster_id=job.cluster_id, task_id=task_id or "",
                retry=retry, duration_ms=int((time.monotonic() - started) * 1000), outcome=result.outcome,
                reason=result.reason, message=result.message[:2000], actions=result.actions)
    if result.actions:
        log.info("reconciled job %s (%s): %s", job.pk, job, "; ".join(result.actions))
    if raise_transient and result.transient:
        raise result.error
    return result


def _act(job: GangJob, api, observed: Observed | None, update: status.StatusUpdate,
         acting: list[JobReconciler]) -> None:
    """The acting part of a pass, noting what it records in `update`: cancel a never-dispatched job at once (no
    request), else run a JobReconciler (appended to `acting` as soon as it exists)."""
    if job.desired_state == DesiredState.CANCEL and not job.backend_plugin:
        # Never dispatched: nothing of it can be in the cluster, so no request is needed (works offline too).
        # No pass creates anything for it from now on: a backend is never recorded on a cancelled job
        # (backend_for), and no pass creates without one.
        update.decide(job, status.Decision(GangPhase.CANCELLED, timezone.now(), "gangweb", "Cancelled",
                                           "cancelled before it was dispatched"))
        job.cleaned_up_at = job.cleaned_up_at or timezone.now()
        job.objects_removed_at = job.objects_removed_at or job.cleaned_up_at
        return
    acting.append(JobReconciler(job, api or kube_client.api_client(job.cluster), observed, update))
    acting[0].run()


def _record_ending(job: GangJob, reconciler: JobReconciler | None, exc: Exception, result: PassResult,
                   update: status.StatusUpdate) -> None:
    """Turn how a pass stopped early into `result`, recording errors on the job: Done (nothing more), Failed
    (recorded already), Requeue (a countdown), CreateRefused (the job fails and what was created goes), another
    KubeError (recorded; transient or terminal by its class), anything else (UnexpectedError, recorded)."""
    try:
        raise exc
    except Done:
        pass
    except Failed as stop:
        result.outcome, result.reason, result.message = ReconcileOutcome.TERMINAL_ERROR, stop.reason, stop.message
    except Requeue as wait:
        result.reason, result.message, result.requeue_after = wait.reason, wait.message, wait.countdown
    except CreateRefused as refused:
        result.error, result.outcome = refused, ReconcileOutcome.TERMINAL_ERROR
        result.reason, result.message = refused.reason, refused.message
        _fail_refused(job, reconciler, refused, result, update)
    except KubeError as err:
        _record_kube_error(job, err, result, update)
    except Exception:  # noqa: BLE001 - no exception leaves a pass unrecorded (a bug, an unexpected answer)
        _record_unexpected(job, exc, result, update)


def _record_kube_error(job: GangJob, exc: KubeError, result: PassResult, update: status.StatusUpdate) -> None:
    """A classified API error ends the pass: recorded on the job (phase_reason, why-pending), transient or terminal
    by its class. A missing namespace is said with the command that fixes it."""
    if exc.reason == NAMESPACE_NOT_FOUND:
        exc.message = (f'namespace "{job.namespace}" does not exist in cluster {job.cluster.name}; create it '
                       f"(kubectl create namespace {job.namespace}) and the job is dispatched at the next retry")
    result.error = exc
    result.outcome = (ReconcileOutcome.TRANSIENT_ERROR if isinstance(exc, TransientKubeError)
                      else ReconcileOutcome.TERMINAL_ERROR)
    result.reason, result.message = exc.reason, exc.message
    update.fail_with_error(job, exc.reason, exc.message, exc.status)


def _record_unexpected(job: GangJob, exc: Exception, result: PassResult, update: status.StatusUpdate) -> None:
    """An exception no handler expected ends the pass as UnexpectedError, recorded on the job when it can be."""
    err = classify(exc)  # a raw ApiException (a 404/409 nobody handled) still says what the server answered
    # describe: server words only from a Status body, anything else by its type (its text may quote secrets).
    message = f"{type(exc).__name__}: {describe(exc, 1900)}" if err is not None else describe(exc, 2000)
    # An API answer nobody handled is logged in one line; anything else is a bug, worth its traceback.
    log.warning("job %s: unexpected error in a reconcile pass: %s", job.pk, message, exc_info=err is None)
    result.outcome, result.reason, result.message = ReconcileOutcome.TERMINAL_ERROR, UNEXPECTED_ERROR, message
    update.fail_with_error(job, UNEXPECTED_ERROR, result.message, getattr(exc, "status", None))


def _fail_refused(job: GangJob, reconciler: JobReconciler, exc: CreateRefused, result: PassResult,
                  update: status.StatusUpdate) -> None:
    """End `job` Failed because the API server refused one of its objects for good, then delete what was created
    (`discard`). The Failed entry has gangweb's clock and source: a refusal carries no cluster timestamp. When the
    cleanup must wait or the cluster fails meanwhile, a later pass (task countdown or resync) finishes it."""
    if not update.fail(job, CREATE_REFUSED, exc.message):
        return  # finished otherwise meanwhile (a cancel): that path cleans up
    try:
        reconciler.discard()
    except Requeue as wait:
        result.requeue_after = wait.countdown
    except KubeError as err:
        log.warning("job %s: cleaning up after %s failed: %s (the resync retries)", job.pk, exc.reason, err)


def load(job_ids):
    """The jobs of `job_ids` with their cluster and queue, as a pass needs them."""
    return GangJob.objects.select_related("cluster", "queue").filter(pk__in=job_ids)


def reconcile_one(job_id: int, *, task_id: str = "", retry: int = 0) -> PassResult | None:
    """One pass over job `job_id` as the `scheduling.reconcile_job` task runs it: None when the job no longer exists
    (logged), else the pass's result (`run_pass`), a transient error included in it (`result.error`,
    `result.transient`) rather than raised: what follows (a retry, a countdown) is the task's decision
    (scheduling/tasks.py). `task_id` and `retry` are recorded on the ReconcileAttempt row; the job is claimed under
    `task_id` while the pass runs."""
    job = load([job_id]).first()
    if job is None:
        log.info("reconcile_job: job %s no longer exists", job_id)
        return None
    # Claimed while the pass runs (whoever else holds it: a change is never skipped), released when it ends however
    # it ends: the resync then takes the job at once if it still needs work (reconcile/jobs/claims.py).
    with claims.holding([job_id], claims.token_for(task_id), force=True):
        return run_pass(job, task_id=task_id, retry=retry, raise_transient=False)
