"""Deterministic names of the cluster objects of a job, and label values.

Every name is `<readable prefix>-<hash>`, where the hash is 8 hex digits of SHA-256 over the job's UID and its
`gang_generation`. So the same job and generation always give the same names (reconcile is idempotent), a
replacement (generation + 1) never reuses a name, and a job resubmitted under the same name (new UID) never
reuses an earlier incarnation's names.

Each name is unique per object whatever the job and pod-set names (issue 19): an Indexed Job's name is
`<job>-<pod set>-<hash>`; when that does not fit its 52 characters, the job name is cut, never the pod-set name
(at most 20 characters, `services.templates.specs`), and the hash also covers the pod-set name, so two pod sets of one
job never share a name. (Until issue 19 the whole `<job>-<pod set>` was cut, and a job name of 42+ characters
gave every pod set the same Indexed Job.) Names that fit are unchanged, and a running job keeps a cut name it
created before (`owner_names`), so an upgrade replaces nothing that worked.

Limits (Kubernetes apimachinery validation):
- gang objects and Services: DNS-1123 labels, at most 63 characters (the name is also a label value);
  Services must also start with a letter (DNS-1035);
- Indexed Jobs: at most `JOB_NAME_MAX` = 52, because the Job controller puts the Job name into the label
  `batch.kubernetes.io/job-name` and the pod hostname `<job>-<index>` (both at most 63), and pod names
  `<job>-<index>-<5 random>` should stay readable.
"""
from __future__ import annotations

import hashlib
import re

HASH_LEN = 8
NAME_MAX = 63
JOB_NAME_MAX = 52
_INVALID = re.compile(r"[^a-z0-9-]+")
_LABEL_INVALID = re.compile(r"[^A-Za-z0-9_.-]+")


POD_SET_MAX = 20  # pod-set names are DNS labels of at most 20 characters (services/templates/specs.py)


def name_hash(uid, generation: int, part: str = "") -> str:
    """8 hex digits of SHA-256("<uid>/<generation>"), or of "<uid>/<generation>/<part>" when `part` is given."""
    text = f"{uid}/{generation}/{part}" if part else f"{uid}/{generation}"
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LEN]


def _prefix(text: str, room: int) -> str:
    """`text` made DNS-1123-safe and cut to `room` characters, without a trailing '-'."""
    cleaned = _INVALID.sub("-", text.lower()).strip("-")
    return cleaned[:room].rstrip("-") or "job"


def _join(base: str, uid, generation: int, limit: int) -> str:
    return f"{_prefix(base, limit - HASH_LEN - 1)}-{name_hash(uid, generation)}"


def gang_name(job_name: str, uid, generation: int) -> str:
    """Name of the job's gang object(s) (PodGroup, Workload): at most 63 characters."""
    return _join(job_name, uid, generation, NAME_MAX)


def owner_name(job_name: str, pod_set: str, uid, generation: int) -> str:
    """Name of the Indexed Job running one pod set: at most 52 characters, e.g. "train-worker-1a2b3c4d".

    When `<job>-<pod set>` is longer than the 43 characters before the hash, the job name is cut to make room for
    the whole pod-set name and the hash covers the pod-set name too ("aaaa…a-launcher-<hash>"), so every pod set
    of a job gets its own name."""
    room = JOB_NAME_MAX - HASH_LEN - 1
    whole = _INVALID.sub("-", f"{job_name}-{pod_set}".lower()).strip("-")
    if len(whole) <= room:
        return _join(whole, uid, generation, JOB_NAME_MAX)
    part = _prefix(pod_set, POD_SET_MAX)
    return f"{_prefix(job_name, room - len(part) - 1)}-{part}-{name_hash(uid, generation, pod_set)}"


def legacy_owner_name(job_name: str, pod_set: str, uid, generation: int) -> str:
    """The Indexed Job name gangweb gave a pod set before issue 19 (`<job>-<pod set>` cut to 43, then the hash);
    the same as `owner_name` whenever that fits."""
    return _join(f"{job_name}-{pod_set}", uid, generation, JOB_NAME_MAX)


def owner_names(job_name: str, pod_sets: list[str], uid, generation: int, recorded: dict | None) -> dict[str, str]:
    """{pod set: Indexed Job name} for a job's pod sets: `owner_name`, except that a pod set whose pre-issue-19 name
    is recorded as created (`recorded`: `GangJob.owner_uids`) and was its own (no other pod set of the job had it)
    keeps that name, so a running job is not replaced by an upgrade. A shared old name (the issue 19 defect) is
    not kept: those pod sets get their own names and the shared Job is deleted as stale.

    Raises ValueError if two pod sets would still share a name (an 8-hex-digit hash collision: never seen; a
    refused pass is better than two pod sets fighting over one Job)."""
    legacy = {ps: legacy_owner_name(job_name, ps, uid, generation) for ps in pod_sets}
    shared = {n for n in legacy.values() if list(legacy.values()).count(n) > 1}
    out = {ps: legacy[ps] if legacy[ps] in (recorded or {}) and legacy[ps] not in shared
           else owner_name(job_name, ps, uid, generation) for ps in pod_sets}
    if len(set(out.values())) != len(out):
        raise ValueError(f"pod sets of job {job_name} would share an Indexed Job name: {sorted(out.values())}")
    return out


def service_name(job_name: str, uid, generation: int) -> str:
    """Name of the headless rendezvous Service: a DNS-1035 label (starts with a letter), at most 63."""
    base = job_name if job_name[:1].isalpha() else f"j-{job_name}"
    return _join(base, uid, generation, NAME_MAX)


def label_value(text: str) -> str:
    """`text` as a valid label value: at most 63 characters of [A-Za-z0-9_.-], alphanumeric at both ends."""
    cleaned = _LABEL_INVALID.sub("-", str(text))[:NAME_MAX]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", cleaned)
