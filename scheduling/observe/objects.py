"""Small readers of Kubernetes object dicts (camelCase, as the API server serializes them).

Timestamps in those dicts are RFC 3339 strings ("2026-11-29T14:46:15Z", metav1.Time has one-second precision;
metav1.MicroTime adds microseconds). `ApiClient.sanitize_for_serialization` already turns datetimes into such
strings; a `datetime` is accepted as well.
"""
from __future__ import annotations

from datetime import datetime

from ..kube.times import parse_time  # noqa: F401 - the observe rules' name for it


def meta(obj: dict) -> dict:
    """`metadata` of an object ({} when absent)."""
    return obj.get("metadata") or {}


def status(obj: dict) -> dict:
    """`status` of an object ({} when absent)."""
    return obj.get("status") or {}


def kind_of(obj: dict, default: str = "") -> str:
    """The object's kind (dicts from typed list calls may lack it; pass `default` then)."""
    return obj.get("kind") or default


def ref(obj: dict, default_kind: str = "") -> str:
    """"Kind namespace/name" of an object, the form timeline entries use as their source."""
    m = meta(obj)
    name = f"{m['namespace']}/{m.get('name', '')}" if m.get("namespace") else m.get("name", "")
    return f"{kind_of(obj, default_kind)} {name}".strip()


def created_at(obj: dict) -> datetime | None:
    """metadata.creationTimestamp."""
    return parse_time(meta(obj).get("creationTimestamp"))


def is_terminating(obj: dict) -> bool:
    """True when the object has a deletionTimestamp (it is going away: never counted as live)."""
    return bool(meta(obj).get("deletionTimestamp"))


def condition(obj: dict, ctype: str) -> dict | None:
    """The `status.conditions[]` entry of type `ctype`, or None."""
    for c in status(obj).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def condition_true(obj: dict, ctype: str) -> dict | None:
    """The condition of type `ctype` when its status is "True", else None."""
    c = condition(obj, ctype)
    return c if c is not None and c.get("status") == "True" else None
