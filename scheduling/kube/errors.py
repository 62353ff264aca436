"""Kubernetes API failures sorted into transient (retry with backoff) and terminal (record, do not retry).

- Transient: the cluster cannot be reached (connection refused/reset, TLS or DNS failure, timeout), 429 Too
  Many Requests, 5xx, and 401/403. Credentials and RBAC are fixed by an admin without touching the job, so a
  403 is recorded on the job and retried with backoff rather than failing it for good.
- NamespaceNotFound (transient, for the same reason): a create answered 404 whose Status names the namespace
  itself (`details.kind == "namespaces"`, message `namespaces "x" not found`). The job's namespace is missing
  in its cluster; a user creates it and the next retry or resync proceeds (level-triggered).
- Terminal: 400 Bad Request and 422 Invalid (the object itself is wrong; retrying cannot help), and other 4xx
  not handled by the caller. Other 404s and 409 are answers the reconciler handles itself (`status_of`).
"""
from __future__ import annotations

import json
import socket
import ssl

import urllib3
from kubernetes.client.rest import ApiException

CLUSTER_UNREACHABLE = "ClusterUnreachable"
FORBIDDEN = "Forbidden"
UNAUTHORIZED = "Unauthorized"
THROTTLED = "Throttled"
SERVER_ERROR = "ServerError"
INVALID = "Invalid"
REJECTED = "Rejected"
NAMESPACE_NOT_FOUND = "NamespaceNotFound"


class KubeError(Exception):
    """A classified API failure: `reason` (CamelCase, shown on the job), `status` (HTTP code or None)."""

    def __init__(self, reason: str, message: str, status: int | None = None):
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.status = status


class TransientKubeError(KubeError):
    """Retry later with backoff: the cluster is down, overloaded, or refuses our credentials for now."""


class TerminalKubeError(KubeError):
    """Do not retry: the request itself is wrong (400/422) or the object cannot be ours (name conflict)."""


CONNECTION_ERRORS = (urllib3.exceptions.HTTPError, ConnectionError, socket.timeout, TimeoutError, ssl.SSLError,
                     OSError)


def _status_body(exc: ApiException) -> dict:
    """The Kubernetes Status object of an ApiException's body, or {} when the body is not one."""
    try:
        body = json.loads(exc.body)
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def _api_message(exc: ApiException) -> str:
    return _status_body(exc).get("message") or str(exc.reason or exc.body or exc)


def missing_namespace(exc: BaseException) -> str | None:
    """The namespace name when `exc` is a 404 saying the namespace itself does not exist (Status
    `{"reason": "NotFound", "details": {"kind": "namespaces", "name": <ns>}}`, as the API server answers a
    create in a missing namespace), else None. A 404 for the object itself names its own kind instead."""
    if not isinstance(exc, ApiException) or exc.status != 404:
        return None
    details = _status_body(exc).get("details") or {}
    if details.get("kind") == "namespaces" and details.get("name"):
        return str(details["name"])
    return None


def classify(exc: BaseException) -> KubeError | None:
    """The KubeError for an exception from the kubernetes client, or None when it is not an API failure."""
    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, ApiException):
        status = exc.status or 0
        message = _api_message(exc)
        if status == 0:
            return TransientKubeError(CLUSTER_UNREACHABLE, message)
        namespace = missing_namespace(exc)
        if namespace:
            return TransientKubeError(NAMESPACE_NOT_FOUND, f'namespace "{namespace}" does not exist', status)
        if status == 429:
            return TransientKubeError(THROTTLED, message, status)
        if status >= 500:
            return TransientKubeError(SERVER_ERROR, f"{status} {message}", status)
        if status == 403:
            return TransientKubeError(FORBIDDEN, message, status)
        if status == 401:
            return TransientKubeError(UNAUTHORIZED, message, status)
        if status in (400, 422):
            return TerminalKubeError(INVALID, message, status)
        return TerminalKubeError(REJECTED, f"{status} {message}", status)
    if isinstance(exc, CONNECTION_ERRORS):
        return TransientKubeError(CLUSTER_UNREACHABLE, f"{type(exc).__name__}: {exc}"[:500])
    return None


def status_of(exc: BaseException) -> int | None:
    """HTTP status of an ApiException (404, 409, ...), else None."""
    return exc.status if isinstance(exc, ApiException) else None


def call(fn, *args, **kwargs):
    """Call a kubernetes client function; raise its failure as a KubeError (404/409 stay ApiException, because
    callers handle them as answers, except a 404 for a missing namespace: NamespaceNotFound)."""
    try:
        return fn(*args, **kwargs)
    except ApiException as exc:
        if exc.status in (404, 409) and not missing_namespace(exc):
            raise
        raise classify(exc) from exc
    except CONNECTION_ERRORS as exc:
        raise classify(exc) from exc
