"""Cancel several jobs at once: POST /api/v1/jobs/cancel/ and the dashboard's "Cancel selected" both call this.

Each job goes through `services.jobs.lifecycle.cancel`, the one cancel the API and the job page use, so each is checked
for permission on its own (its submitter as submitter, or an admin of its queue) and one refusal changes nothing for
the others nor for itself. A job the user may not see is answered as one that does not exist (404), as the
single-job API answers. Results come in the order of the ids asked::

    [{"id": 12, "name": "train-1", "namespace": "default", "cancelled": True, "status": 202, "reason": ""},
     {"id": 13, "name": "train-2", "namespace": "default", "cancelled": False, "status": 403,
      "reason": "cancelling job 'default/train-2' needs ... (you are not its submitter)"},
     {"id": 99, "name": "", "namespace": "", "cancelled": False, "status": 404,
      "reason": "no job '99' that you can see"}]

`status` is what the single cancel would have answered (202 accepted, 403 refused, 404 not found, 409 already
finished).
"""
from __future__ import annotations

from django.core.exceptions import ValidationError

from ...choices import DesiredState
from ...models import GangJob
from ..access import roles as access
from ..errors import ServiceError
from . import lifecycle as job_service

MAX_IDS = 500
_MAX_DIGITS = 18  # below 2**63: a bigint primary key


def _id(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 1 <= value < 2**63 else None  # a bigint primary key
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= _MAX_DIGITS:
        return int(value) or None
    return None


def parse_ids(values, field: str = "ids") -> list[int]:
    """The job ids of a bulk cancel: `values` a list of whole numbers from 1 (JSON numbers, or digit strings as a
    form posts them), 1 to MAX_IDS of them, none repeated. Raises ValidationError naming the field and the item
    (``{"ids[2]": "'x' is not a job id: a whole number from 1"}``)."""
    if values is None:
        raise ValidationError({field: "required: a list of job ids"})
    if not isinstance(values, list):
        raise ValidationError({field: "must be a list of job ids"})
    if not values:
        raise ValidationError({field: "empty: name at least one job"})
    if len(values) > MAX_IDS:
        raise ValidationError({field: f"at most {MAX_IDS} jobs per request, got {len(values)}"})
    out, seen = [], {}
    for i, value in enumerate(values):
        job_id = _id(value)
        if job_id is None:
            raise ValidationError({f"{field}[{i}]": f"{str(value)[:40]!r} is not a job id: a whole number from 1"})
        if job_id in seen:
            raise ValidationError({f"{field}[{i}]": f"repeats job {job_id} (also {field}[{seen[job_id]}])"})
        seen[job_id] = i
        out.append(job_id)
    return out


def parse_body(data) -> list[int]:
    """The ids of a POST /api/v1/jobs/cancel/ body ``{"ids": [12, 13]}``; any other field is a 400 naming it."""
    if not isinstance(data, dict):
        raise ValidationError({"ids": 'the body is {"ids": [job ids]}'})
    unknown = sorted(set(data) - {"ids"})
    if unknown:
        raise ValidationError({unknown[0]: 'unknown field; the body is {"ids": [job ids]}'})
    return parse_ids(data.get("ids"))


def _jobs(user, ids: list[int]) -> dict[int, GangJob]:
    rows = GangJob.objects.filter(pk__in=ids).select_related("queue", "cluster").defer(
        "resolved_spec", "observed", "why_pending", "overrides")
    return {j.pk: j for j in access.visible_jobs(user, rows)}


def _missing(job_id: int) -> dict:
    return {"id": job_id, "name": "", "namespace": "", "job": None, "cancelled": False, "status": 404,
            "reason": f"no job '{job_id}' that you can see"}


def _refusal(exc: ServiceError) -> str:
    return "; ".join(str(v) for v in exc.errors.values())


def preview(user, ids: list[int]) -> list[dict]:
    """What `cancel_many` would do, changing nothing: per id ``{"id", "name", "namespace", "job": GangJob | None,
    "cancelled": would it be, "status", "reason"}`` (the confirmation page lists them). Two queries plus the
    roles."""
    with access.cached():
        jobs = _jobs(user, ids)
        out = []
        for job_id in ids:
            job = jobs.get(job_id)
            if job is None:
                out.append(_missing(job_id))
                continue
            row = {"id": job_id, "name": job.name, "namespace": job.namespace, "job": job, "cancelled": True,
                   "status": 202, "reason": ""}
            try:
                job_service.check_cancel(user, job)
            except ServiceError as exc:
                row.update(cancelled=False, status=exc.status, reason=_refusal(exc))
            else:
                if job.desired_state == DesiredState.CANCEL:
                    row["reason"] = "already being cancelled"
            out.append(row)
    return out


def cancel_many(user, ids: list[int]) -> list[dict]:
    """Cancel each job of `ids` (parse_ids' output) through services.jobs.lifecycle.cancel, each on its own: per id
    ``{"id", "name", "namespace", "job", "cancelled", "status", "reason"}`` in the order asked (see the module
    docstring). A refused job is left as it was; a job already being cancelled counts as cancelled ("already being
    cancelled")."""
    out = []
    with access.cached():
        jobs = _jobs(user, ids)
        for job_id in ids:
            job = jobs.get(job_id)
            if job is None:
                out.append(_missing(job_id))
                continue
            already = job.desired_state == DesiredState.CANCEL
            row = {"id": job_id, "name": job.name, "namespace": job.namespace, "job": job, "cancelled": True,
                   "status": 202, "reason": "already being cancelled" if already else ""}
            try:
                job_service.cancel(user, job)
            except ServiceError as exc:
                row.update(cancelled=False, status=exc.status, reason=_refusal(exc))
            out.append(row)
    return out


def payload(rows: list[dict]) -> dict:
    """The API's answer: ``{"cancelled": 2, "refused": 1, "jobs": [rows without "job"]}``."""
    jobs = [{k: v for k, v in r.items() if k != "job"} for r in rows]
    done = sum(1 for r in rows if r["cancelled"])
    return {"cancelled": done, "refused": len(rows) - done, "jobs": jobs}
