"""Deterministic names of the cluster objects of a job, and label values.

Every name is `<readable prefix>-<hash>`, where the hash is 8 hex digits of SHA-256 over the job's UID and its
`gang_generation`. So the same job and generation always give the same names (reconcile is idempotent), a
replacement (generation + 1) never reuses a name, and a job resubmitted under the same name (new UID) never
reuses an earlier incarnation's names.

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


def name_hash(uid, generation: int) -> str:
    """8 hex digits of SHA-256("<uid>/<generation>")."""
    return hashlib.sha256(f"{uid}/{generation}".encode()).hexdigest()[:HASH_LEN]


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
    """Name of the Indexed Job running one pod set: at most 52 characters, e.g. "train-worker-1a2b3c4d"."""
    return _join(f"{job_name}-{pod_set}", uid, generation, JOB_NAME_MAX)


def service_name(job_name: str, uid, generation: int) -> str:
    """Name of the headless rendezvous Service: a DNS-1035 label (starts with a letter), at most 63."""
    base = job_name if job_name[:1].isalpha() else f"j-{job_name}"
    return _join(base, uid, generation, NAME_MAX)


def label_value(text: str) -> str:
    """`text` as a valid label value: at most 63 characters of [A-Za-z0-9_.-], alphanumeric at both ends."""
    cleaned = _LABEL_INVALID.sub("-", str(text))[:NAME_MAX]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", cleaned)
