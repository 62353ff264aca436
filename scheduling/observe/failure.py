"""Which of a job's containers failed first, and how: the `failure` object of `GangJob.observed`.

Sources of semantics (core/v1 Pod, batch/v1 Job):
- a container that ended carries `status.containerStatuses[].state.terminated` (or, once restarted,
  `lastState.terminated`) with `exitCode`, `signal`, `reason` (`Error`, `OOMKilled`, `Completed`,
  `DeadlineExceeded`, ...), `message` (the container's termination message) and `finishedAt`;
- a container whose image cannot be pulled waits with `state.waiting.reason` `ErrImagePull` / `ImagePullBackOff`
  (also `InvalidImageName`, `ErrImageNeverPull`) and the runtime's message;
- a pod the kubelet gave up on is `status.phase=Failed` with `status.reason` `Evicted` (node pressure) or
  `DeadlineExceeded` (`activeDeadlineSeconds`) and `status.message`;
- an Indexed Job's pods carry their index in the `batch.kubernetes.io/job-completion-index` annotation (and label);
- a Job that failed has the condition `Failed=True` with its reason (`BackoffLimitExceeded`, `DeadlineExceeded`,
  `PodFailurePolicy`, ...) and message.

Only the pods given count: the caller passes the job's own (controller reference to a recorded Job UID,
`observe.pods.cross_check`). Pure: no clock, no I/O.
"""
from __future__ import annotations

from datetime import datetime

from ..constants import LABEL_POD_SET
from . import objects as o

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
POD_REASONS = frozenset({"Evicted", "DeadlineExceeded", "OutOfcpu", "OutOfmemory", "NodeAffinity", "Shutdown",
                         "Terminated", "UnexpectedAdmissionError"})
MESSAGE_MAX = 1024  # a termination message may be 4 KiB (the kubelet's cap); the summary keeps the start
TEXT_MAX = 128

# What the failure was, for people and filters
KIND_EXIT = "ExitCode"  # the container exited non-zero (reason Error, or a runtime's own)
KIND_OOM = "OOMKilled"
KIND_DEADLINE = "DeadlineExceeded"
KIND_IMAGE = "ImagePull"
KIND_EVICTED = "Evicted"
KIND_POD = "PodFailed"  # the pod failed for a reason of its own (status.reason), no container said more
KIND_JOB = "JobFailed"  # only the Job's Failed condition says anything


def _text(value, limit: int = TEXT_MAX) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def completion_index(pod: dict) -> int | None:
    """The pod's Indexed Job completion index (annotation, else label), None without a sane one."""
    m = o.meta(pod)
    for source in (m.get("annotations") or {}, m.get("labels") or {}):
        raw = source.get(COMPLETION_INDEX) if isinstance(source, dict) else None
        if isinstance(raw, str) and raw.isdigit() and len(raw) < 10:
            return int(raw)
    return None


def pod_set_of(obj: dict) -> str:
    """The `gangweb.io/pod-set` label of a pod or Job ("" without one), at most 63 characters."""
    value = (o.meta(obj).get("labels") or {}).get(LABEL_POD_SET)
    return value[:63] if isinstance(value, str) else ""


def _statuses(st: dict) -> list[tuple[dict, bool]]:
    """(container status, is an init container) for every container status the pod reports."""
    out = []
    for key, init in (("initContainerStatuses", True), ("containerStatuses", False)):
        for cs in st.get(key) or []:
            if isinstance(cs, dict):
                out.append((cs, init))
    return out


def _terminated_failure(cs: dict) -> tuple[dict, datetime | None] | None:
    """The container's failed termination (state, else lastState) as (fields, finishedAt), None if it never
    failed."""
    for key in ("state", "lastState"):
        term = ((cs.get(key) or {}) if isinstance(cs.get(key), dict) else {}).get("terminated")
        if not isinstance(term, dict):
            continue
        code, reason = _int(term.get("exitCode")), _text(term.get("reason"))
        if (code or 0) == 0 and reason in ("", "Completed"):
            continue
        kind = KIND_OOM if reason == "OOMKilled" else KIND_DEADLINE if reason == "DeadlineExceeded" else KIND_EXIT
        return ({"kind": kind, "exit_code": code, "signal": _int(term.get("signal")), "reason": reason or "Error",
                 "message": _text(term.get("message"), MESSAGE_MAX), "restarts": _int(cs.get("restartCount")) or 0},
                o.parse_time(term.get("finishedAt")))
    return None


