"""Which backend plugin a job's pass uses: the one recorded at dispatch, else the highest version of the template's
family its cluster serves, recorded on the job before anything is created (for one job, or a batch at once)."""
from __future__ import annotations

from ...backends import discovery, registry
from ...backends.base import SchedulerBackend
from ...choices import DesiredState
from ...kube.errors import TerminalKubeError
from ...models import GangJob
from .common import BACKEND_UNAVAILABLE


def backend_for(job: GangJob, api) -> SchedulerBackend:
    """The job's backend plugin: the one recorded at dispatch, else the highest version of the template's family
    the cluster serves (its probed `served_apis`, or live discovery), recorded on the job at once. Raises
    TerminalKubeError BackendUnavailable when the cluster serves none."""
    if job.backend_plugin:
        try:
            return registry.by_name(job.backend_plugin)()
        except KeyError:
            raise TerminalKubeError(BACKEND_UNAVAILABLE, f"backend '{job.backend_plugin}' is not registered") from None
    cls = choose_backend(job, api)
    # Recorded at once, before anything is created: a cancel must know which kinds to clean up even if this
    # pass dies half-way. Never on a job cancelled meanwhile: its cancel pass, seeing no backend, may already have
    # ended it Cancelled without reading the cluster, so nothing may be created for it. This pass then cancels it
    # too, as any cancel does (it reads the cluster: nothing of it can be there), without recording a backend.
    if not _claim_backend([job.pk], cls.name):
        row = GangJob.objects.filter(pk=job.pk).values("backend_plugin", "desired_state").first() or {}
        if row.get("backend_plugin"):
            job.backend_plugin = row["backend_plugin"]  # a concurrent pass chose first
            return registry.by_name(job.backend_plugin)()
        job.desired_state = DesiredState.CANCEL
        return cls()
    job.backend_plugin = cls.name
    return cls()


def _claim_backend(job_ids: list[int], name: str) -> set[int]:
    """Record backend `name` on those of `job_ids` that have none yet and are not being cancelled; returns the
    ids whose backend is `name` now (recorded here, or by a concurrent pass choosing the same)."""
    return _record_backend(job_ids, name)[0]


def _record_backend(job_ids: list[int], name: str) -> tuple[set[int], bool]:
    """`_claim_backend`, also saying whether this call's one UPDATE recorded it on every one of `job_ids` (True:
    none of them had a backend before it; False: some were decided elsewhere, and which ones this call changed is
    not known)."""
    rows = GangJob.objects.filter(pk__in=job_ids, backend_plugin="").exclude(desired_state=DesiredState.CANCEL)
    if rows.update(backend_plugin=name) == len(job_ids):
        return set(job_ids), True  # the usual case: one statement
    if len(job_ids) == 1:
        return set(), False
    return set(GangJob.objects.filter(pk__in=job_ids, backend_plugin=name).values_list("pk", flat=True)), False


def record_backends(jobs: list[GangJob], api) -> set[int]:
    """`backend_for` for a batch of one cluster's jobs, before any of them is created: each undecided job's plugin
    is chosen, and recorded with one UPDATE per plugin instead of one per job. A job whose backend cannot be
    chosen is left undecided (its own pass records the error); a discovery error propagates (KubeError).

    Returns the ids of the jobs this call recorded a backend on: none of them had one before, and no pass creates
    anything for a job without one (`backend_for` records it first), so the cluster holds nothing gangweb made for
    them (reconcile/jobs/batch.py reads no snapshot for those)."""
    recorded: set[int] = set()
    chosen: dict[str, list[GangJob]] = {}
    for job in jobs:
        if job.backend_plugin or job.desired_state == DesiredState.CANCEL:  # a cancelled job never gets one
            continue
        try:
            chosen.setdefault(choose_backend(job, api).name, []).append(job)
        except TerminalKubeError:
            continue
    for name, batch in chosen.items():
        claimed, all_here = _record_backend([j.pk for j in batch], name)
        if all_here:
            recorded |= claimed
        for job in batch:
            if job.pk in claimed:
                job.backend_plugin = name  # the others' own passes find out why (backend_for)
    return recorded


def choose_backend(job: GangJob, api) -> type[SchedulerBackend]:
    """The highest version of the job's template family that its cluster serves (the probed `served_apis`, or live
    discovery). Raises TerminalKubeError BackendUnavailable when the cluster serves none."""
    family = job.resolved_spec.get("backend", "")
    served = set(job.cluster.served_apis or []) or discovery.served_versions(api)
    cls = registry.plugin_for(family=family, served=served)
    if cls is None:
        wanted = ", ".join(registry.api_versions(family)) or "?"
        raise TerminalKubeError(BACKEND_UNAVAILABLE,
                                f"cluster {job.cluster.name} serves no API of backend '{family}' (needs {wanted})")
    return cls