def _pod_failures(pod: dict) -> list[tuple[datetime | None, dict]]:
    """Every failure fact of one pod as (when, failure fields without the pod's identity)."""
    st = o.status(pod)
    found = []
    for cs, init in _statuses(st):
        name = _text(cs.get("name"), 63)
        term = _terminated_failure(cs)
        if term is not None:
            fields, at = term
            found.append((at, {**fields, "container": name, "init_container": init}))
            continue
        waiting = ((cs.get("state") or {}) if isinstance(cs.get("state"), dict) else {}).get("waiting")
        if isinstance(waiting, dict) and waiting.get("reason") in IMAGE_PULL_REASONS:
            found.append((None, {"kind": KIND_IMAGE, "exit_code": None, "signal": None,
                                 "reason": waiting["reason"], "message": _text(waiting.get("message"), MESSAGE_MAX),
                                 "container": name, "init_container": init, "restarts": 0}))
    pod_reason = _text(st.get("reason"))
    if st.get("phase") == "Failed" and pod_reason and not any(f["kind"] != KIND_IMAGE for _, f in found):
        kind = KIND_EVICTED if pod_reason == "Evicted" else KIND_DEADLINE if pod_reason == "DeadlineExceeded" \
            else KIND_POD
        found.append((None, {"kind": kind, "exit_code": None, "signal": None, "reason": pod_reason,
                             "message": _text(st.get("message"), MESSAGE_MAX), "container": "",
                             "init_container": False, "restarts": 0}))
    return found


def _job_condition(owners: list[dict]) -> tuple[str, str, str, str]:
    """(reason, message, lastTransitionTime, pod set) of the first owner Job whose Failed condition is True."""
    failed = []
    for w in owners:
        cond = o.condition_true(w, "Failed")
        if cond is not None:
            failed.append((str(cond.get("lastTransitionTime") or ""), _text(cond.get("reason")),
                           _text(cond.get("message"), MESSAGE_MAX), pod_set_of(w)))
    if not failed:
        return "", "", "", ""
    at, reason, message, pod_set = min(failed)
    return reason, message, at, pod_set


def summary(f: dict) -> str:
    """One line: "worker[2] container trainer exited with code 3 (Error): <message>"."""
    where = f.get("pod_set") or f.get("pod") or "the job"
    if f.get("index") is not None:
        where += f"[{f['index']}]"
    who = f"{where} container {f['container']}" if f.get("container") else where
    kind = f.get("kind")
    if kind == KIND_JOB:
        text = f"{who}: the Job failed ({f.get('job_reason')})"
    elif kind == KIND_IMAGE:
        text = f"{who} cannot pull its image ({f.get('reason')})"
    elif kind == KIND_EVICTED:
        text = f"{who} was evicted"
    elif kind == KIND_POD:
        text = f"{who} failed ({f.get('reason')})"
    elif kind == KIND_DEADLINE and f.get("exit_code") is None:
        text = f"{who} ran past its deadline (DeadlineExceeded)"
    else:
        code = f.get("exit_code")
        said = f"exited with code {code}" if code is not None else "was killed"
        if f.get("signal"):
            said += f" (signal {f['signal']})"
        text = f"{who} {said} ({f.get('reason')})"
    message = (f.get("message") or "").strip().splitlines()
    return text + (f": {message[-1][:200]}" if message else "")


def first_failure(pods: list[dict], owners: list[dict]) -> dict | None:
    """The first failure among the job's `pods` (Pod dicts: only the job's own) and `owners` (its batch Jobs), or
    None when nothing failed::

        {"kind": ExitCode | OOMKilled | DeadlineExceeded | ImagePull | Evicted | PodFailed | JobFailed,
         "pod_set": str, "index": int | None (Indexed Job completion index), "pod": str, "container": str ("" when
         the pod failed as a whole), "init_container": bool, "exit_code": int | None, "signal": int | None,
         "reason": str (the container's or pod's), "message": str (its termination message, <= 1 KiB),
         "restarts": int, "at": RFC 3339 | None (when it ended; None when the cluster gave no time),
         "job_reason": str, "job_message": str (the Job's Failed condition, "" without one),
         "failed_pods": int (pods with a failure fact), "summary": str (one line)}

    Pods being deleted are left out: their end is the deletion's doing (the kubelet kills them, exit 137), never
    the job's cause. "First" is the earliest `finishedAt` (the root cause; later failures are often its
    consequences); facts without a time come after the timed ones, then by pod set, index and pod name, so the
    choice is stable."""
    candidates = []
    failed_pods = 0
    for pod in pods:
        if o.is_terminating(pod):
            continue  # killed because someone deletes it (a cancel, a re-queue, the retention): not the cause
        facts = _pod_failures(pod)
        if facts:
            failed_pods += 1
        for at, fields in facts:
            key = (at is None, at.timestamp() if at else 0.0, pod_set_of(pod), completion_index(pod) or 0,
                   str(o.meta(pod).get("name", "")), fields["container"])
            candidates.append((key, pod, at, fields))
    job_reason, job_message, job_at, job_set = _job_condition(owners)
    if not candidates and not job_reason:
        return None
    if candidates:
        _, pod, at, fields = min(candidates, key=lambda c: c[0])
        out = {"kind": fields["kind"], "pod_set": pod_set_of(pod), "index": completion_index(pod),
               "pod": _text(o.meta(pod).get("name"), 253), **{k: v for k, v in fields.items() if k != "kind"},
               "at": at.isoformat() if at else None}
    else:
        out = {"kind": KIND_JOB, "pod_set": job_set, "index": None, "pod": "", "container": "",
               "init_container": False, "exit_code": None, "signal": None, "reason": job_reason,
               "message": "", "restarts": 0, "at": job_at or None}
    out.update(job_reason=job_reason, job_message=job_message, failed_pods=failed_pods)
    out["summary"] = summary(out)
    return out
